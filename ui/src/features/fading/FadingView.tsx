import { useQuery } from "@tanstack/react-query";
import { abortable, api, errorText, type ReviewStatus } from "../../api";
import { useApp } from "../../app-context";
import { keys, useChanged } from "../../queries";
import { Strength, tierLabel } from "./StrengthBar";
import { useT } from "../../i18n";
import { preview } from "../../preview";

/** Notes fading below the archive threshold (archive or keep each), and the archived
 * notes (restore each). Nothing is archived without the user. */
export default function FadingView() {
  const { toast, openNote } = useApp();
  const changed = useChanged();
  const { t, w, num } = useT();
  const fadingQ = useQuery({ queryKey: keys.fading(100), queryFn: ({ signal }) => abortable(api.fadingNotes(100), signal) });
  const archivedQ = useQuery({ queryKey: keys.archived(0, 100), queryFn: ({ signal }) => abortable(api.archivedNotes(0, 100), signal) });
  const projectsQ = useQuery({ queryKey: keys.projects(), queryFn: ({ signal }) => abortable(api.listProjects(), signal) });
  const fading = fadingQ.data;
  const archived = archivedQ.data;
  const projects = projectsQ.data ?? [];
  const failed = fadingQ.error ?? archivedQ.error ?? projectsQ.error;

  const act = async (f: () => Promise<unknown>, done: string) => {
    try {
      await f();
      toast(done);
      changed({ kind: "lifecycle" });
    } catch (e) {
      toast(errorText(e));
    }
  };

  if (failed) return <div className="view card error">{errorText(failed)}</div>;
  if (!fading || !archived || !projectsQ.data) return <div className="view muted">{t("common.loading")}</div>;
  return (
    <div className="view" data-testid="fading-view">
      <h2>{t("fading.title")}</h2>
      <p className="small muted">
        {t("fading.intro", { threshold: num(fading.threshold ?? 0, 2) })}
      </p>
      {fading.notes.length === 0 ? (
        <div className="small muted" data-testid="fading-empty">
          {t("fading.none")}
        </div>
      ) : (
        <ul className="list">
          {fading.notes.map((n, i) => (
            <li key={n.id} className="small" data-testid="fading-item" data-id={n.id}>
              <div className="row">
                <Strength strength={n.strength ?? 0} threshold={fading.threshold ?? 0} testid={`fading-strength-${i}`} />
                <span className="chip">{tierLabel(n.tier, w)}</span>
                <span className="muted">
                  {(n.idle_days ?? 0) < 1 ? t("fading.idleLess") : t("fading.idle", { days: Math.round(n.idle_days ?? 0) })}
                </span>
                <span className="grow" />
                <button className="small" data-testid={`fading-keep-${i}`} onClick={() => void act(() => api.keepNote(n.id), t("fading.kept"))}>
                  {t("common.keep")}
                </button>
                <button className="small" data-testid={`fading-archive-${i}`} onClick={() => void act(() => api.archiveNote(n.id), t("fading.archived"))}>
                  {t("common.archive")}
                </button>
              </div>
              <span className="content" translate="no" onClick={() => openNote(n.id)} style={{ cursor: "pointer" }}>
                {n.preview}
              </span>
            </li>
          ))}
        </ul>
      )}
      {projects.length > 0 && (
        <>
          <h3 style={{ fontSize: 14 }}>{t("fading.projects")}</h3>
          <p className="small muted">{t("fading.projectsIntro")}</p>
          <ul className="list">
            {projects.map((p, i) => (
              <li key={p.name} className="small row" data-testid="project-item" data-open={p.active ? "true" : "false"}>
                <span className="grow" translate="no">
                  {p.name}
                </span>
                <span className={`badge ${(p.active ? "accepted" : "rolled_back") satisfies ReviewStatus}`}>{p.active ? t("fading.open") : t("fading.closed")}</span>
                <button
                  className="small"
                  data-testid={`project-toggle-${i}`}
                  onClick={() => void act(() => api.setProjectOpen(p.name, !p.active), p.active ? t("fading.closedProject", { name: p.name }) : t("fading.openedProject", { name: p.name }))}
                >
                  {p.active ? t("fading.closeIt") : t("fading.openIt")}
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
      <h3 style={{ fontSize: 14 }}>{t("fading.archivedTitle", { count: archived.total })}</h3>
      {archived.notes.length === 0 ? (
        <div className="small muted">{t("fading.noArchived")}</div>
      ) : (
        <ul className="list">
          {archived.notes.map((n, i) => (
            <li key={n.id} className="small" data-testid="archived-item" data-id={n.id}>
              <div className="row">
                <span className="content grow" translate="no" onClick={() => openNote(n.id)} style={{ cursor: "pointer" }}>
                  {preview(n.content, 120)}
                </span>
                <button className="small" data-testid={`archived-restore-${i}`} onClick={() => void act(() => api.restoreNote(n.id), t("fading.restored"))}>
                  {t("common.restore")}
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
