import { useEffect, useState } from "react";
import { api, errorText, type DayDto, type InsightsDto } from "../../api";
import { useApp } from "../../app-context";

function Bars({ title, days, value }: { title: string; days: DayDto[]; value: (d: DayDto) => number }) {
  const max = Math.max(1, ...days.map(value));
  const total = days.reduce((a, d) => a + value(d), 0);
  return (
    <div className="card">
      <div className="row small">
        <strong>{title}</strong>
        <span className="muted">
          {total} in {days.length} day(s)
        </span>
      </div>
      {days.length === 0 ? (
        <div className="small muted">nothing yet</div>
      ) : (
        <div className="bars" role="img" aria-label={title}>
          {days.map((d) => (
            <div key={d.day} style={{ height: `${(100 * value(d)) / max}%` }} title={`${d.day}: ${value(d)}`} />
          ))}
        </div>
      )}
    </div>
  );
}

/** Tokens spent, notes and links per day, Box sizes, top tags. */
export default function InsightsView() {
  const { revision } = useApp();
  const [d, setD] = useState<InsightsDto | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [openedMs, setOpenedMs] = useState<number | null>(null);
  useEffect(() => {
    api
      .insights()
      .then(setD)
      .catch((e) => setErr(errorText(e)));
    api
      .status()
      .then((s) => setOpenedMs(s.opened_ms))
      .catch((e) => setErr(errorText(e)));
  }, [revision]);
  if (err) return <div className="view error">{err}</div>;
  if (!d) return <div className="view">Loading…</div>;
  const maxBox = Math.max(1, ...d.boxes.map((b) => b.size));
  return (
    <div className="view" data-testid="insights">
      <h2>Insights</h2>
      <div style={{ display: "grid", gridTemplateColumns: "repeat(auto-fit, minmax(300px, 1fr))", gap: 12 }}>
        <Bars title="LLM tokens per day" days={d.tokens_per_day} value={(x) => x.tokens} />
        <Bars title="Notes per day" days={d.notes_per_day} value={(x) => x.n} />
        <Bars title="Links per day" days={d.links_per_day} value={(x) => x.n} />
        <div className="card">
          <strong className="small">Box sizes</strong>
          {d.boxes.length === 0 && <div className="small muted">no Boxes yet</div>}
          {d.boxes.map((b) => (
            <div key={b.id} className="row small">
              <span style={{ width: 140, overflow: "hidden", textOverflow: "ellipsis", whiteSpace: "nowrap" }}>{b.label}</span>
              <div style={{ background: "var(--accent)", height: 8, width: `${(60 * b.size) / maxBox}%` }} />
              <span className="muted">{b.size}</span>
            </div>
          ))}
        </div>
        <div className="card">
          <strong className="small">Top tags</strong>
          <div>
            {d.top_tags.map((t) => (
              <span key={t.tag} className="chip">
                #{t.tag} {t.n}
              </span>
            ))}
          </div>
        </div>
      </div>
      <p className="small muted">{d.total_notes} notes in memory; the last 90 days are charted.</p>
      {openedMs != null && (
        <p className="small muted" data-testid="opened-ms" title="from the start of the process until the memory was open">
          This session opened the memory in {openedMs} ms.
        </p>
      )}
    </div>
  );
}
