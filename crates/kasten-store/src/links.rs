//! A note's links, and the cursor of the accepted links read a page at a time.

use super::*;

impl Store {
    /// Links touching a note, in either direction.
    pub async fn links_of(&self, id: &NoteId) -> Result<Vec<Link>, StoreError> {
        let mut resp = self
            .db
            .query(
                "LET $r = type::record('note', $id);
                 SELECT record::id(in) AS from, record::id(out) AS to, kind, reason, confidence,
                        created_by, status, created_at
                 FROM link WHERE in = $r OR out = $r ORDER BY created_at",
            )
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<LinkRow> = resp.take(1).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                let status = LinkStatus::parse(&r.status)
                    .map_err(|e| StoreError::Corrupt(format!("a link from {}: {e}", r.from)))?;
                Ok(Link {
                    from: NoteId::parse(&r.from).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    to: NoteId::parse(&r.to).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    kind: LinkKind::parse(&r.kind),
                    reason: r.reason,
                    confidence: r.confidence,
                    created_by: Actor::parse(&r.created_by),
                    status,
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}

/// Where [`Store::accepted_links_page`] goes on: the last link it returned.
#[derive(Debug, Clone)]
pub struct LinkCursor(pub(crate) surrealdb::types::RecordId);
