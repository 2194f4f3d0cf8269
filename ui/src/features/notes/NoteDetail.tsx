import { useCallback, useEffect, useState } from "react";
import { api, errorText, type HistoryDto, type NoteDetailDto } from "../../api";
import { useApp } from "../../app-context";
import Changes from "../../components/Changes";
import Diff from "../../components/Diff";
import { EnrichBadge } from "./NoteItem";
import LinkEditor from "../links/LinkEditor";
import TextDiff from "../links/TextDiff";
import NoteLifecycle from "../fading/StrengthBar";

const list = (s: string) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

/** Entries whose change is still in force can be rolled back. */
function canRollBack(h: HistoryDto): boolean {
  return !!h.id && (h.status === "applied" || h.status === "accepted" || h.action === "link");
}

/** A note: content (as text), annotations, links, and its history with rollback. */
export default function NoteDetail({ id }: { id: string }) {
  const { openNote, revision, bump, go, setGraphFocus, toast } = useApp();
  const [d, setD] = useState<NoteDetailDto | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [editing, setEditing] = useState(false);
  const [form, setForm] = useState({ keywords: "", tags: "", context: "" });
  const [draft, setDraft] = useState<string | null>(null);

  const load = useCallback(() => {
    api
      .getNote(id)
      .then((x) => {
        setD(x);
        setErr(null);
      })
      .catch((e) => setErr(errorText(e)));
  }, [id]);

  useEffect(() => load(), [load, revision]);

  if (err) return <div className="card error">{err}</div>;
  if (!d) return <div className="card muted">Loading…</div>;
  const n = d.note;

  const act = async (f: () => Promise<unknown>, done: string) => {
    try {
      await f();
      toast(done);
      bump();
    } catch (e) {
      toast(errorText(e));
    }
  };

  return (
    <div className="card" data-testid="note-detail" data-id={n.id} data-enrich={n.enrich}>
      <div className="row small muted">
        <span>{new Date(n.created_at).toLocaleString()}</span>
        <EnrichBadge note={n} />
        {n.source && <span>from {n.source}</span>}
        <span className="grow" />
        <button
          onClick={() => {
            setGraphFocus({ center: n.id, depth: 1, boxId: null });
            go("graph");
          }}
        >
          Show in graph
        </button>
        <button className="danger" onClick={() => void act(() => api.deleteNote(n.id), "Note deleted")}>
          Delete
        </button>
      </div>
      <NoteLifecycle id={n.id} />
      {draft === null ? (
        <>
          <p className="content" data-testid="note-content">
            {n.content}
          </p>
          <button className="small" data-testid="note-edit" onClick={() => setDraft(n.content)}>
            Edit text
          </button>
        </>
      ) : (
        <div>
          <textarea
            data-testid="note-edit-input"
            aria-label="Note text"
            rows={Math.min(12, Math.max(3, draft.split("\n").length + 1))}
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
          />
          <div className="row">
            <button
              className="primary"
              data-testid="note-edit-save"
              disabled={!draft.trim() || draft === n.content}
              onClick={() =>
                void act(() => api.editContent(n.id, draft), "Text saved (a new revision; the LLM looks at it again)").then(() =>
                  setDraft(null),
                )
              }
            >
              Save text
            </button>
            <button data-testid="note-edit-cancel" onClick={() => setDraft(null)}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {n.enrich !== "done" && n.enrich_error && <p className="small warning">{n.enrich_error}</p>}
      {!editing ? (
        <div>
          <div>
            <span className="muted small">keywords </span>
            {n.keywords.length ? n.keywords.map((k) => <span className="chip" key={k}>{k}</span>) : <span className="muted small">—</span>}
          </div>
          <div>
            <span className="muted small">tags </span>
            {n.tags.length ? n.tags.map((k) => <span className="chip" key={k}>#{k}</span>) : <span className="muted small">—</span>}
          </div>
          <div>
            <span className="muted small">context </span>
            <span data-testid="note-context">{n.context || "—"}</span>
          </div>
          <button
            className="small"
            style={{ marginTop: 6 }}
            onClick={() => {
              setForm({ keywords: n.keywords.join(", "), tags: n.tags.join(", "), context: n.context });
              setEditing(true);
            }}
          >
            Edit annotations
          </button>
        </div>
      ) : (
        <div>
          <div className="field">
            <label htmlFor="ed-kw">keywords</label>
            <input id="ed-kw" value={form.keywords} onChange={(e) => setForm({ ...form, keywords: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor="ed-tags">tags</label>
            <input id="ed-tags" value={form.tags} onChange={(e) => setForm({ ...form, tags: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor="ed-ctx">context</label>
            <textarea id="ed-ctx" rows={2} value={form.context} onChange={(e) => setForm({ ...form, context: e.target.value })} />
          </div>
          <div className="row">
            <button
              className="primary"
              onClick={() =>
                void act(
                  () => api.editNote(n.id, { keywords: list(form.keywords), tags: list(form.tags), context: form.context }),
                  "Annotations saved (a new revision)",
                ).then(() => setEditing(false))
              }
            >
              Save
            </button>
            <button onClick={() => setEditing(false)}>Cancel</button>
          </div>
        </div>
      )}

      <div className="row">
        <h3 className="grow" style={{ fontSize: 14, marginBottom: 4 }}>
          Links ({d.links.length})
        </h3>
        <LinkEditor noteId={n.id} onLinked={() => { toast("Linked"); bump(); }} />
      </div>
      {d.links.length === 0 ? (
        <div className="small muted">
          {n.enrich === "done" ? "The LLM found no related note for this one." : "Links appear once the LLM has seen this note."}
        </div>
      ) : (
        <ul className="list" data-testid="link-list">
          {d.links.map((l, i) => {
            const other = l.from === n.id ? l.to : l.from;
            return (
              <li key={`${l.from}-${l.to}-${l.kind}`} className="small" data-testid="link-item" data-status={l.status} onClick={() => openNote(other)}>
                <span className="chip">{l.kind}</span>
                <span className={`badge ${l.status}`}>{l.status}</span> {l.from === n.id ? "→" : "←"}{" "}
                <span className="content">{l.other_preview}</span>
                <div className="row muted">
                  <span className="grow">
                    {l.reason} · confidence {(l.confidence ?? 0).toFixed(2)} · by {l.created_by}
                  </span>
                  {l.status === "accepted" && (
                    <button
                      className="small"
                      data-testid={`link-remove-${i}`}
                      title="Remove this link (it stays in history and can be re-applied)"
                      onClick={(e) => {
                        e.stopPropagation();
                        void act(() => api.unlinkNotes(l.from, l.to, l.kind), "Link removed");
                      }}
                    >
                      Remove
                    </button>
                  )}
                </div>
              </li>
            );
          })}
        </ul>
      )}

      <h3 style={{ fontSize: 14, marginBottom: 4 }}>History</h3>
      <ol className="list">
        {d.history.map((h, i) => (
          <li key={`${h.id ?? "c"}-${i}`} className="small" data-testid="history-item" data-action={h.action} data-status={h.status ?? ""} style={{ cursor: "default" }}>
            <div className="row">
              <span className="muted">{new Date(h.at).toLocaleString()}</span>
              <strong>{h.action}</strong>
              <span className="muted">by {h.actor}</span>
              {h.status && <span className={`badge ${h.status}`}>{h.status}</span>}
              <span className="grow" />
              {h.action === "unlink" && h.id && (
                <button data-testid="reapply-link" onClick={() => void act(() => api.reapply(h.id ?? ""), "Link restored")}>
                  Restore the link
                </button>
              )}
              {canRollBack(h) && (
                <button data-testid="rollback" onClick={() => void act(() => api.rollback(h.id ?? ""), "Rolled back")}>
                  Roll back this change
                </button>
              )}
            </div>
            {h.changes.length > 0 ? (
              <Changes changes={h.changes} />
            ) : (
              h.reason && h.reason !== h.action && <div className="muted">{h.reason}</div>
            )}
            {h.content_before != null && h.content_after != null ? (
              <TextDiff before={h.content_before} after={h.content_after} />
            ) : (
              <Diff before={h.before} after={h.after} />
            )}
          </li>
        ))}
      </ol>
    </div>
  );
}
