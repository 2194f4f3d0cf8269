import { describe, expect, it } from "vitest";
import { buildGraph } from "../../features/graph/graphData";
import { syntheticMemory } from "../../features/graph/synthetic";

describe("syntheticMemory", () => {
  it("makes n notes with 3 links each (after the first three), some proposed, one Box per topic", () => {
    const { data, boxes } = syntheticMemory(1000);
    expect(data.nodes).toHaveLength(1000);
    expect(data.links).toHaveLength(3 * 997);
    const proposed = data.links.filter((l) => l.status === "proposed").length;
    expect(proposed).toBeGreaterThan(50);
    expect(proposed).toBeLessThan(150);
    expect(boxes).toHaveLength(24);
    expect(boxes.reduce((s, b) => s + b.size, 0)).toBe(1000);
    // largest Box first, as the app lists them
    expect(boxes[0].size).toBeGreaterThanOrEqual(boxes[23].size);
    const g = buildGraph(data, boxes);
    expect(g.order).toBe(1000);
    expect(g.size).toBeGreaterThan(2900);
  });

  it("is deterministic", () => {
    expect(syntheticMemory(200).data).toEqual(syntheticMemory(200).data);
    expect(syntheticMemory(200, 7).data).not.toEqual(syntheticMemory(200).data);
  });
});
