//! What the shells (the CLI, the app, bench) read and do through the engine instead of
//! reaching into the store: token usage, pipeline events, the job queue, notes by id, the
//! memory's size on disk, and enrichments made outside the LLM pipeline (generated
//! benchmark memories), which the indexes follow as they follow the pipeline's.

use kasten_core::{Note, NoteId};
#[cfg(any(test, feature = "testing"))]
use kasten_core::{NoteStatus, note::index_text};
#[cfg(any(test, feature = "testing"))]
use kasten_store::{ApplyMode, ClaimedJob, Enrichment, NoteRead};

use crate::{Engine, EngineError, EventSummary, ModelUsage};

/// Store rows as the engine's read models.
pub(crate) fn into_all<R, T: From<R>>(rows: Vec<R>) -> Vec<T> {
    rows.into_iter().map(T::from).collect()
}

impl Engine {
    /// LLM tokens per model.
    pub async fn usage_by_model(&self) -> Result<Vec<ModelUsage>, EngineError> {
        Ok(into_all(self.store.usage_by_model().await?))
    }

    /// LLM tokens of the notes that used the most, at most `limit`.
    pub async fn usage_by_note(&self, limit: usize) -> Result<Vec<EventSummary>, EngineError> {
        Ok(into_all(self.store.usage_by_note(limit).await?))
    }

    /// The newest pipeline events (one per enriched note), at most `limit`.
    pub async fn events(&self, limit: usize) -> Result<Vec<EventSummary>, EngineError> {
        Ok(into_all(self.store.events(limit).await?))
    }

    /// Queues the failed enrichment jobs again (their notes go back to pending); returns
    /// how many.
    pub async fn retry_failed(&self) -> Result<u64, EngineError> {
        Ok(self.store.retry_failed_jobs().await?)
    }

    /// The notes with these ids that exist (in no set order).
    pub async fn get_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, EngineError> {
        Ok(self.store.get_notes(ids).await?)
    }

    /// Bytes the memory takes on disk (0 for `mem://` and servers).
    pub fn disk_bytes(&self) -> u64 {
        self.store.disk_bytes()
    }

    /// Tables other than settings that hold rows, with their counts (a restore needs
    /// none).
    pub async fn non_empty_tables(&self) -> Result<Vec<(String, u64)>, EngineError> {
        Ok(self.store.non_empty_tables().await?)
    }

    /// The notes (id, source, content) whose source is one of `sources`: what an import
    /// has already brought in.
    pub async fn notes_with_sources(
        &self,
        sources: &[String],
    ) -> Result<Vec<(NoteId, Option<String>, String)>, EngineError> {
        Ok(self.store.notes_with_sources(sources).await?)
    }

    /// Whether any link is accepted.
    pub async fn has_accepted_links(&self) -> Result<bool, EngineError> {
        Ok(!self.store.accepted_links_page(None, 1).await?.0.is_empty())
    }

    /// Enriches every queued note with what `make` returns for its job and current
    /// embedding, without an LLM: for generated memories (benchmarks, the app's graph
    /// figure). Each enrichment is one transaction, as the pipeline's, and the indexes
    /// follow it (annotations, links). `None` from `make` leaves the job claimed until its
    /// lease (`lease`) ends. Returns the number applied. A door for tests and generated
    /// memories (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    pub async fn enrich_queued_with(
        &self,
        worker: &str,
        lease: chrono::Duration,
        make: &mut (dyn FnMut(&ClaimedJob, Vec<f32>) -> Option<Enrichment> + Send),
    ) -> Result<usize, EngineError> {
        let mut applied = 0;
        loop {
            let until = chrono::Utc::now() + lease;
            let jobs = self.store.claim_jobs(worker, 200, until).await?;
            if jobs.is_empty() {
                return Ok(applied);
            }
            for job in jobs {
                let embedding = self
                    .store
                    .embedding_of(&job.note)
                    .await?
                    .unwrap_or_default();
                let Some(e) = make(&job, embedding) else {
                    continue;
                };
                self.apply_made_enrichment(&e).await?;
                applied += 1;
            }
        }
    }

    /// One enrichment made outside the pipeline, committed, then mirrored in the indexes
    /// in commit order (the note's annotations with its stored embedding, the accepted
    /// links; neighbour updates are applied with their own embeddings). Made from the
    /// note as it is now: its `read` is the note read here, whatever `e` says.
    #[cfg(any(test, feature = "testing"))]
    async fn apply_made_enrichment(&self, e: &Enrichment) -> Result<(), EngineError> {
        let note = self
            .store
            .get_note(&e.note)
            .await?
            .ok_or_else(|| EngineError::NotFound(e.note.clone()))?;
        let e = &Enrichment {
            read: NoteRead::of(&note),
            ..e.clone()
        };
        let mut update_texts = Vec::with_capacity(e.updates.len());
        for w in &e.updates {
            let n = self.store.get_note(&w.id).await?;
            update_texts.push(n.map(|n| {
                index_text(
                    &n.content,
                    &w.after.keywords,
                    &w.after.tags,
                    &w.after.context,
                )
            }));
        }
        let text = index_text(
            &note.content,
            &e.after.keywords,
            &e.after.tags,
            &e.after.context,
        );
        let order = self.index_order().await;
        let held = self.store.apply_enrichment(e).await?;
        let sync = self.index_sync();
        let joined = self.links_in_force(e).await?;
        // only active notes are searched (read under the write order: a status change
        // takes it too)
        let mut ids = vec![note.id.clone()];
        ids.extend(e.updates.iter().map(|w| w.id.clone()));
        let active: std::collections::HashSet<NoteId> = self
            .store
            .get_notes(&ids)
            .await?
            .into_iter()
            .filter(|n| n.status == NoteStatus::Active)
            .map(|n| n.id)
            .collect();
        {
            let mut ix = self.write_indexes()?;
            if e.construction_mode == ApplyMode::Apply && active.contains(&note.id) {
                if !e.embedding.is_empty() {
                    ix.vector
                        .upsert(note.id.clone(), &e.embedding)
                        .map_err(EngineError::from)?;
                }
                ix.text.upsert(note.id.clone(), &text);
            }
            for (w, t) in e.updates.iter().zip(&update_texts) {
                if let Some(t) = t
                    && w.mode == ApplyMode::Apply
                    && !held.contains(&w.id)
                    && active.contains(&w.id)
                {
                    ix.vector
                        .upsert(w.id.clone(), &w.embedding_after)
                        .map_err(EngineError::from)?;
                    ix.text.upsert(w.id.clone(), t);
                }
            }
            for to in &joined {
                if ix.vector.contains(&note.id) && ix.vector.contains(to) {
                    ix.add_link(&note.id, to);
                }
            }
        }
        sync.done();
        drop(order);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kasten_core::NewNote;
    use kasten_store::{Fields, LinkWrite};

    use super::*;
    use crate::SearchOptions;
    use crate::tests::HashEmbedder;

    async fn engine_mem() -> Engine {
        let ep = kasten_store::Endpoint::Mem;
        match Engine::open(&ep, HashEmbedder::arc("hash", 32, 1), &|_| {}).await {
            Ok(e) => e,
            Err(err) => panic!("cannot open a memory: {err}"),
        }
    }

    /// A generated enrichment reaches the indexes as a pipeline's does: its tag is found
    /// by keyword search and its link expands a search, with no reload; and the counts the
    /// shells read come through the engine.
    #[tokio::test]
    async fn made_enrichments_reach_the_indexes() -> Result<(), EngineError> {
        let e = engine_mem().await;
        let a = e.add(NewNote::new("the heron stood in the reeds")?).await?;
        let b = e.add(NewNote::new("a kettle of tea on the stove")?).await?;
        assert!(!e.has_accepted_links().await?);
        let (id_a, id_b) = (a.id.clone(), b.id.clone());
        let n = e
            .enrich_queued_with(
                "gen",
                chrono::Duration::minutes(5),
                &mut |job, embedding| {
                    let to = if job.note == id_b {
                        id_a.clone()
                    } else {
                        id_b.clone()
                    };
                    Some(Enrichment {
                        job: job.id.clone(),
                        note: job.note.clone(),
                        read: Default::default(),
                        after: Fields {
                            keywords: vec!["zanzibar".into()],
                            tags: vec!["zanzibar".into()],
                            context: String::new(),
                        },
                        construction_changes: Vec::new(),
                        embedding,
                        construction_mode: ApplyMode::Apply,
                        tier: None,
                        embed_model: "hash".into(),
                        llm_model: "generator".into(),
                        prompt_version: "gen".into(),
                        tokens_in: 3,
                        tokens_out: 2,
                        tokens_estimated: true,
                        llm_calls: 0,
                        unknown_handles: 0,
                        dropped: 0,
                        timings_ms: serde_json::json!({}),
                        links: if job.note == id_b {
                            vec![LinkWrite {
                                to,
                                kind: "relates".into(),
                                reason: "generated".into(),
                                confidence: 0.9,
                                mode: ApplyMode::Apply,
                            }]
                        } else {
                            vec![]
                        },
                        updates: vec![],
                    })
                },
            )
            .await?;
        assert_eq!(n, 2);
        // the tag is in the keyword index without a rebuild
        let hits = e.rank_keyword("zanzibar", 10)?;
        assert_eq!(hits.len(), 2, "{hits:?}");
        // the link is in the expansion index without a reload
        assert!(e.has_accepted_links().await?);
        let v = e.vector_of(&a.id)?.unwrap_or_default();
        let expanded = e.rank_expanded("heron", &v, 2, &SearchOptions::default())?;
        assert!(
            expanded.iter().any(|h| h.id == b.id
                && h.via == vec![kasten_core::fusion::Via::Link { from: a.id.clone() }]),
            "{expanded:?}"
        );
        assert_eq!(e.reload_links().await?, 1);
        // what the shells read
        assert_eq!(e.events(10).await?.len(), 2);
        assert_eq!(e.job_counts().await?.done, 2);
        assert_eq!(e.get_notes(&[a.id.clone(), b.id.clone()]).await?.len(), 2);
        assert_eq!(e.retry_failed().await?, 0);
        e.close().await;
        Ok(())
    }
}
