//! Merge on write: a new note that repeats an existing one (high cosine similarity *and*
//! mostly the same words) is not added as a second note. It is saved with status `merged`,
//! linked to the note it repeats by a `same-entity` link (created by `merge`, applied or
//! proposed per the review policy for links), and the old note is reinforced. Rejecting or
//! rolling back the merge turns the new note into a regular one (indexed, enrichment
//! queued); accepting it keeps it folded in. Nothing is lost either way.
//!
//! Two notes that read alike but state different facts — other numbers, amounts or dates,
//! the same numbers in another order, other names (`kasten_core::facts`) — are never
//! merged: "Anna paid 90 euros for the concert tickets" after "Anna paid 40 euros …" is a
//! new note, with a `contradicts` link to the older one whose reason names what differs,
//! applied or proposed per the review policy for links like a merge.
//!
//! A note given an explicit time (`--time`, an import, a conversation turn) that lies more
//! than [`SAME_EVENT_WINDOW_HOURS`] from the other note's time records a repeated event
//! ("went hiking" in March and in July), not the same fact told twice: it is not merged.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kasten_core::facts;
use kasten_core::lifecycle::Reinforce;
use kasten_core::supersession::supersedes_with;
use kasten_core::text::Tokenizer;
use kasten_core::{Action, Actor, JobId, LinkStatus, Note, NoteId, NoteStatus};
use kasten_store::{DifferWrite, LinkRecord, MergeWrite, NoteWrite};
use serde::{Deserialize, Serialize};

use crate::indexes::Ranked;
use crate::{Engine, EngineError};

/// Setting key of [`MergeOptions`].
pub const MERGE_SETTING: &str = "merge";
/// Nearest indexed notes considered per new note.
pub(crate) const MERGE_CANDIDATES: usize = 3;
/// See the module docs.
pub const SAME_EVENT_WINDOW_HOURS: i64 = 24;
/// Link kind of a merge.
pub const SAME_ENTITY: &str = kasten_core::LinkKind::SameEntity.as_str();
/// Link kind between a new note and one it reads like but whose facts differ.
pub const CONTRADICTS: &str = kasten_core::LinkKind::Contradicts.as_str();

/// When a new note counts as a near-duplicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergeOptions {
    pub enabled: bool,
    /// Cosine similarity of the embeddings at or above which a note is a candidate.
    pub min_cosine: f32,
    /// Lexical confirmation: Jaccard similarity of the two notes' term sets.
    pub min_jaccard: f64,
    /// Record a `supersedes` link when a new note states another value for what an older
    /// note states (`crate::supersede`).
    pub supersede: bool,
    /// With `supersede`: after a note's enrichment, ask the LLM in use whether it replaces
    /// an older note it has a `contradicts` link with (the cases the rule misses).
    pub supersede_llm: bool,
}

impl Default for MergeOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            min_cosine: 0.92,
            min_jaccard: 0.6,
            supersede: true,
            supersede_llm: true,
        }
    }
}

/// A note of a batch merged into an existing one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeInfo {
    pub note: NoteId,
    pub duplicate_of: NoteId,
    /// The merge event (roll it back to make the note a separate one).
    pub event: String,
    pub similarity: f32,
    pub jaccard: f64,
    /// `accepted` (policy auto) or `proposed` (policy review).
    pub status: LinkStatus,
}

/// The merge rule's word overlap of two texts: the Jaccard index of their token sets
/// (1 for two empty texts).
pub fn jaccard(tokenizer: &Tokenizer, a: &str, b: &str) -> f64 {
    let a: HashSet<String> = tokenizer.tokenize(a).into_iter().collect();
    let b: HashSet<String> = tokenizer.tokenize(b).into_iter().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(&b).count();
    inter as f64 / (a.len() + b.len() - inter).max(1) as f64
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// What merge on write decided for a batch: the notes and their writes (merged ones
/// marked), the merges, what to report of them, and the links between notes that read
/// alike but whose facts differ.
pub(crate) struct Found {
    pub notes: Vec<Note>,
    pub writes: Vec<NoteWrite>,
    pub merges: Vec<MergeWrite>,
    pub infos: Vec<MergeInfo>,
    pub differs: Vec<DifferWrite>,
}

impl Engine {
    pub async fn merge_options(&self) -> Result<MergeOptions, EngineError> {
        Ok(match self.store.get_setting(MERGE_SETTING).await? {
            Some(v) => serde_json::from_value(v).unwrap_or_default(),
            None => MergeOptions::default(),
        })
    }

    pub async fn set_merge_options(&self, o: &MergeOptions) -> Result<(), EngineError> {
        let v = serde_json::to_value(o).map_err(|e| EngineError::Internal(e.to_string()))?;
        Ok(self.store.set_setting(MERGE_SETTING, &v).await?)
    }

    /// Marks the notes of a batch that repeat an existing note (or an earlier note of the
    /// same batch) and prepares their merge records. `near` holds each note's nearest
    /// indexed notes by embedding, best first (at least [`MERGE_CANDIDATES`] searched:
    /// the first of a longer list are the same, see `VectorIndex::search`); `accepted`
    /// whether the policy for links applies merges at once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn find_merges(
        &self,
        mut notes: Vec<Note>,
        mut writes: Vec<NoteWrite>,
        vectors: &[Vec<f32>],
        dated: &[bool],
        now: DateTime<Utc>,
        opts: &MergeOptions,
        accepted: bool,
        near: &[Ranked],
    ) -> Result<Found, EngineError> {
        let unmerged = |notes, writes| Found {
            notes,
            writes,
            merges: Vec::new(),
            infos: Vec::new(),
            differs: Vec::new(),
        };
        if !opts.enabled || notes.is_empty() {
            return Ok(unmerged(notes, writes));
        }
        // candidates: the nearest indexed notes and the earlier notes of this batch at or
        // above the cosine threshold, best first
        let mut cands: Vec<(usize, NoteId, f32, Option<usize>)> = Vec::new();
        for (i, v) in vectors.iter().enumerate() {
            let nearest = near.get(i).map(Vec::as_slice).unwrap_or_default();
            let mut mine: Vec<(usize, NoteId, f32, Option<usize>)> = nearest
                .iter()
                .take(MERGE_CANDIDATES)
                .map(|(id, c)| (i, id.clone(), *c, None))
                .collect();
            for (j, w) in vectors.iter().enumerate().take(i) {
                mine.push((i, notes[j].id.clone(), dot(v, w), Some(j)));
            }
            mine.retain(|c| c.2 >= opts.min_cosine);
            mine.sort_by(|a, b| b.2.partial_cmp(&a.2).unwrap_or(std::cmp::Ordering::Equal));
            cands.extend(mine);
        }
        if cands.is_empty() {
            return Ok(unmerged(notes, writes));
        }
        let existing: Vec<NoteId> = cands
            .iter()
            .filter(|c| c.3.is_none())
            .map(|c| c.1.clone())
            .collect();
        let old: HashMap<NoteId, Note> = self
            .store
            .get_notes(&existing)
            .await?
            .into_iter()
            .map(|n| (n.id.clone(), n))
            .collect();
        let strength: HashMap<NoteId, f64> = self
            .store
            .strength_of(&existing)
            .await?
            .into_iter()
            .map(|r| (r.id, r.state.reinforced(Reinforce::Repeated, now).strength))
            .collect();
        let tokenizer = Tokenizer::default();
        let mut merge_writes = Vec::new();
        let mut infos = Vec::new();
        let mut merged: HashSet<usize> = HashSet::new();
        // per new note, the nearest note it reads like but whose facts differ
        let mut differs: HashMap<usize, DifferWrite> = HashMap::new();
        for (i, target, cos, j) in cands {
            if merged.contains(&i) {
                continue;
            }
            let (target_text, target_time) = match j {
                // a batch note that was itself merged is not a target
                Some(j) if notes[j].status != NoteStatus::Active => continue,
                Some(j) => (notes[j].content.clone(), notes[j].created_at),
                None => match old.get(&target) {
                    Some(n) if n.status == NoteStatus::Active => (n.content.clone(), n.created_at),
                    _ => continue,
                },
            };
            if dated.get(i).copied().unwrap_or(false)
                && (notes[i].created_at - target_time).num_hours().abs() > SAME_EVENT_WINDOW_HOURS
            {
                continue;
            }
            let jac = jaccard(&tokenizer, &notes[i].content, &target_text);
            if jac < opts.min_jaccard {
                continue;
            }
            let mut different = facts::differences(&notes[i].content, &target_text);
            // another value for the same thing ("… of rugby union" / "… of rugby") is no
            // repeat, whatever the facts rule sees
            if different.is_empty()
                && let Some(s) = supersedes_with(&tokenizer, &notes[i].content, &target_text)
                    .or_else(|| supersedes_with(&tokenizer, &target_text, &notes[i].content))
            {
                different.push(s.reason());
            }
            if !different.is_empty() {
                differs.entry(i).or_insert_with(|| DifferWrite {
                    from: notes[i].id.clone(),
                    to: target.clone(),
                    kind: CONTRADICTS.into(),
                    reason: format!(
                        "reads like note {target} (cosine {cos:.2}, {:.0}% of words shared) \
                         but states other facts: {}",
                        jac * 100.0,
                        different.join("; ")
                    ),
                    confidence: f64::from(cos),
                    accepted,
                    at: now,
                    by: Actor::Merge,
                });
                continue;
            }
            let event = JobId::generate().to_string();
            merged.insert(i);
            notes[i].status = NoteStatus::Merged;
            writes[i].note.status = NoteStatus::Merged;
            writes[i].job = None;
            merge_writes.push(MergeWrite {
                note: notes[i].id.clone(),
                duplicate_of: target.clone(),
                event: event.clone(),
                reason: format!(
                    "repeats note {target} (cosine {cos:.2}, {:.0}% of words shared)",
                    jac * 100.0
                ),
                similarity: f64::from(cos),
                accepted,
                strength: strength.get(&target).copied().unwrap_or(1.0),
                at: now,
            });
            infos.push(MergeInfo {
                note: notes[i].id.clone(),
                duplicate_of: target,
                event,
                similarity: cos,
                jaccard: jac,
                status: if accepted {
                    LinkStatus::Accepted
                } else {
                    LinkStatus::Proposed
                },
            });
        }
        // a note merged into another after all is hidden: no link of its own
        let mut differs: Vec<(usize, DifferWrite)> = differs
            .into_iter()
            .filter(|(i, _)| !merged.contains(i))
            .collect();
        differs.sort_by_key(|(i, _)| *i);
        Ok(Found {
            notes,
            writes,
            merges: merge_writes,
            infos,
            differs: differs.into_iter().map(|(_, d)| d).collect(),
        })
    }

    /// After a review changed the status of a merge link: a merge that is in force
    /// (proposed or accepted) keeps the new note folded in; one that was rejected or rolled
    /// back makes it a regular note again (indexed, enrichment queued).
    pub(crate) async fn settle_merge(&self, link: &LinkRecord) -> Result<(), EngineError> {
        if link.kind != SAME_ENTITY || link.created_by != Actor::Merge {
            return Ok(());
        }
        let dup = NoteId::parse(&link.from)?;
        let Some(note) = self.store.get_note(&dup).await? else {
            return Ok(());
        };
        let in_force = link.status.is_live();
        match (in_force, note.status) {
            (false, NoteStatus::Merged) => {
                let _order = self.index_order().await;
                self.store
                    .change_status(
                        &dup,
                        NoteStatus::Merged,
                        NoteStatus::Active,
                        Action::Unmerge,
                        Actor::User.as_str(),
                        &link.id,
                    )
                    .await?;
                let sync = self.index_sync();
                self.index_note(&dup).await?;
                sync.done();
                if !matches!(note.enrich_state, kasten_core::EnrichState::Done) {
                    self.store.enqueue_job(&dup, &JobId::generate()).await?;
                }
            }
            (true, NoteStatus::Active) => {
                let _order = self.index_order().await;
                self.store
                    .change_status(
                        &dup,
                        NoteStatus::Active,
                        NoteStatus::Merged,
                        Action::Merge,
                        Actor::User.as_str(),
                        &link.id,
                    )
                    .await?;
                let sync = self.index_sync();
                self.write_indexes()?.remove_note(&dup);
                sync.done();
            }
            _ => {}
        }
        Ok(())
    }
}
