import { useState } from "react";
import { api, errorText, type ImportProgressDto, type ImportResultDto } from "../../api";
import { useApp } from "../../app-context";

const FORMATS: { value: string; label: string; hint: string }[] = [
  { value: "markdown", label: "Markdown folder / Obsidian vault", hint: "/home/me/Notes" },
  { value: "chat", label: "Chat transcript (JSON)", hint: "/home/me/chat.json" },
  { value: "jsonl", label: "JSON Lines", hint: "/home/me/notes.jsonl" },
];

/** Brings notes in from a folder or file on this computer, with progress; importing the
 *  same source again adds nothing. Problems are listed per file; the rest is imported. */
export default function ImportPanel() {
  const { toast, bump } = useApp();
  const [path, setPath] = useState("");
  const [format, setFormat] = useState("markdown");
  const [progress, setProgress] = useState<ImportProgressDto | null>(null);
  const [result, setResult] = useState<ImportResultDto | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const hint = FORMATS.find((f) => f.value === format)?.hint ?? "";

  const run = () => {
    setBusy(true);
    setError(null);
    setResult(null);
    setProgress(null);
    api
      .importPath(path, format, setProgress)
      .then((r) => {
        setResult(r);
        bump();
        toast(`Imported ${r.created} new note(s)`);
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => setBusy(false));
  };

  return (
    <form
      className="card"
      style={{ maxWidth: 720, marginTop: 16 }}
      data-testid="import-panel"
      onSubmit={(e) => {
        e.preventDefault();
        if (path.trim() !== "") run();
      }}
    >
      <h3 style={{ marginTop: 0, fontSize: 14 }}>Import</h3>
      <label>
        Format{" "}
        <select value={format} onChange={(e) => setFormat(e.target.value)} data-testid="import-format">
          {FORMATS.map((f) => (
            <option key={f.value} value={f.value}>
              {f.label}
            </option>
          ))}
        </select>
      </label>
      <label style={{ display: "block", marginTop: 8 }}>
        Path{" "}
        <input
          value={path}
          placeholder={hint}
          onChange={(e) => setPath(e.target.value)}
          style={{ width: "100%" }}
          data-testid="import-path"
        />
      </label>
      <button type="submit" className="primary" disabled={busy || path.trim() === ""} data-testid="import-run">
        {busy ? "Importing…" : "Import"}
      </button>
      {busy && progress && (
        <p className="small" data-testid="import-progress">
          {progress.phase === "links" ? "Linking" : "Saving notes"}: {progress.done} / {progress.total}
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
            {result.created} new note(s), {result.existing} already there, {result.links_created} new link(s)
            {result.attachments_skipped > 0 ? `, ${result.attachments_skipped} attachment(s) skipped` : ""}.
          </p>
          {result.problems.length > 0 && (
            <>
              <p className="warning">Not imported:</p>
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
