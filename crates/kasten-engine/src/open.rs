//! Opening a memory: the store (again if the open lost a race), the indexes from the
//! snapshot or rebuilt from the store, notes of another model re-embedded.

use super::*;

/// The setting key under which the store records the embedding model in use.
pub(crate) const EMBEDDING_SETTING: &str = "embedding_model";
/// Notes read per page while rebuilding the indexes.
pub(crate) const LOAD_PAGE: usize = 2000;
/// Notes embedded per call while re-embedding.
pub(crate) const REEMBED_BATCH: usize = 128;

/// Opens the store, again if the open lost a race: processes starting together on a new
/// memory on a SurrealDB server all try its migrations, and the transactions that lose
/// fail with a conflict; opening again finds the migrations applied (docs/SERVER.md).
pub(crate) async fn open_store(
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
            search_terms: std::sync::atomic::AtomicU8::new(0),
            worker_prefix: format!("{}-{}-", std::process::id(), JobId::generate()),
            snapshot_path,
            from_snapshot: AtomicBool::new(false),
            diverged: AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            write_order: tokio::sync::Mutex::new(()),
            filing: tokio::sync::Mutex::new(()),
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

    /// Reads the indexes from the snapshot the store vouches for, else rebuilds them.
    pub(crate) async fn open_indexes(&self, progress: ProgressFn<'_>) -> Result<(), EngineError> {
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

    pub(crate) async fn load(&self, progress: ProgressFn<'_>) -> Result<(), EngineError> {
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
    pub(crate) async fn finish_open(&self) -> Result<(), EngineError> {
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
    pub(crate) async fn reembed(
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
}
