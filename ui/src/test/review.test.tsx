import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";
import type { ReviewItemDto } from "../api";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      reviewQueue: vi.fn(),
      listEvents: vi.fn(),
      reviewAccept: vi.fn(),
      reviewReject: vi.fn(),
      reviewRollback: vi.fn(),
      reviewBulkAccept: vi.fn(),
    },
  };
});

import { api } from "../api";
import ReviewView from "../features/review/ReviewView";
import Diff from "../components/Diff";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

const link: ReviewItemDto = {
  kind: "link",
  id: "link1",
  note: "A",
  note_preview: "Pixel ran on the beach",
  target: "B",
  target_preview: "Ada's dog Pixel",
  event: "ev1",
  label: "same-entity",
  reason: "both are about Pixel",
  confidence: 0.8,
  before: null,
  after: null,
  status: "proposed",
  created_at: "2024-05-01T10:00:00Z",
  changes: [],
  by: "llm",
  note_valid_from: null,
  target_valid_from: null,
};
const edit: ReviewItemDto = {
  ...link,
  kind: "edit",
  id: "rev1",
  target: null,
  target_preview: null,
  label: "evolution",
  reason: "Pixel now also goes to the beach",
  confidence: null,
  before: { keywords: ["dog"], tags: ["pets"], context: "old" },
  after: { keywords: ["dog"], tags: ["pets", "beach"], context: "new" },
  status: "applied",
  changes: [{ op: "add_tag", value: "beach", reason: "the new note says Pixel swims at the beach" }],
};

beforeEach(() => {
  vi.clearAllMocks();
  mocked.reviewQueue.mockResolvedValue({ items: [link, edit], more: false, agents: [] });
  mocked.listEvents.mockResolvedValue([]);
  mocked.reviewAccept.mockResolvedValue({ action: "accept", target: "link1", notes: [], revisions: 0, links: 1 });
  mocked.reviewReject.mockResolvedValue({ action: "reject", target: "link1", notes: [], revisions: 0, links: 1 });
  mocked.reviewRollback.mockResolvedValue({ action: "rollback", target: "rev1", notes: [], revisions: 1, links: 0 });
  mocked.reviewBulkAccept.mockResolvedValue({ accepted: 3, failed: [] });
});

describe("ReviewView", () => {
  it("shows reason, confidence and the edit's diff; accept and reject act on the item", async () => {
    const { invalidated } = renderWith(<ReviewView />);
    const items = await screen.findAllByTestId("review-item");
    expect(items).toHaveLength(2);
    expect(screen.getByText("why: both are about Pixel")).toBeTruthy();
    expect(screen.getByText("confidence 0.80")).toBeTruthy();
    // an evolution shows each change with the reason the model gave for it
    const change = screen.getByTestId("change");
    expect(change.getAttribute("data-op")).toBe("add_tag");
    expect(screen.getByTestId("change-reason").textContent).toBe("the new note says Pixel swims at the beach");
    // the diff lists only changed fields
    expect(screen.getByText("pets, beach")).toBeTruthy();
    expect(screen.queryByText("keywords")).toBeNull();
    await userEvent.click(screen.getAllByTestId("review-accept")[0]);
    await waitFor(() => expect(mocked.reviewAccept).toHaveBeenCalledWith("link1", null));
    // the queue, the events, the notes and the graph are read again
    await waitFor(() => expect(invalidated()).toEqual(expect.arrayContaining([["review"], ["events"], ["note"], ["notes"], ["graph"]])));
    await userEvent.click(screen.getAllByTestId("review-reject")[0]);
    await waitFor(() => expect(mocked.reviewReject).toHaveBeenCalledWith("link1"));
    // an applied edit can be rolled back; so can its whole event
    await userEvent.click(screen.getByTestId("rollback"));
    await waitFor(() => expect(mocked.reviewRollback).toHaveBeenCalledWith("rev1"));
    await userEvent.click(screen.getAllByText("Roll back the whole event")[0]);
    await waitFor(() => expect(mocked.reviewRollback).toHaveBeenCalledWith("ev1"));
  });

  it("ties the edit fields to their labels", async () => {
    mocked.reviewQueue.mockResolvedValue({ items: [{ ...edit, status: "proposed" }], more: false, agents: [] });
    renderWith(<ReviewView />);
    await userEvent.click(await screen.findByText("Edit"));
    await userEvent.type(screen.getByLabelText("keywords"), "beach");
    expect((screen.getByLabelText("keywords") as HTMLInputElement).value).toContain("beach");
    expect(screen.getByLabelText("tags").tagName).toBe("INPUT");
    expect(screen.getByLabelText("context").tagName).toBe("TEXTAREA");
  });

  it("says when the events cannot be listed", async () => {
    mocked.listEvents.mockRejectedValue(new Error("the store is locked"));
    renderWith(<ReviewView />);
    expect(await screen.findByText("Cannot list the events: the store is locked")).toBeTruthy();
  });

  it("bulk-accepts links above the chosen confidence", async () => {
    const { ctx } = renderWith(<ReviewView />);
    await screen.findAllByTestId("review-item");
    const box = screen.getByLabelText("Minimum confidence");
    await userEvent.clear(box);
    await userEvent.type(box, "0.9");
    await userEvent.click(screen.getByTestId("bulk-accept"));
    await waitFor(() => expect(mocked.reviewBulkAccept).toHaveBeenCalledWith(0.9));
    expect(ctx.toast).toHaveBeenCalledWith("Accepted 3 link(s)");
  });

  it("filters the queue by who made it, an agent by its name", async () => {
    const byPlanner: ReviewItemDto = { ...link, id: "link2", by: "agent:planner", confidence: 1 };
    mocked.reviewQueue.mockResolvedValue({ items: [link, byPlanner], more: false, agents: ["agent:planner"] });
    renderWith(<ReviewView />);
    const items = await screen.findAllByTestId("review-item");
    expect(items).toHaveLength(2);
    const makers = screen.getAllByTestId("review-item-by").map((e) => e.textContent);
    expect(makers).toEqual(["by the LLM", "by agent planner"]);
    expect(mocked.reviewQueue).toHaveBeenLastCalledWith([], 0, 50, null);
    const filter = screen.getByTestId("review-filter-by");
    expect(Array.from(filter.querySelectorAll("option")).map((o) => o.textContent)).toEqual([
      "anyone",
      "the LLM",
      "merge on write",
      "any agent",
      "agent planner",
    ]);
    mocked.reviewQueue.mockResolvedValue({ items: [byPlanner], more: false, agents: ["agent:planner"] });
    await userEvent.selectOptions(filter, "agent:planner");
    await waitFor(() => expect(mocked.reviewQueue).toHaveBeenLastCalledWith([], 0, 50, "agent:planner"));
    await waitFor(() => expect(screen.getAllByTestId("review-item")).toHaveLength(1));
  });

  it("explains the queue when it is empty", async () => {
    mocked.reviewQueue.mockResolvedValue({ items: [], more: false, agents: [] });
    renderWith(<ReviewView />);
    expect(await screen.findByText("Nothing waits for review.")).toBeTruthy();
  });
});

describe("Diff", () => {
  it("says so when nothing changed", () => {
    const f = { keywords: ["a"], tags: [], context: "c" };
    renderWith(<Diff before={f} after={f} />);
    expect(screen.getByText("no field changed")).toBeTruthy();
  });
});
