// The graph benchmark page (bench/graph.html, not part of the app): the Graph view's
// drawing code (mountGraph) on a generated memory of `?n=` notes (3 links each).
import { buildGraph } from "./graphData";
import { mountGraph } from "./mountGraph";
import { syntheticMemory } from "./synthetic";

const params = new URLSearchParams(location.search);
const n = Number(params.get("n") ?? 10000);
const t0 = performance.now();
const { data, boxes } = syntheticMemory(n);
const graph = buildGraph(data, boxes);
const built = performance.now() - t0;
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
  whole: true,
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
  __benchInfo: () => ({ nodes: graph.order, edges: graph.size, buildMs: built, mountMs: firstDraw, layoutDone }),
});
