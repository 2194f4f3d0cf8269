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
use kasten_core::supersession::supersedes_with;
use kasten_core::text::Tokenizer;
use kasten_core::validity;
use kasten_core::{FusedHit, JobId, Note, NoteId, NoteStatus, Via};
use kasten_store::{DifferWrite, FlagWrite, MAY_BE_OUTDATED, SUPERSEDES};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError};

/// Nearest indexed notes per new note, by embedding and by keywords each.
const SUPERSEDE_CANDIDATES: usize = 10;
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

    /// The `supersedes` links for the new notes of a batch (merged ones excluded): against
    /// their nearest indexed notes and the earlier notes of the batch. At most one link per
    /// pair of notes.
    pub(crate) async fn find_supersessions(
        &self,
        notes: &[Note],
        vectors: &[Vec<f32>],
        accepted: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<DifferWrite>, EngineError> {
        self.supersessions_among(notes, vectors, Peers::Batch, accepted, now)
            .await
    }

    /// The `supersedes` links between `notes` and their nearest indexed notes (by
    /// embedding and by keywords), and, with [`Peers::Batch`], the earlier notes of the
    /// batch: what [`Engine::find_supersessions`] finds on write, and what consolidation
    /// finds for notes already in memory ([`Peers::Indexed`]: `notes` are indexed
    /// themselves, so a note is not its own candidate, and of two notes with the same time
    /// the one written later — the greater id — is the newer).
    pub(crate) async fn supersessions_among(
        &self,
        notes: &[Note],
        vectors: &[Vec<f32>],
        peers: Peers,
        accepted: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<DifferWrite>, EngineError> {
        // (new note, candidate id, candidate's position in the batch)
        let mut cands: Vec<(usize, NoteId, Option<usize>)> = Vec::new();
        // an indexed note finds itself first: one more, so it still gets as many others
        let k = match peers {
            Peers::Batch => SUPERSEDE_CANDIDATES,
            Peers::Indexed => SUPERSEDE_CANDIDATES + 1,
        };
        {
            let ix = self.read_indexes()?;
            for (i, n) in notes.iter().enumerate() {
                if n.status != NoteStatus::Active {
                    continue;
                }
                let mut seen = HashSet::new();
                seen.insert(n.id.clone());
                let near = vectors
                    .get(i)
                    .filter(|v| !v.is_empty())
                    .map(|v| ix.vector.search(v, k))
                    .transpose()?
                    .unwrap_or_default();
                let words = ix.text.search(&n.content, k);
                for (id, _) in near.into_iter().chain(words) {
                    if seen.insert(id.clone()) {
                        cands.push((i, id, None));
                    }
                }
                if peers == Peers::Indexed {
                    continue;
                }
                // the earlier notes of this batch, nearest first
                let mut earlier: Vec<(usize, f32)> = (0..i)
                    .filter(|&j| notes[j].status == NoteStatus::Active)
                    .map(|j| (j, dot(vectors.get(i), vectors.get(j))))
                    .collect();
                earlier.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
                for (j, _) in earlier.into_iter().take(SUPERSEDE_CANDIDATES) {
                    cands.push((i, notes[j].id.clone(), Some(j)));
                }
            }
        }
        if cands.is_empty() {
            return Ok(Vec::new());
        }
        let existing: Vec<NoteId> = cands
            .iter()
            .filter(|c| c.2.is_none())
            .map(|c| c.1.clone())
            .collect();
        let old: HashMap<NoteId, Note> = self
            .store
            .get_notes(&existing)
            .await?
            .into_iter()
            .filter(|n| n.status == NoteStatus::Active)
            .map(|n| (n.id.clone(), n))
            .collect();
        let tokenizer = Tokenizer::default();
        let mut pairs: HashSet<(NoteId, NoteId)> = HashSet::new();
        let mut out = Vec::new();
        for (i, id, j) in cands {
            let new = &notes[i];
            let Some(other) = (match j {
                Some(j) => notes.get(j),
                None => old.get(&id),
            }) else {
                continue;
            };
            // the later statement supersedes; at the same time, the one written last
            let later = other.created_at > new.created_at
                || (peers == Peers::Indexed
                    && other.created_at == new.created_at
                    && other.id > new.id);
            let (newer, older) = if later { (other, new) } else { (new, other) };
            let key = if newer.id < older.id {
                (newer.id.clone(), older.id.clone())
            } else {
                (older.id.clone(), newer.id.clone())
            };
            if pairs.contains(&key) {
                continue;
            }
            if let Some(s) = supersedes_with(&tokenizer, &newer.content, &older.content) {
                pairs.insert(key);
                out.push(DifferWrite {
                    from: newer.id.clone(),
                    to: older.id.clone(),
                    kind: SUPERSEDES.into(),
                    reason: s.reason(),
                    confidence: 1.0,
                    accepted,
                    at: now,
                });
            }
        }
        // a pair the user kept as "both stay true" is never proposed again
        self.without_kept_both(out).await
    }
}

/// What a note is compared with besides its nearest indexed notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peers {
    /// New notes not indexed yet: also the earlier notes of their batch.
    Batch,
    /// Notes already indexed (consolidation): only the index.
    Indexed,
}

/// Link kinds through which a note builds on another's value.
const DEPENDS: &[&str] = &["supports", "elaborates", "causes", "follows"];

/// Link kinds that say nothing about using a value: the supersession links themselves,
/// flags, and a `contradicts` (the note states another value).
const NOT_DEPENDING: &[&str] = &[SUPERSEDES, MAY_BE_OUTDATED, "contradicts"];

/// What a supersession changed, read back from its reason ("rent: 1,200 euros → 1,300
/// euros", as [`kasten_core::supersession::Supersession::reason`] writes it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Replaced {
    attribute: Option<Vec<String>>,
    attribute_text: String,
    old_text: String,
    /// The old value's terms, and its number's alone when it has one ("1,200 euros":
    /// `1 200 euro`, `1 200`).
    old: Vec<Vec<String>>,
}

impl Replaced {
    pub(crate) fn parse(tokenizer: &Tokenizer, reason: &str) -> Option<Self> {
        let (attribute, values) = reason.split_once(": ")?;
        let (old, _new) = values.split_once(" → ")?;
        let (attribute, old_text) = (attribute.trim(), old.trim());
        let terms = tokenizer.tokenize(old_text);
        if terms.is_empty() {
            return None;
        }
        let mut old = vec![terms.clone()];
        let number: Vec<String> = terms
            .iter()
            .take_while(|t| t.chars().all(|c| c.is_ascii_digit()))
            .cloned()
            .collect();
        if !number.is_empty() && number.len() < terms.len() {
            old.push(number);
        }
        let attr_terms = tokenizer.tokenize(attribute);
        Some(Self {
            attribute: (attribute != "value" && !attr_terms.is_empty()).then_some(attr_terms),
            attribute_text: attribute.to_owned(),
            old_text: old_text.to_owned(),
            old,
        })
    }

    /// Whether `text` states the old value.
    fn names_value(&self, tokenizer: &Tokenizer, text: &str) -> bool {
        let terms = tokenizer.tokenize(text);
        self.old
            .iter()
            .any(|v| terms.windows(v.len()).any(|w| w == v.as_slice()))
    }

    /// What of the replaced value `text` uses, in words ("rent 1,200 euros", "rent"), or
    /// `None`.
    fn used_in(&self, tokenizer: &Tokenizer, text: &str) -> Option<String> {
        let terms = tokenizer.tokenize(text);
        let attribute = self
            .attribute
            .as_ref()
            .is_some_and(|a| a.iter().all(|t| terms.contains(t)));
        let value = self
            .old
            .iter()
            .any(|v| terms.windows(v.len()).any(|w| w == v.as_slice()));
        match (attribute, value) {
            (true, true) => Some(format!("{} {}", self.attribute_text, self.old_text)),
            (false, true) => Some(self.old_text.clone()),
            (true, false) => Some(self.attribute_text.clone()),
            (false, false) => None,
        }
    }
}

impl Engine {
    /// The "may be outdated" flags the supersession `successor` → `superseded` raises: on
    /// each active note linked to the superseded note in force — by a link of a kind that
    /// builds on it (supports, elaborates, causes, follows) whose note uses the replaced
    /// value (states the old value or names the attribute), or by any link whose reason
    /// states the old value. Never on the two notes themselves. One event for all of them.
    pub(crate) async fn outdated_flags(
        &self,
        successor: &NoteId,
        superseded: &NoteId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<Vec<FlagWrite>, EngineError> {
        let tokenizer = Tokenizer::default();
        let Some(replaced) = Replaced::parse(&tokenizer, reason) else {
            return Ok(Vec::new());
        };
        // each other note, and whether a link's reason states the old value
        let mut linked: Vec<(NoteId, bool)> = Vec::new();
        for l in self.store.links_in_force_of(superseded).await? {
            if NOT_DEPENDING.contains(&l.kind.as_str()) {
                continue;
            }
            let other = if l.from == superseded.as_str() {
                &l.to
            } else {
                &l.from
            };
            let other = NoteId::parse(other)?;
            if &other == successor || &other == superseded {
                continue;
            }
            let named = replaced.names_value(&tokenizer, &l.reason);
            if !named && !DEPENDS.contains(&l.kind.as_str()) {
                continue;
            }
            match linked.iter_mut().find(|(n, _)| *n == other) {
                Some(e) => e.1 |= named,
                None => linked.push((other, named)),
            }
        }
        if linked.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<NoteId> = linked.iter().map(|(n, _)| n.clone()).collect();
        let notes: HashMap<NoteId, Note> = self
            .store
            .get_notes(&ids)
            .await?
            .into_iter()
            .filter(|n| n.status == NoteStatus::Active)
            .map(|n| (n.id.clone(), n))
            .collect();
        let event = JobId::generate().to_string();
        let mut out = Vec::new();
        for (id, named) in linked {
            let Some(n) = notes.get(&id) else {
                continue;
            };
            let uses = match replaced.used_in(&tokenizer, &n.content) {
                Some(what) => what,
                None if named => replaced.old_text.clone(),
                None => continue,
            };
            out.push(FlagWrite {
                successor: successor.clone(),
                superseded: superseded.clone(),
                note: id,
                event: event.clone(),
                reason: format!("uses {uses}, replaced by note {successor} ({reason})"),
                at,
            });
        }
        Ok(out)
    }

    /// The flags that the accepted supersessions among the links written with new notes
    /// raise (see [`Engine::outdated_flags`]).
    pub(crate) async fn flags_on_write(
        &self,
        links: &[DifferWrite],
        at: DateTime<Utc>,
    ) -> Result<Vec<FlagWrite>, EngineError> {
        let mut out = Vec::new();
        for d in links.iter().filter(|d| d.accepted && d.kind == SUPERSEDES) {
            out.extend(self.outdated_flags(&d.from, &d.to, &d.reason, at).await?);
        }
        Ok(out)
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

fn dot(a: Option<&Vec<f32>>, b: Option<&Vec<f32>>) -> f32 {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| x * y).sum(),
        _ => 0.0,
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use kasten_core::{LinkStatus, NewNote};
    use kasten_store::Endpoint;

    use super::*;
    use crate::tests::HashEmbedder;
    use crate::{EngineOptions, PipelineOptions, Policy, PolicyMode, ReviewStatus};

    /// An in-memory engine without an LLM under the links and edits policy `mode`.
    pub(crate) async fn engine(mode: PolicyMode) -> Engine {
        let options = EngineOptions {
            llm: None,
            pipeline: PipelineOptions::default(),
            storage: None,
        };
        let e = Engine::open_with(
            &Endpoint::Mem,
            HashEmbedder::arc("h", 128, 3),
            options,
            &|_| {},
        )
        .await
        .unwrap();
        e.set_policy(&Policy {
            links: mode,
            edits: mode,
            auto_accept_confidence: None,
        })
        .await
        .unwrap();
        e
    }

    fn at(day: &str) -> Option<DateTime<Utc>> {
        Some(format!("{day}T09:00:00Z").parse().unwrap())
    }

    async fn add(e: &Engine, text: &str, day: &str) -> NoteId {
        e.add(NewNote::new(text).unwrap().at(at(day)))
            .await
            .unwrap()
            .id
    }

    const NOISE: &[&str] = &[
        "The landlord is called Anna Virtanen.",
        "Goaltender is a position in ice hockey and bandy.",
        "We pay 40 euros a month for electricity.",
    ];

    async fn supersedes_links(e: &Engine, id: &NoteId) -> Vec<kasten_core::Link> {
        e.get(id)
            .await
            .unwrap()
            .links
            .into_iter()
            .filter(|l| l.kind == SUPERSEDES)
            .collect()
    }

    #[tokio::test]
    async fn a_new_value_supersedes_the_old_one_with_what_changed() {
        let e = engine(PolicyMode::Auto).await;
        for n in NOISE {
            add(&e, n, "2026-02-01").await;
        }
        let old = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        let links = supersedes_links(&e, &new).await;
        assert_eq!(links.len(), 1, "{links:?}");
        let l = &links[0];
        assert_eq!((&l.from, &l.to), (&new, &old));
        assert_eq!(l.reason, "rent: 1,200 euros → 1,300 euros");
        assert_eq!(l.status, LinkStatus::Accepted);
        assert_eq!(l.created_by, "merge");
        // when it took effect: the newer note's time
        let succ = e
            .store()
            .successors_of(std::slice::from_ref(&old))
            .await
            .unwrap();
        assert_eq!(succ.len(), 1);
        assert_eq!(succ[0].by, new);
        assert_eq!(Some(succ[0].since), at("2026-09-01"));
        // the electricity bill is another quantity: not superseded
        let all = e.store().accepted_links().await.unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        // search: the current value first, the old one still found, saying what replaced it
        for q in ["Our rent is 1,200 euros a month.", "how much is the rent"] {
            let hits = e.search(q, 3).await.unwrap().hits;
            let pos = |id: &NoteId| hits.iter().position(|h| &h.note.id == id);
            let (pn, po) = (pos(&new).unwrap(), pos(&old).unwrap());
            assert!(pn < po, "{q}: {hits:?}");
            let by = hits[po].superseded_by.as_ref().unwrap();
            // since the new value took effect: the month its text names
            assert_eq!((&by.id, by.since), (&new, midnight("2026-09-01")));
            assert_eq!(by.reason, "rent: 1,200 euros → 1,300 euros");
            assert!(hits[pn].superseded_by.is_none());
        }
        e.close().await;
    }

    #[tokio::test]
    async fn an_old_fact_written_later_is_superseded_by_the_newer_one() {
        let e = engine(PolicyMode::Auto).await;
        let new = add(
            &e,
            "goaltender is associated with the sport of pesäpallo.",
            "2026-05-01",
        )
        .await;
        let old = add(
            &e,
            "goaltender is associated with the sport of ice hockey.",
            "2026-01-01",
        )
        .await;
        let links = supersedes_links(&e, &old).await;
        assert_eq!(links.len(), 1, "{links:?}");
        assert_eq!((&links[0].from, &links[0].to), (&new, &old));
        assert_eq!(links[0].reason, "sport: ice hockey → pesäpallo");
        // a batch finds it among its own notes too, and keeps one link per pair
        let b = e
            .add_batch_merging(vec![
                NewNote::new("The chairperson of Fatah is Mahmoud Abbas.")
                    .unwrap()
                    .at(at("2026-01-01")),
                NewNote::new("The chairperson of Fatah is Yasser Arafat.")
                    .unwrap()
                    .at(at("2026-02-01")),
            ])
            .await
            .unwrap();
        let links = supersedes_links(&e, &b.notes[1].id).await;
        assert_eq!(links.len(), 1, "{links:?}");
        assert_eq!(
            links[0].reason,
            "chairperson: Mahmoud Abbas → Yasser Arafat"
        );
        // without the setting, nothing is recorded
        e.set_merge_options(&crate::MergeOptions {
            supersede: false,
            ..Default::default()
        })
        .await
        .unwrap();
        let off = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let off2 = add(&e, "Our rent is 1,300 euros a month.", "2026-09-01").await;
        assert!(supersedes_links(&e, &off).await.is_empty());
        assert!(supersedes_links(&e, &off2).await.is_empty());
        e.close().await;
    }

    #[tokio::test]
    async fn under_review_a_supersession_is_a_proposal_accepted_and_rolled_back_exactly() {
        let e = engine(PolicyMode::Review).await;
        for n in NOISE {
            add(&e, n, "2026-02-01").await;
        }
        let old = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let links_before: BTreeSet<_> = e
            .store()
            .accepted_links()
            .await
            .unwrap()
            .into_iter()
            .collect();
        let old_before = e.get(&old).await.unwrap().note;
        let new = add(&e, "Our rent is 1,300 euros a month.", "2026-09-01").await;
        // a proposal: nothing in force yet
        assert!(
            e.store()
                .successors_of(std::slice::from_ref(&old))
                .await
                .unwrap()
                .is_empty()
        );
        let hits = e
            .search("Our rent is 1,200 euros a month.", 5)
            .await
            .unwrap()
            .hits;
        assert_eq!(hits[0].note.id, old, "{hits:?}");
        assert!(hits.iter().all(|h| h.superseded_by.is_none()));
        let queue = e.proposals(&[], 50).await.unwrap();
        let item = queue
            .iter()
            .find(|i| i.label == SUPERSEDES)
            .unwrap_or_else(|| panic!("no supersedes proposal in {queue:?}"));
        assert_eq!(item.note, new.to_string());
        assert_eq!(item.target.as_deref(), Some(old.as_str()));
        assert_eq!(item.reason, "rent: 1,200 → 1,300");
        let merged_queue: Vec<_> = queue.iter().filter(|i| i.label == "contradicts").collect();
        assert!(
            merged_queue.is_empty(),
            "the supersession replaces contradicts: {merged_queue:?}"
        );
        // accept: in force
        e.accept(&item.id, &crate::FieldEdit::default(), "user")
            .await
            .unwrap();
        let succ = e
            .store()
            .successors_of(std::slice::from_ref(&old))
            .await
            .unwrap();
        assert_eq!(succ.len(), 1);
        assert_eq!(succ[0].by, new);
        let hits = e
            .search("Our rent is 1,200 euros a month.", 5)
            .await
            .unwrap()
            .hits;
        let po = hits.iter().position(|h| h.note.id == old).unwrap();
        assert!(hits[..po].iter().any(|h| h.note.id == new), "{hits:?}");
        assert_eq!(hits[po].superseded_by.as_ref().map(|s| &s.id), Some(&new));
        let applied = e.proposals(&[ReviewStatus::Accepted], 50).await.unwrap();
        assert!(applied.iter().any(|i| i.id == item.id), "{applied:?}");
        // roll back: the memory is as before the acceptance
        e.rollback(&item.id, "user").await.unwrap();
        assert!(
            e.store()
                .successors_of(std::slice::from_ref(&old))
                .await
                .unwrap()
                .is_empty()
        );
        let links_after: BTreeSet<_> = e
            .store()
            .accepted_links()
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(links_after, links_before);
        let old_after = e.get(&old).await.unwrap().note;
        assert_eq!(
            (
                &old_after.content,
                &old_after.keywords,
                &old_after.tags,
                &old_after.context,
                old_after.status,
                old_after.version
            ),
            (
                &old_before.content,
                &old_before.keywords,
                &old_before.tags,
                &old_before.context,
                old_before.status,
                old_before.version
            )
        );
        let hits = e
            .search("Our rent is 1,200 euros a month.", 5)
            .await
            .unwrap()
            .hits;
        assert_eq!(hits[0].note.id, old, "ranked as before: {hits:?}");
        assert!(hits.iter().all(|h| h.superseded_by.is_none()));
        let l = supersedes_links(&e, &new).await;
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].status, LinkStatus::RolledBack, "kept in history");
        e.close().await;
    }

    #[tokio::test]
    async fn a_chain_of_changes_ranks_the_current_value_first() {
        let e = engine(PolicyMode::Auto).await;
        for n in NOISE {
            add(&e, n, "2026-02-01").await;
        }
        let a = add(&e, "Our rent is 1,100 euros a month.", "2025-03-01").await;
        let b = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let c = add(&e, "Our rent is 1,300 euros a month.", "2026-09-01").await;
        let hits = e
            .search("Our rent is 1,100 euros a month.", 4)
            .await
            .unwrap()
            .hits;
        let ids: Vec<&NoteId> = hits.iter().map(|h| &h.note.id).collect();
        assert_eq!(ids.first(), Some(&&c), "{hits:?}");
        for old in [&a, &b] {
            let h = hits.iter().find(|h| &h.note.id == old).unwrap();
            assert!(h.superseded_by.is_some(), "{h:?}");
        }
        e.close().await;
    }

    fn midnight(day: &str) -> DateTime<Utc> {
        format!("{day}T00:00:00Z").parse().unwrap()
    }

    fn day(s: &str) -> chrono::NaiveDate {
        s.parse().unwrap()
    }

    /// The rent example: 1,200 euros noted in March, "From September … 1,300 euros" noted
    /// in March too (its value takes effect in September).
    async fn rent(e: &Engine) -> (NoteId, NoteId) {
        for n in NOISE {
            add(e, n, "2026-02-01").await;
        }
        let old = add(e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let new = add(e, "From September the rent is 1,300 euros.", "2026-03-10").await;
        (old, new)
    }

    #[tokio::test]
    async fn validity_runs_from_the_stated_date_until_the_successors_and_rolls_back() {
        let e = engine(PolicyMode::Review).await;
        let (old, new) = rent(&e).await;
        let d = e.get(&old).await.unwrap();
        assert_eq!(
            Some(d.valid_from),
            at("2026-03-01"),
            "no date in the text: its time"
        );
        assert_eq!(
            (d.valid_until, &d.superseded_by),
            (None, &None),
            "a proposal only"
        );
        let d = e.get(&new).await.unwrap();
        assert_eq!(
            d.valid_from,
            midnight("2026-09-01"),
            "the month the text names"
        );
        assert_eq!(d.valid_until, None);
        let item = e
            .proposals(&[], 50)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.label == SUPERSEDES)
            .unwrap();
        e.accept(&item.id, &crate::FieldEdit::default(), "user")
            .await
            .unwrap();
        let d = e.get(&old).await.unwrap();
        assert_eq!(
            d.valid_until,
            Some(midnight("2026-09-01")),
            "the successor's valid_from"
        );
        let by = d.superseded_by.unwrap();
        assert_eq!((&by.id, by.since), (&new, midnight("2026-09-01")));
        assert_eq!(by.reason, "rent: 1,200 euros → 1,300 euros");
        assert_eq!(e.get(&new).await.unwrap().valid_until, None);
        // and search says the same
        let hits = e.search("what is the rent", 5).await.unwrap().hits;
        let h = hits.iter().find(|h| h.note.id == old).unwrap();
        assert_eq!(
            h.superseded_by.as_ref().map(|s| s.since),
            Some(midnight("2026-09-01"))
        );
        // a rolled-back supersession ends nothing
        e.rollback(&item.id, "user").await.unwrap();
        let d = e.get(&old).await.unwrap();
        assert_eq!((d.valid_until, d.superseded_by), (None, None));
        assert_eq!(Some(d.valid_from), at("2026-03-01"));
        e.close().await;
    }

    #[tokio::test]
    async fn as_of_a_day_search_returns_what_was_current_then() {
        let e = engine(PolicyMode::Auto).await;
        let (old, new) = rent(&e).await;
        let moved = add(&e, "In 2020 we moved to Helsinki.", "2026-03-02").await;
        let q = "Our rent is 1,200 euros a month.";
        let ids = |hits: &[crate::SearchHit]| -> Vec<NoteId> {
            hits.iter().map(|h| h.note.id.clone()).collect()
        };
        // today: the new value first, the old one below it, replaced since September
        let today = e.search(q, 3).await.unwrap().hits;
        let pos = |hits: &[crate::SearchHit], id: &NoteId| ids(hits).iter().position(|x| x == id);
        assert!(
            pos(&today, &new).unwrap() < pos(&today, &old).unwrap(),
            "{today:?}"
        );
        // on the last day of June the new value had not taken effect: the old one is
        // current and the new one left out
        let june = e
            .search_as_of(q, 3, Some(day("2026-06-30")))
            .await
            .unwrap()
            .hits;
        assert_eq!(june[0].note.id, old, "{june:?}");
        assert!(june[0].superseded_by.is_none());
        assert_eq!(pos(&june, &new), None, "{june:?}");
        // asked with the new note's own words, the old note takes its place
        let words = e
            .search_as_of(
                "From September the rent is 1,300 euros.",
                3,
                Some(day("2026-06-30")),
            )
            .await
            .unwrap()
            .hits;
        assert_eq!(words[0].note.id, old, "{words:?}");
        assert_eq!(pos(&words, &new), None);
        // on the day it took effect, as today
        let sept = e
            .search_as_of(q, 3, Some(day("2026-09-01")))
            .await
            .unwrap()
            .hits;
        assert!(
            pos(&sept, &new).unwrap() < pos(&sept, &old).unwrap(),
            "{sept:?}"
        );
        let by = sept[pos(&sept, &old).unwrap()]
            .superseded_by
            .as_ref()
            .unwrap();
        assert_eq!((&by.id, by.since), (&new, midnight("2026-09-01")));
        // before either was true, neither is found
        let feb = e
            .search_as_of(q, 5, Some(day("2026-02-15")))
            .await
            .unwrap()
            .hits;
        assert_eq!((pos(&feb, &old), pos(&feb, &new)), (None, None), "{feb:?}");
        // a date in the text counts, not when it was written down
        for (d, found) in [("2021-05-01", true), ("2019-12-31", false)] {
            let hits = e
                .search_as_of("moved to Helsinki", 3, Some(day(d)))
                .await
                .unwrap()
                .hits;
            assert_eq!(
                hits.iter().any(|h| h.note.id == moved),
                found,
                "{d}: {hits:?}"
            );
        }
        e.close().await;
    }

    #[tokio::test]
    async fn the_answer_prompt_marks_a_replaced_note_with_its_successor() {
        let fake = kasten_fakellm::FakeLlm::start(kasten_fakellm::Mode::Normal)
            .await
            .unwrap();
        let options = EngineOptions {
            llm: Some(crate::pipeline_tests::client(
                &fake,
                kasten_llm::Provider::Openai,
                std::time::Duration::from_secs(10),
            )),
            pipeline: PipelineOptions::default(),
            storage: None,
        };
        let e = Engine::open_with(
            &Endpoint::Mem,
            HashEmbedder::arc("h", 128, 3),
            options,
            &|_| {},
        )
        .await
        .unwrap();
        let (old, new) = rent(&e).await;
        let last_prompt = || fake.requests().last().unwrap().body.to_string();
        let a = e.ask("what is our rent", &[], &|_| {}).await.unwrap();
        let n_of = |id: &NoteId| a.notes.iter().find(|n| &n.id == id).map(|n| n.n);
        let (n_new, n_old) = (n_of(&new).unwrap(), n_of(&old).unwrap());
        assert!(n_new < n_old, "{a:?}");
        let body = last_prompt();
        let mark = format!("replaced since 2026-09-01 by [{n_new}] (not current)");
        let at_mark = body
            .find(&mark)
            .unwrap_or_else(|| panic!("no mark in {body}"));
        let old_line = body.find(&format!("[{n_old}] (")).unwrap();
        assert!(
            old_line < at_mark,
            "the mark follows the replaced note: {body}"
        );
        assert_eq!(body.matches("(not current)").count(), 1, "{body}");
        assert!(body.contains("no longer current"));
        // as of June the old value was current: no mark, the new note not shown
        let options = crate::AskOptions {
            as_of: Some(day("2026-06-30")),
            ..Default::default()
        };
        let a = e
            .ask_with("what is our rent", &[], &options, &|_| {})
            .await
            .unwrap();
        assert!(a.notes.iter().any(|n| n.id == old), "{a:?}");
        assert!(a.notes.iter().all(|n| n.id != new), "{a:?}");
        let body = last_prompt();
        assert!(
            !body.contains("(not current)") && !body.contains("1,300"),
            "{body}"
        );
        assert!(body.contains("The question is about 2026-06-30"), "{body}");
        e.close().await;
    }

    /// The rent example with notes around the old figure: two build on it (one by a link
    /// that elaborates it and names the rent, one by a link whose reason states the
    /// figure), two do not (a link that elaborates it but says nothing of the rent; a note
    /// about the rent linked only as related).
    struct Dependents {
        old: NoteId,
        budget: NoteId,
        split: NoteId,
        flat: NoteId,
        due: NoteId,
    }

    async fn dependents(e: &Engine) -> Dependents {
        for n in NOISE {
            add(e, n, "2026-02-01").await;
        }
        let old = add(e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let budget = add(e, "Budget for the year: rent 14,400 euros.", "2026-03-02").await;
        let split = add(e, "Tom and I share the flat costs evenly.", "2026-03-03").await;
        let flat = add(e, "The flat has two bedrooms and a balcony.", "2026-03-04").await;
        let due = add(
            e,
            "The rent is due on the first day of each month.",
            "2026-03-05",
        )
        .await;
        e.link(
            &budget,
            &old,
            Some("elaborates"),
            "twelve months of it",
            "user",
        )
        .await
        .unwrap();
        e.link(
            &split,
            &old,
            Some("relates"),
            "we each pay half of the 1,200 euros",
            "user",
        )
        .await
        .unwrap();
        e.link(&old, &flat, Some("elaborates"), "the flat we rent", "user")
            .await
            .unwrap();
        e.link(&due, &old, Some("relates"), "", "user")
            .await
            .unwrap();
        Dependents {
            old,
            budget,
            split,
            flat,
            due,
        }
    }

    /// The flags (any status) from `from`, by target.
    async fn flags_from(e: &Engine, from: &NoteId) -> Vec<kasten_core::Link> {
        let mut l: Vec<_> = e
            .get(from)
            .await
            .unwrap()
            .links
            .into_iter()
            .filter(|l| l.kind == MAY_BE_OUTDATED && &l.from == from)
            .collect();
        l.sort_by(|a, b| a.to.cmp(&b.to));
        l
    }

    fn sorted(mut v: Vec<NoteId>) -> Vec<NoteId> {
        v.sort();
        v
    }

    #[tokio::test]
    async fn a_supersession_in_force_flags_the_notes_that_used_the_old_value() {
        let e = engine(PolicyMode::Auto).await;
        let d = dependents(&e).await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        assert_eq!(supersedes_links(&e, &new).await.len(), 1);
        let flags = flags_from(&e, &new).await;
        let flagged: Vec<NoteId> = flags.iter().map(|l| l.to.clone()).collect();
        assert_eq!(
            flagged,
            sorted(vec![d.budget.clone(), d.split.clone()]),
            "{flags:#?}"
        );
        // a flag asks for a look, whatever the policy: a proposal, even under auto
        assert!(flags.iter().all(|l| l.status == LinkStatus::Proposed));
        let budget = flags.iter().find(|l| l.to == d.budget).unwrap();
        assert_eq!(
            budget.reason,
            format!("uses rent, replaced by note {new} (rent: 1,200 euros → 1,300 euros)")
        );
        let split = flags.iter().find(|l| l.to == d.split).unwrap();
        assert!(
            split.reason.starts_with("uses 1,200 euros, replaced by"),
            "{split:?}"
        );
        // never rewritten
        let b = e.get(&d.budget).await.unwrap().note;
        assert_eq!(b.content, "Budget for the year: rent 14,400 euros.");
        assert_eq!(b.version, 1);
        // in Review, with the supersession it comes from
        let queue = e.proposals(&[], 50).await.unwrap();
        let sup = queue.iter().find(|i| i.label == SUPERSEDES).unwrap();
        let items: Vec<_> = queue
            .iter()
            .filter(|i| i.label == MAY_BE_OUTDATED)
            .collect();
        assert_eq!(items.len(), 2, "{queue:#?}");
        for i in &items {
            let o = i.outdated.as_ref().unwrap();
            assert_eq!(Some(&o.note), i.target.as_ref());
            assert_eq!(o.superseded, d.old.to_string());
            assert_eq!(o.successor, new.to_string());
            assert_eq!(o.supersession.as_deref(), Some(sup.id.as_str()));
            assert_eq!(i.status, ReviewStatus::Proposed);
        }
        assert!(sup.outdated.is_none());
        let _ = (d.flat, d.due);
        e.close().await;
    }

    #[tokio::test]
    async fn flags_come_with_the_accepted_supersession_and_go_exactly_with_its_rollback() {
        let e = engine(PolicyMode::Review).await;
        let d = dependents(&e).await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        // a proposal flags nothing yet
        assert!(flags_from(&e, &new).await.is_empty());
        let sup = e
            .proposals(&[], 50)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.label == SUPERSEDES)
            .unwrap();
        let in_force_before: BTreeSet<_> = e
            .store()
            .accepted_links()
            .await
            .unwrap()
            .into_iter()
            .collect();
        e.accept(&sup.id, &crate::FieldEdit::default(), "user")
            .await
            .unwrap();
        let flags = flags_from(&e, &new).await;
        let flagged: Vec<NoteId> = flags.iter().map(|l| l.to.clone()).collect();
        assert_eq!(flagged, sorted(vec![d.budget.clone(), d.split.clone()]));
        assert!(flags.iter().all(|l| l.status == LinkStatus::Proposed));
        let flag_items = |q: Vec<crate::ReviewItem>| -> Vec<String> {
            let mut v: Vec<String> = q
                .into_iter()
                .filter(|i| i.label == MAY_BE_OUTDATED)
                .map(|i| i.id)
                .collect();
            v.sort();
            v
        };
        let waiting = flag_items(e.proposals(&[], 50).await.unwrap());
        assert_eq!(waiting.len(), 2);
        // rolled back: its flags leave Review, nothing else in force changed
        e.rollback(&sup.id, "user").await.unwrap();
        assert!(flag_items(e.proposals(&[], 50).await.unwrap()).is_empty());
        assert_eq!(
            flag_items(e.proposals(&[ReviewStatus::RolledBack], 50).await.unwrap()),
            waiting,
            "withdrawn, kept in history"
        );
        let in_force_after: BTreeSet<_> = e
            .store()
            .accepted_links()
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(in_force_after, in_force_before);
        // re-applied: the same flags wait again
        e.reapply(&sup.id, "user").await.unwrap();
        assert_eq!(flag_items(e.proposals(&[], 50).await.unwrap()), waiting);
        // the user dismisses one and acknowledges the other: a rollback leaves both decided
        let budget_flag = e
            .proposals(&[], 50)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.target.as_deref() == Some(d.budget.as_str()) && i.label == MAY_BE_OUTDATED)
            .unwrap();
        let split_flag = waiting.iter().find(|f| **f != budget_flag.id).unwrap();
        e.reject(&budget_flag.id, "user").await.unwrap();
        e.accept(split_flag, &crate::FieldEdit::default(), "user")
            .await
            .unwrap();
        e.rollback(&sup.id, "user").await.unwrap();
        let statuses: Vec<(NoteId, LinkStatus)> = flags_from(&e, &new)
            .await
            .into_iter()
            .map(|l| (l.to, l.status))
            .collect();
        let mut want = vec![
            (d.budget.clone(), LinkStatus::Rejected),
            (d.split.clone(), LinkStatus::Accepted),
        ];
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(statuses, want);
        e.close().await;
    }

    #[tokio::test]
    async fn accepting_every_link_above_a_confidence_flags_too() {
        let e = engine(PolicyMode::Review).await;
        let d = dependents(&e).await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        assert!(flags_from(&e, &new).await.is_empty());
        e.accept_links_above(0.5, "user").await.unwrap();
        let flagged: Vec<NoteId> = flags_from(&e, &new)
            .await
            .into_iter()
            .filter(|l| l.status == LinkStatus::Proposed)
            .map(|l| l.to)
            .collect();
        assert_eq!(flagged, sorted(vec![d.budget, d.split]));
        e.close().await;
    }
}
