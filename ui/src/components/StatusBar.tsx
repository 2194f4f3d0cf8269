import { useEffect, useRef, useState } from "react";
import { api, errorText, onStatus, type StatusEvent } from "../api";
import { useApp } from "../app-context";
import { useT } from "../i18n";

/** The memory, the LLM connection and the job queue, live. */
export default function StatusBar() {
  const { go, bump, toast } = useApp();
  const { t } = useT();
  const [s, setS] = useState<StatusEvent | null>(null);
  const [pollErr, setPollErr] = useState<string | null>(null);
  // Views asked for data while the memory was opening: refresh them once it is open.
  const wasReady = useRef(false);
  useEffect(() => {
    const ready = s?.memory === "ready";
    if (ready && !wasReady.current) bump();
    wasReady.current = ready;
  }, [s?.memory, bump]);
  // Notes added or removed by another process (an agent over `kasten mcp`, a `kasten`
  // command going through the app): the views show them without a reload.
  const lastNotes = useRef<number | null>(null);
  useEffect(() => {
    if (s?.memory !== "ready") return;
    if (lastNotes.current !== null && lastNotes.current !== s.notes) bump();
    lastNotes.current = s.notes;
  }, [s?.memory, s?.notes, bump]);

  useEffect(() => {
    let off: (() => void) | undefined;
    let gone = false;
    const poll = () =>
      api
        .status()
        .then((x) => {
          if (gone) return;
          setS(x);
          setPollErr(null);
        })
        .catch((e) => !gone && setPollErr(errorText(e)));
    poll();
    onStatus((x) => setS(x))
      .then((f) => {
        if (gone) f();
        else off = f;
      })
      .catch((e) => !gone && setPollErr(errorText(e)));
    // The status is pushed on every change; a slow poll covers opening progress.
    const t = window.setInterval(poll, 3000);
    return () => {
      gone = true;
      off?.();
      window.clearInterval(t);
    };
  }, []);

  if (!s)
    return (
      <footer className="statusbar" data-testid="status-bar">
        {pollErr ? <span className="error">{t("status.unavailable", { error: pollErr })}</span> : t("status.starting")}
      </footer>
    );

  const llmClass = !s.llm_configured ? "warn" : s.llm_ok === false ? "bad" : s.llm_ok ? "ok" : "";
  const llmText = !s.llm_configured
    ? t("status.noLlm")
    : s.llm_ok === false
      ? t("status.llmError", { message: s.llm_message })
      : s.llm_ok
        ? t("status.llmConnected")
        : t("status.llmConfigured");
  const llmName = s.llm_configured && s.llm_label ? ` · ${s.llm_label}` : "";
  return (
    <footer className="statusbar" data-testid="status-bar" data-memory={s.memory}>
      <span title={s.memory_message}>
        <span className={`dot ${s.memory === "ready" ? "ok" : s.memory === "failed" ? "bad" : "warn"}`} />
        {s.memory === "ready"
          ? t("status.notes", { count: s.notes })
          : s.memory === "failed"
            ? t("status.memoryFailed", { message: s.memory_message })
            : t("status.opening", { message: s.memory_message })}
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
              .then(bump)
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
