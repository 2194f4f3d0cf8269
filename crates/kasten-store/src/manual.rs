//! What a person does by hand: links made and removed, a note's text rewritten.
//!
//! Each is one transaction with its audit entry, like a review action. A content edit is a
//! `revision` whose `before`/`after` objects also carry `content` (the objects are
//! flexible, so the annotations-only revisions the pipeline writes read as before); it puts
//! the note back to `pending` and queues an enrichment job unless one is already waiting,
//! so the LLM re-annotates and re-links the new text.

use chrono::{DateTime, Utc};
use kasten_core::{Actor, JobId, NoteId, RevisionStatus};
use surrealdb::types::{Bytes, SurrealValue};

use crate::pipeline::Fields;
use crate::{AuditEntry, LinkRecord};
use crate::{Store, StoreError, bytes_to_emb, emb_to_bytes, first_real_error};

const CHANGED: &str = "kasten:content-changed";
const GONE: &str = "kasten:note-gone";

const LINK_COLUMNS: &str = "record::id(id) AS id, record::id(in) AS from, record::id(out) AS to, kind, reason,
    confidence, created_by, status, reviewed, IF event != NONE { record::id(event) } ELSE { NONE } AS event, created_at";

/// A link made by hand: accepted and reviewed at once.
#[derive(Debug, Clone)]
pub struct UserLink {
    pub from: NoteId,
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    /// The user or an agent.
    pub created_by: Actor,
    pub audit: AuditEntry,
}

/// A revision that rewrote a note's text.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentRevision {
    pub id: String,
    pub note: NoteId,
    pub content_before: String,
    pub content_after: String,
    pub embedding_before: Option<Vec<f32>>,
    pub status: RevisionStatus,
    pub created_at: DateTime<Utc>,
}

/// Set a note's text (and embedding) if it is still `expect`; with a new revision (an
/// edit) or a status change of an existing one (its rollback).
#[derive(Debug, Clone)]
pub struct ContentChange {
    pub note: NoteId,
    pub expect: String,
    pub to: String,
    /// The annotations at the time, recorded beside the text in the revision.
    pub fields: Fields,
    pub embedding: Vec<f32>,
    pub embedding_before: Option<Vec<f32>>,
    pub embed_model: String,
    /// `Some(actor)`: record a new revision by this actor with `reason`.
    pub new_revision: Option<(Actor, String)>,
    /// `Some((revision, status))`: set an existing revision's status.
    pub revision_status: Option<(String, RevisionStatus)>,
    /// Queue an enrichment job with this id unless one is already queued for the note.
    pub enrich_job: Option<JobId>,
    pub audit: AuditEntry,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct Versioned {
    keywords: Vec<String>,
    tags: Vec<String>,
    context: String,
    content: String,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct ContentRow {
    id: String,
    note: String,
    content_before: String,
    content_after: String,
    embedding_before: Option<Bytes>,
    status: String,
    created_at: DateTime<Utc>,
}

impl ContentRow {
    fn into_revision(self) -> Result<ContentRevision, StoreError> {
        let status = crate::review::revision_status(&self.id, &self.status)?;
        Ok(ContentRevision {
            id: self.id,
            note: NoteId::parse(&self.note).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            content_before: self.content_before,
            content_after: self.content_after,
            embedding_before: self
                .embedding_before
                .as_ref()
                .map(|b| bytes_to_emb(b))
                .transpose()?,
            status,
            created_at: self.created_at,
        })
    }
}

const CONTENT_COLUMNS: &str = "record::id(id) AS id, record::id(note) AS note,
    before.content AS content_before, after.content AS content_after, embedding_before, status, created_at";

impl Store {
    /// Links between `a` and `b` in either direction (of `kind` if given), any status.
    pub async fn links_between(
        &self,
        a: &NoteId,
        b: &NoteId,
        kind: Option<&str>,
    ) -> Result<Vec<LinkRecord>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "LET $a = type::record('note', $a);
                 LET $b = type::record('note', $b);
                 SELECT {LINK_COLUMNS} FROM link
                 WHERE ((in = $a AND out = $b) OR (in = $b AND out = $a))
                   AND ($kind = NONE OR kind = $kind)
                 ORDER BY created_at, id;"
            ))
            .bind(("a", a.to_string()))
            .bind(("b", b.to_string()))
            .bind(("kind", kind.map(str::to_owned)))
            .await
            .map_err(StoreError::from_db)?;
        crate::link_records(resp.take(2).map_err(StoreError::from_db)?)
    }

    /// Creates an accepted link `from -> to` of `kind` made by hand, or brings back the one
    /// with the same ends and kind (proposed, rejected or rolled back before) as the user's,
    /// with its audit entry, in one transaction. Returns the link's id.
    pub async fn put_user_link(&self, l: &UserLink) -> Result<String, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.put_user_link_unmarked(l).await)
    }

    async fn put_user_link_unmarked(&self, l: &UserLink) -> Result<String, StoreError> {
        let q = format!(
            "BEGIN TRANSACTION;
             LET $now = time::now();
             LET $a = type::record('note', $from);
             LET $b = type::record('note', $to);
             IF !record::exists($a) OR !record::exists($b) {{ THROW '{GONE}' }};
             LET $old = (SELECT VALUE id FROM link WHERE in = $a AND out = $b AND kind = $kind);
             IF array::len($old) > 0 {{
                 UPDATE $old[0] SET status = $link_accepted, reviewed = true, reason = $reason,
                     created_by = $created_by, confidence = 1.0, event = NONE, created_at = $now;
             }} ELSE {{
                 RELATE $a->link->$b CONTENT {{
                     kind: $kind, reason: $reason, confidence: 1.0, created_by: $created_by,
                     status: $link_accepted, reviewed: true, created_at: $now
                 }};
             }};
             LET $id = (SELECT VALUE id FROM link WHERE in = $a AND out = $b AND kind = $kind)[0];
             CREATE audit CONTENT {{
                 action: $audit.action, target: record::id($id), notes: [$a, $b],
                 actor: $audit.actor, reason: $audit.reason, at: $now
             }};
             RETURN record::id($id);
             COMMIT TRANSACTION;"
        );
        self.write_link(&q, l).await
    }

    /// Creates a proposed link `from -> to` of `kind` (an agent's, under review): waiting in
    /// the review queue, not part of the memory's links until a person accepts it, with its
    /// audit entry, in one transaction. The caller has checked that no link with the same
    /// ends and kind exists. Returns the link's id. (No index write: a proposed link is in
    /// no index.)
    pub async fn put_proposed_link(&self, l: &UserLink) -> Result<String, StoreError> {
        let q = format!(
            "BEGIN TRANSACTION;
             LET $now = time::now();
             LET $a = type::record('note', $from);
             LET $b = type::record('note', $to);
             IF !record::exists($a) OR !record::exists($b) {{ THROW '{GONE}' }};
             RELATE $a->link->$b CONTENT {{
                 kind: $kind, reason: $reason, confidence: 1.0, created_by: $created_by,
                 status: $link_proposed, reviewed: false, created_at: $now
             }};
             LET $id = (SELECT VALUE id FROM link WHERE in = $a AND out = $b AND kind = $kind)[0];
             CREATE audit CONTENT {{
                 action: $audit.action, target: record::id($id), notes: [$a, $b],
                 actor: $audit.actor, reason: $audit.reason, at: $now
             }};
             RETURN record::id($id);
             COMMIT TRANSACTION;"
        );
        self.write_link(&q, l).await
    }

    /// Runs a link write `q` (ending `RETURN record::id($id); COMMIT TRANSACTION;`) with
    /// `l` bound; returns the link's id.
    async fn write_link(&self, q: &str, l: &UserLink) -> Result<String, StoreError> {
        let mut resp = self
            .db
            .query(q)
            .bind(("from", l.from.to_string()))
            .bind(("to", l.to.to_string()))
            .bind(("kind", l.kind.clone()))
            .bind(("reason", l.reason.clone()))
            .bind(("created_by", l.created_by.to_string()))
            .bind(("audit", crate::review::AuditParam::of(&l.audit)))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        match first_real_error(&mut resp) {
            Err(StoreError::Db(msg)) if msg.contains(GONE) => {
                return Err(StoreError::Corrupt(
                    "a note to link is gone (deleted meanwhile)".into(),
                ));
            }
            other => other?,
        }
        let n = resp.num_statements();
        let id: Option<String> = resp
            .take(n.saturating_sub(2))
            .map_err(StoreError::from_db)?;
        id.ok_or_else(|| StoreError::Db("the new link has no id".into()))
    }

    /// The revision `id` if it rewrote a note's text.
    pub async fn content_revision(&self, id: &str) -> Result<Option<ContentRevision>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {CONTENT_COLUMNS} FROM revision
                 WHERE id = type::record('revision', $id) AND before.content != NONE"
            ))
            .bind(("id", id.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<ContentRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .next()
            .map(ContentRow::into_revision)
            .transpose()
    }

    /// A note's text revisions, oldest first.
    pub async fn content_revisions_of(
        &self,
        note: &NoteId,
    ) -> Result<Vec<ContentRevision>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {CONTENT_COLUMNS} FROM revision
                 WHERE note = type::record('note', $note) AND before.content != NONE
                 ORDER BY created_at, id"
            ))
            .bind(("note", note.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<ContentRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(ContentRow::into_revision).collect()
    }

    /// Carries out a text change atomically. [`StoreError::Conflict`] if the note's text is
    /// no longer `expect`. Returns the id of the revision written, if any.
    pub async fn change_content(&self, c: &ContentChange) -> Result<Option<String>, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.change_content_unmarked(c).await)
    }

    async fn change_content_unmarked(
        &self,
        c: &ContentChange,
    ) -> Result<Option<String>, StoreError> {
        let q = format!(
            "BEGIN TRANSACTION;
             LET $now = time::now();
             LET $n = type::record('note', $note);
             LET $cur = (SELECT VALUE content FROM ONLY $n);
             IF $cur = NONE OR $cur != $expect {{ THROW '{CHANGED}' }};
             UPDATE $n SET content = $to, embedding = $emb, embed_model = $embed_model,
                 version += 1, updated_at = $now;
             LET $rev = IF $actor != NONE {{ rand::ulid() }} ELSE {{ NONE }};
             IF $rev != NONE {{
                 CREATE type::record('revision', $rev) CONTENT {{
                     note: $n, event: NONE, actor: $actor, reason: $reason,
                     before: $before, after: $after, embedding_before: $emb_before,
                     embedding_after: $emb, status: $rev_applied, reviewed: true, created_at: $now
                 }};
             }};
             IF $status != NONE {{
                 UPDATE type::record('revision', $status.id) SET status = $status.status, reviewed = true;
             }};
             IF $job != NONE {{
                 UPDATE $n SET enrich_state = $enrich_pending, enrich_error = NONE;
                 IF array::len(SELECT VALUE id FROM job WHERE note = $n AND state = $job_queued) = 0 {{
                     CREATE type::record('job', $job) CONTENT {{
                         note: $n, kind: $job_enrich, state: $job_queued, attempts: 0,
                         created_at: $now, updated_at: $now
                     }};
                 }};
             }};
             CREATE audit CONTENT {{
                 action: $audit.action, target: $rev ?? $audit.target,
                 notes: [$n], actor: $audit.actor, reason: $audit.reason, at: $now
             }};
             RETURN $rev;
             COMMIT TRANSACTION;"
        );
        let versioned = |content: &str| Versioned {
            keywords: c.fields.keywords.clone(),
            tags: c.fields.tags.clone(),
            context: c.fields.context.clone(),
            content: content.to_owned(),
        };
        #[derive(Debug, SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct StatusParam {
            id: String,
            status: String,
        }
        let mut resp = self
            .db
            .query(q)
            .bind(("note", c.note.to_string()))
            .bind(("expect", c.expect.clone()))
            .bind(("to", c.to.clone()))
            .bind(("emb", emb_to_bytes(&c.embedding)))
            .bind((
                "emb_before",
                c.embedding_before.as_deref().map(emb_to_bytes),
            ))
            .bind(("embed_model", c.embed_model.clone()))
            .bind(("actor", c.new_revision.as_ref().map(|r| r.0.to_string())))
            .bind((
                "reason",
                c.new_revision
                    .as_ref()
                    .map(|r| r.1.clone())
                    .unwrap_or_default(),
            ))
            .bind(("before", versioned(&c.expect)))
            .bind(("after", versioned(&c.to)))
            .bind((
                "status",
                c.revision_status.as_ref().map(|(id, s)| StatusParam {
                    id: id.clone(),
                    status: s.to_string(),
                }),
            ))
            .bind(("job", c.enrich_job.as_ref().map(ToString::to_string)))
            .bind(("audit", crate::review::AuditParam::of(&c.audit)))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        match first_real_error(&mut resp) {
            Err(StoreError::Db(msg)) if msg.contains(CHANGED) => return Err(StoreError::Conflict),
            other => other?,
        }
        let n = resp.num_statements();
        resp.take(n.saturating_sub(2)).map_err(StoreError::from_db)
    }
}

impl Store {
    /// Archived notes, most recently changed first: one page, with how many there are.
    pub async fn archived_notes(
        &self,
        limit: usize,
        offset: usize,
    ) -> Result<(u64, Vec<kasten_core::Note>), StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT count() AS n FROM note WHERE status = $note_archived GROUP ALL;
                 SELECT {} FROM note WHERE status = $note_archived ORDER BY updated_at DESC LIMIT $limit START $start",
                crate::NOTE_COLUMNS
            ))
            .bind(("limit", i64::try_from(limit).unwrap_or(i64::MAX)))
            .bind(("start", i64::try_from(offset).unwrap_or(i64::MAX)))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        let rows: Vec<crate::NoteRow> = resp.take(1).map_err(StoreError::from_db)?;
        let notes = rows
            .into_iter()
            .map(crate::NoteRow::into_note)
            .collect::<Result<_, _>>()?;
        Ok((n.unwrap_or(0).max(0) as u64, notes))
    }
}
