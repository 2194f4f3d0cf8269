//! Read-only, paged views for the desktop app: graph nodes and links a page at a time,
//! filtered note pages, the links around a set of notes, and per-day counts for the
//! insights charts. Nothing here writes.

use chrono::{DateTime, Utc};
use kasten_core::{Enrich, Note, NoteId};
use surrealdb::types::SurrealValue;

use crate::{NOTE_COLUMNS, NoteRow, Store, StoreError};

/// One node of the graph: just what drawing and colouring it needs.
#[derive(Debug, Clone)]
pub struct GraphNodeRow {
    pub id: String,
    pub content: String,
    pub tags: Vec<String>,
    pub enrich_state: Enrich,
}

/// A [`GraphNodeRow`] as read, its enrichment state still a word.
#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct GraphNodeWords {
    id: String,
    content: String,
    tags: Vec<String>,
    enrich_state: String,
}

/// The typed nodes of rows read; an unknown enrichment state is a damaged record.
fn graph_nodes(rows: Vec<GraphNodeWords>) -> Result<Vec<GraphNodeRow>, StoreError> {
    rows.into_iter()
        .map(|r| {
            Ok(GraphNodeRow {
                enrich_state: Enrich::parse(&r.enrich_state)
                    .map_err(|e| StoreError::Corrupt(format!("note {}: {e}", r.id)))?,
                id: r.id,
                content: r.content,
                tags: r.tags,
            })
        })
        .collect()
}

/// One edge of the graph (links whose status is proposed or accepted).
#[derive(Debug, Clone)]
pub struct GraphLinkRow {
    pub id: String,
    pub from: String,
    pub to: String,
    pub kind: kasten_core::LinkKind,
    pub status: kasten_core::LinkStatus,
    pub confidence: f64,
}

/// The stored words of a link the graph shows: held for review or in force.
fn live() -> Vec<String> {
    kasten_core::LinkStatus::ALL
        .iter()
        .filter(|s| s.is_live())
        .map(ToString::to_string)
        .collect()
}

/// A [`GraphLinkRow`] as read ([`LINK_COLUMNS`]).
#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct GraphLinkRaw {
    id: String,
    from: String,
    to: String,
    kind: String,
    status: String,
    confidence: f64,
}

/// The typed edges of rows read with [`LINK_COLUMNS`].
fn graph_links(rows: Vec<GraphLinkRaw>) -> Result<Vec<GraphLinkRow>, StoreError> {
    rows.into_iter()
        .map(|r| {
            Ok(GraphLinkRow {
                status: crate::link_status(&r.id, &r.status)?,
                kind: kasten_core::LinkKind::parse(&r.kind),
                id: r.id,
                from: r.from,
                to: r.to,
                confidence: r.confidence,
            })
        })
        .collect()
}

/// A count (and token sum, where it applies) for one day.
#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub struct DayCount {
    pub day: String,
    pub n: i64,
    pub tokens: i64,
}

/// Filters for a page of notes; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct NoteFilter {
    pub tag: Option<String>,
    pub enrich_state: Option<Enrich>,
    /// Only these notes (a Box's members).
    pub ids: Option<Vec<NoteId>>,
}

const LINK_COLUMNS: &str = "record::id(id) AS id, record::id(in) AS from, record::id(out) AS to, \
     kind, status, confidence";

impl Store {
    /// Graph nodes in id order, `limit` after `after` (exclusive): the whole memory is read a
    /// page at a time, never as one result.
    pub async fn graph_nodes(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<GraphNodeRow>, StoreError> {
        let filter = if after.is_some() {
            "WHERE id > type::record('note', $after)"
        } else {
            ""
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT record::id(id) AS id, content, tags, enrich_state FROM note {filter} \
                 ORDER BY id LIMIT $limit"
            ))
            .bind(("after", after.map(|a| a.to_string()).unwrap_or_default()))
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        graph_nodes(resp.take(0).map_err(StoreError::from_db)?)
    }

    /// Proposed and accepted links in id order, `limit` after the link id `after`.
    pub async fn graph_links(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<GraphLinkRow>, StoreError> {
        let filter = if after.is_some() {
            "AND id > type::record('link', $after)"
        } else {
            ""
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT {LINK_COLUMNS} FROM link WHERE status IN $live {filter} \
                 ORDER BY id LIMIT $limit"
            ))
            .bind(("after", after.unwrap_or_default().to_owned()))
            .bind(("live", live()))
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        graph_links(resp.take(0).map_err(StoreError::from_db)?)
    }

    /// Proposed and accepted links touching any of `ids` (one hop of a local graph).
    pub async fn links_touching(&self, ids: &[NoteId]) -> Result<Vec<GraphLinkRow>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(format!(
                "LET $rs = array::map($ids, |$k| type::record('note', $k));
                 SELECT {LINK_COLUMNS} FROM link
                 WHERE status IN $live AND (in IN $rs OR out IN $rs)"
            ))
            .bind(("ids", keys))
            .bind(("live", live()))
            .await
            .map_err(StoreError::from_db)?;
        graph_links(resp.take(1).map_err(StoreError::from_db)?)
    }

    /// Graph nodes for these ids (those that exist).
    pub async fn graph_nodes_of(&self, ids: &[NoteId]) -> Result<Vec<GraphNodeRow>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(
                "SELECT record::id(id) AS id, content, tags, enrich_state \
                 FROM array::map($ids, |$k| type::record('note', $k)) WHERE content != NONE",
            )
            .bind(("ids", keys))
            .await
            .map_err(StoreError::from_db)?;
        graph_nodes(resp.take(0).map_err(StoreError::from_db)?)
    }

    /// A page of notes, newest first, with the total that match the filter.
    pub async fn notes_page(
        &self,
        filter: &NoteFilter,
        limit: usize,
        offset: usize,
    ) -> Result<(u64, Vec<Note>), StoreError> {
        let mut conds = vec!["true".to_owned()];
        if filter.tag.is_some() {
            conds.push("$tag IN tags".into());
        }
        if filter.enrich_state.is_some() {
            conds.push("enrich_state = $state".into());
        }
        if filter.ids.is_some() {
            conds.push("id IN array::map($ids, |$k| type::record('note', $k))".into());
        }
        let wh = conds.join(" AND ");
        let mut resp = self
            .db
            .query(format!(
                "SELECT count() AS n FROM note WHERE {wh} GROUP ALL;
                 SELECT {NOTE_COLUMNS} FROM note WHERE {wh} ORDER BY created_at DESC LIMIT $limit START $start"
            ))
            .bind(("tag", filter.tag.clone().unwrap_or_default()))
            .bind((
                "state",
                filter
                    .enrich_state
                    .map(|e| e.as_str().to_owned())
                    .unwrap_or_default(),
            ))
            .bind((
                "ids",
                filter
                    .ids
                    .as_ref()
                    .map(|v| v.iter().map(|i| i.to_string()).collect::<Vec<_>>())
                    .unwrap_or_default(),
            ))
            .bind(("limit", limit as i64))
            .bind(("start", offset as i64))
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        let rows: Vec<NoteRow> = resp.take(1).map_err(StoreError::from_db)?;
        let notes = rows
            .into_iter()
            .map(NoteRow::into_note)
            .collect::<Result<_, _>>()?;
        Ok((n.unwrap_or(0).max(0) as u64, notes))
    }

    /// The most used tags with how many notes carry each.
    pub async fn tag_counts(&self, limit: usize) -> Result<Vec<(String, u64)>, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            tag: String,
            n: i64,
        }
        let mut resp = self
            .db
            .query(
                "SELECT tag, count() AS n FROM (SELECT VALUE tags FROM note).flatten().map(|$t| { tag: $t }) \
                 GROUP BY tag ORDER BY n DESC LIMIT $limit",
            )
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Row> = resp.take(0).map_err(StoreError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|r| (r.tag, r.n.max(0) as u64))
            .collect())
    }

    /// Notes, links and LLM tokens per day since `since`, oldest first.
    pub async fn daily_counts(
        &self,
        since: DateTime<Utc>,
    ) -> Result<(Vec<DayCount>, Vec<DayCount>, Vec<DayCount>), StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT day, count() AS n, math::sum(t) AS tokens FROM (SELECT time::format(created_at, '%Y-%m-%d') AS day, 0 AS t FROM note WHERE created_at >= $since) GROUP BY day ORDER BY day;
                 SELECT day, count() AS n, math::sum(t) AS tokens FROM (SELECT time::format(created_at, '%Y-%m-%d') AS day, 0 AS t FROM link WHERE created_at >= $since) GROUP BY day ORDER BY day;
                 SELECT day, count() AS n, math::sum(t) AS tokens FROM (SELECT time::format(created_at, '%Y-%m-%d') AS day, tokens_in + tokens_out AS t FROM event WHERE created_at >= $since) GROUP BY day ORDER BY day;",
            )
            .bind(("since", since))
            .await
            .map_err(StoreError::from_db)?;
        first_ok(&mut resp)?;
        let notes: Vec<DayCount> = resp.take(0).map_err(StoreError::from_db)?;
        let links: Vec<DayCount> = resp.take(1).map_err(StoreError::from_db)?;
        let tokens: Vec<DayCount> = resp.take(2).map_err(StoreError::from_db)?;
        Ok((notes, links, tokens))
    }
}

fn first_ok(resp: &mut surrealdb::IndexedResults) -> Result<(), StoreError> {
    crate::first_real_error(resp)
}
