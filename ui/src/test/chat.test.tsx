import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return { ...real, api: { ask: vi.fn() } };
});

import { api } from "../api";
import ChatView from "../features/chat/ChatView";

const ask = (api as unknown as { ask: ReturnType<typeof vi.fn> }).ask;

beforeEach(() => vi.clearAllMocks());

describe("ChatView", () => {
  it("streams the answer, then makes [n] citations open the note and highlight it", async () => {
    let release: () => void = () => {};
    ask.mockImplementation((_q: string, _h: unknown, _asOf: string | null, onToken: (t: string) => void) => {
      onToken("Pixel is a ");
      onToken("border collie [1].");
      return new Promise((resolve) => {
        release = () =>
          resolve({
            answer: "Pixel is a border collie [1].",
            citations: [{ n: 1, id: "NOTE1", preview: "Ada's dog Pixel is a border collie" }],
            citations_inferred: false,
            not_in_memory: false,
            skipped_retrieval: false,
          });
      });
    });
    const { ctx } = renderWith(<ChatView />);
    await userEvent.type(screen.getByTestId("chat-input"), "What breed is Pixel?");
    await userEvent.click(screen.getByTestId("chat-send"));
    // streamed text is shown before the answer is complete
    await waitFor(() => expect(screen.getByTestId("chat-answer").textContent).toContain("border collie"));
    expect(screen.getByTestId("chat-answer").getAttribute("data-done")).toBe("false");
    release();
    await waitFor(() => expect(screen.getByTestId("chat-answer").getAttribute("data-done")).toBe("true"));
    expect(ask.mock.calls[0][0]).toBe("What breed is Pixel?");
    await userEvent.click(screen.getByTestId("citation"));
    expect(ctx.openNote).toHaveBeenCalledWith("NOTE1");
    expect(ctx.setHighlight).toHaveBeenCalledWith(["NOTE1"]);
  });

  it("says plainly when the memory does not hold the answer", async () => {
    ask.mockResolvedValue({ answer: "Not in memory.", citations: [], citations_inferred: false, not_in_memory: true, skipped_retrieval: false });
    renderWith(<ChatView />);
    await userEvent.type(screen.getByTestId("chat-input"), "What is my passport number?{Enter}");
    expect(await screen.findByText("Not in memory.", { selector: "strong" })).toBeTruthy();
    expect(screen.queryByTestId("citation")).toBeNull();
  });

  it("maps [n] to the cited note with that number, not to the n-th citation", async () => {
    ask.mockResolvedValue({
      answer: "Yes [3].",
      citations: [{ n: 3, id: "NOTE3", preview: "the third note shown" }],
      citations_inferred: false,
      not_in_memory: false,
      skipped_retrieval: false,
    });
    const { ctx } = renderWith(<ChatView />);
    await userEvent.type(screen.getByTestId("chat-input"), "q{Enter}");
    await waitFor(() => expect(screen.getByTestId("chat-answer").getAttribute("data-done")).toBe("true"));
    await userEvent.click(screen.getByTestId("citation"));
    expect(ctx.openNote).toHaveBeenCalledWith("NOTE3");
    // the model cited it: nothing says the sources were read back from the words
    expect(screen.queryByTestId("chat-sources-inferred")).toBeNull();
  });

  it("does not turn [n] without a matching citation into a link", async () => {
    ask.mockResolvedValue({ answer: "See [7].", citations: [], citations_inferred: false, not_in_memory: false, skipped_retrieval: false });
    renderWith(<ChatView />);
    await userEvent.type(screen.getByTestId("chat-input"), "q{Enter}");
    await waitFor(() => expect(screen.getByTestId("chat-answer").textContent).toContain("See [7]."));
    expect(screen.queryByTestId("citation")).toBeNull();
  });

  it("lists the notes an answer without [n] was read back to, and says so", async () => {
    ask.mockResolvedValue({
      answer: "Pixel is a border collie.",
      citations: [{ n: 2, id: "NOTE2", preview: "Ada's dog Pixel is a border collie" }],
      citations_inferred: true,
      not_in_memory: false,
      skipped_retrieval: false,
    });
    const { ctx } = renderWith(<ChatView />);
    await userEvent.type(screen.getByTestId("chat-input"), "What breed is Pixel?{Enter}");
    await waitFor(() => expect(screen.getByTestId("chat-answer").getAttribute("data-done")).toBe("true"));
    expect(screen.getByTestId("chat-sources-inferred").textContent).toContain("its words come from");
    // no [n] in the text to click; the note is in the list below it
    expect(screen.queryByTestId("citation")).toBeNull();
    await userEvent.click(screen.getByTestId("chat-source"));
    expect(ctx.openNote).toHaveBeenCalledWith("NOTE2");
  });
});
