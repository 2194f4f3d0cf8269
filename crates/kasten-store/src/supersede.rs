//! Reads of `supersedes` links: which notes a newer note replaced. The links themselves are
//! written with the notes (`Store::insert_notes_with`) and reviewed like any link.
//!
//! And the "may be outdated" flags a supersession in force raises on the notes that used
//! the replaced value: a proposed link of kind [`MAY_BE_OUTDATED`] from the newer note to
//! the dependent note, under an event of kind `outdated` whose `note` is the superseded
//! note — so the flags of one supersession are found again exactly (the successor's
//! outgoing flags whose event names the superseded note). Written by [`FLAG_WRITES`] inside
//! the transaction that puts the supersession in force (a note's insert, a review action).

use chrono::{DateTime, Utc};
use kasten_core::NoteId;
use surrealdb::types::SurrealValue;

use crate::{LINK_COLUMNS, LinkRecord};
use crate::{Store, StoreError};

/// Link kind from a newer note to an older one whose value it replaces.
pub const SUPERSEDES: &str = kasten_core::LinkKind::Supersedes.as_str();

/// Link kind of a flag: from the note that replaced a value to a note that used it.
pub const MAY_BE_OUTDATED: &str = kasten_core::LinkKind::MayBeOutdated.as_str();

/// A "may be outdated" flag to raise: `note` (linked to `superseded`) uses the value that
/// `successor` replaced. Always a proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagWrite {
    pub successor: NoteId,
    pub superseded: NoteId,
    pub note: NoteId,
    /// The flags' event: one per supersession put in force (a job-id-like key).
    pub event: String,
    pub reason: String,
    pub at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct FlagParam {
    successor: String,
    superseded: String,
    note: String,
    event: String,
    reason: String,
    at: DateTime<Utc>,
}

pub(crate) fn flag_params(flags: &[FlagWrite]) -> Vec<FlagParam> {
    flags
        .iter()
        .map(|f| FlagParam {
            successor: f.successor.to_string(),
            superseded: f.superseded.to_string(),
            note: f.note.to_string(),
            event: f.event.clone(),
            reason: f.reason.clone(),
            at: f.at,
        })
        .collect()
}

/// SurrealQL (inside a transaction, `$flags` bound to [`flag_params`]): each flag is
/// created as a proposal, unless a flag joins the two notes already — one withdrawn with
/// its supersession (`rolled_back`) is proposed again, one the user decided (accepted,
/// rejected) or still waiting is left as it is. The event is created with its first flag.
pub(crate) const FLAG_WRITES: &str = "
    FOR $f IN $flags {
        LET $from = type::record('note', $f.successor);
        LET $to = type::record('note', $f.note);
        LET $ev = type::record('event', $f.event);
        LET $had = (SELECT id, status FROM link WHERE in = $from AND out = $to AND kind = $may_be_outdated);
        IF record::exists($to) AND (array::len($had) = 0 OR $had[0].status = $link_rolled_back) {
            IF !record::exists($ev) {
                CREATE $ev CONTENT { note: type::record('note', $f.superseded), kind: $event_outdated, llm_calls: 0, created_at: $f.at };
            };
            IF array::len($had) = 0 {
                RELATE $from->link->$to CONTENT {
                    kind: $may_be_outdated, reason: $f.reason, confidence: 1.0, created_by: $by_merge,
                    status: $link_proposed, reviewed: false, event: $ev, created_at: $f.at
                };
            } ELSE {
                UPDATE $had[0].id SET status = $link_proposed, reviewed = false, reason = $f.reason, event = $ev, created_at = $f.at;
            };
        };
    };";

/// Where a flag comes from: the supersession it was raised for.
#[derive(Debug, Clone, PartialEq, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub struct FlagOrigin {
    /// The flag (a link id).
    pub flag: String,
    /// The note that replaced the value (the flag's source).
    pub successor: String,
    /// The note whose value was replaced.
    pub superseded: String,
    /// The `supersedes` link between them, if it is still there.
    pub supersession: Option<String>,
}

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
                 WHERE kind = $kind AND status = $link_accepted
                 ORDER BY since DESC",
            )
            .bind(("ids", keys))
            .bind(("kind", SUPERSEDES))
            .bind(crate::words::words())
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
                 WHERE kind = $kind AND status = $link_accepted
                 ORDER BY since DESC",
            )
            .bind(("ids", keys))
            .bind(("kind", SUPERSEDES))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<SuccessorRaw> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(SuccessorRaw::parse).collect()
    }
}

impl Store {
    /// The links in force (accepted) into and out of `note`, oldest first: what may depend
    /// on it. Read through the note's own edges.
    pub async fn links_in_force_of(&self, note: &NoteId) -> Result<Vec<LinkRecord>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "LET $n = type::record('note', $id);
                 SELECT {LINK_COLUMNS} FROM array::union($n->link, $n<-link)
                 WHERE status = $link_accepted ORDER BY created_at, id;"
            ))
            .bind(("id", note.to_string()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        crate::link_records(resp.take(1).map_err(StoreError::from_db)?)
    }

    /// [`Store::links_in_force_of`] for several notes in one query: every accepted link
    /// into or out of any of `notes`, each once, oldest first.
    pub async fn links_in_force_of_many(
        &self,
        notes: &[NoteId],
    ) -> Result<Vec<LinkRecord>, StoreError> {
        if notes.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = notes.iter().map(ToString::to_string).collect();
        let mut resp = self
            .db
            .query(format!(
                "SELECT {LINK_COLUMNS} FROM array::distinct(array::flatten(array::map($ids, |$k|
                     array::union(type::record('note', $k)->link, type::record('note', $k)<-link))))
                 WHERE status = $link_accepted ORDER BY created_at, id;"
            ))
            .bind(("ids", keys))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        crate::link_records(resp.take(0).map_err(StoreError::from_db)?)
    }

    /// The flags still waiting (proposed) that the supersession `successor` → `superseded`
    /// raised.
    pub async fn pending_flags_of(
        &self,
        successor: &NoteId,
        superseded: &NoteId,
    ) -> Result<Vec<String>, StoreError> {
        let mut resp = self
            .db
            .query(
                "LET $s = type::record('note', $s);
                 LET $o = type::record('note', $o);
                 SELECT VALUE record::id(id) FROM $s->link
                 WHERE kind = $kind AND status = $link_proposed AND event != NONE
                   AND event.note = $o AND event.kind = $event_outdated;",
            )
            .bind(("s", successor.to_string()))
            .bind(("o", superseded.to_string()))
            .bind(("kind", MAY_BE_OUTDATED))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        resp.take(2).map_err(StoreError::from_db)
    }

    /// Where each of these flags (link ids; other links are left out) comes from.
    pub async fn flag_origins(&self, flags: &[String]) -> Result<Vec<FlagOrigin>, StoreError> {
        if flags.is_empty() {
            return Ok(Vec::new());
        }
        let mut resp = self
            .db
            .query(
                "SELECT record::id(id) AS flag, record::id(in) AS successor,
                        record::id(event.note) AS superseded,
                        (SELECT VALUE record::id(id) FROM link
                         WHERE in = $parent.in AND out = $parent.event.note AND kind = $sup)[0] AS supersession
                 FROM array::map($ids, |$k| type::record('link', $k))
                 WHERE kind = $kind AND event != NONE AND event.kind = $event_outdated",
            )
            .bind(("ids", flags.to_vec()))
            .bind(("kind", MAY_BE_OUTDATED))
            .bind(("sup", SUPERSEDES))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    /// Every `supersedes` link, in any status (proposed, accepted, rejected, rolled back),
    /// into or out of these notes, as (from, to, created_at): the pairs already decided or
    /// waiting.
    pub async fn supersedes_pairs_of(
        &self,
        ids: &[NoteId],
    ) -> Result<Vec<(NoteId, NoteId, DateTime<Utc>)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            from: String,
            to: String,
            created_at: DateTime<Utc>,
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(
                "SELECT record::id(in) AS from, record::id(out) AS to, created_at
                 FROM array::union(
                     array::flatten(array::map($ids, |$k| type::record('note', $k)->link)),
                     array::flatten(array::map($ids, |$k| type::record('note', $k)<-link)))
                 WHERE kind = $kind",
            )
            .bind(("ids", keys))
            .bind(("kind", SUPERSEDES))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Row> = resp.take(0).map_err(StoreError::from_db)?;
        let parse = |s: &str| NoteId::parse(s).map_err(|e| StoreError::Corrupt(e.to_string()));
        rows.into_iter()
            .map(|r| Ok((parse(&r.from)?, parse(&r.to)?, r.created_at)))
            .collect()
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
                by: kasten_core::Actor::Merge,
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

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct PairRaw {
    notes: Vec<String>,
}

impl Store {
    /// The pairs of notes, among those touching `ids`, that the user settled as "both stay
    /// true" (an audit entry [`kasten_core::Action::BothTrue`] naming both notes: the two
    /// notes do not conflict, the link is rejected, and the pair is never proposed again), each pair in the order the
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
                 WHERE action = $act_both_true
                   AND array::len(array::intersect(notes, array::map($ids, |$k| type::record('note', $k)))) > 0",
            )
            .bind(("ids", keys))
            .bind(crate::words::words())
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
