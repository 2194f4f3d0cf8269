//! The review actions on a proposal or an event: accept (one, or every link above a
//! confidence), reject, roll back exactly, apply again.

use super::*;

impl Engine {
    /// Accepts a proposed link or edit (optionally adjusting a proposed edit first), or
    /// marks an applied one as reviewed.
    pub async fn accept(
        &self,
        id: &str,
        edit: &FieldEdit,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        if let Some(r) = self.store.revision(id).await? {
            // the accept, and the user's adjustment on top of it: one transaction
            let (mut batch, fields, embedding, content) = match ReviewStatus::of_revision(
                r.status, r.reviewed,
            ) {
                ReviewStatus::Proposed => {
                    let note = self.current(&r.note).await?;
                    let cur = fields_of(&note);
                    let mask = changed(&r);
                    if overlay(&cur, &r.before, mask) != cur {
                        return Err(conflict(format!(
                            "edit {id} cannot be accepted: note {} changed since it was proposed; reject it instead",
                            r.note
                        )));
                    }
                    let to = overlay(&cur, &r.after, mask);
                    let embedding = self.embedding_for(&note.content, &to).await?;
                    let batch = ReviewBatch {
                        field_changes: vec![self.change(
                            &r.note,
                            cur,
                            to.clone(),
                            embedding.clone(),
                        )],
                        revision_status: vec![(r.id.clone(), RevisionStatus::Applied, true)],
                        audit: vec![audit(
                            Action::Accept,
                            id,
                            &[&r.note],
                            actor,
                            "accepted the proposed edit",
                        )],
                        ..ReviewBatch::default()
                    };
                    (batch, to, Some(embedding), note.content)
                }
                ReviewStatus::Applied => {
                    let batch = ReviewBatch {
                        revision_status: vec![(r.id.clone(), RevisionStatus::Applied, true)],
                        audit: vec![audit(
                            Action::Accept,
                            id,
                            &[&r.note],
                            actor,
                            "kept the applied edit",
                        )],
                        ..ReviewBatch::default()
                    };
                    if edit.is_empty() {
                        (batch, Fields::default(), None, String::new())
                    } else {
                        let note = self.current(&r.note).await?;
                        let embedding = self.store.embedding_of(&r.note).await?;
                        (batch, fields_of(&note), embedding, note.content)
                    }
                }
                s => {
                    return Err(EngineError::Invalid(invalid(format!(
                        "edit {id} is {s:?} and cannot be accepted"
                    ))));
                }
            };
            if !edit.is_empty()
                && let Some((change, revision, entry)) = self
                    .edit_parts(
                        &r.note,
                        &content,
                        &fields,
                        embedding,
                        edit,
                        actor,
                        "adjusted while accepting",
                    )
                    .await?
            {
                batch.field_changes.push(change);
                batch.new_revisions.push(revision);
                batch.audit.push(entry);
            }
            self.commit_review(&batch).await?;
            return Ok(ReviewOutcome {
                action: if edit.is_empty() {
                    Action::Accept
                } else {
                    Action::AcceptEdited
                },
                target: id.into(),
                notes: vec![r.note.to_string()],
                revisions: 1,
                links: 0,
            });
        }
        if let Some(l) = self.store.link(id).await? {
            if !edit.is_empty() {
                return Err(EngineError::Invalid(invalid(
                    "a link has no fields to edit".into(),
                )));
            }
            let status = ReviewStatus::of_link(l.status, l.reviewed);
            if !matches!(status, ReviewStatus::Proposed | ReviewStatus::Applied) {
                return Err(EngineError::Invalid(invalid(format!(
                    "link {id} is {status:?} and cannot be accepted"
                ))));
            }
            return self
                .set_link_status(
                    &l,
                    LinkStatus::Accepted,
                    Action::Accept,
                    "accepted the link",
                    actor,
                )
                .await;
        }
        Err(EngineError::UnknownItem(id.to_owned()))
    }

    /// Accepts every waiting link (proposed, or applied and not yet reviewed) whose
    /// confidence is at least `min_confidence`, in one transaction; returns how many.
    pub async fn accept_links_above(
        &self,
        min_confidence: f64,
        actor: &str,
    ) -> Result<usize, EngineError> {
        let _order = self.index_order().await;
        let accepted = self
            .store
            .accept_links_above(
                min_confidence,
                actor,
                "accepted with every link above a confidence",
            )
            .await?;
        let sync = self.index_sync();
        {
            let mut ix = self.write_indexes()?;
            for (_, a, b) in &accepted {
                if ix.vector.contains(a) && ix.vector.contains(b) {
                    ix.add_link(a, b);
                }
            }
        }
        sync.done();
        drop(_order);
        // a merge stays in force from proposed to accepted: nothing to settle; a
        // supersession now in force flags what used the value it replaced
        let mut flags = ReviewBatch::default();
        for (id, _, _) in &accepted {
            if let Some(l) = self.store.link(id).await?
                && l.kind == SUPERSEDES
            {
                let (from, to) = link_notes(&l)?;
                flags.flags.extend(
                    self.outdated_flags(&from, &to, &l.reason, Utc::now())
                        .await?,
                );
            }
        }
        if !flags.flags.is_empty() {
            self.commit_review(&flags).await?;
        }
        Ok(accepted.len())
    }

    /// Rejects a link or edit. An applied edit is rolled back (same conflict rule).
    pub async fn reject(&self, id: &str, actor: &str) -> Result<ReviewOutcome, EngineError> {
        if let Some(c) = self.store.content_revision(id).await? {
            return self
                .undo_content(c, RevisionStatus::Rejected, Action::Reject, actor)
                .await;
        }
        if let Some(r) = self.store.revision(id).await? {
            return match ReviewStatus::of_revision(r.status, r.reviewed) {
                ReviewStatus::Proposed => {
                    self.commit_review(&ReviewBatch {
                        revision_status: vec![(r.id.clone(), RevisionStatus::Rejected, true)],
                        audit: vec![audit(
                            Action::Reject,
                            id,
                            &[&r.note],
                            actor,
                            "rejected the proposed edit",
                        )],
                        ..ReviewBatch::default()
                    })
                    .await?;
                    Ok(ReviewOutcome {
                        action: Action::Reject,
                        target: id.into(),
                        notes: vec![r.note.to_string()],
                        revisions: 1,
                        links: 0,
                    })
                }
                ReviewStatus::Applied | ReviewStatus::Accepted => {
                    self.undo_revisions(
                        &[r],
                        &HashSet::new(),
                        RevisionStatus::Rejected,
                        Action::Reject,
                        id,
                        actor,
                    )
                    .await
                }
                s => Err(EngineError::Invalid(invalid(format!(
                    "edit {id} is already {s:?}"
                )))),
            };
        }
        if let Some(l) = self.store.link(id).await? {
            let status = ReviewStatus::of_link(l.status, l.reviewed);
            if matches!(status, ReviewStatus::Rejected | ReviewStatus::RolledBack) {
                return Err(EngineError::Invalid(invalid(format!(
                    "link {id} is already {status:?}"
                ))));
            }
            return self
                .set_link_status(
                    &l,
                    LinkStatus::Rejected,
                    Action::Reject,
                    "rejected the link",
                    actor,
                )
                .await;
        }
        Err(EngineError::UnknownItem(id.to_owned()))
    }

    /// Rolls back one revision, one link, or a whole event (its links and every edit it
    /// made, in one transaction).
    pub async fn rollback(&self, id: &str, actor: &str) -> Result<ReviewOutcome, EngineError> {
        if let Some(c) = self.store.content_revision(id).await? {
            return self
                .undo_content(c, RevisionStatus::RolledBack, Action::Rollback, actor)
                .await;
        }
        if let Some(r) = self.store.revision(id).await? {
            if !matches!(
                ReviewStatus::of_revision(r.status, r.reviewed),
                ReviewStatus::Applied | ReviewStatus::Accepted
            ) {
                return Err(EngineError::Invalid(invalid(format!(
                    "edit {id} is not in force ({}); nothing to roll back",
                    r.status
                ))));
            }
            return self
                .undo_revisions(
                    &[r],
                    &HashSet::new(),
                    RevisionStatus::RolledBack,
                    Action::Rollback,
                    id,
                    actor,
                )
                .await;
        }
        if let Some(l) = self.store.link(id).await? {
            if l.status != LinkStatus::Accepted {
                return Err(EngineError::Invalid(invalid(format!(
                    "link {id} is not in force ({})",
                    l.status
                ))));
            }
            return self
                .set_link_status(
                    &l,
                    LinkStatus::RolledBack,
                    Action::Rollback,
                    "rolled back the link",
                    actor,
                )
                .await;
        }
        if self.store.event_exists(id).await? {
            let revs = self.store.revisions_where(None, Some(id)).await?;
            // the edits of notes deleted since have nothing left to restore: the event's
            // edits of the notes that remain are undone as a unit
            let revs = self.of_existing_notes(revs).await?;
            let in_force: Vec<Revision> = revs
                .iter()
                .filter(|r| r.status == RevisionStatus::Applied)
                .cloned()
                .collect();
            let held: Vec<&Revision> = revs
                .iter()
                .filter(|r| r.status == RevisionStatus::Proposed)
                .collect();
            let links = self.store.links_where(Some(id)).await?;
            let own: HashSet<String> = revs.iter().map(|r| r.id.clone()).collect();
            let mut batch = self
                .undo_batch(&in_force, &own, RevisionStatus::RolledBack)
                .await?;
            batch.revision_status.extend(
                held.iter()
                    .map(|r| (r.id.clone(), RevisionStatus::Rejected, true)),
            );
            for l in &links {
                match l.status {
                    LinkStatus::Accepted => {
                        batch
                            .link_status
                            .push((l.id.clone(), LinkStatus::RolledBack, true))
                    }
                    LinkStatus::Proposed => {
                        batch
                            .link_status
                            .push((l.id.clone(), LinkStatus::Rejected, true))
                    }
                    LinkStatus::Rejected | LinkStatus::RolledBack => {}
                }
            }
            let mut notes: Vec<NoteId> = revs.iter().map(|r| r.note.clone()).collect();
            notes.sort();
            notes.dedup();
            let note_refs: Vec<&NoteId> = notes.iter().collect();
            batch.audit.push(audit(
                Action::Rollback,
                id,
                &note_refs,
                actor,
                "rolled back the whole event",
            ));
            let (nr, nl) = (batch.revision_status.len(), batch.link_status.len());
            self.commit_review(&batch).await?;
            return Ok(ReviewOutcome {
                action: Action::RollbackEvent,
                target: id.into(),
                notes: notes.iter().map(ToString::to_string).collect(),
                revisions: nr,
                links: nl,
            });
        }
        Err(EngineError::UnknownItem(id.to_owned()))
    }

    /// Applies a rolled-back event again: its edits (if the notes still hold the values it
    /// was rolled back to) and its links.
    pub async fn reapply(&self, event: &str, actor: &str) -> Result<ReviewOutcome, EngineError> {
        if !self.store.event_exists(event).await? {
            // a link removed by hand (or rolled back) comes back on its own
            if let Some(l) = self.store.link(event).await?
                && l.status == LinkStatus::RolledBack
            {
                return self
                    .set_link_status(
                        &l,
                        LinkStatus::Accepted,
                        Action::Reapply,
                        "re-applied the link",
                        actor,
                    )
                    .await;
            }
            return Err(EngineError::UnknownItem(event.to_owned()));
        }
        let revs: Vec<Revision> = self
            .of_existing_notes(self.store.revisions_where(None, Some(event)).await?)
            .await?
            .into_iter()
            .filter(|r| r.status == RevisionStatus::RolledBack)
            .collect();
        let links: Vec<LinkRecord> = self
            .store
            .links_where(Some(event))
            .await?
            .into_iter()
            .filter(|l| l.status == LinkStatus::RolledBack)
            .collect();
        if revs.is_empty() && links.is_empty() {
            return Err(EngineError::Invalid(invalid(format!(
                "event {event} has nothing rolled back to re-apply"
            ))));
        }
        let mut batch = ReviewBatch::default();
        let mut notes = Vec::new();
        for r in &revs {
            let note = self.current(&r.note).await?;
            let cur = fields_of(&note);
            let mask = changed(r);
            if overlay(&cur, &r.before, mask) != cur {
                return Err(conflict(format!(
                    "event {event} cannot be re-applied: note {} changed since it was rolled back",
                    r.note
                )));
            }
            let to = overlay(&cur, &r.after, mask);
            let embedding = self.embedding_for(&note.content, &to).await?;
            batch
                .field_changes
                .push(self.change(&r.note, cur, to, embedding));
            batch
                .revision_status
                .push((r.id.clone(), RevisionStatus::Applied, true));
            notes.push(r.note.clone());
        }
        batch.link_status.extend(
            links
                .iter()
                .map(|l| (l.id.clone(), LinkStatus::Accepted, true)),
        );
        let note_refs: Vec<&NoteId> = notes.iter().collect();
        batch.audit.push(audit(
            Action::Reapply,
            event,
            &note_refs,
            actor,
            "re-applied the event",
        ));
        self.commit_review(&batch).await?;
        Ok(ReviewOutcome {
            action: Action::Reapply,
            target: event.into(),
            notes: notes.iter().map(ToString::to_string).collect(),
            revisions: revs.len(),
            links: links.len(),
        })
    }
}
