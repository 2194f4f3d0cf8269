//! Kasten's default ranking, the pure part: score fusion, a date bonus and context.
//!
//! 1. **Score fusion.** Each note's cosine similarity and BM25 score are divided by the
//!    best of their list for this query and mixed convexly:
//!    `own = w·cos/cos_max + (1−w)·bm25/bm25_max` (w = ½ by default). Unlike reciprocal
//!    rank fusion this keeps *how much* better a hit is than the next one, so a note with
//!    a rare exact keyword match is not levelled with the tenth-best paraphrase (Bruch et
//!    al., "An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023). The best
//!    keyword hit speaks only for the query words some note holds: the keyword part is
//!    scaled by their share of the query's weight (their IDF against the largest IDF for
//!    each word no note holds), so for "new dog" in a memory without the word "dog" a
//!    note matching "new" does not outrank the best match in meaning (the puppy).
//! 2. **Dates.** A note written in a period the query names ("in July 2023") gets a fixed
//!    bonus on that scale.
//! 3. **Context.** A note is read in its context: its final score adds a share of the
//!    best score among the notes adjacent to it in its source stream (the turns just
//!    before and after it in a conversation), so a short reply ("Yes, last Friday!") to a
//!    strongly matching question ranks with it, and a neighbour can enter the results
//!    through its hit (`context of <id>`). Context notes compete with direct hits for the
//!    `k` places.

use std::collections::HashMap;

use crate::NoteId;
use crate::fusion::{FusedHit, Via};

/// How the signals are weighed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Share of the vector score in the fusion (the keyword score gets the rest), 0–1.
    pub vector: f32,
    /// Share of the best adjacent note's score added to a note's own (0 = no context).
    pub context: f32,
    /// Bonus for a note written in a period the query names (0 = dates ignored).
    pub date: f32,
    /// The share (0–1) of the query's keyword weight that notes hold at all: what the
    /// keyword list can speak for (see `TextIndex::known_share`). 1 when every query
    /// word occurs in some note.
    pub keyword_share: f32,
}

/// What one query knows about one note.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// Cosine similarity to the query.
    pub vector: f32,
    /// BM25 score, 0 when no query term occurs in the note.
    pub keyword: f32,
    /// Whether the note was written in a period the query names.
    pub in_period: bool,
    /// The lists that found the note directly (`vector`, `keyword`, `date`).
    pub via: Vec<Via>,
}

/// The note's own score: fused, normalised vector and keyword scores plus the date bonus.
/// `max_vector` and `max_keyword` are the best scores of each list for this query.
pub fn own_score(s: &Signals, max_vector: f32, max_keyword: f32, w: &Weights) -> f32 {
    let norm = |x: f32, max: f32| {
        if max > 0.0 && x.is_finite() {
            (x / max).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let wv = w.vector.clamp(0.0, 1.0);
    let share = if w.keyword_share.is_finite() {
        w.keyword_share.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let fused = wv * norm(s.vector, max_vector) + (1.0 - wv) * share * norm(s.keyword, max_keyword);
    if s.in_period {
        fused + w.date.max(0.0)
    } else {
        fused
    }
}

/// Ranks `candidates` by their own score plus `context_weight` times the best own score
/// among their adjacent notes, best first, at most `k`. `own` holds the own score and
/// provenance of every candidate and of as many of their adjacent notes as are known (an
/// unknown neighbour counts as 0). A note gets `context of <id>` when its neighbour's
/// share is larger than its own score or nothing else found it. Ties keep the order of
/// `candidates`.
pub fn rank_in_context(
    candidates: &[NoteId],
    own: &HashMap<NoteId, (f32, Vec<Via>)>,
    adjacent: &dyn Fn(&NoteId) -> Vec<NoteId>,
    context_weight: f32,
    k: usize,
) -> Vec<FusedHit> {
    let gamma = context_weight.max(0.0);
    let mut seen = std::collections::HashSet::new();
    let mut hits: Vec<(FusedHit, usize)> = Vec::with_capacity(candidates.len());
    for (order, id) in candidates.iter().enumerate() {
        if !seen.insert(id) {
            continue;
        }
        let (own_score, via) = own.get(id).cloned().unwrap_or((0.0, Vec::new()));
        let mut score = own_score;
        let mut via = via;
        if gamma > 0.0 {
            let best = adjacent(id)
                .into_iter()
                .filter_map(|n| own.get(&n).map(|(s, _)| (*s, n)))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((s, n)) = best {
                let share = gamma * s;
                score += share;
                if share > own_score || via.is_empty() {
                    via.push(Via::Context { of: n });
                }
            }
        }
        hits.push((
            FusedHit {
                id: id.clone(),
                score,
                via,
            },
            order,
        ));
    }
    hits.sort_by(|a, b| b.0.score.total_cmp(&a.0.score).then(a.1.cmp(&b.1)));
    hits.truncate(k);
    hits.into_iter().map(|(h, _)| h).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> NoteId {
        NoteId::parse(s).unwrap_or_else(|_| NoteId::generate())
    }

    const W: Weights = Weights {
        vector: 0.5,
        context: 0.5,
        date: 0.2,
        keyword_share: 1.0,
    };

    fn sig(vector: f32, keyword: f32) -> Signals {
        Signals {
            vector,
            keyword,
            ..Default::default()
        }
    }

    #[test]
    fn own_scores_are_normalised_and_mixed() {
        // the best of both lists scores 1
        assert!((own_score(&sig(0.6, 12.0), 0.6, 12.0, &W) - 1.0).abs() < 1e-6);
        // half as similar, no keyword
        assert!((own_score(&sig(0.3, 0.0), 0.6, 12.0, &W) - 0.25).abs() < 1e-6);
        // no keyword match at all in the memory: the vector half only
        assert!((own_score(&sig(0.6, 0.0), 0.6, 0.0, &W) - 0.5).abs() < 1e-6);
        // negative cosines and NaN count as nothing
        assert_eq!(own_score(&sig(-0.2, f32::NAN), 0.6, 12.0, &W), 0.0);
        let dated = Signals {
            in_period: true,
            ..sig(0.6, 12.0)
        };
        assert!((own_score(&dated, 0.6, 12.0, &W) - 1.2).abs() < 1e-6);
        let vector_only = Weights { vector: 1.0, ..W };
        assert!((own_score(&sig(0.3, 12.0), 0.6, 12.0, &vector_only) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn the_best_keyword_hit_counts_for_the_share_of_the_query_notes_hold() {
        // "new dog" where no note says "dog": the one note with "new" is the best keyword
        // hit, the puppy the best in meaning
        let half = Weights {
            keyword_share: 0.4,
            ..W
        };
        let new_only = own_score(&sig(0.2, 3.0), 0.6, 3.0, &half);
        let puppy = own_score(&sig(0.6, 0.0), 0.6, 3.0, &half);
        assert!((new_only - (0.5 / 3.0 + 0.2)).abs() < 1e-6, "{new_only}");
        assert!(puppy > new_only, "{puppy} {new_only}");
        // with every word held, the keyword half is whole again (and the tie goes to it)
        assert!(own_score(&sig(0.2, 3.0), 0.6, 3.0, &W) > puppy);
        // out-of-range shares are clamped, NaN counts as whole
        let over = Weights {
            keyword_share: 7.0,
            ..W
        };
        let nan = Weights {
            keyword_share: f32::NAN,
            ..W
        };
        assert_eq!(
            own_score(&sig(0.2, 3.0), 0.6, 3.0, &over),
            own_score(&sig(0.2, 3.0), 0.6, 3.0, &W)
        );
        assert_eq!(
            own_score(&sig(0.2, 3.0), 0.6, 3.0, &nan),
            own_score(&sig(0.2, 3.0), 0.6, 3.0, &W)
        );
    }

    /// A stream a1..a4 and a lone note b.
    fn adjacent(n: &NoteId) -> Vec<NoteId> {
        let stream = ["a1", "a2", "a3", "a4"];
        match stream.iter().position(|s| *s == n.as_str()) {
            Some(i) => [i.checked_sub(1), Some(i + 1)]
                .into_iter()
                .flatten()
                .filter_map(|j| stream.get(j))
                .map(|s| id(s))
                .collect(),
            None => Vec::new(),
        }
    }

    #[test]
    fn a_reply_next_to_a_strong_hit_outranks_a_weak_lone_hit() {
        let own: HashMap<NoteId, (f32, Vec<Via>)> = [
            ("a1", 0.1, vec![]),
            ("a2", 1.0, vec![Via::Keyword]),
            ("a3", 0.2, vec![]),
            ("b", 0.5, vec![Via::Vector]),
        ]
        .into_iter()
        .map(|(n, s, v)| (id(n), (s, v)))
        .collect();
        let cands: Vec<NoteId> = ["a2", "b", "a1", "a3"].iter().map(|s| id(s)).collect();
        let hits = rank_in_context(&cands, &own, &adjacent, 0.5, 3);
        let order: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        // a2: 1.0 + 0.5·0.2; a3: 0.2 + 0.5·1.0; a1: 0.1 + 0.5; b: 0.5
        assert_eq!(order, ["a2", "a3", "a1"]);
        assert_eq!(hits[0].via, vec![Via::Keyword]);
        assert_eq!(hits[1].via, vec![Via::Context { of: id("a2") }]);
        assert!((hits[1].score - 0.7).abs() < 1e-6);
        // without context the lone hit comes second
        let plain = rank_in_context(&cands, &own, &adjacent, 0.0, 2);
        let order: Vec<&str> = plain.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, ["a2", "b"]);
    }

    #[test]
    fn duplicates_unknowns_and_ties() {
        let own: HashMap<NoteId, (f32, Vec<Via>)> = [
            (id("a2"), (0.5, vec![Via::Vector])),
            (id("b"), (0.5, vec![])),
        ]
        .into_iter()
        .collect();
        let cands: Vec<NoteId> = ["b", "a2", "b", "zz"].iter().map(|s| id(s)).collect();
        let hits = rank_in_context(&cands, &own, &adjacent, 0.0, 10);
        let order: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, ["b", "a2", "zz"]);
        assert_eq!(hits[2].score, 0.0);
        assert!(rank_in_context(&cands, &own, &adjacent, 0.5, 0).is_empty());
    }
}
