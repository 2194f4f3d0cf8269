import { api, errorText } from "../api";
import { useApp } from "../app-context";
import { useChanged } from "../queries";
import { useT } from "../i18n";

/** The memory, the LLM connection and the job queue, live (the app's status feed). */
export default function StatusBar() {
  const { go, toast, status: s, statusError: pollErr } = useApp();
  const changed = useChanged();
  const { t } = useT();

  if (!s)
    return (
      <footer className="statusbar" data-testid="status-bar">
        {pollErr ? <span className="error">{t("status.unavailable", { error: pollErr })}</span> : t("status.starting")}
      </footer>
    );

  // the LLM is chosen by the memory's settings: unknown until the memory is open
  const known = s.memory === "ready";
  const llmClass = !known ? "" : !s.llm_configured ? "warn" : s.llm_ok === false ? "bad" : s.llm_ok ? "ok" : "";
  const llmText = !known
    ? t("status.llmUnknown")
    : !s.llm_configured
      ? t("status.noLlm")
      : s.llm_ok === false
        ? t("status.llmError", { message: s.llm_message })
        : s.llm_ok
          ? t("status.llmConnected")
          : t("status.llmConfigured");
  const llmName = known && s.llm_configured && s.llm_label ? ` · ${s.llm_label}` : "";
  return (
    <footer className="statusbar" data-testid="status-bar" data-memory={s.memory}>
      <span title={s.memory === "failed" ? s.memory_message : undefined}>
        <span className={`dot ${s.memory === "ready" ? "ok" : s.memory === "failed" ? "bad" : "warn"}`} />
        {s.memory === "ready"
          ? t("status.notes", { count: s.notes })
          : s.memory === "failed"
            ? t("status.memoryFailed", { message: s.memory_message })
            : t("status.opening", {
                progress: s.opening_total > 0 ? t("status.openingProgress", { done: s.opening_done, count: s.opening_total }) : "",
              })}
      </span>
      <button className="small" style={{ border: "none", background: "none", padding: 0 }} onClick={() => go("settings")} title={s.llm_message}>
        <span className={`dot ${llmClass}`} />
        <span data-testid="llm-status">
          {llmText}
          <span translate="no">{llmName}</span>
        </span>
      </button>
      <span data-testid="jobs">
        {t("status.jobs", { queued: s.jobs_queued, running: s.jobs_running })}{" "}
        <span className={s.jobs_failed ? "error" : ""}>{t("status.failed", { count: s.jobs_failed })}</span>
        {/* the worker's pass outlives its last job by a moment: only say so while jobs wait or run */}
        {s.enriching && s.jobs_queued + s.jobs_running > 0 && t("status.enriching")}
      </span>
      {s.consolidating && (
        <span data-testid="consolidating" title={t("status.consolidatingTitle")}>
          {t("status.consolidating", { done: s.consolidate_done, count: s.consolidate_total })}
        </span>
      )}
      {s.clients > 0 && (
        <span data-testid="clients" title={t("status.clientsTitle")}>
          {t("status.clients", { count: s.clients })}
        </span>
      )}
      {s.jobs_failed > 0 && (
        <button
          className="small"
          onClick={() =>
            api
              .retryFailed()
              .then(() => changed({ kind: "retried" }))
              .catch((e) => toast(t("status.retryError", { error: errorText(e) })))
          }
        >
          {t("status.retryFailed")}
        </button>
      )}
      <span className="grow" />
    </footer>
  );
}
