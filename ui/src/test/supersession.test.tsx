// Facts that change in the app: a supersession proposal in Review with its three choices,
// the "as of" date control above Notes and Chat, a note's validity, and the graph's
// `supersedes` edges.
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useState, type ReactElement } from "react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ctx, note, renderWith } from "./util";
import type { HitDto, LinkKindWord, LinkStatus, NoteDetailDto, OutcomeDto, ReviewItemDto } from "../api";
import { Ctx } from "../app-context";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      reviewQueue: vi.fn(),
      listEvents: vi.fn(),
      reviewAccept: vi.fn(),
      reviewReject: vi.fn(),
      reviewBothTrue: vi.fn(),
      reviewRollback: vi.fn(),
      reviewBulkAccept: vi.fn(),
      listNotes: vi.fn(),
      listTags: vi.fn(),
      listBoxes: vi.fn(),
      searchNotes: vi.fn(),
      getNote: vi.fn(),
      noteLifecycle: vi.fn(),
      linkKinds: vi.fn(),
      llmOverview: vi.fn(),
      ask: vi.fn(),
    },
  };
});

import { api } from "../api";
import ReviewView from "../features/review/ReviewView";
import NotesView from "../features/notes/NotesView";
import NoteDetail from "../features/notes/NoteDetail";
import ChatView from "../features/chat/ChatView";
import { buildGraph } from "../features/graph/graphData";
import { patchGraph } from "../features/graph/incremental";
import { SUPERSEDES_COLOUR } from "../features/graph/graphStyle";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

const OLD = "01JOLD0000000000000000000A";
const NEW = "01JNEW0000000000000000000B";

// the link runs from the newer note to the older one
const proposal: ReviewItemDto = {
  kind: "link",
  id: "sup1",
  note: NEW,
  note_preview: "From September the rent is 1,300 euros.",
  target: OLD,
  target_preview: "Our rent is 1,200 euros a month.",
  event: null,
  label: "supersedes",
  reason: "rent: 1,200 euros → 1,300 euros",
  confidence: 1,
  before: null,
  after: null,
  status: "proposed",
  created_at: "2026-03-10T09:00:00Z",
  changes: [],
  by: "merge",
  note_valid_from: "2026-09-01T00:00:00Z",
  target_valid_from: "2026-03-01T09:00:00Z",
};
const plainLink: ReviewItemDto = { ...proposal, id: "rel1", label: "relates", reason: "same flat", note_valid_from: null, target_valid_from: null };
const outcome: OutcomeDto = { action: "accept", target: "sup1", notes: [], revisions: 0, links: 1 };

beforeEach(() => {
  vi.clearAllMocks();
  mocked.reviewQueue.mockResolvedValue({ items: [proposal, plainLink], more: false, agents: [] });
  mocked.listEvents.mockResolvedValue([]);
  mocked.reviewAccept.mockResolvedValue(outcome);
  mocked.reviewReject.mockResolvedValue(outcome);
  mocked.reviewBothTrue.mockResolvedValue(outcome);
  mocked.listNotes.mockResolvedValue({ total: 1, offset: 0, notes: [note()] });
  mocked.listTags.mockResolvedValue([]);
  mocked.listBoxes.mockResolvedValue([]);
  mocked.noteLifecycle.mockResolvedValue({ strength: 1, tier: "long_term", project: null, threshold: 0.2, fading: false, archived: false });
  mocked.linkKinds.mockResolvedValue(["relates", "supersedes"]);
  mocked.llmOverview.mockResolvedValue({ discovered: [] });
});

describe("a supersession proposal in Review", () => {
  it("shows the older and the newer note side by side with their dates and what changed", async () => {
    const { ctx } = renderWith(<ReviewView />);
    const card = await screen.findByTestId("supersession-proposal");
    const older = within(card).getByTestId("supersession-older");
    const newer = within(card).getByTestId("supersession-newer");
    expect(older.getAttribute("data-id")).toBe(OLD);
    expect(older.textContent).toContain("Our rent is 1,200 euros a month.");
    expect(within(older).getByTestId("supersession-older-from").textContent).toContain("Mar 1, 2026");
    expect(newer.getAttribute("data-id")).toBe(NEW);
    expect(newer.textContent).toContain("From September the rent is 1,300 euros.");
    expect(within(newer).getByTestId("supersession-newer-from").textContent).toContain("Sep 1, 2026");
    // older first, then newer
    expect(older.compareDocumentPosition(newer) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(within(card).getByTestId("supersession-reason").textContent).toBe("what changed: rent: 1,200 euros → 1,300 euros");
    await userEvent.click(within(older).getByRole("button"));
    expect(ctx.openNote).toHaveBeenCalledWith(OLD);
    // an ordinary link keeps its own card and its Accept
    expect(screen.getAllByTestId("supersession-proposal")).toHaveLength(1);
    expect(screen.getAllByTestId("review-accept")).toHaveLength(1);
  });

  it("newer replaces older accepts the link", async () => {
    const { ctx, invalidated } = renderWith(<ReviewView />);
    const card = await screen.findByTestId("supersession-proposal");
    await userEvent.click(within(card).getByTestId("review-replace"));
    await waitFor(() => expect(mocked.reviewAccept).toHaveBeenCalledWith("sup1", null));
    expect(mocked.reviewBothTrue).not.toHaveBeenCalled();
    expect(mocked.reviewReject).not.toHaveBeenCalled();
    expect(ctx.toast).toHaveBeenCalledWith("The newer note now replaces the older one");
    await waitFor(() => expect(invalidated()).toEqual(expect.arrayContaining([["review"], ["note"], ["notes"], ["search"], ["graph"]])));
  });

  it("both stay true settles the pair, not a rejection", async () => {
    const { ctx } = renderWith(<ReviewView />);
    const card = await screen.findByTestId("supersession-proposal");
    await userEvent.click(within(card).getByTestId("review-both-true"));
    await waitFor(() => expect(mocked.reviewBothTrue).toHaveBeenCalledWith("sup1"));
    expect(mocked.reviewAccept).not.toHaveBeenCalled();
    expect(mocked.reviewReject).not.toHaveBeenCalled();
    expect(ctx.toast).toHaveBeenCalledWith("Both notes stay true; this pair will not be proposed again");
  });

  it("reject rejects the link; a failure is shown on the card", async () => {
    mocked.reviewReject.mockRejectedValueOnce(new Error("link sup1 is already Rejected"));
    renderWith(<ReviewView />);
    const card = await screen.findByTestId("supersession-proposal");
    await userEvent.click(within(card).getByTestId("review-reject"));
    expect(await within(card.closest("li") as HTMLElement).findByText("link sup1 is already Rejected")).toBeTruthy();
    expect(mocked.reviewReject).toHaveBeenCalledWith("sup1");
    expect(mocked.reviewBothTrue).not.toHaveBeenCalled();
  });

  it("an accepted supersession offers roll back, not the three choices", async () => {
    mocked.reviewQueue.mockResolvedValue({ items: [{ ...proposal, status: "accepted" }], more: false, agents: [] });
    renderWith(<ReviewView />);
    const card = await screen.findByTestId("supersession-proposal");
    expect(within(card).queryByTestId("review-replace")).toBeNull();
    expect(within(card).queryByTestId("review-both-true")).toBeNull();
    expect(within(card).getByTestId("rollback")).toBeTruthy();
  });
});

/** `ui` with the app's "as of" day held in state, as App holds it. */
function WithAsOf({ ui, openNote }: { ui: ReactElement; openNote?: (id: string) => void }) {
  const [asOf, setAsOf] = useState<string | null>(null);
  const [base] = useState(() => ctx(openNote ? { openNote } : {}));
  return <Ctx.Provider value={{ ...base, asOf, setAsOf }}>{ui}</Ctx.Provider>;
}

const oldHit = (): HitDto => ({
  note: note({ id: OLD, content: "Our rent is 1,200 euros a month." }),
  score: 0.8,
  via: ["vector"],
  superseded_by: { id: NEW, since: "2026-09-01T00:00:00Z", reason: "rent: 1,200 euros → 1,300 euros", preview: "From September the rent is 1,300 euros." },
});
const newHit = (): HitDto => ({ note: note({ id: NEW, content: "From September the rent is 1,300 euros." }), score: 0.9, via: ["vector"], superseded_by: null });

describe("the as-of date control", () => {
  it("searches Notes as of the day chosen, and as of today again once cleared", async () => {
    mocked.searchNotes.mockImplementation((_q: string, _k: number, _f: unknown, asOf: string | null) =>
      Promise.resolve(asOf === "2026-06-30" ? [{ ...oldHit(), superseded_by: null }] : [newHit(), oldHit()]),
    );
    const openNote = vi.fn();
    renderWith(<WithAsOf ui={<NotesView />} openNote={openNote} />);
    await userEvent.type(screen.getByTestId("search-input"), "rent");
    await waitFor(() => expect(mocked.searchNotes).toHaveBeenLastCalledWith("rent", 20, { tag: null, enrich: null, box_id: null }, null));
    // today: the current value first, the old one below it saying what replaced it
    await waitFor(() => expect(screen.getAllByTestId("note-item").map((n) => n.getAttribute("data-id"))).toEqual([NEW, OLD]));
    const marks = screen.getAllByTestId("hit-superseded-by");
    expect(marks).toHaveLength(1);
    expect(marks[0].getAttribute("data-by")).toBe(NEW);
    expect(marks[0].textContent).toContain("superseded by");
    expect(marks[0].textContent).toContain("since Sep 1, 2026");
    await userEvent.click(within(marks[0]).getByRole("button"));
    expect(openNote).toHaveBeenCalledWith(NEW);

    // as of the last day of June: asked again with the day
    expect(screen.queryByTestId("as-of-clear")).toBeNull();
    fireEvent.change(screen.getByTestId("as-of-date"), { target: { value: "2026-06-30" } });
    await waitFor(() => expect(mocked.searchNotes).toHaveBeenLastCalledWith("rent", 20, { tag: null, enrich: null, box_id: null }, "2026-06-30"));
    await waitFor(() => expect(screen.getAllByTestId("note-item").map((n) => n.getAttribute("data-id"))).toEqual([OLD]));
    expect(screen.queryByTestId("hit-superseded-by")).toBeNull();
    expect(screen.getByTestId("as-of-active").getAttribute("data-day")).toBe("2026-06-30");

    // back to today
    await userEvent.click(screen.getByTestId("as-of-clear"));
    await waitFor(() => expect(mocked.searchNotes).toHaveBeenLastCalledWith("rent", 20, { tag: null, enrich: null, box_id: null }, null));
    expect((screen.getByTestId("as-of-date") as HTMLInputElement).value).toBe("");
    expect(screen.queryByTestId("as-of-active")).toBeNull();
  });

  it("lists Notes (no query) as of the day chosen, without calling the memory empty", async () => {
    const both = { total: 2, offset: 0, notes: [newHit().note, oldHit().note] };
    mocked.listNotes.mockImplementation((_f: unknown, _o: number, _l: number, asOf: string | null) =>
      Promise.resolve(asOf === "2026-06-30" ? { total: 1, offset: 0, notes: [oldHit().note] } : asOf ? { total: 0, offset: 0, notes: [] } : both),
    );
    renderWith(<WithAsOf ui={<NotesView />} />);
    await waitFor(() => expect(screen.getAllByTestId("note-item").map((n) => n.getAttribute("data-id"))).toEqual([NEW, OLD]));
    fireEvent.change(screen.getByTestId("as-of-date"), { target: { value: "2026-06-30" } });
    await waitFor(() => expect(mocked.listNotes).toHaveBeenLastCalledWith({ tag: null, enrich: null, box_id: null }, 0, expect.any(Number), "2026-06-30"));
    await waitFor(() => expect(screen.getAllByTestId("note-item").map((n) => n.getAttribute("data-id"))).toEqual([OLD]));
    // a day before every note: nothing listed, and no "your memory is empty" teaching
    fireEvent.change(screen.getByTestId("as-of-date"), { target: { value: "2001-01-01" } });
    await waitFor(() => expect(screen.queryAllByTestId("note-item")).toHaveLength(0));
    expect((await screen.findByTestId("notes-none")).textContent).toContain("No note had taken effect by");
    expect(screen.queryByText("Load the sample notebook")).toBeNull();
    await userEvent.click(screen.getByTestId("as-of-clear"));
    await waitFor(() => expect(screen.getAllByTestId("note-item")).toHaveLength(2));
  });

  it("asks Chat as of the day chosen, and says so under the question", async () => {
    mocked.ask.mockResolvedValue({ answer: "The rent is 1,200 euros [1].", citations: [{ n: 1, id: OLD, preview: "Our rent is 1,200 euros a month." }], citations_inferred: false, not_in_memory: false, skipped_retrieval: false });
    renderWith(<WithAsOf ui={<ChatView />} />);
    fireEvent.change(screen.getByTestId("as-of-date"), { target: { value: "2026-06-30" } });
    await userEvent.type(screen.getByTestId("chat-input"), "what is our rent");
    await userEvent.click(screen.getByTestId("chat-send"));
    await waitFor(() => expect(mocked.ask).toHaveBeenCalledTimes(1));
    expect(mocked.ask.mock.calls[0][0]).toBe("what is our rent");
    expect(mocked.ask.mock.calls[0][2]).toBe("2026-06-30");
    expect((await screen.findByTestId("chat-as-of")).getAttribute("data-day")).toBe("2026-06-30");
    // cleared: the next question is about today
    await userEvent.click(screen.getByTestId("as-of-clear"));
    await userEvent.type(screen.getByTestId("chat-input"), "and now");
    await userEvent.click(screen.getByTestId("chat-send"));
    await waitFor(() => expect(mocked.ask).toHaveBeenCalledTimes(2));
    expect(mocked.ask.mock.calls[1][2]).toBeNull();
    expect(screen.getAllByTestId("chat-as-of")).toHaveLength(1);
  });
});

describe("a note's validity", () => {
  const detail = (over: Partial<NoteDetailDto["validity"]>): NoteDetailDto => ({
    note: note({ id: OLD, content: "Our rent is 1,200 euros a month." }),
    links: [],
    history: [],
    validity: { valid_from: "2026-03-01T09:00:00Z", valid_until: null, superseded_by: null, replaces: [], ...over },
  });

  it("says until when it held and what replaced it, which opens", async () => {
    mocked.getNote.mockResolvedValue(
      detail({
        valid_until: "2026-09-01T00:00:00Z",
        superseded_by: { id: NEW, since: "2026-09-01T00:00:00Z", reason: "rent: 1,200 euros → 1,300 euros", preview: "From September the rent is 1,300 euros." },
      }),
    );
    const { ctx } = renderWith(<NoteDetail id={OLD} />);
    const v = await screen.findByTestId("note-validity");
    expect(v.textContent).toBe("valid from Mar 1, 2026 until Sep 1, 2026");
    const by = screen.getByTestId("note-superseded-by");
    expect(by.getAttribute("data-id")).toBe(NEW);
    expect(by.textContent).toContain("since Sep 1, 2026");
    expect(by.textContent).toContain("rent: 1,200 euros → 1,300 euros");
    await userEvent.click(screen.getByTestId("note-successor"));
    expect(ctx.openNote).toHaveBeenCalledWith(NEW);
    expect(screen.queryByTestId("note-replaces")).toBeNull();
  });

  it("a current note has no end and names the notes it replaced", async () => {
    mocked.getNote.mockResolvedValue(
      detail({ valid_from: "2026-09-01T00:00:00Z", replaces: [{ id: OLD, reason: "rent: 1,200 euros → 1,300 euros", preview: "Our rent is 1,200 euros a month." }] }),
    );
    const { ctx } = renderWith(<NoteDetail id={NEW} />);
    expect((await screen.findByTestId("note-validity")).textContent).toBe("valid from Sep 1, 2026");
    expect(screen.queryByTestId("note-superseded-by")).toBeNull();
    const pred = screen.getByTestId("note-predecessor");
    expect(pred.getAttribute("data-id")).toBe(OLD);
    await userEvent.click(pred);
    expect(ctx.openNote).toHaveBeenCalledWith(OLD);
  });
});

describe("supersedes in the graph", () => {
  const node = (id: string) => ({ id, label: id, tags: [], enrich: "done" as const, boxes: [], strength: 1 });
  const link = (id: string, from: string, to: string, kind: LinkKindWord, status: LinkStatus = "accepted") => ({ id, from, to, kind, status, confidence: 1 });

  it("draws a supersession in its own colour and thicker, also beside another kind", () => {
    const g = buildGraph(
      {
        nodes: [node("a"), node("b"), node("c")],
        links: [link("l1", "b", "a", "supersedes"), link("l2", "b", "c", "relates"), link("l3", "c", "b", "supersedes", "proposed")],
        truncated: false,
      },
      [],
    );
    expect(g.getEdgeAttributes("a", "b")).toMatchObject({ supersedes: true, color: SUPERSEDES_COLOUR, size: 2, proposed: false });
    // a relates link and a proposed supersession between the same pair: one edge, drawn as a supersession
    expect(g.getEdgeAttributes("b", "c")).toMatchObject({ supersedes: true, color: SUPERSEDES_COLOUR, proposed: false });
    const plain = buildGraph({ nodes: [node("a"), node("b")], links: [link("l1", "a", "b", "relates")], truncated: false }, []);
    expect(plain.getEdgeAttributes("a", "b")).toMatchObject({ supersedes: false, size: 1 });
    expect(plain.getEdgeAttribute("a", "b", "color")).not.toBe(SUPERSEDES_COLOUR);
  });

  it("a supersession accepted later is drawn as one when the graph is patched", () => {
    const g = buildGraph({ nodes: [node("a"), node("b")], links: [link("l1", "b", "a", "relates")], truncated: false }, []);
    patchGraph(g, { note: "b", nodes: [node("a"), node("b")], links: [link("l1", "b", "a", "relates"), link("l2", "b", "a", "supersedes")] }, []);
    expect(g.getEdgeAttributes("a", "b")).toMatchObject({ supersedes: true, color: SUPERSEDES_COLOUR });
  });
});
