/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The app is served by Tauri from ui/dist (custom protocol); `npm run dev` serves it at the
// root tauri.conf.json's devUrl for `cargo run -p kasten-desktop --no-default-features`.
export default defineConfig({
  plugins: [react()],
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  build: {
    outDir: "dist",
    target: "safari15",
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  worker: { format: "es" },
  test: {
    environment: "jsdom",
    // one layout: every test under src/test (src/test/layout.test.ts fails on one elsewhere)
    include: ["src/test/**/*.test.{ts,tsx}"],
    setupFiles: ["src/test/setup.ts"],
  },
});
