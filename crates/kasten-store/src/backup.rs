//! Backups of any size in bounded memory.
//!
//! [`Store::write_backup`] writes the same JSON document as [`Store::backup`] (the module
//! docs of `transfer.rs` describe it) to a writer, one page of rows at a time: each table
//! is read in record-id order (`WHERE id > $after ORDER BY id LIMIT n`), so no query
//! holds more than a page. Every page is read in one read transaction (begun before the
//! first, cancelled after the last): the backup is one state of the memory, while the
//! worker, other processes and the user go on writing.
//!
//! A backup file is read in two passes. [`BackupFile::scan`] reads it all once without
//! writing anything: the header, every row (each converted exactly as a restore will
//! convert it), and where each table's rows start. Only a file that passes is restored,
//! so a truncated or damaged file is refused before the memory is touched.
//! [`Store::restore_file`] then reads the tables in restore order (the tables others
//! refer to first, links last) from their offsets, a batch of rows per transaction.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use chrono::Utc;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;
use surrealdb::types::{RecordId, RecordIdKey, Table, Value};

use crate::transfer::{
    NOT_RESTORED, check_header, from_json, is_snapshot_seal, restore_rank, to_json, valid_table,
    without_secrets,
};
use kasten_core::{Note, NoteId};

use crate::notecache::{ReadTx, end_read};
use crate::{
    BACKUP_FORMAT, BACKUP_VERSION, LINK_COLUMNS, LinkRecord, NOTE_COLUMNS, NoteRow, RestoreSummary,
    Store, StoreError,
};

mod file;

pub use file::BackupFile;
use file::TableAt;

/// Rows read per query while writing a backup.
pub const BACKUP_PAGE: usize = 500;
/// Rows per restore transaction, at most.
const RESTORE_BATCH: usize = 500;

/// About the bytes a JSON value takes written out (strings and keys by their length,
/// numbers and the rest by a few bytes): enough to bound a batch, cheap to compute.
fn approx_json_bytes(v: &Json) -> usize {
    match v {
        Json::Null | Json::Bool(_) | Json::Number(_) => 8,
        Json::String(s) => s.len() + 2,
        Json::Array(a) => 2 + a.iter().map(approx_json_bytes).sum::<usize>(),
        Json::Object(o) => {
            2 + o
                .iter()
                .map(|(k, v)| k.len() + 3 + approx_json_bytes(v))
                .sum::<usize>()
        }
    }
}

/// How far a backup or restore is: rows of `table` done out of `total`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProgress {
    pub table: String,
    pub done: u64,
    pub total: u64,
}

/// A progress sink for backups and restores.
pub type TableProgressFn<'a> = &'a (dyn Fn(&TableProgress) + Send + Sync);

fn write_error(e: std::io::Error) -> StoreError {
    StoreError::File(format!("cannot write the backup: {e}"))
}

impl Store {
    /// One page of `table`'s rows with a record id after `after`, in id order (the form
    /// `index_rows` pages the notes with at open; a record range with a limit read the
    /// rest of the table for every page).
    async fn rows_after(
        &self,
        tx: &ReadTx,
        table: &str,
        after: Option<RecordIdKey>,
        limit: usize,
    ) -> Result<Vec<Value>, StoreError> {
        let q = if after.is_some() {
            format!("SELECT * FROM {table} WHERE id > $after ORDER BY id LIMIT $limit")
        } else {
            format!("SELECT * FROM {table} ORDER BY id LIMIT $limit")
        };
        let after = after.map_or(Value::None, |k| {
            Value::RecordId(RecordId::new(Table::new(table), k))
        });
        let mut resp = self
            .db
            .query_in(Some(tx), q)
            .bind(("after", after))
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    /// Writes a full backup to `out`, a page of rows at a time; returns the rows written
    /// per table. The document is the one [`Store::backup`] returns.
    pub async fn write_backup(
        &self,
        out: &mut (dyn Write + Send),
        progress: TableProgressFn<'_>,
    ) -> Result<BTreeMap<String, u64>, StoreError> {
        self.write_backup_paged(out, BACKUP_PAGE, progress).await
    }

    /// The pages are read in one read transaction: the backup is one state of the memory,
    /// however many writes commit while it is written (they are in none of its tables).
    async fn write_backup_paged(
        &self,
        out: &mut (dyn Write + Send),
        page_rows: usize,
        progress: TableProgressFn<'_>,
    ) -> Result<BTreeMap<String, u64>, StoreError> {
        let tx = self.db.begin_read().await.map_err(StoreError::from_db)?;
        let written = self.write_backup_in(&tx, out, page_rows, progress).await;
        end_read(tx).await;
        written
    }

    async fn write_backup_in(
        &self,
        tx: &ReadTx,
        out: &mut (dyn Write + Send),
        page_rows: usize,
        progress: TableProgressFn<'_>,
    ) -> Result<BTreeMap<String, u64>, StoreError> {
        let page_rows = page_rows.max(1);
        let header = format!(
            "{{\"format\":{},\"version\":{},\"schema_version\":{},\"created_at\":{},\"tables\":{{",
            Json::from(BACKUP_FORMAT),
            BACKUP_VERSION,
            self.schema_version_in(Some(tx)).await?,
            Json::from(Utc::now().to_rfc3339()),
        );
        out.write_all(header.as_bytes()).map_err(write_error)?;
        let mut counts = BTreeMap::new();
        for (i, t) in self.table_names(Some(tx)).await?.iter().enumerate() {
            if i > 0 {
                out.write_all(b",").map_err(write_error)?;
            }
            serde_json::to_writer(&mut *out, t).map_err(|e| write_error(e.into()))?;
            out.write_all(b":[").map_err(write_error)?;
            let total = self.table_count(Some(tx), t).await?;
            let mut done = 0u64;
            let mut after: Option<RecordIdKey> = None;
            progress(&TableProgress {
                table: t.clone(),
                done,
                total,
            });
            loop {
                let page = self.rows_after(tx, t, after.take(), page_rows).await?;
                let full = page.len() == page_rows;
                for row in page {
                    if let Value::Object(o) = &row
                        && let Some(Value::RecordId(id)) = o.get("id")
                    {
                        after = Some(id.key.clone());
                    }
                    let mut row = to_json(row)?;
                    // the index snapshot's seal describes this memory's own snapshot file;
                    // secrets stay out of backups (see `Store::backup`)
                    if is_snapshot_seal(t, &row) {
                        continue;
                    }
                    if t == "setting" {
                        without_secrets(&mut row);
                    }
                    if done > 0 {
                        out.write_all(b",").map_err(write_error)?;
                    }
                    serde_json::to_writer(&mut *out, &row).map_err(|e| write_error(e.into()))?;
                    done += 1;
                }
                progress(&TableProgress {
                    table: t.clone(),
                    done,
                    total,
                });
                if !full || after.is_none() {
                    break;
                }
            }
            out.write_all(b"]").map_err(write_error)?;
            counts.insert(t.clone(), done);
        }
        out.write_all(b"}}").map_err(write_error)?;
        out.flush().map_err(write_error)?;
        Ok(counts)
    }

    /// Restores a scanned backup file into this memory, which the caller has checked is
    /// empty ([`Store::non_empty_tables`]). Settings are replaced by the backup's. Each
    /// batch of rows is one transaction.
    pub async fn restore_file(
        &self,
        file: &BackupFile,
        progress: TableProgressFn<'_>,
    ) -> Result<RestoreSummary, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.restore_file_unmarked(file, progress).await)
    }

    async fn restore_file_unmarked(
        &self,
        file: &BackupFile,
        progress: TableProgressFn<'_>,
    ) -> Result<RestoreSummary, StoreError> {
        let mut summary = RestoreSummary {
            schema_version: file.schema_version,
            ..Default::default()
        };
        let relations = self.relation_tables().await?;
        let mut order: Vec<&TableAt> = file.tables.iter().collect();
        order.sort_by_key(|t| restore_rank(&t.name));
        for t in order {
            if NOT_RESTORED.contains(&t.name.as_str()) {
                continue;
            }
            if t.name == "setting" {
                self.clear_settings().await?;
            }
            let relation = relations.contains(&t.name);
            let mut rows = file.rows_of(t)?;
            let mut done = 0u64;
            let mut batch = Vec::with_capacity(RESTORE_BATCH);
            let mut batch_bytes = 0;
            loop {
                let next = rows.next_row()?;
                let end = next.is_none();
                if let Some(row) = next
                    && !is_snapshot_seal(&t.name, &row)
                {
                    batch_bytes += approx_json_bytes(&row);
                    batch.push(row);
                }
                let full = batch.len() == RESTORE_BATCH || batch_bytes >= crate::BULK_WRITE_BYTES;
                if full || (end && !batch.is_empty()) {
                    self.insert_backup_rows(&t.name, &batch, relation).await?;
                    done += batch.len() as u64;
                    batch.clear();
                    batch_bytes = 0;
                    progress(&TableProgress {
                        table: t.name.clone(),
                        done,
                        total: t.rows,
                    });
                }
                if end {
                    break;
                }
            }
            summary.tables.insert(t.name.clone(), done);
        }
        Ok(summary)
    }
}

impl Store {
    /// Up to `limit` notes a list shows (every status but `merged`) with an id after
    /// `after`, in id order: a memory read a page at a time.
    pub async fn notes_after(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<Note>, StoreError> {
        let q = if after.is_some() {
            format!(
                "SELECT {NOTE_COLUMNS} FROM note WHERE id > type::record('note', $after) AND status != $note_merged ORDER BY id LIMIT $limit"
            )
        } else {
            format!(
                "SELECT {NOTE_COLUMNS} FROM note WHERE status != $note_merged ORDER BY id LIMIT $limit"
            )
        };
        let mut resp = self
            .db
            .query(q)
            .bind(("after", after.map(ToString::to_string).unwrap_or_default()))
            .bind(("limit", limit as i64))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<NoteRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(NoteRow::into_note).collect()
    }

    /// The accepted links leaving these notes (through each note's edges, no scan of
    /// `link`), oldest first.
    pub async fn accepted_links_from(&self, ids: &[NoteId]) -> Result<Vec<LinkRecord>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let mut resp = self
            .db
            .query(format!(
                "RETURN array::flatten(array::map($ids, |$k| (SELECT {LINK_COLUMNS} FROM type::record('note', $k)->link WHERE status = $link_accepted)))"
            ))
            .bind(("ids", keys))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<crate::LinkRecordRow> = resp.take(0).map_err(StoreError::from_db)?;
        let mut links = crate::link_records(rows)?;
        links.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(links)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use kasten_core::{JobId, LinkStatus, Note};

    use super::*;
    use crate::{Endpoint, ImportLinkWrite, NoteWrite};

    fn note(content: &str) -> Note {
        Note {
            keywords: vec!["k".into()],
            ..crate::tests::note(content)
        }
    }

    /// A memory of `n` notes (with embeddings and jobs) and a link between each pair of
    /// neighbours.
    async fn filled(n: usize) -> Result<Store, StoreError> {
        let s = Store::open(&Endpoint::Mem).await?;
        let notes: Vec<Note> = (0..n).map(|i| note(&format!("note number {i}"))).collect();
        let writes: Vec<NoteWrite> = notes
            .iter()
            .enumerate()
            .map(|(i, n)| NoteWrite {
                note: n.clone(),
                embedding: Some(vec![i as f32, 0.5, -1.0]),
                embed_model: Some("m".into()),
                job: Some(JobId::generate()),
            })
            .collect();
        s.insert_notes(&writes).await?;
        let links: Vec<ImportLinkWrite> = notes
            .windows(2)
            .map(|w| ImportLinkWrite {
                from: w[0].id.clone(),
                to: w[1].id.clone(),
                kind: "related".into(),
                reason: "neighbours".into(),
                confidence: 0.5,
                status: LinkStatus::Accepted,
                created_at: Utc::now(),
            })
            .collect();
        s.insert_import_links(&links).await?;
        Ok(s)
    }

    /// A backup's tables but the schema record (each memory's migrations write their own).
    fn tables(doc: &Json) -> Json {
        let mut t = doc["tables"].clone();
        if let Some(o) = t.as_object_mut() {
            o.remove("schema_version");
        }
        t
    }

    async fn written(s: &Store, page: usize) -> Result<Vec<u8>, StoreError> {
        let mut out = Vec::new();
        s.write_backup_paged(&mut out, page, &|_| {}).await?;
        Ok(out)
    }

    fn file_with(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("write {name}: {e}"));
        p
    }

    /// The streamed document is the one `backup` builds, whatever the page size, and a
    /// restore from the file gives back every row.
    #[tokio::test]
    async fn a_streamed_backup_is_the_whole_backup_and_restores_exactly() -> Result<(), StoreError>
    {
        let a = filled(23).await?;
        let whole = a.backup().await?;
        for page in [1, 7, 500] {
            let bytes = written(&a, page).await?;
            let doc: Json = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("page {page}: not JSON: {e}"));
            assert_eq!(tables(&doc), tables(&whole), "page size {page}");
            assert_eq!(doc["schema_version"], whole["schema_version"]);
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = file_with(dir.path(), "b.json", &written(&a, 7).await?);
        let file = BackupFile::scan(&path)?;
        assert_eq!(file.counts().get("note"), Some(&23));
        assert_eq!(file.counts().get("link"), Some(&22));
        let b = Store::open(&Endpoint::Mem).await?;
        let seen = std::sync::Mutex::new(Vec::new());
        let summary = b
            .restore_file(&file, &|p| {
                if let Ok(mut v) = seen.lock() {
                    v.push(p.clone());
                }
            })
            .await?;
        assert_eq!(summary.tables.get("note"), Some(&23));
        assert_eq!(tables(&b.backup().await?), tables(&whole));
        let seen = seen.into_inner().unwrap_or_default();
        assert!(
            seen.iter()
                .any(|p| p.table == "note" && p.done == 23 && p.total == 23),
            "{seen:?}"
        );
        // an old backup (the whole document, keys in any order) reads the same way
        let path = file_with(
            dir.path(),
            "old.json",
            &serde_json::to_vec_pretty(&whole).unwrap_or_default(),
        );
        let c = Store::open(&Endpoint::Mem).await?;
        c.restore_file(&BackupFile::scan(&path)?, &|_| {}).await?;
        assert_eq!(tables(&c.backup().await?), tables(&whole));
        Ok(())
    }

    /// A writer that commits a note with its job (one transaction) into `store` once the
    /// backup has begun the note table, after the job table was read.
    struct CommitsMidway<'a> {
        out: Vec<u8>,
        store: &'a Store,
        written: Option<NoteId>,
    }

    impl Write for CommitsMidway<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.out.extend_from_slice(b);
            let at_notes = self.out.windows(8).any(|w| w == b"\"note\":[");
            if self.written.is_none() && at_notes {
                let n = note("written while the backup runs");
                self.written = Some(n.id.clone());
                let w = NoteWrite {
                    note: n,
                    embedding: None,
                    embed_model: None,
                    job: Some(JobId::generate()),
                };
                let store = self.store;
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(store.insert_notes(&[w]))
                })
                .map_err(std::io::Error::other)?;
            }
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A backup is one snapshot of the memory: a note and its job written (in one
    /// transaction) while the backup runs are in all of its tables or in none, and the
    /// backup restores into a memory where every note has its job.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backup_is_one_snapshot_while_writes_commit() -> Result<(), StoreError> {
        let a = filled(5).await?;
        let mut out = CommitsMidway {
            out: Vec::new(),
            store: &a,
            written: None,
        };
        a.write_backup_paged(&mut out, 2, &|_| {}).await?;
        let (bytes, written) = (out.out, out.written);
        assert!(written.is_some(), "nothing was written during the backup");
        assert_eq!(a.count_notes().await?, 6);
        let doc: Json = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let keys = |t: &str, field: &str| -> Vec<String> {
            let mut v: Vec<String> = doc["tables"][t]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|r| r[field].to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            keys("note", "id"),
            keys("job", "note"),
            "notes and their jobs"
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = file_with(dir.path(), "b.json", &bytes);
        let b = Store::open(&Endpoint::Mem).await?;
        let summary = b.restore_file(&BackupFile::scan(&path)?, &|_| {}).await?;
        assert_eq!(summary.tables.get("note"), summary.tables.get("job"));
        Ok(())
    }

    /// Long notes are restored in transactions that fit a small memtable (a transaction
    /// must fit in SurrealKV's memtable): 300 notes of 100 KB, 30 MB in all, into a
    /// memory opened with the smallest memtable allowed (16 MiB).
    #[tokio::test]
    async fn long_notes_restore_into_the_smallest_memtable() -> Result<(), StoreError> {
        let a = Store::open(&Endpoint::Mem).await?;
        let long = "x".repeat(100_000);
        let writes: Vec<NoteWrite> = (0..300)
            .map(|i| NoteWrite {
                note: note(&format!("{i} {long}")),
                embedding: None,
                embed_model: None,
                job: None,
            })
            .collect();
        a.insert_notes(&writes).await?;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = file_with(dir.path(), "long.json", &written(&a, 500).await?);
        let limits = crate::StorageLimits {
            block_cache: 1 << 20,
            memtable: 16 << 20,
        };
        let b =
            Store::open_with_limits(&Endpoint::SurrealKv(dir.path().join("db")), &limits).await?;
        let batches = std::sync::atomic::AtomicUsize::new(0);
        let summary = b
            .restore_file(&BackupFile::scan(&path)?, &|p| {
                if p.table == "note" {
                    batches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
            .await?;
        assert_eq!(summary.tables.get("note"), Some(&300));
        assert_eq!(b.count_notes().await?, 300);
        // 100 KB notes, at most 4 MiB a transaction: 8 batches
        assert_eq!(batches.into_inner(), 8);
        b.close().await;
        Ok(())
    }

    /// A cut-off or damaged file is refused by the scan, before anything is written.
    #[tokio::test]
    async fn a_damaged_backup_file_is_refused_whole() -> Result<(), StoreError> {
        let a = filled(5).await?;
        let bytes = written(&a, 2).await?;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cut = file_with(dir.path(), "cut.json", &bytes[..bytes.len() * 2 / 3]);
        let err = BackupFile::scan(&cut).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("cut off")),
            "{err:?}"
        );
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let bad_bytes = text.replacen("{\"$bytes\":\"", "{\"$bytes\":\"!!", 1);
        assert_ne!(bad_bytes, text);
        let bad = file_with(dir.path(), "bad.json", bad_bytes.as_bytes());
        let err = BackupFile::scan(&bad).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("$bytes")),
            "{err:?}"
        );
        let other = file_with(
            dir.path(),
            "other.json",
            b"{\"format\":\"x\",\"tables\":{}}",
        );
        let err = BackupFile::scan(&other).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("kasten-backup")),
            "{err:?}"
        );
        Ok(())
    }
}
