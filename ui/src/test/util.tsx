import { render } from "@testing-library/react";
import { QueryClientProvider, type QueryClient, type QueryKey } from "@tanstack/react-query";
import type { ReactElement } from "react";
import { vi } from "vitest";
import { Ctx, type AppCtx } from "../app-context";
import type { NoteDto, StatusEvent } from "../api";
import { newQueryClient } from "../queries";

export function ctx(over: Partial<AppCtx> = {}): AppCtx {
  return {
    view: "notes",
    go: vi.fn(),
    openNote: vi.fn(),
    selected: null,
    highlight: [],
    setHighlight: vi.fn(),
    graphFocus: { center: null, depth: 1, boxId: null },
    setGraphFocus: vi.fn(),
    toast: vi.fn(),
    status: status(),
    statusError: null,
    asOf: null,
    setAsOf: vi.fn(),
    ...over,
  };
}

/**
 * Renders `ui` as the app does: in the app context `c` and a query cache of its own.
 * `invalidated()` lists the keys the cache was told are stale (`"all"`: every key), in order.
 */
export function renderWith(ui: ReactElement, c: AppCtx = ctx(), client: QueryClient = newQueryClient()) {
  const spy = vi.spyOn(client, "invalidateQueries");
  const invalidated = (): (QueryKey | "all")[] => spy.mock.calls.map(([f]) => f?.queryKey ?? "all");
  return {
    ...render(
      <QueryClientProvider client={client}>
        <Ctx.Provider value={c}>{ui}</Ctx.Provider>
      </QueryClientProvider>,
    ),
    ctx: c,
    client,
    invalidated,
  };
}

export function note(over: Partial<NoteDto> = {}): NoteDto {
  return {
    id: "01JNOTE0000000000000000001",
    content: "Ada's dog Pixel loves the beach.",
    created_at: "2024-05-01T10:00:00Z",
    updated_at: "2024-05-01T10:00:00Z",
    keywords: ["dog", "beach"],
    tags: ["pets"],
    context: "About Ada's dog.",
    enrich: "done",
    enrich_error: null,
    source: null,
    status: "active",
    ...over,
  };
}

/** The status bar's figures: an open memory with an LLM, unless overridden. */
export function status(over: Partial<StatusEvent> = {}): StatusEvent {
  return {
    memory: "ready",
    memory_message: "",
    notes: 12,
    llm_configured: true,
    llm_label: "built-in SmolLM2-135M",
    llm_ok: true,
    llm_message: "connected",
    jobs_queued: 3,
    jobs_running: 1,
    jobs_failed: 2,
    jobs_done: 9,
    enriching: true,
    opened_ms: 1500,
    clients: 0,
    opening_done: 0,
    opening_total: 0,
    consolidating: false,
    consolidate_done: 0,
    consolidate_total: 0,
    consolidate_proposed: 0,
    ...over,
  };
}
