//! Reads of `supersedes` links: which notes a newer note replaced. The links themselves are
//! written with the notes (`Store::insert_notes_with`) and reviewed like any link.

use chrono::{DateTime, Utc};
use kasten_core::NoteId;
use surrealdb::types::SurrealValue;

use crate::{Store, StoreError};

/// Link kind from a newer note to an older one whose value it replaces.
pub const SUPERSEDES: &str = "supersedes";

/// An accepted supersession of a note: the newer note and since when (the newer note's
/// time, when its value took effect).
#[derive(Debug, Clone, PartialEq)]
pub struct Successor {
    pub note: NoteId,
    pub by: NoteId,
    pub since: DateTime<Utc>,
    pub reason: String,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct SuccessorRaw {
    note: String,
    by: String,
    since: DateTime<Utc>,
    reason: String,
}

impl Store {
    /// The accepted `supersedes` links that start at these notes: what each of them
    /// replaced (`by` is the given note, `note` the older one), newest first. Read through
    /// each note's outgoing edges.
    pub async fn predecessors_of(&self, ids: &[NoteId]) -> Result<Vec<Successor>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(
                "SELECT record::id(out) AS note, record::id(in) AS by, in.created_at AS since, reason
                 FROM array::flatten(array::map($ids, |$k| type::record('note', $k)->link))
                 WHERE kind = $kind AND status = 'accepted'
                 ORDER BY since DESC",
            )
            .bind(("ids", keys))
            .bind(("kind", SUPERSEDES))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<SuccessorRaw> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(SuccessorRaw::parse).collect()
    }

    /// The accepted `supersedes` links that point at these notes, newest successor first
    /// per note. Read through each note's incoming edges, so it costs the links of these
    /// notes, not of the whole memory.
    pub async fn successors_of(&self, ids: &[NoteId]) -> Result<Vec<Successor>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(
                "SELECT record::id(out) AS note, record::id(in) AS by, in.created_at AS since, reason
                 FROM array::flatten(array::map($ids, |$k| type::record('note', $k)<-link))
                 WHERE kind = $kind AND status = 'accepted'
                 ORDER BY since DESC",
            )
            .bind(("ids", keys))
            .bind(("kind", SUPERSEDES))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<SuccessorRaw> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(SuccessorRaw::parse).collect()
    }
}

/// The audit action of a supersession the user settled as "both stay true": the two notes
/// do not conflict, the link is rejected, and the pair is never proposed again.
pub const BOTH_TRUE: &str = "both_true";

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct PairRaw {
    notes: Vec<String>,
}

impl Store {
    /// The pairs of notes, among those touching `ids`, that the user settled as "both stay
    /// true" (an audit entry [`BOTH_TRUE`] naming both notes), each pair in the order the
    /// audit names them (newer, older).
    pub async fn kept_both(&self, ids: &[NoteId]) -> Result<Vec<(NoteId, NoteId)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(
                "SELECT notes.map(|$n| record::id($n)) AS notes FROM audit
                 WHERE action = $action
                   AND array::len(array::intersect(notes, array::map($ids, |$k| type::record('note', $k)))) > 0",
            )
            .bind(("ids", keys))
            .bind(("action", BOTH_TRUE))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<PairRaw> = resp.take(0).map_err(StoreError::from_db)?;
        let parse = |s: &str| NoteId::parse(s).map_err(|e| StoreError::Corrupt(e.to_string()));
        let mut out = Vec::new();
        for r in rows {
            if let [a, b] = r.notes.as_slice() {
                out.push((parse(a)?, parse(b)?));
            }
        }
        Ok(out)
    }
}

impl SuccessorRaw {
    fn parse(self) -> Result<Successor, StoreError> {
        let parse = |s: &str| NoteId::parse(s).map_err(|e| StoreError::Corrupt(e.to_string()));
        Ok(Successor {
            note: parse(&self.note)?,
            by: parse(&self.by)?,
            since: self.since,
            reason: self.reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::note;
    use crate::{DifferWrite, Endpoint, NoteWrite};

    #[tokio::test]
    async fn successors_are_the_accepted_supersedes_links_into_a_note() {
        let store = Store::open(&Endpoint::Mem).await.unwrap();
        let mut old = note("Our rent is 1,200 euros a month.");
        old.created_at = "2026-03-01T00:00:00Z".parse().unwrap();
        let mut new = note("From September the rent is 1,300 euros.");
        new.created_at = "2026-09-01T00:00:00Z".parse().unwrap();
        let other = note("The landlord is Anna.");
        let w = |n: &kasten_core::Note| NoteWrite {
            note: n.clone(),
            embedding: None,
            embed_model: None,
            job: None,
        };
        store
            .insert_notes(&[w(&old), w(&new), w(&other)])
            .await
            .unwrap();
        let link =
            |from: &kasten_core::Note, to: &kasten_core::Note, kind: &str, accepted| DifferWrite {
                from: from.id.clone(),
                to: to.id.clone(),
                kind: kind.into(),
                reason: "rent: 1,200 euros → 1,300 euros".into(),
                confidence: 1.0,
                accepted,
                at: Utc::now(),
            };
        store
            .insert_notes_with(
                &[w(&note("a note to carry the links"))],
                &[],
                &[
                    link(&new, &old, SUPERSEDES, true),
                    link(&other, &old, "relates", true),
                    link(&old, &other, SUPERSEDES, false),
                ],
            )
            .await
            .unwrap();
        let got = store
            .successors_of(&[old.id.clone(), other.id.clone(), new.id.clone()])
            .await
            .unwrap();
        assert_eq!(
            got,
            vec![Successor {
                note: old.id.clone(),
                by: new.id.clone(),
                since: new.created_at,
                reason: "rent: 1,200 euros → 1,300 euros".into(),
            }]
        );
        assert!(store.successors_of(&[]).await.unwrap().is_empty());
        // the same link read from the newer note's side
        let back = store
            .predecessors_of(&[new.id.clone(), other.id.clone(), old.id.clone()])
            .await
            .unwrap();
        assert_eq!(back, got);
        assert!(store.predecessors_of(&[]).await.unwrap().is_empty());
    }
}
