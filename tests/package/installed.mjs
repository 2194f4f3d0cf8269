#!/usr/bin/env node
// The installed app (KASTEN_APP, e.g. /usr/bin/kasten-desktop from the .deb) opens its
// window on a fresh memory and finds the built-in model the package ships, driven through
// tauri-driver like the e2e suite. Run by tests/package/test-deb under xvfb-run, with
// XDG_DATA_HOME pointing at an empty folder (so nothing scripts/setup installed is found).
import { $t, $$t, assert, launch } from "../e2e/harness.mjs";

const T = 90000;
const app = await launch({
  builtinLlm: true,
  // no explicit model paths: the app must find the packaged ones by itself
  extraEnv: { KASTEN_MODEL_DIR: "", ORT_DYLIB_PATH: "", KASTEN_LLM_DISCOVER: "" },
});
const { browser } = app;
let ok = false;
try {
  await browser.waitUntil(async () => (await $t(browser, "status-bar").getAttribute("data-memory")) === "ready", {
    timeout: T,
    timeoutMsg: "the memory did not open",
  });
  const title = await browser.getTitle();
  assert(title === "Kasten", `the window is Kasten's (${title})`);
  assert((await $$t(browser, "note-item")).length === 0, "the memory is fresh (no notes)");
  const llm = await $t(browser, "first-run-llm").getText();
  assert(llm.includes("built-in Qwen2.5-Coder-0.5B"), `the first-run card names the packaged built-in model (${llm})`);
  assert(await browser.$("button=Load the sample notebook").isDisplayed(), "the first-run card offers the sample notebook");
  ok = true;
  console.log(`installed app: window open on a fresh memory in ${((Date.now() - app.startedAt) / 1000).toFixed(1)} s; ${llm.trim()}`);
} finally {
  await app.close();
  if (!ok) console.error(app.log());
}
process.exit(ok ? 0 : 1);
