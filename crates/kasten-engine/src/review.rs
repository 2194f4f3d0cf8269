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
use kasten_core::{
    Action, Actor, LinkStatus, NoteId, NoteStatus, ReviewKind, RevisionStatus, note::index_text,
};
use kasten_store::{
    AuditEntry, FieldChange, Fields, LinkRecord, MAY_BE_OUTDATED, NewRevision, QueueStates,
    ReviewBatch, Revision, SUPERSEDES, StoreError,
};
use serde::{Deserialize, Serialize};

mod actions;
mod commit;
mod edits;

use crate::{Engine, EngineError};

/// Review status of a proposal (see the module docs).
pub use kasten_core::ReviewStatus;

/// One entry of the review queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewItem {
    pub kind: ReviewKind,
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
    pub by: Actor,
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
    pub actor: Actor,
    /// `created`, `construction`, `evolution`, `edit`, or an audit action
    /// (`accept`, `reject`, `rollback`, `reapply`, …).
    pub action: Action,
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
    pub action: Action,
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
            let status = ReviewStatus::of_link(l.status, l.reviewed);
            items.push(ReviewItem {
                kind: ReviewKind::Link,
                id: l.id,
                note: l.from,
                target: Some(l.to),
                event: l.event,
                label: l.kind.to_string(),
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
            let status = ReviewStatus::of_revision(r.status, r.reviewed);
            let reason = explanation(&r);
            items.push(ReviewItem {
                kind: ReviewKind::Edit,
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
}

fn invalid(msg: String) -> kasten_core::CoreError {
    kasten_core::CoreError::Invalid(msg)
}

fn link_notes(l: &LinkRecord) -> Result<(NoteId, NoteId), EngineError> {
    Ok((NoteId::parse(&l.from)?, NoteId::parse(&l.to)?))
}

pub(crate) fn audit(
    action: Action,
    target: &str,
    notes: &[&NoteId],
    actor: &str,
    reason: &str,
) -> AuditEntry {
    AuditEntry {
        action,
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
