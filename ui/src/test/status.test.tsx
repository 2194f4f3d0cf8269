import { render, screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ctx, status } from "./util";
import type { StatusEvent } from "../api";

let push: ((s: StatusEvent) => void) | null = null;
vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: { appStatus: vi.fn(), retryFailed: vi.fn() },
    onStatus: vi.fn((cb: (s: StatusEvent) => void) => {
      push = cb;
      return Promise.resolve(() => {});
    }),
  };
});

import { act } from "react";
import { QueryClientProvider } from "@tanstack/react-query";
import { api } from "../api";
import { Ctx, type AppCtx } from "../app-context";
import StatusBar from "../components/StatusBar";
import { useStatusFeed } from "../components/useStatusFeed";
import { newQueryClient, type Change } from "../queries";

/** The status bar fed as the app feeds it (App.tsx: useStatusFeed into the context). */
function Fed({ c, changed }: { c: AppCtx; changed: (ch: Change) => void }) {
  const feed = useStatusFeed(changed);
  return (
    <Ctx.Provider value={{ ...c, ...feed }}>
      <StatusBar />
    </Ctx.Provider>
  );
}

function renderBar() {
  const c = ctx();
  const changed = vi.fn<(ch: Change) => void>();
  render(
    <QueryClientProvider client={newQueryClient()}>
      <Fed c={c} changed={changed} />
    </QueryClientProvider>,
  );
  return { ctx: c, changed };
}

beforeEach(() => vi.clearAllMocks());

describe("StatusBar", () => {
  it("shows the memory, the LLM and the job queue, and offers to retry failures", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockResolvedValue(status());
    renderBar();
    expect(await screen.findByText("12 notes")).toBeTruthy();
    expect(screen.getByTestId("llm-status").textContent).toBe("LLM connected · built-in SmolLM2-135M");
    expect(screen.getByTestId("jobs").textContent).toContain("3 queued · 1 running · 2 failed · enriching…");
    expect(screen.getByText("retry failed")).toBeTruthy();
  });

  it("shows a failed retry instead of swallowing it, and no debug timing", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockResolvedValue(status());
    (api.retryFailed as ReturnType<typeof vi.fn>).mockRejectedValue(new Error("the memory is busy"));
    const { ctx } = renderBar();
    (await screen.findByText("retry failed")).click();
    await waitFor(() => expect(ctx.toast).toHaveBeenCalledWith("Retry failed: the memory is busy"));
    expect(screen.getByTestId("status-bar").textContent).not.toContain("opened in");
  });

  it("says when the status cannot be read", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockRejectedValue(new Error("no connection to the app"));
    renderBar();
    expect(await screen.findByText("status unavailable: no connection to the app")).toBeTruthy();
  });

  it("does not say enriching while no job waits or runs", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockResolvedValue(
      status({ jobs_queued: 0, jobs_running: 0, jobs_failed: 0, enriching: true }),
    );
    renderBar();
    expect(await screen.findByText("12 notes")).toBeTruthy();
    expect(screen.getByTestId("jobs").textContent).toBe("jobs: 0 queued · 0 running · 0 failed");
  });

  it("refreshes the views once the memory has opened", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockResolvedValue(status({ memory: "opening", memory_message: "reading notes: 10 of 100", opening_done: 10, opening_total: 100 }));
    const { changed } = renderBar();
    expect(await screen.findByText(/opening memory… 10 of 100 notes read/)).toBeTruthy();
    expect(changed).not.toHaveBeenCalled();
    await waitFor(() => expect(push).not.toBeNull());
    act(() => push?.(status({ llm_ok: false, llm_message: "connection refused" })));
    await waitFor(() => expect(changed).toHaveBeenCalledTimes(1));
    expect(changed).toHaveBeenCalledWith({ kind: "memoryOpened" });
    expect(screen.getByTestId("llm-status").textContent).toBe(
      "LLM error: connection refused · built-in SmolLM2-135M",
    );
  });

  it("says how many agents use the memory through the app, and shows notes they add", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockResolvedValue(status({ clients: 2 }));
    const { changed } = renderBar();
    expect((await screen.findByTestId("clients")).textContent).toBe("2 agents connected");
    await waitFor(() => expect(push).not.toBeNull());
    const before = changed.mock.calls.length;
    // an agent added a note: the views are told to reload
    act(() => push?.(status({ clients: 1, notes: 13 })));
    await waitFor(() => expect(changed.mock.calls.length).toBe(before + 1));
    expect(changed).toHaveBeenLastCalledWith({ kind: "notesCounted" });
    expect(screen.getByTestId("clients").textContent).toBe("1 agent connected");
    act(() => push?.(status({ clients: 0, notes: 13 })));
    await waitFor(() => expect(screen.queryByTestId("clients")).toBeNull());
    expect(changed.mock.calls.length).toBe(before + 1);
  });

  it("says how far the idle consolidation pass is, and reads Review again when it filed something", async () => {
    (api.appStatus as ReturnType<typeof vi.fn>).mockResolvedValue(
      status({ consolidating: true, consolidate_done: 200, consolidate_total: 1000 }),
    );
    const { changed } = renderBar();
    expect((await screen.findByTestId("consolidating")).textContent).toBe("comparing notes for replaced facts: 200 of 1,000");
    await waitFor(() => expect(push).not.toBeNull());
    const before = changed.mock.calls.length;
    act(() => push?.(status({ consolidating: false, consolidate_done: 1000, consolidate_total: 1000, consolidate_proposed: 2 })));
    await waitFor(() => expect(changed).toHaveBeenLastCalledWith({ kind: "consolidated" }));
    expect(changed.mock.calls.length).toBe(before + 1);
    expect(screen.queryByTestId("consolidating")).toBeNull();
  });
});
