import { useEffect, useState } from "react";
import { api, errorText, type LifecycleDto } from "../../api";
import { useApp } from "../../app-context";

/** A tier as people write it: `long_term` → "long-term". */
export const tierLabel = (t: string) => t.replace(/_/g, "-");

/** A small bar: how strong a note is now, "fading" below the archive threshold. */
export function Strength({ strength, threshold, testid = "note-strength" }: { strength: number; threshold: number; testid?: string }) {
  const fading = strength < threshold;
  const pct = Math.round(Math.max(0, Math.min(1, strength)) * 100);
  return (
    <span
      className={`strength${fading ? " fading" : ""}`}
      data-testid={testid}
      data-strength={strength.toFixed(3)}
      data-fading={fading ? "true" : "false"}
      title={`strength ${strength.toFixed(2)} (archive threshold ${threshold.toFixed(2)})`}
    >
      <span className="strength-bar" aria-hidden="true">
        <span style={{ width: `${pct}%` }} />
      </span>
      {fading ? <span className="strength-label">fading</span> : <span className="strength-label muted">{pct}%</span>}
    </span>
  );
}

/** A note's lifecycle in its detail: strength, tier, and archive / restore / keep. */
export default function NoteLifecycle({ id }: { id: string }) {
  const { revision, bump, toast } = useApp();
  const [l, setL] = useState<LifecycleDto | null>(null);
  const [project, setProject] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    api
      .noteLifecycle(id)
      .then((x) => live && setL(x))
      .catch(() => live && setL(null));
    return () => {
      live = false;
    };
  }, [id, revision]);

  if (!l) return null;
  const act = async (f: () => Promise<unknown>, done: string) => {
    try {
      await f();
      toast(done);
      bump();
    } catch (e) {
      toast(errorText(e));
    }
  };
  return (
    <div className="row small" data-testid="note-lifecycle">
      <Strength strength={l.strength ?? 0} threshold={l.threshold ?? 0} />
      <span className="chip" data-testid="note-tier">
        {tierLabel(l.tier)}
        {l.project ? `: ${l.project}` : ""}
      </span>
      {!l.archived && (
        <select
          aria-label="Tier"
          data-testid="note-tier-select"
          value={project !== null ? "project" : l.tier}
          onChange={(e) => {
            const t = e.target.value;
            if (t === "project") setProject(l.project ?? "");
            else {
              setProject(null);
              void act(() => api.setNoteTier(id, t, null), `Tier: ${tierLabel(t)}`);
            }
          }}
        >
          <option value="long_term">long-term</option>
          <option value="short_term">short-term</option>
          <option value="project">project…</option>
        </select>
      )}
      {project !== null && (
        <>
          <input
            data-testid="note-project"
            aria-label="Project"
            placeholder="project name"
            value={project}
            onChange={(e) => setProject(e.target.value)}
          />
          <button
            className="small"
            data-testid="note-project-save"
            disabled={!project.trim()}
            onClick={() => void act(() => api.setNoteTier(id, "project", project.trim()), `Project: ${project.trim()}`).then(() => setProject(null))}
          >
            Set
          </button>
        </>
      )}
      {l.archived ? (
        <>
          <span className="badge rolled_back">archived</span>
          <button className="small" data-testid="note-restore" onClick={() => void act(() => api.restoreNote(id), "Note restored")}>
            Restore
          </button>
        </>
      ) : (
        <>
          {l.fading && (
            <button className="small" data-testid="note-keep" onClick={() => void act(() => api.keepNote(id), "Kept: the note is strong again")}>
              Keep
            </button>
          )}
          <button className="small" data-testid="note-archive" onClick={() => void act(() => api.archiveNote(id), "Note archived (kept, out of retrieval)")}>
            Archive
          </button>
        </>
      )}
    </div>
  );
}
