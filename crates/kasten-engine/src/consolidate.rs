//! Consolidation over the whole memory: the supersessions among notes that were never
//! compared on write (imports, notes from before supersession was detected, notes other
//! processes added with it off), found by the same rule and the same candidates as on write
//! (`supersede.rs`: each note against its nearest notes by embedding and by keywords), and
//! filed as proposals in Review.
//!
//! - **Always proposals**, whatever `policy.links` says: a pass over old notes is not the
//!   user telling the memory something new, and an accepted supersession changes search,
//!   validity and answers. It never changes a note; accepting a proposal is what puts it in
//!   force (and raises its "may be outdated" flags).
//! - **A decided pair is never proposed again**: a pair joined by a `supersedes` link in
//!   either direction, in any status (waiting, accepted, rejected, rolled back), is skipped
//!   (`already_known` counts those that were there before the run began).
//! - **Bounded in memory**: notes are walked in pages in id order; each page's proposals are
//!   written in one transaction before the next page is read.
//! - **Resumable**: after each page the cursor (the last note id done, the run's start) is
//!   stored in the setting `consolidate`; a run that stopped — interrupted, or ended by its
//!   `limit` — continues after it, and a run that reached the end clears it.

use std::collections::HashSet;
use std::time::Instant;

use chrono::{DateTime, Utc};
use kasten_core::NoteId;
use serde::{Deserialize, Serialize};

use crate::supersede::{Peers, SUPERSEDE_CANDIDATES};
use crate::{Engine, EngineError};

/// Where a consolidation run keeps its cursor.
pub const CONSOLIDATE_SETTING: &str = "consolidate";
/// Where the runs over new notes only ([`ConsolidateOptions::new_only`]) keep theirs.
pub const CONSOLIDATE_NEW_SETTING: &str = "consolidate_new";

/// Notes per page unless told otherwise.
const DEFAULT_BATCH: usize = 200;

/// How a run goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsolidateOptions {
    /// Notes per page (one transaction of proposals each); 0 means the default (200).
    pub batch: usize,
    /// Stop after this many notes (at the end of a page), leaving the cursor for the next
    /// run: the way an idle pass does a little at a time.
    pub limit: Option<u64>,
    /// Walk only the notes added since the last such run reached the end (the first walks
    /// them all): a cursor of its own that is kept at the end instead of cleared, so the
    /// app's idle pass compares each note once however often it runs.
    #[serde(default)]
    pub new_only: bool,
}

/// Where a run is, after each page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsolidateProgress {
    /// Notes compared so far in this run.
    pub scanned: u64,
    /// Notes in memory (active), for a progress bar; the walk resumed part-way has fewer
    /// left.
    pub total: u64,
    /// Where this run started: notes before it were done by an earlier run.
    pub done_before: u64,
    pub proposed: u64,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsolidateSummary {
    /// Notes compared with their nearest notes in this run.
    pub scanned: u64,
    /// Supersessions filed as proposals in this run.
    pub proposed: u64,
    /// Supersessions found that were already linked (waiting, accepted, rejected or rolled
    /// back) before this run began: not proposed again.
    pub already_known: u64,
    pub seconds: f64,
    /// The last note an earlier, unfinished run had done, when this run continued after it.
    pub resumed_from: Option<String>,
    /// Whether the walk reached the end (the cursor is cleared); false when it stopped at
    /// its limit (the next run continues).
    pub finished: bool,
    /// Notes in memory (active) when the run began, as [`ConsolidateProgress::total`].
    #[serde(default)]
    pub total: u64,
    /// Notes of this walk done by earlier runs, as [`ConsolidateProgress::done_before`].
    #[serde(default)]
    pub done_before: u64,
}

/// The stored cursor.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Cursor {
    /// The last note id done; none: start at the beginning.
    after: Option<String>,
    /// When the walk began (kept across resumed runs): links made since are this walk's own.
    started: Option<DateTime<Utc>>,
    /// Notes done by the runs of this walk.
    done: u64,
    /// A walk over new notes only reached the end: the next run begins a walk of its own
    /// after `after`.
    #[serde(default)]
    finished: bool,
}

impl Engine {
    /// Walks every active note (from where an unfinished run stopped) and files the
    /// supersessions found as proposals (see the module docs). `progress` is told after
    /// each page.
    pub async fn consolidate(
        &self,
        options: &ConsolidateOptions,
        progress: &(dyn Fn(&ConsolidateProgress) + Send + Sync),
    ) -> Result<ConsolidateSummary, EngineError> {
        let t0 = Instant::now();
        let batch = if options.batch == 0 {
            DEFAULT_BATCH
        } else {
            options.batch
        };
        let key = if options.new_only {
            CONSOLIDATE_NEW_SETTING
        } else {
            CONSOLIDATE_SETTING
        };
        let mut cursor: Cursor = match self.store.get_setting(key).await? {
            Some(v) => serde_json::from_value(v).unwrap_or_default(),
            None => Cursor::default(),
        };
        let mut after = cursor.after.as_deref().map(NoteId::parse).transpose()?;
        let resumed_from = after
            .as_ref()
            .filter(|_| !cursor.finished)
            .map(ToString::to_string);
        if after.is_none() {
            cursor = Cursor {
                started: Some(Utc::now()),
                ..Cursor::default()
            };
        } else if cursor.finished {
            // the notes added since the last walk over new notes ended
            cursor.started = Some(Utc::now());
            cursor.finished = false;
        }
        let started = cursor.started.unwrap_or_else(Utc::now);
        let done_before = cursor.done;
        let total = self.read_indexes()?.vector.len() as u64;
        let mut summary = ConsolidateSummary {
            scanned: 0,
            proposed: 0,
            already_known: 0,
            seconds: 0.0,
            resumed_from,
            finished: false,
            total,
            done_before,
        };
        loop {
            if options.limit.is_some_and(|l| summary.scanned >= l) {
                break;
            }
            let rows = self.store.index_rows(after.as_ref(), batch).await?;
            let Some(last) = rows.last().map(|r| r.id.clone()) else {
                summary.finished = true;
                break;
            };
            let ids: Vec<NoteId> = rows.into_iter().map(|r| r.id).collect();
            let (proposed, known) = self.consolidate_page(&ids, started).await?;
            summary.scanned += ids.len() as u64;
            summary.proposed += proposed;
            summary.already_known += known;
            cursor.after = Some(last.to_string());
            cursor.started = Some(started);
            cursor.done = done_before + summary.scanned;
            self.store.set_setting(key, &cursor_value(&cursor)?).await?;
            after = Some(last);
            progress(&ConsolidateProgress {
                scanned: summary.scanned,
                total,
                done_before,
                proposed: summary.proposed,
            });
        }
        if summary.finished {
            // a whole walk starts over next time; a walk over new notes continues after
            // the last note it saw
            let end = if options.new_only {
                Cursor {
                    finished: true,
                    ..cursor
                }
            } else {
                Cursor::default()
            };
            self.store.set_setting(key, &cursor_value(&end)?).await?;
        }
        summary.seconds = t0.elapsed().as_secs_f64();
        Ok(summary)
    }

    /// One page: its notes' supersessions, less the pairs already linked, written as
    /// proposals in one transaction. Returns (proposed, already known before `started`).
    async fn consolidate_page(
        &self,
        ids: &[NoteId],
        started: DateTime<Utc>,
    ) -> Result<(u64, u64), EngineError> {
        let notes = self.store.get_notes(ids).await?;
        let vectors: Vec<Vec<f32>> = {
            let ix = self.read_indexes()?;
            notes
                .iter()
                .map(|n| {
                    Ok(ix
                        .vector
                        .get(&n.id)?
                        .map(|v| v.into_owned())
                        .unwrap_or_default())
                })
                .collect::<Result<_, EngineError>>()?
        };
        // an indexed note finds itself first: one more, so it still gets as many others
        let near = self.nearest(&notes, &vectors, SUPERSEDE_CANDIDATES + 1, true)?;
        let found = self
            .supersessions_among(&notes, &vectors, &near, Peers::Indexed, false, Utc::now())
            .await?;
        if found.is_empty() {
            return Ok((0, 0));
        }
        let mut ends: Vec<NoteId> = found
            .iter()
            .flat_map(|d| [d.from.clone(), d.to.clone()])
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        ends.sort();
        let _filing = self.filing.lock().await;
        let linked = self.store.supersedes_pairs_of(&ends).await?;
        let (mut fresh, mut known) = (Vec::new(), 0u64);
        for d in found {
            let same = |(a, b, _): &&(NoteId, NoteId, DateTime<Utc>)| {
                crate::supersede::same_pair(a, b, &d.from, &d.to)
            };
            match linked.iter().filter(same).map(|l| l.2).min() {
                Some(at) if at < started => known += 1,
                // proposed earlier in this walk, from the other note's side
                Some(_) => {}
                None => fresh.push(d),
            }
        }
        if !fresh.is_empty() {
            self.store.insert_notes_with(&[], &[], &fresh).await?;
        }
        Ok((fresh.len() as u64, known))
    }
}

fn cursor_value(c: &Cursor) -> Result<serde_json::Value, EngineError> {
    serde_json::to_value(c).map_err(|e| EngineError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kasten_core::{LinkStatus, NewNote};
    use kasten_store::SUPERSEDES;

    use super::*;
    use crate::PolicyMode;

    /// Under auto, to show that consolidation proposes all the same.
    async fn engine() -> Engine {
        crate::supersede::tests::engine(PolicyMode::Auto).await
    }

    fn note(text: &str, day: &str) -> NewNote {
        NewNote::new(text)
            .unwrap()
            .at(Some(format!("{day}T09:00:00Z").parse().unwrap()))
    }

    const FACTS: &[(&str, &str)] = &[
        ("The landlord is called Anna Virtanen.", "2026-01-01"),
        ("Our rent is 1,200 euros a month.", "2026-03-01"),
        ("We pay 40 euros a month for electricity.", "2026-01-02"),
        ("The chairperson of Fatah is Mahmoud Abbas.", "2026-01-03"),
        (
            "Goaltender is a position in ice hockey and bandy.",
            "2026-01-04",
        ),
        ("From September the rent is 1,300 euros.", "2026-09-01"),
        ("The chairperson of Fatah is Yasser Arafat.", "2026-02-03"),
    ];

    /// The facts imported (a bulk import is never compared on write).
    async fn imported(e: &Engine) -> Vec<NoteId> {
        e.add_batch(FACTS.iter().map(|(t, d)| note(t, d)).collect())
            .await
            .unwrap()
            .notes
            .into_iter()
            .map(|n| n.id)
            .collect()
    }

    /// Every `supersedes` link as (from, to, status).
    async fn supersessions(e: &Engine) -> Vec<(NoteId, NoteId, LinkStatus)> {
        let mut out = Vec::new();
        for n in e.list(100, 0).await.unwrap() {
            for l in e.get(&n.id).await.unwrap().links {
                if l.kind == SUPERSEDES && l.from == n.id {
                    out.push((l.from, l.to, l.status));
                }
            }
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    #[tokio::test]
    async fn consolidation_proposes_each_supersession_once_and_never_again() {
        let e = engine().await;
        let ids = imported(&e).await;
        assert!(
            supersessions(&e).await.is_empty(),
            "an import compares nothing"
        );
        let seen = Mutex::new(Vec::new());
        let s = e
            .consolidate(&ConsolidateOptions::default(), &|p| {
                seen.lock().unwrap().push(p.clone())
            })
            .await
            .unwrap();
        assert_eq!(
            (s.scanned, s.proposed, s.already_known, s.finished),
            (7, 2, 0, true),
            "{s:?}"
        );
        assert_eq!(s.resumed_from, None);
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.last().map(|p| (p.scanned, p.total)), Some((7, 7)));
        // the newer fact supersedes the older, as proposals even under auto
        let mut want = vec![
            (ids[5].clone(), ids[1].clone(), LinkStatus::Proposed),
            (ids[6].clone(), ids[3].clone(), LinkStatus::Proposed),
        ];
        want.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        assert_eq!(supersessions(&e).await, want);
        let queue = e.proposals(&[], 50).await.unwrap();
        let rent = queue
            .iter()
            .find(|i| i.label == SUPERSEDES && i.note == ids[5].as_str())
            .unwrap();
        assert_eq!(rent.reason, "rent: 1,200 euros → 1,300 euros");
        assert_eq!(rent.by, "merge");
        // nothing in force changed: search ranks as before, no note was touched
        assert!(e.store().accepted_links().await.unwrap().is_empty());
        for id in &ids {
            assert_eq!(e.get(id).await.unwrap().note.version, 1);
        }
        // a second run proposes nothing: the pairs are known
        let again = e
            .consolidate(&ConsolidateOptions::default(), &|_| {})
            .await
            .unwrap();
        assert_eq!(
            (again.scanned, again.proposed, again.already_known),
            (7, 0, 2)
        );
        // decided pairs stay decided: a rejected one is never proposed again
        e.reject(&rent.id, "user").await.unwrap();
        let third = e
            .consolidate(&ConsolidateOptions::default(), &|_| {})
            .await
            .unwrap();
        assert_eq!((third.proposed, third.already_known), (0, 2));
        assert_eq!(supersessions(&e).await.len(), 2);
        e.close().await;
    }

    #[tokio::test]
    async fn an_unfinished_run_continues_where_it_stopped() {
        let e = engine().await;
        let ids = imported(&e).await;
        let first = e
            .consolidate(
                &ConsolidateOptions {
                    batch: 3,
                    limit: Some(3),
                    new_only: false,
                },
                &|_| {},
            )
            .await
            .unwrap();
        assert_eq!((first.scanned, first.finished), (3, false), "{first:?}");
        let mut sorted = ids.clone();
        sorted.sort();
        let rest = e
            .consolidate(
                &ConsolidateOptions {
                    batch: 3,
                    limit: None,
                    new_only: false,
                },
                &|_| {},
            )
            .await
            .unwrap();
        assert_eq!(rest.resumed_from.as_deref(), Some(sorted[2].as_str()));
        assert_eq!((rest.scanned, rest.finished), (4, true), "{rest:?}");
        assert_eq!(first.proposed + rest.proposed, 2);
        assert_eq!(rest.already_known, 0, "its own proposals are not 'known'");
        assert_eq!(supersessions(&e).await.len(), 2);
        // finished: the next run starts from the beginning
        let next = e
            .consolidate(&ConsolidateOptions::default(), &|_| {})
            .await
            .unwrap();
        assert_eq!((next.resumed_from, next.scanned), (None, 7));
        e.close().await;
    }

    /// The idle pass's walk over new notes: the first run walks every note, a run with
    /// nothing new walks none, a note imported later is compared (its supersessions filed
    /// once), and the whole walk of `kasten consolidate` keeps its own cursor.
    #[tokio::test]
    async fn a_walk_over_new_notes_compares_each_note_once_however_often_it_runs() {
        let e = engine().await;
        let ids = imported(&e).await;
        let new_only = ConsolidateOptions {
            batch: 2,
            limit: None,
            new_only: true,
        };
        let first = e.consolidate(&new_only, &|_| {}).await.unwrap();
        assert_eq!(
            (first.scanned, first.proposed, first.finished),
            (ids.len() as u64, 2, true),
            "{first:?}"
        );
        let idle = e.consolidate(&new_only, &|_| {}).await.unwrap();
        assert_eq!((idle.scanned, idle.proposed), (0, 0), "{idle:?}");
        assert_eq!(idle.resumed_from, None, "a finished walk is not resumed");
        let later = e
            .add_batch(vec![note(
                "The rent is 1,450 euros from 2027.",
                "2027-01-01",
            )])
            .await
            .unwrap()
            .notes[0]
            .id
            .clone();
        let next = e.consolidate(&new_only, &|_| {}).await.unwrap();
        assert_eq!((next.scanned, next.finished), (1, true), "{next:?}");
        // the new rent replaces both earlier ones
        assert_eq!(next.proposed, 2, "{next:?}");
        let from_later = supersessions(&e)
            .await
            .into_iter()
            .filter(|(from, _, _)| *from == later)
            .count();
        assert_eq!(from_later, 2);
        assert_eq!(e.consolidate(&new_only, &|_| {}).await.unwrap().scanned, 0);
        // `kasten consolidate` walks the whole memory all the same
        let whole = e
            .consolidate(&ConsolidateOptions::default(), &|_| {})
            .await
            .unwrap();
        assert_eq!(
            (whole.scanned, whole.proposed, whole.already_known),
            (ids.len() as u64 + 1, 0, 4),
            "{whole:?}"
        );
    }

    /// The app's idle pass over new notes and a whole walk at the same time (as when
    /// `kasten consolidate` is served by the open app) file each pair once between them;
    /// without the filing lock the second write of a pair broke the store's unique index
    /// and that walk failed.
    #[tokio::test]
    async fn two_walks_at_once_file_each_supersession_once() {
        let e = engine().await;
        imported(&e).await;
        let whole = ConsolidateOptions {
            batch: 1,
            ..ConsolidateOptions::default()
        };
        let new_only = ConsolidateOptions {
            batch: 1,
            new_only: true,
            ..ConsolidateOptions::default()
        };
        let (a, b) = tokio::join!(
            e.consolidate(&whole, &|_| {}),
            e.consolidate(&new_only, &|_| {})
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.scanned + b.scanned, 14, "{a:?} {b:?}");
        let found = supersessions(&e).await;
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(a.proposed + b.proposed, 2, "{a:?} {b:?}");
    }
}
