import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return { ...real, api: { llmOverview: vi.fn(), useLlm: vi.fn() } };
});

import { api, ApiError, type LlmInUseDto } from "../api";
import LlmPanel from "../features/settings/LlmPanel";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;
const builtin: LlmInUseDto = {
  label: "built-in SmolLM2-135M",
  source: "built_in",
  ready: true,
  problem: null,
  steps: "construction (guided) and links; no evolution",
  model_path: "/home/u/.local/share/kasten/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
};

beforeEach(() => vi.clearAllMocks());

describe("LlmPanel", () => {
  it("names the LLM in use, says the built-in one is tiny, and says when nothing was found", async () => {
    mocked.llmOverview.mockResolvedValue({ in_use: builtin, discovered: [], env_chooses: false });
    renderWith(<LlmPanel />);
    expect((await screen.findByTestId("llm-in-use")).textContent).toContain("built-in SmolLM2-135M");
    expect(screen.getByText(/small enough to run on this computer without set-up/)).toBeTruthy();
    expect(screen.getByTestId("llm-discovered-none")).toBeTruthy();
    expect((screen.getByTestId("llm-use-builtin") as HTMLButtonElement).disabled).toBe(true);
  });

  it("uses a discovered server with one click and goes back to the built-in model", async () => {
    const server: LlmInUseDto = { ...builtin, label: "qwen2.5-3b at http://127.0.0.1:8080/v1", source: "settings", model_path: null };
    // the shell: the overview names what was picked last
    let inUse: LlmInUseDto = builtin;
    const found = [{ server: "llama-server", provider: "openai", base_url: "http://127.0.0.1:8080/v1", models: ["qwen2.5-3b"] }];
    mocked.llmOverview.mockImplementation(async () => ({ in_use: inUse, discovered: found, env_chooses: false }));
    mocked.useLlm.mockImplementation(async (p: { kind: string }) => (inUse = p.kind === "builtin" ? builtin : server));
    const { ctx, invalidated } = renderWith(<LlmPanel />);
    await userEvent.click(await screen.findByTestId("llm-use-0"));
    await waitFor(() => expect(screen.getByTestId("llm-in-use").textContent).toContain("qwen2.5-3b"));
    expect(mocked.useLlm).toHaveBeenCalledWith({ kind: "server", provider: "openai", base_url: "http://127.0.0.1:8080/v1", model: "qwen2.5-3b" });
    expect(ctx.toast).toHaveBeenCalledWith("Now using llama-server qwen2.5-3b");
    // the settings and the models list say which LLM is in use: they are read again
    expect(invalidated()).toEqual([["settings"], ["llm"], ["models"]]);
    await userEvent.click(screen.getByTestId("llm-use-builtin"));
    await waitFor(() => expect(mocked.useLlm).toHaveBeenLastCalledWith({ kind: "builtin" }));
  });

  it("uses a GGUF file, and shows the reason when the file is refused", async () => {
    mocked.llmOverview.mockResolvedValue({ in_use: builtin, discovered: [], env_chooses: false });
    mocked.useLlm.mockRejectedValueOnce(
      new ApiError({ kind: "invalid", message: "llm.model_path: /tmp/x.gguf is not a GGUF model file" }),
    );
    renderWith(<LlmPanel />);
    await userEvent.type(await screen.findByTestId("llm-gguf-path"), "/tmp/x.gguf");
    await userEvent.click(screen.getByTestId("llm-gguf-use"));
    expect((await screen.findByTestId("llm-error")).textContent).toContain("not a GGUF model file");
    expect(mocked.useLlm).toHaveBeenCalledWith({ kind: "gguf", path: "/tmp/x.gguf" });
    expect(screen.getByTestId("llm-in-use").textContent).toContain("built-in SmolLM2-135M");
  });
});
