//! Kasten's persistence on SurrealDB 3. This is the only crate that speaks SurrealQL.
//!
//! Invariants:
//! - Every write that returns `Ok` is committed (surrealkv's default `sync=every` fsyncs the
//!   WAL before a commit returns).
//! - [`Store::close`] must be awaited before the process exits or the same directory is
//!   reopened: it drops the handle and waits until SurrealKV has finished its shutdown
//!   (memtables flushed, LOCK released). SurrealDB 3.3.5 has no awaitable close, so the wait
//!   is done by polling the LOCK file (see ARCHITECTURE.md, "Durability").
//! - Ids reach SurrealQL only as bound parameters (`type::record('note', $id)`), never by
//!   string formatting.

mod backup;
mod boxes;
mod direct;
mod endpoint;
mod lifecycle;
mod manual;
mod notecache;
mod pipeline;
mod review;
mod schema;
mod supersede;
mod transfer;
pub mod views;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kasten_core::lifecycle::Tier;
use kasten_core::provenance::{self, Origin};
use kasten_core::{EnrichState, JobId, Link, LinkStatus, Note, NoteId, NoteStatus};
use surrealdb::engine::any;
use surrealdb::types::{Bytes, QueryError, RecordId, RecordIdKey, SurrealValue};
use thiserror::Error;

pub use backup::{BACKUP_PAGE, BackupFile, TableProgress, TableProgressFn};
pub use boxes::{BoxRecord, ChatRecord};
pub use endpoint::Endpoint;
pub use lifecycle::{ProjectState, StrengthRow};
pub use manual::{ContentChange, ContentRevision, UserLink};
pub use pipeline::{
    ApplyMode, CONFLICT_TRIES, Change, ClaimedJob, ConflictError, Enrichment, EventSummary, Fields,
    JobCounts, LinkWrite, ModelUsage, NeighbourWrite, NoteRead, RevisionSummary, retry_on_conflict,
};
pub use review::{
    AuditEntry, FieldChange, LinkRecord, NewRevision, QueueStates, ReviewBatch, Revision,
};
pub use supersede::{BOTH_TRUE, FlagOrigin, FlagWrite, MAY_BE_OUTDATED, SUPERSEDES, Successor};
pub use transfer::{
    BACKUP_FORMAT, BACKUP_VERSION, ImportLinkWrite, RestoreSummary,
    from_json as backup_value_from_json, to_json as backup_value_to_json,
};

const NAMESPACE: &str = "kasten";
const DATABASE: &str = "memory";

/// What can go wrong in the store, in words for the user.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("'{0}' is not a usable database location: {1}")]
    BadEndpoint(String, &'static str),
    #[error("cannot find a home directory for Kasten's data: set KASTEN_HOME")]
    NoHome,
    #[error(
        "the memory at {0} is open in another process (the app, `kasten mcp` or another command); close it and try again"
    )]
    Locked(String),
    #[error("cannot use the data directory {path}: {message}")]
    DataDir { path: String, message: String },
    #[error(
        "the database was written by a newer Kasten (schema version {found}, this build knows up to {known})"
    )]
    TooNew { found: u32, known: u32 },
    #[error("another change to the same data happened at the same time; try again")]
    Conflict,
    #[error("stored data is damaged: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Db(String),
    /// A file (a backup, an export) could not be read or written; the message names it.
    #[error("{0}")]
    File(String),
}

impl StoreError {
    fn from_db(e: surrealdb::Error) -> Self {
        if e.query_details() == Some(&QueryError::TransactionConflict) {
            return StoreError::Conflict;
        }
        StoreError::Db(e.to_string())
    }
}

/// Picks the meaningful error out of a failed multi-statement query: inside a
/// transaction the statements before the failing one report "not executed".
fn first_real_error(resp: &mut surrealdb::IndexedResults) -> Result<(), StoreError> {
    let mut errs: Vec<(usize, surrealdb::Error)> = resp.take_errors().into_iter().collect();
    if errs.is_empty() {
        return Ok(());
    }
    errs.sort_by_key(|(i, _)| *i);
    let pick = errs
        .iter()
        .position(|(_, e)| e.query_details() != Some(&QueryError::NotExecuted))
        .unwrap_or(0);
    Err(StoreError::from_db(errs.swap_remove(pick).1))
}

/// The boolean a `BEGIN … RETURN $x; COMMIT` query returned (the statement before the
/// commit), after checking the response for errors; `false` if it returned nothing.
fn returned_bool(resp: &mut surrealdb::IndexedResults) -> Result<bool, StoreError> {
    first_real_error(resp)?;
    let n = resp.num_statements();
    let v: Option<bool> = resp
        .take(n.saturating_sub(2))
        .map_err(StoreError::from_db)?;
    Ok(v.unwrap_or(false))
}

fn emb_to_bytes(v: &[f32]) -> Bytes {
    let mut b = Vec::with_capacity(v.len() * 4);
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    Bytes::from(b)
}

fn bytes_to_emb(b: &[u8]) -> Result<Vec<f32>, StoreError> {
    if !b.len().is_multiple_of(4) {
        return Err(StoreError::Corrupt(format!(
            "an embedding of {} bytes is not a whole number of floats",
            b.len()
        )));
    }
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The fields of `note` a note is read back with ([`NoteRow`]), for a `SELECT` or a
/// destructuring `.{…}`.
const NOTE_COLUMNS: &str = "id, content, created_at, updated_at, keywords, tags, context, status, \
     enrich_state, enrich_error, source, strength, access_count, last_accessed, version, tier, \
     project, added_at, set_by";
/// [`NOTE_COLUMNS`] one by one.
const NOTE_FIELDS: &[&str] = &[
    "id",
    "content",
    "created_at",
    "updated_at",
    "keywords",
    "tags",
    "context",
    "status",
    "enrich_state",
    "enrich_error",
    "source",
    "strength",
    "access_count",
    "last_accessed",
    "version",
    "tier",
    "project",
    "added_at",
    "set_by",
];

/// A note's fields as stored ([`NOTE_COLUMNS`]); [`NoteRow::into_note`] gives notes
/// written before `tier` and `added_at` existed their defaults.
#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct NoteRow {
    id: RecordId,
    content: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    keywords: Vec<String>,
    tags: Vec<String>,
    context: String,
    status: String,
    enrich_state: String,
    enrich_error: Option<String>,
    source: Option<String>,
    strength: f64,
    access_count: i64,
    last_accessed: Option<DateTime<Utc>>,
    version: i64,
    tier: Option<String>,
    project: Option<String>,
    added_at: Option<DateTime<Utc>>,
    set_by: Option<Vec<OriginRow>>,
}

/// One [`Origin`] as stored: `{ field, value, by }`.
#[derive(Debug, Clone, PartialEq, Eq, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub struct OriginRow {
    pub field: String,
    pub value: String,
    pub by: String,
}

impl OriginRow {
    pub fn of(o: &Origin) -> Self {
        Self {
            field: o.field.as_str().to_owned(),
            value: o.value.clone(),
            by: o.by.as_str().to_owned(),
        }
    }

    /// Rows naming a field or setter this build does not know are left out (a newer
    /// version's); the value is then the LLM's to change, as before origins existed.
    fn into_origin(self) -> Option<Origin> {
        Some(Origin {
            field: provenance::Field::parse(&self.field)?,
            value: self.value,
            by: provenance::SetBy::parse(&self.by)?,
        })
    }
}

/// Origins as stored.
pub fn origin_rows(v: &[Origin]) -> Vec<OriginRow> {
    v.iter().map(OriginRow::of).collect()
}

impl NoteRow {
    fn into_note(self) -> Result<Note, StoreError> {
        let key = match &self.id.key {
            RecordIdKey::String(k) => k,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "a note has an id that is not text: {other:?}"
                )));
            }
        };
        let id = NoteId::parse(key).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let status = NoteStatus::parse(&self.status).ok_or_else(|| {
            StoreError::Corrupt(format!("note {id} has unknown status '{}'", self.status))
        })?;
        let enrich_state = match self.enrich_state.as_str() {
            "pending" => EnrichState::Pending {
                reason: self.enrich_error,
            },
            "done" => EnrichState::Done,
            "failed" => EnrichState::Failed {
                error: self.enrich_error.unwrap_or_default(),
            },
            other => {
                return Err(StoreError::Corrupt(format!(
                    "note {id} has unknown enrichment state '{other}'"
                )));
            }
        };
        let tier = match self.tier.as_deref() {
            None => Tier::LongTerm,
            Some(t) => Tier::parse(t)
                .ok_or_else(|| StoreError::Corrupt(format!("note {id} has unknown tier '{t}'")))?,
        };
        Ok(Note {
            id,
            content: self.content,
            created_at: self.created_at,
            updated_at: self.updated_at,
            keywords: self.keywords,
            tags: self.tags,
            context: self.context,
            status,
            enrich_state,
            source: self.source,
            strength: self.strength,
            access_count: self.access_count.max(0) as u64,
            last_accessed: self.last_accessed,
            version: self.version.max(0) as u64,
            tier,
            project: self.project,
            added_at: self.added_at.unwrap_or(self.updated_at),
            set_by: self
                .set_by
                .unwrap_or_default()
                .into_iter()
                .filter_map(OriginRow::into_origin)
                .collect(),
        })
    }
}

/// A new note as written: the note, its embedding and the model that made it.
#[derive(Debug, Clone)]
pub struct NoteWrite {
    pub note: Note,
    pub embedding: Option<Vec<f32>>,
    pub embed_model: Option<String>,
    /// The enrichment job to enqueue with it, if any.
    pub job: Option<JobId>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct NoteInsert {
    id: RecordId,
    content: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    keywords: Vec<String>,
    tags: Vec<String>,
    context: String,
    embedding: Option<Bytes>,
    embed_model: Option<String>,
    status: String,
    enrich_state: String,
    enrich_error: Option<String>,
    source: Option<String>,
    strength: f64,
    access_count: i64,
    version: i64,
    tier: String,
    project: Option<String>,
    added_at: DateTime<Utc>,
    set_by: Vec<OriginRow>,
}

/// A new note that repeats an existing one (see [`Store::insert_notes_with`]). The note
/// itself is in the same batch with status `merged` and no job.
#[derive(Debug, Clone)]
pub struct MergeWrite {
    pub note: NoteId,
    pub duplicate_of: NoteId,
    /// The merge event's id (a job-id-like key; rollback takes it like any event).
    pub event: String,
    pub reason: String,
    pub similarity: f64,
    /// Applied at once (the link is accepted) or held as a proposal.
    pub accepted: bool,
    /// The old note's strength after the reinforcement.
    pub strength: f64,
    pub at: DateTime<Utc>,
}

/// A link from a new note of a batch to a note it reads like but whose facts differ (see
/// [`Store::insert_notes_with`]): created by `merge`, for review.
#[derive(Debug, Clone)]
pub struct DifferWrite {
    pub from: NoteId,
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    /// Applied at once (the link is accepted) or held as a proposal.
    pub accepted: bool,
    pub at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct DifferInsert {
    from: String,
    to: String,
    kind: String,
    reason: String,
    confidence: f64,
    status: String,
    at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct MergeInsert {
    note: String,
    duplicate_of: String,
    event: String,
    reason: String,
    similarity: f64,
    status: String,
    strength: f64,
    at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct JobInsert {
    id: RecordId,
    note: RecordId,
    kind: String,
    state: String,
    attempts: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// What the in-process indexes are rebuilt from.
#[derive(Debug, Clone)]
pub struct IndexRow {
    pub id: NoteId,
    pub text: String,
    pub embedding: Option<Vec<f32>>,
    pub embed_model: Option<String>,
    /// The note's time and source, for the timeline (context expansion, dates).
    pub created_at: DateTime<Utc>,
    pub source: Option<String>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct IndexRowRaw {
    id: String,
    content: String,
    keywords: Vec<String>,
    tags: Vec<String>,
    context: String,
    embedding: Option<Bytes>,
    embed_model: Option<String>,
    created_at: DateTime<Utc>,
    source: Option<String>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct LinkRow {
    from: String,
    to: String,
    kind: String,
    reason: String,
    confidence: f64,
    created_by: String,
    status: String,
    created_at: DateTime<Utc>,
}

/// An open memory database.
pub struct Store {
    /// Every query goes through it (it keeps the note cache in step with writes).
    db: notecache::Db,
    endpoint: Endpoint,
    snapshot: SnapshotBook,
}

/// The setting under which a clean close vouches for the engine's index snapshot.
pub const SNAPSHOT_SETTING: &str = "index_snapshot";
/// The engine's index snapshot inside an embedded store's directory (beside SurrealKV's
/// own files, which ignore it; not counted in [`Store::disk_bytes`]).
pub const SNAPSHOT_FILE: &str = "kasten-index.snapshot";

/// What the store knows about the engine's index snapshot (ARCHITECTURE.md, "Opening
/// without rebuilding"). A clean close stores the generation of the snapshot it wrote
/// ([`Store::seal_snapshot`]); the first write of a later session that changes indexed
/// data (notes, their text or embeddings, status, accepted links) removes it before
/// writing, so a snapshot is only trusted while nothing it mirrors has changed. Embedded
/// stores only: they have one process (LOCK file).
#[derive(Debug, Default)]
struct SnapshotBook {
    /// The generation found at open.
    sealed: Option<String>,
    /// Set once the seal is removed from the store in this session.
    unsealed: tokio::sync::OnceCell<()>,
    /// Writes that changed indexed data and returned `Ok`.
    writes: AtomicU64,
    /// A write that changes indexed data was cut off or failed in a way that may have
    /// committed it: the engine's indexes may not show it.
    uncertain: AtomicBool,
}

/// Held while a write that changes indexed data runs; see [`SnapshotBook`].
struct IndexWrite<'a> {
    book: &'a SnapshotBook,
    finished: bool,
}

impl IndexWrite<'_> {
    /// Records how the write ended and passes its result on.
    fn finish<T>(mut self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        self.finished = true;
        match &r {
            Ok(_) => {
                self.book.writes.fetch_add(1, SeqCst);
            }
            // a conflicting transaction is rolled back: nothing was written
            Err(StoreError::Conflict) => {}
            Err(_) => self.book.uncertain.store(true, SeqCst),
        }
        r
    }
}

impl Drop for IndexWrite<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // the caller stopped waiting (cancelled): the write may still have committed
            self.book.uncertain.store(true, SeqCst);
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database at `endpoint` and runs pending migrations.
    /// An embedded datastore gets [`StorageLimits::from_env`].
    pub async fn open(endpoint: &Endpoint) -> Result<Self, StoreError> {
        Self::open_with_limits(endpoint, &StorageLimits::from_env()).await
    }

    /// [`Store::open`] with the embedded datastore's memory limits given.
    pub async fn open_with_limits(
        endpoint: &Endpoint,
        limits: &StorageLimits,
    ) -> Result<Self, StoreError> {
        if let Endpoint::SurrealKv(dir) = endpoint {
            prepare_dir(dir)?;
        }
        let db = match endpoint {
            Endpoint::SurrealKv(_) | Endpoint::Mem => open_embedded(&endpoint.url(), limits).await,
            _ => any::connect(endpoint.url())
                .await
                .map(notecache::Conn::Any)
                .map_err(|e| e.to_string()),
        }
        .map_err(|msg| match endpoint {
            Endpoint::SurrealKv(dir) if msg.contains("already locked") => Self::locked(dir),
            Endpoint::SurrealKv(dir) => StoreError::DataDir {
                path: dir.display().to_string(),
                message: msg,
            },
            _ => StoreError::Db(msg),
        })?;
        // a server may be written by other processes: no note cache
        let db = notecache::Db::new(db, !matches!(endpoint, Endpoint::Remote(_)));
        if matches!(endpoint, Endpoint::Remote(_)) {
            db.query(format!("DEFINE NAMESPACE IF NOT EXISTS {NAMESPACE}; USE NS {NAMESPACE}; DEFINE DATABASE IF NOT EXISTS {DATABASE};"))
                .await
                .map_err(StoreError::from_db)?
                .check()
                .map_err(StoreError::from_db)?;
        }
        db.use_ns_db(NAMESPACE, DATABASE)
            .await
            .map_err(StoreError::from_db)?;
        let mut store = Store {
            db,
            endpoint: endpoint.clone(),
            snapshot: SnapshotBook::default(),
        };
        if let Err(e) = store.migrate().await {
            store.close().await;
            return Err(e);
        }
        if matches!(endpoint, Endpoint::SurrealKv(_)) {
            match store.get_setting(SNAPSHOT_SETTING).await {
                Ok(v) => store.snapshot.sealed = v.and_then(|v| v.as_str().map(str::to_owned)),
                Err(e) => {
                    store.close().await;
                    return Err(e);
                }
            }
        }
        Ok(store)
    }

    /// The generation of the index snapshot the last clean close vouched for, if no
    /// write has changed indexed data since (embedded stores; `None` otherwise).
    pub fn sealed_snapshot(&self) -> Option<&str> {
        if self.snapshot.unsealed.initialized() {
            None
        } else {
            self.snapshot.sealed.as_deref()
        }
    }

    /// Vouches for the index snapshot `generation`, written after the last change of
    /// this session: the next open trusts a snapshot of that generation. Embedded stores
    /// only (a no-op elsewhere).
    pub async fn seal_snapshot(&self, generation: &str) -> Result<(), StoreError> {
        if !matches!(self.endpoint, Endpoint::SurrealKv(_)) {
            return Ok(());
        }
        self.set_setting(SNAPSHOT_SETTING, &serde_json::Value::from(generation))
            .await
    }

    /// Writes in this session that changed indexed data.
    pub fn index_writes(&self) -> u64 {
        self.snapshot.writes.load(SeqCst)
    }

    /// Whether a write that changes indexed data was cut off or failed in a way that may
    /// have committed it (then the engine's indexes may not show it).
    pub fn index_writes_uncertain(&self) -> bool {
        self.snapshot.uncertain.load(SeqCst)
    }

    /// Call before every write that changes indexed data, and pass its result through
    /// [`IndexWrite::finish`]: the first one of a session removes the snapshot seal.
    async fn index_write(&self) -> Result<IndexWrite<'_>, StoreError> {
        if self.snapshot.sealed.is_some() {
            self.snapshot
                .unsealed
                .get_or_try_init(|| async {
                    let mut resp = self
                        .db
                        .query("DELETE type::record('setting', $k)")
                        .bind(("k", SNAPSHOT_SETTING))
                        .await
                        .map_err(StoreError::from_db)?;
                    first_real_error(&mut resp)
                })
                .await?;
        }
        Ok(IndexWrite {
            book: &self.snapshot,
            finished: false,
        })
    }

    fn locked(dir: &Path) -> StoreError {
        StoreError::Locked(dir.display().to_string())
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Closes the database and waits until its files are released. Every exit path must
    /// call this (see the crate docs).
    pub async fn close(self) {
        let Store { db, endpoint, .. } = self;
        drop(db);
        if let Endpoint::SurrealKv(dir) = endpoint {
            wait_for_unlock(&dir).await;
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let current = self.schema_version().await?;
        let known = schema::MIGRATIONS.last().map_or(0, |m| m.0);
        if current > known {
            return Err(StoreError::TooNew {
                found: current,
                known,
            });
        }
        for (version, sql) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            let q = format!(
                "BEGIN TRANSACTION;\n{sql}\nUPSERT schema_version:current SET version = $v, applied_at = time::now();\nCOMMIT TRANSACTION;"
            );
            let mut tries = 1;
            loop {
                let applied = async {
                    let mut resp = self
                        .db
                        .query(q.as_str())
                        .bind(("v", *version as i64))
                        .await
                        .map_err(StoreError::from_db)?;
                    first_real_error(&mut resp)
                }
                .await;
                let Err(e) = applied else {
                    tracing::info!(version, "applied schema migration");
                    break;
                };
                // Processes opening a new memory on a server together all try this: the
                // losers' transactions conflict, or find the tables already defined. The
                // migration is then applied, which is all that matters.
                if self.schema_version().await? >= *version {
                    break;
                }
                if matches!(e, StoreError::Conflict) && tries < u64::from(CONFLICT_TRIES) {
                    tokio::time::sleep(Duration::from_millis(30 * tries)).await;
                    tries += 1;
                    continue;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// The last migration applied (0 for a new database).
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        self.schema_version_in(None).await
    }

    /// [`Store::schema_version`] read inside a read transaction, or outside any.
    pub(crate) async fn schema_version_in(
        &self,
        tx: Option<&notecache::ReadTx>,
    ) -> Result<u32, StoreError> {
        let mut resp = self
            .db
            .query_in(tx, "SELECT VALUE version FROM ONLY schema_version:current")
            .await
            .map_err(StoreError::from_db)?;
        // On a new database the table does not exist yet: that is version 0.
        match resp.take::<Option<i64>>(0) {
            Ok(v) => Ok(v.unwrap_or(0).max(0) as u32),
            Err(_) => Ok(0),
        }
    }

    /// Writes notes (and their jobs) in one transaction: all of them or none.
    pub async fn insert_notes(&self, writes: &[NoteWrite]) -> Result<(), StoreError> {
        self.insert_notes_with(writes, &[], &[]).await
    }

    /// [`Store::insert_notes`] where some of the notes are near-duplicates of existing
    /// ones: each merge records an event, the `same-entity` link from the new (merged)
    /// note to the one it repeats, and the reinforcement of the old note, in the same
    /// transaction as the notes; so does each link between a new note and one it reads like
    /// but whose facts differ.
    pub async fn insert_notes_with(
        &self,
        writes: &[NoteWrite],
        merges: &[MergeWrite],
        differs: &[DifferWrite],
    ) -> Result<(), StoreError> {
        self.insert_notes_flagged(writes, merges, differs, &[])
            .await
    }

    /// [`Store::insert_notes_with`], and the "may be outdated" flags that the accepted
    /// supersessions among `differs` raise (see `supersede.rs`), in the same transaction.
    pub async fn insert_notes_flagged(
        &self,
        writes: &[NoteWrite],
        merges: &[MergeWrite],
        differs: &[DifferWrite],
        flags: &[FlagWrite],
    ) -> Result<(), StoreError> {
        let w = self.index_write().await?;
        w.finish(
            self.insert_notes_with_unmarked(writes, merges, differs, flags)
                .await,
        )
    }

    /// [`Store::insert_notes_flagged`] without the snapshot bookkeeping.
    async fn insert_notes_with_unmarked(
        &self,
        writes: &[NoteWrite],
        merges: &[MergeWrite],
        differs: &[DifferWrite],
        flags: &[FlagWrite],
    ) -> Result<(), StoreError> {
        if writes.is_empty() && merges.is_empty() && differs.is_empty() && flags.is_empty() {
            return Ok(());
        }
        let mut notes = Vec::with_capacity(writes.len());
        let mut jobs = Vec::new();
        for w in writes {
            let n = &w.note;
            let (state, err) = match &n.enrich_state {
                EnrichState::Pending { reason } => ("pending", reason.clone()),
                EnrichState::Done => ("done", None),
                EnrichState::Failed { error } => ("failed", Some(error.clone())),
            };
            notes.push(NoteInsert {
                id: RecordId::new("note", n.id.to_string()),
                content: n.content.clone(),
                created_at: n.created_at,
                updated_at: n.updated_at,
                keywords: n.keywords.clone(),
                tags: n.tags.clone(),
                context: n.context.clone(),
                embedding: w.embedding.as_deref().map(emb_to_bytes),
                embed_model: w.embed_model.clone(),
                status: n.status.as_str().to_owned(),
                enrich_state: state.to_owned(),
                enrich_error: err,
                source: n.source.clone(),
                strength: n.strength,
                access_count: n.access_count as i64,
                version: n.version as i64,
                tier: n.tier.as_str().to_owned(),
                project: n.project.clone(),
                added_at: n.added_at,
                set_by: origin_rows(&n.set_by),
            });
            if let Some(job) = &w.job {
                jobs.push(JobInsert {
                    id: RecordId::new("job", job.to_string()),
                    note: RecordId::new("note", n.id.to_string()),
                    kind: "enrich".to_owned(),
                    state: "queued".to_owned(),
                    attempts: 0,
                    created_at: n.updated_at,
                    updated_at: n.updated_at,
                });
            }
        }
        // INSERT of the bound rows rather than a CREATE per row in a FOR loop: the same
        // checks (schema, an existing id is an error that cancels the transaction) at ~60 %
        // of the CPU, which a bulk write takes from the embedder.
        let q = "BEGIN TRANSACTION;
            IF array::len($notes) > 0 { INSERT INTO note $notes RETURN NONE };
            IF array::len($jobs) > 0 { INSERT INTO job $jobs RETURN NONE };
            FOR $m IN $merges {
                LET $new = type::record('note', $m.note);
                LET $old = type::record('note', $m.duplicate_of);
                LET $ev = type::record('event', $m.event);
                IF (SELECT VALUE status FROM ONLY $old) != 'active' { THROW 'the note to merge into is gone' };
                CREATE $ev CONTENT { note: $new, kind: 'merge', llm_calls: 0, created_at: $m.at };
                RELATE $new->link->$old CONTENT {
                    kind: 'same-entity', reason: $m.reason, confidence: $m.similarity,
                    created_by: 'merge', status: $m.status, reviewed: false, event: $ev,
                    created_at: $m.at
                };
                UPDATE $old SET strength = $m.strength, last_accessed = $m.at, access_count += 1;
            };
            FOR $d IN $differs {
                LET $from = type::record('note', $d.from);
                LET $to = type::record('note', $d.to);
                IF record::exists($to) {
                    RELATE $from->link->$to CONTENT {
                        kind: $d.kind, reason: $d.reason, confidence: $d.confidence,
                        created_by: 'merge', status: $d.status, reviewed: false, created_at: $d.at
                    };
                };
            };
            ";
        // the flags' statements only when there are flags: a bulk write parses less
        let q = if flags.is_empty() {
            format!("{q}COMMIT TRANSACTION;")
        } else {
            format!("{q}{}\nCOMMIT TRANSACTION;", supersede::FLAG_WRITES)
        };
        let merges: Vec<MergeInsert> = merges
            .iter()
            .map(|m| MergeInsert {
                note: m.note.to_string(),
                duplicate_of: m.duplicate_of.to_string(),
                event: m.event.clone(),
                reason: m.reason.clone(),
                similarity: m.similarity,
                status: if m.accepted { "accepted" } else { "proposed" }.to_owned(),
                strength: m.strength,
                at: m.at,
            })
            .collect();
        let differs: Vec<DifferInsert> = differs
            .iter()
            .map(|d| DifferInsert {
                from: d.from.to_string(),
                to: d.to.to_string(),
                kind: d.kind.clone(),
                reason: d.reason.clone(),
                confidence: d.confidence,
                status: if d.accepted { "accepted" } else { "proposed" }.to_owned(),
                at: d.at,
            })
            .collect();
        let mut resp = self
            .db
            .query(q)
            .bind(("notes", notes))
            .bind(("jobs", jobs))
            .bind(("merges", merges))
            .bind(("differs", differs))
            .bind(("flags", supersede::flag_params(flags)))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    pub async fn get_note(&self, id: &NoteId) -> Result<Option<Note>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {NOTE_COLUMNS} FROM ONLY type::record('note', $id)"
            ))
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let row: Option<NoteRow> = resp.take(0).map_err(StoreError::from_db)?;
        row.map(NoteRow::into_note).transpose()
    }

    /// The notes with these ids that exist, in the order given.
    /// Notes read recently are answered from the note cache (`notecache.rs`), which
    /// every write empties.
    pub async fn get_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let generation = self.db.cache.generation();
        let (mut found, missing) = self.db.cache.lookup(ids);
        if !missing.is_empty() {
            let read = self.read_notes(&missing).await?;
            self.db.cache.keep(generation, &read);
            found.extend(read.into_iter().map(|n| (n.id.clone(), n)));
        }
        // in the order given; ids given twice come back twice, as the query returns them
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    /// (hits, misses) of the note cache since open.
    pub fn note_cache_counts(&self) -> (u64, u64) {
        self.db.cache.counts()
    }

    /// [`Store::get_notes`] from the database: from the records themselves on an
    /// embedded datastore (`direct.rs`), else by a query.
    async fn read_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, StoreError> {
        let Some(ds) = self.db.datastore() else {
            return self.query_notes(ids).await;
        };
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let rows = direct::read_notes(ds, &keys)
            .await
            .map_err(StoreError::Db)?;
        rows.into_iter()
            .flatten()
            .map(|v| {
                NoteRow::from_value(v)
                    .map_err(|e| StoreError::Corrupt(format!("a note reads back wrong: {e}")))
                    .and_then(NoteRow::into_note)
            })
            .collect()
    }

    /// [`Store::read_notes`] by a SurrealQL query (any endpoint).
    async fn query_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, StoreError> {
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            // the record ids followed in a `RETURN`, not a `SELECT` over them: the same
            // reads without a `SELECT` statement's fixed cost (10 notes of a 100k memory in
            // ~1.0 ms instead of ~1.4; one in 0.14 ms instead of 0.6). A missing id is NONE.
            .query(format!(
                "RETURN array::map($ids, |$k| type::record('note', $k).{{{NOTE_COLUMNS}}})"
            ))
            .bind(("ids", keys))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Option<NoteRow>> = resp.take(0).map_err(StoreError::from_db)?;
        let mut notes: Vec<Note> = rows
            .into_iter()
            .flatten()
            .map(NoteRow::into_note)
            .collect::<Result<_, _>>()?;
        let pos = |id: &NoteId| ids.iter().position(|x| x == id).unwrap_or(usize::MAX);
        notes.sort_by_key(|n| pos(&n.id));
        Ok(notes)
    }

    /// The most recent notes by memory time, newest first. Notes merged into another are
    /// not listed (they show as that note's `same-entity` link).
    pub async fn list_notes(&self, limit: usize, offset: usize) -> Result<Vec<Note>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {NOTE_COLUMNS} FROM note WHERE status != 'merged' ORDER BY created_at DESC LIMIT $limit START $start"
            ))
            .bind(("limit", limit as i64))
            .bind(("start", offset as i64))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<NoteRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(NoteRow::into_note).collect()
    }

    pub async fn count_notes(&self) -> Result<u64, StoreError> {
        let mut resp = self
            .db
            .query("SELECT count() AS n FROM note GROUP ALL")
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// Notes `list_notes` shows (every status but `merged`) and notes merged into another.
    pub async fn count_listed_and_merged(&self) -> Result<(u64, u64), StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT count(status != 'merged') AS listed, count(status = 'merged') AS merged \
                 FROM note GROUP ALL",
            )
            .await
            .map_err(StoreError::from_db)?;
        let listed: Option<i64> = resp.take((0, "listed")).map_err(StoreError::from_db)?;
        let merged: Option<i64> = resp.take((0, "merged")).map_err(StoreError::from_db)?;
        let n = |x: Option<i64>| x.unwrap_or(0).max(0) as u64;
        Ok((n(listed), n(merged)))
    }

    /// Deletes a note, its links (both directions) and its queued jobs in one transaction.
    /// Notes merged into it (by a merge in force: proposed or accepted) come back as regular
    /// notes in the same transaction, with an `unmerge` audit entry and an enrichment job if
    /// they were never enriched. Returns `None` if the note did not exist, else the notes
    /// that came back (the caller indexes them).
    pub async fn delete_note(&self, id: &NoteId) -> Result<Option<Vec<NoteId>>, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.delete_note_unmarked(id).await)
    }

    /// [`Store::delete_note`] without the snapshot bookkeeping.
    async fn delete_note_unmarked(&self, id: &NoteId) -> Result<Option<Vec<NoteId>>, StoreError> {
        #[derive(Debug, SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Freed {
            note: String,
            job: String,
        }
        // the notes merged into this one, with a job id ready for each
        let mut resp = self
            .db
            .query(
                "LET $r = type::record('note', $id);
                 SELECT VALUE record::id(in) FROM link WHERE out = $r AND kind = 'same-entity'
                     AND created_by = 'merge' AND status IN ['proposed', 'accepted'];",
            )
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let dups: Vec<String> = resp.take(1).map_err(StoreError::from_db)?;
        let freed: Vec<Freed> = dups
            .into_iter()
            .map(|note| Freed {
                note,
                job: kasten_core::JobId::generate().to_string(),
            })
            .collect();
        let q = "BEGIN TRANSACTION;
            LET $r = type::record('note', $id);
            LET $existed = (SELECT VALUE id FROM ONLY $r) != NONE;
            LET $back = IF $existed { $freed.filter(|$f| (SELECT VALUE status FROM ONLY type::record('note', $f.note)) = 'merged') } ELSE { [] };
            FOR $f IN $back {
                LET $d = type::record('note', $f.note);
                UPDATE $d SET status = 'active', version += 1;
                CREATE audit CONTENT { action: 'unmerge', target: $f.note, notes: [$d], actor: 'user',
                    reason: 'the note it was merged into was deleted', at: time::now() };
                IF (SELECT VALUE enrich_state FROM ONLY $d) != 'done'
                    AND array::len(SELECT VALUE id FROM job WHERE note = $d AND state IN ['queued', 'running']) = 0 {
                    CREATE type::record('job', $f.job) CONTENT { note: $d, kind: 'enrich',
                        state: 'queued', attempts: 0, created_at: time::now(), updated_at: time::now() };
                };
            };
            DELETE link WHERE in = $r OR out = $r;
            DELETE job WHERE note = $r;
            DELETE $r;
            RETURN { existed: $existed, back: $back.map(|$f| $f.note) };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("id", id.to_string()))
            .bind(("freed", freed))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)?;
        #[derive(Debug, SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Deleted {
            existed: bool,
            back: Vec<String>,
        }
        let n = resp.num_statements();
        let d: Option<Deleted> = resp
            .take(n.saturating_sub(2))
            .map_err(StoreError::from_db)?;
        match d {
            Some(d) if d.existed => Ok(Some(
                d.back
                    .iter()
                    .map(|s| NoteId::parse(s).map_err(|e| StoreError::Corrupt(e.to_string())))
                    .collect::<Result<_, _>>()?,
            )),
            _ => Ok(None),
        }
    }

    /// Links touching a note, in either direction.
    pub async fn links_of(&self, id: &NoteId) -> Result<Vec<Link>, StoreError> {
        let mut resp = self
            .db
            .query(
                "LET $r = type::record('note', $id);
                 SELECT record::id(in) AS from, record::id(out) AS to, kind, reason, confidence,
                        created_by, status, created_at
                 FROM link WHERE in = $r OR out = $r ORDER BY created_at",
            )
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<LinkRow> = resp.take(1).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                let status = match r.status.as_str() {
                    "proposed" => LinkStatus::Proposed,
                    "accepted" => LinkStatus::Accepted,
                    "rejected" => LinkStatus::Rejected,
                    "rolled_back" => LinkStatus::RolledBack,
                    other => {
                        return Err(StoreError::Corrupt(format!(
                            "link with unknown status '{other}'"
                        )));
                    }
                };
                Ok(Link {
                    from: NoteId::parse(&r.from).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    to: NoteId::parse(&r.to).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    kind: r.kind,
                    reason: r.reason,
                    confidence: r.confidence,
                    created_by: r.created_by,
                    status,
                    created_at: r.created_at,
                })
            })
            .collect()
    }

    /// One page of what the in-process indexes are built from: active notes with id
    /// greater than `after`, in id order.
    pub async fn index_rows(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<IndexRow>, StoreError> {
        let cols = "record::id(id) AS id, content, keywords, tags, context, embedding, embed_model, created_at, source";
        let q = match after {
            Some(_) => format!(
                "SELECT {cols} FROM note WHERE id > type::record('note', $after) AND status = 'active' ORDER BY id LIMIT $limit"
            ),
            None => {
                format!("SELECT {cols} FROM note WHERE status = 'active' ORDER BY id LIMIT $limit")
            }
        };
        let mut resp = self
            .db
            .query(q)
            .bind(("after", after.map(|a| a.to_string()).unwrap_or_default()))
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<IndexRowRaw> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                Ok(IndexRow {
                    id: NoteId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    text: kasten_core::note::index_text(
                        &r.content,
                        &r.keywords,
                        &r.tags,
                        &r.context,
                    ),
                    embedding: r.embedding.as_ref().map(|b| bytes_to_emb(b)).transpose()?,
                    embed_model: r.embed_model,
                    created_at: r.created_at,
                    source: r.source,
                })
            })
            .collect()
    }

    /// A note's stored embedding with the model that made it (`None`: no such note, or
    /// not embedded). Vectors of two models of one dimension are not comparable: the
    /// model, not the length, says whether a vector can be used.
    pub async fn embedding_with_model(
        &self,
        id: &NoteId,
    ) -> Result<Option<(Vec<f32>, Option<String>)>, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            embedding: Option<Bytes>,
            embed_model: Option<String>,
        }
        let mut resp = self
            .db
            .query("SELECT embedding, embed_model FROM ONLY type::record('note', $id)")
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let row: Option<Row> = resp.take(0).map_err(StoreError::from_db)?;
        match row {
            Some(Row {
                embedding: Some(b),
                embed_model,
            }) => Ok(Some((bytes_to_emb(&b)?, embed_model))),
            _ => Ok(None),
        }
    }

    /// Replaces the embedding of a note.
    pub async fn set_embedding(
        &self,
        id: &NoteId,
        embedding: &[f32],
        model: &str,
    ) -> Result<(), StoreError> {
        let w = self.index_write().await?;
        w.finish(self.set_embedding_unmarked(id, embedding, model).await)
    }

    /// [`Store::set_embedding`] without the snapshot bookkeeping.
    async fn set_embedding_unmarked(
        &self,
        id: &NoteId,
        embedding: &[f32],
        model: &str,
    ) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("UPDATE type::record('note', $id) SET embedding = $e, embed_model = $m")
            .bind(("id", id.to_string()))
            .bind(("e", emb_to_bytes(embedding)))
            .bind(("m", model.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// A setting as stored (JSON text), or None.
    pub async fn get_setting(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let mut resp = self
            .db
            .query("SELECT VALUE value FROM ONLY type::record('setting', $k)")
            .bind(("k", key.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let v: Option<String> = resp.take(0).map_err(StoreError::from_db)?;
        v.map(|s| {
            serde_json::from_str(&s).map_err(|e| StoreError::Corrupt(format!("setting {key}: {e}")))
        })
        .transpose()
    }

    pub async fn set_setting(
        &self,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("UPSERT type::record('setting', $k) SET value = $v")
            .bind(("k", key.to_owned()))
            .bind(("v", value.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// Number of queued enrichment jobs.
    pub async fn queued_jobs(&self) -> Result<u64, StoreError> {
        let mut resp = self
            .db
            .query("SELECT count() AS n FROM job WHERE state = 'queued' GROUP ALL")
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// Bytes the embedded database occupies on disk, without the index snapshot (0 for
    /// other endpoints).
    pub fn disk_bytes(&self) -> u64 {
        match &self.endpoint {
            Endpoint::SurrealKv(dir) => {
                let snapshot = std::fs::metadata(dir.join(SNAPSHOT_FILE)).map_or(0, |m| m.len());
                dir_size(dir).saturating_sub(snapshot)
            }
            _ => 0,
        }
    }
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// About the most a bulk write (a restore's transaction, an import's batch of notes)
/// puts in one transaction: a transaction must fit in SurrealKV's memtable, which may be
/// as small as 16 MiB (`KASTEN_DB_MEMTABLE_MB`), and 500 long notes would not.
pub const BULK_WRITE_BYTES: usize = 4 << 20;

/// The size of SurrealKV's data blocks, the unit it reads from disk: a note read by id
/// reads (and checksums, and copies) the whole block that holds it. SurrealKV's default
/// is 64 KiB; at 4 KiB a search's 10 notes of a 20k memory read in 0.28-0.29 ms instead
/// of 0.61-0.65 (0.99 instead of 1.47 through a query; measure build, the memory built
/// each way). Tables written before take it on as compaction rewrites them.
const DATA_BLOCK_BYTES: usize = 4 << 10;

/// Where [`Store::accepted_links_page`] goes on: the last link it returned.
#[derive(Debug, Clone)]
pub struct LinkCursor(surrealdb::types::RecordId);

/// How much memory the embedded datastore may hold, besides Kasten's own indexes.
///
/// SurrealKV sizes both from the machine by default: a block cache of half the RAM less
/// 1 GiB, a memtable of up to 1 GiB (4 GiB on large machines). A personal memory needs
/// far less: the indexes that rank live in Kasten (kasten-index), and what the store
/// reads after ranking is a few notes, kept in the note cache. Override with
/// `KASTEN_DB_CACHE_MB` and `KASTEN_DB_MEMTABLE_MB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageLimits {
    /// SurrealKV's block cache (bytes).
    pub block_cache: u64,
    /// SurrealKV's memtable (bytes); also the largest single transaction it accepts.
    pub memtable: u64,
}

impl Default for StorageLimits {
    fn default() -> Self {
        StorageLimits {
            block_cache: 16 << 20,
            memtable: 128 << 20,
        }
    }
}

impl StorageLimits {
    /// The defaults, with `KASTEN_DB_CACHE_MB` / `KASTEN_DB_MEMTABLE_MB` when set to a
    /// whole number of MiB (anything else is ignored with a warning).
    pub fn from_env() -> Self {
        Self::from_vars(StorageLimits::default(), &|k| std::env::var(k).ok())
    }

    /// The limits for a bulk write of a whole memory (a restore, a vault import), whose
    /// transactions end at about [`BULK_WRITE_BYTES`]: a 32 MiB memtable (SurrealKV holds
    /// up to two while one is flushed; restoring 100k notes peaked ~110 MiB higher with
    /// the default, in the same time), or what `KASTEN_DB_CACHE_MB` /
    /// `KASTEN_DB_MEMTABLE_MB` say.
    pub fn for_bulk_writes_from_env() -> Self {
        let base = StorageLimits {
            memtable: 32 << 20,
            ..StorageLimits::default()
        };
        Self::from_vars(base, &|k| std::env::var(k).ok())
    }

    fn from_vars(base: StorageLimits, var: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut limits = base;
        let read = |name: &str, min_mb: u64, into: &mut u64| {
            if let Some(v) = var(name) {
                match v.trim().parse::<u64>() {
                    Ok(mb) if mb >= min_mb => *into = mb << 20,
                    _ => tracing::warn!(
                        "ignoring {name}={v}: expected a whole number of MiB, at least {min_mb}"
                    ),
                }
            }
        };
        read("KASTEN_DB_CACHE_MB", 1, &mut limits.block_cache);
        read("KASTEN_DB_MEMTABLE_MB", 16, &mut limits.memtable);
        limits
    }
}

/// Opens an embedded datastore as the SDK's `connect` does, with SurrealKV's cache and
/// memtable capped by `limits` (the SDK passes no storage settings to an embedded
/// datastore, so it is built here and handed to the SDK).
async fn open_embedded(url: &str, limits: &StorageLimits) -> Result<notecache::Conn, String> {
    use surrealdb_cnf::ConfigMap;
    use surrealdb_core::kvs::Datastore;
    let config = ConfigMap::empty()
        .with_key_value(
            "surrealkv_block_cache_capacity",
            limits.block_cache.to_string(),
        )
        .with_key_value("surrealkv_max_memtable_size", limits.memtable.to_string())
        .with_key_value("surrealkv_block_size", DATA_BLOCK_BYTES.to_string());
    // the maintenance tasks start only once the version key is settled (as the SDK does:
    // a task's write before it would make a new datastore look like an old one)
    let ds = Datastore::builder()
        .with_config(config)
        .without_maintenance_tasks()
        .build_with_path(url)
        .await
        .map_err(|e| e.to_string())?;
    ds.check_version().await.map_err(|e| e.to_string())?;
    ds.bootstrap().await.map_err(|e| e.to_string())?;
    ds.start_maintenance_tasks();
    let db = surrealdb::Surreal::<surrealdb::engine::local::Db>::unstable_from_datastore(
        ds.clone(),
        None,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(notecache::Conn::Local(db, ds))
}

/// Creates the data directory and checks it is writable, so that a read-only or full
/// disk is reported in plain words before the database engine sees it.
fn prepare_dir(dir: &Path) -> Result<(), StoreError> {
    let err = |message: String| StoreError::DataDir {
        path: dir.display().to_string(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    let probe: PathBuf = dir.join(".kasten-write-check");
    std::fs::write(&probe, b"ok").map_err(|e| err(format!("it is not writable ({e})")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Waits (up to 30 s) until SurrealKV's LOCK file can be locked, i.e. its shutdown after
/// the last handle was dropped has finished.
async fn wait_for_unlock(dir: &Path) {
    let lock = dir.join("LOCK");
    let start = std::time::Instant::now();
    let deadline = start + Duration::from_secs(30);
    loop {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock)
        {
            Ok(f) => {
                if f.try_lock().is_ok() {
                    let _ = f.unlock();
                    tracing::debug!(
                        waited_ms = start.elapsed().as_millis() as u64,
                        "store closed"
                    );
                    return;
                }
            }
            // no LOCK file: nothing holds the directory
            Err(_) => return,
        }
        if std::time::Instant::now() > deadline {
            tracing::warn!(path = %lock.display(), "database did not release its lock within 30 s");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests;
