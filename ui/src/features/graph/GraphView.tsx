import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type Graph from "graphology";
import { useQuery } from "@tanstack/react-query";
import { abortable, api, errorText, onJob, subscribe, type BoxDto, type GraphNodeDto } from "../../api";
import { useApp } from "../../app-context";
import { keys } from "../../queries";
import { useT } from "../../i18n";
import Empty from "../../components/Empty";
import { boxIndex, buildGraph, loadNodes, loadWhole, nodeColour, PALETTE, type GraphData } from "./graphData";
import { aggregate, boxSubgraph, boxThreshold, buildBoxGraph, setBoxThreshold, syncBoxGraph, UNBOXED, type Aggregate } from "./boxGraph";
import { fetchPatches, patchData, patchGraph } from "./incremental";
import { mountGraph, type GraphStats as Stats, type Mounted } from "./mountGraph";
import { SUPERSEDES_COLOUR } from "./graphStyle";

function useDark(): boolean {
  const q = typeof window !== "undefined" && window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  const [dark, setDark] = useState(q?.matches ?? false);
  useEffect(() => {
    if (!q) return;
    const f = () => setDark(q.matches);
    q.addEventListener("change", f);
    return () => q.removeEventListener("change", f);
  }, [q]);
  return dark;
}

/**
 * Jobs finishing within this many ms are merged into the graph together; when merging costs
 * more (re-aggregating 100k notes takes 0.2-0.3 s), the wait grows to ten times its cost (at
 * most 5 s), so merging never takes more than a tenth of the main thread.
 */
const JOB_BATCH_MS = 400;
const batchWait = (costMs: number) => Math.min(Math.max(JOB_BATCH_MS, costMs * 10), 5000);

const sameIds = (a: BoxDto[], b: BoxDto[]) => a.length === b.length && a.every((x, i) => x.id === b[i].id);

interface Loaded {
  data: GraphData;
  boxes: BoxDto[];
  stats: Stats;
}

/** The whole memory (a page at a time) or a note's neighbourhood, with the Boxes. */
async function loadGraph(
  center: string | null,
  depth: number,
  signal: AbortSignal,
  onProgress: (p: { notes: number; links: number }) => void,
): Promise<Loaded> {
  const t0 = performance.now();
  let pages = 0;
  const counting = {
    ...api,
    graphNodes: (a: string | null, l: number) => {
      pages++;
      return abortable(api.graphNodes(a, l), signal);
    },
    graphLinks: (a: string | null, l: number) => {
      pages++;
      return abortable(api.graphLinks(a, l), signal);
    },
  };
  const load: Promise<GraphData> = center
    ? api.localGraph(center, depth).then((g) => {
        pages = 1;
        return { nodes: g.nodes, links: g.links, truncated: g.truncated };
      })
    : loadWhole(counting, (n, l) => !signal.aborted && onProgress({ notes: n, links: l }));
  const [data, boxes] = await Promise.all([load, api.listBoxes(200).catch(() => [] as BoxDto[])]);
  return { data, boxes, stats: { nodes: data.nodes.length, edges: data.links.length, loadMs: Math.round(performance.now() - t0), pages } };
}

/**
 * The link graph: whole memory or a note's neighbourhood, coloured by Box. Above the Box
 * threshold the whole memory is drawn as Boxes (aggregate nodes); a click opens one into its
 * notes. Finished jobs are merged into the drawn graph in place (no reload, no new layout).
 */
export default function GraphView() {
  const { graphFocus, setGraphFocus, openNote, highlight } = useApp();
  const { t } = useT();
  const container = useRef<HTMLDivElement>(null);
  const overlay = useRef<HTMLCanvasElement>(null);
  // the loaded data (patched by jobs) and a counter of full loads: a new graph is built for a
  // new load or a new level of detail, never for a job
  const [data, setDataState] = useState<GraphData | null>(null);
  const dataRef = useRef<GraphData | null>(null);
  const setData = (d: GraphData) => {
    dataRef.current = d;
    setDataState(d);
  };
  const [loads, setLoads] = useState(0);
  const [boxes, setBoxesState] = useState<BoxDto[]>([]);
  const boxesRef = useRef<BoxDto[]>([]);
  const setBoxes = (b: BoxDto[]) => {
    boxesRef.current = b;
    setBoxesState(b);
  };
  const [err, setErr] = useState<string | null>(null);
  const [progress, setProgress] = useState<{ notes: number; links: number } | null>(null);
  const [search, setSearch] = useState("");
  const [tag, setTag] = useState("");
  const [showProposed, setShowProposed] = useState(true);
  const [stats, setStats] = useState<Stats | null>(null);
  const [threshold, setThreshold] = useState(boxThreshold);
  // the field applies on Enter or when left, not at each keystroke (each one could redraw)
  const [thresholdDraft, setThresholdDraft] = useState(() => String(boxThreshold()));
  const applyThreshold = () => {
    const v = Math.round(Number(thresholdDraft));
    if (!Number.isFinite(v) || v < 1) {
      setThresholdDraft(String(threshold));
      return;
    }
    setThreshold(v);
    setBoxThreshold(v);
  };
  const [openBox, setOpenBox] = useState<string | null>(null);
  const [allNotes, setAllNotes] = useState(false);
  // the aggregate as jobs and filters changed it since the graph was built
  const [aggLive, setAggLive] = useState<{ graph: Graph; agg: Aggregate } | null>(null);
  // finished jobs merged in place since the view opened (for the e2e suite)
  const [patched, setPatched] = useState(0);
  const dark = useDark();

  // Level of detail: the whole memory above the threshold is drawn as Boxes unless a Box is
  // open (clicked here, or chosen in the Boxes view) or every note was asked for.
  const whole = graphFocus.center === null;
  const above = whole && (data?.nodes.length ?? 0) > threshold;
  const opened = above ? (openBox ?? graphFocus.boxId) : null;
  const mode: "boxes" | "notes" = above && !opened && !allNotes ? "boxes" : "notes";

  // Jobs finished while the data loads wait here, and are merged once it is loaded.
  const queued = useRef(new Set<string>());
  const loading = useRef(false);
  const flush = useRef<() => void>(() => {});

  // Loaded (paged) for the focus, and again when the memory changed other than by a job
  // (the key is made stale then; finished jobs are merged below instead).
  const center = graphFocus.center;
  const depth = graphFocus.depth;
  const load = useQuery({
    queryKey: keys.graph(center, depth),
    queryFn: ({ signal }) => abortable(loadGraph(center, depth, signal, setProgress), signal),
    // a graph left is not kept: opening the view again loads the memory as it is then
    gcTime: 0,
    // every load is a new graph (100k notes are not compared with the last load)
    structuralSharing: false,
  });
  loading.current = load.isFetching;
  useEffect(() => {
    const l = load.data;
    if (!l) return;
    setData(l.data);
    setBoxes(l.boxes);
    setLoads((n) => n + 1);
    setErr(null);
    setProgress(null);
    setStats(l.stats);
    if (queued.current.size > 0) flush.current();
  }, [load.data]);
  useEffect(() => {
    if (!load.error) return;
    setErr(errorText(load.error));
    // jobs that waited for the load are merged into what is drawn
    if (queued.current.size > 0) flush.current();
  }, [load.error]);

  // The drawn graph: aggregate Boxes, an opened Box's notes, or all loaded notes.
  const filters = useRef({ search: "", tag: "", showProposed: true, highlightSet: new Set<string>(), boxMembers: null as Set<string> | null, center: graphFocus.center });
  const aggFilters = useRef({ tag, showProposed });
  aggFilters.current = { tag, showProposed };
  const built: { graph: Graph; agg: Aggregate | null } | null = useMemo(() => {
    const d = dataRef.current;
    if (!d) return null;
    if (mode === "boxes") {
      const a = aggregate(d, boxesRef.current, aggFilters.current);
      return { graph: buildBoxGraph(a), agg: a };
    }
    return { graph: buildGraph(opened ? boxSubgraph(d, opened) : d, boxesRef.current), agg: null };
    // a new graph for a new load or level of detail only; jobs and filters change it in place
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [loads, mode, opened]);
  const graph = built?.graph ?? null;
  const agg = aggLive && aggLive.graph === graph ? aggLive.agg : (built?.agg ?? null);

  const highlightSet = useMemo(() => new Set(highlight), [highlight]);
  // Boxes holding a highlighted note (chat citations) are highlighted at the Box level.
  const highlightBoxes = useMemo(() => {
    if (mode !== "boxes" || !data || highlightSet.size === 0) return new Set<string>();
    const s = new Set<string>();
    for (const n of data.nodes) if (highlightSet.has(n.id)) (n.boxes.length ? n.boxes : [UNBOXED]).forEach((b) => s.add(b));
    return s;
  }, [mode, data, highlightSet]);
  const boxMembers = useMemo(() => {
    const id = graphFocus.boxId;
    if (!id || opened) return null;
    return new Set((data?.nodes ?? []).filter((n) => n.boxes.includes(id)).map((n) => n.id));
  }, [data, graphFocus.boxId, opened]);
  const tags = useMemo(() => {
    const c = new Map<string, number>();
    data?.nodes.forEach((n) => n.tags.forEach((t) => c.set(t, (c.get(t) ?? 0) + 1)));
    return [...c.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40);
  }, [data]);

  // The renderer; rebuilt with the graph, reducers read the filters through a ref. At the
  // Box level the tag and proposed filters change the aggregate itself (see below).
  filters.current =
    mode === "boxes"
      ? { search: search.trim().toLowerCase(), tag: "", showProposed, highlightSet: highlightBoxes, boxMembers: null, center: null }
      : { search: search.trim().toLowerCase(), tag, showProposed, highlightSet, boxMembers, center: graphFocus.center };
  const mounted = useRef<Mounted | null>(null);
  const graphRef = useRef<Graph | null>(null);
  const [dashed, setDashed] = useState(true);

  const onClick = useCallback(
    (id: string) => {
      if (mode === "boxes") setOpenBox(id);
      else openNote(id);
    },
    [mode, openNote],
  );

  useEffect(() => {
    graphRef.current = graph;
    if (!graph || !container.current || !overlay.current || graph.order === 0) return;
    const m = mountGraph({
      graph,
      container: container.current,
      overlay: overlay.current,
      dark,
      filters: () => filters.current,
      onClickNode: onClick,
      // the whole memory's note positions are kept for the session (not a Box's, not Boxes')
      whole: graphFocus.center === null && mode === "notes" && !opened,
    });
    mounted.current = m;
    setDashed(m.dashed);
    return () => {
      m.kill();
      mounted.current = null;
    };
    // graphFocus.center and mode change only together with `graph` (a new build)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [graph, dark, onClick]);

  // Finished jobs: their notes' neighbourhoods are fetched and merged in place.
  const level = useRef({ mode, opened });
  level.current = { mode, opened };
  useEffect(() => {
    let gone = false;
    let timer = 0;
    let busy = false;
    let cost = 0;
    const run = async () => {
      if (busy || loading.current) return;
      busy = true;
      try {
        while (queued.current.size > 0 && !gone && !loading.current) {
          const notes = [...queued.current];
          queued.current.clear();
          const [patches, fresh] = await Promise.all([fetchPatches(api, notes), api.listBoxes(200).catch(() => boxesRef.current)]);
          if (gone || loading.current || !dataRef.current) {
            notes.forEach((n) => queued.current.add(n));
            return;
          }
          const t0 = performance.now();
          let d = dataRef.current;
          // a full Box recompute moved many notes: their memberships are read again
          if (!sameIds(fresh, boxesRef.current) && whole) {
            const nodes = await loadNodes(api);
            if (gone || loading.current) return;
            const byId = new Map(nodes.map((n) => [n.id, n]));
            d = { ...d, nodes: d.nodes.map((n) => byId.get(n.id) ?? n) };
          }
          for (const p of patches) d = patchData(d, p);
          const boxesChanged = !sameIds(fresh, boxesRef.current);
          setBoxes(fresh);
          setData(d);
          setStats((s) => (s ? { ...s, nodes: d.nodes.length, edges: d.links.length } : s));
          setPatched((n) => n + patches.length);
          const g = graphRef.current;
          const m = mounted.current;
          if (!g) continue;
          const { mode, opened } = level.current;
          if (mode === "boxes") {
            const a = aggregate(d, fresh, aggFilters.current);
            setAggLive({ graph: g, agg: a });
            const grew = syncBoxGraph(g, a);
            m?.changed(grew);
            cost = performance.now() - t0;
            continue;
          }
          const admit = (n: GraphNodeDto) => {
            if (opened) return opened === UNBOXED ? n.boxes.length === 0 : n.boxes.includes(opened);
            return true;
          };
          let grew = false;
          for (const p of patches) {
            // a neighbourhood takes a note only when it is linked to a note already drawn
            const drawn = g.hasNode(p.note) || ("links" in p && p.links.some((l) => g.hasNode(l.from === p.note ? l.to : l.from)));
            if (!whole && !drawn) continue;
            const c = patchGraph(g, p, fresh, admit);
            grew ||= c.added.length > 0 || c.edgesAdded > 0;
          }
          if (boxesChanged) {
            const byId = new Map(d.nodes.map((n) => [n.id, n]));
            const index = boxIndex(fresh);
            g.updateEachNodeAttributes(
              (id, a) => {
                const n = byId.get(id);
                if (n) {
                  a.boxes = n.boxes;
                  a.color = nodeColour(n, index);
                }
                return a;
              },
              { attributes: ["boxes", "color"] },
            );
          }
          m?.changed(grew);
          cost = performance.now() - t0;
        }
      } catch (e) {
        if (!gone) setErr(errorText(e));
      } finally {
        busy = false;
      }
    };
    flush.current = () => void run();
    const off = subscribe(
      onJob((e) => {
        queued.current.add(e.note);
        // the first job of a batch sets the time (later ones join it: a steady stream of
        // jobs must not put the merge off for ever)
        if (timer) return;
        timer = window.setTimeout(() => {
          timer = 0;
          void run();
        }, batchWait(cost));
      }),
    );
    return () => {
      gone = true;
      window.clearTimeout(timer);
      off();
    };
  }, [whole]);

  // At the Box level the tag and proposed filters change the aggregate, in place.
  useEffect(() => {
    const g = graphRef.current;
    const d = dataRef.current;
    if (mode !== "boxes" || !g || !d) return;
    const a = aggregate(d, boxesRef.current, { tag, showProposed });
    setAggLive({ graph: g, agg: a });
    mounted.current?.changed(syncBoxGraph(g, a));
  }, [mode, tag, showProposed]);

  useEffect(() => {
    if (window.__kastenGraph && stats) window.__kastenGraph.stats = stats;
  }, [stats, graph]);

  // Filters change: re-run the reducers.
  useEffect(() => {
    mounted.current?.refresh();
  }, [search, tag, showProposed, highlightSet, highlightBoxes, boxMembers]);

  const box = graphFocus.boxId ? boxes.find((b) => b.id === graphFocus.boxId) : null;
  const openedLabel = opened ? (opened === UNBOXED ? t("graph.noBox") : (boxes.find((b) => b.id === opened)?.label ?? t("graph.someBox"))) : null;
  // notes and links shown (an opened Box: its own; otherwise all loaded, also at the Box level)
  const shown = useMemo(() => {
    if (!data) return { nodes: 0, links: 0 };
    if (!opened) return { nodes: data.nodes.length, links: data.links.length };
    const s = boxSubgraph(data, opened);
    return { nodes: s.nodes.length, links: s.links.length };
  }, [data, opened]);
  const drawnNodes = shown.nodes;
  const drawnEdges = shown.links;
  const back = () => {
    setOpenBox(null);
    setAllNotes(false);
    if (graphFocus.boxId) setGraphFocus({ ...graphFocus, boxId: null });
  };

  return (
    <div className="view" style={{ display: "flex", flexDirection: "column", gap: 8 }}>
      <div className="row">
        <h2 style={{ margin: 0 }}>{t("graph.title")}</h2>
        <select
          aria-label={t("graph.scope")}
          value={graphFocus.center ? "local" : "whole"}
          onChange={(e) => {
            if (e.target.value === "whole") setGraphFocus({ ...graphFocus, center: null });
          }}
        >
          <option value="whole">{t("graph.whole")}</option>
          <option value="local" disabled={!graphFocus.center}>
            {t("graph.local")}
          </option>
        </select>
        {graphFocus.center && (
          <label className="small">
            {t("graph.depth")}{" "}
            <select
              aria-label={t("graph.depthLabel")}
              value={graphFocus.depth}
              onChange={(e) => setGraphFocus({ ...graphFocus, depth: Number(e.target.value) })}
            >
              {[1, 2, 3].map((d) => (
                <option key={d}>{d}</option>
              ))}
            </select>
          </label>
        )}
        {box && (
          <span className="chip">
            {t("graph.box", { label: box.label })}{" "}
            <button
              className="small"
              onClick={() => {
                setOpenBox(null);
                setGraphFocus({ ...graphFocus, boxId: null });
              }}
              aria-label={t("graph.clearBox")}
            >
              ×
            </button>
          </span>
        )}
        {above && (opened || allNotes) && (
          <button className="small" data-testid="graph-back" onClick={back}>
            {t("graph.allBoxes")}
          </button>
        )}
        {mode === "boxes" && (
          <button className="small" data-testid="graph-all-notes" onClick={() => setAllNotes(true)} title={t("graph.everyNoteTitle")}>
            {t("graph.everyNote")}
          </button>
        )}
        <select value={tag} onChange={(e) => setTag(e.target.value)} aria-label={t("graph.filterTag")}>
          <option value="">{t("graph.anyTag")}</option>
          {tags.map(([t, n]) => (
            <option key={t} value={t}>
              #{t} ({n})
            </option>
          ))}
        </select>
        <label className="small">
          <input type="checkbox" checked={showProposed} onChange={(e) => setShowProposed(e.target.checked)} /> {t("graph.proposed")}
        </label>
        <input placeholder={t("graph.highlight")} value={search} onChange={(e) => setSearch(e.target.value)} aria-label={t("graph.highlightLabel")} />
        <label className="small" title={t("graph.thresholdTitle")}>
          {t("graph.boxesAbove")}{" "}
          <input
            type="number"
            min={1}
            step={500}
            style={{ width: "6em" }}
            data-testid="graph-box-threshold"
            aria-label={t("graph.thresholdLabel")}
            value={thresholdDraft}
            onChange={(e) => setThresholdDraft(e.target.value)}
            onBlur={applyThreshold}
            onKeyDown={(e) => {
              if (e.key === "Enter") applyThreshold();
            }}
          />{" "}
          {t("graph.notesUnit")}
        </label>
        <span className="grow" />
        {stats && (
          <span className="small muted">
            <span className="chip" data-testid="graph-mode" data-mode={mode} title={t("graph.modeTitle")}>
              {t(mode === "boxes" ? "graph.mode.boxes" : "graph.mode.notes")}
            </span>{" "}
            {mode === "boxes" && agg
              ? t("graph.aggStats", { notes: agg.notes, boxes: agg.nodes.length, links: agg.links })
              : t("graph.stats", { notes: drawnNodes, links: drawnEdges })}
            {openedLabel ? t("graph.inBox", { label: openedLabel }) : ""}
            {data?.truncated ? t("graph.truncated") : ""}
          </span>
        )}
      </div>
      {err && <div className="error">{err}</div>}
      {progress && <div className="small muted">{t("graph.loading", { progress: t("graph.progress", progress) })}</div>}
      {data && data.nodes.length === 0 ? (
        <Empty title={t("graph.emptyTitle")}>
          {t("graph.emptyBody")}
        </Empty>
      ) : (
        <div
          className="graph-wrap"
          data-testid="graph-view"
          data-nodes={drawnNodes}
          data-edges={drawnEdges}
          data-mode={mode}
          data-loads={loads}
          data-patched={patched}
        >
          <div ref={container} style={{ position: "absolute", inset: 0 }} />
          <canvas ref={overlay} className="overlay" />
          {mode === "boxes" && agg ? (
            <div className="graph-legend graph-boxes" data-testid="graph-box-list">
              <div className="muted">{t("graph.boxesBySize")}</div>
              {agg.nodes.map((a) => (
                <button
                  key={a.id}
                  className="small"
                  data-testid="graph-box-item"
                  data-id={a.id}
                  data-members={a.members}
                  onClick={() => setOpenBox(a.id)}
                >
                  <span className="dot" style={{ background: a.index < 0 ? "#9aa3b5" : PALETTE[a.index % PALETTE.length] }} />
                  <span translate={a.id === UNBOXED ? undefined : "no"}>{a.id === UNBOXED ? t("graph.noBox") : a.label}</span> ({a.members})
                </button>
              ))}
            </div>
          ) : (
            <div className="graph-legend">
              {boxes.slice(0, 6).map((b, i) => (
                <span key={b.id} style={{ marginRight: 8 }}>
                  <span className="dot" style={{ background: PALETTE[i % PALETTE.length] }} />
                  <span translate="no">{b.label}</span>
                </span>
              ))}
              <span className="muted" data-testid="graph-proposed-legend">
                {dashed ? t("graph.dashed") : t("graph.amber")}
              </span>
              <span className="muted" data-testid="graph-supersedes-legend" style={{ marginLeft: 8 }}>
                <span style={{ display: "inline-block", width: 16, height: 2, background: SUPERSEDES_COLOUR, verticalAlign: "middle", marginRight: 4 }} />
                {t("graph.supersedes")}
              </span>
            </div>
          )}
        </div>
      )}
    </div>
  );
}
