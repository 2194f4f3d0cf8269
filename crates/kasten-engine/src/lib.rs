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
mod consolidate;
mod errors;
mod fading;
pub mod files;
mod lifecycle;
mod manual;
mod merge;
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
    BOTH_TRUE, CONFLICT_TRIES, ConflictError, Endpoint, SNAPSHOT_FILE, SUPERSEDES, StorageLimits,
    retry_on_conflict,
};
pub use lifecycle::{
    ARCHIVE_THRESHOLD_SETTING, ArchiveCandidate, FOLLOW_LINKS_SETTING, FollowLinks,
    REINFORCE_SETTING, ReinforceOn, STRENGTH_WEIGHT_SETTING,
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

/// The setting key under which the store records the embedding model in use.
const EMBEDDING_SETTING: &str = "embedding_model";
/// Notes read per page while rebuilding the indexes.
const LOAD_PAGE: usize = 2000;
/// Notes embedded per call while re-embedding.
const REEMBED_BATCH: usize = 128;

struct Indexes {
    vector: VectorIndex,
    text: TextIndex,
    /// Accepted links, both directions, for link expansion.
    links: std::collections::HashMap<NoteId, Vec<NoteId>>,
    /// Notes by time and source stream, for context expansion and dates.
    timeline: Timeline,
}

/// A ranked list of (note, score), best first.
type Ranked = Vec<(NoteId, f32)>;

/// Makes `a` and `b` neighbours in the link adjacency `links`.
fn link_into(links: &mut HashMap<NoteId, Vec<NoteId>>, a: &NoteId, b: &NoteId) {
    for (x, y) in [(a, b), (b, a)] {
        let v = links.entry(x.clone()).or_default();
        if !v.contains(y) {
            v.push(y.clone());
        }
    }
}

/// Accepted links are read from the store this many at a time (300k links read at once
/// were a ~100 MB spike at the end of a restore).
const LINK_PAGE: usize = 10_000;

impl Indexes {
    /// The `n` best notes by vector similarity to `query_vec` and by BM25 for `query`, one
    /// list after the other: at 100k notes the vector list takes ~0.2 ms (it reads the
    /// nearest clusters' codes only), and a second thread for the keyword list cost more
    /// to start than it saved (docs/BENCHMARKS.md).
    fn both_lists(
        &self,
        query: &str,
        query_vec: &[f32],
        n: usize,
    ) -> Result<(Ranked, Ranked), CoreError> {
        Ok((
            self.vector.search(query_vec, n)?,
            self.text.search(query, n),
        ))
    }

    /// Puts a note in the vector, text and time indexes, or replaces what they held of it.
    fn add_note(&mut self, note: &Note, vector: &[f32], text: &str) -> Result<(), CoreError> {
        self.vector.upsert(note.id.clone(), vector)?;
        self.text.upsert(note.id.clone(), text);
        self.timeline
            .upsert(note.id.clone(), note.source.as_deref(), note.created_at);
        Ok(())
    }

    /// Room for `additional` more notes in the vector and text indexes.
    fn reserve(&mut self, additional: usize) {
        self.vector.reserve(additional);
        self.text.reserve(additional);
    }

    /// New notes of a bulk write, the active ones (the indexes hold nothing else).
    fn add_new_notes(
        &mut self,
        notes: &[Note],
        vectors: &[Vec<f32>],
        texts: &[String],
    ) -> Result<(), CoreError> {
        for ((n, v), text) in notes.iter().zip(vectors).zip(texts) {
            if n.status == NoteStatus::Active {
                self.add_note(n, v, text)?;
            }
        }
        Ok(())
    }

    fn add_link(&mut self, a: &NoteId, b: &NoteId) {
        link_into(&mut self.links, a, b);
    }

    /// `a` and `b` are no longer neighbours.
    fn remove_link(&mut self, a: &NoteId, b: &NoteId) {
        for (x, y) in [(a, b), (b, a)] {
            if let Some(v) = self.links.get_mut(x) {
                v.retain(|n| n != y);
                if v.is_empty() {
                    self.links.remove(x);
                }
            }
        }
    }

    fn remove_note(&mut self, id: &NoteId) {
        self.vector.remove(id);
        self.text.remove(id);
        self.timeline.remove(id);
        if let Some(ns) = self.links.remove(id) {
            for n in ns {
                if let Some(v) = self.links.get_mut(&n) {
                    v.retain(|x| x != id);
                }
            }
        }
    }
}

/// A note with its links, as `show` presents it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoteDetail {
    #[serde(flatten)]
    pub note: Note,
    pub links: Vec<Link>,
    /// When the note's fact became true: a date in its text, else its source's, else its
    /// time ([`kasten_core::validity`]; derived from the note, never stored).
    #[serde(default)]
    pub valid_from: chrono::DateTime<chrono::Utc>,
    /// Until when it was true: the `valid_from` of the note that superseded it (an
    /// accepted `supersedes` link); none while it is current.
    #[serde(default)]
    pub valid_until: Option<chrono::DateTime<chrono::Utc>>,
    /// The note that superseded it, since when and what changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<SupersededBy>,
}

/// An open memory.
pub struct Engine {
    store: Store,
    embedder: Arc<dyn Embedder>,
    indexes: RwLock<Indexes>,
    llm: Option<LlmClient>,
    /// The LLM in words ("built-in SmolLM2-135M"), and why there is none.
    llm_label: String,
    llm_problem: Option<String>,
    /// Embeddings of tags and keyword candidates, for the guided prompts' shortlists.
    term_vectors: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
    pipeline: PipelineOptions,
    /// `retrieval.strength_weight`, read at open (0: off).
    strength_weight: AtomicF64,
    /// `retrieval.reinforce`, read at open ([`lifecycle::ReinforceOn`] as a number).
    reinforce_on: std::sync::atomic::AtomicU8,
    /// `retrieval.follow_links`, read at open ([`lifecycle::FollowLinks`] as a number).
    follow_links: std::sync::atomic::AtomicU8,
    /// Starts the name of every job worker of this engine: unique to this open (process
    /// id and a ULID), so that `close` can give back exactly the jobs it still holds.
    worker_prefix: String,
    /// The index snapshot file (embedded stores only).
    snapshot_path: Option<PathBuf>,
    /// The indexes were read from the snapshot the store vouches for.
    from_snapshot: AtomicBool,
    /// A committed write may be missing from the indexes (see [`IndexSync`]).
    diverged: AtomicBool,
    /// Set by [`Engine::close_shared`]: LLM calls in flight are abandoned (before their
    /// single write) and enrichment passes stop, so the last holder lets go promptly.
    closing: tokio::sync::watch::Sender<bool>,
    /// Orders every store write that changes indexed data with the index update that
    /// follows it ([`Engine::index_order`]), so the indexes apply writes in commit order.
    write_order: tokio::sync::Mutex<()>,
    /// Where the LLM API key is kept outside the memory (`secrets.rs`).
    keys: Arc<dyn secrets::KeyStore>,
    /// Tests: every other write waits between its commit and its index update.
    #[cfg(test)]
    stagger: std::sync::atomic::AtomicU64,
}

/// Taken right after a store write that changes indexed data returned `Ok`, and
/// [`IndexSync::done`] once the indexes show it; dropped before that (an error or a
/// cancel in between), it marks the indexes as possibly behind the store, and the close
/// then writes no snapshot.
#[must_use]
struct IndexSync<'a> {
    diverged: &'a AtomicBool,
    done: bool,
}

impl IndexSync<'_> {
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for IndexSync<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.diverged.store(true, Ordering::SeqCst);
        }
    }
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

/// Opens the store, again if the open lost a race: processes starting together on a new
/// memory on a SurrealDB server all try its migrations, and the transactions that lose
/// fail with a conflict; opening again finds the migrations applied (docs/SERVER.md).
async fn open_store(
    endpoint: &Endpoint,
    limits: Option<&StorageLimits>,
) -> Result<Store, StoreError> {
    let limits = limits.copied().unwrap_or_else(StorageLimits::from_env);
    retry_on_conflict("opening the memory", || {
        Store::open_with_limits(endpoint, &limits)
    })
    .await
}

/// Stack size for the threads of a runtime that opens and queries a memory. SurrealDB's
/// embedded engine nests deeply: a debug build needs more than the 2 MiB a thread gets by
/// default (a restore overflowed it), a release build far less. The app and the CLI build
/// their runtimes with it ([`runtime`]); `cargo test` and `cargo run` get it from
/// `.cargo/config.toml`.
pub const THREAD_STACK_BYTES: usize = 8 << 20;

/// The multi-threaded runtime the app and the CLI run the engine on, its threads given
/// [`THREAD_STACK_BYTES`].
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(THREAD_STACK_BYTES)
        .build()
}

/// Everything [`Engine::open_with`] can be given besides the store and the embedder.
#[derive(Default)]
pub struct EngineOptions {
    /// The LLM for enrichment; without one notes stay pending (and say why).
    pub llm: Option<LlmClient>,
    pub pipeline: PipelineOptions,
    /// The embedded datastore's memory limits; `None`: the defaults and the environment
    /// ([`StorageLimits::from_env`]).
    pub storage: Option<StorageLimits>,
}

impl Engine {
    /// Opens the memory at `endpoint`, rebuilds the indexes and re-embeds whatever the
    /// current model has not embedded yet.
    pub async fn open(
        endpoint: &Endpoint,
        embedder: Arc<dyn Embedder>,
        progress: ProgressFn<'_>,
    ) -> Result<Self, EngineError> {
        Self::open_with(endpoint, embedder, EngineOptions::default(), progress).await
    }

    /// [`Engine::open`] with an LLM and pipeline options.
    pub async fn open_with(
        endpoint: &Endpoint,
        embedder: Arc<dyn Embedder>,
        options: EngineOptions,
        progress: ProgressFn<'_>,
    ) -> Result<Self, EngineError> {
        let store = open_store(endpoint, options.storage.as_ref()).await?;
        let snapshot_path = snapshot::path_for(endpoint);
        let mut vector = VectorIndex::new(embedder.dim());
        // until a snapshot holds them, the f32 rows of new vectors go to a file beside it
        if let Some(dir) = snapshot_path.as_deref().and_then(Path::parent) {
            match snapshot::SpillFile::create_in(dir) {
                Ok(f) => vector.spill_rows_to(Arc::new(f)),
                Err(e) => tracing::warn!(
                    dir = %dir.display(),
                    "could not create a file for the vectors; they stay in RAM: {e}"
                ),
            }
        }
        let engine = Engine {
            store,
            indexes: RwLock::new(Indexes {
                vector,
                text: TextIndex::new(),
                links: Default::default(),
                timeline: Timeline::new(),
            }),
            embedder,
            llm_label: options
                .llm
                .as_ref()
                .map_or_else(|| "none".to_owned(), |c| c.config().model.clone()),
            llm_problem: None,
            term_vectors: Default::default(),
            llm: options.llm,
            pipeline: options.pipeline,
            strength_weight: AtomicF64::default(),
            reinforce_on: std::sync::atomic::AtomicU8::new(0),
            follow_links: std::sync::atomic::AtomicU8::new(0),
            worker_prefix: format!("{}-{}-", std::process::id(), JobId::generate()),
            snapshot_path,
            from_snapshot: AtomicBool::new(false),
            diverged: AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            write_order: tokio::sync::Mutex::new(()),
            keys: Arc::new(secrets::OsKeyring),
            #[cfg(test)]
            stagger: std::sync::atomic::AtomicU64::new(0),
        };
        // One process owns an embedded store (LOCK file), so jobs left `running` there were
        // held by a process that died: they go back to the queue at once. On a server the
        // lease decides.
        if !matches!(endpoint, Endpoint::Remote(_))
            && let Err(e) = engine.store.requeue_running_jobs().await
        {
            engine.close().await;
            return Err(e.into());
        }
        match engine.open_indexes(progress).await {
            Ok(()) => Ok(engine),
            Err(e) => {
                engine.close().await;
                Err(e)
            }
        }
    }

    /// Gives back the jobs this engine's workers still hold (a run cut off by the exit),
    /// then closes the store and waits until it is safely on disk. Call on every exit path.
    pub async fn close(self) {
        match self.store.release_jobs_of(&self.worker_prefix).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(jobs = n, "gave back unfinished enrichment jobs"),
            // the lease (or, embedded, the next open) still brings them back
            Err(e) => tracing::warn!("could not give back unfinished jobs: {e}"),
        }
        self.save_snapshot().await;
        self.store.close().await;
    }

    /// Closes an engine that others may still hold (the app's commands, the MCP server's
    /// tool calls, an enrichment pass): asks them to stop ([`Engine::begin_close`]), waits
    /// until this is the last handle, then [`Engine::close`]s. Never gives up: everything
    /// that waits long (LLM calls, enrichment passes) stops at the request, and the rest
    /// are single store transactions, so the wait is short; it is logged every 10 s.
    pub async fn close_shared(mut engine: Arc<Engine>) {
        engine.begin_close();
        let started = Instant::now();
        let mut next_log = 10;
        loop {
            match Arc::try_unwrap(engine) {
                Ok(e) => {
                    e.close().await;
                    return;
                }
                Err(still_shared) => {
                    engine = still_shared;
                    if started.elapsed().as_secs() >= next_log {
                        tracing::warn!(
                            holders = Arc::strong_count(&engine) - 1,
                            "still waiting for work in flight before closing the memory"
                        );
                        next_log += 10;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        }
    }

    /// Asks everything running on this engine to stop: LLM calls in flight end with
    /// [`EngineError::Closing`] before they write, enrichment passes claim no more jobs.
    pub fn begin_close(&self) {
        self.closing.send_replace(true);
    }

    /// Whether [`Engine::begin_close`] was called.
    pub fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    /// Runs `work` unless the engine starts closing first (then `work` is dropped).
    async fn unless_closing<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, EngineError> {
        let mut closing = self.closing.subscribe();
        tokio::select! {
            out = work => Ok(out),
            _ = closing.wait_for(|c| *c) => Err(EngineError::Closing),
        }
    }

    /// Reads the indexes from the snapshot the store vouches for, else rebuilds them.
    async fn open_indexes(&self, progress: ProgressFn<'_>) -> Result<(), EngineError> {
        if let Some(path) = &self.snapshot_path
            && self.store.sealed_snapshot().is_none()
            && path.exists()
        {
            tracing::info!(
                path = %path.display(),
                "the index snapshot is older than the memory's last change; rebuilding the indexes from the store"
            );
        }
        if let (Some(path), Some(generation)) = (&self.snapshot_path, self.store.sealed_snapshot())
        {
            let t0 = Instant::now();
            let (path, generation) = (path.clone(), generation.to_owned());
            let model = self.embedder.model_id().to_owned();
            let dim = self.embedder.dim();
            let read = tokio::task::spawn_blocking(move || {
                let want = snapshot::Expect {
                    generation: &generation,
                    model: &model,
                    dim,
                };
                snapshot::read(&path, want).map_err(|e| (path, e))
            })
            .await
            .map_err(|e| {
                EngineError::Internal(format!("reading the index snapshot failed: {e}"))
            })?;
            match read {
                Ok(ix) => {
                    let n = ix.text.len() as u64;
                    *self.write_indexes()? = ix;
                    self.from_snapshot.store(true, Ordering::SeqCst);
                    progress(Progress::Loading { done: n, total: n });
                    tracing::info!(
                        notes = n,
                        ms = t0.elapsed().as_millis() as u64,
                        "read the indexes from the snapshot"
                    );
                    return self.finish_open().await;
                }
                Err((path, e)) if !matches!(&e, snapshot::SnapshotFileError::Io(io) if io.kind() == std::io::ErrorKind::NotFound) =>
                {
                    tracing::warn!(
                        path = %path.display(),
                        "the index snapshot is not used ({e}); rebuilding the indexes from the store"
                    );
                }
                Err(_) => {
                    tracing::info!("no index snapshot; rebuilding the indexes from the store");
                }
            }
        }
        self.load(progress).await
    }

    /// At close: saves the indexes for the next open unless the snapshot on disk already
    /// shows them (read at open, nothing indexed written since), or they may be behind
    /// the store. A failure is logged; the next open then rebuilds.
    async fn save_snapshot(&self) {
        let Some(path) = &self.snapshot_path else {
            return;
        };
        if self.store.index_writes_uncertain() || self.diverged.load(Ordering::SeqCst) {
            tracing::warn!(
                "a write was cut off before the indexes showed it: no index snapshot (the next open rebuilds)"
            );
            return;
        }
        if self.from_snapshot.load(Ordering::SeqCst) && self.store.sealed_snapshot().is_some() {
            return;
        }
        let t0 = Instant::now();
        let generation = JobId::generate().to_string();
        // written under the read lock section by section into a temporary file (page
        // cache, not memory); synced and put in place after the lock is released
        let written = self.read_indexes().map(|ix| {
            snapshot::write_temp(
                path,
                &ix,
                snapshot::Expect {
                    generation: &generation,
                    model: self.embedder.model_id(),
                    dim: self.embedder.dim(),
                },
            )
        });
        let written = match written {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => {
                tracing::warn!(path = %path.display(), "could not write the index snapshot: {e}");
                return;
            }
            Err(e) => {
                tracing::warn!("no index snapshot: {e}");
                return;
            }
        };
        let size = written.bytes;
        let target = path.clone();
        let committed = tokio::task::spawn_blocking(move || written.commit(&target)).await;
        match committed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(path = %path.display(), "could not write the index snapshot: {e}");
                return;
            }
            Err(e) => {
                tracing::warn!("could not write the index snapshot: {e}");
                return;
            }
        }
        match self.store.seal_snapshot(&generation).await {
            Ok(()) => tracing::info!(
                bytes = size,
                ms = t0.elapsed().as_millis() as u64,
                "saved the index snapshot"
            ),
            Err(e) => tracing::warn!("could not record the index snapshot in the store: {e}"),
        }
    }

    /// Taken before a store write that changes indexed data and held until the indexes
    /// show it. Without it two writers could commit A then B and update the indexes B
    /// then A, leaving the older write in the indexes (an edit committed while an
    /// enrichment or a review action of the same note was between its commit and its
    /// index update). Never taken twice by one task: helpers called under it
    /// (`index_note`) do not take it.
    async fn index_order(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.write_order.lock().await
    }

    /// Tests: widens the step from a commit to its index update for every other write.
    #[cfg(test)]
    async fn after_commit(&self) {
        // 0: off; else the writes numbered from it, and the even ones wait
        if self.stagger.load(Ordering::SeqCst) > 0
            && self
                .stagger
                .fetch_add(1, Ordering::SeqCst)
                .is_multiple_of(2)
        {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// A guard for the step from a committed write to the index update; see [`IndexSync`].
    fn index_sync(&self) -> IndexSync<'_> {
        IndexSync {
            diverged: &self.diverged,
            done: false,
        }
    }

    /// The store, for the engine's own tests; everything else goes through the engine.
    #[cfg(test)]
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// The embedder, to open another engine with it without loading the model again.
    pub fn shared_embedder(&self) -> Arc<dyn Embedder> {
        Arc::clone(&self.embedder)
    }

    /// Sets the LLM (None: enrichment waits) and the pipeline options.
    pub fn configure(&mut self, llm: Option<LlmClient>, pipeline: PipelineOptions) {
        self.llm_label = llm
            .as_ref()
            .map_or_else(|| "none".to_owned(), |c| c.config().model.clone());
        self.llm_problem = None;
        self.llm = llm;
        self.pipeline = pipeline;
    }

    /// Uses the LLM `choice` names (see [`settings`]); its profile decides the prompts.
    pub fn configure_choice(&mut self, choice: LlmChoice, mut pipeline: PipelineOptions) {
        pipeline.profile = choice.profile;
        self.llm = choice.client;
        self.llm_label = choice.label;
        self.llm_problem = choice.problem;
        self.pipeline = pipeline;
    }

    /// The LLM in use, in words ("built-in SmolLM2-135M", "Ollama qwen2.5:7b", "none").
    pub fn llm_label(&self) -> &str {
        &self.llm_label
    }

    /// Why no LLM is in use, in words a user can act on.
    pub fn llm_missing_reason(&self) -> String {
        self.llm_problem
            .clone()
            .unwrap_or_else(|| LlmConfig::missing_reason().to_owned())
    }

    /// The pipeline options in force.
    pub fn pipeline_options(&self) -> &PipelineOptions {
        &self.pipeline
    }

    /// Which A-Mem steps enrichment runs from now on (the evaluation's ablations).
    pub fn set_steps(&mut self, steps: Steps) {
        self.pipeline.steps = steps;
    }

    /// The LLM client, if one is configured.
    pub fn llm_client(&self) -> Option<&LlmClient> {
        self.llm.as_ref()
    }

    async fn load(&self, progress: ProgressFn<'_>) -> Result<(), EngineError> {
        let model = self.embedder.model_id().to_owned();
        let total = self.store.count_notes().await?;
        let mut stale: Vec<(NoteId, String)> = Vec::new();
        let mut after: Option<NoteId> = None;
        let mut done = 0u64;
        progress(Progress::Loading { done, total });
        loop {
            let page = self.store.index_rows(after.as_ref(), LOAD_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            let mut ix = self.write_indexes()?;
            for row in page {
                match row.embedding {
                    Some(v)
                        if row.embed_model.as_deref() == Some(model.as_str())
                            && v.len() == ix.vector.dim() =>
                    {
                        ix.vector.upsert(row.id.clone(), &v)?;
                    }
                    _ => stale.push((row.id.clone(), row.text.clone())),
                }
                ix.timeline
                    .upsert(row.id.clone(), row.source.as_deref(), row.created_at);
                ix.text.upsert(row.id, &row.text);
                done += 1;
            }
            drop(ix);
            progress(Progress::Loading {
                done,
                total: total.max(done),
            });
        }
        if !stale.is_empty() {
            self.reembed(stale, progress).await?;
        }
        // a load fills indexes that hold nothing yet (an open, a restore into an empty
        // memory): the adjacency read is the whole of it
        let (links, _) = self.accepted_adjacency().await?;
        self.write_indexes()?.links = links;
        self.finish_open().await
    }

    /// What every open does after the indexes are in place.
    async fn finish_open(&self) -> Result<(), EngineError> {
        let model = self.embedder.model_id().to_owned();
        self.refresh_retrieval_settings().await?;
        let recorded = serde_json::json!({ "model": model, "dim": self.embedder.dim() });
        // processes opening a new memory on a server together all record the model: the
        // writes that lose the race fail with a conflict, and reading again finds it
        retry_on_conflict("recording the embedding model", || async {
            if self.store.get_setting(EMBEDDING_SETTING).await?.as_ref() != Some(&recorded) {
                self.store.set_setting(EMBEDDING_SETTING, &recorded).await?;
            }
            Ok::<(), StoreError>(())
        })
        .await?;
        Ok(())
    }

    /// Embeds `notes` with the current model, stores the vectors and indexes them.
    async fn reembed(
        &self,
        notes: Vec<(NoteId, String)>,
        progress: ProgressFn<'_>,
    ) -> Result<(), EngineError> {
        let total = notes.len() as u64;
        let model = self.embedder.model_id().to_owned();
        let mut done = 0u64;
        progress(Progress::Reembedding { done, total });
        for chunk in notes.chunks(REEMBED_BATCH) {
            let texts: Vec<String> = chunk.iter().map(|(_, t)| t.clone()).collect();
            let vectors = self.embed_blocking(texts).await?;
            for ((id, _), v) in chunk.iter().zip(&vectors) {
                let _order = self.index_order().await;
                self.store.set_embedding(id, v, &model).await?;
                let sync = self.index_sync();
                self.write_indexes()?.vector.upsert(id.clone(), v)?;
                sync.done();
            }
            done += chunk.len() as u64;
            progress(Progress::Reembedding { done, total });
        }
        Ok(())
    }

    fn write_indexes(&self) -> Result<std::sync::RwLockWriteGuard<'_, Indexes>, EngineError> {
        self.indexes
            .write()
            .map_err(|_| EngineError::Internal("the search index was poisoned by a crash".into()))
    }

    fn read_indexes(&self) -> Result<std::sync::RwLockReadGuard<'_, Indexes>, EngineError> {
        self.indexes
            .read()
            .map_err(|_| EngineError::Internal("the search index was poisoned by a crash".into()))
    }

    /// Runs the (CPU-bound) embedder off the async threads.
    async fn embed_blocking(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EngineError> {
        Ok(self.spawn_embed(texts).wait().await?.1)
    }

    /// Starts embedding `texts` on a blocking thread and returns at once: a bulk write
    /// embeds its next batch while the store writes the current one.
    fn spawn_embed(&self, texts: Vec<String>) -> EmbedTask {
        let embedder = Arc::clone(&self.embedder);
        let handle = tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = embedder.embed(&refs);
            let took = t0.elapsed();
            drop(refs);
            (texts, vectors, took)
        });
        EmbedTask { handle }
    }

    /// Saves one note (durably, with its enrichment job) and indexes it — or, if it repeats
    /// an existing note, merges it into that one (see `merge.rs`; the returned note then
    /// has status `merged`).
    pub async fn add(&self, new: NewNote) -> Result<Note, EngineError> {
        let mut notes = self.save_batch(vec![new], true).await?.notes;
        notes
            .pop()
            .ok_or_else(|| EngineError::Internal("a saved note went missing".into()))
    }

    /// Saves notes in one transaction (all or none) and indexes them: every note is kept as
    /// given (a bulk import of records; imports have their own duplicate check by source).
    pub async fn add_batch(&self, new: Vec<NewNote>) -> Result<AddedBatch, EngineError> {
        self.save_batch(new, false).await
    }

    /// [`Engine::add_batch`] with merge on write: notes that repeat an existing note (or an
    /// earlier one of the batch) are merged into it ([`AddedBatch::merges`]).
    pub async fn add_batch_merging(&self, new: Vec<NewNote>) -> Result<AddedBatch, EngineError> {
        self.save_batch(new, true).await
    }

    /// Many batches, each saved as [`Engine::add_batch`] saves one (its own transaction),
    /// with the next batch embedded while the store writes the current one, so a bulk
    /// write goes at about the embedder's own pace. `saved` is told of each batch once it
    /// is durable and indexed. A failing batch stops the run: the batches before it stay
    /// saved, it and those after it are not.
    pub async fn add_batches<I>(
        &self,
        batches: I,
        mut saved: impl FnMut(AddedBatch),
    ) -> Result<(), EngineError>
    where
        I: IntoIterator<Item = Vec<NewNote>>,
    {
        let mut batches = batches.into_iter();
        let mut next = batches.next().map(|b| self.begin_batch(b));
        while let Some(pending) = next.take() {
            let embedded = pending.embedded().await?;
            next = batches.next().map(|b| self.begin_batch(b));
            saved(self.store_batch(embedded, false).await?);
        }
        Ok(())
    }

    async fn save_batch(&self, new: Vec<NewNote>, merge: bool) -> Result<AddedBatch, EngineError> {
        let embedded = self.begin_batch(new).embedded().await?;
        self.store_batch(embedded, merge).await
    }

    /// New notes made of `new`, their embedding started.
    fn begin_batch(&self, new: Vec<NewNote>) -> PendingBatch {
        let now = Utc::now();
        let dated: Vec<bool> = new.iter().map(|n| n.created_at.is_some()).collect();
        let notes: Vec<Note> = new
            .into_iter()
            .map(|n| Note {
                id: NoteId::generate(),
                content: n.content,
                created_at: n.created_at.unwrap_or(now),
                updated_at: now,
                keywords: Vec::new(),
                tags: Vec::new(),
                context: String::new(),
                status: NoteStatus::Active,
                enrich_state: EnrichState::Pending { reason: None },
                source: n.source,
                strength: 1.0,
                access_count: 0,
                last_accessed: None,
                version: 1,
                tier: Default::default(),
                project: None,
                added_at: now,
                set_by: Vec::new(),
            })
            .collect();
        let texts: Vec<String> = notes.iter().map(Note::index_text).collect();
        PendingBatch {
            notes,
            dated,
            now,
            embedding: self.spawn_embed(texts),
        }
    }

    /// Saves an embedded batch (merging repeats if `merge`) and indexes it.
    async fn store_batch(
        &self,
        batch: EmbeddedBatch,
        merge: bool,
    ) -> Result<AddedBatch, EngineError> {
        let EmbeddedBatch {
            notes,
            dated,
            now,
            texts,
            vectors,
            embed_time,
        } = batch;
        let model = self.embedder.model_id().to_owned();
        let writes: Vec<NoteWrite> = notes
            .iter()
            .zip(&vectors)
            .map(|(n, v)| NoteWrite {
                note: n.clone(),
                embedding: Some(v.clone()),
                embed_model: Some(model.clone()),
                job: Some(JobId::generate()),
            })
            .collect();
        let (notes, writes, merge_writes, merges, mut differs) = if merge {
            let f = self
                .find_merges(notes, writes, &vectors, &dated, now)
                .await?;
            (f.notes, f.writes, f.merges, f.infos, f.differs)
        } else {
            (notes, writes, Vec::new(), Vec::new(), Vec::new())
        };
        if merge && self.merge_options().await?.supersede {
            let accepted = self.policy().await?.links == PolicyMode::Auto;
            let found = self
                .find_supersessions(&notes, &vectors, accepted, now)
                .await?;
            // a supersession says more than "contradicts" about the same two notes
            differs.retain(|d| {
                !found.iter().any(|s| {
                    (s.from == d.from && s.to == d.to) || (s.from == d.to && s.to == d.from)
                })
            });
            differs.extend(found);
        }
        // what depended on a value replaced at once: flagged in the same transaction
        let flags = self.flags_on_write(&differs, now).await?;
        let t1 = Instant::now();
        let _order = self.index_order().await;
        self.store
            .insert_notes_flagged(&writes, &merge_writes, &differs, &flags)
            .await?;
        let sync = self.index_sync();
        let store_time = t1.elapsed();
        let mut ix = self.write_indexes()?;
        ix.add_new_notes(&notes, &vectors, &texts)?;
        for d in differs.iter().filter(|d| d.accepted) {
            if ix.vector.contains(&d.from) && ix.vector.contains(&d.to) {
                ix.add_link(&d.from, &d.to);
            }
        }
        sync.done();
        Ok(AddedBatch {
            notes,
            merges,
            embed_time,
            store_time,
        })
    }

    pub async fn get(&self, id: &NoteId) -> Result<NoteDetail, EngineError> {
        let note = self
            .store
            .get_note(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(id.clone()))?;
        let links = self.store.links_of(id).await?;
        let (valid_from, superseded_by) = self.validity_of(&note).await?;
        Ok(NoteDetail {
            note,
            links,
            valid_from,
            valid_until: superseded_by.as_ref().map(|s| s.since),
            superseded_by,
        })
    }

    /// Newest notes first.
    pub async fn list(&self, limit: usize, offset: usize) -> Result<Vec<Note>, EngineError> {
        Ok(self.store.list_notes(limit, offset).await?)
    }

    pub async fn count(&self) -> Result<u64, EngineError> {
        Ok(self.store.count_notes().await?)
    }

    /// How many notes [`Engine::list`] can show (every status but merged), and how many
    /// are merged into another note (hidden until the merge is undone).
    pub async fn list_counts(&self) -> Result<ListCounts, EngineError> {
        let (total, merged) = self.store.count_listed_and_merged().await?;
        Ok(ListCounts { total, merged })
    }

    /// Deletes a note with its links and jobs. Notes merged into it come back as regular
    /// notes (indexed, enrichment queued if they were never enriched).
    pub async fn delete(&self, id: &NoteId) -> Result<(), EngineError> {
        let _order = self.index_order().await;
        let Some(back) = self.store.delete_note(id).await? else {
            return Err(EngineError::NotFound(id.clone()));
        };
        let sync = self.index_sync();
        self.write_indexes()?.remove_note(id);
        for n in &back {
            self.index_note(n).await?;
        }
        sync.done();
        Ok(())
    }

    /// Writes links (idempotent per from, to and kind, as an import does) and adds the
    /// accepted ones to the link-expansion index; returns how many were new.
    pub async fn insert_links(&self, links: &[ImportedLink]) -> Result<u64, EngineError> {
        let writes: Vec<kasten_store::ImportLinkWrite> =
            links.iter().cloned().map(Into::into).collect();
        let _order = self.index_order().await;
        let created = self.store.insert_import_links(&writes).await?;
        let sync = self.index_sync();
        let mut ix = self.write_indexes()?;
        for l in links
            .iter()
            .filter(|l| l.status == kasten_core::LinkStatus::Accepted)
        {
            if ix.vector.contains(&l.from) && ix.vector.contains(&l.to) {
                ix.add_link(&l.from, &l.to);
            }
        }
        drop(ix);
        sync.done();
        Ok(created)
    }

    /// Rebuilds the link-expansion index from the accepted links in the store (after links
    /// were written outside the pipeline and review, e.g. by an import or a benchmark).
    pub async fn reload_links(&self) -> Result<usize, EngineError> {
        let _order = self.index_order().await;
        let (links, n) = self.accepted_adjacency().await?;
        self.write_indexes()?.links = links;
        Ok(n)
    }

    /// The accepted links between indexed notes as adjacency, read from the store a page
    /// at a time, and how many there are.
    async fn accepted_adjacency(
        &self,
    ) -> Result<(HashMap<NoteId, Vec<NoteId>>, usize), EngineError> {
        let mut links = HashMap::new();
        let mut n = 0;
        let mut after = None;
        loop {
            let (page, next) = self.store.accepted_links_page(after, LINK_PAGE).await?;
            {
                let ix = self.read_indexes()?;
                for (a, b) in &page {
                    if ix.vector.contains(a) && ix.vector.contains(b) {
                        link_into(&mut links, a, b);
                        n += 1;
                    }
                }
            }
            match next {
                Some(cursor) => after = Some(cursor),
                None => return Ok((links, n)),
            }
        }
    }

    /// The indexed vector of a note (None if it is not in the index).
    pub fn vector_of(&self, id: &NoteId) -> Result<Option<Vec<f32>>, EngineError> {
        Ok(self.read_indexes()?.vector.get(id)?.map(|v| v.into_owned()))
    }

    /// Ids of the notes in the in-memory indexes (the active notes), in no set order.
    pub fn indexed_ids(&self) -> Result<Vec<NoteId>, EngineError> {
        Ok(self.read_indexes()?.vector.ids().to_vec())
    }

    /// Notes held by the in-memory indexes (vector, text).
    pub fn index_sizes(&self) -> Result<(usize, usize), EngineError> {
        let ix = self.read_indexes()?;
        Ok((ix.vector.len(), ix.text.len()))
    }

    /// Whether this open read the indexes from the index snapshot (instead of rebuilding
    /// them from the store).
    pub fn opened_from_snapshot(&self) -> bool {
        self.from_snapshot.load(Ordering::SeqCst)
    }

    /// Bytes the vector index holds in RAM (not its f32 rows left in the index snapshot
    /// file when it was read from one).
    pub fn vector_index_bytes(&self) -> Result<usize, EngineError> {
        Ok(self.read_indexes()?.vector.memory_bytes())
    }
}

/// See [`Engine::list_counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCounts {
    pub total: u64,
    pub merged: u64,
}

/// An embedding running on a blocking thread ([`Engine::spawn_embed`]).
struct EmbedTask {
    #[allow(clippy::type_complexity)]
    handle: tokio::task::JoinHandle<(
        Vec<String>,
        Result<Vec<Vec<f32>>, EmbedError>,
        std::time::Duration,
    )>,
}

impl EmbedTask {
    /// The texts back, their vectors, and how long the embedder took.
    async fn wait(self) -> Result<(Vec<String>, Vec<Vec<f32>>, std::time::Duration), EngineError> {
        let (texts, vectors, took) = self
            .handle
            .await
            .map_err(|e| EngineError::Internal(format!("embedding task failed: {e}")))?;
        Ok((texts, vectors?, took))
    }
}

/// New notes of a batch whose embedding is running.
struct PendingBatch {
    notes: Vec<Note>,
    /// Which notes came with their own date (merge on write keeps the older one).
    dated: Vec<bool>,
    now: chrono::DateTime<Utc>,
    embedding: EmbedTask,
}

impl PendingBatch {
    async fn embedded(self) -> Result<EmbeddedBatch, EngineError> {
        let (texts, vectors, embed_time) = self.embedding.wait().await?;
        Ok(EmbeddedBatch {
            notes: self.notes,
            dated: self.dated,
            now: self.now,
            texts,
            vectors,
            embed_time,
        })
    }
}

/// A batch ready to be stored: its notes, their index texts and vectors.
struct EmbeddedBatch {
    notes: Vec<Note>,
    dated: Vec<bool>,
    now: chrono::DateTime<Utc>,
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
    embed_time: std::time::Duration,
}

/// What [`Engine::add_batch`] saved, with where the time went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddedBatch {
    pub notes: Vec<Note>,
    /// Notes of the batch that repeat an existing note and were merged into it.
    pub merges: Vec<MergeInfo>,
    /// The embedder's time for this batch (with any wait for another embedding); under
    /// [`Engine::add_batches`] it overlaps the store's time of the batch before.
    pub embed_time: std::time::Duration,
    /// The store's transaction for this batch.
    pub store_time: std::time::Duration,
}

#[cfg(test)]
mod concurrency_tests;
#[cfg(test)]
mod manual_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod review_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transfer_tests;
