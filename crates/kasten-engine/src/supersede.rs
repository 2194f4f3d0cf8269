//! Supersession on write: a new note that states another value for the same subject and
//! relation as an older note (`kasten_core::supersession`) gets a `supersedes` link from the
//! newer note to the older one, whose reason says what changed ("sport: ice hockey →
//! pesäpallo"). The newer of the two is the one with the later time, so an imported old
//! fact is superseded by the current one already in memory, not the other way round; the
//! value took effect at the newer note's time.
//!
//! Written with the notes, in their transaction, like the links of merge on write: accepted
//! under the `auto` links policy, a proposal in Review under `review`; accepting, rejecting
//! and rolling back are those of any link. Candidates are the nearest notes by embedding and
//! by keywords (the subject's rare words find the older statement among many of the same
//! template) and the earlier notes of the same batch.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kasten_core::validity;
use kasten_core::{FusedHit, Note, NoteId, Via};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError};

mod confirm;
mod detect;
mod flags;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use detect::{Peers, SUPERSEDE_CANDIDATES};

/// How far a chain of successors is followed to the current note (A → B → C …).
const MAX_CHAIN: usize = 8;

/// What replaced a note: the newer note (its direct successor — of several, the one
/// valid first), since when (the successor's `valid_from`, which is this note's
/// `valid_until`) and what changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupersededBy {
    pub id: NoteId,
    pub since: DateTime<Utc>,
    pub reason: String,
}

/// A ranked list with its superseded notes below their current successors (see
/// [`Engine::current_first`]), and what replaced each superseded note in it.
pub(crate) struct CurrentFirst {
    pub hits: Vec<FusedHit>,
    pub superseded: HashMap<NoteId, SupersededBy>,
}

/// An accepted supersession as of a day: the newer note, when its value took effect, why.
#[derive(Debug, Clone)]
struct Edge {
    by: NoteId,
    valid_from: DateTime<Utc>,
    reason: String,
}

/// Whether the link `from → to` joins `a` and `b`, either way.
pub(crate) fn same_pair(from: &NoteId, to: &NoteId, a: &NoteId, b: &NoteId) -> bool {
    (from == a && to == b) || (from == b && to == a)
}

/// A note's `valid_from` ([`kasten_core::validity`]).
pub(crate) fn valid_from(n: &Note) -> DateTime<Utc> {
    validity::valid_from(&n.content, n.source.as_deref(), n.created_at).at
}

impl Engine {
    /// The notes among `ids` that a newer note supersedes (accepted links), each with its
    /// successor and since when, newest successor first.
    pub async fn successors_of(
        &self,
        ids: &[NoteId],
    ) -> Result<Vec<crate::Successor>, EngineError> {
        Ok(crate::shell::into_all(self.store.successors_of(ids).await?))
    }

    /// `valid_from` of each of `ids` that exists.
    async fn valid_from_of(
        &self,
        ids: &[NoteId],
    ) -> Result<HashMap<NoteId, DateTime<Utc>>, EngineError> {
        Ok(self
            .store
            .get_notes(ids)
            .await?
            .iter()
            .map(|n| (n.id.clone(), valid_from(n)))
            .collect())
    }

    /// The accepted supersessions of `ids`, per superseded note; with `before`, only those
    /// whose successor was valid before it (as of a day: the successor's value had taken
    /// effect by then).
    async fn successor_edges(
        &self,
        ids: &[NoteId],
        before: Option<DateTime<Utc>>,
    ) -> Result<HashMap<NoteId, Vec<Edge>>, EngineError> {
        let links = self.store.successors_of(ids).await?;
        if links.is_empty() {
            return Ok(HashMap::new());
        }
        let by: Vec<NoteId> = links
            .iter()
            .map(|s| s.by.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let from = self.valid_from_of(&by).await?;
        let mut out: HashMap<NoteId, Vec<Edge>> = HashMap::new();
        for s in links {
            let Some(&valid_from) = from.get(&s.by) else {
                continue;
            };
            if before.is_some_and(|end| valid_from >= end) {
                continue;
            }
            out.entry(s.note).or_default().push(Edge {
                by: s.by,
                valid_from,
                reason: s.reason,
            });
        }
        Ok(out)
    }

    /// What replaced each of `ids` (see [`SupersededBy`]); with `before`, as of then.
    pub(crate) async fn superseded_by(
        &self,
        ids: &[NoteId],
        before: Option<DateTime<Utc>>,
    ) -> Result<HashMap<NoteId, SupersededBy>, EngineError> {
        Ok(first_successors(&self.successor_edges(ids, before).await?))
    }

    /// A note's validity: when its fact became true and, once an accepted `supersedes`
    /// link replaced it, until when and by what.
    pub(crate) async fn validity_of(
        &self,
        note: &Note,
    ) -> Result<(DateTime<Utc>, Option<SupersededBy>), EngineError> {
        let by = self
            .superseded_by(std::slice::from_ref(&note.id), None)
            .await?
            .remove(&note.id);
        Ok((valid_from(note), by))
    }

    /// As of a day (`end`: the first moment after it): the hits whose value had not taken
    /// effect yet are left out. One that replaced an older note gives its place to the
    /// older note that was valid then (the nearest along the `supersedes` links, marked as
    /// reached by a link from it); a note with no such predecessor is dropped.
    async fn as_it_stood(
        &self,
        fused: Vec<FusedHit>,
        end: DateTime<Utc>,
    ) -> Result<Vec<FusedHit>, EngineError> {
        let ids: Vec<NoteId> = fused.iter().map(|h| h.id.clone()).collect();
        let from = self.valid_from_of(&ids).await?;
        let later: Vec<NoteId> = ids
            .iter()
            .filter(|id| from.get(*id).is_none_or(|v| *v >= end))
            .cloned()
            .collect();
        if later.is_empty() {
            return Ok(fused);
        }
        // walk back from each later note to the nearest predecessors valid before `end`
        let mut stood: HashMap<NoteId, (NoteId, DateTime<Utc>)> = HashMap::new();
        let mut frontier: Vec<(NoteId, NoteId)> =
            later.iter().map(|id| (id.clone(), id.clone())).collect();
        for _ in 0..MAX_CHAIN {
            if frontier.is_empty() {
                break;
            }
            let at: Vec<NoteId> = frontier
                .iter()
                .map(|f| f.1.clone())
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            let links = self.store.predecessors_of(&at).await?;
            if links.is_empty() {
                break;
            }
            let older: Vec<NoteId> = links.iter().map(|l| l.note.clone()).collect();
            let older_from = self.valid_from_of(&older).await?;
            let mut next: Vec<(NoteId, NoteId)> = Vec::new();
            let mut seen: HashSet<(NoteId, NoteId)> = HashSet::new();
            for (origin, cur) in &frontier {
                for l in links.iter().filter(|l| &l.by == cur) {
                    let Some(&v) = older_from.get(&l.note) else {
                        continue;
                    };
                    if v < end {
                        let better = stood.get(origin).is_none_or(|(_, b)| v > *b);
                        if better {
                            stood.insert(origin.clone(), (l.note.clone(), v));
                        }
                    } else if seen.insert((origin.clone(), l.note.clone())) {
                        next.push((origin.clone(), l.note.clone()));
                    }
                }
            }
            // the nearest valid predecessor ends the walk for its note
            next.retain(|(origin, _)| !stood.contains_key(origin));
            frontier = next;
        }
        let indexed: HashSet<NoteId> = {
            let ix = self.read_indexes()?;
            stood
                .values()
                .filter(|(p, _)| ix.vector.contains(p))
                .map(|(p, _)| p.clone())
                .collect()
        };
        let later: HashSet<NoteId> = later.into_iter().collect();
        let mut by_id: HashMap<NoteId, FusedHit> = fused
            .iter()
            .filter(|h| !later.contains(&h.id))
            .map(|h| (h.id.clone(), h.clone()))
            .collect();
        let mut placed: HashSet<NoteId> = HashSet::new();
        let mut out: Vec<FusedHit> = Vec::with_capacity(fused.len());
        for h in fused {
            if placed.contains(&h.id) {
                continue;
            }
            if !later.contains(&h.id) {
                placed.insert(h.id.clone());
                out.push(h);
                continue;
            }
            let Some((p, _)) = stood.get(&h.id).filter(|(p, _)| indexed.contains(p)) else {
                continue;
            };
            if placed.contains(p) {
                continue;
            }
            let taken = stand_in(&mut by_id, p, &h);
            placed.insert(taken.id.clone());
            out.push(taken);
        }
        Ok(out)
    }

    /// Current first: a hit that a newer note superseded (an accepted `supersedes` link)
    /// is ranked right below the note that is current now (the end of its chain of
    /// successors), which takes its place if it ranked lower or was not found at all
    /// (then marked as reached by a link from it); cut to `k`. The superseded note stays in
    /// the list, and says what replaced it.
    ///
    /// With `as_of` (the first moment after the day asked about), the list is the memory
    /// as it stood then ([`Engine::as_it_stood`]), and only successors valid before it
    /// count: a note whose successor took effect later is current.
    pub(crate) async fn current_first(
        &self,
        fused: Vec<FusedHit>,
        k: usize,
        as_of: Option<DateTime<Utc>>,
    ) -> Result<CurrentFirst, EngineError> {
        let fused = match as_of {
            Some(end) => self.as_it_stood(fused, end).await?,
            None => fused,
        };
        let ids: Vec<NoteId> = fused.iter().map(|h| h.id.clone()).collect();
        let edges = self.successor_edges(&ids, as_of).await?;
        let mut superseded = first_successors(&edges);
        if superseded.is_empty() {
            let mut hits = fused;
            hits.truncate(k);
            return Ok(CurrentFirst { hits, superseded });
        }
        // the current note of each chain: each step to the successor valid last
        let mut next_of: HashMap<NoteId, NoteId> = edges
            .iter()
            .filter_map(|(n, e)| Some((n.clone(), latest(e)?.by.clone())))
            .collect();
        let mut current: HashMap<NoteId, NoteId> = next_of.clone();
        for _ in 0..MAX_CHAIN {
            let ends: Vec<NoteId> = current
                .values()
                .filter(|c| !next_of.contains_key(*c))
                .cloned()
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            if ends.is_empty() {
                break;
            }
            let found = self.successor_edges(&ends, as_of).await?;
            let mut moved = false;
            for (n, e) in &found {
                if let Some(l) = latest(e)
                    && let std::collections::hash_map::Entry::Vacant(v) = next_of.entry(n.clone())
                {
                    v.insert(l.by.clone());
                    moved = true;
                }
            }
            let mut changed = false;
            for c in current.values_mut() {
                // at most MAX_CHAIN steps, so a cycle cannot loop
                if let Some(n) = next_of.get(c)
                    && n != c
                {
                    *c = n.clone();
                    changed = true;
                }
            }
            if !moved && !changed {
                break;
            }
        }
        let indexed: HashSet<NoteId> = {
            let ix = self.read_indexes()?;
            current
                .values()
                .filter(|c| ix.vector.contains(c))
                .cloned()
                .collect()
        };
        let mut by_id: HashMap<NoteId, FusedHit> =
            fused.iter().map(|h| (h.id.clone(), h.clone())).collect();
        let mut placed: HashSet<NoteId> = HashSet::new();
        let mut out: Vec<FusedHit> = Vec::with_capacity(fused.len() + 1);
        for h in fused {
            if placed.contains(&h.id) {
                continue;
            }
            if let Some(c) = current.get(&h.id).filter(|c| indexed.contains(*c))
                && !placed.contains(c)
                && *c != h.id
            {
                let lifted = stand_in(&mut by_id, c, &h);
                placed.insert(lifted.id.clone());
                out.push(lifted);
            }
            placed.insert(h.id.clone());
            out.push(h);
        }
        out.truncate(k);
        superseded.retain(|n, _| out.iter().any(|h| &h.id == n));
        Ok(CurrentFirst {
            hits: out,
            superseded,
        })
    }
}

/// Of a note's successors, the one valid first (ties: the first listed, the newest link):
/// what ended the note's validity.
fn first_successors(edges: &HashMap<NoteId, Vec<Edge>>) -> HashMap<NoteId, SupersededBy> {
    edges
        .iter()
        .filter_map(|(n, e)| {
            let first = e.iter().fold(None::<&Edge>, |best, x| match best {
                Some(b) if b.valid_from <= x.valid_from => Some(b),
                _ => Some(x),
            })?;
            Some((
                n.clone(),
                SupersededBy {
                    id: first.by.clone(),
                    since: first.valid_from,
                    reason: first.reason.clone(),
                },
            ))
        })
        .collect()
}

/// Of a note's successors, the one valid last (ties: the first listed, the newest link):
/// the next step towards the current value.
fn latest(edges: &[Edge]) -> Option<&Edge> {
    edges.iter().fold(None::<&Edge>, |best, x| match best {
        Some(b) if b.valid_from >= x.valid_from => Some(b),
        _ => Some(x),
    })
}

/// The hit that takes `for_hit`'s place: `id`'s own hit from the list (with the better of
/// the two scores), or, when the search did not find it, `id` reached by a link from it.
fn stand_in(by_id: &mut HashMap<NoteId, FusedHit>, id: &NoteId, for_hit: &FusedHit) -> FusedHit {
    match by_id.remove(id) {
        Some(mut x) => {
            x.score = x.score.max(for_hit.score);
            x
        }
        None => FusedHit {
            id: id.clone(),
            score: for_hit.score,
            via: vec![Via::Link {
                from: for_hit.id.clone(),
            }],
        },
    }
}
