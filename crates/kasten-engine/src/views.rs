//! Read-only views for the desktop app, paged so that no call ships the whole memory:
//! note pages with filters, the graph a page at a time, a note's neighbourhood to a depth,
//! job counts and per-day figures.

use std::collections::{HashMap, HashSet};

use crate::shell::into_all;
use crate::{DayCount, Engine, EngineError, GraphLink, GraphNode, JobCounts, NoteFilter};
use chrono::{DateTime, Utc};
use kasten_core::{Note, NoteId};

/// A note's neighbourhood: the nodes within `depth` hops over proposed and accepted links.
#[derive(Debug, Clone, Default)]
pub struct LocalGraph {
    pub nodes: Vec<GraphNode>,
    pub links: Vec<GraphLink>,
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

/// The notes of a listing that had taken effect by the end of `day` (`valid_from`, read
/// from the text): how many, and `limit` of them from `offset`. `fetch(at, n)` gives the
/// listing's `n` notes from `at`; it is walked a page at a time (memory bounded by a page).
pub(crate) async fn taken_effect_by<F, Fut>(
    day: chrono::NaiveDate,
    limit: usize,
    offset: usize,
    mut fetch: F,
) -> Result<(u64, Vec<Note>), EngineError>
where
    F: FnMut(usize, usize) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Note>, EngineError>>,
{
    const SCAN: usize = 1_000;
    let end = kasten_core::validity::end_of(day);
    let (mut total, mut page, mut at) = (0u64, Vec::new(), 0usize);
    loop {
        let notes = fetch(at, SCAN).await?;
        let n = notes.len();
        for note in notes {
            if crate::supersede::valid_from(&note) >= end {
                continue;
            }
            let i = total as usize;
            if i >= offset && i - offset < limit {
                page.push(note);
            }
            total += 1;
        }
        if n < SCAN {
            return Ok((total, page));
        }
        at += n;
    }
}

impl Engine {
    /// A page of notes, newest first, and how many match.
    pub async fn notes_page(
        &self,
        filter: &NoteFilter,
        limit: usize,
        offset: usize,
    ) -> Result<(u64, Vec<Note>), EngineError> {
        Ok(self.store.notes_page(&filter.into(), limit, offset).await?)
    }

    /// [`Engine::notes_page`] as of a day: the notes whose value had taken effect by the
    /// end of it (`valid_from`, [`kasten_core::validity`]), as search leaves out the others;
    /// `None` is today, every note. A note's `valid_from` is read from its text, so the
    /// matching notes are walked a page at a time to count them (one pass, memory bounded
    /// by a page); kept for the rarely used as-of view.
    pub async fn notes_page_as_of(
        &self,
        filter: &NoteFilter,
        limit: usize,
        offset: usize,
        as_of: Option<chrono::NaiveDate>,
    ) -> Result<(u64, Vec<Note>), EngineError> {
        let Some(day) = as_of else {
            return self.notes_page(filter, limit, offset).await;
        };
        let f = &filter.into();
        taken_effect_by(day, limit, offset, |at, n| async move {
            Ok(self.store.notes_page(f, n, at).await?.1)
        })
        .await
    }

    /// Graph nodes in id order after `after`.
    pub async fn graph_nodes(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<GraphNode>, EngineError> {
        Ok(into_all(self.store.graph_nodes(after, limit).await?))
    }

    /// Graph links (proposed and accepted) in id order after `after`.
    pub async fn graph_links(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<GraphLink>, EngineError> {
        Ok(into_all(self.store.graph_links(after, limit).await?))
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
        let mut links: HashMap<String, GraphLink> = HashMap::new();
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
                links.insert(l.id.clone(), l.into());
            }
            frontier = next;
        }
        let keep = |s: &str| NoteId::parse(s).map(|i| seen.contains(&i)).unwrap_or(false);
        let mut links: Vec<GraphLink> = links
            .into_values()
            .filter(|l| keep(&l.from) && keep(&l.to))
            .collect();
        links.sort_by(|a, b| a.id.cmp(&b.id));
        let nodes = into_all(self.store.graph_nodes_of(&order).await?);
        Ok(LocalGraph {
            nodes,
            links,
            truncated,
        })
    }

    /// Enrichment jobs by state.
    pub async fn job_counts(&self) -> Result<JobCounts, EngineError> {
        Ok(self.store.job_counts().await?.into())
    }

    /// The most used tags and their note counts.
    pub async fn tag_counts(&self, limit: usize) -> Result<Vec<(String, u64)>, EngineError> {
        Ok(self.store.tag_counts(limit).await?)
    }

    /// Notes, links and tokens per day since `since`.
    pub async fn daily(&self, since: DateTime<Utc>) -> Result<Daily, EngineError> {
        let (notes, links, tokens) = self.store.daily_counts(since).await?;
        Ok(Daily {
            notes: into_all(notes),
            links: into_all(links),
            tokens: into_all(tokens),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::HashEmbedder;
    use kasten_core::NewNote;
    use kasten_store::{ApplyMode, Endpoint, Enrichment, Fields, LinkWrite, NoteRead};

    async fn engine() -> Result<Engine, EngineError> {
        let ep = Endpoint::parse("mem://").map_err(EngineError::from)?;
        Engine::open(&ep, HashEmbedder::arc("hash", 32, 1), &|_| {}).await
    }

    /// Writes an enrichment the way the pipeline does: tags, and links to `to`.
    async fn enrich(
        e: &Engine,
        note: &NoteId,
        tag: &str,
        to: &[(&NoteId, ApplyMode)],
    ) -> Result<(), EngineError> {
        let until = chrono::Utc::now() + chrono::Duration::minutes(5);
        let Some(job) = e.store.claim_job_for_note("t", note, until).await? else {
            return Err(EngineError::Internal("no job".into()));
        };
        let embedding = e.store.embedding_of(note).await?.unwrap_or_default();
        let en = Enrichment {
            job: job.id,
            note: note.clone(),
            read: e
                .store
                .get_note(note)
                .await?
                .map(|n| NoteRead::of(&n))
                .unwrap_or_default(),
            after: Fields {
                keywords: vec![],
                tags: vec![tag.into()],
                context: String::new(),
            },
            construction_changes: Vec::new(),
            embedding,
            construction_mode: ApplyMode::Apply,
            tier: None,
            embed_model: "hash".into(),
            llm_model: "test".into(),
            prompt_version: "test".into(),
            tokens_in: 10,
            tokens_out: 5,
            tokens_estimated: false,
            llm_calls: 2,
            unknown_handles: 0,
            dropped: 0,
            timings_ms: serde_json::json!({}),
            links: to
                .iter()
                .map(|(id, mode)| LinkWrite {
                    to: (*id).clone(),
                    kind: "relates".into(),
                    reason: "test".into(),
                    confidence: 0.8,
                    mode: *mode,
                })
                .collect(),
            updates: vec![],
        };
        e.store.apply_enrichment(&en).await?;
        Ok(())
    }

    async fn chain(e: &Engine) -> Result<Vec<NoteId>, EngineError> {
        let mut ids = Vec::new();
        for w in ["alpha", "bravo", "charlie", "delta", "echo"] {
            ids.push(e.add(NewNote::new(&format!("note {w}"))?).await?.id);
        }
        // a - b - c - d accepted, d - e proposed
        enrich(e, &ids[1], "x", &[(&ids[0], ApplyMode::Apply)]).await?;
        enrich(e, &ids[2], "x", &[(&ids[1], ApplyMode::Apply)]).await?;
        enrich(e, &ids[3], "y", &[(&ids[2], ApplyMode::Apply)]).await?;
        enrich(e, &ids[4], "y", &[(&ids[3], ApplyMode::Hold)]).await?;
        Ok(ids)
    }

    #[tokio::test]
    async fn notes_page_filters_and_pages() -> Result<(), EngineError> {
        let e = engine().await?;
        let ids = chain(&e).await?;
        let tag_x = NoteFilter {
            tag: Some("x".into()),
            ..Default::default()
        };
        let (n, page) = e.notes_page(&tag_x, 10, 0).await?;
        assert_eq!(n, 2);
        assert!(page.iter().all(|p| p.tags == ["x"]));
        let pending = NoteFilter {
            enrich_state: Some(kasten_core::Enrich::Pending),
            ..Default::default()
        };
        let (n, page) = e.notes_page(&pending, 10, 0).await?;
        assert_eq!((n, page.len()), (1, 1));
        assert_eq!(page[0].id, ids[0]);
        let only = NoteFilter {
            ids: Some(vec![ids[1].clone(), ids[3].clone()]),
            ..Default::default()
        };
        assert_eq!(e.notes_page(&only, 10, 0).await?.0, 2);
        // pages of 2 cover the five notes once each
        let mut seen = Vec::new();
        for off in [0, 2, 4] {
            let (n, p) = e.notes_page(&NoteFilter::default(), 2, off).await?;
            assert_eq!(n, 5);
            seen.extend(p.into_iter().map(|x| x.id));
        }
        seen.sort();
        let mut all = ids.clone();
        all.sort();
        assert_eq!(seen, all);
        e.close().await;
        Ok(())
    }

    #[tokio::test]
    async fn graph_pages_and_neighbourhoods() -> Result<(), EngineError> {
        let e = engine().await?;
        let ids = chain(&e).await?;
        // nodes by cursor, two at a time: all five, once each
        let mut nodes = Vec::new();
        let mut after: Option<NoteId> = None;
        loop {
            let p = e.graph_nodes(after.as_ref(), 2).await?;
            let Some(last) = p.last() else { break };
            after = Some(NoteId::parse(&last.id)?);
            nodes.extend(p.into_iter().map(|n| n.id));
        }
        assert_eq!(nodes.len(), 5);
        // links: three accepted and one proposed
        let mut links = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let p = e.graph_links(after.as_deref(), 1).await?;
            let Some(last) = p.last() else { break };
            after = Some(last.id.clone());
            links.extend(p);
        }
        assert_eq!(links.len(), 4);
        assert_eq!(
            links
                .iter()
                .filter(|l| l.status == kasten_core::LinkStatus::Proposed)
                .count(),
            1
        );

        // depth 1 around b: a, b, c; depth 2: + d; depth 3: + e (over the proposed link)
        let ids_of = |g: &LocalGraph| {
            let mut v: Vec<String> = g.nodes.iter().map(|n| n.id.clone()).collect();
            v.sort();
            v
        };
        let sorted = |v: &[&NoteId]| {
            let mut v: Vec<String> = v.iter().map(|i| i.to_string()).collect();
            v.sort();
            v
        };
        let g1 = e.local_graph(&ids[1], 1, 100).await?;
        assert_eq!(ids_of(&g1), sorted(&[&ids[0], &ids[1], &ids[2]]));
        assert_eq!(g1.links.len(), 2);
        let g2 = e.local_graph(&ids[1], 2, 100).await?;
        assert_eq!(ids_of(&g2), sorted(&[&ids[0], &ids[1], &ids[2], &ids[3]]));
        let g3 = e.local_graph(&ids[1], 3, 100).await?;
        assert_eq!(g3.nodes.len(), 5);
        assert_eq!(g3.links.len(), 4);
        assert!(!g3.truncated);
        // the cap cuts the neighbourhood and says so
        let capped = e.local_graph(&ids[1], 3, 2).await?;
        assert_eq!(capped.nodes.len(), 2);
        assert!(capped.truncated);

        // a rejected link leaves the graph
        let proposed = links
            .iter()
            .find(|l| l.status == kasten_core::LinkStatus::Proposed)
            .map(|l| l.id.clone())
            .unwrap_or_default();
        e.reject(&proposed, "user").await?;
        assert_eq!(e.local_graph(&ids[1], 3, 100).await?.nodes.len(), 4);
        assert_eq!(e.graph_links(None, 100).await?.len(), 3);

        // per-day figures and tags
        let d = e
            .daily(chrono::Utc::now() - chrono::Duration::days(1))
            .await?;
        assert_eq!(d.notes.iter().map(|x| x.n).sum::<i64>(), 5);
        assert_eq!(d.tokens.iter().map(|x| x.tokens).sum::<i64>(), 4 * 15);
        let tags = e.tag_counts(10).await?;
        assert_eq!(tags, vec![("x".to_owned(), 2), ("y".to_owned(), 2)]);
        e.close().await;
        Ok(())
    }
}
