//! Export to a vault, backup and restore from the app. The UI picks the folder or file with
//! the native Open / Save dialogs (tauri-plugin-dialog) and hands the path to these
//! commands; each streams its progress over a channel, as `import_path` does.
//!
//! A restore replaces the memory without ever putting it at risk, as the engine restores by
//! replacement (`kasten_engine::replace`, also `kasten restore --replace`): the backup is
//! read to the end first (a damaged or cut-off file is refused before anything changes),
//! then restored into a new folder beside the memory and checked; only when that has
//! succeeded is the memory closed, moved aside (kept, never deleted) and the restored
//! folder put in its place.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kasten_embed::Embedder;
use kasten_engine::{BackupFile, Endpoint, StagedRestore, TableProgress};
use kasten_engine::{Engine, Progress};
use serde::Serialize;
use specta::Type;
use tauri::{AppHandle, State};

use crate::dto::clamp_u32;
use crate::error::{AppError, AppResult};
use crate::state::{AppState, Slot};

/// What an export, backup or restore is doing.
#[derive(Debug, Clone, Copy, Serialize, Type, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TransferPhase {
    /// Writing the notes as files (export).
    Notes,
    /// Writing or reading the rows of one table (backup, restore); the progress names it.
    Rows,
    /// Building the search index (restore, after the rows).
    Indexing,
    /// Computing the embeddings a backup did not carry (restore, after the rows).
    ReEmbedding,
}

/// Progress of an export, backup or restore, sent over its channel.
#[derive(Debug, Clone, Serialize, Type, PartialEq, Eq)]
pub struct TransferProgressDto {
    pub phase: TransferPhase,
    /// The table whose rows are written or read (phase `rows`).
    pub table: Option<String>,
    pub done: u32,
    pub total: u32,
}

impl TransferProgressDto {
    fn of(phase: TransferPhase, done: u64, total: u64) -> Self {
        TransferProgressDto {
            phase,
            table: None,
            done: clamp_u32(done),
            total: clamp_u32(total),
        }
    }

    fn rows(p: &TableProgress) -> Self {
        TransferProgressDto {
            table: Some(p.table.clone()),
            ..Self::of(TransferPhase::Rows, p.done, p.total)
        }
    }
}

/// Rows of one table written or restored.
#[derive(Debug, Clone, Serialize, Type, PartialEq, Eq)]
pub struct TableCountDto {
    pub table: String,
    pub rows: u32,
}

fn table_counts(m: &std::collections::BTreeMap<String, u64>) -> Vec<TableCountDto> {
    m.iter()
        .map(|(t, n)| TableCountDto {
            table: t.clone(),
            rows: clamp_u32(*n),
        })
        .collect()
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ExportResultDto {
    /// The folder the notes are in: the one picked, or a new folder inside it when the
    /// picked one already held files.
    pub dir: String,
    pub files: u32,
}

/// What a backup wrote.
#[derive(Debug, Clone, Serialize, Type)]
pub struct BackupResultDto {
    pub file: String,
    pub tables: Vec<TableCountDto>,
}

/// What a restore did.
#[derive(Debug, Clone, Serialize, Type)]
pub struct RestoreResultDto {
    pub file: String,
    pub tables: Vec<TableCountDto>,
    /// Where the memory as it was before the restore is kept.
    pub previous: String,
}

/// The folder an export writes into: the picked one when it is empty or new, else a new
/// folder `Kasten export DATE TIME` inside it (nothing in the picked folder is touched).
pub fn export_target(picked: &Path, now: chrono::DateTime<chrono::Local>) -> AppResult<PathBuf> {
    if picked.as_os_str().is_empty() {
        return Err(AppError::Invalid("choose a folder to export into".into()));
    }
    if !picked.exists() {
        return Ok(picked.to_owned());
    }
    if !picked.is_dir() {
        return Err(AppError::Invalid(format!(
            "{} is a file, not a folder; choose a folder to export into",
            picked.display()
        )));
    }
    let mut entries = std::fs::read_dir(picked)
        .map_err(|e| AppError::Invalid(format!("cannot read {}: {e}", picked.display())))?;
    if entries.next().is_none() {
        return Ok(picked.to_owned());
    }
    let base = format!("Kasten export {}", now.format("%Y-%m-%d %H-%M-%S"));
    let mut dir = picked.join(&base);
    let mut n = 2;
    while dir.exists() {
        dir = picked.join(format!("{base} ({n})"));
        n += 1;
    }
    Ok(dir)
}

/// Writes every note as an Obsidian Markdown file into `dir` (see [`export_target`]).
pub async fn export_to(
    engine: &Engine,
    picked: &Path,
    progress: &(dyn Fn(TransferProgressDto) + Send + Sync),
) -> AppResult<ExportResultDto> {
    let dir = export_target(picked, chrono::Local::now())?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| AppError::Invalid(format!("cannot create {}: {e}", dir.display())))?;
    let boxes = engine.export_boxes().await?;
    let mut files = 0u64;
    engine
        .export_vault_each(
            &boxes,
            &mut |f| {
                let p = dir.join(&f.name);
                std::fs::write(&p, &f.text).map_err(|e| {
                    kasten_engine::EngineError::File(format!("cannot write {}: {e}", p.display()))
                })?;
                files += 1;
                Ok(())
            },
            &|done, total| progress(TransferProgressDto::of(TransferPhase::Notes, done, total)),
        )
        .await?;
    Ok(ExportResultDto {
        dir: dir.display().to_string(),
        files: clamp_u32(files),
    })
}

/// Writes every note into a folder picked with the Open dialog, as an Obsidian vault
/// (Markdown files with front matter; Kasten imports it back as it was). A folder that
/// already holds files gets a new folder `Kasten export DATE TIME` inside it.
#[tauri::command]
#[specta::specta]
pub async fn export_vault(
    state: State<'_, AppState>,
    dir: String,
    on_progress: tauri::ipc::Channel<TransferProgressDto>,
) -> AppResult<ExportResultDto> {
    let engine = state.engine().await?;
    export_to(&engine, Path::new(dir.trim()), &|p| {
        let _ = on_progress.send(p);
    })
    .await
}

/// Writes a full backup (notes with embeddings, links, revisions, history, settings) to a
/// file picked with the Save dialog, a page of rows at a time through a temporary file: a
/// failure leaves no half file.
#[tauri::command]
#[specta::specta]
pub async fn backup_memory(
    state: State<'_, AppState>,
    file: String,
    on_progress: tauri::ipc::Channel<TransferProgressDto>,
) -> AppResult<BackupResultDto> {
    let file = PathBuf::from(file.trim());
    if file.as_os_str().is_empty() || file.is_dir() {
        return Err(AppError::Invalid(
            "choose a file name to save the backup as".into(),
        ));
    }
    let engine = state.engine().await?;
    let report = |p: &TableProgress| {
        let _ = on_progress.send(TransferProgressDto::rows(p));
    };
    let counts = engine.backup_to_file(&file, &report).await?;
    Ok(BackupResultDto {
        file: file.display().to_string(),
        tables: table_counts(&counts),
    })
}

/// Replaces the memory in `dir` (open in `state`) with the backup `path`, as the engine
/// restores by replacement ([`StagedRestore`]): the backup is read to the end and restored
/// into `DIR.restoring`, and any failure up to there leaves the memory open and unchanged.
/// Then the memory is closed, moved to `DIR.before-restore-TIME` and the restored folder
/// takes its place; `reopen` opens the memory in `dir` again (the restored one, or the old
/// one when a move failed).
pub async fn restore_replacing<F, Fut>(
    state: &AppState,
    dir: &Path,
    path: &Path,
    progress: &(dyn Fn(TransferProgressDto) + Send + Sync),
    reopen: F,
) -> AppResult<RestoreResultDto>
where
    F: Fn(PathBuf, Arc<dyn Embedder>) -> Fut,
    Fut: Future<Output = Result<Engine, String>>,
{
    let Ok(_one) = state.restoring.try_lock() else {
        return Err(AppError::Conflict("a restore is already running".into()));
    };
    let unchanged = "nothing was changed: your memory is as it was";
    if path.as_os_str().is_empty() {
        return Err(AppError::Invalid("choose a backup file to restore".into()));
    }
    let refused = |e: kasten_engine::EngineError| {
        AppError::Invalid(format!(
            "{} cannot be restored: {}; {unchanged}",
            path.display(),
            AppError::from(e)
        ))
    };
    // 1. the whole file, checked before anything is touched
    let owned = path.to_owned();
    let file = tokio::task::spawn_blocking(move || BackupFile::scan(&owned))
        .await
        .map_err(|e| AppError::internal("cannot read the backup", e))?
        .map_err(refused)?;
    let embedder = state.engine().await?.shared_embedder();
    // 2. restored into a new folder beside the memory, which stays open meanwhile
    let rows = |p: &TableProgress| progress(TransferProgressDto::rows(p));
    let loading = |p: Progress| {
        progress(match p {
            Progress::Loading { done, total } => {
                TransferProgressDto::of(TransferPhase::Indexing, done, total)
            }
            Progress::Reembedding { done, total } => {
                TransferProgressDto::of(TransferPhase::ReEmbedding, done, total)
            }
        })
    };
    let staged = Box::pin(StagedRestore::stage(
        dir,
        &file,
        Arc::clone(&embedder),
        None,
        &rows,
        &loading,
    ))
    .await
    .map_err(refused)?;
    // 3. the swap: the memory is closed and kept aside, the restored one takes its place
    crate::worker::stop_sharing(state).await;
    let old = std::mem::replace(
        &mut *state.slot.write().await,
        Slot::Opening { done: 0, total: 0 },
    );
    if let Slot::Ready(engine) = old {
        Engine::close_shared(engine).await;
    }
    let swapped = staged.swap();
    let opened = Box::pin(reopen(dir.to_owned(), embedder)).await;
    let result = match (&swapped, &opened) {
        (Ok(done), Ok(_)) => Ok(RestoreResultDto {
            file: path.display().to_string(),
            tables: table_counts(&done.summary.tables),
            previous: done.previous.display().to_string(),
        }),
        (Err(m), _) => Err(AppError::Invalid(format!(
            "{m}; {}",
            if opened.is_ok() {
                unchanged
            } else {
                "the memory could not be opened again"
            }
        ))),
        (Ok(done), Err(m)) => Err(AppError::Unavailable(format!(
            "the backup was restored but cannot be opened: {m}; the memory as it was is kept in {}",
            done.previous.display()
        ))),
    };
    match opened {
        Ok(engine) => state.set_opened(Slot::Ready(Arc::new(engine))).await,
        Err(m) => state.set_opened(Slot::Failed(m)).await,
    }
    result
}

/// Replaces the memory with a backup file picked with the Open dialog. The file is read
/// to the end before anything changes (a damaged or cut-off backup is refused and the
/// memory stays as it is); the memory as it was is kept in a folder beside it
/// (`db.before-restore-TIME`), not deleted.
#[tauri::command]
#[specta::specta]
pub async fn restore_memory(
    app: AppHandle,
    state: State<'_, AppState>,
    file: String,
    on_progress: tauri::ipc::Channel<TransferProgressDto>,
) -> AppResult<RestoreResultDto> {
    let Endpoint::SurrealKv(dir) =
        Endpoint::default_from_env().map_err(|e| AppError::Unavailable(e.to_string()))?
    else {
        return Err(AppError::Invalid(
            "this memory is on a server: restore it with `kasten restore`".into(),
        ));
    };
    let reopen = |dir: PathBuf, embedder: Arc<dyn Embedder>| async move {
        let ep = Endpoint::SurrealKv(dir);
        let mut engine = Engine::open(&ep, embedder, &|_| {})
            .await
            .map_err(|e| format!("cannot open the memory at {ep}: {e}"))?;
        crate::worker::configure_llm(&mut engine).await;
        Ok::<_, String>(engine)
    };
    let result = restore_replacing(
        &state,
        &dir,
        Path::new(file.trim()),
        &|p| {
            let _ = on_progress.send(p);
        },
        reopen,
    )
    .await;
    // the memory is open whatever happened (the restored one, or the one as it was); it is
    // served again if the swap stopped serving it (a refused backup never stopped it)
    if let Ok(engine) = state.engine().await {
        if state.owner.lock().await.is_none() {
            crate::worker::start_sharing(&app, &engine).await;
        }
        crate::worker::boxes_if_none(&engine).await;
    }
    crate::worker::emit_status(&app).await;
    state.kick.notify_one();
    result
}

#[cfg(test)]
#[path = "transfer_tests.rs"]
mod tests;
