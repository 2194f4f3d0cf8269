// Job events change the graph in place: a finished enrichment job is fetched as the note's
// neighbourhood (`localGraph(note, 1)`: the note, its links and the notes at their other
// ends) and merged into the loaded data and the drawn graph; a deleted note is dropped.
// Positions are kept, new notes start next to a linked note, so the layout goes on from
// where it is instead of starting again.
import type Graph from "graphology";
import { ApiError, type Api, type BoxDto, type GraphLinkDto, type GraphNodeDto } from "../../api";
import { boxIndex, nodeColour, sizeFor, type GraphData } from "./graphData";
import { edgeAttributes, SUPERSEDES_KIND } from "./graphStyle";

/** What one job changed: the note's neighbourhood now, or that the note is gone. */
export type Patch = { note: string; nodes: GraphNodeDto[]; links: GraphLinkDto[] } | { note: string; gone: true };

const touches = (l: GraphLinkDto, id: string) => l.from === id || l.to === id;

/**
 * The loaded data with a patch merged: the patch's nodes replace (or join) the loaded ones,
 * the note's links become exactly the patch's links that touch it (a link no longer there,
 * rejected or rolled back, goes), and a gone note leaves with its links. Links between two
 * other notes are left as they were. Returns a new object; `data` is not changed.
 */
export function patchData(data: GraphData, p: Patch): GraphData {
  if ("gone" in p) {
    return {
      ...data,
      nodes: data.nodes.filter((n) => n.id !== p.note),
      links: data.links.filter((l) => !touches(l, p.note)),
    };
  }
  const fresh = new Map(p.nodes.map((n) => [n.id, n]));
  const nodes = data.nodes.map((n) => {
    const f = fresh.get(n.id);
    if (f) fresh.delete(n.id);
    return f ?? n;
  });
  nodes.push(...fresh.values());
  const links = data.links.filter((l) => !touches(l, p.note));
  links.push(...p.links.filter((l) => touches(l, p.note) && l.from !== l.to));
  return { ...data, nodes, links };
}

export interface GraphChange {
  added: string[];
  removed: string[];
  recoloured: string[];
  edgesAdded: number;
  edgesRemoved: number;
}

/**
 * Merges a patch into a drawn (graphology) graph in place, as `buildGraph` would have drawn
 * it: nodes updated (label, tags, Boxes, status, colour), new ones placed next to a linked
 * node already drawn, the note's edges made to match its links (one edge per pair of notes,
 * proposed only when every link between them is), sizes by degree. `admit` decides which
 * new notes may join (an opened Box takes only its members; all by default); edges are drawn
 * only between notes in the graph.
 */
export function patchGraph(g: Graph, p: Patch, boxes: BoxDto[], admit: (n: GraphNodeDto) => boolean = () => true): GraphChange {
  const change: GraphChange = { added: [], removed: [], recoloured: [], edgesAdded: 0, edgesRemoved: 0 };
  const touched = new Set<string>();
  if ("gone" in p) {
    if (g.hasNode(p.note)) {
      g.forEachNeighbor(p.note, (n) => touched.add(n));
      change.edgesRemoved += g.degree(p.note);
      g.dropNode(p.note);
      change.removed.push(p.note);
    }
    resize(g, touched);
    return change;
  }
  const index = boxIndex(boxes);
  const links = p.links.filter((l) => touches(l, p.note) && l.from !== l.to);
  // update the nodes the graph has; add the new ones it admits
  const fresh: GraphNodeDto[] = [];
  for (const n of p.nodes) {
    if (g.hasNode(n.id)) {
      const colour = nodeColour(n, index);
      if (g.getNodeAttribute(n.id, "color") !== colour) change.recoloured.push(n.id);
      g.mergeNodeAttributes(n.id, { label: n.label, tags: n.tags, boxes: n.boxes, enrich: n.enrich, color: colour, box: primaryIndex(n, index) });
    } else if (admit(n) && (n.id === p.note || links.some((l) => touches(l, n.id)))) fresh.push(n);
  }
  // the note first, so its neighbours can be placed next to it and the other way round
  fresh.sort((a, b) => (a.id === p.note ? -1 : b.id === p.note ? 1 : 0));
  for (const n of fresh) {
    const pos = placeNear(g, n.id, links);
    g.addNode(n.id, {
      label: n.label,
      x: pos.x,
      y: pos.y,
      size: 5,
      color: nodeColour(n, index),
      tags: n.tags,
      box: primaryIndex(n, index),
      boxes: n.boxes,
      enrich: n.enrich,
    });
    change.added.push(n.id);
  }
  if (!g.hasNode(p.note)) return change;
  touched.add(p.note);
  // the note's edges: one per neighbour, proposed only if every link to it is
  const want = new Map<string, { id: string; proposed: boolean; kind: string }>();
  for (const l of links) {
    const other = l.from === p.note ? l.to : l.from;
    if (!g.hasNode(other)) continue;
    const w = want.get(other);
    const proposed = l.status === "proposed";
    if (w) {
      w.proposed = w.proposed && proposed;
      // a supersession between the pair is drawn as one
      if (l.kind === SUPERSEDES_KIND) w.kind = l.kind;
    } else want.set(other, { id: l.id, proposed, kind: l.kind });
  }
  for (const other of g.neighbors(p.note)) {
    if (!want.has(other)) {
      g.dropEdge(p.note, other);
      change.edgesRemoved++;
      touched.add(other);
    }
  }
  for (const [other, w] of want) {
    touched.add(other);
    const attrs = edgeAttributes(w.kind, w.proposed);
    if (g.hasEdge(p.note, other)) {
      g.mergeEdgeAttributes(p.note, other, attrs);
      continue;
    }
    if (g.hasEdge(w.id)) g.addEdge(p.note, other, attrs);
    else g.addEdgeWithKey(w.id, p.note, other, attrs);
    change.edgesAdded++;
  }
  resize(g, touched);
  return change;
}

function primaryIndex(n: GraphNodeDto, index: Map<string, number>): number {
  return n.boxes.map((id) => index.get(id)).find((i) => i !== undefined) ?? -1;
}

function resize(g: Graph, ids: Iterable<string>) {
  for (const id of ids) if (g.hasNode(id)) g.setNodeAttribute(id, "size", sizeFor(g.degree(id)));
}

/**
 * Where a new node starts: beside the linked nodes already drawn (their centre, nudged by a
 * small deterministic offset so that several new neighbours do not overlap), else beside the
 * drawn graph's centre.
 */
export function placeNear(g: Graph, id: string, links: GraphLinkDto[]): { x: number; y: number } {
  let x = 0;
  let y = 0;
  let k = 0;
  for (const l of links) {
    const other = l.from === id ? l.to : l.to === id ? l.from : null;
    if (other === null || !g.hasNode(other)) continue;
    x += g.getNodeAttribute(other, "x") as number;
    y += g.getNodeAttribute(other, "y") as number;
    k++;
  }
  if (k === 0) {
    g.forEachNode((_n, a) => {
      x += a.x as number;
      y += a.y as number;
      k++;
    });
  }
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) | 0;
  const angle = (Math.abs(h) % 360) * (Math.PI / 180);
  return k === 0 ? { x: Math.cos(angle), y: Math.sin(angle) } : { x: x / k + Math.cos(angle) * 0.5, y: y / k + Math.sin(angle) * 0.5 };
}

/**
 * The patches for finished jobs: each note's neighbourhood, one call at a time (a burst of
 * jobs must not flood the shell); a note that no longer exists is gone. Other failures are
 * left out (the next job or reload brings the note).
 */
export async function fetchPatches(api: Pick<Api, "localGraph">, notes: Iterable<string>): Promise<Patch[]> {
  const out: Patch[] = [];
  for (const note of notes) {
    try {
      const g = await api.localGraph(note, 1);
      out.push({ note, nodes: g.nodes, links: g.links });
    } catch (e) {
      if (e instanceof ApiError && e.kind === "not_found") out.push({ note, gone: true });
    }
  }
  return out;
}
