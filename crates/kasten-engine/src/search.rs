//! Hybrid search: vector top-n and BM25 top-n fused by their normalised scores, with
//! date-aware ranking, context from the source stream and link expansion; each hit is
//! marked with how it was found. `rank_hybrid` keeps the plain reciprocal-rank fusion as
//! a baseline.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use kasten_core::fusion::Via;
use kasten_core::{Note, NoteId};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError, NoteFilter};
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

/// Notes ranked beyond `k` (at least; `3 k` when larger) before strength weighting picks
/// the top `k`.
const STRENGTH_POOL_EXTRA: usize = 20;

mod rank;
#[cfg(test)]
mod tests;

impl Engine {
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
                    .is_none_or(|e| h.note.enrich_state.stage() == e)
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
