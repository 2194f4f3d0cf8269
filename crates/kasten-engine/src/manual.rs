//! What a person (or an agent) does by hand: link two notes, remove a link, rewrite a
//! note's text. Each is recorded like the LLM's changes and can be undone the same way:
//!
//! - `link` writes an accepted, reviewed link `created_by: user` (or the agent) with an audit
//!   entry `link`; `rollback LINK` removes it again.
//! - `unlink` rolls back every accepted link between two notes (audit entry `unlink`);
//!   `reapply LINK` brings one back.
//! - `edit_content` writes a revision whose before/after hold the text, re-embeds and
//!   re-indexes the note, and queues it for enrichment again: the LLM re-annotates it,
//!   proposes its links afresh and may evolve its neighbours, all of it in Review.
//!   `rollback REVISION` restores the earlier text exactly (and, when nothing else
//!   touched the note since, its exact embedding).

use kasten_core::prompts::{LINK_KINDS, is_llm_kind, link_kind_list};
use kasten_core::{Action, Actor, JobId, LinkKind, LinkStatus, NewNote, NoteId, RevisionStatus};
use kasten_store::{ContentChange, ContentRevision, ReviewBatch, StoreError, UserLink};

use crate::review::{HistoryEntry, ReviewOutcome, audit, fields_of};
use crate::{Engine, EngineError};

/// The kind a link made by hand gets when none is chosen.
pub const DEFAULT_LINK_KIND: &str = kasten_core::LinkKind::Relates.as_str();

fn invalid(msg: String) -> EngineError {
    EngineError::Invalid(kasten_core::CoreError::Invalid(msg))
}

/// The link kinds a person may choose (those the LLM uses too).
pub fn link_kinds() -> &'static [LinkKind] {
    LINK_KINDS
}

/// The actor an agent's changes are recorded under: `agent:<name>`, the name the agent
/// gave (MCP's `clientInfo.name`), or plain `agent` without one.
pub fn agent_actor(name: &str) -> String {
    Actor::agent(name).to_string()
}

/// Whether `actor` is an agent (`agent` or `agent:<name>`).
pub fn is_agent(actor: &str) -> bool {
    Actor::parse(actor).is_agent()
}

impl Engine {
    /// Links `from -> to` for an agent (`actor` is `agent` or `agent:<name>`, see
    /// [`agent_actor`]). When `propose` is set or the memory reviews links
    /// (`policy.links review`), the link is a proposal: `created_by` the actor, waiting in
    /// Review, in no search until a person accepts it (audit entry `propose_link`;
    /// the outcome's action says `propose_link`). Otherwise it is accepted as
    /// [`Engine::link`] makes it. A link already there is an error when accepted and
    /// the same proposal (its id again) when proposed; one a person rejected or rolled
    /// back is not proposed again.
    pub async fn agent_link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
        actor: &str,
        propose: bool,
    ) -> Result<ReviewOutcome, EngineError> {
        if !is_agent(actor) {
            return Err(invalid(format!("'{actor}' is not an agent")));
        }
        let review = propose || self.policy().await?.links == crate::PolicyMode::Review;
        if !review {
            return self.link(from, to, kind, reason, actor).await;
        }
        let kind = self.checked_link(from, to, kind).await?;
        let outcome = |id: String| ReviewOutcome {
            action: Action::ProposeLink,
            target: id,
            notes: vec![from.to_string(), to.to_string()],
            revisions: 0,
            links: 1,
        };
        if let Some(l) = self
            .store
            .links_between(from, to, Some(kind))
            .await?
            .into_iter()
            .find(|l| l.from == from.as_str())
        {
            return match l.status {
                LinkStatus::Proposed => Ok(outcome(l.id)),
                LinkStatus::Accepted => Err(invalid(format!(
                    "{from} is already linked to {to} as '{kind}' (link {})",
                    l.id
                ))),
                _ => Err(invalid(format!(
                    "the link {from} -> {to} as '{kind}' was removed or rejected before (link {}); \
                     an agent cannot propose it again",
                    l.id
                ))),
            };
        }
        let reason = reason.trim();
        let id = self
            .store
            .put_proposed_link(&UserLink {
                from: from.clone(),
                to: to.clone(),
                kind: kind.to_owned(),
                reason: reason.to_owned(),
                created_by: actor.into(),
                audit: audit(
                    Action::ProposeLink,
                    "",
                    &[from, to],
                    actor,
                    if reason.is_empty() {
                        "proposed by an agent"
                    } else {
                        reason
                    },
                ),
            })
            .await
            .map_err(|e| match e {
                StoreError::Corrupt(m) if m.contains("gone") => EngineError::Conflict(m),
                other => EngineError::Store(other),
            })?;
        Ok(outcome(id))
    }

    /// The kind a link `from -> to` is made with (`kind`, else the default), once the kind
    /// is known and both notes exist and differ.
    async fn checked_link<'a>(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&'a str>,
    ) -> Result<&'a str, EngineError> {
        let kind = kind.map(str::trim).filter(|k| !k.is_empty());
        let kind = kind.unwrap_or(DEFAULT_LINK_KIND);
        if !is_llm_kind(kind) {
            return Err(invalid(format!(
                "'{kind}' is not a link kind; use one of {}",
                link_kind_list()
            )));
        }
        if from == to {
            return Err(invalid("a note cannot be linked to itself".into()));
        }
        self.current(from).await?;
        self.current(to).await?;
        Ok(kind)
    }

    /// Links `from -> to` by hand: an accepted link of `kind` (default `relates`), recorded
    /// in both notes' history. A link with the same ends and kind that was proposed,
    /// rejected or rolled back before is taken over as the user's.
    pub async fn link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let kind = self.checked_link(from, to, kind).await?;
        if let Some(l) = self
            .store
            .links_between(from, to, Some(kind))
            .await?
            .into_iter()
            .find(|l| l.from == from.as_str() && l.status == LinkStatus::Accepted)
        {
            return Err(invalid(format!(
                "{from} is already linked to {to} as '{kind}' (link {})",
                l.id
            )));
        }
        let reason = reason.trim();
        let order = self.index_order().await;
        let id = self
            .store
            .put_user_link(&UserLink {
                from: from.clone(),
                to: to.clone(),
                kind: kind.to_owned(),
                reason: reason.to_owned(),
                created_by: match Actor::parse(actor) {
                    a if a.is_agent() => a,
                    _ => Actor::User,
                },
                audit: audit(
                    Action::Link,
                    "",
                    &[from, to],
                    actor,
                    if reason.is_empty() {
                        "linked by hand"
                    } else {
                        reason
                    },
                ),
            })
            .await
            .map_err(|e| match e {
                StoreError::Corrupt(m) if m.contains("gone") => EngineError::Conflict(m),
                other => EngineError::Store(other),
            })?;
        let sync = self.index_sync();
        {
            let mut ix = self.write_indexes()?;
            if ix.vector.contains(from) && ix.vector.contains(to) {
                ix.add_link(from, to);
            }
        }
        sync.done();
        drop(order);
        Ok(ReviewOutcome {
            action: Action::Link,
            target: id,
            notes: vec![from.to_string(), to.to_string()],
            revisions: 0,
            links: 1,
        })
    }

    /// Removes every accepted link between `a` and `b` (either direction; only `kind` if
    /// given): each is rolled back with an audit entry `unlink`, in one transaction.
    pub async fn unlink(
        &self,
        a: &NoteId,
        b: &NoteId,
        kind: Option<&str>,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        self.current(a).await?;
        self.current(b).await?;
        let kind = kind.map(str::trim).filter(|k| !k.is_empty());
        let links: Vec<_> = self
            .store
            .links_between(a, b, kind)
            .await?
            .into_iter()
            .filter(|l| l.status == LinkStatus::Accepted)
            .collect();
        if links.is_empty() {
            return Err(invalid(match kind {
                Some(k) => format!("{a} and {b} have no '{k}' link to remove"),
                None => format!("{a} and {b} are not linked"),
            }));
        }
        let batch = ReviewBatch {
            link_status: links
                .iter()
                .map(|l| (l.id.clone(), LinkStatus::RolledBack, true))
                .collect(),
            audit: links
                .iter()
                .map(|l| audit(Action::Unlink, &l.id, &[a, b], actor, "removed the link"))
                .collect(),
            ..ReviewBatch::default()
        };
        self.commit_review(&batch).await?;
        Ok(ReviewOutcome {
            action: Action::Unlink,
            target: links
                .iter()
                .map(|l| l.id.as_str())
                .collect::<Vec<_>>()
                .join(","),
            notes: vec![a.to_string(), b.to_string()],
            revisions: 0,
            links: links.len(),
        })
    }

    /// Rewrites a note's text: versioned (the revision holds both texts), re-embedded and
    /// re-indexed at once, and queued for enrichment again.
    pub async fn edit_content(
        &self,
        id: &NoteId,
        content: &str,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        let content = NewNote::new(content)?.content;
        let note = self.current(id).await?;
        if note.content == content {
            return Ok(ReviewOutcome {
                action: Action::EditContent,
                target: id.to_string(),
                ..ReviewOutcome::default()
            });
        }
        let fields = fields_of(&note);
        let embedding = self.embedding_for(&content, &fields).await?;
        let embedding_before = self.store.embedding_of(id).await?;
        let change = ContentChange {
            note: id.clone(),
            expect: note.content.clone(),
            to: content,
            fields,
            embedding,
            embedding_before,
            embed_model: self.embedder.model_id().to_owned(),
            new_revision: Some((actor.into(), "edited the text".to_owned())),
            revision_status: None,
            enrich_job: Some(JobId::generate()),
            audit: audit(Action::Edit, id.as_str(), &[id], actor, "edited the text"),
        };
        let rev = self.commit_content(&change).await?;
        Ok(ReviewOutcome {
            action: Action::EditContent,
            target: rev.unwrap_or_else(|| id.to_string()),
            notes: vec![id.to_string()],
            revisions: 1,
            links: 0,
        })
    }

    /// Undoes a text revision (`status`: `rolled_back` or `rejected`): the earlier text
    /// comes back exactly, refused when a later edit changed the text since.
    pub(crate) async fn undo_content(
        &self,
        r: ContentRevision,
        status: RevisionStatus,
        action: Action,
        actor: &str,
    ) -> Result<ReviewOutcome, EngineError> {
        if r.status != RevisionStatus::Applied {
            return Err(invalid(format!(
                "edit {} is not in force ({}); nothing to roll back",
                r.id, r.status
            )));
        }
        let note = self.current(&r.note).await?;
        if note.content != r.content_after {
            let later = self
                .store
                .content_revisions_of(&r.note)
                .await?
                .into_iter()
                .rev()
                .find(|x| {
                    x.id != r.id
                        && x.status == RevisionStatus::Applied
                        && x.created_at >= r.created_at
                });
            return Err(EngineError::Conflict(match later {
                Some(x) => format!(
                    "{} cannot be rolled back: the later edit {} changed the text of note {} again; roll back {} first",
                    r.id, x.id, r.note, x.id
                ),
                None => format!(
                    "{} cannot be rolled back: the text of note {} changed since",
                    r.id, r.note
                ),
            }));
        }
        let fields = fields_of(&note);
        let embedding = self.embedding_for(&r.content_before, &fields).await?;
        let change = ContentChange {
            note: r.note.clone(),
            expect: r.content_after.clone(),
            to: r.content_before.clone(),
            fields,
            embedding,
            embedding_before: None,
            embed_model: self.embedder.model_id().to_owned(),
            new_revision: None,
            revision_status: Some((r.id.clone(), status)),
            enrich_job: None,
            audit: audit(
                action.clone(),
                &r.id,
                &[&r.note],
                actor,
                &format!("{action} of the text edit"),
            ),
        };
        self.commit_content(&change).await?;
        Ok(ReviewOutcome {
            action,
            target: r.id.clone(),
            notes: vec![r.note.to_string()],
            revisions: 1,
            links: 0,
        })
    }

    /// Writes a text change, then brings the vector and text indexes in line with it.
    async fn commit_content(&self, c: &ContentChange) -> Result<Option<String>, EngineError> {
        let order = self.index_order().await;
        let rev = self.store.change_content(c).await.map_err(|e| match e {
            StoreError::Conflict => EngineError::Conflict(format!(
                "the text of note {} changed while this was being done; try again",
                c.note
            )),
            other => EngineError::Store(other),
        })?;
        let sync = self.index_sync();
        let note = self.current(&c.note).await?;
        {
            let mut ix = self.write_indexes()?;
            if ix.vector.contains(&note.id) {
                ix.vector.upsert(note.id.clone(), &c.embedding)?;
                ix.text.upsert(note.id.clone(), &note.index_text());
            }
        }
        sync.done();
        drop(order);
        Ok(rev)
    }

    /// Adds the texts of text revisions to a note's history entries.
    pub(crate) async fn add_content_diffs(
        &self,
        id: &NoteId,
        entries: &mut [HistoryEntry],
    ) -> Result<(), EngineError> {
        for r in self.store.content_revisions_of(id).await? {
            if let Some(e) = entries
                .iter_mut()
                .find(|e| e.id.as_deref() == Some(r.id.as_str()) && e.action == Action::Edit)
            {
                e.content_before = Some(r.content_before);
                e.content_after = Some(r.content_after);
            }
        }
        Ok(())
    }
}
