import { describe, expect, it } from "vitest";
import { BIG, coloursFor, edgeReducer, nodeReducer, sigmaSettings, type Filters } from "../../features/graph/graphStyle";

const colours = coloursFor(false);
const none: Filters = { search: "", tag: "", showProposed: true, highlightSet: new Set(), boxMembers: null, center: null, dashed: true };
const node = (over: Record<string, unknown> = {}) => ({ label: "Pixel at the beach", size: 5, color: "#111", tags: ["pets"], x: 0, y: 0, ...over });

describe("nodeReducer", () => {
  it("returns sigma's copy untouched when nothing is filtered or marked", () => {
    const a = node();
    const r = nodeReducer(() => none, colours)("n1", a);
    expect(r).toBe(a);
    expect(r).toEqual(node());
  });

  it("hides nodes outside the Box or without the tag", () => {
    const box = nodeReducer(() => ({ ...none, boxMembers: new Set(["n2"]) }), colours);
    expect(box("n1", node()).hidden).toBe(true);
    expect(box("n2", node()).hidden).toBeUndefined();
    const tag = nodeReducer(() => ({ ...none, tag: "travel" }), colours);
    expect(tag("n1", node()).hidden).toBe(true);
    expect(tag("n1", node({ tags: ["travel"] })).hidden).toBeUndefined();
  });

  it("enlarges search hits, highlighted notes and the centre; dims the rest while marking", () => {
    const r = nodeReducer(() => ({ ...none, search: "beach", highlightSet: new Set(["h"]) }), colours);
    const hit = r("n1", node());
    expect(hit).toMatchObject({ size: 9, highlighted: true, zIndex: 2 });
    expect(r("h", node({ label: "other" }))).toMatchObject({ highlighted: true });
    const other = r("n3", node({ label: "other" }));
    expect(other).toMatchObject({ color: colours.dim, label: "" });
    expect(other.highlighted).toBeUndefined();
    // a focused note without any marking: only the centre changes
    const centre = nodeReducer(() => ({ ...none, center: "c" }), colours);
    expect(centre("c", node())).toMatchObject({ highlighted: true });
    expect(centre("n1", node())).toEqual(node());
  });
});

describe("edgeReducer", () => {
  const edge = (proposed: boolean) => ({ proposed, color: "#b6bdcc", size: 1 });
  it("leaves accepted links alone", () => {
    expect(edgeReducer(() => ({ ...none, dashed: false }), colours)("e", edge(false))).toEqual(edge(false));
  });
  it("hides proposed links drawn on the dashed overlay or switched off", () => {
    expect(edgeReducer(() => none, colours)("e", edge(true)).hidden).toBe(true);
    expect(edgeReducer(() => ({ ...none, dashed: false, showProposed: false }), colours)("e", edge(true)).hidden).toBe(true);
  });
  it("draws proposed links as amber lines when there are too many to dash", () => {
    const r = edgeReducer(() => ({ ...none, dashed: false }), colours)("e", edge(true));
    expect(r.hidden).toBeUndefined();
    expect(r.color).toBe(colours.proposed);
  });
});

describe("sigmaSettings", () => {
  it("keeps large graphs cheap: no z-order, fewer labels, no edge picking", () => {
    const small = sigmaSettings(BIG);
    const big = sigmaSettings(BIG + 1);
    expect(small).toMatchObject({ zIndex: true, enableEdgeEvents: false });
    // no reprocessing of the whole graph after a drag
    expect(big).toMatchObject({ hideEdgesOnMove: false, zIndex: false, enableEdgeEvents: false });
    expect(big.labelDensity).toBeLessThan(small.labelDensity);
    expect(big.labelRenderedSizeThreshold).toBeGreaterThan(small.labelRenderedSizeThreshold);
  });
});
