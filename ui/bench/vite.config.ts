// Builds the graph benchmark page (bench/graph.html) into bench/dist; not part of the app's
// bundle (ui/vite.config.ts builds index.html only). See "Graph performance" in ui/README.md.
import { defineConfig } from "vite";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root: here,
  base: "./",
  clearScreen: false,
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "safari15",
    rollupOptions: { input: { graph: `${here}graph.html` } },
  },
  worker: { format: "es" },
  preview: { port: 5174, strictPort: false },
});
