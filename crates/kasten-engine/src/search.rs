//! Hybrid search: vector top-n and BM25 top-n fused by their normalised scores, with
//! date-aware ranking, context from the source stream and link expansion; each hit is
//! marked with how it was found. `rank_hybrid` keeps the plain reciprocal-rank fusion as
//! a baseline.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use kasten_core::fusion::{self, FusedHit, Via};
use kasten_core::ranking::{self, Signals, Weights};
use kasten_core::timeline::Timeline;
use kasten_core::{Note, NoteId, period};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError, NoteFilter};

/// Each list contributes this many candidates per requested hit (at least `MIN_CANDIDATES`),
/// so a note ranked modestly by both lists can still win the fusion.
const CANDIDATES_PER_HIT: usize = 3;
const MIN_CANDIDATES: usize = 30;
/// How many of the whole memory's best notes a filtered search chooses from (at least).
pub const FILTER_POOL: usize = 200;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchHit {
    pub note: Note,
    pub score: f32,
    pub via: Vec<Via>,
    /// The newer note that replaced this one, since when and what changed (an accepted
    /// `supersedes` link); such a hit ranks below the note that is current now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<crate::SupersededBy>,
}

/// Where a search spent its time.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SearchTimings {
    /// Embedding the query.
    pub embed: Duration,
    /// Vector + keyword ranking and fusion, in memory.
    pub rank: Duration,
    /// Reading the hit notes from the store.
    pub fetch: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchOutput {
    pub hits: Vec<SearchHit>,
    pub timings: SearchTimings,
}

/// How a search ranks and expands its hits ([`kasten_core::ranking`] explains the
/// scoring). The default is what `kasten search`, the app and the MCP server use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOptions {
    /// Share of the vector score in the fusion with the keyword score, 0–1.
    pub vector_weight: f64,
    /// Share of the best adjacent note's score (the note written just before or after,
    /// in the same source stream) added to a note's own; 0 turns context off.
    pub context_weight: f64,
    /// Notes more than this many seconds apart are not each other's context.
    pub context_max_gap_secs: u64,
    /// Bonus for notes written in a period the query names ("in July 2023"); 0 turns
    /// date-aware ranking off.
    pub date_weight: f64,
    /// Follow accepted links from the best hits.
    pub links: bool,
    /// How far link expansion goes: 1 follows a hit's own links, 2 also the links of the
    /// notes those reach (each hop halves the score). Measured on LoCoMo with a real
    /// model's links (docs/BENCHMARKS.md) before changing the default of 1.
    pub link_hops: u8,
    /// Weight of a note's current strength in its score (`kasten_core::lifecycle::
    /// retrieval_factor`); 0 turns it off. Off by default: on LoCoMo every note is equally
    /// fresh, so there is no evidence yet that it helps (setting `retrieval.strength_weight`).
    pub strength_weight: f64,
    /// Follow the question through a chain of notes (`kasten_core::chain`): the best
    /// current hit, then the best current note about what it named, up to
    /// `kasten_core::chain::MAX_HOPS` notes, first in the hits.
    pub chain: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            vector_weight: 0.5,
            context_weight: 0.5,
            context_max_gap_secs: 2 * 3600,
            date_weight: 0.2,
            links: true,
            link_hops: 1,
            strength_weight: 0.0,
            chain: false,
        }
    }
}

impl SearchOptions {
    /// Score fusion only: no context, no dates, no links.
    pub fn fusion_only() -> Self {
        Self {
            context_weight: 0.0,
            date_weight: 0.0,
            links: false,
            ..Self::default()
        }
    }
}

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

/// Notes ranked beyond `k` (at least; `3 k` when larger) before strength weighting picks
/// the top `k`.
const STRENGTH_POOL_EXTRA: usize = 20;

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

    /// Kasten's ranking plus link expansion: the best hits, each followed by notes its
    /// accepted links reach (marked `link from <id>`), `k` in total. At most a third of
    /// the places go to expansions, so strong direct hits are not crowded out.
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
        let mut out: Vec<FusedHit> = Vec::with_capacity(k);
        let mut expansions = 0;
        let mut direct = fused.into_iter();
        let mut pending_direct: Option<FusedHit> = direct.next();
        while out.len() < k {
            let Some(hit) = pending_direct.take() else {
                break;
            };
            let from = hit.id.clone();
            let score = hit.score;
            match out.iter_mut().find(|h| h.id == hit.id) {
                // reached through a link earlier and found directly too: keep both reasons
                Some(seen) => seen.via.extend(hit.via),
                None => out.push(hit),
            }
            pending_direct = direct.next();
            // breadth first from this hit: its own links, then (with 2 hops) theirs
            let mut frontier = vec![(from, score)];
            for _ in 0..hops {
                let mut next = Vec::new();
                for (at, at_score) in &frontier {
                    let Some(ns) = ix.links.get(at) else { continue };
                    for n in ns {
                        if out.len() >= k || expansions >= max_expansions {
                            break;
                        }
                        if out.iter().any(|h| &h.id == n) {
                            continue;
                        }
                        out.push(FusedHit {
                            id: n.clone(),
                            score: at_score * 0.5,
                            via: vec![Via::Link { from: at.clone() }],
                        });
                        expansions += 1;
                        next.push((n.clone(), at_score * 0.5));
                    }
                }
                frontier = next;
            }
        }
        Ok(out)
    }

    /// Hybrid search returning the `k` best notes with how each was found.
    /// The notes found are reinforced as *retrieved* (setting `retrieval.reinforce`).
    pub async fn search(&self, query: &str, k: usize) -> Result<SearchOutput, EngineError> {
        self.search_as_of(query, k, None).await
    }

    /// [`Engine::search`] as of a day: what was current then. Notes whose value took
    /// effect after the day (`valid_from`, [`kasten_core::validity`]) are left out — one
    /// that replaced an older note gives its place to the older note valid then — and a
    /// note counts as superseded only by a successor valid by the end of the day. `None`
    /// is today.
    pub async fn search_as_of(
        &self,
        query: &str,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, EngineError> {
        let out = self.search_unreinforced_as_of(query, k, as_of).await?;
        self.reinforce_retrieval(&out).await?;
        Ok(out)
    }

    /// [`Engine::search`] as of a day ([`Engine::search_as_of`]) with the settings in
    /// force, reinforcing nothing (chat reinforces what it showed and cited itself).
    pub(crate) async fn search_unreinforced_as_of(
        &self,
        query: &str,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, EngineError> {
        self.search_with_as_of(query, k, &self.search_options(), as_of)
            .await
    }

    /// The settings in force as search options (no chain).
    pub fn search_options(&self) -> SearchOptions {
        SearchOptions {
            links: self.follows_links(),
            strength_weight: self.strength_weight.load(),
            ..SearchOptions::default()
        }
    }

    /// The retrieval for a question (`ask`): [`Engine::search_options`] following the
    /// chain the question leads through, as of a day when given, reinforcing nothing.
    pub(crate) async fn search_question(
        &self,
        question: &str,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, EngineError> {
        let options = SearchOptions {
            chain: true,
            ..self.search_options()
        };
        self.search_with_as_of(question, k, &options, as_of).await
    }

    /// Reinforces the hits of a search made on a person's or an agent's behalf, when the
    /// setting says every retrieval does.
    async fn reinforce_retrieval(&self, out: &SearchOutput) -> Result<(), EngineError> {
        if self.reinforce_on() != crate::lifecycle::ReinforceOn::All || out.hits.is_empty() {
            return Ok(());
        }
        let ids: Vec<NoteId> = out.hits.iter().map(|h| h.note.id.clone()).collect();
        self.reinforce_quietly(&ids, kasten_core::lifecycle::Reinforce::Retrieved)
            .await;
        Ok(())
    }

    /// [`Engine::search`] among the notes `filter` admits (a Box's members, a tag, an
    /// enrichment state): the best `k` of them among the best [`FILTER_POOL`] (or `10 k`)
    /// notes of the whole memory.
    pub async fn search_filtered(
        &self,
        query: &str,
        k: usize,
        filter: &NoteFilter,
    ) -> Result<SearchOutput, EngineError> {
        self.search_filtered_as_of(query, k, filter, None).await
    }

    /// [`Engine::search_filtered`] as of a day ([`Engine::search_as_of`]; `None` is today).
    pub async fn search_filtered_as_of(
        &self,
        query: &str,
        k: usize,
        filter: &NoteFilter,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, EngineError> {
        if filter.tag.is_none() && filter.enrich_state.is_none() && filter.ids.is_none() {
            return self.search_as_of(query, k, as_of).await;
        }
        let mut out = self
            .search_unreinforced_as_of(query, k.saturating_mul(10).max(FILTER_POOL), as_of)
            .await?;
        let ids: Option<HashSet<&NoteId>> = filter.ids.as_ref().map(|v| v.iter().collect());
        out.hits.retain(|h| {
            ids.as_ref().is_none_or(|s| s.contains(&h.note.id))
                && filter.tag.as_ref().is_none_or(|t| h.note.tags.contains(t))
                && filter
                    .enrich_state
                    .as_deref()
                    .is_none_or(|e| h.note.enrich_state.label() == e)
        });
        out.hits.truncate(k);
        self.reinforce_retrieval(&out).await?;
        Ok(out)
    }

    /// [`Engine::search`] with explicit options.
    pub async fn search_with(
        &self,
        query: &str,
        k: usize,
        options: &SearchOptions,
    ) -> Result<SearchOutput, EngineError> {
        self.search_with_as_of(query, k, options, None).await
    }

    /// [`Engine::search_with`] as of a day ([`Engine::search_as_of`]).
    pub async fn search_with_as_of(
        &self,
        query: &str,
        k: usize,
        options: &SearchOptions,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, EngineError> {
        let out = self.search_once(query, k, options, as_of).await?;
        if !options.chain {
            return Ok(out);
        }
        self.follow_chain(query.trim(), k, options, as_of, out)
            .await
    }

    /// Puts the chain the question leads through first (see [`SearchOptions::chain`]):
    /// each link the best current note about the value the one before added, found by a
    /// search for that value and what the question still asks.
    async fn follow_chain(
        &self,
        question: &str,
        k: usize,
        options: &SearchOptions,
        as_of: Option<NaiveDate>,
        first: SearchOutput,
    ) -> Result<SearchOutput, EngineError> {
        use kasten_core::chain;
        let SearchOutput {
            mut hits,
            mut timings,
        } = first;
        let Some(start) = hits.iter().position(|h| h.superseded_by.is_none()) else {
            return Ok(SearchOutput { hits, timings });
        };
        let mut link = hits.remove(start);
        let mut query = question.to_owned();
        let mut links: Vec<SearchHit> = Vec::new();
        loop {
            let step = chain::hop(&query, &link.note.content);
            let from = link.note.id.clone();
            links.push(link);
            let Some(step) = step else { break };
            if links.len() >= chain::MAX_HOPS {
                break;
            }
            let next = self
                .search_once(&step.next_query, k, options, as_of)
                .await?;
            timings.embed += next.timings.embed;
            timings.rank += next.timings.rank;
            timings.fetch += next.timings.fetch;
            let found = next.hits.into_iter().find(|h| {
                h.superseded_by.is_none()
                    && !links.iter().any(|l| l.note.id == h.note.id)
                    && chain::continues(&step.value, &h.note.content)
            });
            let Some(mut found) = found else { break };
            found.via.push(Via::Chain { from });
            link = found;
            query = step.next_query;
        }
        hits.retain(|h| !links.iter().any(|l| l.note.id == h.note.id));
        links.extend(hits);
        links.truncate(k);
        Ok(SearchOutput {
            hits: links,
            timings,
        })
    }

    /// One search for `query` (no chain).
    async fn search_once(
        &self,
        query: &str,
        k: usize,
        options: &SearchOptions,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, EngineError> {
        let query = query.trim();
        if query.is_empty() {
            return Err(EngineError::EmptyQuery);
        }
        let t0 = Instant::now();
        let qv = self.embed_query(query).await?;
        let embed = t0.elapsed();
        let t1 = Instant::now();
        // with strength weighting, a larger pool is ranked first, so that strength decides
        // which notes make the top k (not only their order within it)
        // as of a day, notes not valid yet are left out afterwards: rank more
        let pool = if options.strength_weight > 0.0 || as_of.is_some() {
            k.saturating_mul(3).max(k + STRENGTH_POOL_EXTRA)
        } else {
            k
        };
        let mut fused = self.rank_expanded(query, &qv, pool, options)?;
        if options.strength_weight > 0.0 {
            let ids: Vec<NoteId> = fused.iter().map(|h| h.id.clone()).collect();
            let strength = self.strength_now(&ids).await?;
            for h in fused.iter_mut() {
                let s = strength.get(&h.id).copied().unwrap_or(1.0);
                h.score *=
                    kasten_core::lifecycle::retrieval_factor(options.strength_weight, s) as f32;
            }
            fused.sort_by(|a, b| {
                b.score
                    .partial_cmp(&a.score)
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            if as_of.is_none() {
                fused.truncate(k);
            }
        }
        let rank = t1.elapsed();
        let t2 = Instant::now();
        let crate::supersede::CurrentFirst {
            hits: fused,
            mut superseded,
        } = self
            .current_first(fused, k, as_of.map(kasten_core::validity::end_of))
            .await?;
        let ids: Vec<NoteId> = fused.iter().map(|h| h.id.clone()).collect();
        let mut notes = self.store.get_notes(&ids).await?;
        let fetch = t2.elapsed();
        let hits = fused
            .into_iter()
            .filter_map(|h| {
                let pos = notes.iter().position(|n| n.id == h.id)?;
                Some(SearchHit {
                    superseded_by: superseded.remove(&h.id),
                    note: notes.swap_remove(pos),
                    score: h.score,
                    via: h.via,
                })
            })
            .collect();
        Ok(SearchOutput {
            hits,
            timings: SearchTimings { embed, rank, fetch },
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};
    use kasten_core::{NewNote, NoteId, Via};
    use kasten_store::Endpoint;

    use super::SearchOptions;
    use crate::tests::HashEmbedder;
    use crate::{Engine, EngineError};

    async fn open(ep: &Endpoint) -> Result<Engine, EngineError> {
        Engine::open(ep, HashEmbedder::arc("h", 64, 1), &|_| {}).await
    }

    fn note(text: &str, source: Option<&str>, at: DateTime<Utc>) -> Result<NewNote, EngineError> {
        Ok(NewNote::new(text)?
            .at(Some(at))
            .with_source(source.map(str::to_owned)))
    }

    fn day(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0)
            .single()
            .unwrap_or_default()
    }

    /// A question that chains three notes gets them first, in the order of the chain,
    /// each current: the one-search answer holds only the first. (The test embedder
    /// knows no synonyms: the relations are worded as the question words them.)
    #[tokio::test]
    async fn a_question_is_followed_through_its_chain_of_notes() -> Result<(), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let texts = [
            "The author of Our Mutual Friend is Charles Darwin.",
            "The spouse of Charles Darwin is Amala Paul.",
            "Amala Paul is a citizen of Belgium.",
            "The author of Lady Windermere's Fan is Oscar Wilde.",
            "Oscar Wilde is married to Constance Lloyd.",
            "The country of citizenship of Ada Lovelace is England.",
            "The spouse of Ada Lovelace is William King.",
            "Charles Darwin is a citizen of England.",
        ];
        let notes = e
            .add_batch(
                texts
                    .iter()
                    .map(|t| NewNote::new(t))
                    .collect::<Result<Vec<_>, _>>()?,
            )
            .await?
            .notes;
        let q =
            "What is the country of citizenship of the spouse of the author of Our Mutual Friend?";
        let chained = SearchOptions {
            chain: true,
            ..SearchOptions::default()
        };
        let out = e.search_with(q, 5, &chained).await?;
        let got: Vec<&str> = out.hits.iter().map(|h| h.note.content.as_str()).collect();
        assert_eq!(&got[..3], &texts[..3], "{got:?}");
        assert!(
            out.hits[1].via.contains(&Via::Chain {
                from: notes[0].id.clone()
            }),
            "{:?}",
            out.hits[1].via
        );
        // without the chain, the spouse's citizenship is not among the first three
        let plain = e.search_with(q, 5, &SearchOptions::default()).await?;
        let first: Vec<&str> = plain
            .hits
            .iter()
            .take(3)
            .map(|h| h.note.content.as_str())
            .collect();
        assert!(!first.contains(&texts[2]), "{first:?}");
        // a question whose note adds nothing new stays one search
        let out = e
            .search_with("Amala Paul is a citizen of Belgium", 5, &chained)
            .await?;
        assert_eq!(out.hits[0].note.content, texts[2]);
        Ok(())
    }

    /// A filtered search returns only the notes the filter admits, even when others rank
    /// higher.
    #[tokio::test]
    async fn a_filtered_search_keeps_to_the_box_tag_and_state() -> Result<(), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let notes = e
            .add_batch(vec![
                NewNote::new("the lake at sunrise, the lake at dawn")?,
                NewNote::new("a lake")?,
                NewNote::new("groceries are expensive")?,
            ])
            .await?
            .notes;
        let all = e.search("lake sunrise", 3).await?;
        assert_eq!(all.hits[0].note.id, notes[0].id);
        let in_box = crate::NoteFilter {
            ids: Some(vec![notes[1].id.clone(), notes[2].id.clone()]),
            ..Default::default()
        };
        let hits = e.search_filtered("lake sunrise", 3, &in_box).await?.hits;
        assert!(!hits.is_empty());
        assert!(
            hits.iter().all(|h| h.note.id != notes[0].id),
            "a note outside the Box was found"
        );
        assert_eq!(hits[0].note.id, notes[1].id);
        let failed = crate::NoteFilter {
            enrich_state: Some("failed".into()),
            ..Default::default()
        };
        assert!(e.search_filtered("lake", 3, &failed).await?.hits.is_empty());
        let tagged = crate::NoteFilter {
            tag: Some("nature".into()),
            ..Default::default()
        };
        assert!(e.search_filtered("lake", 3, &tagged).await?.hits.is_empty());
        e.close().await;
        Ok(())
    }

    /// A filtered search as of a day (the app's Notes search with its date control): the
    /// filter still applies, and a note whose value took effect after the day is left out.
    #[tokio::test]
    async fn a_filtered_search_as_of_a_day_leaves_out_what_was_not_true_yet()
    -> Result<(), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let at = |d: &str| format!("{d}T09:00:00Z").parse().ok();
        let notes = e
            .add_batch(vec![
                NewNote::new("the lake cabin costs 90 euros a night")?.at(at("2026-03-01")),
                NewNote::new("the lake cabin since June 2026 costs 120 euros")?
                    .at(at("2026-03-05")),
                NewNote::new("groceries are expensive")?.at(at("2026-03-01")),
            ])
            .await?
            .notes;
        let ids: Vec<NoteId> = notes.iter().map(|n| n.id.clone()).collect();
        let in_box = crate::NoteFilter {
            ids: Some(vec![ids[0].clone(), ids[1].clone()]),
            ..Default::default()
        };
        let found = |hits: &[crate::SearchHit]| -> Vec<NoteId> {
            hits.iter().map(|h| h.note.id.clone()).collect()
        };
        let today = e
            .search_filtered_as_of("lake cabin", 5, &in_box, None)
            .await?
            .hits;
        assert!(found(&today).contains(&ids[1]), "{today:?}");
        assert!(!found(&today).contains(&ids[2]), "outside the filter");
        let may = "2026-05-31".parse().ok();
        let then = e
            .search_filtered_as_of("lake cabin", 5, &in_box, may)
            .await?
            .hits;
        assert!(found(&then).contains(&ids[0]), "{then:?}");
        assert!(!found(&then).contains(&ids[1]), "not true yet: {then:?}");
        assert!(!found(&then).contains(&ids[2]), "outside the filter");
        // without a filter, the same
        let none = crate::NoteFilter::default();
        let all = e
            .search_filtered_as_of("lake cabin", 5, &none, may)
            .await?
            .hits;
        assert!(!found(&all).contains(&ids[1]), "{all:?}");
        e.close().await;
        Ok(())
    }

    /// A chat session where the answer ("Last Friday, at the lake!") shares no word with
    /// the question, and an unrelated note in another stream at the same time.
    async fn chat(e: &Engine) -> Result<Vec<kasten_core::Note>, EngineError> {
        let t = day(2023, 5, 8);
        Ok(e.add_batch(vec![
            note("Ann: How was your week?", Some("chat:S1:1"), t)?,
            note(
                "Ann: When did you paint the sunrise picture?",
                Some("chat:S1:2"),
                t,
            )?,
            note("Bo: Last Friday, at the lake!", Some("chat:S1:3"), t)?,
            note("Bo: Also, groceries are expensive.", Some("other:S9:1"), t)?,
        ])
        .await?
        .notes)
    }

    #[tokio::test]
    async fn a_hit_brings_its_neighbour_in_the_same_stream() -> Result<(), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let notes = chat(&e).await?;
        let (question, answer) = (&notes[1], &notes[2]);
        let out = e.search("paint sunrise picture", 3).await?;
        let ids: Vec<_> = out.hits.iter().map(|h| &h.note.id).collect();
        assert_eq!(ids[0], &question.id);
        // both neighbours follow, the reply with the label that says why
        assert!(ids.contains(&&answer.id), "{ids:?}");
        let reply = out.hits.iter().find(|h| h.note.id == answer.id);
        assert!(
            reply.is_some_and(|h| h.via.contains(&Via::Context {
                of: question.id.clone()
            })),
            "{:?}",
            out.hits
        );
        // the note of another stream is never context, even at the same time
        assert!(!ids.contains(&&notes[3].id));
        let labels: Vec<String> = out.hits[1].via.iter().map(Via::label).collect();
        assert!(labels.iter().any(|l| l.starts_with("context of ")));

        // without context the reply has nothing to do with the query
        let plain = SearchOptions {
            context_weight: 0.0,
            ..SearchOptions::default()
        };
        let out = e.search_with("paint sunrise picture", 3, &plain).await?;
        assert!(
            out.hits
                .iter()
                .all(|h| !h.via.iter().any(|v| matches!(v, Via::Context { .. })))
        );
        e.close().await;
        Ok(())
    }

    #[tokio::test]
    async fn a_time_gap_ends_the_context_and_deleted_notes_leave_it() -> Result<(), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let added = e
            .add_batch(vec![
                note(
                    "planted tomatoes in the garden",
                    Some("diary.md"),
                    day(2023, 5, 1),
                )?,
                note("it rained all day", Some("diary.md"), day(2023, 5, 2))?,
            ])
            .await?
            .notes;
        let out = e.search("tomatoes garden", 2).await?;
        assert!(
            out.hits
                .iter()
                .all(|h| h.via.iter().all(|v| !matches!(v, Via::Context { .. })))
        );
        // within the gap they are context
        let wide = SearchOptions {
            context_max_gap_secs: 2 * 86_400,
            ..SearchOptions::default()
        };
        let out = e.search_with("tomatoes garden", 2, &wide).await?;
        assert_eq!(out.hits.len(), 2);
        assert_eq!(
            out.hits[1].via,
            vec![
                Via::Vector,
                Via::Context {
                    of: added[0].id.clone()
                }
            ]
        );
        e.delete(&added[0].id).await?;
        let out = e.search_with("tomatoes garden", 2, &wide).await?;
        assert!(out.hits.iter().all(|h| h.note.id != added[0].id));
        assert!(
            out.hits
                .iter()
                .all(|h| h.via.iter().all(|v| !matches!(v, Via::Context { .. })))
        );
        e.close().await;
        Ok(())
    }

    #[tokio::test]
    async fn a_named_period_ranks_its_notes_first() -> Result<(), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let added = e
            .add_batch(vec![
                note("went hiking with the dog", None, day(2023, 3, 1))?,
                note("went hiking with the dog", None, day(2023, 7, 7))?,
                note("went hiking with the dog", None, day(2024, 7, 7))?,
            ])
            .await?
            .notes;
        for q in [
            "hiking in July 2023",
            "hiking on 7 July, 2023",
            "hiking 2023-07-07",
        ] {
            let out = e.search(q, 3).await?;
            assert_eq!(out.hits[0].note.id, added[1].id, "{q}");
            assert!(out.hits[0].via.contains(&Via::Date), "{q}");
            assert!(
                out.hits[1..].iter().all(|h| !h.via.contains(&Via::Date)),
                "{q}"
            );
        }
        let off = SearchOptions {
            date_weight: 0.0,
            ..SearchOptions::default()
        };
        let out = e.search_with("hiking in July 2023", 3, &off).await?;
        assert!(out.hits.iter().all(|h| !h.via.contains(&Via::Date)));
        e.close().await;
        Ok(())
    }

    #[tokio::test]
    async fn the_timeline_is_rebuilt_when_a_memory_is_opened_again() -> Result<(), EngineError> {
        let dir = tempfile::tempdir().map_err(|e| EngineError::Internal(e.to_string()))?;
        let ep = Endpoint::SurrealKv(dir.path().join("db"));
        let e = open(&ep).await?;
        let notes = chat(&e).await?;
        e.close().await;
        let e = open(&ep).await?;
        let out = e.search("paint sunrise picture", 3).await?;
        assert!(out.hits.iter().any(|h| h.note.id == notes[2].id
            && h.via.contains(&Via::Context {
                of: notes[1].id.clone()
            })));
        let ranked = e.rank(
            "paint sunrise picture",
            &e.embed_query("paint sunrise picture").await?,
            0,
            &SearchOptions::default(),
        )?;
        assert!(ranked.is_empty());
        e.close().await;
        Ok(())
    }

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
        let ranges = super::period_ranges(&query);
        assert!(ranges.len() <= MAX_PERIODS, "{}", ranges.len());
        let candidates = super::in_periods(&timeline, &ranges);
        assert_eq!(candidates.len(), n, "each note once");
        // and the candidates, whatever the periods, are at most the cap
        let many: Vec<(i64, i64)> = (0..100).map(|_| (i64::MIN, i64::MAX)).collect();
        assert!(super::in_periods(&timeline, &many).len() <= n);
    }

    #[test]
    fn options_serialise_for_reports() {
        let v = serde_json::to_value(SearchOptions::default()).unwrap_or_default();
        assert_eq!(v["context_weight"], 0.5);
        assert!(!SearchOptions::fusion_only().links);
    }
}
