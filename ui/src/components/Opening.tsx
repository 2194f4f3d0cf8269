import { useApp } from "../app-context";
import { useT, type Key } from "../i18n";

/**
 * What a view shows while the memory opens: a normal state, said as such (not an error),
 * with how far the open got when the shell knows it.
 */
export default function Opening({ text = "opening.view", testid = "memory-opening" }: { text?: Key; testid?: string }) {
  const { status } = useApp();
  const { t } = useT();
  const progress =
    status && status.opening_total > 0 ? t("opening.progress", { done: status.opening_done, count: status.opening_total }) : "";
  return (
    <div className="muted" role="status" data-testid={testid}>
      {t(text, { progress })}
    </div>
  );
}
