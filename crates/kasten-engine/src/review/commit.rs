//! What every review action is built from: a link's status set, fields changed or
//! undone with their embedding, and the one transaction that commits it all with the
//! "may be outdated" flags its supersessions raise or withdraw.

use super::*;

impl Engine {
    /// Changes a link's review status, with its audit entry, in one transaction.
    pub(super) async fn set_link_status(
        &self,
        l: &LinkRecord,
        status: LinkStatus,
        action: Action,
        reason: &str,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let (from, to) = link_notes(l)?;
        self.commit_review(&ReviewBatch {
            link_status: vec![(l.id.clone(), status, true)],
            audit: vec![audit(action.clone(), &l.id, &[&from, &to], actor, reason)],
            ..ReviewBatch::default()
        })
        .await?;
        Ok(ReviewOutcome {
            action,
            target: l.id.clone(),
            notes: vec![l.from.clone(), l.to.clone()],
            revisions: 0,
            links: 1,
        })
    }

    /// The revisions whose note still exists (a deleted note keeps its revisions, with
    /// nothing to apply them to).
    pub(super) async fn of_existing_notes(
        &self,
        revs: Vec<Revision>,
    ) -> Result<Vec<Revision>, EngineError> {
        let mut ids: Vec<NoteId> = revs.iter().map(|r| r.note.clone()).collect();
        ids.sort();
        ids.dedup();
        let present: HashSet<NoteId> = self
            .store
            .get_notes(&ids)
            .await?
            .into_iter()
            .map(|n| n.id)
            .collect();
        Ok(revs
            .into_iter()
            .filter(|r| present.contains(&r.note))
            .collect())
    }

    pub(crate) async fn current(&self, id: &NoteId) -> Result<kasten_core::Note, EngineError> {
        self.store
            .get_note(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(id.clone()))
    }

    pub(super) fn change(
        &self,
        note: &NoteId,
        expect: Fields,
        to: Fields,
        embedding: Vec<f32>,
    ) -> FieldChange {
        FieldChange {
            note: note.clone(),
            expect,
            to,
            embedding,
            embed_model: self.embedder.model_id().to_owned(),
            enrich_state: None,
            set_by: Vec::new(),
        }
    }

    /// The embedding of a note with these fields, always made afresh: a vector stored with
    /// a revision is not trusted to belong to its fields (it was read apart from them, and an
    /// enrichment running beside an edit could change the note in between; a rollback then
    /// put back fields with another state's vector).
    pub(crate) async fn embedding_for(
        &self,
        content: &str,
        f: &Fields,
    ) -> Result<Vec<f32>, EngineError> {
        let text = index_text(content, &f.keywords, &f.tags, &f.context);
        self.embed_blocking(vec![text])
            .await?
            .pop()
            .ok_or_else(|| EngineError::Internal("no embedding".into()))
    }

    /// The batch that undoes `revs` (in reverse order), refusing when a later revision
    /// still in force — other than those in `together` — changed one of the same fields.
    pub(super) async fn undo_batch(
        &self,
        revs: &[Revision],
        together: &HashSet<String>,
        status: RevisionStatus,
    ) -> Result<ReviewBatch, EngineError> {
        let mut batch = ReviewBatch::default();
        let mut ordered: Vec<&Revision> = revs.iter().collect();
        ordered.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        for r in ordered {
            let history = self.store.revisions_where(Some(&r.note), None).await?;
            let later: Vec<&Revision> = history
                .iter()
                .filter(|x| {
                    x.id != r.id
                        && x.created_at >= r.created_at
                        && x.status == RevisionStatus::Applied
                        && !together.contains(&x.id)
                })
                .filter(|x| x.created_at > r.created_at || x.id > r.id)
                .collect();
            let mask = changed(r);
            if let Some(blocker) = later
                .iter()
                .rev()
                .find(|x| changed(x).iter().zip(mask).any(|(a, b)| *a && b))
            {
                return Err(conflict(format!(
                    "{} cannot be rolled back: the later revision {} ({} by {}, {}) changed the same field(s) of note {}; roll back {} first",
                    r.id,
                    blocker.id,
                    blocker.reason,
                    blocker.actor,
                    blocker.created_at.format("%Y-%m-%d %H:%M:%S"),
                    r.note,
                    blocker.event.as_deref().unwrap_or(&blocker.id)
                )));
            }
            let note = self.current(&r.note).await?;
            let cur = fields_of(&note);
            let to = overlay(&cur, &r.before, mask);
            let embedding = self.embedding_for(&note.content, &to).await?;
            batch
                .field_changes
                .push(self.change(&r.note, cur, to, embedding));
            batch.revision_status.push((r.id.clone(), status, true));
        }
        Ok(batch)
    }

    pub(super) async fn undo_revisions(
        &self,
        revs: &[Revision],
        together: &HashSet<String>,
        status: RevisionStatus,
        action: Action,
        target: &str,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let mut batch = self.undo_batch(revs, together, status).await?;
        let notes: Vec<&NoteId> = revs.iter().map(|r| &r.note).collect();
        let reason = format!("{action} of the edit");
        batch
            .audit
            .push(audit(action.clone(), target, &notes, actor, &reason));
        self.commit_review(&batch).await?;
        Ok(ReviewOutcome {
            action,
            target: target.into(),
            notes: notes.iter().map(ToString::to_string).collect(),
            revisions: revs.len(),
            links: 0,
        })
    }

    /// Commits a review batch, then brings the in-memory indexes in line with it.
    pub(crate) async fn commit_review(&self, batch: &ReviewBatch) -> Result<(), EngineError> {
        let flagged = self.with_outdated_flags(batch).await?;
        let batch = flagged.as_ref().unwrap_or(batch);
        let order = self.index_order().await;
        self.store.apply_review(batch).await.map_err(|e| match e {
            StoreError::Conflict => {
                conflict("a note changed while this was being done; try again".into())
            }
            other => EngineError::Store(other),
        })?;
        #[cfg(test)]
        self.after_commit().await;
        let sync = self.index_sync();
        let ids: Vec<NoteId> = batch.field_changes.iter().map(|c| c.note.clone()).collect();
        let notes = self.store.get_notes(&ids).await?;
        // the link adjacency changes only between the ends of the links reviewed: they are
        // neighbours while any accepted link joins them
        let mut ends: Vec<(NoteId, NoteId, bool)> = Vec::new();
        for (link, _, _) in &batch.link_status {
            if let Some(l) = self.store.link(link).await? {
                let (a, b) = link_notes(&l)?;
                let joined = self.store.linked(&a, &b).await?;
                ends.push((a, b, joined));
            }
        }
        {
            let mut ix = self.write_indexes()?;
            for (c, n) in batch
                .field_changes
                .iter()
                .filter_map(|c| notes.iter().find(|n| n.id == c.note).map(|n| (c, n)))
            {
                // only active notes are searched: an archived or merged note's edit (or its
                // rollback) changes the note, not the indexes
                if n.status == NoteStatus::Active {
                    ix.vector.upsert(n.id.clone(), &c.embedding)?;
                    ix.text.upsert(n.id.clone(), &n.index_text());
                }
            }
            for (a, b, joined) in &ends {
                if *joined && ix.vector.contains(a) && ix.vector.contains(b) {
                    ix.add_link(a, b);
                } else if !*joined {
                    ix.remove_link(a, b);
                }
            }
        }
        sync.done();
        drop(order);
        // a merge link whose status changed folds its note in or lets it out
        for (link, _, _) in &batch.link_status {
            if let Some(l) = self.store.link(link).await? {
                self.settle_merge(&l).await?;
            }
        }
        Ok(())
    }

    /// `batch` with what its supersessions change about "may be outdated" flags, or `None`
    /// if it changes none: a `supersedes` link put in force raises the flags of what used
    /// the value it replaced; one taken out of force (rejected, rolled back) withdraws its
    /// flags still waiting (status `rolled_back`: a later re-apply proposes them again),
    /// while a flag the user accepted or dismissed stays as decided.
    pub(super) async fn with_outdated_flags(
        &self,
        batch: &ReviewBatch,
    ) -> Result<Option<ReviewBatch>, EngineError> {
        let mut out: Option<ReviewBatch> = None;
        for (id, status, _) in &batch.link_status {
            let Some(l) = self.store.link(id).await? else {
                continue;
            };
            if l.kind != SUPERSEDES {
                continue;
            }
            let (from, to) = link_notes(&l)?;
            let b = out.get_or_insert_with(|| batch.clone());
            match status {
                LinkStatus::Accepted => b.flags.extend(
                    self.outdated_flags(&from, &to, &l.reason, Utc::now())
                        .await?,
                ),
                LinkStatus::Rejected | LinkStatus::RolledBack
                    if l.status == LinkStatus::Accepted =>
                {
                    for flag in self.store.pending_flags_of(&from, &to).await? {
                        if !b.link_status.iter().any(|(x, _, _)| *x == flag) {
                            b.link_status.push((flag, LinkStatus::RolledBack, true));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}
