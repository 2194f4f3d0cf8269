// The one place the UI talks to the shell: every command of the generated bindings, its
// result unwrapped into the value or a thrown ApiError (kind + a sentence for the user).
// Derived from `commands` as a whole: a command added to the shell is here without an edit.
import { Channel } from "@tauri-apps/api/core";
import { commands, events } from "./bindings";
import type { AppError, JobEvent, StatusEvent } from "./bindings";

export type * from "./bindings";

export class ApiError extends Error {
  kind: AppError["kind"];
  constructor(e: AppError) {
    super(e.message);
    this.kind = e.kind;
  }
}

type R<T> = { status: "ok"; data: T } | { status: "error"; error: AppError };

/** A message for any error a call can throw. */
export function errorText(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

/** A channel that hands each message to `onMessage` (progress, streamed tokens). */
export function channel<T>(onMessage: (m: T) => void): Channel<T> {
  const ch = new Channel<T>();
  ch.onmessage = onMessage;
  return ch;
}

type Commands = typeof commands;
/** A progress channel may be passed as the function that receives its messages. */
type Arg<A> = A extends Channel<infer M> ? Channel<M> | ((m: M) => void) : A;
type Args<A extends unknown[]> = { [I in keyof A]: Arg<A[I]> };
type Ok<Res> = Res extends { status: "ok"; data: infer T } ? T : never;
type Unwrapped<F> = F extends (...args: infer A) => Promise<infer Res> ? (...args: Args<A>) => Promise<Ok<Res>> : never;

/** Every shell command, named as in the bindings, resolving with its value or throwing ApiError. */
export type Api = { [K in keyof Commands]: Unwrapped<Commands[K]> };

function unwrapAll(c: Commands): Api {
  const out: Record<string, unknown> = {};
  for (const [name, call] of Object.entries(c)) {
    const f = call as (...a: unknown[]) => Promise<R<unknown>>;
    out[name] = async (...args: unknown[]) => {
      const r = await f(...args.map((a) => (typeof a === "function" ? channel(a as (m: unknown) => void) : a)));
      if (r.status === "ok") return r.data;
      throw new ApiError(r.error);
    };
  }
  return out as Api;
}

export const api: Api = unwrapAll(commands);

/**
 * `p`, or a rejection as soon as `signal` aborts (the query cache aborts a fetch whose
 * answer nobody waits for any more: a superseded search, a closed view). Tauri's invoke
 * takes no signal, so the shell still finishes the call; its answer is dropped.
 */
export function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export function onJob(cb: (e: JobEvent) => void): Promise<() => void> {
  return events.jobEvent.listen((e) => cb(e.payload));
}

export function onStatus(cb: (e: StatusEvent) => void): Promise<() => void> {
  return events.statusEvent.listen((e) => cb(e.payload));
}

/**
 * Ends a subscription (`onJob`, `onStatus`) when the returned function is called, also
 * when the listener is only registered after that (an effect cleaned up before it arrived).
 */
export function subscribe(listening: Promise<() => void>, onError?: (e: unknown) => void): () => void {
  let off: (() => void) | undefined;
  let gone = false;
  listening
    .then((f) => {
      if (gone) f();
      else off = f;
    })
    .catch((e) => {
      if (!gone) onError?.(e);
    });
  return () => {
    gone = true;
    off?.();
  };
}
