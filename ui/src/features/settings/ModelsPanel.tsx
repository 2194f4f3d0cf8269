import { useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { abortable, api, errorText, type BuiltinModelDto, type ModelProgressDto, type ModelStage } from "../../api";
import { useApp } from "../../app-context";
import { keys, useChanged } from "../../queries";
import { useT, type Key } from "../../i18n";

/** Bytes in words, as `kasten llm models` writes them. */
export function bytesText(n: number | null): string {
  const b = n ?? 0;
  const mib = 1024 * 1024;
  if (b >= 1024 * mib) return `${(b / (1024 * mib)).toFixed(2)} GiB`;
  return `${(b / mib).toFixed(0)} MiB`;
}

const STAGE = {
  checking: "models.stage.checking",
  downloading: "models.stage.downloading",
  unpacking: "models.stage.unpacking",
  verifying: "models.stage.verifying",
} as const satisfies Record<ModelStage, Key>;

/** Settings → Models: the built-in models (as `kasten llm models`), each downloaded with
 * progress and cancel, used, or removed (asked again when the LLM in use changed). */
export default function ModelsPanel() {
  const { toast } = useApp();
  const changed = useChanged();
  const client = useQueryClient();
  const { t, w } = useT();
  const q = useQuery({ queryKey: keys.models(), queryFn: ({ signal }) => abortable(api.builtinModels(), signal) });
  const models = q.data ?? null;
  const setModels = (f: (prev: BuiltinModelDto[] | undefined) => BuiltinModelDto[] | undefined) => client.setQueryData(keys.models(), f);
  const [progress, setProgress] = useState<Record<string, ModelProgressDto>>({});
  const [actionError, setError] = useState<string | null>(null);
  const error = actionError ?? (q.error ? errorText(q.error) : null);
  const [busy, setBusy] = useState(false);
  const reload = () => void q.refetch();

  const download = (m: BuiltinModelDto) => {
    setError(null);
    setModels((prev) => prev?.map((x) => (x.name === m.name ? { ...x, downloading: true } : x)) ?? prev);
    api
      .installModel(m.name, (p) => setProgress((prev) => ({ ...prev, [m.name]: p })))
      .then((list) => {
        setModels(() => list);
        toast(t("models.installedToast", { title: m.title }));
      })
      .catch((e) => {
        setError(errorText(e));
        reload();
      })
      .finally(() =>
        setProgress((prev) => {
          const next = { ...prev };
          delete next[m.name];
          return next;
        }),
      );
  };
  const cancel = (m: BuiltinModelDto) => {
    api.cancelModelInstall(m.name).catch((e) => setError(errorText(e)));
  };
  const use = (m: BuiltinModelDto) => {
    setBusy(true);
    setError(null);
    api
      .useLlm({ kind: "installed", name: m.name })
      .then(() => {
        toast(t("llm.nowUsing", { label: m.title }));
        changed({ kind: "llmChosen" });
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setBusy(false));
  };
  const remove = (m: BuiltinModelDto) => {
    setBusy(true);
    setError(null);
    api
      .removeModel(m.name)
      .then((list) => {
        setModels(() => list);
        toast(t("models.removed", { title: m.title }));
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setBusy(false));
  };

  return (
    <section className="card" style={{ maxWidth: 720 }} data-testid="models-panel">
      <h3 style={{ marginTop: 0, fontSize: 14 }}>{t("models.title")}</h3>
      <p className="small muted">{t("models.intro")}</p>
      {models === null && !error && <p className="muted">{t("common.loading")}</p>}
      <ul className="plain" style={{ paddingLeft: 0, listStyle: "none" }}>
        {(models ?? []).map((m) => {
          const p = progress[m.name];
          return (
            <li key={m.name} data-testid={`model-${m.name}`} style={{ marginBottom: 10 }}>
              <div className="row" style={{ gap: 8, alignItems: "center", flexWrap: "wrap" }}>
                <strong translate="no">{m.title}</strong>
                <span className="small muted" translate="no">
                  {m.languages.join(" + ")} · {t("models.license", { license: m.license })} · {t("models.size", { size: bytesText(m.size_bytes) })}
                </span>
                {m.default && <span className="small">{t("models.default")}</span>}
                {m.in_use && (
                  <span className="small" data-testid={`model-in-use-${m.name}`}>
                    {t("models.inUse")}
                  </span>
                )}
              </div>
              <div className="small muted">{w("models.about", m.name) === m.name ? m.about : w("models.about", m.name)}</div>
              {m.notes_per_hour !== null && (
                <div className="small" data-testid={`model-measured-${m.name}`}>
                  {t("models.measured", {
                    rate: Math.round(m.notes_per_hour),
                    verdict: t(m.quality_passed ? "models.passed" : "models.failed"),
                  })}
                </div>
              )}
              {m.downloading ? (
                <div className="row" style={{ gap: 8, alignItems: "center" }}>
                  <progress
                    data-testid={`model-progress-${m.name}`}
                    max={p?.total_bytes ?? m.download_bytes ?? 1}
                    value={p?.stage === "downloading" ? (p.done_bytes ?? 0) : undefined}
                  />
                  <span className="small">
                    {p ? t(STAGE[p.stage], { part: p.part, parts: p.parts }) : t("models.stage.checking")}
                    {p?.stage === "downloading" ? ` · ${bytesText(p.done_bytes)} / ${bytesText(p.total_bytes)}` : ""}
                  </span>
                  <button type="button" data-testid={`model-cancel-${m.name}`} onClick={() => cancel(m)}>
                    {t("common.cancel")}
                  </button>
                </div>
              ) : m.installed ? (
                <div className="row" style={{ gap: 8 }}>
                  <span className="small muted" translate="no" title={m.path ?? ""}>
                    {t("models.installed")}
                  </span>
                  <button
                    type="button"
                    disabled={busy || m.in_use}
                    data-testid={`model-use-${m.name}`}
                    onClick={() => use(m)}
                  >
                    {t("common.use")}
                  </button>
                  <button
                    type="button"
                    disabled={busy || m.in_use}
                    data-testid={`model-remove-${m.name}`}
                    onClick={() => remove(m)}
                  >
                    {t("models.remove")}
                  </button>
                </div>
              ) : (
                <button type="button" disabled={busy} data-testid={`model-download-${m.name}`} onClick={() => download(m)}>
                  {t("models.download", { size: bytesText(m.download_bytes) })}
                </button>
              )}
            </li>
          );
        })}
      </ul>
      {error && (
        <p className="error" role="alert" data-testid="models-error">
          {error}
        </p>
      )}
    </section>
  );
}
