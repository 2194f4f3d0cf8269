//! Finding supersessions: the notes a new (or consolidated) note states another value
//! against, among its nearest notes by embedding and by keywords and the earlier notes
//! of its batch.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kasten_core::supersession::supersedes_with;
use kasten_core::text::Tokenizer;
use kasten_core::{Actor, Note, NoteId, NoteStatus};
use kasten_store::{DifferWrite, SUPERSEDES};

use crate::indexes::Ranked;
use crate::{Engine, EngineError};

/// Nearest indexed notes per new note, by embedding and by keywords each.
pub(crate) const SUPERSEDE_CANDIDATES: usize = 10;

/// The nearest indexed notes of each note of a batch, searched once (under one read of
/// the indexes) for both merge on write and supersession: by embedding, and by keywords
/// if asked. Position `i` is `notes[i]`'s; a note without a vector has no embedding list.
pub(crate) struct Nearest {
    pub(crate) vector: Vec<Ranked>,
    pub(crate) words: Vec<Ranked>,
}

impl Engine {
    /// The `k` nearest indexed notes of each of `notes` by embedding, and by keywords if
    /// `words` (else those lists are empty). Notes that are not active have empty lists.
    pub(crate) fn nearest(
        &self,
        notes: &[Note],
        vectors: &[Vec<f32>],
        k: usize,
        words: bool,
    ) -> Result<Nearest, EngineError> {
        let ix = self.read_indexes()?;
        let mut near = Nearest {
            vector: Vec::with_capacity(notes.len()),
            words: Vec::with_capacity(notes.len()),
        };
        for (i, n) in notes.iter().enumerate() {
            if n.status != NoteStatus::Active {
                near.vector.push(Vec::new());
                near.words.push(Vec::new());
                continue;
            }
            near.vector.push(
                vectors
                    .get(i)
                    .filter(|v| !v.is_empty())
                    .map(|v| ix.vector.search(v, k))
                    .transpose()?
                    .unwrap_or_default(),
            );
            near.words.push(if words {
                ix.text.search(&n.content, k)
            } else {
                Vec::new()
            });
        }
        Ok(near)
    }

    /// The `supersedes` links for the new notes of a batch (merged ones excluded): against
    /// their nearest indexed notes and the earlier notes of the batch. At most one link per
    /// pair of notes. (The write path searches the nearest notes once for merge on write
    /// and supersession and calls [`Engine::supersessions_among`] itself.)
    #[cfg(test)]
    pub(crate) async fn find_supersessions(
        &self,
        notes: &[Note],
        vectors: &[Vec<f32>],
        accepted: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<DifferWrite>, EngineError> {
        let near = self.nearest(notes, vectors, SUPERSEDE_CANDIDATES, true)?;
        self.supersessions_among(notes, vectors, &near, Peers::Batch, accepted, now)
            .await
    }

    /// The `supersedes` links between `notes` and their nearest indexed notes (by
    /// embedding and by keywords), and, with [`Peers::Batch`], the earlier notes of the
    /// batch: what [`Engine::find_supersessions`] finds on write, and what consolidation
    /// finds for notes already in memory ([`Peers::Indexed`]: `notes` are indexed
    /// themselves, so a note is not its own candidate, and of two notes with the same time
    /// the one written later — the greater id — is the newer). `near` holds each note's
    /// nearest indexed notes ([`Engine::nearest`]: [`SUPERSEDE_CANDIDATES`] of each kind,
    /// one more with [`Peers::Indexed`], as a note finds itself first).
    pub(crate) async fn supersessions_among(
        &self,
        notes: &[Note],
        vectors: &[Vec<f32>],
        near: &Nearest,
        peers: Peers,
        accepted: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<DifferWrite>, EngineError> {
        // (new note, candidate id, candidate's position in the batch)
        let mut cands: Vec<(usize, NoteId, Option<usize>)> = Vec::new();
        for (i, n) in notes.iter().enumerate() {
            if n.status != NoteStatus::Active {
                continue;
            }
            let mut seen = HashSet::new();
            seen.insert(n.id.clone());
            let by_vector = near.vector.get(i).map(Vec::as_slice).unwrap_or_default();
            let by_words = near.words.get(i).map(Vec::as_slice).unwrap_or_default();
            for (id, _) in by_vector.iter().chain(by_words) {
                if seen.insert(id.clone()) {
                    cands.push((i, id.clone(), None));
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
        if cands.is_empty() {
            return Ok(Vec::new());
        }
        // each indexed candidate read once, however many notes of the batch it is near
        let mut asked = HashSet::new();
        let existing: Vec<NoteId> = cands
            .iter()
            .filter(|c| c.2.is_none() && asked.insert(&c.1))
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
                    by: Actor::Merge,
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

fn dot(a: Option<&Vec<f32>>, b: Option<&Vec<f32>>) -> f32 {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| x * y).sum(),
        _ => 0.0,
    }
}
