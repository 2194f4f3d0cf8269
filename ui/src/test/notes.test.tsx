import { fireEvent, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ctx as context, note, renderWith, status } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      addNote: vi.fn(),
      listNotes: vi.fn(),
      listTags: vi.fn().mockResolvedValue([]),
      listBoxes: vi.fn().mockResolvedValue([]),
      searchNotes: vi.fn(),
      loadSampleNotebook: vi.fn(),
      getNote: vi.fn(),
      llmOverview: vi.fn(),
      useLlm: vi.fn(),
    },
  };
});

import { api, ApiError } from "../api";
import NoteEditor from "../features/notes/NoteEditor";
import NoteItem from "../features/notes/NoteItem";
import NotesView from "../features/notes/NotesView";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

beforeEach(() => {
  vi.clearAllMocks();
  mocked.listTags.mockResolvedValue([]);
  mocked.listBoxes.mockResolvedValue([]);
});

describe("NoteEditor", () => {
  it("saves with Ctrl+Enter and clears the input", async () => {
    mocked.addNote.mockResolvedValue(note({ id: "01JNEW00000000000000000001" }));
    const onSaved = vi.fn();
    renderWith(<NoteEditor onSaved={onSaved} />);
    const input = screen.getByTestId("note-input") as HTMLTextAreaElement;
    await userEvent.type(input, "A new memory");
    fireEvent.keyDown(input, { key: "Enter", ctrlKey: true });
    await waitFor(() => expect(onSaved).toHaveBeenCalledWith("01JNEW00000000000000000001"));
    expect(mocked.addNote).toHaveBeenCalledWith("A new memory");
    expect(input.value).toBe("");
  });

  it("does not save blank text and shows the shell's error in words", async () => {
    renderWith(<NoteEditor onSaved={vi.fn()} />);
    const save = screen.getByTestId("note-save") as HTMLButtonElement;
    expect(save.disabled).toBe(true);
    mocked.addNote.mockRejectedValue(new ApiError({ kind: "unavailable", message: "the memory is open in another process" }));
    await userEvent.type(screen.getByTestId("note-input"), "x");
    await userEvent.click(save);
    expect(await screen.findByText("the memory is open in another process")).toBeTruthy();
  });
});

describe("NoteItem", () => {
  it("renders content as text, never as HTML, with status badges", () => {
    const evil = '<img src=x onerror="alert(1)"> <b>bold</b>';
    const { container } = renderWith(
      <ul>
        <NoteItem note={note({ content: evil, enrich: "pending" })} selected={false} onOpen={vi.fn()} />
        <NoteItem note={note({ id: "2", enrich: "failed", enrich_error: "server down" })} selected={false} onOpen={vi.fn()} />
      </ul>,
    );
    expect(container.querySelector("img")).toBeNull();
    expect(container.querySelector("b")).toBeNull();
    expect(screen.getByText(evil)).toBeTruthy();
    expect(screen.getByText("pending")).toBeTruthy();
    expect(screen.getByText("failed").getAttribute("title")).toBe("server down");
  });
});

describe("NotesView", () => {
  it("teaches when the memory is empty and offers the sample notebook", async () => {
    mocked.listNotes.mockResolvedValue({ total: 0, offset: 0, notes: [] });
    mocked.loadSampleNotebook.mockResolvedValue(12);
    mocked.llmOverview.mockResolvedValue({
      in_use: { label: "built-in SmolLM2-135M", source: "built_in", ready: true, problem: null, steps: "construction", model_path: null },
      discovered: [{ server: "Ollama", provider: "ollama", base_url: "http://127.0.0.1:11434", models: ["qwen2.5:7b", "llama3.2"] }],
      env_chooses: false,
    });
    mocked.useLlm.mockResolvedValue({ label: "Ollama llama3.2", source: "settings", ready: true, problem: null, steps: "all", model_path: null });
    // the LLM as the status bar shows it
    const { ctx, invalidated } = renderWith(<NotesView />, context({ status: status({ llm_configured: true, llm_label: "built-in SmolLM2-135M" }) }));
    expect((await screen.findByTestId("first-run-llm")).textContent).toContain("built-in SmolLM2-135M");
    // the servers found on this machine are offered with one click
    await userEvent.selectOptions(await screen.findByTestId("llm-discovered-model-0"), "llama3.2");
    await userEvent.click(screen.getByTestId("llm-use-0"));
    await waitFor(() =>
      expect(mocked.useLlm).toHaveBeenCalledWith({ kind: "server", provider: "ollama", base_url: "http://127.0.0.1:11434", model: "llama3.2" }),
    );
    expect(ctx.toast).toHaveBeenCalledWith("Now using Ollama llama3.2");
    await userEvent.click(await screen.findByText("Load the sample notebook"));
    await waitFor(() => expect(invalidated()).toEqual(expect.arrayContaining([["notes"], ["search"], ["tags"], ["boxes"]])));
    expect(ctx.toast).toHaveBeenCalledWith("Loaded 12 sample notes");
  });

  it("says when the tags or Boxes cannot be listed", async () => {
    mocked.listNotes.mockResolvedValue({ total: 0, offset: 0, notes: [] });
    mocked.listTags.mockRejectedValue(new Error("the store is locked"));
    renderWith(<NotesView />);
    expect(await screen.findByText(/Cannot list the tags: the store is locked/)).toBeTruthy();
  });

  it("asks for one page at a time and fetches the next on demand", async () => {
    const page = (from: number, n: number) => Array.from({ length: n }, (_, i) => note({ id: `N${from + i}`, content: `note ${from + i}` }));
    mocked.listNotes.mockImplementation((_f: unknown, offset: number, limit: number) =>
      Promise.resolve({ total: 70, offset, notes: page(offset, Math.min(limit, 70 - offset)) }),
    );
    renderWith(<NotesView />);
    await waitFor(() => expect(screen.getAllByTestId("note-item")).toHaveLength(50));
    expect(mocked.listNotes).toHaveBeenLastCalledWith({ tag: null, enrich: null, box_id: null }, 0, 50, null);
    await userEvent.click(screen.getByText(/Show more/));
    await waitFor(() => expect(screen.getAllByTestId("note-item")).toHaveLength(70));
    expect(mocked.listNotes).toHaveBeenLastCalledWith({ tag: null, enrich: null, box_id: null }, 50, 50, null);
  });

  it("searches as you type and shows how each hit was found", async () => {
    mocked.listNotes.mockResolvedValue({ total: 1, offset: 0, notes: [note()] });
    mocked.searchNotes.mockResolvedValue([{ note: note({ content: "found it" }), score: 0.91, via: ["vector", "keyword"] }]);
    renderWith(<NotesView />);
    await userEvent.type(screen.getByTestId("search-input"), "dog");
    expect(await screen.findByText("found it")).toBeTruthy();
    expect(screen.getByText(/vector \+ keyword · 0.91/)).toBeTruthy();
    expect(mocked.searchNotes).toHaveBeenCalledWith("dog", 20, { tag: null, enrich: null, box_id: null }, null);
  });

  it("searches within the chosen Box", async () => {
    mocked.listNotes.mockResolvedValue({ total: 1, offset: 0, notes: [note()] });
    mocked.listBoxes.mockResolvedValue([{ id: "BOX1", label: "pets", size: 2 }]);
    mocked.searchNotes.mockResolvedValue([]);
    renderWith(<NotesView />);
    await screen.findByRole("option", { name: "pets (2)" });
    await userEvent.selectOptions(screen.getByLabelText("Filter by Box"), "BOX1");
    await userEvent.type(screen.getByTestId("search-input"), "dog");
    await waitFor(() => expect(mocked.searchNotes).toHaveBeenCalledWith("dog", 20, { tag: null, enrich: null, box_id: "BOX1" }, null));
  });
});
