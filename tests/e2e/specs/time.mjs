// Facts over time: fading and archiving, supersession and the as-of control.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $t, $$t, assert, launch, screenshot } from "../harness.mjs";
import { T, ready, nav, cli, setAsOf, listedIds } from "./common.mjs";

/** The lifecycle, visible: with the archive threshold at 1 every note fades at once; the
 *  detail says so, the Fading view archives one, the archived note opens and is restored;
 *  a note put in a project stops fading until the project is closed. */
export async function fadingView() {
  const home = mkdtempSync(join(tmpdir(), "kasten-e2e-"));
  cli(home, ["config", "set", "lifecycle.archive_threshold", "1"]);
  // with a threshold of 1 any strength below 1 fades; opening a note would reinforce it to
  // just below 1 and keep a project note (which does not decay) "fading" for ever
  cli(home, ["config", "set", "retrieval.reinforce", "chat"]);
  cli(home, ["add", "Today's plan: buy stamps."]);
  cli(home, ["add", "Remember the blue umbrella."]);
  const app = await launch({ home });
  const { browser } = app;
  try {
    await ready(browser);
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 2, { timeout: T });
    await (await $$t(browser, "note-item"))[0].click();
    const strength = $t(browser, "note-strength");
    await strength.waitForDisplayed({ timeout: T });
    assert((await strength.getAttribute("data-fading")) === "true", "the detail says the note is fading");
    assert(/fading/.test(await strength.getProperty("textContent")), "the bar is labelled fading");
    assert((await $t(browser, "note-tier").getProperty("textContent")).length > 0, "the tier is shown");

    await nav(browser, "fading");
    await $t(browser, "fading-view").waitForDisplayed({ timeout: T });
    await browser.waitUntil(async () => (await $$t(browser, "fading-item")).length === 2, { timeout: T, timeoutMsg: "the fading notes are not listed" });
    await screenshot(browser, "fading");
    const archivedId = await (await $$t(browser, "fading-item"))[0].getAttribute("data-id");
    await $t(browser, "fading-archive-0").click();
    await browser.waitUntil(async () => (await $$t(browser, "fading-item")).length === 1 && (await $$t(browser, "archived-item")).length === 1, {
      timeout: T,
      timeoutMsg: "archiving did not move the note to Archived",
    });
    await $t(browser, "fading-keep-0").click();
    await browser.waitUntil(async () => /Kept/.test(await $t(browser, "toast").getProperty("textContent")), { timeout: T });

    // an archived note is reachable: it opens, says so, and is restored from its detail
    await browser.$('[data-testid="archived-item"] .content').click();
    const restore = $t(browser, "note-restore");
    await restore.waitForDisplayed({ timeout: T, timeoutMsg: "the archived note's detail offers no restore" });
    assert((await $t(browser, "note-detail").getAttribute("data-id")) === archivedId, "the archived note opened");
    await restore.click();
    await $t(browser, "note-archive").waitForDisplayed({ timeout: T, timeoutMsg: "the note was not restored" });
    await nav(browser, "fading");
    await browser.waitUntil(async () => (await $$t(browser, "archived-item")).length === 0 && (await $$t(browser, "fading-item")).length === 2, {
      timeout: T,
      timeoutMsg: "the restored note is not back among the fading ones",
    });

    // a note of an open project does not fade; closing the project lets it fade again
    await browser.$('[data-testid="fading-item"] .content').click();
    await $t(browser, "note-tier-select").waitForDisplayed({ timeout: T });
    await $t(browser, "note-tier-select").selectByAttribute("value", "project");
    await $t(browser, "note-project").setValue("thesis");
    await $t(browser, "note-project-save").click();
    await browser.waitUntil(async () => (await $t(browser, "note-tier").getProperty("textContent")) === "project: thesis", {
      timeout: T,
      timeoutMsg: "the tier was not set",
    });
    await browser.waitUntil(async () => (await $t(browser, "note-strength").getAttribute("data-fading")) === "false", {
      timeout: T,
      timeoutMsg: "a note of an open project still fades",
    });
    await nav(browser, "fading");
    await browser.waitUntil(async () => (await $$t(browser, "fading-item")).length === 1 && (await $$t(browser, "project-item")).length === 1, {
      timeout: T,
      timeoutMsg: "the project note is still listed as fading, or the project is not shown",
    });
    await $t(browser, "project-toggle-0").click();
    await browser.waitUntil(
      async () => (await browser.$('[data-testid="project-item"]').getAttribute("data-open")) === "false" && (await $$t(browser, "fading-item")).length === 2,
      { timeout: T, timeoutMsg: "closing the project did not let its note fade" },
    );
    return { ok: true };
  } catch (e) {
    await screenshot(browser, "failure").catch(() => {});
    console.error("--- app log ---\n" + app.log().slice(-4000));
    throw e;
  } finally {
    await app.close();
  }
}

/**
 * Facts that change, the rent example: "Our rent is 1,200 euros a month." (noted in March),
 * then "From September the rent is 1,300 euros." written in the app under the review policy.
 * Review shows the supersession side by side; "newer replaces older" accepts it; search puts
 * the current value first and says what replaced the old one; the notes show their validity;
 * the "as of" control gives the memory as it stood before the new value took effect (in
 * Notes, searched and listed, and in Chat) and, cleared, today's again.
 */
export async function factsChange({ llmUrl }) {
  const home = mkdtempSync(join(tmpdir(), "kasten-e2e-"));
  cli(home, ["config", "set", "policy.links", "review"]);
  cli(home, ["add", "--time", "2026-03-01T09:00:00Z", "Our rent is 1,200 euros a month."]);
  const app = await launch({ llmUrl, home });
  const { browser } = app;
  try {
    await ready(browser);
    const input = $t(browser, "note-input");
    await input.waitForDisplayed({ timeout: T });
    await input.setValue("From September the rent is 1,300 euros.");
    await $t(browser, "note-save").click();
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 2, { timeout: T, timeoutMsg: "the new note did not appear" });

    // Review: the older note beside the newer, with their dates and what changed
    await nav(browser, "review");
    const card = $t(browser, "supersession-proposal");
    await card.waitForDisplayed({ timeout: T, timeoutMsg: "no supersession proposal in Review" });
    const proposal = await card.getAttribute("data-id");
    const older = await card.$('[data-testid="supersession-older"]');
    const newer = await card.$('[data-testid="supersession-newer"]');
    const oldId = await older.getAttribute("data-id");
    const newId = await newer.getAttribute("data-id");
    assert(/1,200/.test(await older.getText()) && /1,300/.test(await newer.getText()), "older | newer side by side");
    assert(await card.$('[data-testid="supersession-older-from"]').isExisting(), "the older note's date is shown");
    assert(await card.$('[data-testid="supersession-newer-from"]').isExisting(), "the newer note's date is shown");
    const reason = await card.$('[data-testid="supersession-reason"]').getText();
    assert(/rent: 1,200 euros → 1,300 euros/.test(reason), `the reason says what changed (${reason})`);
    assert(await card.$('[data-testid="review-both-true"]').isExisting(), "both stay true is offered");
    assert(await card.$('[data-testid="review-reject"]').isExisting(), "reject is offered");
    await card.$('[data-testid="review-replace"]').click();
    await browser.waitUntil(async () => !(await browser.$(`[data-testid="supersession-proposal"][data-id="${proposal}"]`).isExisting()), {
      timeout: T,
      timeoutMsg: "the accepted supersession stayed in the queue",
    });

    // Notes: the current value first, the old one below it, saying what replaced it
    await nav(browser, "notes");
    await $t(browser, "search-input").setValue("rent");
    await browser.waitUntil(async () => (await listedIds(browser)).join() === [newId, oldId].join(), {
      timeout: T,
      timeoutMsg: "search does not put the current value first",
    });
    const mark = browser.$(`[data-testid="note-item"][data-id="${oldId}"] [data-testid="hit-superseded-by"]`);
    assert((await mark.getAttribute("data-by")) === newId, "the old note says it was superseded by the new one");
    assert(!(await browser.$(`[data-testid="note-item"][data-id="${newId}"] [data-testid="hit-superseded-by"]`).isExisting()), "the new note is current");

    // the old note's detail: valid until the new value, superseded by it (which opens)
    await browser.$(`[data-testid="note-item"][data-id="${oldId}"] .content`).click();
    await browser.waitUntil(async () => (await $t(browser, "note-detail").getAttribute("data-id")) === oldId, { timeout: T });
    const validity = $t(browser, "note-validity");
    await validity.waitForDisplayed({ timeout: T });
    const until = await validity.getAttribute("data-until");
    assert(until !== "", "the old note's validity has an end");
    assert((await $t(browser, "note-superseded-by").getAttribute("data-id")) === newId, "the detail names the successor");
    await $t(browser, "note-successor").click();
    await browser.waitUntil(async () => (await $t(browser, "note-detail").getAttribute("data-id")) === newId, { timeout: T, timeoutMsg: "the successor did not open" });
    const newFrom = await $t(browser, "note-validity").getAttribute("data-from");
    assert(newFrom === until, `the old note holds until the new one's value took effect (${until} / ${newFrom})`);
    assert((await $t(browser, "note-validity").getAttribute("data-until")) === "", "the new note is current");
    assert((await $t(browser, "note-predecessor").getAttribute("data-id")) === oldId, "the new note names what it replaced");

    // as of the day before the new value took effect: the old value alone
    const dayBefore = new Date(Date.parse(newFrom) - 86400000).toISOString().slice(0, 10);
    await setAsOf(browser, dayBefore);
    await browser.waitUntil(async () => (await listedIds(browser)).join() === oldId, {
      timeout: T,
      timeoutMsg: `as of ${dayBefore} the search does not give the old value alone (${(await listedIds(browser)).join()})`,
    });
    assert(!(await $t(browser, "hit-superseded-by").isExisting()), "as of then, the old value was current");
    // on the day it took effect: today's order
    await setAsOf(browser, newFrom.slice(0, 10));
    await browser.waitUntil(async () => (await listedIds(browser)).join() === [newId, oldId].join(), {
      timeout: T,
      timeoutMsg: "as of the day the new value took effect, it is not first",
    });
    // cleared: today again
    await setAsOf(browser, dayBefore);
    await browser.waitUntil(async () => (await listedIds(browser)).join() === oldId, { timeout: T });
    await $t(browser, "as-of-clear").click();
    await browser.waitUntil(async () => (await listedIds(browser)).join() === [newId, oldId].join(), {
      timeout: T,
      timeoutMsg: "clearing the date did not return to today",
    });
    assert((await $t(browser, "as-of-date").getValue()) === "", "the date control is empty again");

    // the list without a query, as of the day before: the old note alone
    const search = $t(browser, "search-input");
    await search.click();
    await browser.keys(["Control", "a"]);
    await browser.keys("Backspace");
    await browser.waitUntil(async () => (await search.getValue()) === "", { timeout: T, timeoutMsg: "the search box did not clear" });
    const listed = async () => {
      const items = await $$t(browser, "note-item");
      for (const i of items) if (/vector|keyword/.test(await i.getText())) return null; // still search hits
      return listedIds(browser);
    };
    await browser.waitUntil(async () => (await listed())?.length === 2, { timeout: T, timeoutMsg: "the list did not come back" });
    await setAsOf(browser, dayBefore);
    await browser.waitUntil(async () => (await listed())?.join() === oldId, {
      timeout: T,
      timeoutMsg: `as of ${dayBefore} the list does not hold the old value alone (${(await listedIds(browser)).join()})`,
    });
    await $t(browser, "as-of-clear").click();
    await browser.waitUntil(async () => (await listed())?.length === 2, { timeout: T, timeoutMsg: "clearing the date did not list both again" });

    // Chat as of the day before: the answer reads the old value only
    await setAsOf(browser, dayBefore);
    await nav(browser, "chat");
    assert((await $t(browser, "as-of-active").getAttribute("data-day")) === dayBefore, "the date control above Chat holds the same day");
    await $t(browser, "chat-input").setValue("What is our rent?");
    await $t(browser, "chat-send").click();
    const answer = browser.$('[data-testid="chat-answer"][data-done="true"]');
    await answer.waitForDisplayed({ timeout: 90000, timeoutMsg: "no answer" });
    assert((await $t(browser, "chat-as-of").getAttribute("data-day")) === dayBefore, "the question says which day it was about");
    const text = await answer.getText();
    assert(!/1,300/.test(text), `as of then the answer does not read the new value (${text})`);
    const cites = await answer.$$('[data-testid="citation"]');
    assert(cites.length >= 1, `the answer cites a note (${text})`);
    await cites[0].click();
    await browser.waitUntil(async () => (await $t(browser, "note-detail").getAttribute("data-id")) === oldId, {
      timeout: T,
      timeoutMsg: "the answer as of then does not cite the old note",
    });
    return { ok: true, dayBefore, newFrom };
  } catch (e) {
    await screenshot(browser, "failure").catch(() => {});
    console.error("--- app log ---\n" + app.log().slice(-4000));
    throw e;
  } finally {
    await app.close();
  }
}

/**
 * The idle consolidation pass: facts imported before the app opened were never compared;
 * once the app is idle it compares them and the newer rent waits in Review as replacing the
 * older, with the older beside it, without anyone asking.
 */
export async function idleConsolidation({ llmUrl }) {
  const home = mkdtempSync(join(tmpdir(), "kasten-e2e-"));
  const facts = join(home, "facts.jsonl");
  writeFileSync(
    facts,
    [
      { content: "Our rent is 1,200 euros a month.", time: "2026-03-01T09:00:00Z" },
      { content: "We pay 40 euros a month for electricity.", time: "2026-03-02T09:00:00Z" },
      { content: "From September the rent is 1,300 euros.", time: "2026-09-01T09:00:00Z" },
    ]
      .map((f) => JSON.stringify(f))
      .join("\n") + "\n",
  );
  cli(home, ["import", facts, "--format", "jsonl"]);
  const app = await launch({ llmUrl, home, extraEnv: { KASTEN_CONSOLIDATE_IDLE: "2" } });
  const { browser } = app;
  try {
    await ready(browser);
    const t0 = Date.now();
    await nav(browser, "review");
    const card = $t(browser, "supersession-proposal");
    await card.waitForDisplayed({ timeout: T, timeoutMsg: "the idle pass filed no supersession in Review" });
    const older = await card.$('[data-testid="supersession-older"]').getText();
    const newer = await card.$('[data-testid="supersession-newer"]').getText();
    assert(/1,200/.test(older) && /1,300/.test(newer), `older | newer side by side (${older} | ${newer})`);
    assert((await $$t(browser, "supersession-proposal")).length === 1, "one supersession, filed once");
    return { filedAfterMs: Date.now() - t0 };
  } finally {
    await app.close();
  }
}
