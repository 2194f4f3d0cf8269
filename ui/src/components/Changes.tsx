import type { ChangeDto } from "../api";

const VERB: Record<string, string> = {
  add_tag: "added tag",
  remove_tag: "removed tag",
  add_keyword: "added keyword",
  remove_keyword: "removed keyword",
  set_context: "new context",
};

/** Each change an LLM revision made, with the reason the model gave for it. */
export default function Changes({ changes }: { changes: ChangeDto[] }) {
  if (changes.length === 0) return null;
  return (
    <ul className="changes small" data-testid="changes">
      {changes.map((c, i) => (
        <li key={`${c.op}-${i}`} data-testid="change" data-op={c.op}>
          <span className="muted">{VERB[c.op] ?? c.op}</span> <strong>{c.value}</strong>
          {" — "}
          <span data-testid="change-reason">{c.reason || "no reason given"}</span>
        </li>
      ))}
    </ul>
  );
}
