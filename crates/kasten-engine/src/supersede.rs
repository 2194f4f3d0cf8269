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
use kasten_core::{FusedHit, Note, NoteId, NoteStatus, Via};
use kasten_store::{DifferWrite, SUPERSEDES};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError};

/// Nearest indexed notes per new note, by embedding and by keywords each.
const SUPERSEDE_CANDIDATES: usize = 10;
/// How far a chain of successors is followed to the current note (A → B → C …).
const MAX_CHAIN: usize = 8;

/// What replaced a note found by a search: the newer note (its direct successor), since
/// when (the newer note's time) and what changed.
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

impl Engine {
    /// The notes among `ids` that a newer note supersedes (accepted links), each with its
    /// successor and since when, newest successor first.
    pub async fn successors_of(
        &self,
        ids: &[NoteId],
    ) -> Result<Vec<crate::Successor>, EngineError> {
        Ok(crate::shell::into_all(self.store.successors_of(ids).await?))
    }

    /// Current first: a hit that a newer note superseded (an accepted `supersedes` link)
    /// is ranked right below the note that is current now (the end of its chain of
    /// successors), which takes its place if it ranked lower or was not found at all
    /// (then marked as reached by a link from it); cut to `k`. The superseded note stays in
    /// the list, and says what replaced it.
    pub(crate) async fn current_first(
        &self,
        fused: Vec<FusedHit>,
        k: usize,
    ) -> Result<CurrentFirst, EngineError> {
        let ids: Vec<NoteId> = fused.iter().map(|h| h.id.clone()).collect();
        let mut superseded: HashMap<NoteId, SupersededBy> = HashMap::new();
        for s in self.store.successors_of(&ids).await? {
            // newest successor first: keep the first one per note
            superseded.entry(s.note).or_insert(SupersededBy {
                id: s.by,
                since: s.since,
                reason: s.reason,
            });
        }
        if superseded.is_empty() {
            return Ok(CurrentFirst {
                hits: fused,
                superseded,
            });
        }
        // the current note of each chain
        let mut current: HashMap<NoteId, NoteId> = superseded
            .iter()
            .map(|(n, s)| (n.clone(), s.id.clone()))
            .collect();
        let mut next_of: HashMap<NoteId, NoteId> = current.clone();
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
            let found = self.store.successors_of(&ends).await?;
            let mut moved = false;
            for s in found {
                if let std::collections::hash_map::Entry::Vacant(e) = next_of.entry(s.note) {
                    e.insert(s.by);
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
                let lifted = match by_id.remove(c) {
                    Some(mut x) => {
                        x.score = x.score.max(h.score);
                        x
                    }
                    None => FusedHit {
                        id: c.clone(),
                        score: h.score,
                        via: vec![Via::Link { from: h.id.clone() }],
                    },
                };
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
        // (new note, candidate id, candidate's position in the batch)
        let mut cands: Vec<(usize, NoteId, Option<usize>)> = Vec::new();
        {
            let ix = self.read_indexes()?;
            for (i, n) in notes.iter().enumerate() {
                if n.status != NoteStatus::Active {
                    continue;
                }
                let mut seen = HashSet::new();
                let near = vectors
                    .get(i)
                    .map(|v| ix.vector.search(v, SUPERSEDE_CANDIDATES))
                    .transpose()?
                    .unwrap_or_default();
                let words = ix.text.search(&n.content, SUPERSEDE_CANDIDATES);
                for (id, _) in near.into_iter().chain(words) {
                    if seen.insert(id.clone()) {
                        cands.push((i, id, None));
                    }
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
            let (newer, older) = if other.created_at > new.created_at {
                (other, new)
            } else {
                (new, other)
            };
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
        Ok(out)
    }
}

fn dot(a: Option<&Vec<f32>>, b: Option<&Vec<f32>>) -> f32 {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| x * y).sum(),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kasten_core::{LinkStatus, NewNote};
    use kasten_store::Endpoint;

    use super::*;
    use crate::tests::HashEmbedder;
    use crate::{EngineOptions, PipelineOptions, Policy, PolicyMode, ReviewStatus};

    async fn engine(mode: PolicyMode) -> Engine {
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
            assert_eq!((&by.id, Some(by.since)), (&new, at("2026-09-01")));
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
}
