import type { ChangeDto } from "../api";
import { useT } from "../i18n";

/** Each change an LLM revision made, with the reason the model gave for it. */
export default function Changes({ changes }: { changes: ChangeDto[] }) {
  const { t, w } = useT();
  if (changes.length === 0) return null;
  return (
    <ul className="changes small" data-testid="changes">
      {changes.map((c, i) => (
        <li key={`${c.op}-${i}`} data-testid="change" data-op={c.op}>
          <span className="muted">{w("change", c.op)}</span> <strong translate="no">{c.value}</strong>
          {" — "}
          <span data-testid="change-reason" translate={c.reason ? "no" : undefined}>
            {c.reason || t("change.noReason")}
          </span>
        </li>
      ))}
    </ul>
  );
}
