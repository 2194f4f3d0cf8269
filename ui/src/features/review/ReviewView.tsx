import { useId, useState } from "react";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { abortable, api, errorText, type ReviewItemDto, type ReviewStatus } from "../../api";
import { useApp } from "../../app-context";
import { keys, useChanged } from "../../queries";
import Changes from "../../components/Changes";
import Diff from "../../components/Diff";
import Empty from "../../components/Empty";
import { useT, type Key } from "../../i18n";
import { AGENT_PREFIX, BY, REVIEW_STATUSES, wordOf } from "../../states";
import { SUPERSEDES_KIND } from "../graph/graphStyle";
import { useDay } from "../../components/AsOf";

const PAGE = 50;

/** The status filter's words for each review status. */
const STATUS_CHOICE = {
  proposed: "review.proposedHeld",
  applied: "review.appliedNotReviewed",
  accepted: "status.accepted",
  rejected: "status.rejected",
  rolled_back: "status.rolled_back",
} as const satisfies Record<ReviewStatus, Key>;

/** Who made a queue item, in words: the LLM, merge on write, or an agent by its name. */
function useMaker() {
  const { t } = useT();
  return (by: string) => {
    if (by === BY.llm) return t("review.byLlm");
    if (by === BY.merge) return t("review.byMerge");
    if (by === BY.agent) return t("review.byAgents");
    if (by.startsWith(AGENT_PREFIX)) return t("review.byAgent", { name: by.slice(AGENT_PREFIX.length) });
    return by;
  };
}
const list = (s: string) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

/**
 * A supersession proposal: the older note beside the newer one (each with the day its value
 * took effect), what changed, and three choices: the newer replaces the older (accept),
 * both stay true (no conflict: removed, the pair never proposed again), or reject.
 */
function Supersession({ it, onDone }: { it: ReviewItemDto; onDone: (msg: string) => void }) {
  const { openNote } = useApp();
  const { t, w, date } = useT();
  const day = useDay();
  const maker = useMaker();
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
  // the link runs from the newer note (`note`) to the older one (`target`)
  const side = (which: "older" | "newer", id: string, preview: string, validFrom: string | null) => (
    <div className="card" data-testid={`supersession-${which}`} data-id={id} style={{ flex: 1, margin: 0, cursor: "default" }}>
      <div className="small muted">
        {t(which === "older" ? "review.older" : "review.newer")}
        {validFrom && <span data-testid={`supersession-${which}-from`}> · {t("review.validFrom", { day: day(validFrom) })}</span>}
      </div>
      <button className="citation" style={{ textAlign: "left" }} onClick={() => openNote(id)} title={t("common.openNote")} translate="no">
        {preview}
      </button>
    </div>
  );
  return (
    <li className="card" data-testid="review-item" data-id={it.id} data-kind={it.kind} data-status={it.status} style={{ cursor: "default" }}>
      <div data-testid="supersession-proposal" data-id={it.id}>
        <div className="row small">
          <span className="chip">{t("review.linkLabel", { label: w("kind", it.label) })}</span>
          <strong>{t("review.supersession")}</strong>
          <span className={`badge ${it.status}`}>{it.status === "applied" ? t("review.appliedNotReviewed") : w("status", it.status)}</span>
          {it.by && (
            <span className="muted" data-testid="review-item-by" data-by={it.by} translate="no">
              {t("review.madeBy", { maker: maker(it.by) })}
            </span>
          )}
          <span className="muted">{date(it.created_at)}</span>
        </div>
        <div className="row" style={{ margin: "6px 0", alignItems: "stretch" }}>
          {side("older", it.target ?? "", it.target_preview ?? "", it.target_valid_from)}
          <span style={{ alignSelf: "center" }}>→</span>
          {side("newer", it.note, it.note_preview, it.note_valid_from)}
        </div>
        {it.reason && (
          // the reason names the user's own values (left out of the language check)
          <div className="small" data-testid="supersession-reason" translate="no">
            {t("review.changed", { reason: it.reason })}
          </div>
        )}
        {waiting && (
          <div className="row" style={{ marginTop: 6 }}>
            <button
              className="primary"
              data-testid="review-replace"
              title={t("review.replaceTitle")}
              onClick={() => void act(() => api.reviewAccept(it.id, null), t("review.replaced"))}
            >
              {t("review.replace")}
            </button>
            <button data-testid="review-both-true" title={t("review.bothTrueTitle")} onClick={() => void act(() => api.reviewBothTrue(it.id), t("review.keptBoth"))}>
              {t("review.bothTrue")}
            </button>
            <button data-testid="review-reject" onClick={() => void act(() => api.reviewReject(it.id), t("review.rejected"))}>
              {t("review.reject")}
            </button>
          </div>
        )}
        {(it.status === "applied" || it.status === "accepted") && (
          <div className="row" style={{ marginTop: 6 }}>
            <button data-testid="rollback" onClick={() => void act(() => api.reviewRollback(it.id), t("review.rolledBack"))}>
              {t("review.rollBack")}
            </button>
          </div>
        )}
      </div>
      {err && <div className="error small">{err}</div>}
    </li>
  );
}

function Item({ it, onDone }: { it: ReviewItemDto; onDone: (msg: string) => void }) {
  const { openNote } = useApp();
  const { t, w, num, date } = useT();
  const maker = useMaker();
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
        <span className="chip">
          {it.kind === "link" ? t("review.linkLabel", { label: w("kind", it.label) }) : t("review.editLabel", { label: w("action", it.label) })}
        </span>
        <span className={`badge ${it.status}`}>{it.status === "applied" ? t("review.appliedNotReviewed") : w("status", it.status)}</span>
        {it.confidence != null && <span className="muted">{t("review.confidence", { value: num(it.confidence, 2) })}</span>}
        {it.by && (
          <span className="muted" data-testid="review-item-by" data-by={it.by} translate="no">
            {t("review.madeBy", { maker: maker(it.by) })}
          </span>
        )}
        <span className="muted">{date(it.created_at)}</span>
      </div>
      <div style={{ margin: "4px 0" }}>
        <button className="citation" onClick={() => openNote(it.note)} title={t("common.openNote")} translate="no">
          {it.note_preview}
        </button>
        {it.target && (
          <>
            {" "}
            →{" "}
            <button className="citation" onClick={() => openNote(it.target ?? "")} title={t("common.openNote")} translate="no">
              {it.target_preview}
            </button>
          </>
        )}
      </div>
      {it.changes.length > 0 ? (
        <Changes changes={it.changes} />
      ) : (
        it.reason && (
          // one text with the model's reason in it (left out of the language check)
          <div className="small muted" translate="no">
            {t("review.why", { reason: it.reason })}
          </div>
        )
      )}
      {it.kind === "edit" && <Diff before={it.before} after={it.after} />}
      {editing && (
        <div style={{ marginTop: 6 }}>
          <div className="field">
            <label htmlFor={`${fieldId}-keywords`}>{t("detail.keywords")}</label>
            <input id={`${fieldId}-keywords`} value={form.keywords} onChange={(e) => setForm({ ...form, keywords: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor={`${fieldId}-tags`}>{t("detail.tags")}</label>
            <input id={`${fieldId}-tags`} value={form.tags} onChange={(e) => setForm({ ...form, tags: e.target.value })} />
          </div>
          <div className="field">
            <label htmlFor={`${fieldId}-context`}>{t("detail.context")}</label>
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
                  api.reviewAccept(
                    it.id,
                    editing ? { keywords: list(form.keywords), tags: list(form.tags), context: form.context } : null,
                  ),
                editing ? t("review.editedAccepted") : t("review.accepted"),
              )
            }
          >
            {editing ? t("review.acceptEdited") : t("review.accept")}
          </button>
        )}
        {waiting && (
          <button data-testid="review-reject" onClick={() => void act(() => api.reviewReject(it.id), t("review.rejected"))}>
            {t("review.reject")}
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
            {t("common.edit")}
          </button>
        )}
        {(it.status === "applied" || it.status === "accepted") && (
          <button data-testid="rollback" onClick={() => void act(() => api.reviewRollback(it.id), t("review.rolledBack"))}>
            {t("review.rollBack")}
          </button>
        )}
        {it.event && (
          <button className="small" title={t("review.wholeEventTitle")} onClick={() => void act(() => api.reviewRollback(it.event ?? ""), t("review.wholeEventDone"))}>
            {t("review.wholeEvent")}
          </button>
        )}
      </div>
      {err && <div className="error small">{err}</div>}
    </li>
  );
}

/** The review queue and the event log. */
export default function ReviewView() {
  const { toast, openNote } = useApp();
  const changed = useChanged();
  const { t, date } = useT();
  const maker = useMaker();
  const [tab, setTab] = useState<"queue" | "events">("queue");
  const [status, setStatus] = useState<ReviewStatus | "waiting">("waiting");
  const [by, setBy] = useState("");
  const [minConf, setMinConf] = useState(0.8);

  const statuses: ReviewStatus[] = status === "waiting" ? [] : [status];
  const queue = useQuery({
    queryKey: keys.review(statuses, by || null),
    queryFn: ({ signal }) => abortable(api.reviewQueue(statuses, 0, PAGE, by || null), signal),
    // the queue shown (and its makers in the filter) stays until another filter's arrives
    placeholderData: keepPreviousData,
  });
  const eventsQ = useQuery({ queryKey: keys.events(50), queryFn: ({ signal }) => abortable(api.listEvents(50), signal) });
  const items = queue.data?.items ?? null;
  const more = queue.data?.more ?? false;
  const agents = queue.data?.agents ?? [];
  const events = eventsQ.data ?? [];
  const err = queue.error
    ? errorText(queue.error)
    : eventsQ.error
      ? t("review.cannotListEvents", { error: errorText(eventsQ.error) })
      : null;

  const done = (msg: string) => {
    toast(msg);
    changed({ kind: "reviewed" });
  };

  return (
    <div className="view">
      <div className="row" style={{ marginBottom: 10 }}>
        <h2 style={{ margin: 0 }}>{t("review.title")}</h2>
        <button className={tab === "queue" ? "primary" : ""} onClick={() => setTab("queue")}>
          {t("review.queue")}
        </button>
        <button className={tab === "events" ? "primary" : ""} onClick={() => setTab("events")}>
          {t("review.events")}
        </button>
        <span className="grow" />
        {tab === "queue" && (
          <>
            <select value={status} onChange={(e) => setStatus(wordOf(REVIEW_STATUSES, e.target.value) ?? "waiting")} aria-label={t("review.status")}>
              <option value="waiting">{t("review.waiting")}</option>
              {REVIEW_STATUSES.map((s) => (
                <option key={s} value={s}>
                  {t(STATUS_CHOICE[s])}
                </option>
              ))}
            </select>
            <select value={by} onChange={(e) => setBy(e.target.value)} aria-label={t("review.by")} data-testid="review-filter-by">
              <option value="">{t("review.byEveryone")}</option>
              <option value={BY.llm}>{t("review.byLlm")}</option>
              <option value={BY.merge}>{t("review.byMerge")}</option>
              {agents.length > 0 && <option value={BY.agent}>{t("review.byAgents")}</option>}
              {agents
                .filter((a) => a !== BY.agent)
                .map((a) => (
                  <option key={a} value={a} translate="no">
                    {maker(a)}
                  </option>
                ))}
            </select>
            <label className="small">
              {t("review.acceptAllAbove")}{" "}
              <input
                type="number"
                min={0}
                max={1}
                step={0.05}
                style={{ width: 70 }}
                value={minConf}
                onChange={(e) => setMinConf(Number(e.target.value))}
                aria-label={t("review.minConfidence")}
              />
            </label>
            <button
              data-testid="bulk-accept"
              onClick={() =>
                api
                  .reviewBulkAccept(minConf)
                  .then((r) =>
                    done(t("review.bulkDone", { count: r.accepted }) + (r.failed.length ? t("review.bulkFailed", { count: r.failed.length }) : "")),
                  )
                  .catch((e) => toast(errorText(e)))
              }
            >
              {t("review.accept")}
            </button>
          </>
        )}
      </div>
      {err && <div className="error">{err}</div>}
      {tab === "queue" ? (
        items && items.length === 0 ? (
          <Empty title={t("review.emptyTitle")}>
            {t("review.emptyBody")}
          </Empty>
        ) : (
          <ul className="list" data-testid="review-list">
            {items?.map((it) =>
              it.kind === "link" && it.label === SUPERSEDES_KIND ? (
                <Supersession key={it.id} it={it} onDone={done} />
              ) : (
                <Item key={it.id} it={it} onDone={done} />
              ),
            )}
            {more && <li className="small muted">{t("review.more")}</li>}
          </ul>
        )
      ) : events.length === 0 ? (
        <Empty title={t("review.noEventsTitle")}>{t("review.noEventsBody")}</Empty>
      ) : (
        <ul className="list" data-testid="event-list">
          {events.map((ev) => (
            <li key={ev.id} className="card" data-testid="event-item" style={{ cursor: "default" }}>
              <div className="row small muted">
                <span>{date(ev.created_at)}</span>
                <span translate="no">{ev.model}</span>
                <span>
                  {t("review.eventStats", { links: ev.links, edits: ev.revisions, tokens: ev.tokens })}
                  {ev.dropped ? t("review.eventDropped", { count: ev.dropped }) : ""}
                </span>
              </div>
              <button className="citation" onClick={() => openNote(ev.note)} translate="no">
                {ev.note_preview}
              </button>
              <div className="row" style={{ marginTop: 4 }}>
                <button onClick={() => api.reviewRollback(ev.id).then(() => done(t("review.eventRolledBack"))).catch((e) => toast(errorText(e)))}>
                  {t("review.eventRollBack")}
                </button>
                <button onClick={() => api.reviewReapply(ev.id).then(() => done(t("review.eventReapplied"))).catch((e) => toast(errorText(e)))}>
                  {t("review.reapply")}
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
