// The first screen while the memory opens: a normal state, said in words that are not an
// error, and the first-run text agrees with the status bar from the first frame.
import { act, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { StatusEvent } from "../api";
import { renderWith, status } from "./util";

// sigma (WebGL) and the layout worker, which jsdom lacks
vi.mock("sigma", async () => ({ default: (await import("./fakeSigma")).FakeSigma }));
vi.mock("sigma/rendering", () => ({ EdgeLineProgram: class {} }));
vi.mock("graphology-layout-forceatlas2/worker", async () => ({
  default: (await import("./fakeSigma")).FakeLayout,
}));

let push: ((s: StatusEvent) => void) | null = null;
/** What the shell answers while the memory is still opening (state.rs). */
async function notReady(): Promise<never> {
  const { ApiError } = await import("../api");
  throw new ApiError({ kind: "not_ready", message: "the memory is still opening (10 of 100 notes read)" });
}
vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: new Proxy({} as Record<string, ReturnType<typeof vi.fn>>, {
      // every call answers as the shell does while the memory opens, unless a test says otherwise
      get: (o, k: string) => (o[k] ??= vi.fn(notReady)),
    }),
    onJob: () => Promise.resolve(() => {}),
    onStatus: vi.fn((cb: (s: StatusEvent) => void) => {
      push = cb;
      return Promise.resolve(() => {});
    }),
  };
});

const { api } = await import("../api");
const i18n = await import("../i18n");
const { default: App } = await import("../App");

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;


const opening = status({
  memory: "opening",
  memory_message: "reading notes: 10 of 100",
  notes: 0,
  llm_configured: false,
  llm_label: "",
  llm_ok: null,
  llm_message: "",
  jobs_queued: 0,
  jobs_running: 0,
  jobs_failed: 0,
  jobs_done: 0,
  enriching: false,
  opened_ms: null,
  opening_done: 10,
  opening_total: 100,
});

const readyEmpty = status({ notes: 0, llm_configured: true, llm_label: "Ollama qwen2.5:7b", llm_ok: null, jobs_queued: 0, jobs_running: 0, jobs_failed: 0 });

beforeEach(() => {
  push = null;
  for (const f of Object.values(mocked)) f.mockReset().mockImplementation(notReady);
  mocked.appStatus.mockResolvedValue(opening);
});

afterEach(() => act(() => i18n.setLangChoice("en")));

function errorsOnScreen(): string[] {
  return Array.from(document.querySelectorAll(".error, .bad, [role=alert]"))
    .map((e) => e.textContent ?? "")
    .filter((t) => t.trim());
}

describe("while the memory opens", () => {
  it("Notes says it is opening, in words that are not an error, and claims nothing about the LLM", async () => {
    renderWith(<App />);
    await waitFor(() => expect(screen.getByTestId("status-bar").getAttribute("data-memory")).toBe("opening"));
    const note = await screen.findByTestId("notes-opening");
    expect(note.textContent).toBe("Opening the memory… 10 of 100 notes read. The notes appear here once it is open; you can already write one.");
    // give every call the view made at mount time the chance to fail
    await act(async () => {
      await new Promise((r) => setTimeout(r, 50));
    });
    expect(errorsOnScreen()).toEqual([]);
    const text = document.body.textContent ?? "";
    expect(text).not.toContain("Cannot list");
    expect(text).not.toContain("still opening");
    // nothing is known about the memory yet: neither "empty" nor "no LLM"
    expect(text).not.toContain("Your memory is empty");
    expect(text).not.toContain("No LLM is set up");
    expect(text).not.toContain("no LLM configured");
    expect(screen.getByTestId("llm-status").textContent).toBe("LLM: known once the memory is open");
    // the note editor is there (a note saved now is written once the memory is open)
    expect(screen.getByTestId("note-input")).toBeTruthy();

    // another view waits too
    await userEvent.click(screen.getByTestId("nav-graph"));
    expect((await screen.findByTestId("memory-opening")).textContent).toContain("Opening the memory… 10 of 100 notes read.");
    expect(errorsOnScreen()).toEqual([]);
  });

  it("says so in Chinese too", async () => {
    act(() => i18n.setLangChoice("zh"));
    renderWith(<App />);
    // the progress comes with the status, which may answer after the view's first frame
    await waitFor(() =>
      expect(screen.getByTestId("notes-opening").textContent).toBe("正在打开记忆库……已读取 100 条笔记中的 10 条。打开后笔记会显示在这里；现在就可以写新笔记。"),
    );
    expect(screen.getByTestId("llm-status").textContent).toBe("LLM：记忆库打开后可知");
    expect(i18n.englishLeft(i18n.uiText(document.body))).toEqual([]);
  });
});

describe("once the memory is open", () => {
  it("the empty-memory panel names the LLM the status bar names, from the first frame", async () => {
    renderWith(<App />);
    await waitFor(() => expect(screen.getByTestId("status-bar").getAttribute("data-memory")).toBe("opening"));
    await waitFor(() => expect(push).not.toBeNull());
    // the memory opens: the shell pushes the new status; a status read made a moment
    // earlier (still opening) may answer after it
    mocked.listNotes.mockResolvedValue({ total: 0, offset: 0, notes: [] });
    mocked.listTags.mockResolvedValue([]);
    mocked.listBoxes.mockResolvedValue([]);
    mocked.llmOverview.mockResolvedValue({ in_use: {}, discovered: [], env_chooses: false });
    act(() => push?.(readyEmpty));
    const llm = await screen.findByTestId("first-run-llm");
    expect(screen.getByTestId("llm-status").textContent).toBe("LLM configured · Ollama qwen2.5:7b");
    expect(llm.textContent).toBe("Notes are annotated by Ollama qwen2.5:7b.");
    expect(screen.getByText("Your memory is empty.")).toBeTruthy();
    expect(errorsOnScreen()).toEqual([]);
  });
});

describe("a restore, which reopens the memory", () => {
  it("leaves Settings (where it runs) on the screen; the other views wait again", async () => {
    renderWith(<App />);
    await waitFor(() => expect(push).not.toBeNull());
    mocked.listNotes.mockResolvedValue({ total: 0, offset: 0, notes: [] });
    act(() => push?.(readyEmpty));
    await userEvent.click(screen.getByTestId("nav-settings"));
    await screen.findByTestId("settings");
    act(() => push?.(opening));
    await waitFor(() => expect(screen.getByTestId("status-bar").getAttribute("data-memory")).toBe("opening"));
    expect(screen.getByTestId("settings")).toBeTruthy();
    expect(screen.queryByTestId("memory-opening")).toBeNull();
    await userEvent.click(screen.getByTestId("nav-boxes"));
    expect(await screen.findByTestId("memory-opening")).toBeTruthy();
  });
});

describe("a memory that fails to open", () => {
  it("is an error, and the Notes view says why", async () => {
    renderWith(<App />);
    await screen.findByTestId("notes-opening");
    await waitFor(() => expect(push).not.toBeNull());
    mocked.listNotes.mockRejectedValue(new (await import("../api")).ApiError({ kind: "unavailable", message: "the memory is locked by another process" }));
    act(() => push?.(status({ ...opening, memory: "failed", memory_message: "the memory is locked by another process", opening_done: 0, opening_total: 0 })));
    expect(await screen.findByText("the memory is locked by another process", { selector: ".error" })).toBeTruthy();
    expect(screen.queryByTestId("notes-opening")).toBeNull();
  });
});
