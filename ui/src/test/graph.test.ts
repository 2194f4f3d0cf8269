import { describe, expect, it, vi } from "vitest";
import { buildGraph, loadWhole, NO_BOX, PALETTE } from "../features/graph/graphData";
import type { Api, GraphPage } from "../api";

const node = (id: string, boxes: string[] = []) => ({ id, label: id, tags: [], enrich: "done", boxes });
const link = (id: string, from: string, to: string, status = "accepted", kind = "relates") => ({ id, from, to, kind, status, confidence: 0.8 });

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
