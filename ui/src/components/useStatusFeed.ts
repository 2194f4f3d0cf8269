import { useEffect, useRef, useState } from "react";
import { api, errorText, onStatus, subscribe, type StatusEvent } from "../api";
import type { Change } from "../queries";

/**
 * The app's one reading of the status (the memory, the LLM, the job queue): pushed by the
 * shell on every change, polled slowly for opening progress. The status bar and every view
 * read this same value, so they never contradict each other. `changed` is told when the
 * memory has opened or failed to (views asked for data before), when another process added or
 * removed notes (an agent over `kasten mcp`, a `kasten` command going through the app) and
 * when the idle consolidation pass filed supersessions in Review.
 */
export function useStatusFeed(changed: (c: Change) => void): { status: StatusEvent | null; statusError: string | null } {
  const [status, setStatus] = useState<StatusEvent | null>(null);
  const [statusError, setStatusError] = useState<string | null>(null);

  // the memory opened (or failed to): the views that waited ask again
  const lastMemory = useRef<string | null>(null);
  useEffect(() => {
    const m = status?.memory ?? null;
    if (m && m !== "opening" && m !== lastMemory.current) changed({ kind: "memoryOpened" });
    lastMemory.current = m;
  }, [status?.memory, changed]);

  const lastNotes = useRef<number | null>(null);
  useEffect(() => {
    if (status?.memory !== "ready") return;
    if (lastNotes.current !== null && lastNotes.current !== status.notes) changed({ kind: "notesCounted" });
    lastNotes.current = status.notes;
  }, [status?.memory, status?.notes, changed]);

  // the idle consolidation pass filed supersessions: Review reads them
  const lastProposed = useRef<number | null>(null);
  useEffect(() => {
    const n = status?.consolidate_proposed ?? null;
    if (n !== null && lastProposed.current !== null && n !== lastProposed.current) changed({ kind: "consolidated" });
    lastProposed.current = n;
  }, [status?.consolidate_proposed, changed]);

  useEffect(() => {
    let gone = false;
    const poll = () =>
      api
        .appStatus()
        .then((x) => {
          if (gone) return;
          setStatus(x);
          setStatusError(null);
        })
        .catch((e) => !gone && setStatusError(errorText(e)));
    poll();
    const off = subscribe(
      onStatus((x) => setStatus(x)),
      (e) => setStatusError(errorText(e)),
    );
    // The status is pushed on every change; a slow poll covers opening progress.
    const t = window.setInterval(poll, 3000);
    return () => {
      gone = true;
      off();
      window.clearInterval(t);
    };
  }, []);

  return { status, statusError };
}

/**
 * The memory is still opening (or the first status has not arrived yet): views wait for it
 * and say so, instead of reporting the shell's "still opening" answers as errors. A status
 * that cannot be read at all is not waited for (the views then show their own errors).
 */
export function memoryOpening(status: StatusEvent | null, statusError: string | null): boolean {
  return status ? status.memory === "opening" : !statusError;
}
