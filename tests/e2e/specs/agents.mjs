// The built-in model, an agent over MCP while the app is open, editing a note's text.
import { $t, $$t, assert, launch, screenshot } from "../harness.mjs";
import { T, SAMPLE_NOTES, ready, nav, enrichedCount, typingLatency, mcpClient, setText } from "./common.mjs";

/**
 * The LLM out of the box: with no LLM variables and no settings the app says it uses the
 * built-in model, offers the server it found on this machine (the fake one, added to the
 * probe list through KASTEN_LLM_DISCOVER) without using it, and "Load the sample notebook"
 * turns every note from pending to enriched with the built-in model. Then one click in
 * Settings switches to the found server and back.
 */
export async function builtinLlm({ llmUrl }) {
  const app = await launch({ builtinLlm: true, extraEnv: { KASTEN_LLM_DISCOVER: llmUrl } });
  const { browser } = app;
  try {
    await ready(browser);
    const firstRun = await $t(browser, "first-run-llm").getText();
    assert(firstRun.includes("built-in Qwen2.5-Coder-0.5B"), `the first run names the built-in model (${firstRun})`);
    await $t(browser, "first-run-servers").waitForDisplayed({ timeout: T });
    const found = await $t(browser, "first-run-servers").getText();
    const port = new URL(llmUrl).port;
    assert(found.includes(`127.0.0.1:${port}`) && found.includes("fake-model"), `the first run lists the server found (${found})`);
    const llmStatus = await $t(browser, "llm-status").getText();
    assert(llmStatus.includes("built-in Qwen2.5-Coder-0.5B"), `the status bar names the built-in model (${llmStatus})`);

    // typing while nothing runs: the peer of the figure taken while the model enriches
    const typingIdle = await typingLatency(browser);
    const t0 = Date.now();
    await browser.$("button=Load the sample notebook").click();
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === SAMPLE_NOTES, { timeout: T, timeoutMsg: "the sample did not load" });
    // typing in the editor while the built-in model enriches the sample (reported, not asserted)
    const typingEnriching = await typingLatency(browser);
    const pendingWhileTyping = (await browser.$$('[data-testid="note-item"][data-enrich="pending"]')).length;
    await browser.waitUntil(
      async () => (await browser.$$('[data-testid="note-item"][data-enrich="pending"]')).length === 0,
      { timeout: 900000, interval: 2000, timeoutMsg: "some sample notes stayed pending with the built-in model" },
    );
    const enrichSeconds = (Date.now() - t0) / 1000;
    // the app's peak memory with the model loaded and all the sample notes enriched
    const peakRssMiB = app.peakRssMiB();
    const failedItems = await browser.$$('[data-testid="note-item"][data-enrich="failed"]');
    const failed = failedItems.length;
    // why each failed, as the app shows it (the failed badge's title)
    const why = [];
    for (const item of failedItems) why.push(await item.$(".badge.failed").getAttribute("title").catch(() => "?"));
    const done = await enrichedCount(browser);
    assert(done === SAMPLE_NOTES && failed === 0, `every sample note enriched by the built-in model (${done} done, ${failed} failed: ${why.join(" | ")})`);
    // a note shows keywords the model chose
    await (await $$t(browser, "note-item"))[0].click();
    await browser.waitUntil(async () => (await $t(browser, "note-detail").getAttribute("data-enrich")) === "done", { timeout: T });
    await screenshot(browser, "builtin-llm-note");

    // Settings: the built-in model in use, the found server one click away
    await nav(browser, "settings");
    await $t(browser, "llm-in-use").waitForDisplayed({ timeout: T });
    assert((await $t(browser, "llm-in-use").getText()).includes("built-in Qwen2.5-Coder-0.5B"), "Settings name the built-in model");
    await $t(browser, "llm-use-0").waitForDisplayed({ timeout: T });
    await $t(browser, "llm-use-0").click();
    await browser.waitUntil(async () => (await $t(browser, "llm-in-use").getText()).includes("fake-model"), {
      timeout: T,
      timeoutMsg: "the found server was not taken into use",
    });
    await browser.waitUntil(async () => (await $t(browser, "llm-status").getText()).includes("fake-model"), {
      timeout: T,
      timeoutMsg: "the status bar does not name the server now in use",
    });
    await $t(browser, "llm-use-builtin").click();
    await browser.waitUntil(async () => (await $t(browser, "llm-status").getText()).includes("built-in"), {
      timeout: T,
      timeoutMsg: "the status bar does not name the built-in model again",
    });
    return {
      enrichSeconds: Math.round(enrichSeconds),
      perNote: +(enrichSeconds / SAMPLE_NOTES).toFixed(1),
      peakRssMiB,
      typingMs: { idle: typingIdle, enriching: typingEnriching, pendingWhileTyping },
    };
  } finally {
    await app.close();
  }
}

/**
 * One memory for the app and an agent: with the app open, an agent's `kasten mcp` goes
 * through the app (no "open in another process"). The note it adds appears in the app's
 * list without a reload, the status bar counts the agent, and the agent finds a note the
 * user wrote in the app.
 */
export async function agentOverMcp() {
  const app = await launch({});
  const { browser } = app;
  let agent = null;
  try {
    await ready(browser);
    const input = $t(browser, "note-input");
    await input.waitForDisplayed({ timeout: T });
    await input.setValue("The plumber comes on Friday at eight to fix the kitchen tap.");
    await $t(browser, "note-save").click();
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 1, { timeout: T, timeoutMsg: "the user's note did not appear" });

    agent = mcpClient(app.home);
    await agent.request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "e2e-agent", version: "1.0" } });
    agent.notify("notifications/initialized");
    await browser.waitUntil(async () => (await $t(browser, "clients").isExisting()) && (await $t(browser, "clients").getText()) === "1 agent connected", {
      timeout: T,
      timeoutMsg: "the status bar does not count the agent",
    });
    const found = await agent.request("tools/call", { name: "search_memory", arguments: { query: "when does the plumber come", k: 3 } });
    assert(JSON.stringify(found).includes("plumber comes on Friday"), `the agent finds the user's note (${JSON.stringify(found).slice(0, 300)})`);
    const t0 = Date.now();
    const added = await agent.request("tools/call", { name: "add_memory", arguments: { content: "The user prefers tea over coffee in the afternoon." } });
    assert(!added.isError, `add_memory worked (${JSON.stringify(added).slice(0, 300)})`);
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 2, { timeout: T, interval: 100, timeoutMsg: "the agent's note did not appear in the app" });
    const appearMs = Date.now() - t0;
    const texts = [];
    for (const item of await $$t(browser, "note-item")) texts.push(await item.getProperty("textContent"));
    assert(texts.some((t) => t.includes("prefers tea over coffee")), `the list shows the agent's note (${texts.join(" | ")})`);
    await agent.close();
    agent = null;
    await browser.waitUntil(async () => !(await $t(browser, "clients").isExisting()), { timeout: T, timeoutMsg: "the agent is still counted after it left" });
    return { appearMs };
  } finally {
    if (agent) await agent.close();
    await app.close();
  }
}

/** Edit a note's text in its detail: the history shows the line diff, rolling it back
 *  restores the text exactly. */
export async function editText({ llmUrl }) {
  const app = await launch({ llmUrl });
  const { browser } = app;
  try {
    await ready(browser);
    const original = "The ferry to Lindau leaves at nine.\nBring the bikes.";
    await setText(browser, "note-input", original);
    await $t(browser, "note-save").click();
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 1, { timeout: T });
    const content = $t(browser, "note-content");
    await content.waitForDisplayed({ timeout: T });

    const constructions = async () => (await browser.$$('[data-testid="history-item"][data-action="construction"]')).length;
    await browser.waitUntil(async () => (await constructions()) === 1, { timeout: 90000, timeoutMsg: "the note was not enriched" });
    await $t(browser, "note-edit").click();
    const box = $t(browser, "note-edit-input");
    const start = await box.getValue();
    assert(start === original, `the editor starts from the note's text (${JSON.stringify(start)})`);
    await box.click();
    await setText(browser, "note-edit-input", "The ferry to Bregenz leaves at ten.\nBring the bikes.");
    await $t(browser, "note-edit-save").click();
    await browser.waitUntil(async () => (await content.getProperty("textContent")) === "The ferry to Bregenz leaves at ten.\nBring the bikes.", {
      timeout: T,
      timeoutMsg: "the new text is not shown",
    });

    const entry = browser.$('[data-testid="history-item"][data-action="edit"]');
    await entry.waitForExist({ timeout: T });
    const lines = await entry.$$('[data-testid="history-content-diff"] > div');
    const diff = [];
    for (const l of lines) diff.push(`${await l.getAttribute("data-op")}|${(await l.getProperty("textContent")).slice(2)}`);
    assert(
      JSON.stringify(diff) === JSON.stringify(["-|The ferry to Lindau leaves at nine.", "+|The ferry to Bregenz leaves at ten.", " |Bring the bikes."]),
      `the history shows the diff (${JSON.stringify(diff)})`,
    );
    // the note goes back to the LLM: enriched again from the new text
    await browser.waitUntil(async () => (await constructions()) === 2, {
      timeout: 90000,
      timeoutMsg: "the edited note was not enriched again",
    });

    await browser.$('[data-testid="history-item"][data-action="edit"] [data-testid="rollback"]').click();
    await browser.waitUntil(async () => (await content.getProperty("textContent")) === original, {
      timeout: T,
      timeoutMsg: "rolling back did not restore the text exactly",
    });
    return { ok: true };
  } catch (e) {
    await screenshot(browser, "failure").catch(() => {});
    console.error("--- app log ---\n" + app.log().slice(-4000));
    throw e;
  } finally {
    await app.close();
  }
}
