import { useCallback, useEffect, useState } from "react";
import { api, ApiError, errorText, type BoxDto, type HitDto, type NoteDto, type TagCount } from "../../api";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import Opening from "../../components/Opening";
import { memoryOpening } from "../../components/useStatusFeed";
import { FoundServers, useLlmOverview } from "../settings/LlmPanel";
import NoteDetail from "./NoteDetail";
import NoteEditor from "./NoteEditor";
import NoteItem from "./NoteItem";
import { useT } from "../../i18n";
import AsOf, { useDay } from "../../components/AsOf";

const PAGE = 50;

/**
 * The shell's answer while the memory is still opening: a state the view waits out (the
 * status feed refreshes it once the memory is open), not an error to show.
 */
const notReady = (e: unknown) => e instanceof ApiError && e.kind === "not_ready";

/** Notes: write, search, filter, open. */
export default function NotesView() {
  const { selected, openNote, revision, bump, toast, status, statusError, asOf } = useApp();
  const { t, num, w } = useT();
  const day = useDay();
  const [query, setQuery] = useState("");
  const [tag, setTag] = useState("");
  const [enrich, setEnrich] = useState("");
  const [boxId, setBoxId] = useState("");
  const [notes, setNotes] = useState<NoteDto[]>([]);
  const [total, setTotal] = useState(0);
  const [hits, setHits] = useState<HitDto[] | null>(null);
  const [tags, setTags] = useState<TagCount[]>([]);
  const [boxes, setBoxes] = useState<BoxDto[]>([]);
  const [err, setErr] = useState<string | null>(null);
  // a page has arrived: until then the view does not know whether the memory is empty
  const [loaded, setLoaded] = useState(false);
  const opening = memoryOpening(status, statusError);
  const fail = useCallback((msg: (e: unknown) => string) => (e: unknown) => !notReady(e) && setErr(msg(e)), []);

  const filtered = !!(tag || enrich || boxId);

  const filter = { tag: tag || null, enrich: enrich || null, box_id: boxId || null };
  const filterKey = JSON.stringify(filter);

  // The first page is refreshed on every change; pages further down are fetched on demand
  // and kept (each call carries at most one page).
  const loadList = useCallback(() => {
    api
      .listNotes(JSON.parse(filterKey), 0, PAGE)
      .then((p) => {
        setNotes((cur) => {
          const first = new Set(p.notes.map((n) => n.id));
          return [...p.notes, ...cur.slice(PAGE).filter((n) => !first.has(n.id))];
        });
        setTotal(p.total);
        setLoaded(true);
        setErr(null);
      })
      .catch(fail(errorText));
  }, [filterKey, fail]);

  useEffect(() => setNotes([]), [filterKey]);

  const more = () =>
    api
      .listNotes(filter, notes.length, PAGE)
      .then((p) => {
        setNotes((cur) => {
          const have = new Set(cur.map((n) => n.id));
          return [...cur, ...p.notes.filter((n) => !have.has(n.id))];
        });
        setTotal(p.total);
      })
      .catch(fail(errorText));

  useEffect(() => loadList(), [loadList, revision]);

  useEffect(() => {
    api
      .listTags(50)
      .then(setTags)
      .catch(fail((e) => t("notes.cannotListTags", { error: errorText(e) })));
    api
      .listBoxes(50)
      .then(setBoxes)
      .catch(fail((e) => t("notes.cannotListBoxes", { error: errorText(e) })));
  }, [revision, t, fail]);

  // Search as you type (debounced).
  useEffect(() => {
    if (!query.trim()) {
      setHits(null);
      return;
    }
    const t = window.setTimeout(() => {
      api
        .searchNotes(query, 20, JSON.parse(filterKey), asOf)
        .then((h) => {
          setHits(h);
          setErr(null);
        })
        .catch(fail(errorText));
    }, 200);
    return () => window.clearTimeout(t);
  }, [query, revision, filterKey, fail, asOf]);

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

  const empty = loaded && !hits && total === 0 && !filtered;

  return (
    <div className="view">
      <div className="split">
        <div className="col">
          <NoteEditor
            onSaved={(id) => {
              openNote(id);
              bump();
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
              {tags.map((t) => (
                <option key={t.tag} value={t.tag}>
                  #{t.tag} ({t.n})
                </option>
              ))}
            </select>
            <select value={enrich} onChange={(e) => setEnrich(e.target.value)} aria-label={t("notes.filterStatus")}>
              <option value="">{t("notes.anyStatus")}</option>
              <option value="pending">{t("notes.statusPending")}</option>
              <option value="done">{t("notes.statusDone")}</option>
              <option value="failed">{t("notes.statusFailed")}</option>
            </select>
            <select value={boxId} onChange={(e) => setBoxId(e.target.value)} aria-label={t("notes.filterBox")}>
              <option value="">{t("notes.anyBox")}</option>
              {boxes.map((b) => (
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
              {/* asked again once the memory is open (the status feed bumps the revision) */}
              <FirstRunServers key={`servers-${revision}`} />
              <div style={{ marginTop: 8 }}>
                <button
                  onClick={() =>
                    api
                      .loadSampleNotebook()
                      .then((n) => {
                        toast(t("notes.sampleLoaded", { count: n }));
                        bump();
                      })
                      .catch((e) => toast(errorText(e)))
                  }
                >
                  {t("notes.loadSample")}
                </button>
              </div>
            </Empty>
          ) : shown.length === 0 ? (
            <div className="muted small">{hits ? t("notes.noSearchMatch") : t("notes.noFilterMatch")}</div>
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
            <button style={{ marginTop: 8 }} onClick={() => void more()}>
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
