// What the e2e specs share: timeouts, navigation, pickers, generated vaults, the CLI.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $t, $$t, CLI, memoryEnv } from "../harness.mjs";

export const T = 60000;

/** Notes in the sample notebook (assets/sample-notes.jsonl: English and Chinese). */
export const SAMPLE_NOTES = 17;

export async function ready(browser) {
  await browser.waitUntil(async () => (await $t(browser, "status-bar").getAttribute("data-memory")) === "ready", {
    timeout: 90000,
    timeoutMsg: "the memory did not open",
  });
}

export async function nav(browser, view) {
  await $t(browser, `nav-${view}`).click();
  if (view === "settings") await settingsSettled(browser);
}

/** Waits until the panels above the settings form have loaded: the LLM panel's servers and
 * the catalog's models grow the page when they arrive, and a click aimed at the form while
 * it moves down lands on whatever took its place (a CI run lost the Save click so). */
async function settingsSettled(browser) {
  await browser.waitUntil(
    async () => {
      const rescan = await browser.$('[data-testid="llm-rescan"]');
      if (!(await rescan.isExisting()) || !(await rescan.isEnabled())) return false;
      const models = await browser.$$('[data-testid="models-panel"] li');
      const modelsError = await browser.$('[data-testid="models-error"]');
      return models.length > 0 || (await modelsError.isExisting());
    },
    { timeout: 60000, timeoutMsg: "the settings view did not finish loading its LLM and model panels" },
  );
}

export async function enrichedCount(browser) {
  return (await browser.$$('[data-testid="note-item"][data-enrich="done"]')).length;
}

/** Makes the next native dialogs "pick" these paths (WebDriver cannot drive a native dialog; ui/src/dialogs.ts). */
export async function pick(browser, ...paths) {
  await browser.execute((p) => {
    window.__kastenPick = p;
  }, paths);
}

/** Clicks a button in the middle of the view (at the bottom edge a toast can take the click). */
export async function press(browser, id) {
  const el = $t(browser, id);
  await el.waitForDisplayed({ timeout: T });
  await el.scrollIntoView({ block: "center" });
  await el.click();
}

/** Clicks a button that opens a dialog, and clicks again if the dialog was never asked (the
 *  queued pick is still unread): in a full run a click on a view still settling after a
 *  navigation was once lost (the restore's confirmation never came, the pick was unread). */
export async function pressPicking(browser, id) {
  for (let i = 0; i < 3; i++) {
    await press(browser, id);
    const asked = await browser
      .waitUntil(async () => (await browser.execute(() => (window.__kastenPick ?? []).length)) === 0, { timeout: 5000 })
      .then(
        () => true,
        () => false,
      );
    if (asked) return;
  }
  throw new Error(`${id}: clicked three times and its dialog was never asked`);
}

/** Waits until Export and backup shows a result (or an error, which fails the spec with its words). */
export async function transferDone(browser, pattern, timeout = T) {
  let said = "";
  await browser.waitUntil(
    async () => {
      const err = await browser.execute(() => document.querySelector('[data-testid="transfer-error"]')?.textContent ?? "");
      if (err) throw new Error(`Export and backup said: ${err}`);
      said = await browser.execute(() => document.querySelector('[data-testid="transfer-result"]')?.textContent ?? "");
      return pattern.test(said);
    },
    { timeout, timeoutMsg: `no result matching ${pattern}` },
  );
  return said;
}

export const TOPICS = ["garden", "piano", "climbing", "budget", "kitchen", "travel", "chess", "sailing", "pottery", "astronomy", "baking", "birds"];

/**
 * A generated Obsidian vault of `n` notes on 12 topics: each note links with [[wikilinks]] to
 * 3 earlier notes of its topic (one link in ten to another topic), and is marked enriched
 * (no enrichment job); the last `pending` notes are plain, unlinked notes that wait for the LLM.
 */
export function generatedVault(n, pending) {
  const vault = mkdtempSync(join(tmpdir(), "kasten-e2e-big-vault-"));
  let s = 42;
  const below = (k) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return Math.floor((s / 2147483648) * k);
  };
  for (let i = 0; i < n; i++) {
    const t = TOPICS[i % TOPICS.length];
    if (i >= n - pending) {
      writeFileSync(join(vault, `Note ${i}.md`), `A fresh thought about ${t} number ${i}, not yet enriched.\n`);
      continue;
    }
    const links = new Set();
    for (let k = 0; k < 3 && i >= TOPICS.length; k++) {
      // an earlier note of the same topic, or (one in ten) the note just before (another topic)
      const j = below(10) === 0 ? i - 1 : (i % TOPICS.length) + TOPICS.length * below(Math.floor(i / TOPICS.length));
      if (j !== i) links.add(j);
    }
    const body = `Note ${i} about ${t}: observation ${below(1000)} with detail ${below(1000)}.`;
    const see = [...links].map((j) => `[[Note ${j}]]`).join(" ");
    writeFileSync(join(vault, `Note ${i}.md`), `---\ntags: [${t}]\nkasten_enriched: true\n---\n${body}\n${see ? `See ${see}.\n` : ""}`);
  }
  return vault;
}

/** Seeds memory `home` with a generated vault of `notes` notes (CLI import, then Boxes). */
export function seedGenerated(home, notes, pending) {
  const t0 = Date.now();
  cli(home, ["import", "--format", "markdown", generatedVault(notes, pending)]);
  const importMs = Date.now() - t0;
  cli(home, ["boxes", "--recompute"]);
  return { importMs, recomputeMs: Date.now() - t0 - importMs };
}

export function cli(home, args) {
  const r = spawnSync(CLI, args, { env: { ...memoryEnv(home), KASTEN_LLM_PROVIDER: "none" }, encoding: "utf8", timeout: 600000 });
  if (r.status !== 0) throw new Error(`kasten ${args.join(" ")}: ${r.status}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/**
 * Typing latency in the note editor: `chars` keys typed through WebDriver, each measured in
 * the page from the key's input event to the frame after it was handled (what a person
 * sees). Returns p50 / p95 in ms; the editor is emptied again (nothing is saved).
 */
export async function typingLatency(browser, chars = 40) {
  await browser.execute(() => {
    window.__typing = [];
    const el = document.querySelector('[data-testid="note-input"]');
    if (window.__typingListener) el.removeEventListener("input", window.__typingListener);
    window.__typingListener = (e) => {
      const t = e.timeStamp;
      requestAnimationFrame(() => setTimeout(() => window.__typing.push(performance.now() - t), 0));
    };
    el.addEventListener("input", window.__typingListener);
  });
  const input = $t(browser, "note-input");
  await input.click();
  const text = "the quick brown fox jumps over the lazy dog ".repeat(2).slice(0, chars);
  for (const c of text) await browser.keys(c);
  await browser.pause(200);
  const lat = await browser.execute(() => {
    const el = document.querySelector('[data-testid="note-input"]');
    el.removeEventListener("input", window.__typingListener);
    return window.__typing.slice();
  });
  await setText(browser, "note-input", "");
  lat.sort((a, b) => a - b);
  const at = (q) => (lat.length ? +lat[Math.min(lat.length - 1, Math.floor(q * lat.length))].toFixed(1) : null);
  return { n: lat.length, p50: at(0.5), p95: at(0.95) };
}

/** An MCP client over `kasten mcp`'s stdio: newline-delimited JSON-RPC. */
export function mcpClient(home) {
  const proc = spawn(CLI, ["mcp"], { env: { ...memoryEnv(home), KASTEN_LLM_PROVIDER: "none" }, stdio: ["pipe", "pipe", "pipe"] });
  let buf = "";
  let stderr = "";
  const waiting = new Map();
  proc.stdout.on("data", (d) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.id !== undefined && waiting.has(msg.id)) {
        waiting.get(msg.id)(msg);
        waiting.delete(msg.id);
      }
    }
  });
  proc.stderr.on("data", (d) => (stderr += d.toString()));
  let next = 1;
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => reject(new Error(`no answer to ${method} in 30 s; stderr: ${stderr}`)), 30000);
      waiting.set(id, (m) => {
        clearTimeout(timer);
        if (m.error) reject(new Error(`${method}: ${JSON.stringify(m.error)}`));
        else resolve(m.result);
      });
      proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  const notify = (method) => proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", method }) + "\n");
  const close = () =>
    new Promise((resolve) => {
      proc.once("exit", resolve);
      proc.stdin.end();
      setTimeout(() => proc.kill("SIGKILL"), 10000);
    });
  return { request, notify, close, stderr: () => stderr };
}

export async function addNote(browser, text, count) {
  await $t(browser, "note-input").setValue(text);
  await $t(browser, "note-save").click();
  await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === count, {
    timeout: T,
    timeoutMsg: `note ${count} did not appear`,
  });
}

/** Sets a textarea's text as typing would (WebKitWebDriver drops "\n" from typed keys). */
export async function setText(browser, testid, text) {
  await browser.execute(
    (id, t) => {
      const el = document.querySelector(`[data-testid="${id}"]`);
      Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set.call(el, t);
      el.dispatchEvent(new Event("input", { bubbles: true }));
    },
    testid,
    text,
  );
}

export async function acceptedLinks(browser) {
  return browser.$$('[data-testid="note-detail"] [data-testid="link-item"][data-status="accepted"]');
}

/** Sets the "as of" date control to `day` (YYYY-MM-DD), or clears it with "". */
export async function setAsOf(browser, day) {
  await browser.execute((v) => {
    const el = document.querySelector('[data-testid="as-of-date"]');
    // the native setter, so React sees the change as a person's
    Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(el, v);
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  }, day);
}

/** The ids of the notes listed, in order. */
export async function listedIds(browser) {
  const items = await $$t(browser, "note-item");
  const ids = [];
  for (const i of items) ids.push(await i.getAttribute("data-id"));
  return ids;
}

/** The English UI strings on the page (user and model data, marked translate="no", left out). */
export async function englishOnPage(browser) {
  return browser.execute(() => window.__kastenI18n.englishLeft(window.__kastenI18n.uiText(document.body)));
}

/** What the page shows at one instant (read in one script, so the parts agree in time). */
export async function firstScreen(browser) {
  return browser.execute(() => {
    const bar = document.querySelector('[data-testid="status-bar"]');
    return {
      memory: bar?.getAttribute("data-memory") ?? null,
      llmStatus: document.querySelector('[data-testid="llm-status"]')?.textContent ?? "",
      text: document.body.innerText,
      errors: Array.from(document.querySelectorAll(".error"))
        .map((e) => e.textContent ?? "")
        .filter((t) => t.trim()),
      notesOpening: document.querySelector('[data-testid="notes-opening"]')?.textContent ?? null,
      viewOpening: document.querySelector('[data-testid="memory-opening"]')?.textContent ?? null,
      firstRunLlm: document.querySelector('[data-testid="first-run-llm"]')?.textContent ?? null,
    };
  });
}
