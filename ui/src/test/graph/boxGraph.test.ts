import { describe, expect, it } from "vitest";
import type { BoxDto, GraphLinkDto, GraphNodeDto, LinkStatus } from "../../api";
import { aggregate, boxEdgeSize, boxNodeSize, boxSubgraph, boxThreshold, BOX_THRESHOLD, buildBoxGraph, mainBox, setBoxThreshold, syncBoxGraph, UNBOXED } from "../../features/graph/boxGraph";
import { NO_BOX, PALETTE, type GraphData } from "../../features/graph/graphData";
import { syntheticMemory } from "../../features/graph/synthetic";

const node = (id: string, boxes: string[] = [], tags: string[] = []): GraphNodeDto => ({ id, label: id, tags, enrich: "done", boxes, strength: 1 });
const link = (id: string, from: string, to: string, status: LinkStatus = "accepted"): GraphLinkDto => ({ id, from, to, kind: "relates", status, confidence: 0.8 });
const BOXES: BoxDto[] = [
  { id: "A", label: "garden", size: 3 },
  { id: "B", label: "piano", size: 2 },
];

// a1 a2 a3 in A (a3 also in B), b1 in B, u1 u2 in no Box
const memory = (): GraphData => ({
  nodes: [node("a1", ["A"], ["plants"]), node("a2", ["A"]), node("a3", ["A", "B"], ["plants"]), node("b1", ["B"]), node("u1"), node("u2", [], ["plants"])],
  links: [
    link("l1", "a1", "a2"), // inside A
    link("l2", "a2", "a3"), // inside A (a3's main Box is A)
    link("l3", "a1", "b1"), // A-B
    link("l4", "a3", "b1", "proposed"), // A-B, waiting for review
    link("l5", "b1", "u1"), // B-unboxed
    link("l6", "a1", "a2", "proposed"), // a second link between a1 and a2 (another kind)
    link("l7", "u1", "zz"), // dangling: not counted
  ],
  truncated: false,
});

describe("aggregate", () => {
  it("sizes Boxes by membership and weighs edges by the links between their notes", () => {
    const a = aggregate(memory(), BOXES);
    expect(a.nodes.map((n) => [n.id, n.members, n.internal])).toEqual([
      ["A", 3, 3],
      ["B", 2, 0], // a3 counts in both Boxes
      [UNBOXED, 2, 0],
    ]);
    const e = Object.fromEntries(a.edges.map((x) => [`${x.from}-${x.to}`, [x.weight, x.proposed]]));
    expect(e).toEqual({ "A-B": [2, 1], [`B-${UNBOXED}`]: [1, 0] });
    expect(a.notes).toBe(6);
    expect(a.links).toBe(6);
    expect(a.nodes[0]).toMatchObject({ label: "garden", index: 0 });
    expect(a.nodes[2]).toMatchObject({ label: "no Box", index: -1 });
  });

  it("counts only accepted links when proposed ones are switched off", () => {
    const a = aggregate(memory(), BOXES, { showProposed: false });
    expect(a.edges.find((x) => x.from === "A")).toMatchObject({ weight: 1, proposed: 0 });
    expect(a.nodes[0].internal).toBe(2);
  });

  it("aggregates only the notes with the chosen tag", () => {
    const a = aggregate(memory(), BOXES, { tag: "plants" });
    expect(a.nodes.map((n) => [n.id, n.members])).toEqual([
      ["A", 2],
      ["B", 1],
      [UNBOXED, 1],
    ]);
    // no link joins two tagged notes
    expect(a.edges).toEqual([]);
    expect(a.notes).toBe(3);
  });

  it("keeps a Box the list does not know (beyond its limit) as its own aggregate", () => {
    const a = aggregate({ nodes: [node("x", ["Z"]), node("y", ["A"])], links: [link("l", "x", "y")], truncated: false }, BOXES);
    expect(a.nodes.map((n) => n.id).sort()).toEqual(["A", "Z"]);
    expect(a.nodes.find((n) => n.id === "Z")).toMatchObject({ index: -1, label: "Box Z" });
    expect(a.edges).toEqual([{ from: "A", to: "Z", weight: 1, proposed: 0 }]);
  });

  it("takes a note's first known Box as its main one", () => {
    const known = new Map([["B", 1]]);
    expect(mainBox(node("n", ["Z", "B"]), known)).toBe("B");
    expect(mainBox(node("n", ["Z"]), known)).toBe("Z");
    expect(mainBox(node("n"), known)).toBe(UNBOXED);
  });

  it("turns a generated memory of 24 topics into 24 Boxes holding every note", () => {
    const { data, boxes } = syntheticMemory(3000);
    const a = aggregate(data, boxes);
    expect(a.nodes).toHaveLength(24);
    expect(a.nodes.reduce((s, n) => s + n.members, 0)).toBe(3000);
    const between = a.edges.reduce((s, e) => s + e.weight, 0);
    const inside = a.nodes.reduce((s, n) => s + n.internal, 0);
    expect(between + inside).toBe(data.links.length);
    // 24 Boxes: at most 276 pairs, each link between two of them counted on one
    expect(a.edges.length).toBeLessThanOrEqual(276);
    expect(between).toBeGreaterThan(0);
  });
});

describe("the Box graph", () => {
  it("draws aggregates sized by members, coloured as the Boxes, with weighted edges", () => {
    const g = buildBoxGraph(aggregate(memory(), BOXES));
    expect(g.order).toBe(3);
    expect(g.size).toBe(2);
    expect(g.getNodeAttribute("A", "size")).toBe(boxNodeSize(3, 3));
    expect(g.getNodeAttribute("B", "size")).toBeLessThan(g.getNodeAttribute("A", "size"));
    expect(g.getNodeAttribute("A", "color")).toBe(PALETTE[0]);
    expect(g.getNodeAttribute(UNBOXED, "color")).toBe(NO_BOX);
    expect(g.getNodeAttribute("A", "label")).toBe("garden (3)");
    expect(g.getEdgeAttribute("A", "B", "weight")).toBe(2);
    expect(g.getEdgeAttribute("A", "B", "size")).toBe(boxEdgeSize(2));
    expect(boxEdgeSize(1000)).toBe(8);
  });

  it("changes in place: positions kept, new aggregates added, empty ones dropped", () => {
    const d = memory();
    const g = buildBoxGraph(aggregate(d, BOXES));
    g.setNodeAttribute("A", "x", 123);
    g.setNodeAttribute("A", "y", -45);
    // u1 and u2 join a new Box C; u1 gains a link to a1
    const next: GraphData = {
      ...d,
      nodes: d.nodes.map((n) => (n.id.startsWith("u") ? { ...n, boxes: ["C"] } : n)),
      links: [...d.links, link("l8", "u1", "a1")],
    };
    const boxes = [...BOXES, { id: "C", label: "budget", size: 2 }];
    expect(syncBoxGraph(g, aggregate(next, boxes))).toBe(true);
    expect(g.hasNode(UNBOXED)).toBe(false);
    expect(g.hasNode("C")).toBe(true);
    expect(g.getNodeAttributes("A")).toMatchObject({ x: 123, y: -45 });
    expect(g.getEdgeAttribute("A", "C", "weight")).toBe(1);
    // C starts next to the aggregate it shares the most links with
    const c = g.getNodeAttributes("C");
    const b = g.getNodeAttributes("B");
    expect(Math.hypot(c.x - b.x, c.y - b.y)).toBeLessThanOrEqual(2 + 1e-9);
    // the same again changes nothing
    expect(syncBoxGraph(g, aggregate(next, boxes))).toBe(false);
  });
});

describe("boxSubgraph", () => {
  it("opens a Box into its notes and the links between them", () => {
    const s = boxSubgraph(memory(), "B");
    expect(s.nodes.map((n) => n.id)).toEqual(["a3", "b1"]);
    expect(s.links.map((l) => l.id)).toEqual(["l4"]);
    expect(boxSubgraph(memory(), UNBOXED).nodes.map((n) => n.id)).toEqual(["u1", "u2"]);
  });
});

describe("the threshold", () => {
  it("defaults to the measured one and keeps this computer's setting", () => {
    setBoxThreshold(null);
    expect(boxThreshold()).toBe(BOX_THRESHOLD);
    setBoxThreshold(400);
    expect(boxThreshold()).toBe(400);
    window.localStorage.setItem("kasten.graph.boxThreshold", "nonsense");
    expect(boxThreshold()).toBe(BOX_THRESHOLD);
    setBoxThreshold(null);
  });
});
