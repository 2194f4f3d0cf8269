// Draws a graphology graph with sigma: reducers, proposed links dashed on a 2D overlay,
// layout, and the `window.__kastenGraph` probe. Shared by the Graph view and the
// benchmark page (bench/graph.html), so both measure the same code.
import Sigma from "sigma";
import { EdgeLineProgram } from "sigma/rendering";
import type Graph from "graphology";
import { BIG, coloursFor, DASHED_MAX, MOVE_FRAME, edgeReducer, nodeReducer, passes, sigmaSettings, type Filters } from "./graphStyle";
import { opacityOf } from "./graphData";
import { applyPositions, cachedPositions, savePositions, startLayout } from "./layout";

export interface GraphStats {
  nodes: number;
  edges: number;
  loadMs: number;
  pages: number;
}

/** Frame times (ms between animation frames) while the camera moves. */
export interface FrameOptions {
  /**
   * "animate" (default): camera animations, as wheel zoom and inertia panning are (large
   * graphs move their last frame meanwhile and redraw once still). "redraw": the camera is
   * set and the graph drawn in full every frame (the worst case).
   */
  mode?: "animate" | "redraw";
}

declare global {
  interface Window {
    /** Figures for the e2e suite and the performance notes. */
    __kastenGraph?: {
      stats: GraphStats;
      layoutRunning: () => boolean;
      /** Animates the camera for `frames` frames; resolves to per-frame times in ms. */
      measureFrames: (frames: number, opts?: FrameOptions) => Promise<number[]>;
      /** Milliseconds of one full refresh (reducers re-run, as when a filter changes). */
      measureRefresh: () => number;
      /** Milliseconds of one synchronous render (no reprocessing), as a camera move needs. */
      measureRender: () => number;
      /** Milliseconds of one redraw of the dashed overlay. */
      measureOverlay: () => number;
      /** Changes a sigma setting (for measurements). */
      setSetting: (key: string, value: unknown) => void;
      nodeIds: () => string[];
      /** How opaque a note is drawn (0–1): its strength fades it (see `strengthOpacity`). */
      nodeOpacity: (id: string) => number;
      /** Nodes the current filters (Box, tag) leave visible. */
      visibleNodes: () => number;
      /** Proposed links drawn dashed on the overlay (0 when drawn as GL lines). */
      dashedLinks: () => number;
      clickNode: (id: string) => void;
    };
  }
}

/** Large graphs are redrawn once the camera has been still this long (ms). */
export const STILL_MS = 120;

export interface MountOptions {
  graph: Graph;
  container: HTMLElement;
  overlay: HTMLCanvasElement;
  dark: boolean;
  /** The current filters (read at every refresh). */
  filters: () => Omit<Filters, "dashed">;
  onClickNode: (id: string) => void;
  /** The whole memory (its layout is kept for the session), not a local graph. */
  whole: boolean;
  /** Called once the layout is final. */
  onLayoutDone?: () => void;
}

export interface Mounted {
  /** Proposed links are drawn dashed (few of them), else as amber lines. */
  dashed: boolean;
  /** Re-runs the reducers (after a filter change). */
  refresh: () => void;
  /**
   * The graph was changed in place (a job's note merged): the overlay's list is rebuilt and,
   * when nodes or edges were added to a graph of at most `BIG` nodes whose layout has
   * stopped, the layout runs a little longer from the current positions.
   */
  changed: (grew: boolean) => void;
  kill: () => void;
}

export function mountGraph(o: MountOptions): Mounted {
  const { graph, container, overlay, dark } = o;
  const colours = coloursFor(dark);
  const big = graph.order > BIG;
  let proposed = 0;
  graph.forEachEdge((_e, a) => {
    if (a.proposed) proposed++;
  });
  // the overlay's list of visible proposed links, rebuilt at each refresh
  let dashedPairs: string[] = [];
  const dashed = proposed <= DASHED_MAX;
  const filters = (): Filters => ({ ...o.filters(), dashed });
  let current = filters();
  // the filters and the overlay's list are read once per refresh, not once per node
  const update = () => {
    current = filters();
    dashedPairs = [];
    if (!current.dashed || !current.showProposed || proposed === 0) return;
    graph.forEachEdge((_e, a, s, t, sa, ta) => {
      if (a.proposed && passes(current, s, sa) && passes(current, t, ta)) dashedPairs.push(s, t);
    });
  };
  update();
  const renderer = new Sigma(graph, container, {
    ...sigmaSettings(graph.order),
    ...(big ? { edgeProgramClasses: { line: EdgeLineProgram }, defaultEdgeType: "line" } : {}),
    labelColor: { color: dark ? "#e5e7ee" : "#1d2230" },
    defaultEdgeColor: dark ? "#465069" : "#c3c9d6",
    nodeReducer: nodeReducer(() => current, colours),
    edgeReducer: edgeReducer(() => current, colours),
  });
  renderer.on("clickNode", ({ node }) => o.onClickNode(node));
  renderer.on("enterNode", () => (container.style.cursor = "pointer"));
  renderer.on("leaveNode", () => (container.style.cursor = "default"));

  // Dashed proposed links on the 2D overlay, redrawn after each frame.
  let overlayDrawn = false;
  const drawOverlay = () => {
    const dpr = window.devicePixelRatio || 1;
    const w = container.clientWidth;
    const h = container.clientHeight;
    if (overlay.width !== w * dpr || overlay.height !== h * dpr) {
      overlay.width = w * dpr;
      overlay.height = h * dpr;
      overlayDrawn = true;
    }
    const ctx = overlay.getContext("2d");
    if (!ctx) return;
    if (dashedPairs.length === 0) {
      // nothing to draw: an empty layer is left out of compositing
      if (overlayDrawn) {
        ctx.setTransform(1, 0, 0, 1, 0, 0);
        ctx.clearRect(0, 0, overlay.width, overlay.height);
        overlayDrawn = false;
      }
      overlay.style.display = "none";
      return;
    }
    overlay.style.display = "";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.setLineDash([5, 4]);
    ctx.strokeStyle = colours.proposed;
    ctx.lineWidth = 1.2;
    ctx.beginPath();
    for (let i = 0; i < dashedPairs.length; i += 2) {
      const sa = renderer.getNodeDisplayData(dashedPairs[i]);
      const ta = renderer.getNodeDisplayData(dashedPairs[i + 1]);
      if (!sa || !ta) continue;
      const p = renderer.framedGraphToViewport(sa);
      const q = renderer.framedGraphToViewport(ta);
      if ((p.x < 0 && q.x < 0) || (p.y < 0 && q.y < 0) || (p.x > w && q.x > w) || (p.y > h && q.y > h)) continue;
      ctx.moveTo(p.x, p.y);
      ctx.lineTo(q.x, q.y);
    }
    ctx.stroke();
    overlayDrawn = true;
  };
  renderer.on("afterRender", drawOverlay);

  // Larger graphs: while the camera moves, the last full frame is moved, scaled and turned
  // with a CSS transform (as maps do) instead of being redrawn: a full frame of 10k notes
  // costs 0.3-1 s in software rendering; a transform costs the compositor only, and the
  // layers with nothing to show meanwhile (hover layers) are taken out of it. Sigma draws
  // the new view once the camera has been still for `STILL_MS` and one more frame.
  const camera = renderer.getCamera();
  const layer = (name: string) => container.querySelector<HTMLCanvasElement>(`canvas.sigma-${name}`);
  // edge labels are never drawn: one layer less to composite
  const edgeLabels = layer("edgeLabels");
  if (edgeLabels) edgeLabels.style.display = "none";
  let drawnState = camera.getState();
  let following = false;
  const moved = () => [layer("edges"), layer("nodes"), layer("labels"), overlay];
  const paused = () => [layer("hovers"), layer("hoverNodes")];
  renderer.on("afterRender", () => {
    drawnState = camera.getState();
    if (!following) return;
    following = false;
    for (const el of moved()) if (el) el.style.transform = "";
    for (const el of paused()) if (el) el.style.display = "";
  });
  let stillTimer = 0;
  if (graph.order > MOVE_FRAME) {
    const scheduleRender = renderer.scheduleRender.bind(renderer);
    const follow = () => {
      const w = container.clientWidth;
      const h = container.clientHeight;
      if (w === 0 || h === 0) return;
      const now = camera.getState();
      // where three corners of the drawn frame are now
      const [o, px, py] = [
        { x: 0, y: 0 },
        { x: w, y: 0 },
        { x: 0, y: h },
      ].map((p) => renderer.framedGraphToViewport(renderer.viewportToFramedGraph(p, { cameraState: drawnState }), { cameraState: now }));
      const m = `matrix(${(px.x - o.x) / w}, ${(px.y - o.y) / w}, ${(py.x - o.x) / h}, ${(py.y - o.y) / h}, ${o.x}, ${o.y})`;
      for (const el of moved()) {
        if (!el) continue;
        el.style.transformOrigin = "0 0";
        el.style.transform = m;
      }
      if (!following) for (const el of paused()) if (el) el.style.display = "none";
      following = true;
    };
    let updates = 0;
    const whenStill = () => {
      const seen = updates;
      requestAnimationFrame(() => {
        if (updates === seen) scheduleRender();
      });
    };
    renderer.scheduleRender = () => {
      // not a camera move (a layout tick, a refresh): drawn as usual
      const now = camera.getState();
      const still = now.x === drawnState.x && now.y === drawnState.y && now.ratio === drawnState.ratio && now.angle === drawnState.angle;
      if (still && !following) return scheduleRender();
      follow();
      updates++;
      window.clearTimeout(stillTimer);
      stillTimer = window.setTimeout(whenStill, STILL_MS);
      return renderer;
    };
  }

  // Layout: the whole memory reuses this session's positions when nearly all notes have one.
  let onLayoutDone = () => {
    if (o.whole) savePositions(graph);
    o.onLayoutDone?.();
  };
  const cache = cachedPositions();
  let layout: { running: () => boolean; stop: () => void } = { running: () => false, stop: () => {} };
  if (o.whole && cache.size > 0 && applyPositions(graph, cache) <= graph.order * 0.05) {
    onLayoutDone();
  } else {
    layout = startLayout(graph, () => onLayoutDone());
  }

  window.__kastenGraph = {
    stats: { nodes: graph.order, edges: graph.size, loadMs: 0, pages: 0 },
    layoutRunning: () => layout.running(),
    nodeIds: () => graph.nodes(),
    nodeOpacity: (id: string) => opacityOf(String(graph.getNodeAttribute(id, "color") ?? "")),
    visibleNodes: () => graph.filterNodes((id, a) => passes(current, id, a)).length,
    dashedLinks: () => dashedPairs.length / 2,
    clickNode: (id: string) => o.onClickNode(id),
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
    measureOverlay: () => {
      const t = performance.now();
      drawOverlay();
      return performance.now() - t;
    },
    measureFrames: (frames: number, opts: FrameOptions = {}) =>
      new Promise((resolve) => {
        const times: number[] = [];
        const cam = renderer.getCamera();
        const start = cam.getState();
        let last = performance.now();
        let i = 0;
        const step = () => {
          const now = performance.now();
          if (i > 0) times.push(now - last);
          last = now;
          if (i++ >= frames) {
            // back to where it started (this also ends a running animation)
            void cam.animate(start, { duration: 1 });
            resolve(times);
            return;
          }
          // zoom in and out, pan and turn a little
          const state = { ratio: 1 + 0.3 * Math.sin(i / 10), angle: i / 200, x: 0.5 + 0.1 * Math.sin(i / 7), y: 0.5 };
          if (opts.mode === "redraw") {
            cam.setState(state);
            // eslint-disable-next-line @typescript-eslint/no-explicit-any
            (renderer as any).render();
          }
          else if (!cam.isAnimated()) void cam.animate(state, { duration: 2000 });
          requestAnimationFrame(step);
        };
        requestAnimationFrame(step);
      }),
  };

  return {
    dashed,
    refresh: () => {
      update();
      renderer.refresh();
    },
    changed: (grew: boolean) => {
      update();
      renderer.scheduleRefresh();
      if (grew && !layout.running() && graph.order <= BIG) {
        layout = startLayout(graph, () => onLayoutDone(), { iterations: 30, budgetMs: 1500 });
      }
    },
    kill: () => {
      window.clearTimeout(stillTimer);
      onLayoutDone = () => {};
      layout.stop();
      renderer.kill();
    },
  };
}
