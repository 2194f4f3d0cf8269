//! The in-memory indexes (vector, text, links, timeline) behind their lock, and the
//! order and guard that keep them in step with the store's writes.

use super::*;

pub(crate) struct Indexes {
    pub(crate) vector: VectorIndex,
    pub(crate) text: TextIndex,
    /// Accepted links, both directions, for link expansion.
    pub(crate) links: std::collections::HashMap<NoteId, Vec<NoteId>>,
    /// Notes by time and source stream, for context expansion and dates.
    pub(crate) timeline: Timeline,
}

/// A ranked list of (note, score), best first.
pub(crate) type Ranked = Vec<(NoteId, f32)>;

/// Makes `a` and `b` neighbours in the link adjacency `links`.
pub(crate) fn link_into(links: &mut HashMap<NoteId, Vec<NoteId>>, a: &NoteId, b: &NoteId) {
    for (x, y) in [(a, b), (b, a)] {
        let v = links.entry(x.clone()).or_default();
        if !v.contains(y) {
            v.push(y.clone());
        }
    }
}

/// Accepted links are read from the store this many at a time (300k links read at once
/// were a ~100 MB spike at the end of a restore).
pub(crate) const LINK_PAGE: usize = 10_000;

impl Indexes {
    /// The `n` best notes by vector similarity to `query_vec` and by BM25 for `query`, one
    /// list after the other: at 100k notes the vector list takes ~0.2 ms (it reads the
    /// nearest clusters' codes only), and a second thread for the keyword list cost more
    /// to start than it saved (docs/BENCHMARKS.md).
    pub(crate) fn both_lists(
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
    pub(crate) fn add_note(
        &mut self,
        note: &Note,
        vector: &[f32],
        text: &str,
    ) -> Result<(), CoreError> {
        self.vector.upsert(note.id.clone(), vector)?;
        self.text.upsert(note.id.clone(), text);
        self.timeline
            .upsert(note.id.clone(), note.source.as_deref(), note.created_at);
        Ok(())
    }

    /// Room for `additional` more notes in the vector and text indexes.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.vector.reserve(additional);
        self.text.reserve(additional);
    }

    /// New notes of a bulk write, the active ones (the indexes hold nothing else).
    pub(crate) fn add_new_notes(
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

    pub(crate) fn add_link(&mut self, a: &NoteId, b: &NoteId) {
        link_into(&mut self.links, a, b);
    }

    /// `a` and `b` are no longer neighbours.
    pub(crate) fn remove_link(&mut self, a: &NoteId, b: &NoteId) {
        for (x, y) in [(a, b), (b, a)] {
            if let Some(v) = self.links.get_mut(x) {
                v.retain(|n| n != y);
                if v.is_empty() {
                    self.links.remove(x);
                }
            }
        }
    }

    pub(crate) fn remove_note(&mut self, id: &NoteId) {
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

/// Taken right after a store write that changes indexed data returned `Ok`, and
/// [`IndexSync::done`] once the indexes show it; dropped before that (an error or a
/// cancel in between), it marks the indexes as possibly behind the store, and the close
/// then writes no snapshot.
#[must_use]
pub(crate) struct IndexSync<'a> {
    diverged: &'a AtomicBool,
    done: bool,
}

impl IndexSync<'_> {
    pub(crate) fn done(mut self) {
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

impl Engine {
    /// Taken before a store write that changes indexed data and held until the indexes
    /// show it. Without it two writers could commit A then B and update the indexes B
    /// then A, leaving the older write in the indexes (an edit committed while an
    /// enrichment or a review action of the same note was between its commit and its
    /// index update). Never taken twice by one task: helpers called under it
    /// (`index_note`) do not take it.
    pub(crate) async fn index_order(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.write_order.lock().await
    }

    /// Tests: widens the step from a commit to its index update for every other write.
    #[cfg(test)]
    pub(crate) async fn after_commit(&self) {
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
    pub(crate) fn index_sync(&self) -> IndexSync<'_> {
        IndexSync {
            diverged: &self.diverged,
            done: false,
        }
    }

    pub(crate) fn write_indexes(
        &self,
    ) -> Result<std::sync::RwLockWriteGuard<'_, Indexes>, EngineError> {
        self.indexes
            .write()
            .map_err(|_| EngineError::Internal("the search index was poisoned by a crash".into()))
    }

    pub(crate) fn read_indexes(
        &self,
    ) -> Result<std::sync::RwLockReadGuard<'_, Indexes>, EngineError> {
        self.indexes
            .read()
            .map_err(|_| EngineError::Internal("the search index was poisoned by a crash".into()))
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
