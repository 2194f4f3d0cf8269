//! Restore by replacement: a backup takes the place of a memory that already holds notes,
//! and nothing is lost on the way. Every shell does it this way (the app's Restore,
//! `kasten restore --replace`):
//!
//! 1. The backup was read to the end ([`BackupFile::scan`]): a damaged or cut-off file is
//!    refused before anything changes.
//! 2. [`StagedRestore::stage`] restores it into `DIR.restoring`, a new memory beside the
//!    memory in `DIR`, which stays open (and served) meanwhile; then closes it, opens it
//!    again and checks that it holds every row the restore wrote. Any failure up to here
//!    removes that folder and leaves the memory as it was.
//! 3. The caller closes the memory; [`StagedRestore::swap`] moves it to
//!    `DIR.before-restore-TIME` (kept, never deleted) and the restored folder into its
//!    place. A failing rename puts the memory back. The caller then opens `DIR` again.
//!
//! One restore per memory at a time: the process that stages one has the memory open (a
//! second process cannot), and the app allows one at a time. An interrupted restore leaves
//! `DIR.restoring` behind, which the next one removes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kasten_embed::Embedder;
use kasten_store::{Endpoint, StorageLimits};

use crate::read::{BackupFile, RestoreSummary, TableProgressFn};
use crate::{Engine, EngineError, EngineOptions, ProgressFn};

/// Tables whose rows a memory changes by itself when it is opened and closed (the index
/// snapshot's seal is a setting): not compared when a restored memory is checked.
const CHANGED_BY_OPENING: &[&str] = &["setting"];

/// `DIR.suffix` beside the memory's folder `DIR`.
pub fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "db".into());
    dir.with_file_name(format!("{name}.{suffix}"))
}

/// A backup restored and checked beside the memory, waiting to take its place.
#[derive(Debug)]
pub struct StagedRestore {
    dir: PathBuf,
    fresh: PathBuf,
    summary: RestoreSummary,
}

/// A memory replaced by a backup.
#[derive(Debug, Clone)]
pub struct Replaced {
    /// Rows restored per table, and the backup's schema version.
    pub summary: RestoreSummary,
    /// Where the memory as it was before the restore is kept.
    pub previous: PathBuf,
}

impl StagedRestore {
    /// Restores `file` into a new memory beside the memory in `dir` (which is not touched),
    /// with `embedder` (the memory's) and `storage` limits, reporting the rows restored and
    /// the indexing; then closes it, reopens it and checks its rows. On an error the new
    /// folder is removed and nothing else changed.
    pub async fn stage(
        dir: &Path,
        file: &BackupFile,
        embedder: Arc<dyn Embedder>,
        storage: Option<StorageLimits>,
        rows: TableProgressFn<'_>,
        loading: ProgressFn<'_>,
    ) -> Result<StagedRestore, EngineError> {
        let fresh = beside(dir, "restoring");
        if fresh.exists() {
            // what an earlier restore cut off left behind: never the memory itself
            std::fs::remove_dir_all(&fresh).map_err(|e| {
                EngineError::File(format!("cannot remove {}: {e}", fresh.display()))
            })?;
        }
        // boxed: the opens and the restore are large futures (debug builds ran out of stack)
        let staged = Box::pin(restore_checked(
            &fresh, file, embedder, storage, rows, loading,
        ))
        .await;
        match staged {
            Ok(summary) => Ok(StagedRestore {
                dir: dir.to_owned(),
                fresh,
                summary,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&fresh);
                Err(e)
            }
        }
    }

    /// Rows restored per table.
    pub fn summary(&self) -> &RestoreSummary {
        &self.summary
    }

    /// Where the restored memory waits.
    pub fn path(&self) -> &Path {
        &self.fresh
    }

    /// Puts the restored memory in the place of the memory, which the caller has closed
    /// (its process no longer has it open): the memory moves to `DIR.before-restore-TIME`
    /// (numbered when that exists) and is kept. When the restored memory cannot be moved
    /// into place the memory is moved back and the error says so (and names where it is,
    /// should even that fail); the restored folder is removed then.
    pub fn swap(self) -> Result<Replaced, EngineError> {
        let Self {
            dir,
            fresh,
            summary,
        } = self;
        let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S").to_string();
        let mut previous = beside(&dir, &format!("before-restore-{stamp}"));
        let mut n = 2;
        while previous.exists() {
            previous = beside(&dir, &format!("before-restore-{stamp}-{n}"));
            n += 1;
        }
        if let Err(e) = std::fs::rename(&dir, &previous) {
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(EngineError::File(format!(
                "cannot move {} aside: {e}",
                dir.display()
            )));
        }
        if let Err(e) = std::fs::rename(&fresh, &dir) {
            let back = std::fs::rename(&previous, &dir);
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(EngineError::File(format!(
                "cannot move the restored memory into place: {e}{}",
                match back {
                    Ok(()) => "; the memory was moved back".to_owned(),
                    Err(b) => format!(" (and the memory stays in {}: {b})", previous.display()),
                }
            )));
        }
        // the renames made durable (best effort: not every file system syncs a folder)
        if let Some(parent) = dir.parent() {
            let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
        }
        Ok(Replaced { summary, previous })
    }

    /// Gives the restore up: the restored folder is removed, the memory stays as it is.
    pub fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.fresh);
    }
}

/// Restores `file` into a new memory in `fresh`, closes it, and checks that it opens again
/// holding every row the restore wrote.
async fn restore_checked(
    fresh: &Path,
    file: &BackupFile,
    embedder: Arc<dyn Embedder>,
    storage: Option<StorageLimits>,
    rows: TableProgressFn<'_>,
    loading: ProgressFn<'_>,
) -> Result<RestoreSummary, EngineError> {
    let ep = Endpoint::SurrealKv(fresh.to_owned());
    let options = || EngineOptions {
        storage,
        ..EngineOptions::default()
    };
    let restored = Engine::open_with(&ep, Arc::clone(&embedder), options(), &|_| {}).await?;
    let summary = restored.restore_backup_file(file, rows, loading).await;
    restored.close().await;
    let summary = summary?;
    // what a later open sees: the rows, read back through a new open of the folder
    let reopened = Engine::open_with(&ep, embedder, options(), loading).await?;
    let held = reopened.non_empty_tables().await;
    reopened.close().await;
    let held: std::collections::HashMap<String, u64> = held?.into_iter().collect();
    for (table, rows) in &summary.tables {
        if CHANGED_BY_OPENING.contains(&table.as_str()) {
            continue;
        }
        let there = held.get(table).copied().unwrap_or(0);
        if there != *rows {
            return Err(EngineError::Internal(format!(
                "the restored memory holds {there} rows of {table} where the backup has {rows}"
            )));
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]

    use kasten_core::NewNote;

    use super::*;
    use crate::tests::HashEmbedder;

    async fn open_at(dir: &Path) -> Engine {
        Engine::open(
            &Endpoint::SurrealKv(dir.to_owned()),
            HashEmbedder::arc("h", 64, 1),
            &|_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
    }

    async fn add(engine: &Engine, texts: &[&str]) {
        let notes = texts
            .iter()
            .map(|t| NewNote::new(t).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        engine
            .add_batch(notes)
            .await
            .unwrap_or_else(|e| panic!("add: {e}"));
    }

    async fn contents(engine: &Engine) -> Vec<String> {
        let mut v: Vec<String> = engine
            .list(100, 0)
            .await
            .unwrap_or_else(|e| panic!("list: {e}"))
            .into_iter()
            .map(|n| n.content)
            .collect();
        v.sort();
        v
    }

    fn folder(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        v.sort();
        v
    }

    /// Back up, change, restore by replacement: the memory holds what the backup held, the
    /// memory as it was is kept whole, and the memory stayed usable until the swap.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backup_replaces_a_changed_memory_and_the_one_before_is_kept() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("home/db");
        let file = tmp.path().join("memory.kbak");
        let engine = open_at(&dir).await;
        add(
            &engine,
            &[
                "the heron nests by the mill pond",
                "invoices are due monday",
            ],
        )
        .await;
        let before_backup = engine.list(100, 0).await.unwrap_or_else(|e| panic!("{e}"));
        engine
            .backup_to_file(&file, &|_| {})
            .await
            .unwrap_or_else(|e| panic!("backup: {e}"));
        // changed after the backup
        add(&engine, &["written after the backup"]).await;

        let backup = BackupFile::scan(&file).unwrap_or_else(|e| panic!("scan: {e}"));
        let tables = std::sync::Mutex::new(Vec::<String>::new());
        let staged = StagedRestore::stage(
            &dir,
            &backup,
            engine.shared_embedder(),
            None,
            &|p| {
                tables
                    .lock()
                    .map(|mut t| t.push(p.table.clone()))
                    .unwrap_or(())
            },
            &|_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("stage: {e}"));
        assert!(
            tables
                .lock()
                .map(|t| t.contains(&"note".to_owned()))
                .unwrap_or(false),
            "no progress for the notes"
        );
        assert_eq!(staged.summary().tables.get("note"), Some(&2));
        assert_eq!(staged.path(), beside(&dir, "restoring"));
        // the memory is open and as it was while the backup waits beside it
        assert_eq!(contents(&engine).await.len(), 3);
        engine.close().await;

        let done = staged.swap().unwrap_or_else(|e| panic!("swap: {e}"));
        assert!(done.previous.starts_with(tmp.path().join("home")));
        assert!(
            !beside(&dir, "restoring").exists(),
            "the work folder is left"
        );
        let restored = open_at(&dir).await;
        assert_eq!(
            contents(&restored).await,
            vec![
                "invoices are due monday",
                "the heron nests by the mill pond"
            ]
        );
        // the same notes, ids and all, and searchable (the indexes were built)
        let mut ids: Vec<String> = restored
            .list(100, 0)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|n| n.id.to_string())
            .collect();
        let mut want: Vec<String> = before_backup.iter().map(|n| n.id.to_string()).collect();
        ids.sort();
        want.sort();
        assert_eq!(ids, want);
        let hits = restored
            .search("heron pond", 1)
            .await
            .unwrap_or_else(|e| panic!("search: {e}"));
        assert_eq!(
            hits.hits.first().map(|h| h.note.content.as_str()),
            Some("the heron nests by the mill pond")
        );
        restored.close().await;
        let kept = open_at(&done.previous).await;
        assert_eq!(contents(&kept).await.len(), 3);
        kept.close().await;
    }

    /// A damaged backup never gets as far as the memory: refused when read, and the memory
    /// (open meanwhile) and its folder are untouched; a restore that fails beside the
    /// memory leaves nothing behind either.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_corrupt_backup_is_refused_and_the_memory_is_untouched() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("home/db");
        let file = tmp.path().join("memory.kbak");
        let engine = open_at(&dir).await;
        add(&engine, &["the memory the user has"]).await;
        engine
            .backup_to_file(&file, &|_| {})
            .await
            .unwrap_or_else(|e| panic!("backup: {e}"));
        let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
        let cut = tmp.path().join("cut.kbak");
        std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap_or_else(|e| panic!("{e}"));
        let garbage = tmp.path().join("garbage.kbak");
        std::fs::write(&garbage, b"{\"kasten_backup\": [1, 2").unwrap_or_else(|e| panic!("{e}"));
        for bad in [&cut, &garbage] {
            let e = BackupFile::scan(bad)
                .err()
                .unwrap_or_else(|| panic!("{} was taken for a backup", bad.display()));
            assert!(!e.to_string().is_empty());
        }
        // a sound file restored into a folder that cannot be written: refused, no trace
        let backup = BackupFile::scan(&file).unwrap_or_else(|e| panic!("scan: {e}"));
        let blocked = tmp.path().join("blocked/db");
        std::fs::create_dir_all(tmp.path().join("blocked")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(beside(&blocked, "restoring"), b"a file, not a folder")
            .unwrap_or_else(|e| panic!("{e}"));
        let r = StagedRestore::stage(
            &blocked,
            &backup,
            engine.shared_embedder(),
            None,
            &|_| {},
            &|_| {},
        )
        .await;
        assert!(r.is_err(), "restored into a file");
        assert_eq!(contents(&engine).await, vec!["the memory the user has"]);
        assert_eq!(folder(&tmp.path().join("home")), vec!["db"]);
        engine.close().await;
    }
}
