//! Ranking over the in-memory indexes: the vector and keyword lists, their fusion with
//! dates, context from the source stream and link expansion.

use std::collections::{HashMap, HashSet};

use kasten_core::fusion::{self, FusedHit, Via};
use kasten_core::ranking::{self, Signals, Weights};
use kasten_core::timeline::Timeline;
use kasten_core::{NoteId, period};

use super::SearchOptions;
use crate::{Engine, EngineError};

/// Each list contributes this many candidates per requested hit (at least `MIN_CANDIDATES`),
/// so a note ranked modestly by both lists can still win the fusion.
const CANDIDATES_PER_HIT: usize = 3;
const MIN_CANDIDATES: usize = 30;

/// A note's time may be in another zone than the date a query names: periods are widened
/// by a day on each side.
const PERIOD_SLACK_DAYS: i64 = 1;
/// At most this many notes of the named periods (all of them together) are compared with
/// the query.
const MAX_PERIOD_NOTES: usize = 20_000;

/// The times (ms, half-open) of the periods `query` names.
fn period_ranges(query: &str) -> Vec<(i64, i64)> {
    period::periods_in(query)
        .iter()
        .map(|p| period::millis_range(p, PERIOD_SLACK_DAYS))
        .collect()
}

/// The notes written in `ranges`, each once, at most [`MAX_PERIOD_NOTES`] in all (each is
/// compared with the query by the caller, under the index lock). Ranges that overlap
/// (widened by the slack, two periods may) are read as one.
fn in_periods<'a>(timeline: &'a Timeline, ranges: &[(i64, i64)]) -> Vec<&'a NoteId> {
    let mut sorted: Vec<(i64, i64)> = ranges.iter().copied().filter(|(a, b)| a < b).collect();
    sorted.sort_unstable();
    let mut joined: Vec<(i64, i64)> = Vec::with_capacity(sorted.len());
    for (a, b) in sorted {
        match joined.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => joined.push((a, b)),
        }
    }
    let mut out: Vec<&NoteId> = Vec::new();
    for (a, b) in joined {
        let room = MAX_PERIOD_NOTES - out.len();
        if room == 0 {
            break;
        }
        out.extend(timeline.between(a, b - 1, room));
    }
    out
}

fn cosine(query: &[f32], v: &[f32]) -> f32 {
    // stored vectors are normalised; the query is normalised by the caller
    query.iter().zip(v).map(|(a, b)| a * b).sum()
}

fn normalised(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter().map(|x| x / norm).collect()
    } else {
        vec![0.0; v.len()]
    }
}

impl Engine {
    /// Embeds a search query with the memory's model.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, EngineError> {
        let mut v = self.embed_blocking(vec![query.to_owned()]).await?;
        v.pop()
            .ok_or_else(|| EngineError::Internal("the embedder returned nothing".into()))
    }

    /// The vector index alone: top `k` by cosine.
    pub fn rank_vector(
        &self,
        query_vec: &[f32],
        k: usize,
    ) -> Result<Vec<(NoteId, f32)>, EngineError> {
        Ok(self.read_indexes()?.vector.search(query_vec, k)?)
    }

    /// The keyword (BM25) index alone: top `k`.
    pub fn rank_keyword(&self, query: &str, k: usize) -> Result<Vec<(NoteId, f32)>, EngineError> {
        Ok(self.read_indexes()?.text.search(query, k))
    }

    /// Sets (or, with `None`, turns off) the vector index's sign-code prefilter: without it
    /// every query scans all int8 vectors (for benchmarks and comparisons).
    pub fn set_vector_prefilter(
        &self,
        prefilter: Option<kasten_core::vector::Prefilter>,
    ) -> Result<(), EngineError> {
        self.write_indexes()?.vector.set_prefilter(prefilter);
        Ok(())
    }

    /// Exact (brute-force f32) vector ranking: the reference the index is measured against.
    pub fn rank_vector_exact(
        &self,
        query_vec: &[f32],
        k: usize,
    ) -> Result<Vec<(NoteId, f32)>, EngineError> {
        Ok(self.read_indexes()?.vector.search_exact(query_vec, k)?)
    }

    /// Every indexed vector (for exporting a benchmark corpus).
    pub fn export_vectors(&self) -> Result<Vec<Vec<f32>>, EngineError> {
        let ix = self.read_indexes()?;
        let mut out = Vec::with_capacity(ix.vector.len());
        ix.vector.for_each_vector(|_, v| out.push(v.to_vec()))?;
        Ok(out)
    }

    /// Vector and keyword ranking fused by reciprocal rank (no store access): the plain
    /// hybrid baseline, not what [`Engine::search`] uses.
    pub fn rank_hybrid(
        &self,
        query: &str,
        query_vec: &[f32],
        k: usize,
    ) -> Result<Vec<FusedHit>, EngineError> {
        let n = (k * CANDIDATES_PER_HIT).max(MIN_CANDIDATES);
        let ix = self.read_indexes()?;
        let (vec_hits, kw_hits) = ix.both_lists(query, query_vec, n)?;
        drop(ix);
        Ok(fusion::rrf(
            &[(Via::Vector, 1.0, &vec_hits), (Via::Keyword, 1.0, &kw_hits)],
            k,
        ))
    }

    /// Kasten's ranking (no store access): vector and keyword scores fused, dates and
    /// context as `options` say (see [`kasten_core::ranking`]). Links are not followed
    /// here; [`Engine::rank_expanded`] does that.
    pub fn rank(
        &self,
        query: &str,
        query_vec: &[f32],
        k: usize,
        options: &SearchOptions,
    ) -> Result<Vec<FusedHit>, EngineError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let n = (k * CANDIDATES_PER_HIT).max(MIN_CANDIDATES);
        let qv = normalised(query_vec);
        let ix = self.read_indexes()?;
        let (vec_hits, kw_hits) = ix.both_lists(query, &qv, n)?;
        let max_vector = vec_hits.first().map_or(0.0, |h| h.1);
        let max_keyword = kw_hits.first().map_or(0.0, |h| h.1);

        // direct candidates, in a deterministic order, with what found them
        let mut signals: HashMap<NoteId, Signals> = HashMap::new();
        let mut direct: Vec<NoteId> = Vec::new();
        let mut add = |id: &NoteId, signals: &mut HashMap<NoteId, Signals>| -> bool {
            if signals.contains_key(id) {
                return false;
            }
            direct.push(id.clone());
            signals.insert(id.clone(), Signals::default());
            true
        };
        for (id, score) in &vec_hits {
            add(id, &mut signals);
            if let Some(s) = signals.get_mut(id) {
                s.vector = *score;
                s.via.push(Via::Vector);
            }
        }
        for (id, score) in &kw_hits {
            add(id, &mut signals);
            if let Some(s) = signals.get_mut(id) {
                s.keyword = *score;
                s.via.push(Via::Keyword);
            }
        }
        // dates: the notes of a named period most similar to the query are candidates too
        let ranges: Vec<(i64, i64)> = if options.date_weight > 0.0 {
            period_ranges(query)
        } else {
            Vec::new()
        };
        if !ranges.is_empty() {
            let in_range = in_periods(&ix.timeline, &ranges);
            let mut scores = vec![None; in_range.len()];
            ix.vector
                .for_each_of(&in_range, |i, v| scores[i] = Some(cosine(&qv, v)))?;
            let mut dated: Vec<(&NoteId, f32)> = in_range
                .into_iter()
                .zip(scores)
                .filter_map(|(id, s)| Some((id, s?)))
                .collect();
            dated.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            dated.truncate(n);
            for (id, _) in dated {
                add(id, &mut signals);
            }
        }
        let direct = direct;

        // context: adjacent notes are candidates, and their neighbours are scored too
        let gamma = options.context_weight.max(0.0) as f32;
        let gap_ms =
            i64::try_from(options.context_max_gap_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let adjacent = |id: &NoteId| -> Vec<NoteId> {
            if gamma <= 0.0 {
                return Vec::new();
            }
            let (before, after) = ix.timeline.adjacent(id, gap_ms);
            before.into_iter().chain(after).cloned().collect()
        };
        let mut candidates = direct.clone();
        let mut in_candidates: HashSet<NoteId> = direct.iter().cloned().collect();
        for id in &direct {
            for a in adjacent(id) {
                if in_candidates.insert(a.clone()) {
                    candidates.push(a);
                }
            }
        }
        let mut known: Vec<NoteId> = candidates.clone();
        let mut in_known = in_candidates.clone();
        for id in &candidates {
            for a in adjacent(id) {
                if in_known.insert(a.clone()) {
                    known.push(a);
                }
            }
        }

        // own scores of everything known; notes outside the keyword top-n count as no match
        let in_period = |id: &NoteId| {
            !ranges.is_empty()
                && ix
                    .timeline
                    .time_ms(id)
                    .is_some_and(|t| ranges.iter().any(|(a, b)| *a <= t && t < *b))
        };
        let weights = Weights {
            vector: options.vector_weight as f32,
            context: gamma,
            date: options.date_weight as f32,
            keyword_share: ix.text.known_share(query),
        };
        let mut own: HashMap<NoteId, (f32, Vec<Via>)> = HashMap::with_capacity(known.len());
        for id in known {
            let mut s = signals.remove(&id).unwrap_or_default();
            if !s.via.contains(&Via::Vector) {
                s.vector = ix.vector.get(&id)?.map_or(0.0, |v| cosine(&qv, &v));
            }
            if in_period(&id) {
                s.in_period = true;
                s.via.push(Via::Date);
            }
            let score = ranking::own_score(&s, max_vector, max_keyword, &weights);
            own.insert(id, (score, s.via));
        }
        Ok(ranking::rank_in_context(
            &candidates,
            &own,
            &adjacent,
            gamma,
            k,
        ))
    }

    /// Kasten's ranking plus link expansion: the best hits, each followed by the note its
    /// accepted links reach that is nearest the question (marked `link from <id>`), `k` in
    /// total. A linked note comes in only if it is at least as near the question (cosine)
    /// as the direct hit it pushes off the end; at most a third of the places go to
    /// expansions and at most one follows each direct hit, so a linked note never takes
    /// the place of a nearer direct hit.
    ///
    /// Which linked note follows a hit depends only on the notes (their nearness to the
    /// question, then the fewer hops, then the id), never on the order links were accepted
    /// in: a memory rebuilt or restored from a snapshot ranks as the one it was made from.
    pub fn rank_expanded(
        &self,
        query: &str,
        query_vec: &[f32],
        k: usize,
        options: &SearchOptions,
    ) -> Result<Vec<FusedHit>, EngineError> {
        let fused = self.rank(query, query_vec, k, options)?;
        if !options.links {
            return Ok(fused);
        }
        let ix = self.read_indexes()?;
        if ix.links.is_empty() || k < 2 {
            return Ok(fused);
        }
        let max_expansions = (k / 3).max(1);
        let hops = options.link_hops.max(1);
        // how near the question each direct hit is: a linked note takes the place of the
        // last direct hit only if it is at least as near
        let direct_near: Vec<f32> = fused
            .iter()
            .map(|h| Ok(ix.vector.get(&h.id)?.map_or(0.0, |v| cosine(query_vec, &v))))
            .collect::<Result<_, EngineError>>()?;
        let mut out: Vec<FusedHit> = Vec::with_capacity(k);
        let mut expansions = 0;
        for hit in fused {
            if out.len() >= k {
                break;
            }
            let (from, score) = (hit.id.clone(), hit.score);
            match out.iter_mut().find(|h| h.id == hit.id) {
                // reached through a link earlier and found directly too: keep both reasons
                Some(seen) => {
                    seen.via.extend(hit.via);
                    continue;
                }
                None => out.push(hit),
            }
            if expansions >= max_expansions || out.len() >= k {
                continue;
            }
            // breadth first from this hit: its own links, then (with 2 hops) theirs; of
            // the notes reached that are not listed yet, the one nearest the question
            let mut best: Option<(f32, u8, NoteId, NoteId)> = None;
            let mut seen: HashSet<NoteId> = HashSet::from([from.clone()]);
            let mut frontier = vec![from];
            for depth in 1..=hops {
                let mut next = Vec::new();
                for at in &frontier {
                    let Some(ns) = ix.links.get(at) else { continue };
                    for n in ns {
                        if !seen.insert(n.clone()) {
                            continue;
                        }
                        next.push(n.clone());
                        if out.iter().any(|h| &h.id == n) {
                            continue;
                        }
                        let near = ix.vector.get(n)?.map_or(0.0, |v| cosine(query_vec, &v));
                        let better = best.as_ref().is_none_or(|(b, d, id, _)| {
                            near > *b || (near == *b && (depth, n) < (*d, id))
                        });
                        if better {
                            best = Some((near, depth, n.clone(), at.clone()));
                        }
                    }
                }
                frontier = next;
            }
            // the direct hit that falls off the end if a linked note comes in
            let displaced = k
                .checked_sub(expansions + 1)
                .and_then(|i| direct_near.get(i));
            if let Some((near, depth, id, at)) = best
                && displaced.is_none_or(|d| near >= *d)
            {
                out.push(FusedHit {
                    id,
                    score: score * 0.5f32.powi(i32::from(depth)),
                    via: vec![Via::Link { from: at }],
                });
                expansions += 1;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use kasten_core::NoteId;

    use super::*;
    use crate::search::tests::day;

    /// A query that names thousands of periods ("since 1000 since 1001 … since 2999")
    /// costs what one period costs: each note is a candidate once, never once per period,
    /// and no more than the cap of notes are compared.
    #[test]
    fn a_query_naming_many_periods_is_bounded_work() {
        use kasten_core::period::{MAX_PERIODS, periods_in};
        use kasten_core::timeline::Timeline;
        let query: String = (1000..3000).map(|y| format!("since {y} ")).collect();
        assert!(periods_in(&query).len() <= MAX_PERIODS);
        let mut timeline = Timeline::new();
        let n = 500;
        for k in 0..n {
            timeline.upsert(NoteId::generate(), None, day(2000 + (k % 25) as i32, 1, 1));
        }
        let ranges = period_ranges(&query);
        assert!(ranges.len() <= MAX_PERIODS, "{}", ranges.len());
        let candidates = in_periods(&timeline, &ranges);
        assert_eq!(candidates.len(), n, "each note once");
        // and the candidates, whatever the periods, are at most the cap
        let many: Vec<(i64, i64)> = (0..100).map(|_| (i64::MIN, i64::MAX)).collect();
        assert!(in_periods(&timeline, &many).len() <= n);
    }
}
