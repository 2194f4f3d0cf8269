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
mod config;
mod direct;
mod endpoint;
mod lifecycle;
mod links;
mod manual;
mod notecache;
mod notes;
mod open;
mod pipeline;
mod review;
mod rows;
mod schema;
mod snapshot;
mod supersede;
mod transfer;
pub mod views;
mod words;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kasten_core::lifecycle::Tier;
use kasten_core::provenance::{self, Origin};
use kasten_core::{
    Actor, Enrich, EnrichState, JobId, JobKind, JobState, Link, LinkKind, LinkStatus, Note, NoteId,
    NoteStatus,
};
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
pub use review::{AuditEntry, FieldChange, NewRevision, QueueStates, ReviewBatch, Revision};
pub use supersede::{FlagOrigin, FlagWrite, MAY_BE_OUTDATED, SUPERSEDES, Successor};
pub use transfer::{
    BACKUP_FORMAT, BACKUP_VERSION, ImportLinkWrite, RestoreSummary,
    from_json as backup_value_from_json, to_json as backup_value_to_json,
};

const NAMESPACE: &str = "kasten";
const DATABASE: &str = "memory";

pub use links::LinkCursor;
pub use open::{BULK_WRITE_BYTES, StorageLimits};
pub use rows::*;
use snapshot::SnapshotBook;
pub use snapshot::{SNAPSHOT_FILE, SNAPSHOT_SETTING};

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

/// An open memory database.
pub struct Store {
    /// Every query goes through it (it keeps the note cache in step with writes).
    db: notecache::Db,
    endpoint: Endpoint,
    snapshot: SnapshotBook,
}

#[cfg(test)]
mod tests;
