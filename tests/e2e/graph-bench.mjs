#!/usr/bin/env node
// Graph frame times in headless Chromium, independent of WebKitGTK: the Graph view's
// drawing code (ui/src/features/graph/mountGraph.ts) on generated memories, through the
// benchmark page ui/bench/graph.html (built into ui/bench/dist, never part of the app).
//
//   node tests/e2e/graph-bench.mjs [100 1000 10000]
//
// BENCH_QUERY=search=garden adds page parameters (search: highlight notes matching it;
// view=boxes: the aggregate Box view drawn above the Box threshold; open=b0: one Box's notes).
// Needs Debian's `chromium` (CHROMIUM=/path to use another) and ui's dev dependencies.
// Prints one JSON line per size: build + first draw, layout, synchronous render and full
// refresh (ms of JS), overlay redraw, readability of the fitted picture (share of pixels
// under an edge, share of overlapping nodes), and requestAnimationFrame deltas (p50/p95) while the
// camera animates ("animate": as wheel zoom and drags, large graphs drop edges and labels
// meanwhile) and while it is set every frame ("redraw": everything drawn every frame).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const ui = path.join(root, "ui");
const require = createRequire(path.join(ui, "package.json"));
const { chromium } = require("playwright-core");

const sizes = process.argv.slice(2).map(Number).filter(Boolean);
if (sizes.length === 0) sizes.push(100, 1000, 10000);
const FRAMES = Number(process.env.BENCH_FRAMES || 120);

const b = spawnSync(process.execPath, [path.join(ui, "node_modules/vite/bin/vite.js"), "build", "--config", "bench/vite.config.ts", "--logLevel", "error"], {
  cwd: ui,
  stdio: "inherit",
});
if (b.status !== 0) process.exit(b.status ?? 1);

const dist = path.join(ui, "bench/dist");
const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" };
const server = http.createServer((req, res) => {
  const p = path.join(dist, decodeURIComponent(new URL(req.url, "http://x").pathname));
  if (!p.startsWith(dist) || !fs.existsSync(p) || fs.statSync(p).isDirectory()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": types[path.extname(p)] || "application/octet-stream" });
  fs.createReadStream(p).pipe(res);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor(p * s.length))] * 10) / 10;
};

try {
  const version = browser.version();
  for (const n of sizes) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const t0 = Date.now();
    await page.goto(`${base}/graph.html?n=${n}${process.env.BENCH_QUERY ? `&${process.env.BENCH_QUERY}` : ""}`);
    await page.waitForFunction(() => window.__benchInfo?.().layoutDone, null, { timeout: 120000, polling: 250 });
    const layoutDoneMs = Date.now() - t0;
    const info = await page.evaluate(() => window.__benchInfo());
    const r = await page.evaluate(async (frames) => {
      const g = window.__kastenGraph;
      const render = [];
      const refresh = [];
      const overlay = [];
      for (let i = 0; i < 5; i++) render.push(g.measureRender());
      for (let i = 0; i < 5; i++) refresh.push(g.measureRefresh());
      for (let i = 0; i < 5; i++) overlay.push(g.measureOverlay());
      const animate = await g.measureFrames(frames, { mode: "animate" });
      const redraw = await g.measureFrames(Math.min(frames, 60), { mode: "redraw" });
      return { render, refresh, overlay, animate, redraw, dashed: g.dashedLinks(), readable: window.__benchReadability() };
    }, FRAMES);
    const med = (xs) => pct(xs, 0.5);
    console.log(
      JSON.stringify({
        engine: `chromium ${version} (headless, --disable-gpu)`,
        notes: info.notes,
        view: info.view + (info.open ? `:${info.open}` : ""),
        nodes: info.nodes,
        edges: info.edges,
        dashed: r.dashed,
        buildMs: Math.round(info.buildMs),
        mountMs: Math.round(info.mountMs),
        layoutDoneMs,
        renderMs: med(r.render),
        refreshMs: med(r.refresh),
        overlayMs: med(r.overlay),
        edgeInk: Math.round(r.readable.edgeInk * 1000) / 1000,
        overlapping: Math.round(r.readable.overlapping * 1000) / 1000,
        frameMs: { animate: { p50: pct(r.animate, 0.5), p95: pct(r.animate, 0.95) }, redraw: { p50: pct(r.redraw, 0.5), p95: pct(r.redraw, 0.95) } },
        frames: r.animate.length + r.redraw.length,
      }),
    );
    await page.close();
  }
} finally {
  await browser.close();
  server.close();
}
