//! Hybrid search: vector top-n and BM25 top-n, fused by reciprocal rank, each hit
//! marked with how it was found.

use std::time::{Duration, Instant};

use kasten_core::fusion::{self, FusedHit, Via};
use kasten_core::{Note, NoteId};
use serde::Serialize;

use crate::{Engine, EngineError};

/// Each list contributes this many candidates per requested hit (at least `MIN_CANDIDATES`),
/// so a note ranked modestly by both lists can still win the fusion.
const CANDIDATES_PER_HIT: usize = 3;
const MIN_CANDIDATES: usize = 30;

#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub note: Note,
    pub score: f32,
    pub via: Vec<Via>,
}

/// Where a search spent its time.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SearchTimings {
    /// Embedding the query.
    pub embed: Duration,
    /// Vector + keyword ranking and fusion, in memory.
    pub rank: Duration,
    /// Reading the hit notes from the store.
    pub fetch: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct SearchOutput {
    pub hits: Vec<SearchHit>,
    pub timings: SearchTimings,
}

/// How a search ranks and expands its hits. The default is what `kasten search`, the app
/// and the MCP server use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOptions {
    /// Follow accepted links from the best hits.
    pub links: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self { links: true }
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
        Ok(ix.vector.iter().map(|(_, v)| v.to_vec()).collect())
    }

    /// Vector and keyword ranking fused by reciprocal rank (no store access).
    pub fn rank_hybrid(
        &self,
        query: &str,
        query_vec: &[f32],
        k: usize,
    ) -> Result<Vec<FusedHit>, EngineError> {
        let n = (k * CANDIDATES_PER_HIT).max(MIN_CANDIDATES);
        let ix = self.read_indexes()?;
        let vec_hits = ix.vector.search(query_vec, n)?;
        let kw_hits = ix.text.search(query, n);
        drop(ix);
        Ok(fusion::rrf(
            &[(Via::Vector, 1.0, &vec_hits), (Via::Keyword, 1.0, &kw_hits)],
            k,
        ))
    }

    /// Hybrid ranking plus link expansion: the best hits, each followed by notes its
    /// accepted links reach (marked `link from <id>`), `k` in total. At most a third of
    /// the places go to expansions, so strong direct hits are not crowded out.
    pub fn rank_expanded(
        &self,
        query: &str,
        query_vec: &[f32],
        k: usize,
    ) -> Result<Vec<FusedHit>, EngineError> {
        let fused = self.rank_hybrid(query, query_vec, k)?;
        let ix = self.read_indexes()?;
        if ix.links.is_empty() || k < 2 {
            return Ok(fused);
        }
        let max_expansions = (k / 3).max(1);
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
            if let Some(ns) = ix.links.get(&from) {
                for n in ns {
                    if out.len() >= k || expansions >= max_expansions {
                        break;
                    }
                    if out.iter().any(|h| &h.id == n) {
                        continue;
                    }
                    out.push(FusedHit {
                        id: n.clone(),
                        score: score * 0.5,
                        via: vec![Via::Link { from: from.clone() }],
                    });
                    expansions += 1;
                }
            }
        }
        Ok(out)
    }

    /// Hybrid search returning the `k` best notes with how each was found.
    pub async fn search(&self, query: &str, k: usize) -> Result<SearchOutput, EngineError> {
        self.search_with(query, k, &SearchOptions::default()).await
    }

    /// [`Engine::search`] with explicit options.
    pub async fn search_with(
        &self,
        query: &str,
        k: usize,
        options: &SearchOptions,
    ) -> Result<SearchOutput, EngineError> {
        let query = query.trim();
        if query.is_empty() {
            return Err(EngineError::EmptyQuery);
        }
        let t0 = Instant::now();
        let qv = self.embed_query(query).await?;
        let embed = t0.elapsed();
        let t1 = Instant::now();
        let fused = if options.links {
            self.rank_expanded(query, &qv, k)?
        } else {
            self.rank_hybrid(query, &qv, k)?
        };
        let rank = t1.elapsed();
        let t2 = Instant::now();
        let ids: Vec<NoteId> = fused.iter().map(|h| h.id.clone()).collect();
        let mut notes = self.store.get_notes(&ids).await?;
        let fetch = t2.elapsed();
        let hits = fused
            .into_iter()
            .filter_map(|h| {
                let pos = notes.iter().position(|n| n.id == h.id)?;
                Some(SearchHit {
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
