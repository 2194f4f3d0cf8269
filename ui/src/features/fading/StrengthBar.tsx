import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { abortable, api, errorText, type Tier } from "../../api";
import { TIERS, wordOf } from "../../states";
import { useApp } from "../../app-context";
import { keys, useChanged } from "../../queries";
import { useT, type I18n, type Key } from "../../i18n";

/** The tier picker's words for each tier. */
const TIER_CHOICE = { long_term: "tier.long_term", short_term: "tier.short_term", project: "tier.projectChoice" } as const satisfies Record<Tier, Key>;

/** A tier as people write it: `long_term` → "long-term" (in the UI's language). */
export function tierLabel(tier: Tier, w: I18n["w"]): string {
  const label = w("tier", tier);
  return label === tier ? tier.replace(/_/g, "-") : label;
}

/** A small bar: how strong a note is now, "fading" below the archive threshold. */
export function Strength({ strength, threshold, testid = "note-strength" }: { strength: number; threshold: number; testid?: string }) {
  const { t, num } = useT();
  const fading = strength < threshold;
  const pct = Math.round(Math.max(0, Math.min(1, strength)) * 100);
  return (
    <span
      className={`strength${fading ? " fading" : ""}`}
      data-testid={testid}
      data-strength={strength.toFixed(3)}
      data-fading={fading ? "true" : "false"}
      title={t("strength.title", { strength: num(strength, 2), threshold: num(threshold, 2) })}
    >
      <span className="strength-bar" aria-hidden="true">
        <span style={{ width: `${pct}%` }} />
      </span>
      {fading ? <span className="strength-label">{t("strength.fading")}</span> : <span className="strength-label muted">{pct}%</span>}
    </span>
  );
}

/** A note's lifecycle in its detail: strength, tier, and archive / restore / keep. */
export default function NoteLifecycle({ id }: { id: string }) {
  const { toast } = useApp();
  const changed = useChanged();
  const [project, setProject] = useState<string | null>(null);
  const { t, w } = useT();
  const q = useQuery({ queryKey: keys.lifecycle(id), queryFn: ({ signal }) => abortable(api.noteLifecycle(id), signal) });
  // nothing shown when it cannot be read (the note's detail says what went wrong)
  const l = q.error ? null : q.data;

  if (!l) return null;
  const act = async (f: () => Promise<unknown>, done: string) => {
    try {
      await f();
      toast(done);
      changed({ kind: "lifecycle" });
    } catch (e) {
      toast(errorText(e));
    }
  };
  return (
    <div className="row small" data-testid="note-lifecycle">
      <Strength strength={l.strength ?? 0} threshold={l.threshold ?? 0} />
      <span className="chip" data-testid="note-tier">
        {tierLabel(l.tier, w)}
        {l.project ? `: ${l.project}` : ""}
      </span>
      {!l.archived && (
        <select
          aria-label={t("tier.label")}
          data-testid="note-tier-select"
          value={project !== null ? "project" : l.tier}
          onChange={(e) => {
            const tv = wordOf(TIERS, e.target.value);
            if (tv === null) return;
            if (tv === "project") setProject(l.project ?? "");
            else {
              setProject(null);
              void act(() => api.setNoteTier(id, tv, null), t("tier.set", { tier: tierLabel(tv, w) }));
            }
          }}
        >
          {TIERS.map((tv) => (
            <option key={tv} value={tv}>
              {t(TIER_CHOICE[tv])}
            </option>
          ))}
        </select>
      )}
      {project !== null && (
        <>
          <input
            data-testid="note-project"
            aria-label={t("tier.projectLabel")}
            placeholder={t("tier.projectPlaceholder")}
            value={project}
            onChange={(e) => setProject(e.target.value)}
          />
          <button
            className="small"
            data-testid="note-project-save"
            disabled={!project.trim()}
            onClick={() => void act(() => api.setNoteTier(id, "project", project.trim()), t("tier.projectSet", { name: project.trim() })).then(() => setProject(null))}
          >
            {t("tier.setButton")}
          </button>
        </>
      )}
      {l.archived ? (
        <>
          <span className="badge rolled_back">{t("lifecycle.archivedBadge")}</span>
          <button className="small" data-testid="note-restore" onClick={() => void act(() => api.restoreNote(id), t("lifecycle.restored"))}>
            {t("common.restore")}
          </button>
        </>
      ) : (
        <>
          {l.fading && (
            <button className="small" data-testid="note-keep" onClick={() => void act(() => api.keepNote(id), t("lifecycle.kept"))}>
              {t("common.keep")}
            </button>
          )}
          <button className="small" data-testid="note-archive" onClick={() => void act(() => api.archiveNote(id), t("lifecycle.archived"))}>
            {t("common.archive")}
          </button>
        </>
      )}
    </div>
  );
}
