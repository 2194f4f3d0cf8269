// Loading the graph a page at a time and turning it into a graphology graph.
import Graph from "graphology";
import type { Api, BoxDto, GraphLinkDto, GraphNodeDto } from "../../api";

export const PAGE = 5000;

export interface GraphData {
  nodes: GraphNodeDto[];
  links: GraphLinkDto[];
  truncated: boolean;
}

/** The whole memory, nodes then links, `PAGE` per call (never one big payload). */
export async function loadWhole(api: Api, onProgress?: (nodes: number, links: number) => void): Promise<GraphData> {
  const nodes: GraphNodeDto[] = [];
  const links: GraphLinkDto[] = [];
  let after: string | null = null;
  do {
    const p = await api.graphNodes(after, PAGE);
    nodes.push(...p.nodes);
    after = p.next;
    onProgress?.(nodes.length, 0);
  } while (after);
  after = null;
  do {
    const p = await api.graphLinks(after, PAGE);
    links.push(...p.links);
    after = p.next;
    onProgress?.(nodes.length, links.length);
  } while (after);
  return { nodes, links, truncated: false };
}

export const PALETTE = [
  "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
  "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6", "#d37295", "#8cd17d",
];
export const NO_BOX = "#9aa3b5";

/** A Box's position in the list (largest first), which picks its colour. */
export function boxIndex(boxes: BoxDto[]): Map<string, number> {
  return new Map(boxes.map((b, i) => [b.id, i]));
}

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return (h >>> 0) / 4294967296;
}

/**
 * A graphology graph: nodes coloured by Box, proposed links flagged (drawn dashed),
 * rejected and rolled-back links never arrive (the shell filters them). Positions start
 * on a deterministic disc around each Box's centre, so the layout has little left to do.
 */
export function buildGraph(data: GraphData, boxes: BoxDto[]): Graph {
  const g = new Graph({ type: "undirected", multi: false, allowSelfLoops: false });
  const index = boxIndex(boxes);
  const nb = Math.max(boxes.length, 1);
  for (const n of data.nodes) {
    // the largest Box the note is in
    const b = n.boxes.map((id) => index.get(id)).find((i) => i !== undefined);
    const angle = 2 * Math.PI * ((b ?? nb) / (nb + 1));
    const cx = b === undefined ? 0 : Math.cos(angle) * 10;
    const cy = b === undefined ? 0 : Math.sin(angle) * 10;
    const r = 6 * Math.sqrt(hash(n.id));
    const a = 2 * Math.PI * hash(n.id + "a");
    g.addNode(n.id, {
      label: n.label,
      x: cx + r * Math.cos(a),
      y: cy + r * Math.sin(a),
      size: 5,
      color: b === undefined ? NO_BOX : PALETTE[b % PALETTE.length],
      tags: n.tags,
      box: b ?? -1,
      boxes: n.boxes,
      enrich: n.enrich,
    });
  }
  for (const l of data.links) {
    if (!g.hasNode(l.from) || !g.hasNode(l.to) || l.from === l.to) continue;
    const proposed = l.status === "proposed";
    if (g.hasEdge(l.from, l.to)) {
      // several kinds between the same pair: one edge, accepted wins over proposed
      if (!proposed) g.setEdgeAttribute(l.from, l.to, "proposed", false);
      continue;
    }
    g.addEdgeWithKey(l.id, l.from, l.to, { proposed, kind: l.kind, size: 1, color: "#b6bdcc" });
  }
  g.forEachNode((id) => {
    g.setNodeAttribute(id, "size", Math.min(5 + Math.sqrt(g.degree(id)) * 2, 16));
  });
  return g;
}
