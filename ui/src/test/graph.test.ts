import { describe, expect, it, vi } from "vitest";
import { buildGraph, FAINTEST, loadWhole, NO_BOX, opacityOf, PALETTE, strengthOpacity } from "../features/graph/graphData";
import { patchGraph } from "../features/graph/incremental";
import type { Api, GraphPage, LinkKindWord, LinkStatus } from "../api";

const node = (id: string, boxes: string[] = [], strength = 1) => ({ id, label: id, tags: [], enrich: "done" as const, boxes, strength });
const link = (id: string, from: string, to: string, status: LinkStatus = "accepted", kind: LinkKindWord = "relates") => ({ id, from, to, kind, status, confidence: 0.8 });

describe("buildGraph", () => {
  it("colours by Box, flags proposed links, merges kinds and drops dangling links", () => {
    const g = buildGraph(
      {
        nodes: [node("a", ["box2", "box1"]), node("b", ["box1"]), node("c")],
        links: [
          link("l1", "a", "b", "proposed"),
          link("l2", "a", "b", "accepted", "supports"),
          link("l3", "b", "c", "proposed"),
          link("l4", "c", "zz"),
        ],
        truncated: false,
      },
      [
        { id: "box1", label: "Pixel", size: 2 },
        { id: "box2", label: "Beach", size: 1 },
      ],
    );
    expect(g.order).toBe(3);
    expect(g.size).toBe(2);
    // a is in both Boxes: coloured by the first one it lists that is known (box2, index 1)
    expect(g.getNodeAttribute("a", "color")).toBe(PALETTE[1]);
    expect(g.getNodeAttribute("b", "color")).toBe(PALETTE[0]);
    expect(g.getNodeAttribute("c", "color")).toBe(NO_BOX);
    // a-b has an accepted kind: drawn solid; b-c only proposed: dashed
    expect(g.getEdgeAttribute("a", "b", "proposed")).toBe(false);
    expect(g.getEdgeAttribute("b", "c", "proposed")).toBe(true);
  });
});

describe("strength in the graph", () => {
  const boxes = [{ id: "box1", label: "Pixel", size: 3 }];
  it("draws a fading note faint but still visible, a strong one solid", () => {
    const g = buildGraph(
      { nodes: [node("strong", ["box1"], 1), node("fading", ["box1"], 0.1), node("gone", [], 0)], links: [], truncated: false },
      boxes,
    );
    // the same Box colour, only its opacity follows the strength
    expect(g.getNodeAttribute("strong", "color")).toBe(PALETTE[0]);
    const fading = g.getNodeAttribute("fading", "color") as string;
    expect(fading.slice(0, 7)).toBe(PALETTE[0]);
    expect(opacityOf(fading)).toBeCloseTo(strengthOpacity(0.1), 2);
    expect(opacityOf(fading)).toBeGreaterThan(FAINTEST);
    expect(opacityOf(fading)).toBeLessThan(0.5);
    // strength 0: the faintest, not invisible
    const gone = g.getNodeAttribute("gone", "color") as string;
    expect(gone.slice(0, 7)).toBe(NO_BOX);
    expect(opacityOf(gone)).toBeCloseTo(FAINTEST, 2);
  });

  it("orders opacity by strength and keeps it within FAINTEST..1", () => {
    const xs = [-1, 0, 0.2, 0.5, 0.9, 1, 2, Number.NaN].map(strengthOpacity);
    for (const x of xs) {
      expect(x).toBeGreaterThanOrEqual(FAINTEST);
      expect(x).toBeLessThanOrEqual(1);
    }
    expect(xs.slice(1, 6)).toEqual([...xs.slice(1, 6)].sort((a, b) => a - b));
    expect(strengthOpacity(Number.NaN)).toBe(1);
  });

  it("a kept note comes back solid when the graph is patched", () => {
    const g = buildGraph({ nodes: [node("a", ["box1"], 0.1), node("b", ["box1"])], links: [link("l1", "a", "b")], truncated: false }, boxes);
    expect(opacityOf(g.getNodeAttribute("a", "color") as string)).toBeLessThan(0.5);
    const change = patchGraph(g, { note: "a", nodes: [node("a", ["box1"], 1), node("b", ["box1"])], links: [link("l1", "a", "b")] }, boxes);
    expect(change.recoloured).toContain("a");
    expect(g.getNodeAttribute("a", "color")).toBe(PALETTE[0]);
  });
});

describe("loadWhole", () => {
  it("follows the cursors page by page", async () => {
    const nodePages: GraphPage[] = [
      { nodes: [node("a"), node("b")], links: [], next: "b" },
      { nodes: [node("c")], links: [], next: null },
    ];
    const linkPages: GraphPage[] = [{ nodes: [], links: [link("l1", "a", "c")], next: null }];
    const api = {
      graphNodes: vi.fn().mockImplementation((after: string | null) => Promise.resolve(after ? nodePages[1] : nodePages[0])),
      graphLinks: vi.fn().mockResolvedValue(linkPages[0]),
    } as unknown as Api;
    const d = await loadWhole(api);
    expect(d.nodes.map((n) => n.id)).toEqual(["a", "b", "c"]);
    expect(d.links).toHaveLength(1);
    expect(api.graphNodes).toHaveBeenNthCalledWith(2, "b", 5000);
  });
});
