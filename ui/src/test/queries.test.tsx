// The query cache: a superseded search never shows, a finished job refreshes what it changed
// (and nothing else), a user's edit makes only its own keys stale.
import { act, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ctx, note, renderWith } from "./util";
import type { HitDto, JobEvent, NoteDetailDto, SettingsDto } from "../api";

let job: ((e: JobEvent) => void) | null = null;
vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      listNotes: vi.fn(),
      listTags: vi.fn(),
      listBoxes: vi.fn(),
      searchNotes: vi.fn(),
      getNote: vi.fn(),
      noteLifecycle: vi.fn(),
      editNote: vi.fn(),
      getSettings: vi.fn(),
      llmOverview: vi.fn(),
      builtinModels: vi.fn(),
      reviewQueue: vi.fn(),
      listEvents: vi.fn(),
    },
    onJob: vi.fn((cb: (e: JobEvent) => void) => {
      job = cb;
      return Promise.resolve(() => {});
    }),
  };
});

import { api } from "../api";
import NotesView from "../features/notes/NotesView";
import SettingsView from "../features/settings/SettingsView";
import ReviewView from "../features/review/ReviewView";
import { invalidate, newQueryClient, staleAfter, useJobChanges } from "../queries";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;
const calls = (name: string) => mocked[name].mock.calls.length;

const ID = "01JOPEN0000000000000000001";
const detail = (context: string): NoteDetailDto => ({
  note: note({ id: ID, context }),
  links: [],
  history: [],
  validity: { valid_from: "2024-05-01T10:00:00Z", valid_until: null, superseded_by: null, replaces: [] },
});
const settings: SettingsDto = {
  provider: "openai",
  base_url: "http://127.0.0.1:8080/v1",
  model: "m",
  timeout_secs: 60,
  api_key_storage: "none",
  k: 5,
  links_policy: "auto",
  edits_policy: "auto",
  auto_accept_confidence: null,
  env_overrides: [],
};
const hit = (content: string): HitDto => ({ note: note({ id: content, content }), score: 0.5, via: ["vector"], superseded_by: null });

beforeEach(() => {
  vi.clearAllMocks();
  job = null;
  mocked.listNotes.mockResolvedValue({ total: 1, offset: 0, notes: [note({ id: ID })] });
  mocked.listTags.mockResolvedValue([]);
  mocked.listBoxes.mockResolvedValue([]);
  mocked.getNote.mockResolvedValue(detail("before"));
  mocked.noteLifecycle.mockResolvedValue({ strength: 0.9, tier: "long_term", project: null, threshold: 0.2, fading: false, archived: false });
  mocked.getSettings.mockResolvedValue(settings);
  mocked.llmOverview.mockResolvedValue({
    in_use: { label: "none", source: "none", ready: false, problem: null, steps: "", model_path: null },
    discovered: [],
    env_chooses: false,
  });
  mocked.builtinModels.mockResolvedValue([]);
  mocked.reviewQueue.mockResolvedValue({ items: [], more: false, agents: [] });
  mocked.listEvents.mockResolvedValue([]);
});

/** What a view shows once the first answers are in: the note open, Settings and Review beside it. */
async function renderViews() {
  function Jobs() {
    useJobChanges();
    return null;
  }
  const r = renderWith(
    <>
      <Jobs />
      <NotesView />
      <SettingsView />
      <ReviewView />
    </>,
    ctx({ selected: ID }),
  );
  await screen.findByTestId("note-detail");
  await screen.findByTestId("llm-in-use");
  await screen.findByText("Nothing waits for review.");
  await waitFor(() => expect(job).not.toBeNull());
  return r;
}

describe("Notes search", () => {
  it("never shows the answer to an earlier query once a later one was asked", async () => {
    mocked.searchNotes.mockResolvedValue([]);
    const answer: Record<string, (h: HitDto[]) => void> = {};
    mocked.searchNotes.mockImplementation((q: string) => new Promise((r) => (answer[q] = r)));
    renderWith(<NotesView />);
    const input = await screen.findByTestId("search-input");
    await userEvent.type(input, "do");
    await waitFor(() => expect(answer.do).toBeDefined());
    await userEvent.type(input, "g");
    await waitFor(() => expect(answer.dog).toBeDefined());
    // the later query answers first, the earlier one after it
    await act(async () => answer.dog([hit("the answer to dog")]));
    expect(await screen.findByText("the answer to dog")).toBeTruthy();
    await act(async () => answer.do([hit("the answer to do")]));
    await new Promise((r) => setTimeout(r, 50));
    expect(screen.queryByText("the answer to do")).toBeNull();
    expect(screen.getByText("the answer to dog")).toBeTruthy();
  });

  it("does not show an earlier query's answer while the later one is still on its way", async () => {
    const answer: Record<string, (h: HitDto[]) => void> = {};
    mocked.searchNotes.mockImplementation((q: string) => new Promise((r) => (answer[q] = r)));
    renderWith(<NotesView />);
    const input = await screen.findByTestId("search-input");
    await userEvent.type(input, "te");
    await waitFor(() => expect(answer.te).toBeDefined());
    await userEvent.type(input, "a");
    await waitFor(() => expect(answer.tea).toBeDefined());
    await act(async () => answer.te([hit("the answer to te")]));
    await new Promise((r) => setTimeout(r, 50));
    expect(screen.queryByText("the answer to te")).toBeNull();
    await act(async () => answer.tea([hit("the answer to tea")]));
    expect(await screen.findByText("the answer to tea")).toBeTruthy();
    expect(screen.queryByText("the answer to te")).toBeNull();
  });
});

describe("Notes search, emptied", () => {
  it("does not show the hits of a search from before the box was emptied", async () => {
    const answer: Record<string, (h: HitDto[]) => void> = {};
    mocked.searchNotes.mockImplementation((q: string) => new Promise((r) => (answer[q] = r)));
    renderWith(<NotesView />);
    const input = await screen.findByTestId("search-input");
    await userEvent.type(input, "dog");
    await waitFor(() => expect(answer.dog).toBeDefined());
    await act(async () => answer.dog([hit("the answer to dog")]));
    expect(await screen.findByText("the answer to dog")).toBeTruthy();
    await userEvent.clear(input);
    await waitFor(() => expect(screen.queryByText("the answer to dog")).toBeNull());
    await userEvent.type(input, "cat");
    await waitFor(() => expect(answer.cat).toBeDefined());
    expect(screen.queryByText("the answer to dog")).toBeNull();
    await act(async () => answer.cat([hit("the answer to cat")]));
    expect(await screen.findByText("the answer to cat")).toBeTruthy();
  });
});

describe("finished jobs", () => {
  it("refresh the Notes list and the open note when it was enriched, not Settings", async () => {
    await renderViews();
    const before = { list: calls("listNotes"), note: calls("getNote"), settings: calls("getSettings"), llm: calls("llmOverview"), models: calls("builtinModels") };
    mocked.getNote.mockResolvedValue(detail("enriched context"));
    act(() => job?.({ outcome: "done", note: ID, links: 0, updates: 0, tokens: 120 }));
    expect(await screen.findByText("enriched context")).toBeTruthy();
    await waitFor(() => expect(calls("listNotes")).toBe(before.list + 1));
    expect(calls("getNote")).toBe(before.note + 1);
    // the review queue may hold what the job proposed
    await waitFor(() => expect(calls("reviewQueue")).toBe(2));
    expect(calls("getSettings")).toBe(before.settings);
    expect(calls("llmOverview")).toBe(before.llm);
    expect(calls("builtinModels")).toBe(before.models);
  });

  it("refresh the open note when another note linked to it; a retry refreshes no review queue", async () => {
    await renderViews();
    const note0 = calls("getNote");
    act(() => job?.({ outcome: "done", note: "01JOTHER000000000000000001", links: 2, updates: 0, tokens: 90 }));
    await waitFor(() => expect(calls("getNote")).toBe(note0 + 1));
    // a job that linked nothing leaves other notes as they are
    await waitFor(() => expect(calls("reviewQueue")).toBe(2));
    act(() => job?.({ outcome: "done", note: "01JOTHER000000000000000002", links: 0, updates: 0, tokens: 90 }));
    await waitFor(() => expect(calls("reviewQueue")).toBe(3));
    expect(calls("getNote")).toBe(note0 + 1);
    const list = calls("listNotes");
    act(() => job?.({ outcome: "retrying", note: ID, error: "the LLM server did not answer" }));
    await waitFor(() => expect(calls("listNotes")).toBe(list + 1));
    expect(calls("getNote")).toBe(note0 + 2);
    expect(calls("reviewQueue")).toBe(3);
  });

  it("finishing together refresh the views once", async () => {
    await renderViews();
    const list = calls("listNotes");
    act(() => {
      for (let i = 0; i < 5; i++) job?.({ outcome: "done", note: `01JBATCH00000000000000000${i}`, links: 0, updates: 0, tokens: 10 });
    });
    await waitFor(() => expect(calls("listNotes")).toBe(list + 1));
    await new Promise((r) => setTimeout(r, 400));
    expect(calls("listNotes")).toBe(list + 1);
  });

  it("make each key stale once, a note's key left out when all notes' are", async () => {
    const client = newQueryClient();
    const spy = vi.spyOn(client, "invalidateQueries");
    await invalidate(
      client,
      { kind: "job", event: { outcome: "done", note: ID, links: 0, updates: 0, tokens: 1 } },
      { kind: "job", event: { outcome: "done", note: "01JOTHER000000000000000001", links: 1, updates: 0, tokens: 1 } },
      { kind: "job", event: { outcome: "failed", note: ID, error: "no answer" } },
    );
    expect(spy.mock.calls.map(([f]) => f?.queryKey)).toEqual([["notes"], ["search"], ["tags"], ["boxes"], ["review"], ["events"], ["insights"], ["note"]]);
  });

  it("leave the graph to merge them itself (no reload)", () => {
    const stale = staleAfter({ kind: "job", event: { outcome: "done", note: ID, links: 3, updates: 1, tokens: 1 } });
    expect(stale).not.toContainEqual(["graph"]);
    expect(stale).toContainEqual(["boxes"]);
  });
});

describe("a user's edit", () => {
  it("makes stale only what it changed: the note, the lists it is in, its tags; not the review queue or Settings", async () => {
    const { invalidated } = await renderViews();
    const before = {
      note: calls("getNote"),
      list: calls("listNotes"),
      tags: calls("listTags"),
      review: calls("reviewQueue"),
      events: calls("listEvents"),
      settings: calls("getSettings"),
      llm: calls("llmOverview"),
    };
    mocked.editNote.mockResolvedValue({ action: "edit", target: "rev1", notes: [ID], revisions: 1, links: 0 });
    mocked.getNote.mockResolvedValue(detail("edited by hand"));
    const card = screen.getByTestId("note-detail");
    await userEvent.click(within(card).getByText("Edit annotations"));
    await userEvent.clear(within(card).getByLabelText("context"));
    await userEvent.type(within(card).getByLabelText("context"), "edited by hand");
    await userEvent.click(within(card).getByText("Save"));
    expect(mocked.editNote).toHaveBeenCalledWith(ID, { keywords: ["dog", "beach"], tags: ["pets"], context: "edited by hand" });
    expect(await within(card).findByTestId("note-context")).toBeTruthy();
    await waitFor(() => expect(screen.getByTestId("note-context").textContent).toBe("edited by hand"));
    expect(invalidated()).toEqual([["note", ID], ["notes"], ["search"], ["tags"], ["graph"], ["insights"]]);
    await waitFor(() => expect(calls("listNotes")).toBe(before.list + 1));
    expect(calls("getNote")).toBe(before.note + 1);
    expect(calls("listTags")).toBe(before.tags + 1);
    expect(calls("reviewQueue")).toBe(before.review);
    expect(calls("listEvents")).toBe(before.events);
    expect(calls("getSettings")).toBe(before.settings);
    expect(calls("llmOverview")).toBe(before.llm);
  });
});
