import Graph from "graphology";
import type { Attributes } from "graphology-types";
import { describe, expect, it, vi } from "vitest";
import { coloursFor, DASHED_MAX } from "../../features/graph/graphStyle";

// sigma needs WebGL, which jsdom lacks: a stand-in that runs the reducers as sigma does
// (on a shallow copy, at construction and at every refresh)
const sigmas: FakeSigma[] = [];
class FakeSigma {
  nodes = new Map<string, Attributes>();
  edges = new Map<string, Attributes>();
  constructor(
    public graph: Graph,
    public container: HTMLElement,
    public settings: Record<string, unknown> & {
      nodeReducer: (id: string, a: Attributes) => Attributes;
      edgeReducer: (id: string, a: Attributes) => Attributes;
    },
  ) {
    sigmas.push(this);
    this.refresh();
  }
  refresh() {
    this.graph.forEachNode((id, a) => this.nodes.set(id, this.settings.nodeReducer(id, { ...a })));
    this.graph.forEachEdge((id, a) => this.edges.set(id, this.settings.edgeReducer(id, { ...a })));
  }
  on() {}
  getCamera() {
    return { getState: () => ({ x: 0.5, y: 0.5, ratio: 1, angle: 0 }) };
  }
  scheduleRender() {
    return this;
  }
  kill() {}
}
vi.mock("sigma", () => ({ default: FakeSigma }));
vi.mock("sigma/rendering", () => ({ EdgeLineProgram: class {} }));
// no web workers in jsdom
vi.mock("graphology-layout-forceatlas2/worker", () => ({
  default: class {
    start() {}
    kill() {}
  },
}));

const { mountGraph } = await import("../../features/graph/mountGraph");

function graph(proposed: number): Graph {
  const g = new Graph({ type: "undirected" });
  for (let i = 0; i <= proposed + 1; i++) g.addNode(`n${i}`, { x: i, y: 0, size: 5, label: `note ${i}`, tags: i % 2 ? ["odd"] : [] });
  g.addEdge("n0", "n1", { proposed: false });
  for (let i = 1; i <= proposed; i++) g.addEdge(`n${i}`, `n${i + 1}`, { proposed: true });
  return g;
}

const base = { search: "", tag: "", showProposed: true, highlightSet: new Set<string>(), boxMembers: null, center: null };

function mount(g: Graph, filters: () => typeof base) {
  const container = document.createElement("div");
  const overlay = document.createElement("canvas");
  return mountGraph({ graph: g, container, overlay, dark: false, filters, onClickNode: () => {}, whole: false });
}

describe("mountGraph", () => {
  it("applies a filter change at the next refresh", () => {
    let f = { ...base };
    const m = mount(graph(3), () => f);
    const s = sigmas.at(-1)!;
    expect(s.nodes.get("n2")?.hidden).toBeUndefined();
    f = { ...base, tag: "odd" };
    m.refresh();
    expect(s.nodes.get("n2")?.hidden).toBe(true);
    expect(s.nodes.get("n1")?.hidden).toBeUndefined();
    expect(window.__kastenGraph?.visibleNodes()).toBe(2);
    m.kill();
  });

  it("dashes a few proposed links on the overlay and follows the filters", () => {
    let f = { ...base };
    const m = mount(graph(3), () => f);
    expect(m.dashed).toBe(true);
    expect(window.__kastenGraph?.dashedLinks()).toBe(3);
    // hidden from sigma: the overlay draws them
    expect([...sigmas.at(-1)!.edges.values()].filter((e) => e.hidden)).toHaveLength(3);
    f = { ...base, showProposed: false };
    m.refresh();
    expect(window.__kastenGraph?.dashedLinks()).toBe(0);
    m.kill();
  });

  it("draws many proposed links as amber GL lines instead", () => {
    const m = mount(graph(DASHED_MAX + 1), () => base);
    expect(m.dashed).toBe(false);
    expect(window.__kastenGraph?.dashedLinks()).toBe(0);
    const edges = [...sigmas.at(-1)!.edges.values()];
    expect(edges.filter((e) => e.hidden)).toHaveLength(0);
    expect(edges.filter((e) => e.proposed && e.color === coloursFor(false).proposed)).toHaveLength(DASHED_MAX + 1);
    m.kill();
  });
});
