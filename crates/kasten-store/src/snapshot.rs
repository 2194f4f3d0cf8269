//! What the store knows about the engine's index snapshot: the seal a clean close
//! stores, removed by the first write of a later session that changes indexed data.

use super::*;

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
pub(crate) struct SnapshotBook {
    /// The generation found at open.
    pub(crate) sealed: Option<String>,
    /// Set once the seal is removed from the store in this session.
    pub(crate) unsealed: tokio::sync::OnceCell<()>,
    /// Writes that changed indexed data and returned `Ok`.
    pub(crate) writes: AtomicU64,
    /// A write that changes indexed data was cut off or failed in a way that may have
    /// committed it: the engine's indexes may not show it.
    pub(crate) uncertain: AtomicBool,
}

/// Held while a write that changes indexed data runs; see [`SnapshotBook`].
pub(crate) struct IndexWrite<'a> {
    pub(crate) book: &'a SnapshotBook,
    pub(crate) finished: bool,
}

impl IndexWrite<'_> {
    /// Records how the write ended and passes its result on.
    pub(crate) fn finish<T>(mut self, r: Result<T, StoreError>) -> Result<T, StoreError> {
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
    pub(crate) async fn index_write(&self) -> Result<IndexWrite<'_>, StoreError> {
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
}
