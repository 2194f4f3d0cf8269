// The graph benchmark page (bench/graph.html, not part of the app): the Graph view's
// drawing code (mountGraph) on a generated memory of `?n=` notes (3 links each).
// `?view=boxes` draws it as the Graph view does above the Box threshold (aggregate Boxes);
// `?open=<Box id>` draws one Box's notes, as a click on an aggregate opens them.
import type Graph from "graphology";
import { buildGraph } from "./graphData";
import { aggregate, boxSubgraph, buildBoxGraph } from "./boxGraph";
import { mountGraph } from "./mountGraph";
import { readability } from "./readability";
import { syntheticMemory } from "./synthetic";

const params = new URLSearchParams(location.search);
const n = Number(params.get("n") ?? 10000);
const view = params.get("view") ?? "notes";
const open = params.get("open");
const t0 = performance.now();
const { data, boxes } = syntheticMemory(n);
const generated = performance.now() - t0;
const t0b = performance.now();
let graph: Graph;
let aggregates = 0;
if (view === "boxes") {
  const agg = aggregate(data, boxes);
  aggregates = agg.nodes.length;
  graph = buildBoxGraph(agg);
} else {
  graph = buildGraph(open ? boxSubgraph(data, open) : data, boxes);
}
const built = performance.now() - t0b;
const search = params.get("search") ?? "";
const t1 = performance.now();
let layoutDone = false;
mountGraph({
  graph,
  container: document.getElementById("sigma")!,
  overlay: document.querySelector("canvas.overlay") as HTMLCanvasElement,
  dark: false,
  filters: () => ({ search, tag: "", showProposed: true, highlightSet: new Set(), boxMembers: null, center: null }),
  onClickNode: () => {},
  whole: view !== "boxes" && !open,
  onLayoutDone: () => {
    layoutDone = true;
  },
});
const firstDraw = performance.now() - t1;
const wrap = document.getElementById("wrap")!;
wrap.dataset.nodes = String(graph.order);
wrap.dataset.edges = String(graph.size);
Object.assign(window, {
  __benchGraph: graph,
  __benchInfo: () => ({ notes: n, view, open, aggregates, nodes: graph.order, edges: graph.size, generateMs: generated, buildMs: built, mountMs: firstDraw, layoutDone }),
  __benchReadability: () => readability(graph, wrap.clientWidth, wrap.clientHeight),
});
