// The whole memory as Boxes: one aggregate node per Box, sized by its members, and one
// weighted edge between two Boxes per pair that has links between their notes. Above
// `BOX_THRESHOLD` notes the Graph view starts here (level of detail) and a click opens a
// Box into its notes. Pure functions, shared by the view, the benchmark page and the tests.
import Graph from "graphology";
import type { BoxDto, GraphLinkDto, GraphNodeDto } from "../../api";
import { boxIndex, NO_BOX, PALETTE, type GraphData } from "./graphData";
import { getLang, translate } from "../../i18n";

/**
 * Above this many notes the whole-memory view shows Boxes instead of notes. Measured on the
 * benchmark page (docs/BENCHMARKS.md, "where the hairball starts"): in the fitted opening
 * view of a generated memory, 66 % of the nodes overlap another at 500 notes, 90 % at 1,000
 * and 99 % from 2,000 on, while edges cover a fifth to a third of the view; 2,000 is also
 * where the drawing switches to its cheap mode (`BIG`: no live layout, fewer labels).
 */
export const BOX_THRESHOLD = 2000;
const THRESHOLD_KEY = "kasten.graph.boxThreshold";

/** The threshold in force: this computer's setting (Graph view), else `BOX_THRESHOLD`. */
export function boxThreshold(): number {
  try {
    const v = Number(window.localStorage.getItem(THRESHOLD_KEY));
    return Number.isInteger(v) && v > 0 ? v : BOX_THRESHOLD;
  } catch {
    return BOX_THRESHOLD;
  }
}

/** Saves the threshold (`null`: back to the default). */
export function setBoxThreshold(n: number | null): void {
  try {
    if (n === null || n === BOX_THRESHOLD) window.localStorage.removeItem(THRESHOLD_KEY);
    else window.localStorage.setItem(THRESHOLD_KEY, String(n));
  } catch {
    /* storage unavailable: the default stays */
  }
}

/** The aggregate node of the notes in no (known) Box. */
export const UNBOXED = "unboxed";

export interface AggNode {
  /** The Box id, or `UNBOXED`. */
  id: string;
  label: string;
  /** Notes in the Box (a note in two Boxes counts in both). */
  members: number;
  /** The Box's place in the list (its colour); -1 for the unboxed notes. */
  index: number;
  /** Links between two of its notes. */
  internal: number;
}

export interface AggEdge {
  from: string;
  to: string;
  /** Links between the two Boxes' notes. */
  weight: number;
  /** How many of them wait for review. */
  proposed: number;
}

export interface Aggregate {
  nodes: AggNode[];
  edges: AggEdge[];
  /** Notes counted (after the tag filter). */
  notes: number;
  links: number;
}

export interface AggregateOptions {
  /** Only notes with this tag ("" for all). */
  tag?: string;
  /** Count proposed links too (default true). */
  showProposed?: boolean;
}

/**
 * A note's main Box: the first Box it lists (they come largest first) that `known` has,
 * else the first it lists at all, else `UNBOXED`.
 */
export function mainBox(n: GraphNodeDto, known: Map<string, number>): string {
  return n.boxes.find((b) => known.has(b)) ?? n.boxes[0] ?? UNBOXED;
}

/**
 * Notes + links + Boxes → the aggregate graph. Each link is counted once, between the main
 * Boxes of its two notes (inside one Box when they share it); several links between the
 * same two notes count once per link. Boxes with no member left (after the tag filter) are
 * left out, as is the unboxed node when every note is in a Box.
 */
export function aggregate(data: GraphData, boxes: BoxDto[], opts: AggregateOptions = {}): Aggregate {
  const tag = opts.tag ?? "";
  const showProposed = opts.showProposed ?? true;
  const index = boxIndex(boxes);
  const label = new Map(boxes.map((b) => [b.id, b.label]));
  // drawn on the canvas: in the UI's language when the aggregate is made
  const noBox = translate(getLang(), "graph.noBox");
  const someBox = translate(getLang(), "graph.someBox");
  // aggregates by number (a link is counted with integer keys, no strings per link)
  const nodes: AggNode[] = [];
  const slot = new Map<string, number>();
  const node = (id: string): number => {
    let k = slot.get(id);
    if (k === undefined) {
      k = nodes.length;
      slot.set(id, k);
      nodes.push({ id, label: id === UNBOXED ? noBox : (label.get(id) ?? `${someBox} ${id.slice(-6)}`), members: 0, index: index.get(id) ?? -1, internal: 0 });
    }
    return k;
  };
  const main = new Map<string, number>();
  let notes = 0;
  for (const n of data.nodes) {
    if (tag && !n.tags.includes(tag)) continue;
    notes++;
    main.set(n.id, node(mainBox(n, index)));
    if (n.boxes.length === 0) nodes[node(UNBOXED)].members++;
    else for (const b of n.boxes) nodes[node(b)].members++;
  }
  const weight = new Map<number, number>();
  const proposedCount = new Map<number, number>();
  let links = 0;
  for (const l of data.links) {
    const proposed = l.status === "proposed";
    if (!showProposed && proposed) continue;
    const a = main.get(l.from);
    const b = main.get(l.to);
    if (a === undefined || b === undefined || l.from === l.to) continue;
    links++;
    if (a === b) {
      nodes[a].internal++;
      continue;
    }
    const key = a < b ? a * 1048576 + b : b * 1048576 + a;
    weight.set(key, (weight.get(key) ?? 0) + 1);
    if (proposed) proposedCount.set(key, (proposedCount.get(key) ?? 0) + 1);
  }
  const edges: AggEdge[] = [];
  for (const [key, w] of weight) {
    const x = nodes[Math.floor(key / 1048576)].id;
    const y = nodes[key % 1048576].id;
    const [from, to] = x < y ? [x, y] : [y, x];
    edges.push({ from, to, weight: w, proposed: proposedCount.get(key) ?? 0 });
  }
  // largest first; the unboxed notes last
  const order = nodes
    .filter((a) => a.members > 0)
    .sort((x, y) => (x.id === UNBOXED ? 1 : 0) - (y.id === UNBOXED ? 1 : 0) || y.members - x.members || x.id.localeCompare(y.id));
  return { nodes: order, edges, notes, links };
}

/** An aggregate node's size on screen: grows with the square root of its members. */
export const boxNodeSize = (members: number, largest: number) => 6 + 24 * Math.sqrt(members / Math.max(largest, 1));
/** An aggregate edge's width: grows with the logarithm of its links. */
export const boxEdgeSize = (weight: number) => Math.min(1 + Math.log2(weight), 8);

function nodeAttrs(a: AggNode, largest: number) {
  return {
    label: `${a.label} (${a.members})`,
    size: boxNodeSize(a.members, largest),
    color: a.index < 0 ? NO_BOX : PALETTE[a.index % PALETTE.length],
    members: a.members,
    internal: a.internal,
    aggregate: true,
    // the reducers' filters read these (nothing to filter at this level)
    tags: [] as string[],
    boxes: a.id === UNBOXED ? [] : [a.id],
  };
}

function edgeAttrs(e: AggEdge) {
  return { weight: e.weight, size: boxEdgeSize(e.weight), proposed: false, color: "#b6bdcc" };
}

/**
 * Brings `g` (an aggregate graph, or an empty one) in line with `agg`, in place: nodes and
 * edges are added, updated or dropped, and positions kept, so a layout continues from where
 * it is. A new node starts next to the aggregate it has the heaviest edge to (else on a
 * circle). Returns whether nodes or edges were added or dropped.
 */
export function syncBoxGraph(g: Graph, agg: Aggregate): boolean {
  const largest = agg.nodes.reduce((m, a) => Math.max(m, a.members), 0);
  let changed = false;
  const want = new Set(agg.nodes.map((a) => a.id));
  for (const id of g.nodes()) {
    if (!want.has(id)) {
      g.dropNode(id);
      changed = true;
    }
  }
  const heaviest = new Map<string, { other: string; weight: number }>();
  for (const e of agg.edges) {
    for (const [x, y] of [
      [e.from, e.to],
      [e.to, e.from],
    ]) {
      const h = heaviest.get(x);
      if (!h || h.weight < e.weight) heaviest.set(x, { other: y, weight: e.weight });
    }
  }
  agg.nodes.forEach((a, i) => {
    const attrs = nodeAttrs(a, largest);
    if (g.hasNode(a.id)) {
      g.mergeNodeAttributes(a.id, attrs);
      return;
    }
    const h = heaviest.get(a.id);
    const near = h && g.hasNode(h.other) ? g.getNodeAttributes(h.other) : null;
    const angle = (2 * Math.PI * i) / Math.max(agg.nodes.length, 1);
    const r = 10 * Math.sqrt(agg.nodes.length);
    g.addNode(a.id, {
      ...attrs,
      x: near ? (near.x as number) + Math.cos(angle) * 2 : Math.cos(angle) * r,
      y: near ? (near.y as number) + Math.sin(angle) * 2 : Math.sin(angle) * r,
    });
    changed = true;
  });
  const wantEdges = new Set<string>();
  for (const e of agg.edges) {
    const key = `${e.from}\u0000${e.to}`;
    wantEdges.add(key);
    if (g.hasEdge(key)) g.mergeEdgeAttributes(key, edgeAttrs(e));
    else {
      g.addEdgeWithKey(key, e.from, e.to, edgeAttrs(e));
      changed = true;
    }
  }
  for (const key of g.edges()) {
    if (!wantEdges.has(key)) {
      g.dropEdge(key);
      changed = true;
    }
  }
  return changed;
}

/** A new aggregate graph (the Boxes of the whole memory). */
export function buildBoxGraph(agg: Aggregate): Graph {
  const g = new Graph({ type: "undirected", multi: false, allowSelfLoops: false });
  syncBoxGraph(g, agg);
  return g;
}

/**
 * The notes of one Box (`UNBOXED`: the notes in no Box) and the links between them: what a
 * click on an aggregate node opens.
 */
export function boxSubgraph(data: GraphData, boxId: string): GraphData {
  const inBox = (n: GraphNodeDto) => (boxId === UNBOXED ? n.boxes.length === 0 : n.boxes.includes(boxId));
  const nodes = data.nodes.filter(inBox);
  const ids = new Set(nodes.map((n) => n.id));
  const links: GraphLinkDto[] = data.links.filter((l) => ids.has(l.from) && ids.has(l.to));
  return { nodes, links, truncated: false };
}
