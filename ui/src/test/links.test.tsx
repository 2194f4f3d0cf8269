import { act, fireEvent, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { note, renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      addNote: vi.fn(),
      listNotes: vi.fn(),
      searchNotes: vi.fn(),
      getNote: vi.fn(),
      linkKinds: vi.fn(),
      linkNotes: vi.fn(),
      unlinkNotes: vi.fn(),
      editContent: vi.fn(),
      reviewRollback: vi.fn(),
      reviewReapply: vi.fn(),
      noteLifecycle: vi.fn(),
    },
  };
});

import { api, ApiError } from "../api";
import NoteEditor from "../features/notes/NoteEditor";
import NoteDetail from "../features/notes/NoteDetail";
import LinkEditor from "../features/links/LinkEditor";
import { activeQuery, insertLink, linkLabel, linksInText } from "../features/links/wikilink";
import { lineDiff } from "../features/links/linediff";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

const tea = note({ id: "01JTEA00000000000000000001", content: "Tea grows on the slopes of Darjeeling" });
const chinese = note({ id: "01JCHA00000000000000000001", content: "北京的茶馆很安静\n第二行" });

/** Types into a textarea the way a browser does: value and caret together. */
function typeAt(el: HTMLTextAreaElement, value: string) {
  fireEvent.change(el, { target: { value, selectionStart: value.length, selectionEnd: value.length } });
}

beforeEach(() => {
  vi.clearAllMocks();
  mocked.linkKinds.mockResolvedValue(["relates", "supports", "contradicts"]);
  mocked.noteLifecycle.mockResolvedValue({ strength: 0.9, tier: "long-term", project: null, threshold: 0.2, fading: false, archived: false });
  mocked.listNotes.mockResolvedValue({ total: 2, offset: 0, notes: [tea, chinese] });
  mocked.searchNotes.mockImplementation((q: string) =>
    Promise.resolve([tea, chinese].filter((n) => n.content.includes(q) || q === "tea").map((n) => ({ note: n, score: 1, via: [] }))),
  );
});

describe("wikilink helpers", () => {
  it("finds the [[ being typed, and nothing once it is closed or on another line", () => {
    expect(activeQuery("see [[北京", 8)).toEqual({ start: 4, query: "北京" });
    expect(activeQuery("see [[tea]] and", 15)).toBeNull();
    expect(activeQuery("[[a\nb", 5)).toBeNull();
    expect(activeQuery("no link", 7)).toBeNull();
  });

  it("replaces the query with the label and keeps only links still in the text", () => {
    expect(insertLink("see [[te and", 4, 8, "Tea")).toEqual({ text: "see [[Tea]] and", caret: 11 });
    expect(linkLabel("[x] 北京的茶馆\nmore")).toBe("x 北京的茶馆");
    expect(linkLabel("a".repeat(50))).toBe(`${"a".repeat(40)}…`);
    const picked = [
      { id: "1", label: "Tea" },
      { id: "2", label: "Gone" },
      { id: "1", label: "Tea" },
    ];
    expect(linksInText("[[Tea]] only", picked)).toEqual([{ id: "1", label: "Tea" }]);
  });

  it("diffs texts line by line", () => {
    expect(lineDiff("a\nb\nc", "a\nx\nc")).toEqual([
      { op: " ", line: "a" },
      { op: "-", line: "b" },
      { op: "+", line: "x" },
      { op: " ", line: "c" },
    ]);
  });
});

describe("[[ autocomplete in the editor", () => {
  it("opens on [[, searches as you type (CJK too), picks with Enter and links on save", async () => {
    mocked.addNote.mockResolvedValue(note({ id: "01JNEW00000000000000000001" }));
    mocked.linkNotes.mockResolvedValue({ action: "link", target: "l1", notes: [], revisions: 0, links: 1 });
    const onSaved = vi.fn();
    renderWith(<NoteEditor onSaved={onSaved} />);
    const input = screen.getByTestId("note-input") as HTMLTextAreaElement;
    typeAt(input, "Visited ");
    expect(screen.queryByTestId("wikilink-suggest")).toBeNull();
    typeAt(input, "Visited [[");
    expect(await screen.findByTestId("wikilink-suggest")).toBeTruthy();
    expect(await screen.findByTestId("wikilink-option-1")).toBeTruthy(); // newest notes while empty
    typeAt(input, "Visited [[北京");
    await waitFor(() => expect(mocked.searchNotes).toHaveBeenLastCalledWith("北京", 8, expect.anything(), null));
    await waitFor(() => expect(screen.queryByTestId("wikilink-option-1")).toBeNull());
    expect(screen.getByTestId("wikilink-option-0").getAttribute("data-id")).toBe(chinese.id);
    fireEvent.keyDown(input, { key: "Enter" });
    expect(input.value).toBe("Visited [[北京的茶馆很安静]]");
    expect(screen.queryByTestId("wikilink-suggest")).toBeNull();
    // the kind is chosen in the editor
    // (the kinds arrive from the backend: a kind not yet listed cannot be chosen)
    const kinds = await screen.findByTestId("wikilink-kind");
    await waitFor(() => expect(kinds.querySelector('option[value="supports"]')).not.toBeNull());
    fireEvent.change(kinds, { target: { value: "supports" } });
    fireEvent.keyDown(input, { key: "Enter", ctrlKey: true });
    await waitFor(() => expect(onSaved).toHaveBeenCalledWith("01JNEW00000000000000000001"));
    expect(mocked.addNote).toHaveBeenCalledWith("Visited [[北京的茶馆很安静]]");
    expect(mocked.linkNotes).toHaveBeenCalledWith("01JNEW00000000000000000001", chinese.id, "supports", "");
  });

  it("picks with the mouse, closes on Escape, and links nothing whose [[label]] was deleted", async () => {
    mocked.addNote.mockResolvedValue(note({ id: "01JNEW00000000000000000002" }));
    renderWith(<NoteEditor onSaved={vi.fn()} />);
    const input = screen.getByTestId("note-input") as HTMLTextAreaElement;
    typeAt(input, "[[tea");
    fireEvent.mouseDown(await screen.findByTestId("wikilink-option-0"));
    expect(input.value).toBe("[[Tea grows on the slopes of Darjeeling]]");
    typeAt(input, "[[Tea grows on the slopes of Darjeeling]] and [[");
    await screen.findByTestId("wikilink-suggest");
    fireEvent.keyDown(input, { key: "Escape" });
    expect(screen.queryByTestId("wikilink-suggest")).toBeNull();
    typeAt(input, "no links left");
    fireEvent.keyDown(input, { key: "Enter", ctrlKey: true });
    await waitFor(() => expect(mocked.addNote).toHaveBeenCalled());
    expect(mocked.linkNotes).not.toHaveBeenCalled();
  });

  it("keeps the note and says which link failed", async () => {
    mocked.addNote.mockResolvedValue(note({ id: "01JNEW00000000000000000003" }));
    mocked.linkNotes.mockRejectedValue(new ApiError({ kind: "invalid", message: "no note with id X" }));
    const onSaved = vi.fn();
    renderWith(<NoteEditor onSaved={onSaved} />);
    const input = screen.getByTestId("note-input") as HTMLTextAreaElement;
    typeAt(input, "[[tea");
    fireEvent.mouseDown(await screen.findByTestId("wikilink-option-0"));
    fireEvent.keyDown(input, { key: "Enter", ctrlKey: true });
    expect(await screen.findByText(/The note was saved, but not every link: .*no note with id X/)).toBeTruthy();
    expect(onSaved).toHaveBeenCalled();
  });
});

describe("LinkEditor", () => {
  it("searches a note (not this one), picks a kind and a reason, and links", async () => {
    mocked.linkNotes.mockResolvedValue({ action: "link", target: "l1", notes: [], revisions: 0, links: 1 });
    const onLinked = vi.fn();
    renderWith(<LinkEditor noteId={tea.id} onLinked={onLinked} />);
    await userEvent.click(screen.getByTestId("link-add"));
    expect((screen.getByTestId("link-confirm") as HTMLButtonElement).disabled).toBe(true);
    await userEvent.type(screen.getByTestId("link-search"), "tea");
    await waitFor(() => expect(mocked.searchNotes).toHaveBeenCalledWith("tea", 8, expect.anything(), null));
    // the note itself is never offered
    await waitFor(() => expect(screen.getByTestId("link-candidate-0").getAttribute("data-id")).toBe(chinese.id));
    expect(screen.queryByTestId("link-candidate-1")).toBeNull();
    fireEvent.mouseDown(screen.getByTestId("link-candidate-0"));
    expect(screen.getByTestId("link-target").textContent).toContain("北京");
    await waitFor(() => expect(screen.getByTestId("link-kind").querySelectorAll("option").length).toBe(3));
    fireEvent.change(screen.getByTestId("link-kind"), { target: { value: "contradicts" } });
    await userEvent.type(screen.getByTestId("link-reason"), " both about tea ");
    await userEvent.click(screen.getByTestId("link-confirm"));
    await waitFor(() => expect(onLinked).toHaveBeenCalled());
    expect(mocked.linkNotes).toHaveBeenCalledWith(tea.id, chinese.id, "contradicts", "both about tea");
    expect(screen.getByTestId("link-add")).toBeTruthy();
  });

  it("shows the engine's refusal in words and stays open", async () => {
    mocked.linkNotes.mockRejectedValue(new ApiError({ kind: "invalid", message: "already linked as 'relates'" }));
    renderWith(<LinkEditor noteId={tea.id} onLinked={vi.fn()} />);
    await userEvent.click(screen.getByTestId("link-add"));
    await userEvent.type(screen.getByTestId("link-search"), "北京");
    fireEvent.mouseDown(await screen.findByTestId("link-candidate-0"));
    await userEvent.click(screen.getByTestId("link-confirm"));
    expect(await screen.findByText("already linked as 'relates'")).toBeTruthy();
    expect(screen.getByTestId("link-editor")).toBeTruthy();
  });
});

describe("NoteDetail: links and text by hand", () => {
  const detail = {
    note: tea,
    links: [
      { from: tea.id, to: chinese.id, kind: "supports", reason: "mine", confidence: 1, created_by: "user", status: "accepted", created_at: "2024-05-01T10:00:00Z", other_preview: "北京" },
      { from: chinese.id, to: tea.id, kind: "relates", reason: "old", confidence: 0.4, created_by: "llm", status: "rejected", created_at: "2024-05-01T10:00:00Z", other_preview: "北京" },
    ],
    validity: { valid_from: "2024-05-01T10:00:00Z", valid_until: null, superseded_by: null, replaces: [] },
    history: [
      { at: "2024-05-01T10:00:00Z", actor: "user", action: "created", id: null, status: null, reason: "", before: null, after: null, content_before: null, content_after: null, changes: [] },
      {
        at: "2024-05-01T11:00:00Z", actor: "user", action: "edit", id: "rev1", status: "accepted", reason: "edited the text",
        before: { keywords: [], tags: [], context: "" }, after: { keywords: [], tags: [], context: "" },
        content_before: "Tea grows\nin Assam", content_after: "Tea grows\non the slopes", changes: [],
      },
    ],
  };

  it("removes an accepted link (only those), edits the text and shows the text diff", async () => {
    mocked.getNote.mockResolvedValue(detail);
    mocked.unlinkNotes.mockResolvedValue({ action: "unlink", target: "l1", notes: [], revisions: 0, links: 1 });
    mocked.editContent.mockResolvedValue({ action: "edit_content", target: "rev2", notes: [], revisions: 1, links: 0 });
    const { ctx, invalidated } = renderWith(<NoteDetail id={tea.id} />);
    await screen.findByTestId("note-detail");
    expect(screen.queryByTestId("link-remove-1")).toBeNull();
    await userEvent.click(screen.getByTestId("link-remove-0"));
    expect(mocked.unlinkNotes).toHaveBeenCalledWith(tea.id, chinese.id, "supports");
    expect(ctx.openNote).not.toHaveBeenCalled();
    // both ends of the removed link are read again
    await waitFor(() => expect(invalidated()).toEqual(expect.arrayContaining([["note", tea.id], ["note", chinese.id], ["graph"]])));

    const diff = screen.getByTestId("history-content-diff");
    const ops = Array.from(diff.children).map((c) => `${c.getAttribute("data-op")}${c.textContent?.slice(2)}`);
    expect(ops).toEqual([" Tea grows", "-in Assam", "+on the slopes"]);

    await userEvent.click(screen.getByTestId("note-edit"));
    const box = screen.getByTestId("note-edit-input") as HTMLTextAreaElement;
    expect(box.value).toBe(tea.content);
    expect((screen.getByTestId("note-edit-save") as HTMLButtonElement).disabled).toBe(true);
    await userEvent.clear(box);
    await userEvent.type(box, "Tea grows in 大吉岭");
    await act(async () => {
      await userEvent.click(screen.getByTestId("note-edit-save"));
    });
    expect(mocked.editContent).toHaveBeenCalledWith(tea.id, "Tea grows in 大吉岭");
    await waitFor(() => expect(screen.queryByTestId("note-edit-input")).toBeNull());
    // the rewritten note, the lists and the graph are read again
    expect(invalidated().slice(-4)).toEqual([["note", tea.id], ["notes"], ["search"], ["graph"]]);
  });
});
