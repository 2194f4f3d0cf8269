import { useQuery } from "@tanstack/react-query";
import { abortable, api, errorText, type DayDto } from "../../api";
import { keys } from "../../queries";
import { useT } from "../../i18n";

function Bars({ title, days, value }: { title: string; days: DayDto[]; value: (d: DayDto) => number }) {
  const max = Math.max(1, ...days.map(value));
  const total = days.reduce((a, d) => a + value(d), 0);
  const { t, num } = useT();
  return (
    <div className="card">
      <div className="row small">
        <strong>{title}</strong>
        <span className="muted">
          {t("insights.inDays", { total: num(total), count: days.length })}
        </span>
      </div>
      {days.length === 0 ? (
        <div className="small muted">{t("insights.nothingYet")}</div>
      ) : (
        <div className="bars" role="img" aria-label={title}>
          {days.map((d) => (
            <div key={d.day} style={{ height: `${(100 * value(d)) / max}%` }} title={`${d.day}: ${num(value(d))}`} />
          ))}
        </div>
      )}
    </div>
  );
}

/** Tokens spent, notes and links per day, Box sizes, top tags. */
export default function InsightsView() {
  const { t, num } = useT();
  const insights = useQuery({ queryKey: keys.insights(), queryFn: ({ signal }) => abortable(api.insights(), signal) });
  const status = useQuery({ queryKey: keys.status(), queryFn: ({ signal }) => abortable(api.appStatus(), signal) });
  const d = insights.data;
  const openedMs = status.data?.opened_ms ?? null;
  const failed = insights.error ?? status.error;
  if (failed) return <div className="view error">{errorText(failed)}</div>;
  if (!d) return <div className="view">{t("common.loading")}</div>;
  const maxBox = Math.max(1, ...d.boxes.map((b) => b.size));
  return (
    <div className="view" data-testid="insights">
      <h2>{t("insights.title")}</h2>
      <div style={{ display: "grid", gridTemplateColumns: "repeat(auto-fit, minmax(300px, 1fr))", gap: 12 }}>
        <Bars title={t("insights.tokens")} days={d.tokens_per_day} value={(x) => x.tokens} />
        <Bars title={t("insights.notes")} days={d.notes_per_day} value={(x) => x.n} />
        <Bars title={t("insights.links")} days={d.links_per_day} value={(x) => x.n} />
        <div className="card">
          <strong className="small">{t("insights.boxSizes")}</strong>
          {d.boxes.length === 0 && <div className="small muted">{t("insights.noBoxes")}</div>}
          {d.boxes.map((b) => (
            <div key={b.id} className="row small">
              <span translate="no" style={{ width: 140, overflow: "hidden", textOverflow: "ellipsis", whiteSpace: "nowrap" }}>{b.label}</span>
              <div style={{ background: "var(--accent)", height: 8, width: `${(60 * b.size) / maxBox}%` }} />
              <span className="muted">{num(b.size)}</span>
            </div>
          ))}
        </div>
        <div className="card">
          <strong className="small">{t("insights.topTags")}</strong>
          <div translate="no">
            {d.top_tags.map((t) => (
              <span key={t.tag} className="chip">
                #{t.tag} {t.n}
              </span>
            ))}
          </div>
        </div>
      </div>
      <p className="small muted">{t("insights.total", { count: d.total_notes })}</p>
      {openedMs != null && (
        <p className="small muted" data-testid="opened-ms" title={t("insights.openedTitle")}>
          {t("insights.opened", { ms: String(openedMs) })}
        </p>
      )}
    </div>
  );
}
