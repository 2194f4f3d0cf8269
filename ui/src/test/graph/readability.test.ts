import Graph from "graphology";
import { describe, expect, it } from "vitest";
import { readability } from "../../features/graph/readability";

describe("readability", () => {
  it("counts the pixels under edges and the nodes that overlap, in the fitted view", () => {
    const g = new Graph({ type: "undirected" });
    // a horizontal edge across the whole 100×10 view, and two nodes on top of each other
    g.addNode("a", { x: 0, y: 0, size: 2 });
    g.addNode("b", { x: 100, y: 0, size: 2 });
    g.addNode("c", { x: 100, y: 0.01, size: 2 });
    g.addEdge("a", "b");
    const r = readability(g, 100, 10);
    // 100 pixels of a 1,000-pixel view
    expect(r.edgeInk).toBeCloseTo(0.1, 5);
    expect(r.overlapping).toBeCloseTo(2 / 3, 5);
    expect(r.pixelsPerNode).toBeCloseTo(1000 / 3, 5);
  });

  it("finds nothing to read on an empty graph", () => {
    expect(readability(new Graph(), 10, 10)).toEqual({ edgeInk: 0, overlapping: 0, pixelsPerNode: 100 });
  });
});
