import { act, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: { builtinModels: vi.fn(), installModel: vi.fn(), cancelModelInstall: vi.fn(), removeModel: vi.fn(), useLlm: vi.fn() },
  };
});

import { api, ApiError, type BuiltinModelDto, type ModelProgressDto } from "../api";
import ModelsPanel from "../features/settings/ModelsPanel";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

const smol: BuiltinModelDto = {
  name: "smollm2-135m",
  title: "SmolLM2-135M-Instruct Q4_1",
  size_bytes: 98_362_432,
  download_bytes: 92_871_040,
  languages: ["en"],
  license: "Apache-2.0",
  about: "tiny and quick",
  default: true,
  installed: true,
  path: "/home/u/.local/share/kasten/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
  in_use: true,
  downloading: false,
  notes_per_hour: 548.4,
  quality_passed: true,
};
const qwen: BuiltinModelDto = {
  ...smol,
  name: "qwen2.5-coder-0.5b",
  title: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
  size_bytes: 491_400_064,
  download_bytes: 477_610_024,
  languages: ["en", "zh"],
  about: "better keywords",
  default: false,
  installed: false,
  path: null,
  in_use: false,
  notes_per_hour: null,
  quality_passed: null,
};

beforeEach(() => vi.clearAllMocks());

describe("ModelsPanel", () => {
  it("lists the built-in models with size, languages, license, what is in use and what was measured", async () => {
    mocked.builtinModels.mockResolvedValue([smol, qwen]);
    renderWith(<ModelsPanel />);
    const s = await screen.findByTestId("model-smollm2-135m");
    expect(s.textContent).toContain("SmolLM2-135M-Instruct Q4_1");
    expect(s.textContent).toContain("Apache-2.0");
    expect(s.textContent).toContain("94 MiB on disk");
    expect(screen.getByTestId("model-in-use-smollm2-135m")).toBeTruthy();
    expect(screen.getByTestId("model-measured-smollm2-135m").textContent).toBe("548 notes/hour here, quality check passed");
    expect((screen.getByTestId("model-use-smollm2-135m") as HTMLButtonElement).disabled).toBe(true);
    expect((screen.getByTestId("model-remove-smollm2-135m") as HTMLButtonElement).disabled).toBe(true);
    const q = screen.getByTestId("model-qwen2.5-coder-0.5b");
    expect(q.textContent).toContain("en + zh");
    expect(screen.queryByTestId("model-measured-qwen2.5-coder-0.5b")).toBeNull();
    expect(screen.getByTestId("model-download-qwen2.5-coder-0.5b").textContent).toBe("Download (455 MiB)");
  });

  it("downloads with progress, then the model is installed and can be used", async () => {
    mocked.builtinModels.mockResolvedValue([smol, qwen]);
    let report: (p: ModelProgressDto) => void = () => {};
    let finish: (list: BuiltinModelDto[]) => void = () => {};
    mocked.installModel.mockImplementation((_name: string, onProgress: (p: ModelProgressDto) => void) => {
      report = onProgress;
      return new Promise((resolve) => (finish = resolve));
    });
    const { ctx } = renderWith(<ModelsPanel />);
    await userEvent.click(await screen.findByTestId("model-download-qwen2.5-coder-0.5b"));
    expect(mocked.installModel).toHaveBeenCalledWith("qwen2.5-coder-0.5b", expect.any(Function));
    act(() => report({ stage: "downloading", done_bytes: 100 * 1024 * 1024, total_bytes: 477_610_024, part: 2, parts: 6 }));
    const bar = (await screen.findByTestId("model-progress-qwen2.5-coder-0.5b")) as HTMLProgressElement;
    expect(bar.value).toBe(100 * 1024 * 1024);
    expect(screen.getByTestId("model-qwen2.5-coder-0.5b").textContent).toContain("Downloading part 2 of 6 · 100 MiB / 455 MiB");
    await act(async () => finish([smol, { ...qwen, installed: true, path: "/m/q.gguf" }]));
    expect(await screen.findByTestId("model-use-qwen2.5-coder-0.5b")).toBeTruthy();
    expect(screen.queryByTestId("model-progress-qwen2.5-coder-0.5b")).toBeNull();
    expect(ctx.toast).toHaveBeenCalledWith("Qwen2.5-Coder-0.5B-Instruct Q4_K_M installed");

    mocked.useLlm.mockResolvedValue({});
    mocked.builtinModels.mockResolvedValue([{ ...smol, in_use: false }, { ...qwen, installed: true, in_use: true }]);
    await userEvent.click(screen.getByTestId("model-use-qwen2.5-coder-0.5b"));
    expect(mocked.useLlm).toHaveBeenCalledWith({ kind: "installed", name: "qwen2.5-coder-0.5b" });
    expect(await screen.findByTestId("model-in-use-qwen2.5-coder-0.5b")).toBeTruthy();
    expect(ctx.toast).toHaveBeenCalledWith("Now using Qwen2.5-Coder-0.5B-Instruct Q4_K_M");
  });

  it("cancels a download and shows why it stopped", async () => {
    mocked.builtinModels.mockResolvedValue([smol, qwen]);
    let fail: (e: unknown) => void = () => {};
    mocked.installModel.mockImplementation(() => new Promise((_r, reject) => (fail = reject)));
    mocked.cancelModelInstall.mockResolvedValue(true);
    renderWith(<ModelsPanel />);
    await userEvent.click(await screen.findByTestId("model-download-qwen2.5-coder-0.5b"));
    await userEvent.click(await screen.findByTestId("model-cancel-qwen2.5-coder-0.5b"));
    expect(mocked.cancelModelInstall).toHaveBeenCalledWith("qwen2.5-coder-0.5b");
    await act(async () =>
      fail(new ApiError({ kind: "conflict", message: "the download of qwen2.5-coder-0.5b was cancelled; nothing was installed" })),
    );
    expect((await screen.findByTestId("models-error")).textContent).toContain("nothing was installed");
    await waitFor(() => expect(screen.getByTestId("model-download-qwen2.5-coder-0.5b")).toBeTruthy());

  });

  it("removes an installed model that is not in use", async () => {
    mocked.builtinModels.mockResolvedValue([{ ...smol, in_use: false }, { ...qwen, installed: true, in_use: true }]);
    mocked.removeModel.mockResolvedValue([{ ...smol, installed: false, in_use: false, path: null }, { ...qwen, installed: true, in_use: true }]);
    const { ctx } = renderWith(<ModelsPanel />);
    expect((await screen.findByTestId("model-remove-qwen2.5-coder-0.5b") as HTMLButtonElement).disabled).toBe(true);
    const remove = screen.getByTestId("model-remove-smollm2-135m") as HTMLButtonElement;
    expect(remove.disabled).toBe(false);
    await userEvent.click(remove);
    expect(mocked.removeModel).toHaveBeenCalledWith("smollm2-135m");
    expect(await screen.findByTestId("model-download-smollm2-135m")).toBeTruthy();
    expect(ctx.toast).toHaveBeenCalledWith("SmolLM2-135M-Instruct Q4_1 removed");
  });
});
