import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

// the native Open dialog: what the user picks (null: cancelled)
vi.mock("@tauri-apps/plugin-dialog", () => ({ open: vi.fn(), save: vi.fn() }));
vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return { ...real, api: { importPath: vi.fn() } };
});

import { open } from "@tauri-apps/plugin-dialog";
import { api, ApiError } from "../api";
import ImportPanel from "../features/settings/ImportPanel";

const importPath = (api as unknown as { importPath: ReturnType<typeof vi.fn> }).importPath;
const openDialog = open as unknown as ReturnType<typeof vi.fn>;
const RESULT = { created: 2, existing: 0, links_created: 1, attachments_skipped: 0, problems: [], warnings: [] };

beforeEach(() => vi.clearAllMocks());

describe("ImportPanel", () => {
  it("imports a vault with progress and lists the files it could not import", async () => {
    let release: () => void = () => {};
    importPath.mockImplementation((_p: string, _f: string, onProgress: (p: unknown) => void) => {
      onProgress({ phase: "notes", done: 3, total: 10 });
      return new Promise((resolve) => {
        release = () =>
          resolve({
            created: 9,
            existing: 0,
            links_created: 4,
            attachments_skipped: 2,
            problems: ["broken.md: the front matter is not valid YAML"],
            warnings: [],
          });
      });
    });
    const { invalidated } = renderWith(<ImportPanel />);
    await userEvent.type(screen.getByTestId("import-path"), "/home/me/Vault");
    await userEvent.click(screen.getByTestId("import-run"));
    expect(importPath).toHaveBeenCalledWith("/home/me/Vault", "markdown", expect.any(Function));
    await waitFor(() => expect(screen.getByTestId("import-progress").textContent).toContain("3 / 10"));
    release();
    await waitFor(() => expect(screen.getByTestId("import-result").textContent).toContain("9 new note(s)"));
    expect(screen.getByTestId("import-result").textContent).toContain("broken.md");
    // the imported notes show in every view of the memory
    expect(invalidated()).toEqual(expect.arrayContaining([["notes"], ["search"], ["tags"], ["boxes"], ["graph"], ["review"]]));
  });

  it("shows a path that cannot be read as an error, in words", async () => {
    importPath.mockRejectedValue(
      new ApiError({ kind: "Invalid", message: "cannot read /nope: No such file or directory" } as never),
    );
    renderWith(<ImportPanel />);
    await userEvent.selectOptions(screen.getByTestId("import-format"), "jsonl");
    await userEvent.type(screen.getByTestId("import-path"), "/nope");
    await userEvent.click(screen.getByTestId("import-run"));
    await waitFor(() => expect(screen.getByTestId("import-error").textContent).toContain("cannot read /nope"));
    expect(importPath).toHaveBeenCalledWith("/nope", "jsonl", expect.any(Function));
  });

  it("imports the folder picked in the Open dialog (a vault is a folder)", async () => {
    openDialog.mockResolvedValue("/home/me/Obsidian Vault");
    importPath.mockResolvedValue(RESULT);
    renderWith(<ImportPanel />);
    expect(screen.getByTestId("import-choose").textContent).toBe("Choose a folder…");
    await userEvent.click(screen.getByTestId("import-choose"));
    expect(openDialog).toHaveBeenCalledWith(expect.objectContaining({ directory: true, multiple: false }));
    await waitFor(() => expect(screen.getByTestId("import-result").textContent).toContain("2 new note(s)"));
    expect(importPath).toHaveBeenCalledWith("/home/me/Obsidian Vault", "markdown", expect.any(Function));
    // the path picked is shown where a path can be typed
    expect((screen.getByTestId("import-path") as HTMLInputElement).value).toBe("/home/me/Obsidian Vault");
  });

  it("picks a file for JSON Lines and a chat transcript, and nothing when cancelled", async () => {
    openDialog.mockResolvedValueOnce(null).mockResolvedValueOnce("/home/me/chat.json");
    importPath.mockResolvedValue(RESULT);
    renderWith(<ImportPanel />);
    await userEvent.selectOptions(screen.getByTestId("import-format"), "jsonl");
    expect(screen.getByTestId("import-choose").textContent).toBe("Choose a file…");
    await userEvent.click(screen.getByTestId("import-choose"));
    expect(openDialog).toHaveBeenLastCalledWith(
      expect.objectContaining({ directory: false, filters: [expect.objectContaining({ extensions: expect.arrayContaining(["jsonl"]) })] }),
    );
    expect(importPath).not.toHaveBeenCalled();
    await userEvent.selectOptions(screen.getByTestId("import-format"), "chat");
    await userEvent.click(screen.getByTestId("import-choose"));
    await waitFor(() => expect(importPath).toHaveBeenCalledWith("/home/me/chat.json", "chat", expect.any(Function)));
  });
});
