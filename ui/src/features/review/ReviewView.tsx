import { useCallback, useEffect, useId, useState } from "react";
import { api, errorText, type EventDto, type ReviewItemDto } from "../../api";
import { useApp } from "../../app-context";
import Changes from "../../components/Changes";
import Diff from "../../components/Diff";
import Empty from "../../components/Empty";

const PAGE = 50;
const list = (s: string) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

function Item({ it, onDone }: { it: ReviewItemDto; onDone: (msg: string) => void }) {
  const { openNote } = useApp();
  const [editing, setEditing] = useState(false);
  const fieldId = useId();
  const [form, setForm] = useState({ keywords: "", tags: "", context: "" });
  const [err, setErr] = useState<string | null>(null);
  const act = async (f: () => Promise<unknown>, msg: string) => {
    try {
      await f();
      setErr(null);
      onDone(msg);
    } catch (e) {
      setErr(errorText(e));
    }
  };
  const waiting = it.status === "proposed" || it.status === "applied";
  return (
    <li className="card" data-testid="review-item" data-id={it.id} data-kind={it.kind} data-status={it.status} style={{ cursor: "default" }}>
      <div className="row small">
        <span className="chip">{it.kind === "link" ? `link: ${it.label}` : `edit: ${it.label}`}</span>
        <span className={`badge ${it.status}`}>{it.status === "applied" ? "applied, not reviewed" : it.status}</span>
        {it.confidence != null && <span className="muted">confidence {it.confidence.toFixed(2)}</span>}
        <span className="muted">{new Date(it.created_at).toLocaleString()}</span>
      </div>
      <div style={{ margin: "4px 0" }}>
        <button className="citation" onClick={() => openNote(it.note)} title="Open the note">
          {it.note_preview}
        </button>
        {it.target && (
          <>
            {" "}
            →{" "}
            <button className="citation" onClick={() => openNote(it.target ?? "")} title="Open the note">
              {it.target_preview}
            </button>
          </>
        )}
      </div>
      {it.changes.length > 0 ? (
        <Changes changes={it.changes} />
      ) : (
        it.reason && <div className="small muted">why: {it.reason}</div>
      )}
      {it.kind === "edit" && <Diff before={it.before} after={it.after} />}
      {editing && (
        <div style={{ marginTop: 6 }}>
          <div className="field">
            <label htmlFor={`${fieldId}-keywords`}>keywords</label>
            <input id={`${fieldId}-keywords`} value={form.keywords} onChange={(e) => setForm({ ...form, keywords: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor={`${fieldId}-tags`}>tags</label>
            <input id={`${fieldId}-tags`} value={form.tags} onChange={(e) => setForm({ ...form, tags: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor={`${fieldId}-context`}>context</label>
            <textarea id={`${fieldId}-context`} rows={2} value={form.context} onChange={(e) => setForm({ ...form, context: e.target.value })} />
          </div>
        </div>
      )}
      <div className="row" style={{ marginTop: 6 }}>
        {waiting && (
          <button
            className="primary"
            data-testid="review-accept"
            onClick={() =>
              void act(
                () =>
                  api.accept(
                    it.id,
                    editing ? { keywords: list(form.keywords), tags: list(form.tags), context: form.context } : null,
                  ),
                editing ? "Edited and accepted" : "Accepted",
              )
            }
          >
            {editing ? "Accept edited" : "Accept"}
          </button>
        )}
        {waiting && (
          <button data-testid="review-reject" onClick={() => void act(() => api.reject(it.id), "Rejected")}>
            Reject
          </button>
        )}
        {waiting && it.kind === "edit" && !editing && it.status === "proposed" && (
          <button
            onClick={() => {
              setForm({
                keywords: (it.after?.keywords ?? []).join(", "),
                tags: (it.after?.tags ?? []).join(", "),
                context: it.after?.context ?? "",
              });
              setEditing(true);
            }}
          >
            Edit
          </button>
        )}
        {(it.status === "applied" || it.status === "accepted") && (
          <button data-testid="rollback" onClick={() => void act(() => api.rollback(it.id), "Rolled back")}>
            Roll back
          </button>
        )}
        {it.event && (
          <button className="small" title="Everything this note's enrichment did" onClick={() => void act(() => api.rollback(it.event ?? ""), "Whole event rolled back")}>
            Roll back the whole event
          </button>
        )}
      </div>
      {err && <div className="error small">{err}</div>}
    </li>
  );
}

/** The review queue and the event log. */
export default function ReviewView() {
  const { revision, bump, toast, openNote } = useApp();
  const [tab, setTab] = useState<"queue" | "events">("queue");
  const [status, setStatus] = useState("waiting");
  const [items, setItems] = useState<ReviewItemDto[] | null>(null);
  const [more, setMore] = useState(false);
  const [events, setEvents] = useState<EventDto[]>([]);
  const [minConf, setMinConf] = useState(0.8);
  const [err, setErr] = useState<string | null>(null);

  const statuses = status === "waiting" ? [] : [status];
  const key = JSON.stringify(statuses);
  const load = useCallback(() => {
    api
      .reviewQueue(JSON.parse(key), 0, PAGE)
      .then((p) => {
        setItems(p.items);
        setMore(p.more);
        setErr(null);
      })
      .catch((e) => setErr(errorText(e)));
    api
      .listEvents(50)
      .then(setEvents)
      .catch((e) => setErr(`Cannot list the events: ${errorText(e)}`));
  }, [key]);
  useEffect(() => load(), [load, revision]);

  const done = (msg: string) => {
    toast(msg);
    bump();
  };

  return (
    <div className="view">
      <div className="row" style={{ marginBottom: 10 }}>
        <h2 style={{ margin: 0 }}>Review</h2>
        <button className={tab === "queue" ? "primary" : ""} onClick={() => setTab("queue")}>
          Queue
        </button>
        <button className={tab === "events" ? "primary" : ""} onClick={() => setTab("events")}>
          Events
        </button>
        <span className="grow" />
        {tab === "queue" && (
          <>
            <select value={status} onChange={(e) => setStatus(e.target.value)} aria-label="Status">
              <option value="waiting">waiting for review</option>
              <option value="proposed">proposed (held)</option>
              <option value="applied">applied, not reviewed</option>
              <option value="accepted">accepted</option>
              <option value="rejected">rejected</option>
              <option value="rolled_back">rolled back</option>
            </select>
            <label className="small">
              accept all links with confidence ≥{" "}
              <input
                type="number"
                min={0}
                max={1}
                step={0.05}
                style={{ width: 70 }}
                value={minConf}
                onChange={(e) => setMinConf(Number(e.target.value))}
                aria-label="Minimum confidence"
              />
            </label>
            <button
              data-testid="bulk-accept"
              onClick={() =>
                api
                  .bulkAccept(minConf)
                  .then((r) => done(`Accepted ${r.accepted} link(s)${r.failed.length ? `; ${r.failed.length} could not be` : ""}`))
                  .catch((e) => toast(errorText(e)))
              }
            >
              Accept
            </button>
          </>
        )}
      </div>
      {err && <div className="error">{err}</div>}
      {tab === "queue" ? (
        items && items.length === 0 ? (
          <Empty title="Nothing waits for review.">
            Every link and edit the LLM makes lands here with its reason and a before/after diff. Accept it, reject it,
            adjust it, or roll it back — nothing the LLM does is final. Under Settings → review policy “review”, changes
            are held here until you accept them.
          </Empty>
        ) : (
          <ul className="list" data-testid="review-list">
            {items?.map((it) => (
              <Item key={it.id} it={it} onDone={done} />
            ))}
            {more && <li className="small muted">More items follow: act on these first or filter by status.</li>}
          </ul>
        )
      ) : events.length === 0 ? (
        <Empty title="No enrichment has run yet.">Each enriched note makes one event: its links, the edits to its neighbours, the tokens it cost. Rolling back an event undoes all of it at once.</Empty>
      ) : (
        <ul className="list" data-testid="event-list">
          {events.map((ev) => (
            <li key={ev.id} className="card" data-testid="event-item" style={{ cursor: "default" }}>
              <div className="row small muted">
                <span>{new Date(ev.created_at).toLocaleString()}</span>
                <span>{ev.model}</span>
                <span>
                  {ev.links} links · {ev.revisions} edits · {ev.tokens} tokens
                  {ev.dropped ? ` · ${ev.dropped} dropped` : ""}
                </span>
              </div>
              <button className="citation" onClick={() => openNote(ev.note)}>
                {ev.note_preview}
              </button>
              <div className="row" style={{ marginTop: 4 }}>
                <button onClick={() => api.rollback(ev.id).then(() => done("Event rolled back")).catch((e) => toast(errorText(e)))}>Roll back everything it did</button>
                <button onClick={() => api.reapply(ev.id).then(() => done("Event applied again")).catch((e) => toast(errorText(e)))}>Re-apply</button>
              </div>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
