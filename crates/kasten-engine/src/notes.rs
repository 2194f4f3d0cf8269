//! Notes: saved one at a time or in batches (embedded while the store writes the batch
//! before), read, listed, counted and deleted.

use super::*;
use crate::merge::MERGE_CANDIDATES;
use crate::supersede::{Peers, SUPERSEDE_CANDIDATES};

// merge on write takes the first of the lists searched for supersession
const _: () = assert!(MERGE_CANDIDATES <= SUPERSEDE_CANDIDATES);

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

impl Engine {
    /// Runs the (CPU-bound) embedder off the async threads.
    pub(crate) async fn embed_blocking(
        &self,
        texts: Vec<String>,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        Ok(self.spawn_embed(texts).wait().await?.1)
    }

    /// Starts embedding `texts` on a blocking thread and returns at once: a bulk write
    /// embeds its next batch while the store writes the current one.
    pub(crate) fn spawn_embed(&self, texts: Vec<String>) -> EmbedTask {
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
        saved: impl FnMut(AddedBatch),
    ) -> Result<(), EngineError>
    where
        I: IntoIterator<Item = Vec<NewNote>>,
    {
        self.write_batches(batches, false, saved).await
    }

    /// [`Engine::add_batches`] with merge on write and supersession, each batch as
    /// [`Engine::add_batch_merging`] saves it: the next batch is embedded while the
    /// current one is compared with the memory and written (its notes are compared with
    /// the batches before it, which are indexed by then, as with one call per batch).
    pub async fn add_batches_merging<I>(
        &self,
        batches: I,
        saved: impl FnMut(AddedBatch),
    ) -> Result<(), EngineError>
    where
        I: IntoIterator<Item = Vec<NewNote>>,
    {
        self.write_batches(batches, true, saved).await
    }

    async fn write_batches<I>(
        &self,
        batches: I,
        merge: bool,
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
            saved(self.store_batch(embedded, merge).await?);
        }
        Ok(())
    }

    pub(crate) async fn save_batch(
        &self,
        new: Vec<NewNote>,
        merge: bool,
    ) -> Result<AddedBatch, EngineError> {
        let embedded = self.begin_batch(new).embedded().await?;
        self.store_batch(embedded, merge).await
    }

    /// New notes made of `new`, their embedding started.
    pub(crate) fn begin_batch(&self, new: Vec<NewNote>) -> PendingBatch {
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
    pub(crate) async fn store_batch(
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
        // the settings read once a batch, and each note's nearest notes searched once for
        // both merge on write and supersession (the indexes do not change in between)
        let (opts, accepted, near) = if merge {
            let opts = self.merge_options().await?;
            let accepted = self.policy().await?.links == PolicyMode::Auto;
            let near = if (opts.enabled || opts.supersede) && !notes.is_empty() {
                Some(self.nearest(&notes, &vectors, SUPERSEDE_CANDIDATES, opts.supersede)?)
            } else {
                None
            };
            (Some(opts), accepted, near)
        } else {
            (None, false, None)
        };
        let (notes, writes, merge_writes, merges, mut differs) = match (&opts, &near) {
            (Some(opts), Some(near)) => {
                let f = self
                    .find_merges(
                        notes,
                        writes,
                        &vectors,
                        &dated,
                        now,
                        opts,
                        accepted,
                        &near.vector,
                    )
                    .await?;
                (f.notes, f.writes, f.merges, f.infos, f.differs)
            }
            _ => (notes, writes, Vec::new(), Vec::new(), Vec::new()),
        };
        if let (Some(opts), Some(near)) = (&opts, &near)
            && opts.supersede
        {
            let found = self
                .supersessions_among(&notes, &vectors, near, Peers::Batch, accepted, now)
                .await?;
            // a supersession says more than "contradicts" about the same two notes
            differs.retain(|d| {
                !found
                    .iter()
                    .any(|s| crate::supersede::same_pair(&s.from, &s.to, &d.from, &d.to))
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

    /// The notes [`Engine::list`] shows that had taken effect by the end of `day` (their
    /// `valid_from`, read from the text, before the next day), newest first: how many, and
    /// `limit` of them from `offset`.
    pub async fn list_as_of(
        &self,
        limit: usize,
        offset: usize,
        day: chrono::NaiveDate,
    ) -> Result<(u64, Vec<Note>), EngineError> {
        crate::views::taken_effect_by(day, limit, offset, |at, n| async move {
            Ok(self.store.list_notes(n, at).await?)
        })
        .await
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
}

/// See [`Engine::list_counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCounts {
    pub total: u64,
    pub merged: u64,
}

/// An embedding running on a blocking thread ([`Engine::spawn_embed`]).
pub(crate) struct EmbedTask {
    #[allow(clippy::type_complexity)]
    handle: tokio::task::JoinHandle<(
        Vec<String>,
        Result<Vec<Vec<f32>>, EmbedError>,
        std::time::Duration,
    )>,
}

impl EmbedTask {
    /// The texts back, their vectors, and how long the embedder took.
    pub(crate) async fn wait(
        self,
    ) -> Result<(Vec<String>, Vec<Vec<f32>>, std::time::Duration), EngineError> {
        let (texts, vectors, took) = self
            .handle
            .await
            .map_err(|e| EngineError::Internal(format!("embedding task failed: {e}")))?;
        Ok((texts, vectors?, took))
    }
}

/// New notes of a batch whose embedding is running.
pub(crate) struct PendingBatch {
    notes: Vec<Note>,
    /// Which notes came with their own date (merge on write keeps the older one).
    dated: Vec<bool>,
    now: chrono::DateTime<Utc>,
    embedding: EmbedTask,
}

impl PendingBatch {
    pub(crate) async fn embedded(self) -> Result<EmbeddedBatch, EngineError> {
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
pub(crate) struct EmbeddedBatch {
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
