import { useEffect, useMemo, useRef, useState } from "react";
import Sigma from "sigma";
import { EdgeLineProgram } from "sigma/rendering";
import type Graph from "graphology";
import FA2Layout from "graphology-layout-forceatlas2/worker";
import forceAtlas2 from "graphology-layout-forceatlas2";
import { api, errorText, type BoxDto } from "../../api";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import { buildGraph, loadWhole, PALETTE, type GraphData } from "./graphData";

interface Stats {
  nodes: number;
  edges: number;
  loadMs: number;
  pages: number;
}

declare global {
  interface Window {
    /** Figures for the e2e suite and the performance note. */
    __kastenGraph?: {
      stats: Stats;
      layoutRunning: () => boolean;
      /** Animates the camera for `frames` frames; resolves to per-frame times in ms. */
      measureFrames: (frames: number) => Promise<number[]>;
      /** Milliseconds of one full refresh (reducers re-run, as when a filter changes). */
      measureRefresh: () => number;
      /** Milliseconds of one synchronous render (no reprocessing), as a camera move needs. */
      measureRender: () => number;
      /** Changes a sigma setting (for measurements). */
      setSetting: (key: string, value: unknown) => void;
      nodeIds: () => string[];
      /** Nodes the current filters (Box, tag) leave visible. */
      visibleNodes: () => number;
      clickNode: (id: string) => void;
    };
  }
}

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
  const sigmaRef = useRef<Sigma | null>(null);

  useEffect(() => {
    if (!graph || !container.current || graph.order === 0) return;
    const fg = dark ? "#e5e7ee" : "#1d2230";
    const visible = (id: string, a: Record<string, unknown>) => {
      const f = filters.current;
      if (f.boxMembers && !f.boxMembers.has(id)) return false;
      if (f.tag && !(a.tags as string[]).includes(f.tag)) return false;
      return true;
    };
    const big = graph.order > 2000;
    const renderer = new Sigma(graph, container.current, {
      renderEdgeLabels: false,
      // large graphs: 1-pixel GL lines instead of quads, and no edges/labels while dragging
      ...(big ? { edgeProgramClasses: { line: EdgeLineProgram }, hideEdgesOnMove: true, hideLabelsOnMove: true } : {}),
      labelColor: { color: fg },
      labelRenderedSizeThreshold: graph.order > 2000 ? 12 : 6,
      defaultEdgeColor: dark ? "#465069" : "#c3c9d6",
      zIndex: true,
      nodeReducer: (id, a) => {
        const f = filters.current;
        if (!visible(id, a)) return { ...a, hidden: true };
        const hit =
          f.highlightSet.has(id) || (f.search !== "" && String(a.label ?? "").toLowerCase().includes(f.search));
        if (hit || id === f.center) return { ...a, size: (a.size as number) * 1.8, highlighted: true, zIndex: 2 };
        if (f.search !== "" || f.highlightSet.size > 0) return { ...a, color: dark ? "#3a4152" : "#dfe3ea", label: "", zIndex: 0 };
        return a;
      },
      edgeReducer: (id, a) => {
        const [s, t] = graph.extremities(id);
        if (!visible(s, graph.getNodeAttributes(s)) || !visible(t, graph.getNodeAttributes(t))) return { ...a, hidden: true };
        // proposed links are drawn dashed on the overlay instead
        if (a.proposed) return { ...a, hidden: true };
        return a;
      },
    });
    sigmaRef.current = renderer;
    renderer.on("clickNode", ({ node }) => openNote(node));
    renderer.on("enterNode", () => container.current && (container.current.style.cursor = "pointer"));
    renderer.on("leaveNode", () => container.current && (container.current.style.cursor = "default"));

    // Dashed proposed links on a 2D overlay, redrawn after each frame.
    const drawOverlay = () => {
      const c = overlay.current;
      const box = container.current;
      if (!c || !box) return;
      const dpr = window.devicePixelRatio || 1;
      const w = box.clientWidth;
      const h = box.clientHeight;
      if (c.width !== w * dpr || c.height !== h * dpr) {
        c.width = w * dpr;
        c.height = h * dpr;
      }
      const ctx = c.getContext("2d");
      if (!ctx) return;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      if (!filters.current.showProposed) return;
      ctx.setLineDash([5, 4]);
      ctx.strokeStyle = dark ? "#e0a84a" : "#c0841a";
      ctx.lineWidth = 1.2;
      ctx.beginPath();
      graph.forEachEdge((_e, a, s, t, sa, ta) => {
        if (!a.proposed || !visible(s, sa) || !visible(t, ta)) return;
        const p = renderer.graphToViewport({ x: sa.x as number, y: sa.y as number });
        const q = renderer.graphToViewport({ x: ta.x as number, y: ta.y as number });
        if ((p.x < 0 && q.x < 0) || (p.y < 0 && q.y < 0) || (p.x > w && q.x > w) || (p.y > h && q.y > h)) return;
        ctx.moveTo(p.x, p.y);
        ctx.lineTo(q.x, q.y);
      });
      ctx.stroke();
    };
    renderer.on("afterRender", drawOverlay);

    // Layout: a few seconds of ForceAtlas2 in a worker (small graphs: synchronously).
    let layout: FA2Layout | null = null;
    let stopTimer = 0;
    if (graph.order <= 300) {
      forceAtlas2.assign(graph, { iterations: 150, settings: forceAtlas2.inferSettings(graph) });
    } else {
      layout = new FA2Layout(graph, {
        settings: { ...forceAtlas2.inferSettings(graph), barnesHutOptimize: graph.order > 1000 },
      });
      layout.start();
      stopTimer = window.setTimeout(() => layout?.stop(), Math.min(2000 + graph.order / 4, 8000));
    }

    window.__kastenGraph = {
      stats: { nodes: graph.order, edges: graph.size, loadMs: 0, pages: 0 },
      layoutRunning: () => !!layout?.isRunning(),
      nodeIds: () => graph.nodes(),
      visibleNodes: () => graph.filterNodes((id, a) => visible(id, a)).length,
      clickNode: (id: string) => openNote(id),
      setSetting: (key: string, value: unknown) => {
        // eslint-disable-next-line @typescript-eslint/no-explicit-any
        renderer.setSetting(key as any, value as any);
      },
      measureRender: () => {
        const t = performance.now();
        // eslint-disable-next-line @typescript-eslint/no-explicit-any
        (renderer as any).render();
        return performance.now() - t;
      },
      measureRefresh: () => {
        const t = performance.now();
        renderer.refresh();
        return performance.now() - t;
      },
      measureFrames: (frames: number) =>
        new Promise((resolve) => {
          const times: number[] = [];
          const cam = renderer.getCamera();
          let last = performance.now();
          let i = 0;
          const step = () => {
            const now = performance.now();
            if (i > 0) times.push(now - last);
            last = now;
            if (i++ >= frames) {
              cam.setState({ ratio: 1, angle: 0 });
              resolve(times);
              return;
            }
            // zoom and rotate a little every frame: sigma redraws every node and edge
            cam.setState({ ratio: 1 + 0.3 * Math.sin(i / 10), angle: i / 200 });
            requestAnimationFrame(step);
          };
          requestAnimationFrame(step);
        }),
    };

    return () => {
      window.clearTimeout(stopTimer);
      layout?.kill();
      renderer.kill();
      sigmaRef.current = null;
    };
  }, [graph, dark, openNote]);

  useEffect(() => {
    if (window.__kastenGraph && stats) window.__kastenGraph.stats = stats;
  }, [stats, graph]);

  // Filters change: re-run the reducers.
  useEffect(() => {
    sigmaRef.current?.refresh();
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
            <span className="muted">– – proposed</span>
          </div>
        </div>
      )}
    </div>
  );
}
