// The native Open / Save dialogs (tauri-plugin-dialog; the capability allows only these
// two). Every dialog of the app goes through here.
//
// WebDriver cannot drive a native dialog: the e2e suite puts the paths to "pick" next in
// `window.__kastenPick` (null: the user cancelled), and the rest of the way — the button,
// the confirmation, the command, its progress and result — is the app's own. Any page script
// can call the commands with any path already, so this grants nothing.
import { open, save, type OpenDialogOptions, type SaveDialogOptions } from "@tauri-apps/plugin-dialog";

declare global {
  interface Window {
    /** Paths the next dialogs answer with, first first (e2e only). */
    __kastenPick?: (string | null)[];
  }
}

function queued(): string | null | undefined {
  const q = typeof window !== "undefined" ? window.__kastenPick : undefined;
  return q && q.length > 0 ? q.shift() : undefined;
}

/** A folder or a file picked in the Open dialog; null when cancelled. */
export async function pickOpen(options: Omit<OpenDialogOptions, "multiple">): Promise<string | null> {
  const q = queued();
  if (q !== undefined) return q;
  const r = await open({ ...options, multiple: false });
  return typeof r === "string" ? r : null;
}

/** A file name given in the Save dialog; null when cancelled. */
export async function pickSave(options: SaveDialogOptions): Promise<string | null> {
  const q = queued();
  if (q !== undefined) return q;
  return save(options);
}
