// The query cache: every key a view reads by, and which changes make which keys stale. A
// view asks with `useQuery(keys.x(...))`; whatever changed the memory (a user's action, a
// finished job, another process) names the change, and `staleAfter` says what to fetch again.
import { QueryClient, useQueryClient, type QueryKey } from "@tanstack/react-query";
import { useCallback, useEffect } from "react";
import { onJob, subscribe, type JobEvent, type NoteFilterInput, type ReviewStatus } from "./api";

export function newQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        // The shell answers from this machine: a failure is a sentence for the user, shown at
        // once rather than after silent retries. The one transient answer (the memory still
        // opening) is asked again when the memory has opened (see `memoryOpened`).
        retry: false,
        // The backend says what changed (job and status events); focus and network say nothing.
        refetchOnWindowFocus: false,
        refetchOnReconnect: false,
      },
      mutations: { retry: false },
    },
  });
}

/** Every query key, by what the view shows. The first element is the key's family. */
export const keys = {
  /** A list of notes (the Notes view pages it; `limit` is the page size). */
  notes: (filter: NoteFilterInput, limit: number, asOf: string | null = null) => ["notes", filter, limit, asOf] as const,
  note: (id: string) => ["note", id] as const,
  lifecycle: (id: string) => ["lifecycle", id] as const,
  search: (query: string, k: number, filter: NoteFilterInput, asOf: string | null) => ["search", query, k, filter, asOf] as const,
  tags: (limit: number) => ["tags", limit] as const,
  boxes: (limit: number) => ["boxes", limit] as const,
  review: (statuses: ReviewStatus[], by: string | null) => ["review", statuses, by] as const,
  events: (limit: number) => ["events", limit] as const,
  /** The graph as loaded (the whole memory, or a note's neighbourhood). */
  graph: (center: string | null, depth: number) => ["graph", center, depth] as const,
  insights: () => ["insights"] as const,
  status: () => ["status"] as const,
  fading: (limit: number) => ["fading", limit] as const,
  archived: (offset: number, limit: number) => ["archived", offset, limit] as const,
  projects: () => ["projects"] as const,
  settings: () => ["settings"] as const,
  llm: () => ["llm"] as const,
  models: () => ["models"] as const,
  linkKinds: () => ["linkKinds"] as const,
};

export type Family = ReturnType<(typeof keys)[keyof typeof keys]>[0];

/** What the memory holds: notes, their links, history, Boxes and lifecycle. */
const MEMORY: Family[] = [
  "notes",
  "note",
  "lifecycle",
  "search",
  "tags",
  "boxes",
  "review",
  "events",
  "graph",
  "insights",
  "fading",
  "archived",
  "projects",
];

/** What changed, named by what happened. */
export type Change =
  /** A note was written (and linked to the notes its `[[…]]` named). */
  | { kind: "noteAdded" }
  /** A note's text was rewritten (re-indexed; it is enriched again). */
  | { kind: "noteText"; id: string }
  /** A note's keywords, tags or context were edited by hand. */
  | { kind: "noteFields"; id: string }
  | { kind: "noteDeleted"; id: string }
  /** Links between these notes were added, removed or restored by hand. */
  | { kind: "linked"; notes: string[] }
  /** A review decision or rollback (links and edits across notes). */
  | { kind: "reviewed" }
  /** A note kept, archived, restored or given a tier; a project opened or closed. */
  | { kind: "lifecycle" }
  /** Notes arrived in bulk (an import, the sample notebook). */
  | { kind: "imported" }
  /** The memory was replaced by a backup (settings included). */
  | { kind: "restored" }
  /** Failed enrichment jobs were queued again. */
  | { kind: "retried" }
  /** Another LLM was chosen. */
  | { kind: "llmChosen" }
  | { kind: "settingsSaved" }
  /** A finished enrichment job (the shell's job event). */
  | { kind: "job"; event: JobEvent }
  /** The memory finished opening (or failed to): what was asked while it opened is asked again. */
  | { kind: "memoryOpened" }
  /** Another process (an agent over `kasten mcp`, a `kasten` command) added or removed notes. */
  | { kind: "notesCounted" }
  /** The idle consolidation pass filed supersessions in Review. */
  | { kind: "consolidated" };

const fam = (...f: Family[]): QueryKey[] => f.map((x) => [x]);

/**
 * The keys a change makes stale (a key stands for every key it begins). `null`: every key.
 *
 * The graph is not refreshed by jobs: the Graph view merges a finished job's neighbourhood
 * into the drawn graph itself (no reload, no new layout).
 */
export function staleAfter(c: Change): QueryKey[] | null {
  switch (c.kind) {
    case "noteAdded":
      return fam("notes", "note", "search", "graph", "insights");
    case "noteText":
      return [keys.note(c.id), ...fam("notes", "search", "graph")];
    case "noteFields":
      return [keys.note(c.id), ...fam("notes", "search", "tags", "graph", "insights")];
    case "noteDeleted":
      return fam(...MEMORY);
    case "linked":
      return [...c.notes.map(keys.note), ...fam("search", "review", "graph", "insights")];
    case "reviewed":
      return fam("review", "events", "note", "notes", "search", "tags", "graph", "insights");
    case "lifecycle":
      return fam("lifecycle", "fading", "archived", "projects", "notes", "note", "search", "graph");
    case "imported":
      return fam(...MEMORY);
    case "restored":
      return null;
    case "retried":
      return fam("notes", "note", "search");
    case "llmChosen":
    case "settingsSaved":
      return fam("settings", "llm", "models");
    case "job": {
      const e = c.event;
      if (e.outcome !== "done") return [keys.note(e.note), ...fam("notes", "search")];
      // links and neighbour edits change other notes too (the event does not name them)
      const notes = e.links > 0 || e.updates > 0 ? fam("note") : [keys.note(e.note)];
      return [...notes, ...fam("notes", "search", "tags", "boxes", "review", "events", "insights")];
    }
    case "memoryOpened":
      return null;
    case "consolidated":
      return fam("review", "note", "graph", "insights");
    case "notesCounted":
      return fam(...MEMORY);
  }
}

/** `a` begins with `b` (or is `b`). */
const begins = (a: QueryKey, b: QueryKey) => b.length <= a.length && b.every((x, i) => JSON.stringify(x) === JSON.stringify(a[i]));

/**
 * Marks what the changes changed as stale, each key once (one a shorter key covers is left
 * out: it would be fetched twice); the keys on screen are fetched again at once.
 */
export function invalidate(client: QueryClient, ...cs: Change[]): Promise<void> {
  const all = cs.map(staleAfter);
  if (all.some((s) => s === null)) return client.invalidateQueries();
  const listed = all.flatMap((s) => s ?? []);
  const stale = listed.filter((k, i) => !listed.some((o, j) => (j < i ? begins(k, o) : begins(k, o) && !begins(o, k))));
  return Promise.all(stale.map((queryKey) => client.invalidateQueries({ queryKey }))).then(() => {});
}

/** `changed(c)`: what a view calls after it changed the memory. */
export function useChanged(): (c: Change) => void {
  const client = useQueryClient();
  return useCallback((c: Change) => void invalidate(client, c), [client]);
}

/**
 * Jobs finishing within this many ms refresh the views together: a fetch made stale again
 * while it runs is started over, so a steady stream of jobs must not restart it at each one.
 */
export const JOB_BATCH_MS = 200;

/** Every finished job makes stale what it changed (its note; its neighbours when it linked or edited them). */
export function useJobChanges(): void {
  const client = useQueryClient();
  useEffect(() => {
    let timer = 0;
    let batch: Change[] = [];
    const flush = () => {
      timer = 0;
      const cs = batch;
      batch = [];
      void invalidate(client, ...cs);
    };
    const off = subscribe(
      onJob((event) => {
        batch.push({ kind: "job", event });
        // the first job of a batch sets the time; later ones join it
        if (!timer) timer = window.setTimeout(flush, JOB_BATCH_MS);
      }),
    );
    return () => {
      window.clearTimeout(timer);
      off();
    };
  }, [client]);
}
