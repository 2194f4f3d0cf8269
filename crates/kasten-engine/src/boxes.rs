//! Boxes in the engine: the graph (accepted links weighted by confidence, plus strong
//! embedding similarity), a full recompute on a blocking thread, and the cheap
//! incremental update after each event (algorithm: `kasten_core::boxes`).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use chrono::Utc;
use kasten_core::boxes::{self, BoxGraph, BoxParams, Community};
use kasten_core::text::Tokenizer;
use kasten_core::{BoxId, NoteId};
use kasten_store::BoxRecord;
use serde::Serialize;

use crate::{Engine, EngineError};

/// Similarity edges: each note's nearest neighbours at or above this cosine...
pub const SIMILARITY_MIN_COSINE: f32 = 0.5;
/// ...at most this many per note...
pub const SIMILARITY_NEIGHBOURS: usize = 5;
/// ...weighted by cosine × this (an accepted link weighs its confidence, up to 1).
pub const SIMILARITY_WEIGHT: f64 = 0.5;
/// Terms in a Box label.
const LABEL_TERMS: usize = 3;
/// Notes enriched in one pass from which the Boxes are recomputed in full (fewer are
/// placed one by one as they are enriched, [`Engine::place_in_box`]).
pub const BOX_RECOMPUTE_AFTER: usize = 50;

/// A Box as the CLI (`boxes --json`), the app and the export see it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BoxInfo {
    pub id: BoxId,
    pub label: String,
    pub members: Vec<NoteId>,
}

/// What a full recompute found.
#[derive(Debug, Clone, Serialize)]
pub struct BoxReport {
    pub boxes: usize,
    pub notes: usize,
    pub boxed_notes: usize,
    pub edges: usize,
    pub link_edges: usize,
    pub similarity_edges: usize,
    pub modularity: f64,
    /// Box sizes, largest first.
    pub sizes: Vec<usize>,
    /// Boxes that kept their id from the previous computation.
    pub kept_ids: usize,
    pub graph_ms: u128,
    pub cluster_ms: u128,
}

fn to_info(b: BoxRecord) -> Option<BoxInfo> {
    Some(BoxInfo {
        id: BoxId::parse(&b.id).ok()?,
        label: b.label,
        members: b
            .members
            .iter()
            .filter_map(|m| NoteId::parse(m).ok())
            .collect(),
    })
}

impl Engine {
    /// The Boxes as last computed, largest first.
    pub async fn boxes(&self) -> Result<Vec<BoxInfo>, EngineError> {
        let mut v: Vec<BoxInfo> = self
            .store
            .boxes()
            .await?
            .into_iter()
            .filter_map(to_info)
            .collect();
        v.sort_by(|a, b| {
            b.members
                .len()
                .cmp(&a.members.len())
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(v)
    }

    /// The Box refresh after `enriched` notes were enriched: every shell's, run by the
    /// enrichment loop ([`crate::run_worker`]) and `kasten enrich`. Each enrichment places
    /// its note in a Box as it goes; a full recompute runs when there are no Boxes yet and
    /// something changed, or after a pass of [`BOX_RECOMPUTE_AFTER`] notes or more.
    /// Returns the recompute's report, or `None` when none was needed.
    pub async fn refresh_boxes(&self, enriched: usize) -> Result<Option<BoxReport>, EngineError> {
        if enriched == 0 {
            return Ok(None);
        }
        if enriched < BOX_RECOMPUTE_AFTER && !self.store.boxes().await?.is_empty() {
            return Ok(None);
        }
        self.recompute_boxes().await.map(Some)
    }

    /// Recomputes every Box from scratch. The heavy part (similarity graph, clustering)
    /// runs on a blocking thread, so callers on an async runtime (the app) stay responsive.
    pub async fn recompute_boxes(&self) -> Result<BoxReport, EngineError> {
        let t0 = Instant::now();
        let links = self.store.weighted_links().await?;
        let tags = self.store.note_terms().await?;
        let old: Vec<(BoxId, Vec<NoteId>)> = self
            .store
            .boxes()
            .await?
            .into_iter()
            .filter_map(|b| {
                Some((
                    BoxId::parse(&b.id).ok()?,
                    b.core
                        .iter()
                        .filter_map(|m| NoteId::parse(m).ok())
                        .collect(),
                ))
            })
            .collect();
        // the vectors of the notes to compare: a snapshot, so the indexes are not held
        let vectors: Vec<(NoteId, Vec<f32>)> = {
            let ix = self.read_indexes()?;
            let mut out = Vec::with_capacity(ix.vector.len());
            ix.vector
                .for_each_vector(|id, v| out.push((id.clone(), v.to_vec())))?;
            out
        };
        let link_degree: HashMap<NoteId, usize> =
            links.iter().fold(HashMap::new(), |mut m, (a, b, _)| {
                *m.entry(a.clone()).or_insert(0) += 1;
                *m.entry(b.clone()).or_insert(0) += 1;
                m
            });
        let active: HashSet<NoteId> = tags.iter().map(|(id, _, _)| id.clone()).collect();
        let link_edges = links.len();
        let dim = self.embedder.dim();
        let (graph, similarity_edges, graph_ms, detection) =
            tokio::task::spawn_blocking(move || {
                let t = Instant::now();
                let mut g = BoxGraph::new();
                for (id, _) in &vectors {
                    g.add_note(id);
                }
                for (a, b, w) in &links {
                    g.add_edge(a, b, w.clamp(0.0, 1.0));
                }
                // similarity edges supplement what the LLM has not linked: notes with fewer
                // than two accepted links look for their nearest neighbours
                let mut index = kasten_core::vector::VectorIndex::new(dim);
                for (id, v) in &vectors {
                    let _ = index.upsert(id.clone(), v);
                }
                let mut sim = 0usize;
                for (id, v) in &vectors {
                    if link_degree.get(id).copied().unwrap_or(0) >= 2 || !active.contains(id) {
                        continue;
                    }
                    if let Ok(hits) = index.search(v, SIMILARITY_NEIGHBOURS + 1) {
                        for (other, cos) in hits {
                            if &other != id && cos >= SIMILARITY_MIN_COSINE {
                                g.add_edge(id, &other, cos as f64 * SIMILARITY_WEIGHT);
                                sim += 1;
                            }
                        }
                    }
                }
                let graph_ms = t.elapsed().as_millis();
                let d = boxes::detect(&g, &BoxParams::default());
                (g, sim, graph_ms, d)
            })
            .await
            .map_err(|e| EngineError::Internal(format!("box computation failed: {e}")))?;
        let cluster_ms = t0.elapsed().as_millis().saturating_sub(graph_ms);

        let ids = boxes::stable_ids(
            &detection.communities,
            &old,
            BoxParams::default().keep_id_jaccard,
        );
        let kept_ids = ids
            .iter()
            .filter(|i| old.iter().any(|(o, _)| o == *i))
            .count();
        let labels = self.box_labels(&detection.communities, tags);
        let now = Utc::now();
        let records: Vec<BoxRecord> = detection
            .communities
            .iter()
            .zip(ids)
            .zip(labels)
            .map(|((c, id), label)| BoxRecord {
                id: id.to_string(),
                label,
                members: c.members.iter().map(ToString::to_string).collect(),
                core: c.core.iter().map(ToString::to_string).collect(),
                updated_at: now,
            })
            .collect();
        self.store.replace_boxes(&records).await?;
        let boxed: HashSet<&String> = records.iter().flat_map(|r| r.members.iter()).collect();
        Ok(BoxReport {
            boxes: records.len(),
            notes: graph.note_count(),
            boxed_notes: boxed.len(),
            edges: graph.edge_count(),
            link_edges,
            similarity_edges,
            modularity: detection.modularity,
            sizes: records.iter().map(|r| r.members.len()).collect(),
            kept_ids,
            graph_ms,
            cluster_ms,
        })
    }

    fn box_labels(
        &self,
        communities: &[Community],
        notes: Vec<(NoteId, Vec<String>, String)>,
    ) -> Vec<String> {
        let tokenizer = Tokenizer::default();
        // candidate terms: the LLM's tags (else keywords); notes it has not annotated fall
        // back to their content's terms, stemmed — and shown as the word most often
        // written for the stem ("painting", not "paint")
        let mut surface: HashMap<String, HashMap<String, usize>> = HashMap::new();
        let terms_of: HashMap<NoteId, Vec<String>> = notes
            .into_iter()
            .map(|(id, t, content)| {
                let t: Vec<String> = if t.is_empty() {
                    for word in content.split_whitespace() {
                        let w = word
                            .trim_matches(|c: char| !c.is_alphanumeric())
                            .to_lowercase();
                        if let [stem] = tokenizer.tokenize(&w).as_slice() {
                            *surface
                                .entry(stem.clone())
                                .or_default()
                                .entry(w)
                                .or_insert(0) += 1;
                        }
                    }
                    tokenizer.tokenize(&content)
                } else {
                    t.into_iter().map(|x| x.trim().to_lowercase()).collect()
                };
                (id, t)
            })
            .collect();
        let shown = |term: String| -> String {
            surface
                .get(&term)
                .and_then(|m| {
                    m.iter()
                        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                        .map(|(w, _)| w.clone())
                })
                .unwrap_or(term)
        };
        let df = boxes::document_frequency(&terms_of);
        let n = terms_of.len();
        communities
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let t = boxes::label_terms(&c.members, &terms_of, &df, n, LABEL_TERMS);
                if t.is_empty() {
                    format!("Box {}", i + 1)
                } else {
                    t.into_iter().map(shown).collect::<Vec<_>>().join(" · ")
                }
            })
            .collect()
    }

    /// The cheap update after an event: `note` joins the Box holding most of its accepted
    /// links' weight (if any), without reclustering. A full recompute
    /// ([`Engine::recompute_boxes`]) reconsiders everything.
    pub async fn place_in_box(&self, note: &NoteId) -> Result<Option<BoxId>, EngineError> {
        let mut records = self.store.boxes().await?;
        if records.is_empty() {
            return Ok(None);
        }
        let links = self.store.links_of(note).await?;
        let mut weight: HashMap<usize, f64> = HashMap::new();
        for l in links
            .iter()
            .filter(|l| l.status == kasten_core::LinkStatus::Accepted)
        {
            let other = if &l.from == note { &l.to } else { &l.from };
            let key = other.to_string();
            for (i, r) in records.iter().enumerate() {
                if r.members.contains(&key) {
                    *weight.entry(i).or_insert(0.0) += l.confidence;
                }
            }
        }
        let Some((&best, _)) = weight.iter().max_by(|a, b| {
            a.1.partial_cmp(b.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.0.cmp(a.0))
        }) else {
            return Ok(None);
        };
        let key = note.to_string();
        if records[best].members.contains(&key) {
            return Ok(BoxId::parse(&records[best].id).ok());
        }
        records[best].members.push(key);
        records[best].members.sort();
        records[best].updated_at = Utc::now();
        let id = BoxId::parse(&records[best].id).ok();
        self.store.replace_boxes(&records).await?;
        Ok(id)
    }
}
