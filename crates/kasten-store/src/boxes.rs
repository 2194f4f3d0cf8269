//! Boxes as stored, the weighted link graph they are computed from, and chat sessions.

use chrono::{DateTime, Utc};
use kasten_core::NoteId;
use surrealdb::types::SurrealValue;

use crate::{Store, StoreError, first_real_error};

/// A Box as stored: members are note ids; `core` are the members assigned by the
/// community detection itself (the rest joined by overlap).
#[derive(Debug, Clone, PartialEq, SurrealValue, serde::Serialize, serde::Deserialize)]
#[surreal(crate = "surrealdb::types")]
pub struct BoxRecord {
    pub id: String,
    pub label: String,
    pub members: Vec<String>,
    pub core: Vec<String>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct EdgeRaw {
    from: String,
    to: String,
    confidence: f64,
}

/// One turn of a stored chat session.
#[derive(Debug, Clone, PartialEq, SurrealValue, serde::Serialize)]
#[surreal(crate = "surrealdb::types")]
pub struct ChatRecord {
    pub role: String,
    pub content: String,
    pub citations: Vec<String>,
    pub at: DateTime<Utc>,
}

impl Store {
    pub async fn boxes(&self) -> Result<Vec<BoxRecord>, StoreError> {
        let mut resp = self
            .db
            .query("SELECT record::id(id) AS id, label, members, core, updated_at FROM box ORDER BY id")
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    /// Replaces every Box in one transaction.
    pub async fn replace_boxes(&self, boxes: &[BoxRecord]) -> Result<(), StoreError> {
        let q = "BEGIN TRANSACTION;
            DELETE box;
            FOR $b IN $boxes {
                CREATE type::record('box', $b.id) CONTENT { label: $b.label, members: $b.members,
                    core: $b.core, updated_at: $b.updated_at };
            };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("boxes", boxes.to_vec()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// Accepted links between active notes, with their confidence: the graph Boxes are
    /// computed from.
    pub async fn weighted_links(&self) -> Result<Vec<(NoteId, NoteId, f64)>, StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT record::id(in) AS from, record::id(out) AS to, confidence FROM link
                 WHERE status = $link_accepted AND in.status = $note_active AND out.status = $note_active",
            )
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<EdgeRaw> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    NoteId::parse(&r.from).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    NoteId::parse(&r.to).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    r.confidence,
                ))
            })
            .collect()
    }

    /// Label material of every active note, in id order: `(id, tags or else keywords,
    /// content)`.
    pub async fn note_terms(&self) -> Result<Vec<(NoteId, Vec<String>, String)>, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            id: String,
            tags: Vec<String>,
            keywords: Vec<String>,
            content: String,
        }
        let mut resp = self
            .db
            .query("SELECT record::id(id) AS id, tags, keywords, content FROM note WHERE status = $note_active ORDER BY id")
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Row> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                let t = if r.tags.is_empty() {
                    r.keywords
                } else {
                    r.tags
                };
                Ok((
                    NoteId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    t,
                    r.content,
                ))
            })
            .collect()
    }

    pub async fn append_chat(&self, session: &str, turns: &[ChatRecord]) -> Result<(), StoreError> {
        let q = "BEGIN TRANSACTION;
            FOR $t IN $turns {
                CREATE chat CONTENT { session: $sess, role: $t.role, content: $t.content,
                    citations: $t.citations, at: $t.at };
            };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("sess", session.to_owned()))
            .bind(("turns", turns.to_vec()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// The last `limit` turns of a chat session, oldest first.
    pub async fn chat_history(
        &self,
        session: &str,
        limit: usize,
    ) -> Result<Vec<ChatRecord>, StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT role, content, citations, at FROM chat WHERE session = $sess
                 ORDER BY at DESC LIMIT $limit",
            )
            .bind(("sess", session.to_owned()))
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        let mut rows: Vec<ChatRecord> = resp.take(0).map_err(StoreError::from_db)?;
        rows.reverse();
        Ok(rows)
    }

    pub async fn clear_chat(&self, session: &str) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("DELETE chat WHERE session = $sess")
            .bind(("sess", session.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }
}
