//! Closing a memory: jobs given back, the index snapshot saved, the store closed; and
//! the request to stop that every long wait on the engine listens to.

use super::*;

impl Engine {
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
    pub(crate) async fn unless_closing<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, EngineError> {
        let mut closing = self.closing.subscribe();
        tokio::select! {
            out = work => Ok(out),
            _ = closing.wait_for(|c| *c) => Err(EngineError::Closing),
        }
    }

    /// At close: saves the indexes for the next open unless the snapshot on disk already
    /// shows them (read at open, nothing indexed written since), or they may be behind
    /// the store. A failure is logged; the next open then rebuilds.
    pub(crate) async fn save_snapshot(&self) {
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
}
