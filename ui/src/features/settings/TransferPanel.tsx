import { useState } from "react";
import { api, errorText, type TableCountDto, type TransferProgressDto } from "../../api";
import { useApp } from "../../app-context";
import { useChanged } from "../../queries";
import { pickOpen, pickSave } from "../../dialogs";
import { useT } from "../../i18n";

const BACKUP_FILTER = (name: string) => [{ name, extensions: ["json"] }];

function rowsText(tables: TableCountDto[]): string {
  return tables
    .filter((x) => x.rows > 0)
    .map((x) => `${x.rows} ${x.table}`)
    .join(", ");
}

/** Export to an Obsidian vault, backup to a file and restore from one. Folders and files
 *  are picked with the native Open / Save dialogs; a restore asks first, in words, since
 *  it replaces the memory (the memory as it was is kept in a folder beside it). */
export default function TransferPanel() {
  const { toast } = useApp();
  const changed = useChanged();
  const { t } = useT();
  const [busy, setBusy] = useState(false);
  const [progress, setProgress] = useState<TransferProgressDto | null>(null);
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** A backup picked for restoring, waiting for the user's yes. */
  const [restoring, setRestoring] = useState<string | null>(null);

  /** What is running, for its progress line. */
  const [kind, setKind] = useState<"export" | "backup" | "restore">("export");

  const runWith = (what: "export" | "backup" | "restore", work: () => Promise<string>) => {
    setKind(what);
    setBusy(true);
    setError(null);
    setResult(null);
    setProgress(null);
    work()
      .then((text) => {
        setResult(text);
        toast(text);
      })
      .catch((e) => setError(errorText(e)))
      .finally(() => {
        setBusy(false);
        setProgress(null);
      });
  };

  /** Runs a dialog; null when it was cancelled or could not open (then says why). */
  const pick = async (dialog: () => Promise<string | null>): Promise<string | null> => {
    try {
      return await dialog();
    } catch (e) {
      setError(errorText(e));
      return null;
    }
  };

  const exportVault = async () => {
    const dir = await pick(() => pickOpen({ title: t("transfer.pickExport"), directory: true }));
    if (dir === null) return;
    runWith("export", async () => {
      const r = await api.exportVault(dir, setProgress);
      return t("transfer.exported", { count: r.files, dir: r.dir });
    });
  };

  const backup = async () => {
    const day = new Date().toISOString().slice(0, 10);
    const file = await pick(() =>
      pickSave({
        title: t("transfer.pickBackup"),
        defaultPath: `kasten-backup-${day}.json`,
        filters: BACKUP_FILTER(t("transfer.backupFiles")),
      }),
    );
    if (file === null) return;
    runWith("backup", async () => {
      const r = await api.backupMemory(file, setProgress);
      return t("transfer.backedUp", { file: r.file, rows: rowsText(r.tables) });
    });
  };

  const chooseBackup = async () => {
    const file = await pick(() =>
      pickOpen({
        title: t("transfer.pickRestore"),
        directory: false,
        filters: BACKUP_FILTER(t("transfer.backupFiles")),
      }),
    );
    if (file === null) return;
    setError(null);
    setResult(null);
    setRestoring(file);
  };

  const restore = (file: string) => {
    setRestoring(null);
    runWith("restore", async () => {
      const r = await api.restoreMemory(file, setProgress);
      changed({ kind: "restored" });
      return t("transfer.restored", { file: r.file, rows: rowsText(r.tables), previous: r.previous });
    });
  };

  const progressText = (p: TransferProgressDto) => {
    switch (p.phase) {
      case "notes":
        return t("transfer.exporting");
      case "indexing":
      case "re_embedding":
        return t("transfer.indexing");
      case "rows":
        return t(kind === "restore" ? "transfer.restoring" : "transfer.backingUp", { table: p.table ?? "" });
    }
  };

  return (
    <section className="card" style={{ maxWidth: 720, marginTop: 16 }} data-testid="transfer-panel">
      <h3 style={{ marginTop: 0, fontSize: 14 }}>{t("transfer.title")}</h3>
      <p className="small">{t("transfer.intro")}</p>
      <div style={{ display: "flex", gap: 8, flexWrap: "wrap" }}>
        <button
          type="button"
          disabled={busy}
          onClick={() => void exportVault()}
          data-testid="export-vault"
        >
          {t("transfer.export")}
        </button>
        <button
          type="button"
          disabled={busy}
          onClick={() => void backup()}
          data-testid="backup-run"
        >
          {t("transfer.backup")}
        </button>
        <button
          type="button"
          disabled={busy}
          onClick={() => void chooseBackup()}
          data-testid="restore-run"
        >
          {t("transfer.restore")}
        </button>
      </div>
      {restoring !== null && (
        <div className="card warning" role="alertdialog" aria-label={t("transfer.confirmTitle")} data-testid="restore-confirm">
          <p>
            <strong>{t("transfer.confirmTitle")}</strong>
          </p>
          <p className="small">{t("transfer.confirmText", { file: restoring })}</p>
          <button type="button" className="primary" onClick={() => restore(restoring)} data-testid="restore-confirm-yes">
            {t("transfer.confirmYes")}
          </button>{" "}
          <button type="button" onClick={() => setRestoring(null)} data-testid="restore-confirm-no">
            {t("common.cancel")}
          </button>
        </div>
      )}
      {busy && progress && (
        <p className="small" data-testid="transfer-progress">
          {progressText(progress)}: {progress.done} / {progress.total}
        </p>
      )}
      {error && (
        <p className="error" data-testid="transfer-error">
          {error}
        </p>
      )}
      {result && (
        <p className="small" data-testid="transfer-result">
          {result}
        </p>
      )}
    </section>
  );
}
