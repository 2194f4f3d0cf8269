// How readable a laid-out graph is when the whole of it fits the view (the Graph view's
// opening picture): what the Box threshold was measured with (bench page). Pure: positions
// in, figures out; no canvas (the same numbers in every engine).
import type Graph from "graphology";

export interface Readability {
  /** Share of the view's pixels under at least one edge (1-pixel lines). */
  edgeInk: number;
  /** Share of nodes whose disc overlaps another node's disc. */
  overlapping: number;
  /** Pixels of view per node. */
  pixelsPerNode: number;
}

/**
 * The graph fitted into a `w`×`h` view as sigma fits it at the start (its bounding box
 * scaled to the view, aspect kept; node sizes are pixels), then: edges drawn as 1-pixel
 * lines on a bitmap (Bresenham) and the share of covered pixels counted; nodes hashed into a
 * grid and overlapping discs counted.
 */
export function readability(g: Graph, w: number, h: number): Readability {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  g.forEachNode((_id, a) => {
    minX = Math.min(minX, a.x as number);
    maxX = Math.max(maxX, a.x as number);
    minY = Math.min(minY, a.y as number);
    maxY = Math.max(maxY, a.y as number);
  });
  if (g.order === 0) return { edgeInk: 0, overlapping: 0, pixelsPerNode: w * h };
  const scale = Math.min(w / Math.max(maxX - minX, 1e-9), h / Math.max(maxY - minY, 1e-9));
  const ox = (w - (maxX - minX) * scale) / 2;
  const oy = (h - (maxY - minY) * scale) / 2;
  const pos = new Map<string, { x: number; y: number; r: number }>();
  g.forEachNode((id, a) => {
    pos.set(id, {
      x: Math.min(w - 1, Math.max(0, Math.round(ox + ((a.x as number) - minX) * scale))),
      y: Math.min(h - 1, Math.max(0, Math.round(oy + ((a.y as number) - minY) * scale))),
      r: (a.size as number) ?? 1,
    });
  });
  const ink = new Uint8Array(w * h);
  let covered = 0;
  g.forEachEdge((_e, _a, s, t) => {
    const p = pos.get(s)!;
    const q = pos.get(t)!;
    let x0 = p.x;
    let y0 = p.y;
    const dx = Math.abs(q.x - x0);
    const dy = -Math.abs(q.y - y0);
    const sx = x0 < q.x ? 1 : -1;
    const sy = y0 < q.y ? 1 : -1;
    let err = dx + dy;
    for (;;) {
      const i = y0 * w + x0;
      if (ink[i] === 0) {
        ink[i] = 1;
        covered++;
      }
      if (x0 === q.x && y0 === q.y) break;
      const e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  });
  // overlapping discs: a grid of cells as wide as the largest diameter
  let rmax = 0;
  for (const p of pos.values()) rmax = Math.max(rmax, p.r);
  const cell = Math.max(2 * rmax, 1);
  const grid = new Map<string, string[]>();
  for (const [id, p] of pos) {
    const k = `${Math.floor(p.x / cell)},${Math.floor(p.y / cell)}`;
    const c = grid.get(k);
    if (c) c.push(id);
    else grid.set(k, [id]);
  }
  let overlapping = 0;
  for (const [id, p] of pos) {
    const cx = Math.floor(p.x / cell);
    const cy = Math.floor(p.y / cell);
    let hit = false;
    for (let i = -1; i <= 1 && !hit; i++) {
      for (let j = -1; j <= 1 && !hit; j++) {
        for (const o of grid.get(`${cx + i},${cy + j}`) ?? []) {
          if (o === id) continue;
          const q = pos.get(o)!;
          if (Math.hypot(p.x - q.x, p.y - q.y) < p.r + q.r) {
            hit = true;
            break;
          }
        }
      }
    }
    if (hit) overlapping++;
  }
  return { edgeInk: covered / (w * h), overlapping: overlapping / g.order, pixelsPerNode: (w * h) / g.order };
}
