//! The review queue, note history, user edits, and exact rollback.
//!
//! Everything the LLM does is a record: links (`link`) and field changes (`revision`, with
//! exact before/after fields and embeddings), grouped under the event of the note that
//! caused them. Review statuses as the user sees them:
//!
//! | status        | link                        | revision                     | in force? |
//! |---------------|-----------------------------|------------------------------|-----------|
//! | `proposed`    | `proposed`                  | `proposed`                   | no        |
//! | `applied`     | `accepted`, not reviewed    | `applied`, not reviewed      | yes       |
//! | `accepted`    | `accepted`, reviewed        | `applied`, reviewed          | yes       |
//! | `rejected`    | `rejected`                  | `rejected`                   | no        |
//! | `rolled_back` | `rolled_back`               | `rolled_back`                | no        |
//!
//! Rollback restores the changed fields and embeds the note afresh from them (a vector kept
//! with a revision is not trusted to match its fields). If a later revision still in force
//! changed one of the same fields, the rollback is refused with a message naming it: roll
//! that back first. Every action is one store transaction that also writes an audit entry
//! (who, when, why).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use kasten_core::provenance::{self, SetBy};
use kasten_core::{NoteId, NoteStatus, note::index_text};
use kasten_store::{
    AuditEntry, FieldChange, Fields, LinkRecord, MAY_BE_OUTDATED, NewRevision, QueueStates,
    ReviewBatch, Revision, SUPERSEDES, StoreError,
};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError};

/// Review status of a proposal (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    Proposed,
    Applied,
    Accepted,
    Rejected,
    RolledBack,
}

impl ReviewStatus {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "proposed" => Self::Proposed,
            "applied" => Self::Applied,
            "accepted" => Self::Accepted,
            "rejected" => Self::Rejected,
            "rolled_back" | "rolled-back" => Self::RolledBack,
            _ => return None,
        })
    }

    fn of_link(status: &str, reviewed: bool) -> Self {
        match (status, reviewed) {
            ("proposed", _) => Self::Proposed,
            ("accepted", false) => Self::Applied,
            ("accepted", true) => Self::Accepted,
            ("rejected", _) => Self::Rejected,
            _ => Self::RolledBack,
        }
    }

    fn of_revision(status: &str, reviewed: bool) -> Self {
        match (status, reviewed) {
            ("proposed", _) => Self::Proposed,
            ("applied", false) => Self::Applied,
            ("applied", true) => Self::Accepted,
            ("rejected", _) => Self::Rejected,
            _ => Self::RolledBack,
        }
    }
}

/// One entry of the review queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewItem {
    /// `link` or `edit`.
    pub kind: String,
    pub id: String,
    /// The note the edit changes, or the link's source.
    pub note: String,
    /// The link's target.
    pub target: Option<String>,
    pub event: Option<String>,
    /// The link kind, or what the edit is (`construction`, `evolution`).
    pub label: String,
    pub reason: String,
    pub confidence: Option<f64>,
    pub before: Option<crate::read::Fields>,
    pub after: Option<crate::read::Fields>,
    pub status: ReviewStatus,
    pub created_at: DateTime<Utc>,
    /// Each change of an edit with its own reason (empty for links and older revisions).
    pub changes: Vec<crate::read::Change>,
    /// Who made it: `llm`, `merge` (merge-on-write), or the agent (`agent:<name>`, or
    /// `agent` for one that gave no name).
    #[serde(default)]
    pub by: String,
    /// For a "may be outdated" flag (label `may_be_outdated`): the supersession it was
    /// raised for.
    #[serde(default)]
    pub outdated: Option<OutdatedFlag>,
}

/// A "may be outdated" flag: a note that used a value a newer note replaced. Accepting it
/// acknowledges it (the flag becomes a link in force between the note and the note that
/// holds the value now); rejecting it dismisses it. Neither changes the note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutdatedFlag {
    /// The note that may be outdated (the flag's target).
    pub note: String,
    /// The note whose value was replaced.
    pub superseded: String,
    /// The note that replaced it (the flag's source).
    pub successor: String,
    /// The `supersedes` link from `successor` to `superseded`, while it exists.
    pub supersession: Option<String>,
}

/// Changes a user makes to a note's annotations; `None` keeps a field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldEdit {
    pub keywords: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub context: Option<String>,
}

impl FieldEdit {
    fn apply(&self, f: &Fields) -> Fields {
        Fields {
            keywords: self.keywords.clone().unwrap_or_else(|| f.keywords.clone()),
            tags: self.tags.clone().unwrap_or_else(|| f.tags.clone()),
            context: self.context.clone().unwrap_or_else(|| f.context.clone()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keywords.is_none() && self.tags.is_none() && self.context.is_none()
    }
}

/// One line of a note's history.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub at: DateTime<Utc>,
    /// `llm`, `user`, `agent`, `import`.
    pub actor: String,
    /// `created`, `construction`, `evolution`, `edit`, or an audit action
    /// (`accept`, `reject`, `rollback`, `reapply`).
    pub action: String,
    /// The revision, link or event it is about.
    pub id: Option<String>,
    pub status: Option<ReviewStatus>,
    /// Why: for an LLM change with operations, their reasons; otherwise what it is.
    pub reason: String,
    pub before: Option<crate::read::Fields>,
    pub after: Option<crate::read::Fields>,
    /// Each change with its own reason (LLM revisions; empty for the rest).
    pub changes: Vec<crate::read::Change>,
    /// The note's text before and after, when the entry rewrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_after: Option<String>,
}

/// The reason shown for a revision: its operations' reasons when it has them (the
/// revision's own `reason` only says what kind of change it is).
pub(crate) fn explanation(r: &Revision) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for c in &r.changes {
        let why = c.reason.trim();
        if !why.is_empty() && !seen.contains(&why) {
            seen.push(why);
        }
    }
    if seen.is_empty() {
        r.reason.clone()
    } else {
        seen.join("; ")
    }
}

/// What a review action changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReviewOutcome {
    pub action: String,
    pub target: String,
    pub notes: Vec<String>,
    pub revisions: usize,
    pub links: usize,
}

fn changed(r: &Revision) -> [bool; 3] {
    [
        r.before.keywords != r.after.keywords,
        r.before.tags != r.after.tags,
        r.before.context != r.after.context,
    ]
}

/// `base` with the fields `mask` selects taken from `from`.
fn overlay(base: &Fields, from: &Fields, mask: [bool; 3]) -> Fields {
    Fields {
        keywords: if mask[0] {
            from.keywords.clone()
        } else {
            base.keywords.clone()
        },
        tags: if mask[1] {
            from.tags.clone()
        } else {
            base.tags.clone()
        },
        context: if mask[2] {
            from.context.clone()
        } else {
            base.context.clone()
        },
    }
}

pub(crate) fn fields_of(n: &kasten_core::Note) -> Fields {
    Fields {
        keywords: n.keywords.clone(),
        tags: n.tags.clone(),
        context: n.context.clone(),
    }
}

fn conflict(msg: String) -> EngineError {
    EngineError::Conflict(msg)
}

impl Engine {
    /// The review queue: LLM-made links and edits with the given statuses (default: those
    /// waiting for review, `proposed` and `applied`), newest first.
    pub async fn proposals(
        &self,
        statuses: &[ReviewStatus],
        limit: usize,
    ) -> Result<Vec<ReviewItem>, EngineError> {
        self.proposals_by(statuses, None, limit).await
    }

    /// The agents that made links in the review queue (`agent:<name>`, or `agent`), for
    /// Review's filter.
    pub async fn review_agents(&self) -> Result<Vec<String>, EngineError> {
        Ok(self.store.link_agents().await?)
    }

    /// The review queue of one maker (see [`ReviewItem::by`]; `agent` alone means every
    /// agent), or of all with `None`.
    pub async fn proposals_by(
        &self,
        statuses: &[ReviewStatus],
        by: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ReviewItem>, EngineError> {
        let by = by.map(str::trim).filter(|b| !b.is_empty());
        let wanted: Vec<ReviewStatus> = if statuses.is_empty() {
            vec![ReviewStatus::Proposed, ReviewStatus::Applied]
        } else {
            statuses.to_vec()
        };
        let states = QueueStates {
            proposed: wanted.contains(&ReviewStatus::Proposed),
            applied: wanted.contains(&ReviewStatus::Applied),
            accepted: wanted.contains(&ReviewStatus::Accepted),
            rejected: wanted.contains(&ReviewStatus::Rejected),
            rolled_back: wanted.contains(&ReviewStatus::RolledBack),
        };
        // Each table gives its newest `limit`; the newest `limit` of both are among them.
        let mut items = Vec::new();
        for l in self.store.queue_links(states, by, limit).await? {
            let status = ReviewStatus::of_link(&l.status, l.reviewed);
            items.push(ReviewItem {
                kind: "link".into(),
                id: l.id,
                note: l.from,
                target: Some(l.to),
                event: l.event,
                label: l.kind,
                reason: l.reason,
                confidence: Some(l.confidence),
                before: None,
                after: None,
                status,
                created_at: l.created_at,
                changes: Vec::new(),
                by: l.created_by,
                outdated: None,
            });
        }
        let flags: Vec<String> = items
            .iter()
            .filter(|i| i.label == MAY_BE_OUTDATED)
            .map(|i| i.id.clone())
            .collect();
        for o in self.store.flag_origins(&flags).await? {
            if let Some(i) = items.iter_mut().find(|i| i.id == o.flag) {
                i.outdated = Some(OutdatedFlag {
                    note: i.target.clone().unwrap_or_default(),
                    superseded: o.superseded,
                    successor: o.successor,
                    supersession: o.supersession,
                });
            }
        }
        for r in self.store.queue_revisions(states, by, limit).await? {
            let status = ReviewStatus::of_revision(&r.status, r.reviewed);
            let reason = explanation(&r);
            items.push(ReviewItem {
                kind: "edit".into(),
                id: r.id,
                note: r.note.to_string(),
                target: None,
                event: r.event,
                label: r.reason.clone(),
                reason,
                confidence: None,
                before: Some(r.before.into()),
                after: Some(r.after.into()),
                status,
                created_at: r.created_at,
                changes: crate::read::changes(r.changes),
                by: r.actor,
                outdated: None,
            });
        }
        items.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        items.truncate(limit);
        Ok(items)
    }

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
                &r.status, r.reviewed,
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
                        revision_status: vec![(r.id.clone(), "applied".into(), true)],
                        audit: vec![audit(
                            "accept",
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
                        revision_status: vec![(r.id.clone(), "applied".into(), true)],
                        audit: vec![audit(
                            "accept",
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
                    "accept"
                } else {
                    "accept_edited"
                }
                .into(),
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
            let status = ReviewStatus::of_link(&l.status, l.reviewed);
            if !matches!(status, ReviewStatus::Proposed | ReviewStatus::Applied) {
                return Err(EngineError::Invalid(invalid(format!(
                    "link {id} is {status:?} and cannot be accepted"
                ))));
            }
            return self
                .set_link_status(&l, "accepted", "accept", "accepted the link", actor)
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
            return self.undo_content(c, "rejected", "reject", actor).await;
        }
        if let Some(r) = self.store.revision(id).await? {
            return match ReviewStatus::of_revision(&r.status, r.reviewed) {
                ReviewStatus::Proposed => {
                    self.commit_review(&ReviewBatch {
                        revision_status: vec![(r.id.clone(), "rejected".into(), true)],
                        audit: vec![audit(
                            "reject",
                            id,
                            &[&r.note],
                            actor,
                            "rejected the proposed edit",
                        )],
                        ..ReviewBatch::default()
                    })
                    .await?;
                    Ok(ReviewOutcome {
                        action: "reject".into(),
                        target: id.into(),
                        notes: vec![r.note.to_string()],
                        revisions: 1,
                        links: 0,
                    })
                }
                ReviewStatus::Applied | ReviewStatus::Accepted => {
                    self.undo_revisions(&[r], &HashSet::new(), "rejected", "reject", id, actor)
                        .await
                }
                s => Err(EngineError::Invalid(invalid(format!(
                    "edit {id} is already {s:?}"
                )))),
            };
        }
        if let Some(l) = self.store.link(id).await? {
            let status = ReviewStatus::of_link(&l.status, l.reviewed);
            if matches!(status, ReviewStatus::Rejected | ReviewStatus::RolledBack) {
                return Err(EngineError::Invalid(invalid(format!(
                    "link {id} is already {status:?}"
                ))));
            }
            return self
                .set_link_status(&l, "rejected", "reject", "rejected the link", actor)
                .await;
        }
        Err(EngineError::UnknownItem(id.to_owned()))
    }

    /// Rolls back one revision, one link, or a whole event (its links and every edit it
    /// made, in one transaction).
    pub async fn rollback(&self, id: &str, actor: &str) -> Result<ReviewOutcome, EngineError> {
        if let Some(c) = self.store.content_revision(id).await? {
            return self.undo_content(c, "rolled_back", "rollback", actor).await;
        }
        if let Some(r) = self.store.revision(id).await? {
            if !matches!(
                ReviewStatus::of_revision(&r.status, r.reviewed),
                ReviewStatus::Applied | ReviewStatus::Accepted
            ) {
                return Err(EngineError::Invalid(invalid(format!(
                    "edit {id} is not in force ({}); nothing to roll back",
                    r.status
                ))));
            }
            return self
                .undo_revisions(&[r], &HashSet::new(), "rolled_back", "rollback", id, actor)
                .await;
        }
        if let Some(l) = self.store.link(id).await? {
            if l.status != "accepted" {
                return Err(EngineError::Invalid(invalid(format!(
                    "link {id} is not in force ({})",
                    l.status
                ))));
            }
            return self
                .set_link_status(&l, "rolled_back", "rollback", "rolled back the link", actor)
                .await;
        }
        if self.store.event_exists(id).await? {
            let revs = self.store.revisions_where(None, Some(id)).await?;
            // the edits of notes deleted since have nothing left to restore: the event's
            // edits of the notes that remain are undone as a unit
            let revs = self.of_existing_notes(revs).await?;
            let in_force: Vec<Revision> = revs
                .iter()
                .filter(|r| r.status == "applied")
                .cloned()
                .collect();
            let held: Vec<&Revision> = revs.iter().filter(|r| r.status == "proposed").collect();
            let links = self.store.links_where(Some(id)).await?;
            let own: HashSet<String> = revs.iter().map(|r| r.id.clone()).collect();
            let mut batch = self.undo_batch(&in_force, &own, "rolled_back").await?;
            batch.revision_status.extend(
                held.iter()
                    .map(|r| (r.id.clone(), "rejected".to_owned(), true)),
            );
            for l in &links {
                match l.status.as_str() {
                    "accepted" => {
                        batch
                            .link_status
                            .push((l.id.clone(), "rolled_back".into(), true))
                    }
                    "proposed" => batch
                        .link_status
                        .push((l.id.clone(), "rejected".into(), true)),
                    _ => {}
                }
            }
            let mut notes: Vec<NoteId> = revs.iter().map(|r| r.note.clone()).collect();
            notes.sort();
            notes.dedup();
            let note_refs: Vec<&NoteId> = notes.iter().collect();
            batch.audit.push(audit(
                "rollback",
                id,
                &note_refs,
                actor,
                "rolled back the whole event",
            ));
            let (nr, nl) = (batch.revision_status.len(), batch.link_status.len());
            self.commit_review(&batch).await?;
            return Ok(ReviewOutcome {
                action: "rollback_event".into(),
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
                && l.status == "rolled_back"
            {
                return self
                    .set_link_status(&l, "accepted", "reapply", "re-applied the link", actor)
                    .await;
            }
            return Err(EngineError::UnknownItem(event.to_owned()));
        }
        let revs: Vec<Revision> = self
            .of_existing_notes(self.store.revisions_where(None, Some(event)).await?)
            .await?
            .into_iter()
            .filter(|r| r.status == "rolled_back")
            .collect();
        let links: Vec<LinkRecord> = self
            .store
            .links_where(Some(event))
            .await?
            .into_iter()
            .filter(|l| l.status == "rolled_back")
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
                .push((r.id.clone(), "applied".into(), true));
            notes.push(r.note.clone());
        }
        batch.link_status.extend(
            links
                .iter()
                .map(|l| (l.id.clone(), "accepted".to_owned(), true)),
        );
        let note_refs: Vec<&NoteId> = notes.iter().collect();
        batch.audit.push(audit(
            "reapply",
            event,
            &note_refs,
            actor,
            "re-applied the event",
        ));
        self.commit_review(&batch).await?;
        Ok(ReviewOutcome {
            action: "reapply".into(),
            target: event.into(),
            notes: notes.iter().map(ToString::to_string).collect(),
            revisions: revs.len(),
            links: links.len(),
        })
    }

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
                action: "edit".into(),
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
            action: "edit".into(),
            target: id.to_string(),
            notes: vec![id.to_string()],
            revisions: 1,
            links: 0,
        })
    }

    /// What a user's edit of a note whose fields are `before` (with `embedding_before`)
    /// writes: the field change, its revision and audit entry; `None` if it changes nothing.
    #[allow(clippy::too_many_arguments)]
    async fn edit_parts(
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
                    "edit".into()
                } else {
                    reason.into()
                },
                before: before.clone(),
                after,
                embedding_before,
                embedding_after: embedding,
            },
            audit("edit", id.as_str(), &[id], actor, reason),
        )))
    }

    /// A note's complete history, oldest first: creation, construction, evolutions, user
    /// edits, and every review action, each with actor, time and reason.
    pub async fn history(&self, id: &NoteId) -> Result<Vec<HistoryEntry>, EngineError> {
        let note = self.current(id).await?;
        let mut out = vec![HistoryEntry {
            at: note.created_at.min(note.updated_at),
            actor: match note.source.as_deref() {
                Some(s) if s.starts_with("import") => "import".into(),
                // an agent's note (`mcp:<client name>:<n>`): that agent
                Some(s) if s.starts_with("mcp:") => crate::agent_actor(
                    s.trim_start_matches("mcp:")
                        .rsplit_once(':')
                        .map_or("", |(name, _)| name),
                ),
                _ => "user".into(),
            },
            action: "created".into(),
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
                action: if r.actor == "llm" {
                    r.reason.clone()
                } else {
                    "edit".into()
                },
                id: Some(r.id.clone()),
                status: Some(ReviewStatus::of_revision(&r.status, r.reviewed)),
                reason: explanation(&r),
                before: Some(r.before.into()),
                after: Some(r.after.into()),
                changes: crate::read::changes(r.changes),
                ..HistoryEntry::default()
            });
        }
        for a in self.store.audit_of(id).await? {
            if a.action == "edit" {
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

    /// Changes a link's review status, with its audit entry, in one transaction.
    async fn set_link_status(
        &self,
        l: &LinkRecord,
        status: &str,
        action: &str,
        reason: &str,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let (from, to) = link_notes(l)?;
        self.commit_review(&ReviewBatch {
            link_status: vec![(l.id.clone(), status.into(), true)],
            audit: vec![audit(action, &l.id, &[&from, &to], actor, reason)],
            ..ReviewBatch::default()
        })
        .await?;
        Ok(ReviewOutcome {
            action: action.into(),
            target: l.id.clone(),
            notes: vec![l.from.clone(), l.to.clone()],
            revisions: 0,
            links: 1,
        })
    }

    /// The revisions whose note still exists (a deleted note keeps its revisions, with
    /// nothing to apply them to).
    async fn of_existing_notes(&self, revs: Vec<Revision>) -> Result<Vec<Revision>, EngineError> {
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

    fn change(
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
    async fn undo_batch(
        &self,
        revs: &[Revision],
        together: &HashSet<String>,
        status: &str,
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
                        && x.status == "applied"
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
            batch
                .revision_status
                .push((r.id.clone(), status.to_owned(), true));
        }
        Ok(batch)
    }

    async fn undo_revisions(
        &self,
        revs: &[Revision],
        together: &HashSet<String>,
        status: &str,
        action: &str,
        target: &str,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let mut batch = self.undo_batch(revs, together, status).await?;
        let notes: Vec<&NoteId> = revs.iter().map(|r| &r.note).collect();
        batch.audit.push(audit(
            action,
            target,
            &notes,
            actor,
            &format!("{action} of the edit"),
        ));
        self.commit_review(&batch).await?;
        Ok(ReviewOutcome {
            action: action.into(),
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
}

impl Engine {
    /// `batch` with what its supersessions change about "may be outdated" flags, or `None`
    /// if it changes none: a `supersedes` link put in force raises the flags of what used
    /// the value it replaced; one taken out of force (rejected, rolled back) withdraws its
    /// flags still waiting (status `rolled_back`: a later re-apply proposes them again),
    /// while a flag the user accepted or dismissed stays as decided.
    async fn with_outdated_flags(
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
            match status.as_str() {
                "accepted" => b.flags.extend(
                    self.outdated_flags(&from, &to, &l.reason, Utc::now())
                        .await?,
                ),
                "rejected" | "rolled_back" if l.status == "accepted" => {
                    for flag in self.store.pending_flags_of(&from, &to).await? {
                        if !b.link_status.iter().any(|(x, _, _)| *x == flag) {
                            b.link_status.push((flag, "rolled_back".into(), true));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

fn invalid(msg: String) -> kasten_core::CoreError {
    kasten_core::CoreError::Invalid(msg)
}

fn link_notes(l: &LinkRecord) -> Result<(NoteId, NoteId), EngineError> {
    Ok((NoteId::parse(&l.from)?, NoteId::parse(&l.to)?))
}

pub(crate) fn audit(
    action: &str,
    target: &str,
    notes: &[&NoteId],
    actor: &str,
    reason: &str,
) -> AuditEntry {
    AuditEntry {
        action: action.into(),
        target: target.into(),
        notes: notes.iter().map(ToString::to_string).collect(),
        actor: actor.into(),
        reason: reason.into(),
        at: Utc::now(),
    }
}

/// A [`Fields`] as annotations.
fn annotations(f: &Fields) -> provenance::Annotations<'_> {
    provenance::Annotations {
        keywords: &f.keywords,
        tags: &f.tags,
        context: &f.context,
    }
}
