import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: { listBoxes: vi.fn(), insights: vi.fn(), appStatus: vi.fn(), ask: vi.fn() },
  };
});

import { api } from "../api";
import BoxesView from "../features/boxes/BoxesView";
import ChatView from "../features/chat/ChatView";
import InsightsView from "../features/insights/InsightsView";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

beforeEach(() => vi.clearAllMocks());

describe("keyboard and screen readers", () => {
  it("opens a Box in the graph from the keyboard", async () => {
    mocked.listBoxes.mockResolvedValue([{ id: "B1", label: "Pixel", size: 4 }]);
    const { ctx } = renderWith(<BoxesView />);
    const card = await screen.findByRole("button", { name: /Pixel, 4 notes/ });
    card.focus();
    await userEvent.keyboard("{Enter}");
    expect(ctx.setGraphFocus).toHaveBeenCalledWith({ center: null, depth: 1, boxId: "B1" });
    expect(ctx.go).toHaveBeenCalledWith("graph");
  });

  it("announces the streaming answer politely", async () => {
    mocked.ask.mockImplementation((_q: string, _h: unknown, _asOf: string | null, onToken: (t: string) => void) => {
      onToken("Pixel is a dog.");
      return new Promise(() => {});
    });
    renderWith(<ChatView />);
    await userEvent.type(screen.getByTestId("chat-input"), "Who is Pixel?{Enter}");
    await waitFor(() => expect(screen.getByTestId("chat-answer").textContent).toContain("Pixel is a dog."));
    const live = screen.getByTestId("chat-answer").querySelector("[aria-live]");
    expect(live?.getAttribute("aria-live")).toBe("polite");
    expect(live?.textContent).toContain("Pixel is a dog.");
  });

  it("shows how long the memory took to open in Insights", async () => {
    mocked.insights.mockResolvedValue({
      notes_per_day: [],
      links_per_day: [],
      tokens_per_day: [],
      top_tags: [],
      boxes: [],
      total_notes: 3,
    });
    mocked.appStatus.mockResolvedValue({ opened_ms: 1234 });
    renderWith(<InsightsView />);
    expect((await screen.findByTestId("opened-ms")).textContent).toContain("1234 ms");
  });
});
