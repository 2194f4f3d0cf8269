import { useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { abortable, api, errorText, type DiscoveredDto, type LlmOverviewDto, type LlmPick } from "../../api";
import { useApp } from "../../app-context";
import { keys, useChanged } from "../../queries";
import { useT } from "../../i18n";
import { en } from "../../i18n/en";

/** The discovered servers, each with its models and a one-click "Use". */
export function FoundServers({
  servers,
  busy,
  onPick,
}: {
  servers: DiscoveredDto[];
  busy: boolean;
  onPick: (pick: LlmPick, label: string) => void;
}) {
  const [models, setModels] = useState<Record<number, string>>({});
  const { t } = useT();
  if (servers.length === 0) return null;
  return (
    <ul className="plain" data-testid="llm-discovered" style={{ paddingLeft: 0, listStyle: "none" }}>
      {servers.map((d, i) => {
        const model = models[i] ?? d.models[0] ?? "";
        return (
          <li key={`${d.base_url}`} className="row" style={{ gap: 8, alignItems: "center", marginBottom: 4 }}>
            <span>
              <strong translate="no">{d.server}</strong>{" "}
              <span className="muted small" translate="no">
                {d.base_url}
              </span>
            </span>
            {d.models.length > 1 ? (
              <select
                aria-label={t("llm.modelOf", { server: d.server })}
                data-testid={`llm-discovered-model-${i}`}
                value={model}
                onChange={(e) => setModels({ ...models, [i]: e.target.value })}
              >
                {d.models.map((m) => (
                  <option key={m} value={m}>
                    {m}
                  </option>
                ))}
              </select>
            ) : (
              <span className="small">{d.models[0] ?? t("llm.noModels")}</span>
            )}
            <button
              type="button"
              disabled={busy || model === ""}
              data-testid={`llm-use-${i}`}
              onClick={() =>
                onPick({ kind: "server", provider: d.provider, base_url: d.base_url, model }, `${d.server} ${model}`)
              }
            >
              {t("common.use")}
            </button>
          </li>
        );
      })}
    </ul>
  );
}

/** Loads the LLM in use and the servers on this machine; `pick` stores a choice. */
export function useLlmOverview() {
  const { toast } = useApp();
  const changed = useChanged();
  const client = useQueryClient();
  const { t } = useT();
  const q = useQuery({ queryKey: keys.llm(), queryFn: ({ signal }) => abortable(api.llmOverview(), signal) });
  const [error, setError] = useState<string | null>(null);
  const [picking, setPicking] = useState(false);
  const [rescanning, setRescanning] = useState(false);
  const reload = () => {
    setRescanning(true);
    setError(null);
    void q.refetch().finally(() => setRescanning(false));
  };
  const pick = (p: LlmPick, label: string) => {
    setPicking(true);
    setError(null);
    api
      .useLlm(p)
      .then((inUse) => {
        client.setQueryData<LlmOverviewDto>(keys.llm(), (prev) => (prev ? { ...prev, in_use: inUse } : prev));
        toast(t("llm.nowUsing", { label }));
        changed({ kind: "llmChosen" });
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setPicking(false));
  };
  const o = q.data ?? null;
  return { o, error: error ?? (q.error ? errorText(q.error) : null), busy: picking || rescanning || q.isLoading, reload, pick };
}

/** Settings → LLM in use: what annotates the notes, the servers found, the built-in
 * model and any GGUF file on disk — each one click away. */
export default function LlmPanel() {
  const { o, error, busy, reload, pick } = useLlmOverview();
  const [path, setPath] = useState("");
  const { t } = useT();
  // the engine words its profile's steps in English: the three it has are in the dictionary
  const stepsText = (steps: string) => {
    const key = (["llm.stepsFull", "llm.stepsLinks", "llm.stepsSmall"] as const).find((k) => en[k] === steps);
    return key ? t(key) : steps;
  };
  return (
    <section className="card" style={{ maxWidth: 720 }} data-testid="llm-panel">
      <h3 style={{ marginTop: 0, fontSize: 14 }}>{t("llm.title")}</h3>
      {o ? (
        <>
          <p data-testid="llm-in-use">
            <strong translate="no">{o.in_use.label}</strong>
            {o.in_use.ready ? <span className="muted small">{t("llm.does", { steps: stepsText(o.in_use.steps) })}</span> : null}
          </p>
          {o.in_use.problem && <p className="warning small">{o.in_use.problem}</p>}
          {o.in_use.source === "built_in" && (
            <p className="small muted">
              {t("llm.builtinNote")}
            </p>
          )}
          {o.env_chooses && (
            <p className="small warning">{t("llm.envChooses")}</p>
          )}
          <h4 style={{ fontSize: 13 }}>{t("llm.found")}</h4>
          {o.discovered.length === 0 ? (
            <p className="small muted" data-testid="llm-discovered-none">
              {t("llm.noneFound")}
            </p>
          ) : (
            <FoundServers servers={o.discovered} busy={busy} onPick={pick} />
          )}
          <div className="row" style={{ gap: 8 }}>
            <button type="button" onClick={reload} disabled={busy} data-testid="llm-rescan">
              {t("llm.lookAgain")}
            </button>
            <button
              type="button"
              onClick={() => pick({ kind: "builtin" }, t("llm.theBuiltin"))}
              disabled={busy || o.in_use.source === "built_in"}
              data-testid="llm-use-builtin"
            >
              {t("llm.useBuiltin")}
            </button>
          </div>
        </>
      ) : (
        !error && <p className="muted">{t("llm.looking")}</p>
      )}
      <form
        className="field"
        style={{ marginTop: 12 }}
        onSubmit={(e) => {
          e.preventDefault();
          if (path.trim() !== "") pick({ kind: "gguf", path: path.trim() }, path.trim().split(/[\\/]/).pop() ?? path);
        }}
      >
        <label htmlFor="gguf-path">{t("llm.useGguf")}</label>
        <div className="row" style={{ gap: 8 }}>
          <input
            id="gguf-path"
            data-testid="llm-gguf-path"
            style={{ flex: 1 }}
            placeholder={t("llm.ggufPlaceholder")}
            value={path}
            onChange={(e) => setPath(e.target.value)}
          />
          <button type="submit" disabled={busy || path.trim() === ""} data-testid="llm-gguf-use">
            {t("common.use")}
          </button>
        </div>
      </form>
      {error && (
        <p className="error" role="alert" data-testid="llm-error">
          {error}
        </p>
      )}
    </section>
  );
}
