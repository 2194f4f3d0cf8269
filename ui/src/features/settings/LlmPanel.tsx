import { useCallback, useEffect, useState } from "react";
import { api, errorText, type DiscoveredDto, type LlmOverviewDto, type LlmPick } from "../../api";
import { useApp } from "../../app-context";

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
  if (servers.length === 0) return null;
  return (
    <ul className="plain" data-testid="llm-discovered" style={{ paddingLeft: 0, listStyle: "none" }}>
      {servers.map((d, i) => {
        const model = models[i] ?? d.models[0] ?? "";
        return (
          <li key={`${d.base_url}`} className="row" style={{ gap: 8, alignItems: "center", marginBottom: 4 }}>
            <span>
              <strong>{d.server}</strong> <span className="muted small">{d.base_url}</span>
            </span>
            {d.models.length > 1 ? (
              <select
                aria-label={`model of ${d.server}`}
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
              <span className="small">{d.models[0] ?? "no models listed"}</span>
            )}
            <button
              type="button"
              disabled={busy || model === ""}
              data-testid={`llm-use-${i}`}
              onClick={() =>
                onPick({ kind: "server", provider: d.provider, base_url: d.base_url, model }, `${d.server} ${model}`)
              }
            >
              Use
            </button>
          </li>
        );
      })}
    </ul>
  );
}

/** Loads the LLM in use and the servers on this machine; `pick` stores a choice. */
export function useLlmOverview(onChanged?: () => void) {
  const { toast, bump } = useApp();
  const [o, setO] = useState<LlmOverviewDto | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const reload = useCallback(() => {
    setBusy(true);
    api
      .llmOverview()
      .then((v) => {
        setO(v);
        setError(null);
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setBusy(false));
  }, []);
  useEffect(reload, [reload]);
  const pick = (p: LlmPick, label: string) => {
    setBusy(true);
    setError(null);
    api
      .useLlm(p)
      .then((inUse) => {
        setO((prev) => (prev ? { ...prev, in_use: inUse } : prev));
        toast(`Now using ${label}`);
        bump();
        onChanged?.();
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setBusy(false));
  };
  return { o, error, busy, reload, pick };
}

/** Settings → LLM in use: what annotates the notes, the servers found, the built-in
 * model and any GGUF file on disk — each one click away. */
export default function LlmPanel({ onChanged }: { onChanged?: () => void }) {
  const { o, error, busy, reload, pick } = useLlmOverview(onChanged);
  const [path, setPath] = useState("");
  return (
    <section className="card" style={{ maxWidth: 720 }} data-testid="llm-panel">
      <h3 style={{ marginTop: 0, fontSize: 14 }}>LLM in use</h3>
      {o ? (
        <>
          <p data-testid="llm-in-use">
            <strong>{o.in_use.label}</strong>
            {o.in_use.ready ? <span className="muted small"> · does {o.in_use.steps}</span> : null}
          </p>
          {o.in_use.problem && <p className="warning small">{o.in_use.problem}</p>}
          {o.in_use.source === "built_in" && (
            <p className="small muted">
              The built-in model is tiny (135M parameters) and English-first: it runs on this computer without set-up
              and writes simple notes. A bigger model writes much better ones: start Ollama, LM Studio or llama-server
              and pick it below, or use a GGUF file you have.
            </p>
          )}
          {o.env_chooses && (
            <p className="small warning">KASTEN_LLM_* environment variables choose the LLM: they win over a pick made here.</p>
          )}
          <h4 style={{ fontSize: 13 }}>Found on this computer</h4>
          {o.discovered.length === 0 ? (
            <p className="small muted" data-testid="llm-discovered-none">
              No LLM server answered (Ollama :11434, LM Studio :1234, llama-server :8080, vLLM :8000).
            </p>
          ) : (
            <FoundServers servers={o.discovered} busy={busy} onPick={pick} />
          )}
          <div className="row" style={{ gap: 8 }}>
            <button type="button" onClick={reload} disabled={busy} data-testid="llm-rescan">
              Look again
            </button>
            <button
              type="button"
              onClick={() => pick({ kind: "builtin" }, "the built-in model")}
              disabled={busy || o.in_use.source === "built_in"}
              data-testid="llm-use-builtin"
            >
              Use the built-in model
            </button>
          </div>
        </>
      ) : (
        !error && <p className="muted">Looking for LLM servers…</p>
      )}
      <form
        className="field"
        style={{ marginTop: 12 }}
        onSubmit={(e) => {
          e.preventDefault();
          if (path.trim() !== "") pick({ kind: "gguf", path: path.trim() }, path.trim().split(/[\\/]/).pop() ?? path);
        }}
      >
        <label htmlFor="gguf-path">Use a GGUF file…</label>
        <div className="row" style={{ gap: 8 }}>
          <input
            id="gguf-path"
            data-testid="llm-gguf-path"
            style={{ flex: 1 }}
            placeholder="/path/to/model.gguf (an instruct model: Qwen, Llama, Phi, …)"
            value={path}
            onChange={(e) => setPath(e.target.value)}
          />
          <button type="submit" disabled={busy || path.trim() === ""} data-testid="llm-gguf-use">
            Use
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
