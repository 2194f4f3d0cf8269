// A generated memory for the graph benchmark page (bench/graph.html), shaped like the one
// src-tauri/src/perf_memory.rs writes: notes on 24 topics (one Box each), each note linked
// to 3 earlier notes, mostly of its own topic, one link in ten of the first ones proposed.
import type { BoxDto } from "../../api";
import type { GraphData } from "./graphData";

const TOPICS = [
  "garden", "piano", "rust", "climbing", "budget", "kitchen", "travel", "reading",
  "running", "chess", "photography", "sailing", "pottery", "astronomy", "cycling", "baking",
  "birds", "poetry", "coffee", "carpentry", "hiking", "movies", "language", "meditation",
];

/** A deterministic generator (the same LCG as perf_memory.rs). */
function lcg(seed: bigint) {
  let s = seed;
  const M = (1n << 64n) - 1n;
  return (n: number) => {
    s = (s * 6364136223846793005n + 1442695040888963407n) & M;
    return Number((s >> 33n) % BigInt(Math.max(n, 1)));
  };
}

export function syntheticMemory(n: number, seed = 42): { data: GraphData; boxes: BoxDto[] } {
  const below = lcg(BigInt(seed));
  const topic: number[] = [];
  const nodes: GraphData["nodes"] = [];
  for (let i = 0; i < n; i++) {
    const t = below(TOPICS.length);
    topic.push(t);
    nodes.push({ id: `n${i}`, label: `Note ${i} about ${TOPICS[t]}`, tags: [TOPICS[t]], enrich: "done", boxes: [`b${t}`], strength: 1 });
  }
  const links: GraphData["links"] = [];
  for (let i = 3; i < n; i++) {
    const targets: number[] = [];
    while (targets.length < 3) {
      const j = below(i);
      const same = topic[j] === topic[i] || below(10) === 0;
      if (same && !targets.includes(j)) targets.push(j);
    }
    targets.forEach((j, k) => {
      const status = k === 0 && below(10) === 0 ? "proposed" : "accepted";
      links.push({ id: `l${i}-${k}`, from: `n${i}`, to: `n${j}`, kind: "relates", status, confidence: 0.8 });
    });
  }
  const sizes = TOPICS.map((_, t) => topic.filter((x) => x === t).length);
  const boxes = TOPICS.map((name, t) => ({ id: `b${t}`, label: name, size: sizes[t] })).sort((a, b) => b.size - a.size);
  return { data: { nodes, links, truncated: false }, boxes };
}
