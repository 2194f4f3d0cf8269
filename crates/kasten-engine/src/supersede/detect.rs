//! Finding supersessions: the notes a new (or consolidated) note states another value
//! against, among its nearest notes by embedding and by keywords and the earlier notes
//! of its batch.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kasten_core::supersession::supersedes_with;
use kasten_core::text::Tokenizer;
use kasten_core::{Note, NoteId, NoteStatus};
use kasten_store::{DifferWrite, SUPERSEDES};

use crate::{Engine, EngineError};

/// Nearest indexed notes per new note, by embedding and by keywords each.
const SUPERSEDE_CANDIDATES: usize = 10;

impl Engine {
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

fn dot(a: Option<&Vec<f32>>, b: Option<&Vec<f32>>) -> f32 {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| x * y).sum(),
        _ => 0.0,
    }
}
