// The e2e harness: the real app binary driven through tauri-driver + WebKitWebDriver,
// against kasten-fakellm, each spec with a fresh KASTEN_HOME and a fresh driver.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

export const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const require = createRequire(path.join(root, "ui/package.json"));
const { remote } = require("webdriverio");

const target = process.env.CARGO_TARGET_DIR || path.join(root, "target");
export const APP = process.env.KASTEN_APP || path.join(target, "debug/kasten-desktop");
export const FAKELLM = process.env.KASTEN_FAKELLM || path.join(target, "debug/kasten-fakellm");
export const CLI = process.env.KASTEN_CLI || path.join(target, "debug/kasten");
const dataHome = process.env.XDG_DATA_HOME || path.join(os.homedir(), ".local/share");
// where scripts/setup put the model and ONNX Runtime ($KASTEN_HOME, else the data dir)
const installed = process.env.KASTEN_INSTALLED_HOME || process.env.KASTEN_HOME || path.join(dataHome, "kasten");

function which(cmd) {
  const dirs = [...(process.env.PATH || "").split(":"), path.join(os.homedir(), ".cache/kasten-tools/bin"), path.join(os.homedir(), ".cargo/bin")];
  for (const d of dirs) {
    const p = path.join(d, cmd);
    if (fs.existsSync(p)) return p;
  }
  throw new Error(`${cmd} not found: run scripts/setup (it installs tauri-driver into ~/.cache/kasten-tools/bin)`);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

const children = [];

/** Starts a process in its own process group; killed (group) by `stopAll`. */
function start(cmd, args, opts = {}) {
  const p = spawn(cmd, args, { detached: true, stdio: ["ignore", "pipe", "pipe"], ...opts });
  children.push(p);
  return p;
}

export function stop(p) {
  if (!p || p.exitCode !== null || p.killed) return;
  try {
    process.kill(-p.pid, "SIGTERM");
  } catch {
    /* gone */
  }
}

export function stopAll() {
  for (const p of children.reverse()) stop(p);
}
process.on("exit", stopAll);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));

/** A fake LLM server; `args` are kasten-fakellm's (e.g. `["--mode", "slow:2000"]`). */
export async function startFakeLlm(args = []) {
  const p = start(FAKELLM, ["--port", "0", ...args]);
  const url = await new Promise((resolve, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error("kasten-fakellm did not start")), 20000);
    p.stdout.on("data", (d) => {
      buf += d;
      const m = /listening on (http:\/\/\S+)/.exec(buf);
      if (m) {
        clearTimeout(t);
        resolve(m[1]);
      }
    });
    p.on("exit", (c) => reject(new Error(`kasten-fakellm exited (${c})`)));
  });
  return { proc: p, url };
}

async function waitForPort(port, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await new Promise((r) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.end();
        r(true);
      });
      s.on("error", () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** The environment that points the app or the CLI at memory `home` and the embedding model. */
export function memoryEnv(home) {
  return {
    ...process.env,
    KASTEN_HOME: home,
    KASTEN_MODEL_DIR: process.env.KASTEN_MODEL_DIR || path.join(installed, "models/all-minilm-l6-v2-int8"),
    ORT_DYLIB_PATH: process.env.ORT_DYLIB_PATH || path.join(installed, "lib/libonnxruntime.so.1.31.1"),
  };
}

/**
 * A fresh app: new KASTEN_HOME, new tauri-driver, new WebDriver session. Without an LLM
 * unless `llmUrl` names one (the fake server) or `builtinLlm` lets the app choose as it
 * does on a fresh machine.
 * Returns { browser, home, close, startedAt }.
 */
export async function launch({ llmUrl, home, extraEnv = {}, builtinLlm = false } = {}) {
  home = home || fs.mkdtempSync(path.join(os.tmpdir(), "kasten-e2e-"));
  const env = {
    ...memoryEnv(home),
    // (WEBKIT_DISABLE_COMPOSITING_MODE=1 would keep WebGL out of screenshots)
    // Without a GPU the app turns WebKit's DMA-BUF renderer off (src-tauri/src/main.rs: its
    // frames take seconds there), but then WebKitWebDriver's screenshots hang: screenshot
    // runs keep it on (slow animation does not matter to them).
    ...(process.env.KASTEN_SCREENSHOTS && !process.env.WEBKIT_DISABLE_DMABUF_RENDERER ? { WEBKIT_DISABLE_DMABUF_RENDERER: "0" } : {}),
    KASTEN_LOG: process.env.KASTEN_LOG || "warn,kasten_desktop=info",
    // the idle consolidation pass would file proposals in the middle of other specs'
    // Review checks: off unless a spec asks for it
    KASTEN_CONSOLIDATE_IDLE: "0",
    ...extraEnv,
  };
  if (builtinLlm) {
    // as on a fresh machine: no LLM variables, no settings; the app picks the built-in
    // model that scripts/setup installed
    for (const k of Object.keys(env)) if (k.startsWith("KASTEN_LLM_") && !(k in extraEnv)) delete env[k];
  } else if (llmUrl) {
    env.KASTEN_LLM_PROVIDER = "openai";
    env.KASTEN_LLM_BASE_URL = `${llmUrl}/v1`;
    env.KASTEN_LLM_MODEL = "fake-model";
  } else if (!("KASTEN_LLM_PROVIDER" in extraEnv)) {
    // no LLM at all, not the built-in model either, unless a spec asks for it
    env.KASTEN_LLM_PROVIDER = "none";
  }
  const port = await freePort();
  const nativePort = await freePort();
  const driver = start(which("tauri-driver"), ["--port", String(port), "--native-port", String(nativePort)], { env });
  const log = fs.createWriteStream(path.join(home, "app.log"));
  driver.stdout.pipe(log);
  driver.stderr.pipe(log);
  await waitForPort(port, 20000);
  const startedAt = Date.now();
  const browser = await remote({
    hostname: "127.0.0.1",
    port,
    logLevel: "error",
    connectionRetryTimeout: 120000,
    capabilities: {
      "tauri:options": { application: APP },
      "wdio:enforceWebDriverClassic": true,
    },
  });
  const close = async () => {
    try {
      await browser.deleteSession();
    } catch {
      /* already gone */
    }
    stop(driver);
    await new Promise((r) => setTimeout(r, 500));
  };
  /**
   * SIGTERM to the app itself (found below tauri-driver → WebKitWebDriver), as a session
   * manager sends at logout; resolves once it has exited. Returns whether it exited.
   */
  const terminate = async () => {
    const app = descendants(driver.pid).find((p) => p.comm.startsWith("kasten-desktop"));
    if (!app) return false;
    process.kill(app.pid, "SIGTERM");
    for (let i = 0; i < 100; i++) {
      if (!fs.existsSync(`/proc/${app.pid}`)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const exited = !fs.existsSync(`/proc/${app.pid}`);
    stop(driver);
    return exited;
  };
  /** The app's peak resident memory so far (VmHWM, MiB), or null when it is not found. */
  const peakRssMiB = () => {
    const app = descendants(driver.pid).find((p) => p.comm.startsWith("kasten-desktop"));
    if (!app) return null;
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${app.pid}/status`, "utf8"));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  };
  return { browser, home, close, terminate, startedAt, peakRssMiB, log: () => fs.readFileSync(path.join(home, "app.log"), "utf8") };
}

/** The processes below `pid` (from /proc), with their command names. */
function descendants(pid) {
  const all = [];
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const m = /^(\d+) \((.*)\) \S+ (\d+)/.exec(stat);
      if (m) all.push({ pid: Number(m[1]), comm: m[2], ppid: Number(m[3]) });
    } catch {
      /* gone */
    }
  }
  const out = [];
  const walk = (p) => {
    for (const c of all.filter((x) => x.ppid === p)) {
      out.push(c);
      walk(c.pid);
    }
  };
  walk(pid);
  return out;
}

export const $t = (browser, id) => browser.$(`[data-testid="${id}"]`);
export const $$t = (browser, id) => browser.$$(`[data-testid="${id}"]`);

export function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

export async function screenshot(browser, name) {
  if (!process.env.KASTEN_SCREENSHOTS) return;
  const dir = path.join(root, "docs/screenshots");
  fs.mkdirSync(dir, { recursive: true });
  await browser.saveScreenshot(path.join(dir, `${name}.png`));
}
