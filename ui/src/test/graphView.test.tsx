import { act, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { BoxDto, Enrich, GraphLinkDto, GraphNodeDto, JobEvent } from "../api";
import { renderWith } from "./util";

// sigma (WebGL) and the layout worker, which jsdom lacks
vi.mock("sigma", async () => ({ default: (await import("./fakeSigma")).FakeSigma }));
vi.mock("sigma/rendering", () => ({ EdgeLineProgram: class {} }));
vi.mock("graphology-layout-forceatlas2/worker", async () => ({
  default: (await import("./fakeSigma")).FakeLayout,
}));

let jobListener: ((e: JobEvent) => void) | null = null;
vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: { graphNodes: vi.fn(), graphLinks: vi.fn(), listBoxes: vi.fn(), localGraph: vi.fn() },
    onJob: (cb: (e: JobEvent) => void) => {
      jobListener = cb;
      return Promise.resolve(() => {
        jobListener = null;
      });
    },
  };
});

const { api } = await import("../api");
const { default: GraphView } = await import("../features/graph/GraphView");
const { setBoxThreshold } = await import("../features/graph/boxGraph");

const mocked = api as unknown as Record<"graphNodes" | "graphLinks" | "listBoxes" | "localGraph", ReturnType<typeof vi.fn>>;
const node = (id: string, boxes: string[] = [], enrich: Enrich = "done", strength = 1): GraphNodeDto => ({ id, label: id, tags: [], enrich, boxes, strength });
const link = (id: string, from: string, to: string): GraphLinkDto => ({ id, from, to, kind: "relates", status: "accepted", confidence: 0.8 });
const BOXES: BoxDto[] = [
  { id: "A", label: "garden", size: 3 },
  { id: "B", label: "piano", size: 2 },
];
const NODES = [node("a1", ["A"]), node("a2", ["A"]), node("a3", ["A"]), node("b1", ["B"]), node("b2", ["B"]), node("u1")];
const LINKS = [link("l1", "a1", "a2"), link("l2", "a2", "a3"), link("l3", "a3", "b1"), link("l4", "b1", "b2")];

const view = () => screen.getByTestId("graph-view");
const attr = (name: string) => Number(view().getAttribute(name));

beforeEach(() => {
  vi.clearAllMocks();
  // the probe of a graph drawn by an earlier test must not answer for this one
  window.__kastenGraph = undefined;
  setBoxThreshold(null);
  mocked.graphNodes.mockResolvedValue({ nodes: NODES, links: [], next: null });
  mocked.graphLinks.mockResolvedValue({ nodes: [], links: LINKS, next: null });
  mocked.listBoxes.mockResolvedValue(BOXES);
  // a new note n1, enriched into Box B with a link to b2
  mocked.localGraph.mockResolvedValue({ nodes: [node("n1", ["B"]), node("b2", ["B"])], links: [link("l5", "n1", "b2")], truncated: false });
});

async function job(note: string) {
  await act(async () => {
    jobListener?.({ outcome: "done", note, links: 1, updates: 0, tokens: 10 });
  });
}

describe("GraphView", () => {
  it("draws fading notes faint and strong ones solid", async () => {
    mocked.graphNodes.mockResolvedValue({
      nodes: [...NODES.filter((n) => n.id !== "a3" && n.id !== "u1"), node("a3", ["A"], "done", 0.05), node("u1", [], "done", 0.5)],
      links: [],
      next: null,
    });
    renderWith(<GraphView />);
    await waitFor(() => expect(attr("data-nodes")).toBe(6));
    // the count is shown as soon as the notes arrive; the graph is drawn in an effect after
    await waitFor(() => expect(window.__kastenGraph?.nodeIds().length).toBe(6));
    const g = window.__kastenGraph;
    expect(g?.nodeOpacity("a1")).toBe(1);
    expect(g?.nodeOpacity("a3")).toBeGreaterThanOrEqual(0.35);
    expect(g?.nodeOpacity("a3")).toBeLessThan(0.45);
    expect(g?.nodeOpacity("u1")).toBeGreaterThan(g?.nodeOpacity("a3") ?? 1);
    expect(g?.nodeOpacity("u1")).toBeLessThan(1);
  });

  it("merges a finished job into the drawn notes without loading the memory again", async () => {
    renderWith(<GraphView />);
    await waitFor(() => expect(attr("data-nodes")).toBe(6));
    expect(screen.getByTestId("graph-mode").textContent).toBe("notes");
    expect(attr("data-loads")).toBe(1);
    await job("n1");
    await waitFor(() => expect(attr("data-patched")).toBe(1), { timeout: 3000 });
    expect(attr("data-nodes")).toBe(7);
    expect(attr("data-edges")).toBe(5);
    await waitFor(() => expect(window.__kastenGraph?.nodeIds()).toContain("n1"));
    expect(mocked.localGraph).toHaveBeenCalledWith("n1", 1);
    // one load of the memory only
    expect(mocked.graphNodes).toHaveBeenCalledTimes(1);
    expect(mocked.graphLinks).toHaveBeenCalledTimes(1);
    expect(attr("data-loads")).toBe(1);
  });

  it("loads the memory again for a review decision, not for a job's change", async () => {
    const { invalidate } = await import("../queries");
    const { client } = renderWith(<GraphView />);
    await waitFor(() => expect(attr("data-nodes")).toBe(6));
    await act(() => invalidate(client, { kind: "job", event: { outcome: "done", note: "a1", links: 2, updates: 1, tokens: 5 } }));
    expect(mocked.graphNodes).toHaveBeenCalledTimes(1);
    expect(attr("data-loads")).toBe(1);
    mocked.graphLinks.mockResolvedValue({ nodes: [], links: LINKS.slice(1), next: null });
    await act(() => invalidate(client, { kind: "reviewed" }));
    await waitFor(() => expect(attr("data-loads")).toBe(2));
    expect(mocked.graphNodes).toHaveBeenCalledTimes(2);
    expect(attr("data-edges")).toBe(3);
  });

  it("merges during a steady stream of jobs, not only once it stops", async () => {
    renderWith(<GraphView />);
    await waitFor(() => expect(attr("data-nodes")).toBe(6));
    let merged = 0;
    // a job every 100 ms for 1.2 s
    for (let i = 0; i < 12; i++) {
      await job("n1");
      await act(() => new Promise((r) => setTimeout(r, 100)));
      merged = attr("data-patched");
    }
    expect(merged).toBeGreaterThanOrEqual(1);
  });

  it("draws Boxes above the threshold, opens one into its notes and goes back", async () => {
    setBoxThreshold(5);
    renderWith(<GraphView />);
    await waitFor(() => expect(screen.getByTestId("graph-mode").textContent).toBe("boxes"));
    const items = screen.getAllByTestId("graph-box-item");
    expect(items.map((i) => [i.getAttribute("data-id"), i.getAttribute("data-members")])).toEqual([
      ["A", "3"],
      ["B", "2"],
      ["unboxed", "1"],
    ]);
    // the drawn graph holds the aggregates, with one edge between A and B (l3)
    await waitFor(() => expect(window.__kastenGraph?.nodeIds()).toEqual(["A", "B", "unboxed"]));
    // a click on an aggregate (as sigma reports it) opens the Box
    act(() => window.__kastenGraph?.clickNode("A"));
    await waitFor(() => expect(screen.getByTestId("graph-mode").textContent).toBe("notes"));
    await waitFor(() => expect(window.__kastenGraph?.nodeIds().sort()).toEqual(["a1", "a2", "a3"]));
    expect(attr("data-nodes")).toBe(3);
    expect(attr("data-edges")).toBe(2);
    await userEvent.click(screen.getByTestId("graph-back"));
    await waitFor(() => expect(screen.getByTestId("graph-mode").textContent).toBe("boxes"));
    // the list opens a Box too
    await userEvent.click(screen.getAllByTestId("graph-box-item")[1]);
    await waitFor(() => expect(window.__kastenGraph?.nodeIds().sort()).toEqual(["b1", "b2"]));
    // every note, on request
    await userEvent.click(screen.getByTestId("graph-back"));
    await userEvent.click(await screen.findByTestId("graph-all-notes"));
    await waitFor(() => expect(attr("data-nodes")).toBe(6));
    expect(screen.getByTestId("graph-mode").textContent).toBe("notes");
    expect(attr("data-loads")).toBe(1);
  });

  it("updates the Boxes in place when a job adds a note", async () => {
    setBoxThreshold(5);
    renderWith(<GraphView />);
    await waitFor(() => expect(screen.getByTestId("graph-mode").textContent).toBe("boxes"));
    await job("n1");
    await waitFor(() => expect(attr("data-patched")).toBe(1), { timeout: 3000 });
    const b = screen.getAllByTestId("graph-box-item").find((i) => i.getAttribute("data-id") === "B");
    expect(b?.getAttribute("data-members")).toBe("3");
    expect(attr("data-nodes")).toBe(7);
    expect(attr("data-loads")).toBe(1);
  });

  it("takes the threshold from its field", async () => {
    renderWith(<GraphView />);
    await waitFor(() => expect(screen.getByTestId("graph-mode").textContent).toBe("notes"));
    const field = screen.getByTestId("graph-box-threshold");
    await userEvent.clear(field);
    await userEvent.type(field, "3{Enter}");
    await waitFor(() => expect(screen.getByTestId("graph-mode").textContent).toBe("boxes"));
    expect(window.localStorage.getItem("kasten.graph.boxThreshold")).toBe("3");
    setBoxThreshold(null);
  });
});
