import { useState } from "react";
import { api, errorText, type ImportProgressDto, type ImportResultDto } from "../../api";
import { useApp } from "../../app-context";
import { useChanged } from "../../queries";
import { pickOpen } from "../../dialogs";
import { useT, type Key } from "../../i18n";

const FORMATS: { value: string; label: Key; hint: Key }[] = [
  { value: "markdown", label: "import.markdown", hint: "import.hintMarkdown" },
  { value: "chat", label: "import.chat", hint: "import.hintChat" },
  { value: "jsonl", label: "import.jsonl", hint: "import.hintJsonl" },
];

/** Brings notes in from a folder or file on this computer, with progress; importing the
 *  same source again adds nothing. Problems are listed per file; the rest is imported.
 *  The folder or file is picked with the native Open dialog (a vault is a folder, a chat
 *  transcript or JSON Lines a file); a typed path runs the same import. */
export default function ImportPanel() {
  const { toast } = useApp();
  const changed = useChanged();
  const [path, setPath] = useState("");
  const [format, setFormat] = useState("markdown");
  const [progress, setProgress] = useState<ImportProgressDto | null>(null);
  const [result, setResult] = useState<ImportResultDto | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const { t } = useT();
  const hint = t(FORMATS.find((f) => f.value === format)?.hint ?? "import.hintMarkdown");

  const run = (path: string) => {
    setBusy(true);
    setError(null);
    setResult(null);
    setProgress(null);
    api
      .importPath(path, format, setProgress)
      .then((r) => {
        setResult(r);
        changed({ kind: "imported" });
        toast(t("import.done", { count: r.created }));
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setBusy(false));
  };

  const choose = async () => {
    const folder = format === "markdown";
    let picked: string | null;
    try {
      picked = await pickOpen({
        title: t("import.title"),
        directory: folder,
        filters: folder ? undefined : [{ name: t(format === "chat" ? "import.chat" : "import.jsonl"), extensions: format === "chat" ? ["json"] : ["jsonl", "json", "txt"] }],
      });
    } catch (e) {
      setError(errorText(e));
      return;
    }
    if (picked === null) return; // the dialog was cancelled
    setPath(picked);
    run(picked);
  };

  return (
    <form
      className="card"
      style={{ maxWidth: 720, marginTop: 16 }}
      data-testid="import-panel"
      onSubmit={(e) => {
        e.preventDefault();
        if (path.trim() !== "") run(path);
      }}
    >
      <h3 style={{ marginTop: 0, fontSize: 14 }}>{t("import.title")}</h3>
      <label>
        {t("import.format")}{" "}
        <select value={format} onChange={(e) => setFormat(e.target.value)} data-testid="import-format">
          {FORMATS.map((f) => (
            <option key={f.value} value={f.value}>
              {t(f.label)}
            </option>
          ))}
        </select>
      </label>
      <button
        type="button"
        className="primary"
        style={{ marginLeft: 8 }}
        disabled={busy}
        onClick={() => void choose()}
        data-testid="import-choose"
      >
        {format === "markdown" ? t("import.chooseFolder") : t("import.chooseFile")}
      </button>
      <label style={{ display: "block", marginTop: 8 }}>
        {t("import.orType")}{" "}
        <input
          value={path}
          placeholder={hint}
          onChange={(e) => setPath(e.target.value)}
          style={{ width: "100%" }}
          data-testid="import-path"
        />
      </label>
      <button type="submit" disabled={busy || path.trim() === ""} data-testid="import-run">
        {busy ? t("import.running") : t("import.run")}
      </button>
      {busy && progress && (
        <p className="small" data-testid="import-progress">
          {progress.phase === "links" ? t("import.linking") : t("import.saving")}: {progress.done} / {progress.total}
        </p>
      )}
      {error && (
        <p className="error" data-testid="import-error">
          {error}
        </p>
      )}
      {result && (
        <div data-testid="import-result">
          <p>
            {t("import.result", { created: result.created, existing: result.existing, links: result.links_created })}
            {result.attachments_skipped > 0 ? t("import.skipped", { count: result.attachments_skipped }) : ""}.
          </p>
          {result.problems.length > 0 && (
            <>
              <p className="warning">{t("import.notImported")}</p>
              <ul>
                {result.problems.map((p) => (
                  <li key={p}>{p}</li>
                ))}
              </ul>
            </>
          )}
          {result.warnings.map((w) => (
            <p key={w} className="small warning">
              {w}
            </p>
          ))}
        </div>
      )}
    </form>
  );
}
