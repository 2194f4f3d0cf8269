// Importing a vault and the file dialogs of import, export, backup and restore.
import { existsSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $t, $$t, assert, launch, screenshot } from "../harness.mjs";
import { T, ready, nav, pick, press, pressPicking, transferDone } from "./common.mjs";

/** Import a small Obsidian vault from Settings: progress, per-file problems, notes and
 *  links in the memory; importing it again adds nothing. */
export async function importVault({ llmUrl }) {
  const vault = mkdtempSync(join(tmpdir(), "kasten-e2e-vault-"));
  mkdirSync(join(vault, ".obsidian"));
  writeFileSync(join(vault, ".obsidian", "app.json"), "{}");
  writeFileSync(join(vault, "Pixel.md"), "---\ntags: [pets]\n---\nAda's dog Pixel loves the beach. See [[Beach trips]].\n");
  writeFileSync(join(vault, "Beach trips.md"), "We go to the beach every #summer with [[Pixel|the dog]].\n");
  writeFileSync(join(vault, "Broken.md"), "---\ntags: [unclosed\n---\nbody\n");
  writeFileSync(join(vault, "photo.png"), "not really a png");
  const app = await launch({ llmUrl });
  const { browser } = app;
  try {
    await ready(browser);
    await nav(browser, "settings");
    await $t(browser, "import-path").waitForDisplayed({ timeout: T });
    await $t(browser, "import-path").setValue(vault);
    await $t(browser, "import-run").click();
    await $t(browser, "import-result").waitForDisplayed({ timeout: 120000 });
    const first = await $t(browser, "import-result").getText();
    assert(/2 new note\(s\)/.test(first), `two notes imported: ${first}`);
    assert(/2 new link\(s\)/.test(first), `both wikilinks became links: ${first}`);
    assert(first.includes("Broken.md"), `the broken file is listed: ${first}`);
    assert(first.includes("1 attachment"), `the attachment is counted: ${first}`);
    await screenshot(browser, "import");
    // again: nothing new
    await $t(browser, "import-run").click();
    await browser.waitUntil(async () => /0 new note\(s\), 2 already there/.test(await $t(browser, "import-result").getText()), {
      timeout: 120000,
      timeoutMsg: "a second import added notes",
    });
    await nav(browser, "notes");
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 2, { timeout: T, timeoutMsg: "the notes list does not show the 2 imported notes" });
    return { first };
  } finally {
    await app.close();
  }
}

/**
 * Import through the dialog path, then export, backup and restore from Settings. The native
 * dialog is the one step WebDriver cannot drive: `pick` answers it, and everything after it
 * (the button, the command, progress, the result) is the app's own. A small vault is imported
 * with "Choose a folder…"; exported into a folder (two Markdown files); backed up; a note
 * added after the backup is gone after the restore (asked first), the memory before it is
 * kept beside the memory's folder; a cut-off backup is refused and changes nothing.
 */
export async function dialogTransfer() {
  const vault = mkdtempSync(join(tmpdir(), "kasten-e2e-dialog-vault-"));
  writeFileSync(join(vault, "Kettle.md"), "The kettle descales with citric acid every month. See [[Tea]].\n");
  writeFileSync(join(vault, "Tea.md"), "Green tea steeps at 80 degrees for two minutes.\n");
  const out = mkdtempSync(join(tmpdir(), "kasten-e2e-dialog-out-"));
  const exportDir = join(out, "vault");
  const backup = join(out, "kasten-backup.json");
  const cut = join(out, "cut.json");
  const app = await launch();
  const { browser } = app;
  const noteTexts = () => browser.execute(() => document.querySelector('[data-testid="note-list"]')?.textContent ?? "");
  try {
    await ready(browser);
    await nav(browser, "settings");
    // import: "Choose a folder…" (the Markdown format is the default)
    await $t(browser, "import-choose").waitForDisplayed({ timeout: T });
    await pick(browser, vault);
    await pressPicking(browser, "import-choose");
    await $t(browser, "import-result").waitForDisplayed({ timeout: 120000 });
    const imported = await $t(browser, "import-result").getText();
    assert(/2 new note\(s\)/.test(imported) && /1 new link\(s\)/.test(imported), `the vault picked was imported: ${imported}`);
    assert((await $t(browser, "import-path").getValue()) === vault, "the folder picked is shown as the path");
    await nav(browser, "notes");
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 2, { timeout: T, timeoutMsg: "the imported notes are not listed" });

    // export into a new folder
    await nav(browser, "settings");
    await pick(browser, exportDir);
    await pressPicking(browser, "export-vault");
    await transferDone(browser, /Exported 2 notes/);
    const files = readdirSync(exportDir).filter((f) => f.endsWith(".md")).sort();
    assert(files.length === 2, `two Markdown files: ${files}`);
    assert(files.some((f) => readFileSync(join(exportDir, f), "utf8").includes("citric acid")), "the note's text is in its file");

    // backup
    await pick(browser, backup);
    await pressPicking(browser, "backup-run");
    await transferDone(browser, /Backed up to/);
    assert(existsSync(backup), "the backup file was written");
    const whole = readFileSync(backup);
    writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));

    // a note written after the backup
    await nav(browser, "notes");
    await $t(browser, "note-input").setValue("Written after the backup.");
    await $t(browser, "note-save").click();
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 3, { timeout: T });

    // a cut-off backup: refused, nothing changes
    await nav(browser, "settings");
    await pick(browser, cut);
    await pressPicking(browser, "restore-run");
    await $t(browser, "restore-confirm").waitForDisplayed({ timeout: T });
    await press(browser, "restore-confirm-yes");
    await $t(browser, "transfer-error").waitForDisplayed({ timeout: T });
    const refused = await $t(browser, "transfer-error").getText();
    assert(/your memory is as it was/.test(refused), `the damaged backup is refused in words: ${refused}`);
    await nav(browser, "notes");
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 3, { timeout: T, timeoutMsg: "a refused restore changed the notes" });

    // the backup: asked first, then the memory is the backup's
    await nav(browser, "settings");
    await pick(browser, backup);
    await pressPicking(browser, "restore-run");
    await $t(browser, "restore-confirm").waitForDisplayed({ timeout: T });
    assert(/Replace this memory/.test(await $t(browser, "restore-confirm").getText()), "the restore asks first");
    await press(browser, "restore-confirm-yes");
    const restored = await transferDone(browser, /Restored/, 120000);
    const kept = readdirSync(app.home).filter((f) => f.startsWith("db.before-restore-"));
    assert(kept.length === 1 && restored.includes(kept[0]), `the memory before the restore is kept and named: ${restored} / ${kept}`);
    await nav(browser, "notes");
    await browser.waitUntil(async () => (await $$t(browser, "note-item")).length === 2, { timeout: T, timeoutMsg: "the restored memory does not hold the backup's 2 notes" });
    const text = await noteTexts();
    assert(text.includes("citric acid") && !text.includes("Written after the backup."), `the notes are the backup's: ${text}`);
    return { exported: files.length, kept: kept[0] };
  } catch (e) {
    const panel = await browser
      .execute(() => ({ pick: window.__kastenPick, panel: document.querySelector('[data-testid="transfer-panel"]')?.textContent }))
      .catch(() => null);
    console.error("--- transfer panel ---\n" + JSON.stringify(panel));
    await screenshot(browser, "failure").catch(() => {});
    console.error("--- app log ---\n" + app.log().slice(-4000));
    throw e;
  } finally {
    await app.close();
    rmSync(vault, { recursive: true, force: true });
    rmSync(out, { recursive: true, force: true });
  }
}
