import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return { ...real, api: { importPath: vi.fn() } };
});

import { api, ApiError } from "../api";
import ImportPanel from "../features/settings/ImportPanel";

const importPath = (api as unknown as { importPath: ReturnType<typeof vi.fn> }).importPath;

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
    const { ctx } = renderWith(<ImportPanel />);
    await userEvent.type(screen.getByTestId("import-path"), "/home/me/Vault");
    await userEvent.click(screen.getByTestId("import-run"));
    expect(importPath).toHaveBeenCalledWith("/home/me/Vault", "markdown", expect.any(Function));
    await waitFor(() => expect(screen.getByTestId("import-progress").textContent).toContain("3 / 10"));
    release();
    await waitFor(() => expect(screen.getByTestId("import-result").textContent).toContain("9 new note(s)"));
    expect(screen.getByTestId("import-result").textContent).toContain("broken.md");
    expect(ctx.bump).toHaveBeenCalled();
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
});
