//! The user's own edits of a note's fields, and a note's history.

use super::*;

impl Engine {
    /// A user's (or agent's) change to a note's annotations, versioned like the LLM's.
    pub async fn edit_note(
        &self,
        id: &NoteId,
        edit: &FieldEdit,
        actor: &str,
        reason: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let note = self.current(id).await?;
        let before = fields_of(&note);
        let embedding_before = self.store.embedding_of(id).await?;
        let Some((change, revision, entry)) = self
            .edit_parts(
                id,
                &note.content,
                &before,
                embedding_before,
                edit,
                actor,
                reason,
            )
            .await?
        else {
            return Ok(ReviewOutcome {
                action: Action::Edit,
                target: id.to_string(),
                ..ReviewOutcome::default()
            });
        };
        let batch = ReviewBatch {
            field_changes: vec![change],
            new_revisions: vec![revision],
            audit: vec![entry],
            ..ReviewBatch::default()
        };
        self.commit_review(&batch).await?;
        Ok(ReviewOutcome {
            action: Action::Edit,
            target: id.to_string(),
            notes: vec![id.to_string()],
            revisions: 1,
            links: 0,
        })
    }

    /// What a user's edit of a note whose fields are `before` (with `embedding_before`)
    /// writes: the field change, its revision and audit entry; `None` if it changes nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn edit_parts(
        &self,
        id: &NoteId,
        content: &str,
        before: &Fields,
        embedding_before: Option<Vec<f32>>,
        edit: &FieldEdit,
        actor: &str,
        reason: &str,
    ) -> Result<Option<(FieldChange, NewRevision, AuditEntry)>, EngineError> {
        let after = edit.apply(before);
        if &after == before {
            return Ok(None);
        }
        let embedding = self.embedding_for(content, &after).await?;
        // the values this edit brings in are the person's (or agent's) from now on
        let set_by = SetBy::of_actor(actor).map_or_else(Vec::new, |by| {
            provenance::added_by_edit(&[], annotations(before), annotations(&after), by)
        });
        Ok(Some((
            FieldChange {
                set_by,
                ..self.change(id, before.clone(), after.clone(), embedding.clone())
            },
            NewRevision {
                note: id.clone(),
                actor: actor.into(),
                reason: if reason.is_empty() {
                    Action::Edit.to_string()
                } else {
                    reason.into()
                },
                before: before.clone(),
                after,
                embedding_before,
                embedding_after: embedding,
            },
            audit(Action::Edit, id.as_str(), &[id], actor, reason),
        )))
    }

    /// A note's complete history, oldest first: creation, construction, evolutions, user
    /// edits, and every review action, each with actor, time and reason.
    pub async fn history(&self, id: &NoteId) -> Result<Vec<HistoryEntry>, EngineError> {
        let note = self.current(id).await?;
        let mut out = vec![HistoryEntry {
            at: note.created_at.min(note.updated_at),
            actor: match note.source.as_deref() {
                Some(s) if s.starts_with("import") => Actor::Import,
                // an agent's note (`mcp:<client name>:<n>`): that agent
                Some(s) if s.starts_with("mcp:") => Actor::agent(
                    s.trim_start_matches("mcp:")
                        .rsplit_once(':')
                        .map_or("", |(name, _)| name),
                ),
                _ => Actor::User,
            },
            action: Action::Created,
            id: None,
            status: None,
            reason: note.source.clone().unwrap_or_default(),
            before: None,
            after: None,
            ..HistoryEntry::default()
        }];
        for r in self.store.revisions_where(Some(id), None).await? {
            out.push(HistoryEntry {
                at: r.created_at,
                actor: r.actor.clone(),
                // an LLM revision's reason says what it was (`construction`, `evolution`)
                action: if r.actor == Actor::Llm {
                    Action::parse(&r.reason)
                } else {
                    Action::Edit
                },
                id: Some(r.id.clone()),
                status: Some(ReviewStatus::of_revision(r.status, r.reviewed)),
                reason: explanation(&r),
                before: Some(r.before.into()),
                after: Some(r.after.into()),
                changes: crate::read::changes(r.changes),
                ..HistoryEntry::default()
            });
        }
        for a in self.store.audit_of(id).await? {
            if a.action == Action::Edit {
                continue; // the revision entry says it already
            }
            out.push(HistoryEntry {
                at: a.at,
                actor: a.actor,
                action: a.action,
                id: Some(a.target),
                status: None,
                reason: a.reason,
                before: None,
                after: None,
                ..HistoryEntry::default()
            });
        }
        self.add_content_diffs(id, &mut out).await?;
        out.sort_by_key(|e| e.at);
        Ok(out)
    }
}
