import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { abortable, api, errorText, type HistoryDto, type NoteDetailDto } from "../../api";
import { useApp } from "../../app-context";
import { keys, useChanged, type Change } from "../../queries";
import Changes from "../../components/Changes";
import Diff from "../../components/Diff";
import { EnrichBadge } from "./NoteItem";
import LinkEditor from "../links/LinkEditor";
import TextDiff from "../links/TextDiff";
import NoteLifecycle from "../fading/StrengthBar";
import { useT } from "../../i18n";
import { useDay } from "../../components/AsOf";
import { ACTION } from "../../states";

const list = (s: string) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

/** Entries whose change is still in force can be rolled back. */
function canRollBack(h: HistoryDto): boolean {
  return !!h.id && (h.status === "applied" || h.status === "accepted" || h.action === ACTION.link);
}

/** A note: content (as text), annotations, links, and its history with rollback. */
export default function NoteDetail({ id }: { id: string }) {
  const { openNote, go, setGraphFocus, toast } = useApp();
  const changed = useChanged();
  const { t, w, num, date } = useT();
  const day = useDay();
  const [editing, setEditing] = useState(false);
  const [form, setForm] = useState({ keywords: "", tags: "", context: "" });
  const [draft, setDraft] = useState<string | null>(null);

  const q = useQuery({ queryKey: keys.note(id), queryFn: ({ signal }) => abortable(api.getNote(id), signal) });
  const d = q.data;

  // an error (the note was deleted) replaces the note until it can be read again
  if (q.error) return <div className="card error">{errorText(q.error)}</div>;
  if (!d) return <div className="card muted">{t("common.loading")}</div>;
  const n = d.note;

  const act = async (f: () => Promise<unknown>, done: string, change: Change) => {
    try {
      await f();
      toast(done);
      changed(change);
    } catch (e) {
      toast(errorText(e));
    }
  };

  return (
    <div className="card" data-testid="note-detail" data-id={n.id} data-enrich={n.enrich}>
      <div className="row small muted">
        <span>{date(n.created_at)}</span>
        <EnrichBadge note={n} />
        {n.source && (
          <span>
            {t("detail.from")} <span translate="no">{n.source}</span>
          </span>
        )}
        <span className="grow" />
        <button
          onClick={() => {
            setGraphFocus({ center: n.id, depth: 1, boxId: null });
            go("graph");
          }}
        >
          {t("detail.showInGraph")}
        </button>
        <button className="danger" onClick={() => void act(() => api.deleteNote(n.id), t("detail.deleted"), { kind: "noteDeleted", id: n.id })}>
          {t("common.delete")}
        </button>
      </div>
      <NoteLifecycle id={n.id} />
      {draft === null ? (
        <>
          <p className="content" data-testid="note-content" translate="no">
            {n.content}
          </p>
          <button className="small" data-testid="note-edit" onClick={() => setDraft(n.content)}>
            {t("detail.editText")}
          </button>
        </>
      ) : (
        <div>
          <textarea
            data-testid="note-edit-input"
            aria-label={t("detail.textLabel")}
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
                void act(() => api.editContent(n.id, draft), t("detail.textSaved"), { kind: "noteText", id: n.id }).then(() =>
                  setDraft(null),
                )
              }
            >
              {t("detail.saveText")}
            </button>
            <button data-testid="note-edit-cancel" onClick={() => setDraft(null)}>
              {t("common.cancel")}
            </button>
          </div>
        </div>
      )}
      {n.enrich !== "done" && n.enrich_error && <p className="small warning" translate="no">{n.enrich_error}</p>}
      <Validity d={d} day={day} />
      {!editing ? (
        <div>
          <div>
            <span className="muted small">{t("detail.keywords")} </span>
            {n.keywords.length ? n.keywords.map((k) => <span className="chip" key={k} translate="no">{k}</span>) : <span className="muted small">—</span>}
          </div>
          <div>
            <span className="muted small">{t("detail.tags")} </span>
            {n.tags.length ? n.tags.map((k) => <span className="chip" key={k} translate="no">#{k}</span>) : <span className="muted small">—</span>}
          </div>
          <div>
            <span className="muted small">{t("detail.context")} </span>
            <span data-testid="note-context" translate="no">{n.context || "—"}</span>
          </div>
          <button
            className="small"
            style={{ marginTop: 6 }}
            onClick={() => {
              setForm({ keywords: n.keywords.join(", "), tags: n.tags.join(", "), context: n.context });
              setEditing(true);
            }}
          >
            {t("detail.editAnnotations")}
          </button>
        </div>
      ) : (
        <div>
          <div className="field">
            <label htmlFor="ed-kw">{t("detail.keywords")}</label>
            <input id="ed-kw" value={form.keywords} onChange={(e) => setForm({ ...form, keywords: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor="ed-tags">{t("detail.tags")}</label>
            <input id="ed-tags" value={form.tags} onChange={(e) => setForm({ ...form, tags: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor="ed-ctx">{t("detail.context")}</label>
            <textarea id="ed-ctx" rows={2} value={form.context} onChange={(e) => setForm({ ...form, context: e.target.value })} />
          </div>
          <div className="row">
            <button
              className="primary"
              onClick={() =>
                void act(
                  () => api.editNote(n.id, { keywords: list(form.keywords), tags: list(form.tags), context: form.context }),
                  t("detail.annotationsSaved"),
                  { kind: "noteFields", id: n.id },
                ).then(() => setEditing(false))
              }
            >
              {t("common.save")}
            </button>
            <button onClick={() => setEditing(false)}>{t("common.cancel")}</button>
          </div>
        </div>
      )}

      <div className="row">
        <h3 className="grow" style={{ fontSize: 14, marginBottom: 4 }}>
          {t("detail.links", { count: d.links.length })}
        </h3>
        <LinkEditor noteId={n.id} onLinked={(to) => { toast(t("detail.linked")); changed({ kind: "linked", notes: [n.id, to] }); }} />
      </div>
      {d.links.length === 0 ? (
        <div className="small muted">
          {n.enrich === "done" ? t("detail.noLinksDone") : t("detail.noLinksYet")}
        </div>
      ) : (
        <ul className="list" data-testid="link-list">
          {d.links.map((l, i) => {
            const other = l.from === n.id ? l.to : l.from;
            return (
              <li key={`${l.from}-${l.to}-${l.kind}`} className="small" data-testid="link-item" data-status={l.status} onClick={() => openNote(other)}>
                <span className="chip">{w("kind", l.kind)}</span>
                <span className={`badge ${l.status}`}>{w("status", l.status)}</span> {l.from === n.id ? "→" : "←"}{" "}
                <span className="content" translate="no">
                  {l.other_preview}
                </span>
                <div className="row muted">
                  <span className="grow">
                    <span translate="no">{l.reason}</span>
                    {t("detail.linkMeta", { confidence: num(l.confidence ?? 0, 2), by: w("actor", l.created_by) })}
                  </span>
                  {l.status === "accepted" && (
                    <button
                      className="small"
                      data-testid={`link-remove-${i}`}
                      title={t("detail.removeLinkTitle")}
                      onClick={(e) => {
                        e.stopPropagation();
                        void act(() => api.unlinkNotes(l.from, l.to, l.kind), t("detail.linkRemoved"), { kind: "linked", notes: [l.from, l.to] });
                      }}
                    >
                      {t("detail.remove")}
                    </button>
                  )}
                </div>
              </li>
            );
          })}
        </ul>
      )}

      <h3 style={{ fontSize: 14, marginBottom: 4 }}>{t("detail.history")}</h3>
      <ol className="list">
        {d.history.map((h, i) => (
          <li key={`${h.id ?? "c"}-${i}`} className="small" data-testid="history-item" data-action={h.action} data-status={h.status ?? ""} style={{ cursor: "default" }}>
            <div className="row">
              <span className="muted">{date(h.at)}</span>
              <strong>{w("action", h.action)}</strong>
              <span className="muted">{t("detail.by", { actor: w("actor", h.actor) })}</span>
              {h.status && <span className={`badge ${h.status}`}>{w("status", h.status)}</span>}
              <span className="grow" />
              {h.action === ACTION.unlink && h.id && (
                <button data-testid="reapply-link" onClick={() => void act(() => api.reviewReapply(h.id ?? ""), t("detail.linkRestored"), { kind: "reviewed" })}>
                  {t("detail.restoreLink")}
                </button>
              )}
              {canRollBack(h) && (
                <button data-testid="rollback" onClick={() => void act(() => api.reviewRollback(h.id ?? ""), t("detail.rolledBack"), { kind: "reviewed" })}>
                  {t("detail.rollBackChange")}
                </button>
              )}
            </div>
            {h.changes.length > 0 ? (
              <Changes changes={h.changes} />
            ) : (
              h.reason && h.reason !== h.action && (
                <div className="muted" translate="no">
                  {h.reason}
                </div>
              )
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

/**
 * When the note's fact was true ("valid from … until …"), the note that replaced it
 * ("superseded by … since …") and the notes it replaced, each opening that note.
 */
function Validity({ d, day }: { d: NoteDetailDto; day: (iso: string) => string }) {
  const { openNote } = useApp();
  const { t } = useT();
  const v = d.validity;
  return (
    <div className="small" style={{ margin: "4px 0" }}>
      <div className="muted" data-testid="note-validity" data-from={v.valid_from} data-until={v.valid_until ?? ""}>
        {v.valid_until
          ? t("validity.fromUntil", { from: day(v.valid_from), until: day(v.valid_until) })
          : t("validity.from", { from: day(v.valid_from) })}
      </div>
      {v.superseded_by && (
        <div className="warning" data-testid="note-superseded-by" data-id={v.superseded_by.id} data-since={v.superseded_by.since}>
          {t("validity.supersededBy")}{" "}
          <button className="citation" data-testid="note-successor" title={t("validity.openNote")} onClick={() => openNote(v.superseded_by?.id ?? "")} translate="no">
            {v.superseded_by.preview || v.superseded_by.id}
          </button>{" "}
          {t("validity.since", { day: day(v.superseded_by.since) })}{" "}
          <span className="muted" translate="no">
            ({v.superseded_by.reason})
          </span>
        </div>
      )}
      {v.replaces.length > 0 && (
        <div data-testid="note-replaces">
          {t("validity.replaces")}{" "}
          {v.replaces.map((r) => (
            <span key={r.id} style={{ marginRight: 6 }}>
              <button className="citation" data-testid="note-predecessor" data-id={r.id} title={t("validity.openNote")} onClick={() => openNote(r.id)} translate="no">
                {r.preview || r.id}
              </button>{" "}
              <span className="muted" translate="no">
                ({r.reason})
              </span>
            </span>
          ))}
        </div>
      )}
    </div>
  );
}
