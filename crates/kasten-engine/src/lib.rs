//! Kasten's engine: the one place that combines the store, the embedder and the
//! in-process indexes. The CLI, the desktop shell and the MCP server all call into it.
//!
//! Invariants:
//! - The store is written first; the in-memory indexes are updated only after the write
//!   committed. A failed write leaves both unchanged.
//! - The indexes hold exactly the active notes of the store, embedded by the current
//!   model: at open they are read from the index snapshot when the store vouches for it
//!   (`snapshot.rs`), else rebuilt from the store, and notes embedded by another model
//!   (or not at all) are re-embedded first, with progress, so vectors are never mixed.
//! - A write that changes indexed data and the index update that follows it are one
//!   step for the snapshot: if the update may have been missed (an error or a cancel
//!   between the two), the close writes no snapshot and the next open rebuilds.

mod both_true;
mod boxes;
mod chat;
mod close;
mod config;
mod consolidate;
mod errors;
mod fading;
pub mod files;
mod indexes;
mod lifecycle;
mod links;
mod manual;
mod merge;
mod notes;
mod open;
mod pipeline;
mod quality;
mod read;
pub mod replace;
mod review;
mod search;
pub mod secrets;
pub mod settings;
mod shell;
mod snapshot;
mod supersede;
#[cfg(feature = "testing")]
pub mod testing;
mod transfer;
mod use_llm;
pub mod views;
pub mod worker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use chrono::Utc;
use kasten_core::bm25::TextIndex;
use kasten_core::timeline::Timeline;
use kasten_core::vector::VectorIndex;
use kasten_core::{CoreError, EnrichState, JobId, Link, NewNote, Note, NoteId, NoteStatus};
use kasten_embed::{EmbedError, Embedder};
use kasten_store::{NoteWrite, Store, StoreError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use boxes::{BoxInfo, BoxReport};
pub use chat::{Answer, AnswerNote, AskOptions, ChatTurn, Retrieval};
pub use consolidate::{ConsolidateOptions, ConsolidateProgress, ConsolidateSummary};
pub use errors::ErrorKind;
pub use fading::Lifecycle;
pub use kasten_llm::{LlmClient, LlmConfig};
pub use kasten_store::{
    CONFLICT_TRIES, ConflictError, Endpoint, SNAPSHOT_FILE, SUPERSEDES, StorageLimits,
    retry_on_conflict,
};
pub use lifecycle::{
    ARCHIVE_THRESHOLD_SETTING, ArchiveCandidate, AutoSwitch, FOLLOW_LINKS_SETTING,
    REINFORCE_SETTING, ReinforceOn, SEARCH_TERMS_SETTING, STRENGTH_WEIGHT_SETTING,
};
pub use manual::{DEFAULT_LINK_KIND, agent_actor, is_agent, link_kinds};
pub use merge::{MERGE_SETTING, MergeInfo, MergeOptions, jaccard as merge_jaccard};
pub use pipeline::{
    JobOutcome, ModelProfile, PipelineOptions, Policy, PolicyMode, RunSummary, Steps,
};
pub use read::{
    BackupFile, Change, DayCount, EventSummary, Fields, GraphLink, GraphNode, ImportedLink,
    JobCounts, ModelUsage, NoteFilter, ProjectState, RestoreSummary, Successor, TableProgress,
    TableProgressFn,
};
pub use replace::{Replaced, StagedRestore};
pub use review::{FieldEdit, HistoryEntry, OutdatedFlag, ReviewItem, ReviewOutcome, ReviewStatus};
pub use search::{SearchHit, SearchOptions, SearchOutput, SearchTimings};
pub use settings::{LlmChoice, LlmSettings, LlmSource, SettingError, validate_setting};
pub use supersede::SupersededBy;
pub use transfer::{BoxLabel, ExportFile, ImportProgress, ImportSummary, NewId};
pub use use_llm::LlmPick;
pub use worker::{Pass, Worker, run_worker, shutdown_signal};

/// Errors the engine reports; every variant reads as a sentence for the user.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error(transparent)]
    Invalid(#[from] CoreError),
    #[error("no note with id {0}")]
    NotFound(NoteId),
    #[error("the search query is empty")]
    EmptyQuery,
    #[error("{}", kasten_llm::LlmConfig::missing_reason())]
    NoLlm,
    #[error("nothing with id {0}: not a link, an edit (revision) or an event")]
    UnknownItem(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the language model failed: {0}")]
    Llm(String),
    /// A file or folder to import could not be read (the message names it).
    #[error("{0}")]
    File(String),
    #[error(transparent)]
    Setting(#[from] settings::SettingError),
    #[error("internal error: {0}")]
    Internal(String),
    /// The memory is being closed; what was being waited for was abandoned before it
    /// wrote anything.
    #[error("Kasten is closing the memory; nothing was lost, try again after it reopens")]
    Closing,
}

/// Long work the engine reports while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Reading notes into the in-memory indexes.
    Loading { done: u64, total: u64 },
    /// Embedding notes whose vectors are missing or came from another model.
    Reembedding { done: u64, total: u64 },
}

/// A progress sink; `&|_| {}` when nobody is watching.
pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Send + Sync);

use indexes::{Indexes, LINK_PAGE, link_into};
pub use notes::{AddedBatch, ListCounts, NoteDetail};
#[cfg(test)]
use open::EMBEDDING_SETTING;
pub use open::{EngineOptions, THREAD_STACK_BYTES, runtime};

/// An open memory.
pub struct Engine {
    store: Store,
    embedder: Arc<dyn Embedder>,
    indexes: RwLock<Indexes>,
    llm: Option<LlmClient>,
    /// The LLM in words ("built-in Qwen2.5-Coder-0.5B"), and why there is none.
    llm_label: String,
    llm_problem: Option<String>,
    /// Embeddings of tags and keyword candidates, for the guided prompts' shortlists.
    term_vectors: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
    pipeline: PipelineOptions,
    /// `retrieval.strength_weight`, read at open (0: off).
    strength_weight: AtomicF64,
    /// `retrieval.reinforce`, read at open ([`lifecycle::ReinforceOn`] as a number).
    reinforce_on: std::sync::atomic::AtomicU8,
    /// `retrieval.follow_links`, read at open ([`lifecycle::AutoSwitch`] as a number).
    follow_links: std::sync::atomic::AtomicU8,
    /// `retrieval.search_terms`, read at open ([`lifecycle::AutoSwitch`] as a number).
    search_terms: std::sync::atomic::AtomicU8,
    /// Starts the name of every job worker of this engine: unique to this open (process
    /// id and a ULID), so that `close` can give back exactly the jobs it still holds.
    worker_prefix: String,
    /// The index snapshot file (embedded stores only).
    snapshot_path: Option<PathBuf>,
    /// The indexes were read from the snapshot the store vouches for.
    from_snapshot: AtomicBool,
    /// A committed write may be missing from the indexes (see [`indexes::IndexSync`]).
    diverged: AtomicBool,
    /// Set by [`Engine::close_shared`]: LLM calls in flight are abandoned (before their
    /// single write) and enrichment passes stop, so the last holder lets go promptly.
    closing: tokio::sync::watch::Sender<bool>,
    /// Orders every store write that changes indexed data with the index update that
    /// follows it ([`Engine::index_order`]), so the indexes apply writes in commit order.
    write_order: tokio::sync::Mutex<()>,
    /// Supersessions filed outside the write path (consolidation, the LLM's word on a pair)
    /// look for an existing link and write theirs under this lock, so two of them running
    /// at once (the app's idle pass and `kasten consolidate` served by it) never file the
    /// same pair twice (the store's unique index refused the second, failing that walk).
    filing: tokio::sync::Mutex<()>,
    /// Where the LLM API key is kept outside the memory (`secrets.rs`).
    keys: Arc<dyn secrets::KeyStore>,
    /// Tests: every other write waits between its commit and its index update.
    #[cfg(test)]
    stagger: std::sync::atomic::AtomicU64,
}

/// An f64 shared without a lock.
#[derive(Default)]
struct AtomicF64(std::sync::atomic::AtomicU64);

impl AtomicF64 {
    fn load(&self) -> f64 {
        f64::from_bits(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
    fn store(&self, x: f64) {
        self.0
            .store(x.to_bits(), std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod concurrency_tests;
#[cfg(test)]
mod manual_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod pipeline_person_tests;
#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod review_rollback_tests;
#[cfg(test)]
mod review_tests;
#[cfg(test)]
mod snapshot_review_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transfer_tests;
