//! Read-only views for the desktop app, paged so that no call ships the whole memory:
//! note pages with filters, the graph a page at a time, a note's neighbourhood to a depth,
//! job counts and per-day figures.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kasten_core::{Note, NoteId};
use kasten_store::JobCounts;
use kasten_store::views::{DayCount, GraphLinkRow, GraphNodeRow, NoteFilter};

use crate::{Engine, EngineError};

/// A note's neighbourhood: the nodes within `depth` hops over proposed and accepted links.
#[derive(Debug, Clone, Default)]
pub struct LocalGraph {
    pub nodes: Vec<GraphNodeRow>,
    pub links: Vec<GraphLinkRow>,
    /// Whether `max_nodes` cut the neighbourhood short.
    pub truncated: bool,
}

/// Notes, links and tokens per day.
#[derive(Debug, Clone, Default)]
pub struct Daily {
    pub notes: Vec<DayCount>,
    pub links: Vec<DayCount>,
    pub tokens: Vec<DayCount>,
}

impl Engine {
    /// A page of notes, newest first, and how many match.
    pub async fn notes_page(
        &self,
        filter: &NoteFilter,
        limit: usize,
        offset: usize,
    ) -> Result<(u64, Vec<Note>), EngineError> {
        Ok(self.store.notes_page(filter, limit, offset).await?)
    }

    /// Graph nodes in id order after `after`.
    pub async fn graph_nodes(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<GraphNodeRow>, EngineError> {
        Ok(self.store.graph_nodes(after, limit).await?)
    }

    /// Graph links (proposed and accepted) in id order after `after`.
    pub async fn graph_links(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<GraphLinkRow>, EngineError> {
        Ok(self.store.graph_links(after, limit).await?)
    }

    /// The notes within `depth` hops of `center` (breadth first, at most `max_nodes`), with
    /// the links among them.
    pub async fn local_graph(
        &self,
        center: &NoteId,
        depth: u32,
        max_nodes: usize,
    ) -> Result<LocalGraph, EngineError> {
        if self.store.get_note(center).await?.is_none() {
            return Err(EngineError::NotFound(center.clone()));
        }
        let mut seen: HashSet<NoteId> = HashSet::from([center.clone()]);
        let mut order: Vec<NoteId> = vec![center.clone()];
        let mut frontier = vec![center.clone()];
        let mut links: HashMap<String, GraphLinkRow> = HashMap::new();
        let mut truncated = false;
        for _ in 0..depth.clamp(1, 3) {
            if frontier.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for l in self.store.links_touching(&frontier).await? {
                for end in [&l.from, &l.to] {
                    if let Ok(id) = NoteId::parse(end)
                        && !seen.contains(&id)
                    {
                        if order.len() >= max_nodes {
                            truncated = true;
                            continue;
                        }
                        seen.insert(id.clone());
                        order.push(id.clone());
                        next.push(id);
                    }
                }
                links.insert(l.id.clone(), l);
            }
            frontier = next;
        }
        let keep = |s: &str| NoteId::parse(s).map(|i| seen.contains(&i)).unwrap_or(false);
        let mut links: Vec<GraphLinkRow> = links
            .into_values()
            .filter(|l| keep(&l.from) && keep(&l.to))
            .collect();
        links.sort_by(|a, b| a.id.cmp(&b.id));
        let nodes = self.store.graph_nodes_of(&order).await?;
        Ok(LocalGraph {
            nodes,
            links,
            truncated,
        })
    }

    /// Enrichment jobs by state.
    pub async fn job_counts(&self) -> Result<JobCounts, EngineError> {
        Ok(self.store.job_counts().await?)
    }

    /// The most used tags and their note counts.
    pub async fn tag_counts(&self, limit: usize) -> Result<Vec<(String, u64)>, EngineError> {
        Ok(self.store.tag_counts(limit).await?)
    }

    /// Notes, links and tokens per day since `since`.
    pub async fn daily(&self, since: DateTime<Utc>) -> Result<Daily, EngineError> {
        let (notes, links, tokens) = self.store.daily_counts(since).await?;
        Ok(Daily {
            notes,
            links,
            tokens,
        })
    }
}
