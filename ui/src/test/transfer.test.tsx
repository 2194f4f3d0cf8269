import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

// the native dialogs: what the user picks (null: the dialog was cancelled)
vi.mock("@tauri-apps/plugin-dialog", () => ({ open: vi.fn(), save: vi.fn() }));
vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return { ...real, api: { exportVault: vi.fn(), backupMemory: vi.fn(), restoreMemory: vi.fn() } };
});

import { open, save } from "@tauri-apps/plugin-dialog";
import { api, ApiError, type TransferProgressDto } from "../api";
import TransferPanel from "../features/settings/TransferPanel";

type Fn = ReturnType<typeof vi.fn>;
const mocked = api as unknown as Record<"exportVault" | "backupMemory" | "restoreMemory", Fn>;
const openDialog = open as unknown as Fn;
const saveDialog = save as unknown as Fn;

beforeEach(() => vi.clearAllMocks());

describe("TransferPanel", () => {
  it("exports into the folder picked in the Open dialog, with progress", async () => {
    openDialog.mockResolvedValue("/home/me/Vault");
    let release: () => void = () => {};
    mocked.exportVault.mockImplementation((_dir: string, onProgress: (p: unknown) => void) => {
      onProgress({ phase: "notes", done: 4, total: 9 });
      return new Promise((resolve) => {
        release = () => resolve({ dir: "/home/me/Vault", files: 9 });
      });
    });
    const { ctx } = renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("export-vault"));
    expect(openDialog).toHaveBeenCalledWith(expect.objectContaining({ directory: true, multiple: false }));
    await waitFor(() => expect(screen.getByTestId("transfer-progress").textContent).toBe("Exporting notes: 4 / 9"));
    expect(mocked.exportVault).toHaveBeenCalledWith("/home/me/Vault", expect.any(Function));
    release();
    await waitFor(() => expect(screen.getByTestId("transfer-result").textContent).toBe("Exported 9 notes to /home/me/Vault"));
    expect(ctx.toast).toHaveBeenCalled();
  });

  it("names the table a backup is writing, then the index a restore builds", async () => {
    saveDialog.mockResolvedValue("/home/me/kasten.json");
    let release: () => void = () => {};
    mocked.backupMemory.mockImplementation((_file: string, onProgress: (p: TransferProgressDto) => void) => {
      onProgress({ phase: "rows", table: "link", done: 2, total: 5 });
      return new Promise((resolve) => {
        release = () => resolve({ file: "/home/me/kasten.json", tables: [{ table: "link", rows: 5 }] });
      });
    });
    renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("backup-run"));
    await waitFor(() => expect(screen.getByTestId("transfer-progress").textContent).toBe("Backing up link: 2 / 5"));
    release();
    await waitFor(() => expect(screen.getByTestId("transfer-result").textContent).toBe("Backed up to /home/me/kasten.json: 5 link"));
  });

  it("does nothing when a dialog is cancelled", async () => {
    openDialog.mockResolvedValue(null);
    saveDialog.mockResolvedValue(null);
    renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("export-vault"));
    await userEvent.click(screen.getByTestId("backup-run"));
    await userEvent.click(screen.getByTestId("restore-run"));
    expect(openDialog).toHaveBeenCalledTimes(2);
    expect(saveDialog).toHaveBeenCalledTimes(1);
    expect(mocked.exportVault).not.toHaveBeenCalled();
    expect(mocked.backupMemory).not.toHaveBeenCalled();
    expect(mocked.restoreMemory).not.toHaveBeenCalled();
    expect(screen.queryByTestId("restore-confirm")).toBeNull();
  });

  it("backs up to the file named in the Save dialog", async () => {
    saveDialog.mockResolvedValue("/home/me/kasten.json");
    mocked.backupMemory.mockResolvedValue({
      file: "/home/me/kasten.json",
      tables: [
        { table: "note", rows: 12 },
        { table: "link", rows: 5 },
        { table: "job", rows: 0 },
      ],
    });
    renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("backup-run"));
    expect(saveDialog).toHaveBeenCalledWith(
      expect.objectContaining({ defaultPath: expect.stringMatching(/^kasten-backup-\d{4}-\d{2}-\d{2}\.json$/) }),
    );
    await waitFor(() =>
      expect(screen.getByTestId("transfer-result").textContent).toBe("Backed up to /home/me/kasten.json: 12 note, 5 link"),
    );
    expect(mocked.backupMemory).toHaveBeenCalledWith("/home/me/kasten.json", expect.any(Function));
  });

  it("restores only after the user says yes, and says where the memory before is kept", async () => {
    openDialog.mockResolvedValue("/home/me/kasten.json");
    mocked.restoreMemory.mockResolvedValue({
      file: "/home/me/kasten.json",
      tables: [{ table: "note", rows: 3 }],
      previous: "/home/me/.local/share/kasten/db.before-restore-20261202-031700",
    });
    const { invalidated } = renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("restore-run"));
    const confirm = await screen.findByTestId("restore-confirm");
    expect(confirm.textContent).toContain("Replace this memory with the backup?");
    expect(confirm.textContent).toContain("/home/me/kasten.json");
    expect(confirm.textContent).toContain("not deleted");
    expect(mocked.restoreMemory).not.toHaveBeenCalled();
    // "Cancel" leaves everything as it is
    await userEvent.click(screen.getByTestId("restore-confirm-no"));
    expect(screen.queryByTestId("restore-confirm")).toBeNull();
    expect(mocked.restoreMemory).not.toHaveBeenCalled();
    // again, and yes
    await userEvent.click(screen.getByTestId("restore-run"));
    await userEvent.click(await screen.findByTestId("restore-confirm-yes"));
    await waitFor(() => expect(screen.getByTestId("transfer-result").textContent).toContain("db.before-restore-20261202-031700"));
    expect(mocked.restoreMemory).toHaveBeenCalledWith("/home/me/kasten.json", expect.any(Function));
    // the memory was replaced: every query is read again
    expect(invalidated()).toEqual(["all"]);
  });

  it("shows a damaged backup's refusal in words", async () => {
    openDialog.mockResolvedValue("/home/me/cut.json");
    mocked.restoreMemory.mockRejectedValue(
      new ApiError({
        kind: "invalid",
        message: "/home/me/cut.json cannot be restored: the backup ends early; nothing was changed: your memory is as it was",
      } as never),
    );
    const { invalidated } = renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("restore-run"));
    await userEvent.click(await screen.findByTestId("restore-confirm-yes"));
    await waitFor(() => expect(screen.getByTestId("transfer-error").textContent).toContain("your memory is as it was"));
    expect(screen.queryByTestId("transfer-result")).toBeNull();
    expect(invalidated()).toEqual([]);
  });

  it("answers from window.__kastenPick before opening a dialog (how the e2e suite picks)", async () => {
    window.__kastenPick = ["/tmp/e2e-vault"];
    mocked.exportVault.mockResolvedValue({ dir: "/tmp/e2e-vault", files: 1 });
    renderWith(<TransferPanel />);
    await userEvent.click(screen.getByTestId("export-vault"));
    await waitFor(() => expect(mocked.exportVault).toHaveBeenCalledWith("/tmp/e2e-vault", expect.any(Function)));
    expect(openDialog).not.toHaveBeenCalled();
    expect(window.__kastenPick).toEqual([]);
    // the queue is empty: the native dialog again
    openDialog.mockResolvedValue(null);
    await userEvent.click(screen.getByTestId("export-vault"));
    expect(openDialog).toHaveBeenCalledTimes(1);
    delete window.__kastenPick;
  });
});
