// Loading the graph a page at a time and turning it into a graphology graph.
import Graph from "graphology";
import type { Api, BoxDto, GraphLinkDto, GraphNodeDto } from "../../api";
import { edgeAttributes, SUPERSEDES_KIND } from "./graphStyle";

export const PAGE = 5000;

export interface GraphData {
  nodes: GraphNodeDto[];
  links: GraphLinkDto[];
  truncated: boolean;
}

/** Every note of the memory as a graph node, `PAGE` per call. */
export async function loadNodes(api: Pick<Api, "graphNodes">, onProgress?: (nodes: number) => void): Promise<GraphNodeDto[]> {
  const nodes: GraphNodeDto[] = [];
  let after: string | null = null;
  do {
    const p = await api.graphNodes(after, PAGE);
    nodes.push(...p.nodes);
    after = p.next;
    onProgress?.(nodes.length);
  } while (after);
  return nodes;
}

/** The whole memory, nodes then links, `PAGE` per call (never one big payload). */
export async function loadWhole(api: Api, onProgress?: (nodes: number, links: number) => void): Promise<GraphData> {
  const nodes = await loadNodes(api, (n) => onProgress?.(n, 0));
  const links: GraphLinkDto[] = [];
  let after: string | null = null;
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
/** A note waiting for enrichment (and in no Box yet): pale, until its job is done. */
export const PENDING = "#d3d8e2";
/** A note whose enrichment failed. */
export const FAILED = "#8c2f39";

/** A Box's position in the list (largest first), which picks its colour. */
export function boxIndex(boxes: BoxDto[]): Map<string, number> {
  return new Map(boxes.map((b, i) => [b.id, i]));
}

/** The faintest a note is drawn: a note about to be archived is still visible. */
export const FAINTEST = 0.35;

/** How opaque a note of this strength (0–1) is drawn: FAINTEST at 0, solid at full strength. */
export function strengthOpacity(strength: number | null): number {
  const s = strength !== null && Number.isFinite(strength) ? Math.min(Math.max(strength, 0), 1) : 1;
  return FAINTEST + (1 - FAINTEST) * s;
}

/** `#rrggbb` with the alpha of a note of this strength (`#rrggbbaa`, sigma reads it); solid unchanged. */
export function fadeBy(colour: string, strength: number | null): string {
  const alpha = Math.round(strengthOpacity(strength) * 255);
  if (alpha >= 255 || !/^#[0-9a-f]{6}$/i.test(colour)) return colour;
  return colour + alpha.toString(16).padStart(2, "0");
}

/** The opacity a `#rrggbbaa` colour is drawn with (1 for any other colour). */
export function opacityOf(colour: string): number {
  return /^#[0-9a-f]{8}$/i.test(colour) ? parseInt(colour.slice(7), 16) / 255 : 1;
}

/** A note's colour: its main Box's, else grey; pale while pending, dark red when failed;
 *  fainter as its strength fades (the lifecycle's decay; the Fading view lists the faintest). */
export function nodeColour(n: GraphNodeDto, index: Map<string, number>): string {
  return fadeBy(baseColour(n, index), n.strength);
}

function baseColour(n: GraphNodeDto, index: Map<string, number>): string {
  if (n.enrich === "failed") return FAILED;
  const b = n.boxes.map((id) => index.get(id)).find((i) => i !== undefined);
  if (b !== undefined) return PALETTE[b % PALETTE.length];
  return n.enrich === "pending" ? PENDING : NO_BOX;
}

/** Node sizes grow with degree. */
export const sizeFor = (degree: number) => Math.min(5 + Math.sqrt(degree) * 2, 16);

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
      color: nodeColour(n, index),
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
      // several kinds between the same pair: one edge, accepted wins over proposed, and a
      // supersession is drawn as one
      if (!proposed) g.setEdgeAttribute(l.from, l.to, "proposed", false);
      if (l.kind === SUPERSEDES_KIND) {
        const e = edgeAttributes(l.kind, false);
        g.mergeEdgeAttributes(l.from, l.to, { kind: e.kind, supersedes: true, size: e.size, color: e.color });
      }
      continue;
    }
    g.addEdgeWithKey(l.id, l.from, l.to, edgeAttributes(l.kind, proposed));
  }
  g.forEachNode((id) => {
    g.setNodeAttribute(id, "size", sizeFor(g.degree(id)));
  });
  return g;
}
