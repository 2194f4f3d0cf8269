//! Reciprocal-rank fusion (Cormack et al. 2009) of ranked lists, keeping provenance.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::NoteId;

/// The usual RRF constant: damps the head of each list so no single list dominates.
pub const RRF_K: f32 = 60.0;

/// How a hit was found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Vector,
    Keyword,
    /// Reached through an accepted link from another hit.
    Link {
        from: NoteId,
    },
    /// Written just before or after another hit in the same source stream, and found
    /// mostly for that reason.
    Context {
        of: NoteId,
    },
    /// Written in a period the query names.
    Date,
    /// The next link of a chain: about what another hit named (`crate::chain`).
    Chain {
        from: NoteId,
    },
}

/// How a hit was found, without the note it was found from: what the app shows beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum ViaKind {
    Vector,
    Keyword,
    Link,
    Context,
    Date,
    Chain,
}

impl Via {
    /// The route without the note it started from.
    pub fn kind(&self) -> ViaKind {
        match self {
            Via::Vector => ViaKind::Vector,
            Via::Keyword => ViaKind::Keyword,
            Via::Link { .. } => ViaKind::Link,
            Via::Context { .. } => ViaKind::Context,
            Via::Date => ViaKind::Date,
            Via::Chain { .. } => ViaKind::Chain,
        }
    }

    /// The label used in `--json` output: `vector`, `keyword`, `link from <id>`,
    /// `context of <id>`, `date`.
    pub fn label(&self) -> String {
        match self {
            Via::Vector => "vector".into(),
            Via::Keyword => "keyword".into(),
            Via::Link { from } => format!("link from {from}"),
            Via::Context { of } => format!("context of {of}"),
            Via::Date => "date".into(),
            Via::Chain { from } => format!("chain from {from}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FusedHit {
    pub id: NoteId,
    pub score: f32,
    pub via: Vec<Via>,
}

/// A ranked list to fuse: where it came from, its weight, and its (id, score) ranking.
pub type RankedList<'a> = (Via, f32, &'a [(NoteId, f32)]);

/// Fuses ranked lists: score(d) = Σ_lists weight / (RRF_K + rank_d), rank from 1.
/// Ties keep the order of first appearance (earlier list, better rank) so results are
/// deterministic.
pub fn rrf(lists: &[RankedList<'_>], k: usize) -> Vec<FusedHit> {
    let mut acc: HashMap<&NoteId, (f32, Vec<Via>, usize)> = HashMap::new();
    let mut order = 0usize;
    for (via, weight, list) in lists {
        for (rank, (id, _)) in list.iter().enumerate() {
            let e = acc.entry(id).or_insert_with(|| {
                order += 1;
                (0.0, Vec::new(), order)
            });
            e.0 += weight / (RRF_K + rank as f32 + 1.0);
            if !e.1.contains(via) {
                e.1.push(via.clone());
            }
        }
    }
    let mut hits: Vec<(FusedHit, usize)> = acc
        .into_iter()
        .map(|(id, (score, via, ord))| {
            (
                FusedHit {
                    id: id.clone(),
                    score,
                    via,
                },
                ord,
            )
        })
        .collect();
    hits.sort_by(|a, b| b.0.score.total_cmp(&a.0.score).then_with(|| a.1.cmp(&b.1)));
    hits.truncate(k);
    hits.into_iter().map(|(h, _)| h).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(ids: &[&str]) -> Vec<(NoteId, f32)> {
        ids.iter()
            .filter_map(|s| NoteId::parse(s).ok())
            .map(|i| (i, 0.0))
            .collect()
    }

    #[test]
    fn agreement_between_lists_wins_and_provenance_is_kept() {
        let v = l(&["a", "b", "c"]);
        let kw = l(&["c", "d"]);
        let hits = rrf(&[(Via::Vector, 1.0, &v), (Via::Keyword, 1.0, &kw)], 10);
        let order: Vec<_> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, vec!["c", "a", "b", "d"]);
        assert_eq!(hits[0].via, vec![Via::Vector, Via::Keyword]);
        assert_eq!(hits[1].via, vec![Via::Vector]);
        assert_eq!(hits[3].via, vec![Via::Keyword]);
        let expected = 1.0 / 63.0 + 1.0 / 61.0;
        assert!((hits[0].score - expected).abs() < 1e-6);
    }

    #[test]
    fn truncates_and_handles_empty() {
        assert!(rrf(&[], 5).is_empty());
        let v = l(&["a", "b", "c"]);
        assert_eq!(rrf(&[(Via::Vector, 1.0, &v)], 2).len(), 2);
    }

    #[test]
    fn labels() {
        let from = NoteId::parse("x1").unwrap_or_else(|_| NoteId::generate());
        assert_eq!(Via::Link { from }.label(), "link from x1");
        assert_eq!(Via::Keyword.label(), "keyword");
        let of = NoteId::parse("y2").unwrap_or_else(|_| NoteId::generate());
        assert_eq!(Via::Context { of }.label(), "context of y2");
        assert_eq!(Via::Date.label(), "date");
    }
}
