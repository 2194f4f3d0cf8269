// Laying the graph out: ForceAtlas2 synchronously for small graphs, in a web worker for
// larger ones. Large graphs are laid out on a positions-only copy and the result is
// applied once (one sigma refresh instead of one per layout tick); the whole memory's
// positions are kept for the session, so reopening the graph or reloading it after a job
// reuses them instead of laying everything out again.
import Graph from "graphology";
import type { Attributes } from "graphology-types";
import FA2Layout from "graphology-layout-forceatlas2/worker";
import forceAtlas2 from "graphology-layout-forceatlas2";
import { BIG } from "./graphStyle";

export type Positions = Map<string, { x: number; y: number }>;

/** The whole memory's last layout (this session). */
const wholeMemory: Positions = new Map();

export function cachedPositions(): Positions {
  return wholeMemory;
}

/** Copies the graph's positions into `into`. */
export function savePositions(graph: Graph, into: Positions = wholeMemory): void {
  graph.forEachNode((id, a) => into.set(id, { x: a.x as number, y: a.y as number }));
}

/**
 * Gives nodes their saved positions; a node without one goes next to a placed neighbour
 * (its initial position otherwise). Returns how many nodes had no saved position.
 */
export function applyPositions(graph: Graph, from: Positions): number {
  let missing = 0;
  const placed = new Set<string>();
  graph.updateEachNodeAttributes(
    (id, a) => {
      const p = from.get(id);
      if (p) {
        a.x = p.x;
        a.y = p.y;
        placed.add(id);
      } else missing++;
      return a;
    },
    { attributes: ["x", "y"] },
  );
  if (missing > 0) {
    graph.forEachNode((id, a: Attributes) => {
      if (placed.has(id)) return;
      const near = graph.findNeighbor(id, (n) => placed.has(n));
      if (!near) return;
      const p = from.get(near)!;
      // a small, deterministic offset so that new neighbours of one note do not overlap
      const k = (graph.degree(id) + id.length) % 8;
      a.x = p.x + Math.cos(k) * 0.5;
      a.y = p.y + Math.sin(k) * 0.5;
    });
  }
  return missing;
}

export interface Layout {
  running: () => boolean;
  stop: () => void;
}

/** How long a worker layout runs for a graph of `order` nodes (ms). */
export const layoutBudget = (order: number) => Math.min(2000 + order / 4, 8000);

export interface LayoutOptions {
  /** Iterations of a synchronous layout (small graphs); 150 by default. */
  iterations?: number;
  /** How long a worker layout runs (ms); `layoutBudget` by default. */
  budgetMs?: number;
}

/**
 * Lays `graph` out from its current positions. Small graphs (≤ 300 nodes) synchronously;
 * up to `BIG` nodes in a worker that moves the nodes live (nodes and edges added meanwhile
 * join it where they are); above that in a worker on a copy, applied once when it stops
 * (nodes added meanwhile go next to a neighbour then). `done` runs after the positions are
 * final. Run again on a graph already laid out, it continues from where it is.
 */
export function startLayout(graph: Graph, done: () => void, opts: LayoutOptions = {}): Layout {
  if (graph.order <= 300) {
    forceAtlas2.assign(graph, { iterations: opts.iterations ?? 150, settings: forceAtlas2.inferSettings(graph) });
    done();
    return { running: () => false, stop: () => {} };
  }
  const settings = { ...forceAtlas2.inferSettings(graph), barnesHutOptimize: graph.order > 1000 };
  const live = graph.order <= BIG;
  let target: Graph = graph;
  if (!live) {
    target = new Graph({ type: "undirected", multi: false });
    graph.forEachNode((id, a) => target.addNode(id, { x: a.x, y: a.y, size: a.size }));
    graph.forEachEdge((_e, _a, s, t) => target.mergeEdge(s, t));
  }
  const fa2 = new FA2Layout(target, { settings });
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    fa2.kill();
    if (!live) {
      const laid: Positions = new Map();
      target.forEachNode((id, a) => laid.set(id, { x: a.x as number, y: a.y as number }));
      applyPositions(graph, laid);
    }
    done();
  };
  fa2.start();
  const timer = window.setTimeout(finish, opts.budgetMs ?? layoutBudget(graph.order));
  return {
    running: () => !finished,
    stop: () => {
      window.clearTimeout(timer);
      if (!finished) {
        finished = true;
        fa2.kill();
      }
    },
  };
}
