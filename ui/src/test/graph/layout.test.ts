import Graph from "graphology";
import { describe, expect, it } from "vitest";
import { applyPositions, savePositions, startLayout, type Positions } from "../../features/graph/layout";

function path(n: number): Graph {
  const g = new Graph({ type: "undirected" });
  for (let i = 0; i < n; i++) g.addNode(`n${i}`, { x: i % 7, y: Math.floor(i / 7), size: 5 });
  for (let i = 1; i < n; i++) g.addEdge(`n${i - 1}`, `n${i}`);
  return g;
}

describe("positions", () => {
  it("reuses saved positions and puts a new note next to a placed neighbour", () => {
    const g = path(3);
    const saved: Positions = new Map([
      ["n0", { x: 100, y: 100 }],
      ["n1", { x: 200, y: -50 }],
    ]);
    expect(applyPositions(g, saved)).toBe(1);
    expect(g.getNodeAttributes("n0")).toMatchObject({ x: 100, y: 100 });
    expect(g.getNodeAttributes("n1")).toMatchObject({ x: 200, y: -50 });
    const n2 = g.getNodeAttributes("n2");
    expect(Math.hypot(n2.x - 200, n2.y + 50)).toBeLessThanOrEqual(0.5 + 1e-9);
  });

  it("leaves a note with no placed neighbour where it was", () => {
    const g = path(2);
    expect(applyPositions(g, new Map())).toBe(2);
    expect(g.getNodeAttributes("n1")).toMatchObject({ x: 1, y: 0 });
  });

  it("saves what it reads back", () => {
    const g = path(4);
    const into: Positions = new Map();
    savePositions(g, into);
    const h = path(4);
    h.updateEachNodeAttributes((_id, a) => ({ ...a, x: 0, y: 0 }));
    expect(applyPositions(h, into)).toBe(0);
    expect(h.getNodeAttributes("n3")).toMatchObject(g.getNodeAttributes("n3"));
  });
});

describe("startLayout", () => {
  it("lays a small graph out at once and reports it done", () => {
    const g = path(20);
    const before = { ...g.getNodeAttributes("n5") };
    let done = 0;
    const l = startLayout(g, () => done++);
    expect(done).toBe(1);
    expect(l.running()).toBe(false);
    const after = g.getNodeAttributes("n5");
    expect([after.x, after.y]).not.toEqual([before.x, before.y]);
  });
});
