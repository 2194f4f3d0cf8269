//! Review, history and rollback records.
//!
//! The engine decides *what* a review action does (and refuses conflicting rollbacks); the
//! store carries it out atomically with [`Store::apply_review`]: a batch of field changes
//! (each guarded by the fields it expects to find), status changes of revisions and links,
//! new revisions (user edits) and audit entries — all in one transaction or none of it.

use chrono::{DateTime, Utc};
use kasten_core::{Action, Actor, Enrich, LinkStatus, NoteId, RevisionStatus};
use surrealdb::types::{Bytes, SurrealValue};

use crate::pipeline::{Change, Fields};
use crate::{LINK_COLUMNS, LinkRecord};
use crate::{Store, StoreError, bytes_to_emb, emb_to_bytes, first_real_error};

/// A revision with everything rollback needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub id: String,
    pub note: NoteId,
    pub event: Option<String>,
    pub actor: Actor,
    pub reason: String,
    pub before: Fields,
    pub after: Fields,
    pub embedding_before: Option<Vec<f32>>,
    pub embedding_after: Option<Vec<f32>>,
    pub status: RevisionStatus,
    pub reviewed: bool,
    pub created_at: DateTime<Utc>,
    /// Each change with its own reason (LLM revisions since evolution became operations).
    pub changes: Vec<Change>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct RevisionRow {
    id: String,
    note: String,
    event: Option<String>,
    actor: String,
    reason: String,
    before: Fields,
    after: Fields,
    embedding_before: Option<Bytes>,
    embedding_after: Option<Bytes>,
    status: String,
    reviewed: bool,
    created_at: DateTime<Utc>,
    changes: Vec<Change>,
}

impl RevisionRow {
    fn into_revision(self) -> Result<Revision, StoreError> {
        let status = revision_status(&self.id, &self.status)?;
        Ok(Revision {
            id: self.id,
            note: NoteId::parse(&self.note).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            event: self.event,
            actor: Actor::parse(&self.actor),
            reason: self.reason,
            before: self.before,
            after: self.after,
            embedding_before: self
                .embedding_before
                .as_ref()
                .map(|b| bytes_to_emb(b))
                .transpose()?,
            embedding_after: self
                .embedding_after
                .as_ref()
                .map(|b| bytes_to_emb(b))
                .transpose()?,
            status,
            reviewed: self.reviewed,
            created_at: self.created_at,
            changes: self.changes,
        })
    }
}

/// A stored revision status; an unknown word is a damaged record.
pub(crate) fn revision_status(revision: &str, word: &str) -> Result<RevisionStatus, StoreError> {
    RevisionStatus::parse(word)
        .map_err(|e| StoreError::Corrupt(format!("revision {revision}: {e}")))
}

const REVISION_COLUMNS: &str = "record::id(id) AS id, record::id(note) AS note,
    IF event != NONE { record::id(event) } ELSE { NONE } AS event, actor, reason, before, after,
    embedding_before, embedding_after, status, reviewed, created_at, changes ?? [] AS changes";

/// An entry of the audit log.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AuditEntry {
    pub action: Action,
    pub target: String,
    pub notes: Vec<String>,
    pub actor: Actor,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// An [`AuditEntry`] as read, its action and actor still words.
#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct AuditRow {
    action: String,
    target: String,
    notes: Vec<String>,
    actor: String,
    reason: String,
    at: DateTime<Utc>,
}

impl AuditRow {
    fn into_entry(self) -> AuditEntry {
        AuditEntry {
            action: Action::parse(&self.action),
            target: self.target,
            notes: self.notes,
            actor: Actor::parse(&self.actor),
            reason: self.reason,
            at: self.at,
        }
    }
}

/// One atomic review action.
#[derive(Debug, Clone, Default)]
pub struct ReviewBatch {
    pub field_changes: Vec<FieldChange>,
    pub revision_status: Vec<(String, RevisionStatus, bool)>,
    pub link_status: Vec<(String, LinkStatus, bool)>,
    pub new_revisions: Vec<NewRevision>,
    pub audit: Vec<AuditEntry>,
    /// "May be outdated" flags a supersession put in force raises (see `supersede.rs`).
    pub flags: Vec<crate::FlagWrite>,
}

/// Set a note's annotations (and embedding), if they are still `expect`.
#[derive(Debug, Clone)]
pub struct FieldChange {
    pub note: NoteId,
    pub expect: Fields,
    pub to: Fields,
    pub embedding: Vec<f32>,
    pub embed_model: String,
    /// Also set the enrichment state (e.g. back to pending when its construction is
    /// rolled back).
    pub enrich_state: Option<Enrich>,
    /// Values a person set with this change, added to the note's origins.
    pub set_by: Vec<kasten_core::provenance::Origin>,
}

/// A revision written by a person (or agent) rather than the pipeline.
#[derive(Debug, Clone)]
pub struct NewRevision {
    pub note: NoteId,
    pub actor: Actor,
    pub reason: String,
    pub before: Fields,
    pub after: Fields,
    pub embedding_before: Option<Vec<f32>>,
    pub embedding_after: Vec<f32>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct FieldChangeParam {
    note: String,
    expect: Fields,
    to: Fields,
    embedding: Bytes,
    embed_model: String,
    enrich_state: Option<String>,
    set_by: Vec<crate::OriginRow>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct StatusParam {
    id: String,
    status: String,
    reviewed: bool,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct NewRevisionParam {
    note: String,
    actor: String,
    reason: String,
    before: Fields,
    after: Fields,
    embedding_before: Option<Bytes>,
    embedding_after: Bytes,
}

/// An [`AuditEntry`] as written (the time is the transaction's).
#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct AuditParam {
    action: String,
    target: String,
    notes: Vec<String>,
    actor: String,
    reason: String,
    at: DateTime<Utc>,
}

impl AuditParam {
    pub(crate) fn of(a: &AuditEntry) -> Self {
        AuditParam {
            action: a.action.to_string(),
            target: a.target.clone(),
            notes: a.notes.clone(),
            actor: a.actor.to_string(),
            reason: a.reason.clone(),
            at: a.at,
        }
    }
}

/// Review states a queue page holds. A change the LLM made takes effect at once under the
/// auto policy (stored status `accepted` for a link, `applied` for a revision); `reviewed`
/// tells whether a person has since confirmed it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStates {
    /// Waiting for a decision (stored status `proposed`).
    pub proposed: bool,
    /// In effect, not yet confirmed by a person.
    pub applied: bool,
    /// In effect and confirmed by a person.
    pub accepted: bool,
    pub rejected: bool,
    /// Anything else: rolled back.
    pub rolled_back: bool,
}

impl QueueStates {
    /// The WHERE fragment selecting these states, given the stored words of a record
    /// held, in effect and rejected. Only the states' own words: nothing from the caller
    /// reaches the query.
    fn filter(self, [proposed, in_effect, rejected]: [&'static str; 3]) -> Option<String> {
        let mut parts = Vec::new();
        if self.proposed {
            parts.push(format!("status = '{proposed}'"));
        }
        if self.applied {
            parts.push(format!("(status = '{in_effect}' AND reviewed = false)"));
        }
        if self.accepted {
            parts.push(format!("(status = '{in_effect}' AND reviewed = true)"));
        }
        if self.rejected {
            parts.push(format!("status = '{rejected}'"));
        }
        if self.rolled_back {
            parts.push(format!(
                "status NOT IN ['{proposed}', '{in_effect}', '{rejected}']"
            ));
        }
        (!parts.is_empty()).then(|| parts.join(" OR "))
    }
}

const CHANGED: &str = "kasten:note-changed";

impl Store {
    pub async fn revision(&self, id: &str) -> Result<Option<Revision>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {REVISION_COLUMNS} FROM ONLY type::record('revision', $id)"
            ))
            .bind(("id", id.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let row: Option<RevisionRow> = resp.take(0).map_err(StoreError::from_db)?;
        row.map(RevisionRow::into_revision).transpose()
    }

    /// Accepts every waiting LLM-made link (proposed, or applied and not yet reviewed) whose
    /// confidence is at least `min_confidence`, each with its audit entry, in one
    /// transaction. Returns the links accepted as (link id, from, to).
    pub async fn accept_links_above(
        &self,
        min_confidence: f64,
        actor: &str,
        reason: &str,
    ) -> Result<Vec<(String, NoteId, NoteId)>, StoreError> {
        // an accepted link is indexed data (the link adjacency)
        let w = self.index_write().await?;
        w.finish(
            self.accept_links_above_unmarked(min_confidence, actor, reason)
                .await,
        )
    }

    /// [`Store::accept_links_above`] without the snapshot bookkeeping.
    async fn accept_links_above_unmarked(
        &self,
        min_confidence: f64,
        actor: &str,
        reason: &str,
    ) -> Result<Vec<(String, NoteId, NoteId)>, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            id: String,
            a: String,
            b: String,
        }
        let q = "BEGIN TRANSACTION;
            LET $now = time::now();
            LET $ls = (SELECT id, in, out FROM link WHERE created_by IN [$by_llm, $by_merge]
                AND confidence >= $min AND (status = $link_proposed OR (status = $link_accepted AND reviewed = false)));
            FOR $l IN $ls {
                UPDATE $l.id SET status = $link_accepted, reviewed = true;
                CREATE audit CONTENT { action: $act_accept, target: record::id($l.id), notes: [$l.in, $l.out],
                    actor: $actor, reason: $reason, at: $now };
            };
            RETURN $ls.map(|$l| { id: record::id($l.id), a: record::id($l.in), b: record::id($l.out) });
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("min", min_confidence))
            .bind(("actor", actor.to_owned()))
            .bind(("reason", reason.to_owned()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)?;
        let n = resp.num_statements();
        let rows: Vec<Row> = resp
            .take(n.saturating_sub(2))
            .map_err(StoreError::from_db)?;
        let parse = |s: &str| NoteId::parse(s).map_err(|e| StoreError::Corrupt(e.to_string()));
        rows.into_iter()
            .map(|r| Ok((r.id, parse(&r.a)?, parse(&r.b)?)))
            .collect()
    }

    /// Whether an accepted link joins `a` and `b` (either direction, any kind).
    pub async fn linked(&self, a: &NoteId, b: &NoteId) -> Result<bool, StoreError> {
        let mut resp = self
            .db
            .query(
                "LET $a = type::record('note', $a);
                 LET $b = type::record('note', $b);
                 RETURN array::len(SELECT VALUE id FROM link WHERE status = $link_accepted
                     AND ((in = $a AND out = $b) OR (in = $b AND out = $a))) > 0;",
            )
            .bind(("a", a.to_string()))
            .bind(("b", b.to_string()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let v: Option<bool> = resp.take(2).map_err(StoreError::from_db)?;
        Ok(v.unwrap_or(false))
    }

    /// The newest links made by the LLM or an agent (created by `llm`, `merge` or `agent`:
    /// an agent's link waits here as a proposal under review) in the given review states,
    /// newest first, at most `limit`: one page of the review queue, filtered and ordered in
    /// the database so a page never reads the whole link table into memory.
    ///
    /// `by` keeps only what one maker made: `llm`, `merge`, one agent (`agent:<name>`), or
    /// every agent (`agent`).
    pub async fn queue_links(
        &self,
        states: QueueStates,
        by: Option<&str>,
        limit: usize,
    ) -> Result<Vec<LinkRecord>, StoreError> {
        let Some(filter) = states.filter([
            LinkStatus::Proposed.as_str(),
            LinkStatus::Accepted.as_str(),
            LinkStatus::Rejected.as_str(),
        ]) else {
            return Ok(Vec::new());
        };
        let maker = match by {
            None => "",
            Some(b) if b == Actor::Agent.as_str() => {
                " AND (created_by = $by_agent OR string::starts_with(created_by, $agent_prefix))"
            }
            Some(_) => " AND created_by = $by",
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT {LINK_COLUMNS} FROM link WHERE (created_by IN [$by_llm, $by_merge, $by_agent] \
                 OR string::starts_with(created_by, $agent_prefix)){maker} AND ({filter}) \
                 ORDER BY created_at DESC, id LIMIT $limit"
            ))
            .bind(("by", by.unwrap_or_default().to_owned()))
            .bind(crate::words::words())
            .bind(("limit", i64::try_from(limit).unwrap_or(i64::MAX)))
            .await
            .map_err(StoreError::from_db)?;
        crate::link_records(resp.take(0).map_err(StoreError::from_db)?)
    }

    /// The agents whose links are in the review queue (`agent`, `agent:<name>`), sorted.
    pub async fn link_agents(&self) -> Result<Vec<String>, StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT VALUE created_by FROM (SELECT created_by FROM link \
                 WHERE created_by = $by_agent OR string::starts_with(created_by, $agent_prefix) \
                 GROUP BY created_by)",
            )
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let mut agents: Vec<String> = resp.take(0).map_err(StoreError::from_db)?;
        agents.sort();
        agents.dedup();
        Ok(agents)
    }

    /// The newest LLM-made revisions in the given review states, newest first, at most
    /// `limit` (see [`Store::queue_links`]).
    ///
    /// Only the LLM's revisions wait in the queue: `by` other than `llm` finds none.
    pub async fn queue_revisions(
        &self,
        states: QueueStates,
        by: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Revision>, StoreError> {
        let Some(filter) = states.filter([
            RevisionStatus::Proposed.as_str(),
            RevisionStatus::Applied.as_str(),
            RevisionStatus::Rejected.as_str(),
        ]) else {
            return Ok(Vec::new());
        };
        if by.is_some_and(|b| b != Actor::Llm.as_str()) {
            return Ok(Vec::new());
        }
        let mut resp = self
            .db
            .query(format!(
                "SELECT {REVISION_COLUMNS} FROM revision WHERE actor = $by_llm AND ({filter}) \
                 ORDER BY created_at DESC, id LIMIT $limit"
            ))
            .bind(("limit", i64::try_from(limit).unwrap_or(i64::MAX)))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<RevisionRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(RevisionRow::into_revision).collect()
    }

    /// Revisions of a note (oldest first), or of an event.
    pub async fn revisions_where(
        &self,
        note: Option<&NoteId>,
        event: Option<&str>,
    ) -> Result<Vec<Revision>, StoreError> {
        let filter = match (note, event) {
            (Some(_), _) => "WHERE note = type::record('note', $note)",
            (None, Some(_)) => "WHERE event = type::record('event', $event)",
            (None, None) => "",
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT {REVISION_COLUMNS} FROM revision {filter} ORDER BY created_at, id"
            ))
            .bind(("note", note.map(|n| n.to_string()).unwrap_or_default()))
            .bind(("event", event.unwrap_or_default().to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<RevisionRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(RevisionRow::into_revision).collect()
    }

    pub async fn link(&self, id: &str) -> Result<Option<LinkRecord>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {LINK_COLUMNS} FROM ONLY type::record('link', $id)"
            ))
            .bind(("id", id.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let row: Option<crate::LinkRecordRow> = resp.take(0).map_err(StoreError::from_db)?;
        row.map(crate::LinkRecordRow::into_record).transpose()
    }

    /// Links of an event, or all links (any status), oldest first.
    pub async fn links_where(&self, event: Option<&str>) -> Result<Vec<LinkRecord>, StoreError> {
        let filter = if event.is_some() {
            "WHERE event = type::record('event', $event)"
        } else {
            ""
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT {LINK_COLUMNS} FROM link {filter} ORDER BY created_at, id"
            ))
            .bind(("event", event.unwrap_or_default().to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        crate::link_records(resp.take(0).map_err(StoreError::from_db)?)
    }

    /// Whether an event with this id exists.
    pub async fn event_exists(&self, id: &str) -> Result<bool, StoreError> {
        let mut resp = self
            .db
            .query("RETURN record::exists(type::record('event', $id))")
            .bind(("id", id.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let b: Option<bool> = resp.take(0).map_err(StoreError::from_db)?;
        Ok(b.unwrap_or(false))
    }

    /// Audit entries touching a note, oldest first.
    pub async fn audit_of(&self, note: &NoteId) -> Result<Vec<AuditEntry>, StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT action, target, notes.map(|$n| record::id($n)) AS notes, actor, reason, at
                 FROM audit WHERE type::record('note', $note) IN notes ORDER BY at",
            )
            .bind(("note", note.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<AuditRow> = resp.take(0).map_err(StoreError::from_db)?;
        Ok(rows.into_iter().map(AuditRow::into_entry).collect())
    }

    /// Carries out one review action atomically. [`StoreError::Conflict`] if a note's
    /// annotations are no longer what the action expected.
    pub async fn apply_review(&self, b: &ReviewBatch) -> Result<(), StoreError> {
        let w = self.index_write().await?;
        w.finish(self.apply_review_unmarked(b).await)
    }

    /// [`Store::apply_review`] without the snapshot bookkeeping.
    async fn apply_review_unmarked(&self, b: &ReviewBatch) -> Result<(), StoreError> {
        let changes: Vec<FieldChangeParam> = b
            .field_changes
            .iter()
            .map(|c| FieldChangeParam {
                note: c.note.to_string(),
                expect: c.expect.clone(),
                to: c.to.clone(),
                embedding: emb_to_bytes(&c.embedding),
                embed_model: c.embed_model.clone(),
                enrich_state: c.enrich_state.map(|e| e.as_str().to_owned()),
                set_by: crate::origin_rows(&c.set_by),
            })
            .collect();
        fn status<S: Copy + std::fmt::Display>(v: &[(String, S, bool)]) -> Vec<StatusParam> {
            v.iter()
                .map(|(id, s, r)| StatusParam {
                    id: id.clone(),
                    status: s.to_string(),
                    reviewed: *r,
                })
                .collect()
        }
        let revs: Vec<NewRevisionParam> = b
            .new_revisions
            .iter()
            .map(|r| NewRevisionParam {
                note: r.note.to_string(),
                actor: r.actor.to_string(),
                reason: r.reason.clone(),
                before: r.before.clone(),
                after: r.after.clone(),
                embedding_before: r.embedding_before.as_deref().map(emb_to_bytes),
                embedding_after: emb_to_bytes(&r.embedding_after),
            })
            .collect();
        let audit: Vec<AuditParam> = b.audit.iter().map(AuditParam::of).collect();
        let q = format!(
            "BEGIN TRANSACTION;
             LET $now = time::now();
             FOR $c IN $changes {{
                 LET $n = type::record('note', $c.note);
                 LET $cur = (SELECT keywords, tags, context FROM ONLY $n);
                 IF $cur = NONE OR $cur.keywords != $c.expect.keywords OR $cur.tags != $c.expect.tags
                    OR $cur.context != $c.expect.context {{ THROW '{CHANGED}' }};
                 UPDATE $n SET keywords = $c.to.keywords, tags = $c.to.tags, context = $c.to.context,
                     embedding = $c.embedding, embed_model = $c.embed_model, version += 1, updated_at = $now;
                 IF $c.enrich_state != NONE {{ UPDATE $n SET enrich_state = $c.enrich_state, enrich_error = NONE }};
                 IF array::len($c.set_by) > 0 {{ UPDATE $n SET set_by = array::union(set_by ?? [], $c.set_by) }};
             }};
             FOR $s IN $revision_status {{
                 UPDATE type::record('revision', $s.id) SET status = $s.status, reviewed = $s.reviewed;
             }};
             FOR $s IN $link_status {{
                 UPDATE type::record('link', $s.id) SET status = $s.status, reviewed = $s.reviewed;
             }};
             FOR $r IN $revisions {{
                 CREATE revision CONTENT {{
                     note: type::record('note', $r.note), event: NONE, actor: $r.actor, reason: $r.reason,
                     before: $r.before, after: $r.after, embedding_before: $r.embedding_before,
                     embedding_after: $r.embedding_after, status: $rev_applied, reviewed: true, created_at: $now
                 }};
             }};
             FOR $a IN $audit {{
                 CREATE audit CONTENT {{
                     action: $a.action, target: $a.target, notes: $a.notes.map(|$n| type::record('note', $n)),
                     actor: $a.actor, reason: $a.reason, at: $now
                 }};
             }};
             {flags}
             COMMIT TRANSACTION;",
            flags = if b.flags.is_empty() {
                ""
            } else {
                crate::supersede::FLAG_WRITES
            }
        );
        let mut resp = self
            .db
            .query(q)
            .bind(("changes", changes))
            .bind(("revision_status", status(&b.revision_status)))
            .bind(("link_status", status(&b.link_status)))
            .bind(("revisions", revs))
            .bind(("audit", audit))
            .bind(("flags", crate::supersede::flag_params(&b.flags)))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        match first_real_error(&mut resp) {
            Err(StoreError::Db(msg)) if msg.contains(CHANGED) => Err(StoreError::Conflict),
            other => other,
        }
    }
}
