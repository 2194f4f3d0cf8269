import { useEffect, useMemo, useRef, useState } from "react";
import type Graph from "graphology";
import { api, errorText, type BoxDto } from "../../api";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import { buildGraph, loadWhole, PALETTE, type GraphData } from "./graphData";
import { mountGraph, type GraphStats as Stats, type Mounted } from "./mountGraph";

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

/** The link graph: whole memory or a note's neighbourhood, coloured by Box. */
export default function GraphView() {
  const { graphFocus, setGraphFocus, openNote, highlight, revision } = useApp();
  const container = useRef<HTMLDivElement>(null);
  const overlay = useRef<HTMLCanvasElement>(null);
  const [data, setData] = useState<GraphData | null>(null);
  const [boxes, setBoxes] = useState<BoxDto[]>([]);
  const [err, setErr] = useState<string | null>(null);
  const [progress, setProgress] = useState("");
  const [search, setSearch] = useState("");
  const [tag, setTag] = useState("");
  const [showProposed, setShowProposed] = useState(true);
  const [stats, setStats] = useState<Stats | null>(null);
  const dark = useDark();

  // Load (paged) whenever the focus or the memory changes.
  useEffect(() => {
    let gone = false;
    const t0 = performance.now();
    let pages = 0;
    const counting = {
      ...api,
      graphNodes: (a: string | null, l: number) => {
        pages++;
        return api.graphNodes(a, l);
      },
      graphLinks: (a: string | null, l: number) => {
        pages++;
        return api.graphLinks(a, l);
      },
    };
    const load: Promise<GraphData> = graphFocus.center
      ? api.localGraph(graphFocus.center, graphFocus.depth).then((g) => {
          pages = 1;
          return { nodes: g.nodes, links: g.links, truncated: g.truncated };
        })
      : loadWhole(counting, (n, l) => !gone && setProgress(`${n} notes, ${l} links`));
    Promise.all([load, api.listBoxes(200).catch(() => [] as BoxDto[])])
      .then(([d, b]) => {
        if (gone) return;
        setData(d);
        setBoxes(b);
        setErr(null);
        setProgress("");
        setStats({ nodes: d.nodes.length, edges: d.links.length, loadMs: Math.round(performance.now() - t0), pages });
      })
      .catch((e) => !gone && setErr(errorText(e)));
    return () => {
      gone = true;
    };
  }, [graphFocus.center, graphFocus.depth, revision]);

  const graph: Graph | null = useMemo(() => (data ? buildGraph(data, boxes) : null), [data, boxes]);
  const highlightSet = useMemo(() => new Set(highlight), [highlight]);
  const boxMembers = useMemo(() => {
    const id = graphFocus.boxId;
    if (!id) return null;
    return new Set((data?.nodes ?? []).filter((n) => n.boxes.includes(id)).map((n) => n.id));
  }, [data, graphFocus.boxId]);
  const tags = useMemo(() => {
    const c = new Map<string, number>();
    data?.nodes.forEach((n) => n.tags.forEach((t) => c.set(t, (c.get(t) ?? 0) + 1)));
    return [...c.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40);
  }, [data]);

  // The renderer; rebuilt with the graph, reducers read the filters through a ref.
  const filters = useRef({ search: "", tag: "", showProposed: true, highlightSet, boxMembers, center: graphFocus.center });
  filters.current = { search: search.trim().toLowerCase(), tag, showProposed, highlightSet, boxMembers, center: graphFocus.center };
  const mounted = useRef<Mounted | null>(null);
  const [dashed, setDashed] = useState(true);

  useEffect(() => {
    if (!graph || !container.current || !overlay.current || graph.order === 0) return;
    const m = mountGraph({
      graph,
      container: container.current,
      overlay: overlay.current,
      dark,
      filters: () => filters.current,
      onClickNode: openNote,
      whole: graphFocus.center === null,
    });
    mounted.current = m;
    setDashed(m.dashed);
    return () => {
      m.kill();
      mounted.current = null;
    };
    // graphFocus.center changes only together with `graph` (a new load)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [graph, dark, openNote]);

  useEffect(() => {
    if (window.__kastenGraph && stats) window.__kastenGraph.stats = stats;
  }, [stats, graph]);

  // Filters change: re-run the reducers.
  useEffect(() => {
    mounted.current?.refresh();
  }, [search, tag, showProposed, highlightSet, boxMembers]);

  const box = graphFocus.boxId ? boxes.find((b) => b.id === graphFocus.boxId) : null;

  return (
    <div className="view" style={{ display: "flex", flexDirection: "column", gap: 8 }}>
      <div className="row">
        <h2 style={{ margin: 0 }}>Graph</h2>
        <select
          aria-label="Graph scope"
          value={graphFocus.center ? "local" : "whole"}
          onChange={(e) => {
            if (e.target.value === "whole") setGraphFocus({ ...graphFocus, center: null });
          }}
        >
          <option value="whole">whole memory</option>
          <option value="local" disabled={!graphFocus.center}>
            around a note
          </option>
        </select>
        {graphFocus.center && (
          <label className="small">
            depth{" "}
            <select
              aria-label="Depth"
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
            Box: {box.label}{" "}
            <button className="small" onClick={() => setGraphFocus({ ...graphFocus, boxId: null })} aria-label="Clear Box">
              ×
            </button>
          </span>
        )}
        <select value={tag} onChange={(e) => setTag(e.target.value)} aria-label="Filter by tag">
          <option value="">any tag</option>
          {tags.map(([t, n]) => (
            <option key={t} value={t}>
              #{t} ({n})
            </option>
          ))}
        </select>
        <label className="small">
          <input type="checkbox" checked={showProposed} onChange={(e) => setShowProposed(e.target.checked)} /> proposed links
        </label>
        <input placeholder="Highlight…" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Highlight notes" />
        <span className="grow" />
        {stats && (
          <span className="small muted">
            {stats.nodes} notes · {stats.edges} links
            {data?.truncated ? " (neighbourhood cut at 2,000)" : ""}
          </span>
        )}
      </div>
      {err && <div className="error">{err}</div>}
      {progress && <div className="small muted">Loading {progress}…</div>}
      {data && data.nodes.length === 0 ? (
        <Empty title="Nothing to draw yet.">
          Each note is a dot and each link a line; colours are Boxes (clusters of linked notes), dashed lines are links
          waiting for your review. Write a few related notes and let the LLM link them.
        </Empty>
      ) : (
        <div className="graph-wrap" data-testid="graph-view" data-nodes={stats?.nodes ?? 0} data-edges={stats?.edges ?? 0}>
          <div ref={container} style={{ position: "absolute", inset: 0 }} />
          <canvas ref={overlay} className="overlay" />
          <div className="graph-legend">
            {boxes.slice(0, 6).map((b, i) => (
              <span key={b.id} style={{ marginRight: 8 }}>
                <span className="dot" style={{ background: PALETTE[i % PALETTE.length] }} />
                {b.label}
              </span>
            ))}
            <span className="muted" data-testid="graph-proposed-legend">
              {dashed ? "– – proposed" : "amber lines: proposed"}
            </span>
          </div>
        </div>
      )}
    </div>
  );
}
