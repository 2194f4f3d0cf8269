import { describe, expect, it, vi } from "vitest";
import { ApiError, type Api, type BoxDto, type Enrich, type GraphLinkDto, type GraphNodeDto, type LinkStatus } from "../../api";
import { buildGraph, PALETTE, PENDING, sizeFor, type GraphData } from "../../features/graph/graphData";
import { fetchPatches, patchData, patchGraph, placeNear, type Patch } from "../../features/graph/incremental";

const node = (id: string, boxes: string[] = [], enrich: Enrich = "done"): GraphNodeDto => ({ id, label: id, tags: [], enrich, boxes, strength: 1 });
const link = (id: string, from: string, to: string, status: LinkStatus = "accepted"): GraphLinkDto => ({ id, from, to, kind: "relates", status, confidence: 0.8 });
const BOXES: BoxDto[] = [
  { id: "A", label: "garden", size: 2 },
  { id: "B", label: "piano", size: 1 },
];

const memory = (): GraphData => ({
  nodes: [node("a", ["A"]), node("b", ["A"]), node("c", ["B"]), node("p", [], "pending")],
  links: [link("l1", "a", "b"), link("l2", "b", "c")],
  truncated: false,
});

describe("patchData", () => {
  it("adds a new note with its links and leaves other links alone", () => {
    const p: Patch = { note: "n", nodes: [node("n", ["A"]), node("a", ["A"])], links: [link("l3", "n", "a")] };
    const d = patchData(memory(), p);
    expect(d.nodes.map((n) => n.id)).toEqual(["a", "b", "c", "p", "n"]);
    expect(d.links.map((l) => l.id).sort()).toEqual(["l1", "l2", "l3"]);
  });

  it("makes a note's links exactly the patch's: a rejected link goes, a new one comes", () => {
    // b now links to a (kept) and p (new); b-c was rejected
    const p: Patch = { note: "b", nodes: [node("b", ["A"]), node("a", ["A"]), node("p", [], "done")], links: [link("l1", "a", "b"), link("l4", "b", "p")] };
    const before = memory();
    const d = patchData(before, p);
    expect(d.links.map((l) => l.id).sort()).toEqual(["l1", "l4"]);
    expect(d.nodes.find((n) => n.id === "p")?.enrich).toBe("done");
    // the input is not changed
    expect(before.links).toHaveLength(2);
  });

  it("drops a gone note and its links", () => {
    const d = patchData(memory(), { note: "b", gone: true });
    expect(d.nodes.map((n) => n.id)).toEqual(["a", "c", "p"]);
    expect(d.links).toEqual([]);
  });
});

describe("patchGraph", () => {
  it("recolours a note whose enrichment finished and links it in, keeping everyone's place", () => {
    const g = buildGraph(memory(), BOXES);
    const at = new Map(g.mapNodes((id, a) => [id, { x: a.x, y: a.y }] as const));
    expect(g.getNodeAttribute("p", "color")).toBe(PENDING);
    const c = patchGraph(g, { note: "p", nodes: [node("p", ["B"]), node("c", ["B"])], links: [link("l5", "p", "c", "proposed")] }, BOXES);
    expect(c).toMatchObject({ added: [], removed: [], recoloured: ["p"], edgesAdded: 1, edgesRemoved: 0 });
    expect(g.getNodeAttribute("p", "color")).toBe(PALETTE[1]);
    expect(g.getNodeAttribute("p", "enrich")).toBe("done");
    expect(g.getEdgeAttribute("p", "c", "proposed")).toBe(true);
    expect(g.getNodeAttribute("c", "size")).toBe(sizeFor(2));
    g.forEachNode((id, a) => expect({ x: a.x, y: a.y }).toEqual(at.get(id)));
  });

  it("adds a new note next to the note it links to", () => {
    const g = buildGraph(memory(), BOXES);
    const c = patchGraph(g, { note: "n", nodes: [node("n", ["A"]), node("a", ["A"])], links: [link("l3", "n", "a")] }, BOXES);
    expect(c.added).toEqual(["n"]);
    expect(g.hasEdge("n", "a")).toBe(true);
    const n = g.getNodeAttributes("n");
    const a = g.getNodeAttributes("a");
    expect(Math.hypot(n.x - a.x, n.y - a.y)).toBeLessThanOrEqual(0.5 + 1e-9);
    expect(n.color).toBe(PALETTE[0]);
  });

  it("removes the edges of links that are gone and updates one that was accepted", () => {
    const g = buildGraph({ ...memory(), links: [link("l1", "a", "b", "proposed"), link("l2", "b", "c")] }, BOXES);
    const c = patchGraph(g, { note: "b", nodes: [node("b", ["A"]), node("a", ["A"])], links: [link("l1", "a", "b", "accepted")] }, BOXES);
    expect(c.edgesRemoved).toBe(1);
    expect(g.hasEdge("b", "c")).toBe(false);
    expect(g.getEdgeAttribute("a", "b", "proposed")).toBe(false);
    expect(g.getNodeAttribute("c", "size")).toBe(sizeFor(0));
  });

  it("drops a gone note", () => {
    const g = buildGraph(memory(), BOXES);
    const c = patchGraph(g, { note: "b", gone: true }, BOXES);
    expect(c).toMatchObject({ removed: ["b"], edgesRemoved: 2 });
    expect(g.order).toBe(3);
    expect(g.size).toBe(0);
  });

  it("admits only the notes it is told to (an opened Box takes its members)", () => {
    const g = buildGraph(memory(), BOXES);
    const inA = (n: GraphNodeDto) => n.boxes.includes("A");
    const c = patchGraph(g, { note: "n", nodes: [node("n", ["B"]), node("a", ["A"])], links: [link("l3", "n", "a")] }, BOXES, inA);
    expect(c.added).toEqual([]);
    expect(g.hasNode("n")).toBe(false);
    expect(g.degree("a")).toBe(1);
  });

  it("places a note with no drawn neighbour beside the graph's centre", () => {
    const g = buildGraph(memory(), BOXES);
    let cx = 0;
    let cy = 0;
    g.forEachNode((_id, a) => {
      cx += a.x / g.order;
      cy += a.y / g.order;
    });
    const p = placeNear(g, "lonely", []);
    expect(Math.hypot(p.x - cx, p.y - cy)).toBeLessThanOrEqual(0.5 + 1e-9);
  });
});

describe("fetchPatches", () => {
  it("fetches each note's neighbourhood in turn; a missing note is gone, other failures are skipped", async () => {
    const localGraph = vi.fn().mockImplementation((id: string) => {
      if (id === "gone") return Promise.reject(new ApiError({ kind: "not_found", message: "no such note" }));
      if (id === "busy") return Promise.reject(new ApiError({ kind: "not_ready", message: "opening" }));
      return Promise.resolve({ nodes: [node(id)], links: [], truncated: false });
    });
    const out = await fetchPatches({ localGraph } as unknown as Pick<Api, "localGraph">, ["x", "gone", "busy"]);
    expect(out).toEqual([
      { note: "x", nodes: [node("x")], links: [] },
      { note: "gone", gone: true },
    ]);
    expect(localGraph).toHaveBeenCalledWith("x", 1);
  });
});
