// The words of the state unions in bindings.ts as values, for lists the UI shows (filters,
// pickers). Each list is checked against its union both ways: a misspelt word or a word
// the union lacks fails tsc, and so does a union word the list leaves out.
import type { ActionWord, ActorWord, Enrich, LinkKindWord, PolicyWord, Provider, ReviewStatus, Tier } from "./bindings";

type Every<T extends string, A extends readonly string[]> = [T] extends [A[number]] ? (A[number] extends T ? A : never) : never;

/** `words` if it holds every word of `T` and nothing else (else a type error). */
function every<T extends string>() {
  return <const A extends readonly T[]>(words: Every<T, A>): A => words;
}

export const ENRICH = every<Enrich>()(["pending", "done", "failed"]);
export const TIERS = every<Tier>()(["long_term", "short_term", "project"]);
export const REVIEW_STATUSES = every<ReviewStatus>()(["proposed", "applied", "accepted", "rejected", "rolled_back"]);
export const POLICIES = every<PolicyWord>()(["auto", "review"]);

/** The protocols a server picked by hand speaks (the built-in model is picked elsewhere). */
export const SERVER_PROVIDERS = ["openai", "ollama"] as const satisfies readonly Provider[];

/** The kind of a link by hand unless the person picks another. */
export const DEFAULT_LINK_KIND = "relates" satisfies LinkKindWord;

/** The makers the review queue names: the LLM, merge on write, every agent. */
export const BY = { llm: "llm", merge: "merge", agent: "agent" } as const satisfies { [K in ActorWord]?: K };
/** What starts the word of an agent that gave its name (`agent:<name>`). */
export const AGENT_PREFIX = `${BY.agent}:`;

/** The history entries the note view acts on: a link by hand (rolled back) and a removed
 *  link (restored). */
export const ACTION = { link: "link", unlink: "unlink" } as const satisfies { [K in ActionWord]?: K };

/** `s` as a word of `words`, or null when it is none of them (e.g. a select's empty choice). */
export function wordOf<T extends string>(words: readonly T[], s: string): T | null {
  return words.find((w) => w === s) ?? null;
}
