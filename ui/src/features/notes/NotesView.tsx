import { useEffect, useMemo, useRef, useState } from "react";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { abortable, api, ApiError, errorText, type Enrich, type HitDto, type NoteDto } from "../../api";
import type { Key } from "../../i18n";
import { ENRICH, wordOf } from "../../states";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import Opening from "../../components/Opening";
import { memoryOpening } from "../../components/useStatusFeed";
import { keys, useChanged } from "../../queries";
import { FoundServers, useLlmOverview } from "../settings/LlmPanel";
import NoteDetail from "./NoteDetail";
import NoteEditor from "./NoteEditor";
import NoteItem from "./NoteItem";
import { useT } from "../../i18n";
import AsOf, { useDay } from "../../components/AsOf";

/** The filter's words for each enrichment state. */
const ENRICH_LABEL = { pending: "notes.statusPending", done: "notes.statusDone", failed: "notes.statusFailed" } as const satisfies Record<Enrich, Key>;

const PAGE = 50;

/**
 * The shell's answer while the memory is still opening: a state the view waits out (the
 * status feed has every query asked again once the memory is open), not an error to show.
 */
const notReady = (e: unknown) => e instanceof ApiError && e.kind === "not_ready";

/** A query's error as the view shows it: none while the memory opens. */
const shownError = (e: unknown, msg: (e: unknown) => string) => (e && !notReady(e) ? msg(e) : null);

/** `value`, once it has stayed the same for `ms`. */
function useSettled<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const t = window.setTimeout(() => setSettled(value), ms);
    return () => window.clearTimeout(t);
  }, [value, ms]);
  return settled;
}

/** Notes: write, search, filter, open. */
export default function NotesView() {
  const { selected, openNote, toast, status, statusError, asOf } = useApp();
  const changed = useChanged();
  const { t, num, w } = useT();
  const day = useDay();
  const [query, setQuery] = useState("");
  const [tag, setTag] = useState("");
  const [enrich, setEnrich] = useState<Enrich | null>(null);
  const [boxId, setBoxId] = useState("");
  const opening = memoryOpening(status, statusError);

  const filtered = !!(tag || enrich || boxId);
  const filter = useMemo(() => ({ tag: tag || null, enrich, box_id: boxId || null }), [tag, enrich, boxId]);

  // A page at a time (each call carries at most one page); a refresh asks again for the
  // pages shown.
  const list = useInfiniteQuery({
    queryKey: keys.notes(filter, PAGE, asOf),
    queryFn: ({ pageParam, signal }) => abortable(api.listNotes(filter, pageParam, PAGE, asOf), signal),
    initialPageParam: 0,
    getNextPageParam: (last) => (last.offset + last.notes.length < last.total ? last.offset + last.notes.length : undefined),
  });
  const notes = useMemo(() => {
    const seen = new Set<string>();
    return (list.data?.pages ?? []).flatMap((p) => p.notes).filter((n) => !seen.has(n.id) && !!seen.add(n.id));
  }, [list.data]);
  const pages = list.data?.pages;
  const total = pages && pages.length > 0 ? pages[pages.length - 1].total : 0;
  // a page has arrived: until then the view does not know whether the memory is empty
  const everLoaded = useRef(false);
  if (list.data) everLoaded.current = true;
  const loaded = everLoaded.current;

  const tags = useQuery({ queryKey: keys.tags(50), queryFn: ({ signal }) => abortable(api.listTags(50), signal) });
  const boxes = useQuery({ queryKey: keys.boxes(50), queryFn: ({ signal }) => abortable(api.listBoxes(50), signal) });

  // Search as you type (once the typing pauses). Each query has its own key: the answer to
  // an earlier query never replaces the answer to a later one (it is cancelled).
  const typed = query.trim() !== "";
  const settled = useSettled(query, 200);
  // when the search box was last empty: hits from before then are never shown again
  const emptied = useRef(0);
  if (!typed) emptied.current = Date.now();
  const search = useQuery({
    queryKey: keys.search(settled, 20, filter, asOf),
    queryFn: ({ signal }) => abortable(api.searchNotes(settled, 20, filter, asOf), signal),
    enabled: typed && settled.trim() !== "",
    // the hits shown stay while the next query's are on their way
    placeholderData: (prev, prevQuery) => (prevQuery && prevQuery.state.dataUpdatedAt > emptied.current ? prev : undefined),
  });
  const hits: HitDto[] | null = typed && settled.trim() !== "" ? (search.data ?? null) : null;

  const err =
    shownError(list.error, errorText) ??
    (typed ? shownError(search.error, errorText) : null) ??
    shownError(tags.error, (e) => t("notes.cannotListTags", { error: errorText(e) })) ??
    shownError(boxes.error, (e) => t("notes.cannotListBoxes", { error: errorText(e) }));

  // "/" focuses search.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const t = e.target as HTMLElement | null;
      if (e.key === "/" && t && !["INPUT", "TEXTAREA"].includes(t.tagName)) {
        e.preventDefault();
        document.querySelector<HTMLInputElement>("[data-testid=search-input]")?.focus();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const shown: { note: NoteDto; extra?: string; hit?: HitDto }[] = hits
    ? // the search applies the filters (tag, status, Box)
      hits.map((h) => ({ note: h.note, hit: h, extra: `${h.via.map((v) => w("via", v)).join(" + ")} · ${num(h.score ?? 0, 2)}` }))
    : notes.map((n) => ({ note: n }));

  // as of a day before the first note, the list is empty but the memory is not
  const empty = loaded && !hits && total === 0 && !filtered && !asOf;

  return (
    <div className="view">
      <div className="split">
        <div className="col">
          <NoteEditor
            onSaved={(id) => {
              openNote(id);
              changed({ kind: "noteAdded" });
            }}
          />
          <AsOf />
          <div className="row" style={{ marginBottom: 8 }}>
            <input
              className="grow"
              data-testid="search-input"
              placeholder={t("notes.searchPlaceholder")}
              value={query}
              onChange={(e) => setQuery(e.target.value)}
              aria-label={t("notes.searchLabel")}
            />
          </div>
          <div className="row small" style={{ marginBottom: 8 }}>
            <select value={tag} onChange={(e) => setTag(e.target.value)} aria-label={t("notes.filterTag")}>
              <option value="">{t("notes.anyTag")}</option>
              {(tags.data ?? []).map((t) => (
                <option key={t.tag} value={t.tag}>
                  #{t.tag} ({t.n})
                </option>
              ))}
            </select>
            <select value={enrich ?? ""} onChange={(e) => setEnrich(wordOf(ENRICH, e.target.value))} aria-label={t("notes.filterStatus")}>
              <option value="">{t("notes.anyStatus")}</option>
              {ENRICH.map((s) => (
                <option key={s} value={s}>
                  {t(ENRICH_LABEL[s])}
                </option>
              ))}
            </select>
            <select value={boxId} onChange={(e) => setBoxId(e.target.value)} aria-label={t("notes.filterBox")}>
              <option value="">{t("notes.anyBox")}</option>
              {(boxes.data ?? []).map((b) => (
                <option key={b.id} value={b.id}>
                  {b.label} ({b.size})
                </option>
              ))}
            </select>
            <span className="muted">{hits ? t("notes.hits", { count: shown.length }) : t("notes.count", { count: total })}</span>
          </div>
          {err && <div className="error small">{err}</div>}
          {opening && !loaded ? (
            <Opening text="opening.notes" testid="notes-opening" />
          ) : !loaded ? null : empty ? (
            <Empty title={t("notes.emptyTitle")}>
              {t("notes.emptyBody")}
              <FirstRunLlm />
              {/* asked again once the memory is open (the status feed says so) */}
              <FirstRunServers />
              <div style={{ marginTop: 8 }}>
                <button
                  onClick={() =>
                    api
                      .loadSampleNotebook()
                      .then((n) => {
                        toast(t("notes.sampleLoaded", { count: n }));
                        changed({ kind: "imported" });
                      })
                      .catch((e) => toast(errorText(e)))
                  }
                >
                  {t("notes.loadSample")}
                </button>
              </div>
            </Empty>
          ) : shown.length === 0 ? (
            <div className="muted small" data-testid="notes-none">
              {hits ? t("notes.noSearchMatch") : asOf && !filtered ? t("notes.noneAsOf", { day: day(asOf) }) : t("notes.noFilterMatch")}
            </div>
          ) : (
            <ul className="list" data-testid="note-list">
              {shown.map(({ note, extra, hit }) => (
                <NoteItem key={note.id} note={note} extra={extra} selected={note.id === selected} onOpen={() => openNote(note.id)}>
                  {hit?.superseded_by && (
                    // a replaced note stays findable, below the note that replaced it
                    <div className="small muted" data-testid="hit-superseded-by" data-by={hit.superseded_by.id} data-since={hit.superseded_by.since}>
                      {t("validity.supersededBy")}{" "}
                      <button
                        className="citation"
                        title={t("validity.openNote")}
                        onClick={(e) => {
                          e.stopPropagation();
                          openNote(hit.superseded_by?.id ?? "");
                        }}
                        translate="no"
                      >
                        {hit.superseded_by.preview || hit.superseded_by.id}
                      </button>{" "}
                      {t("validity.since", { day: day(hit.superseded_by.since) })}
                    </div>
                  )}
                </NoteItem>
              ))}
            </ul>
          )}
          {!hits && notes.length < total && (
            <button style={{ marginTop: 8 }} onClick={() => void list.fetchNextPage()}>
              {t("notes.showMore", { count: total - notes.length })}
            </button>
          )}
        </div>
        <div className="col">
          {selected ? (
            <NoteDetail id={selected} />
          ) : (
            <Empty title={t("notes.noneOpenTitle")}>
              {t("notes.noneOpenBody")}
            </Empty>
          )}
        </div>
      </div>
    </div>
  );
}

/** The servers found on this machine, offered on the first screen with a one-click "Use". */
function FirstRunServers() {
  const { o, error, busy, pick } = useLlmOverview();
  const { t } = useT();
  if (!o || o.discovered.length === 0) return null;
  return (
    <div className="small" style={{ marginTop: 8 }} data-testid="first-run-servers">
      <div>{t("notes.serversFound")}</div>
      <FoundServers servers={o.discovered} busy={busy} onPick={pick} />
      {error && <div className="error">{error}</div>}
    </div>
  );
}

/**
 * Which LLM will annotate the notes, said on the first screen: from the same status the
 * status bar shows, so the two always agree; nothing while the memory (whose settings
 * choose the LLM) is not open.
 */
function FirstRunLlm() {
  const { status } = useApp();
  const { t } = useT();
  if (status?.memory !== "ready") return null;
  return (
    <div className="muted small" data-testid="first-run-llm" style={{ marginTop: 8 }}>
      {!status.llm_configured
        ? t("notes.noLlm")
        : status.llm_label.startsWith("built-in")
          ? t("notes.builtinLlm", { label: status.llm_label })
          : t("notes.otherLlm", { label: status.llm_label })}
    </div>
  );
}
