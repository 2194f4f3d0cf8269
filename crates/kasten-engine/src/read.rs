//! The engine's own read models and inputs for what the shells show: the graph, counts
//! per day, token usage, pipeline events, annotations and their changes, job counts,
//! backup progress and files, links an import writes. Each is converted from the store's
//! row at the engine's boundary, so no shell names a store type (the shells do not
//! depend on kasten-store). Serialized shapes are the store rows' own, field for field
//! (the CLI's `--json` and the share wire carry them).

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use kasten_core::{Enrich, LinkStatus, NoteId};
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// One node of the graph: just what drawing and colouring it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphNode {
    pub id: String,
    pub content: String,
    pub tags: Vec<String>,
    pub enrich_state: Enrich,
}

impl From<kasten_store::views::GraphNodeRow> for GraphNode {
    fn from(r: kasten_store::views::GraphNodeRow) -> Self {
        Self {
            id: r.id,
            content: r.content,
            tags: r.tags,
            enrich_state: r.enrich_state,
        }
    }
}

/// One edge of the graph (links whose status is proposed or accepted).
#[derive(Debug, Clone, PartialEq)]
pub struct GraphLink {
    pub id: String,
    pub from: String,
    pub to: String,
    pub kind: kasten_core::LinkKind,
    pub status: LinkStatus,
    pub confidence: f64,
}

impl From<kasten_store::views::GraphLinkRow> for GraphLink {
    fn from(r: kasten_store::views::GraphLinkRow) -> Self {
        Self {
            id: r.id,
            from: r.from,
            to: r.to,
            kind: r.kind,
            status: r.status,
            confidence: r.confidence,
        }
    }
}

/// A count (and token sum, where it applies) for one day (`YYYY-MM-DD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayCount {
    pub day: String,
    pub n: i64,
    pub tokens: i64,
}

impl From<kasten_store::views::DayCount> for DayCount {
    fn from(r: kasten_store::views::DayCount) -> Self {
        Self {
            day: r.day,
            n: r.n,
            tokens: r.tokens,
        }
    }
}

/// Filters for a page of notes; `None` means any.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoteFilter {
    pub tag: Option<String>,
    pub enrich_state: Option<Enrich>,
    /// Only these notes (a Box's members).
    pub ids: Option<Vec<NoteId>>,
}

impl From<&NoteFilter> for kasten_store::views::NoteFilter {
    fn from(f: &NoteFilter) -> Self {
        Self {
            tag: f.tag.clone(),
            enrich_state: f.enrich_state,
            ids: f.ids.clone(),
        }
    }
}

/// Enrichment jobs by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobCounts {
    pub queued: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
}

impl From<kasten_store::JobCounts> for JobCounts {
    fn from(c: kasten_store::JobCounts) -> Self {
        Self {
            queued: c.queued,
            running: c.running,
            done: c.done,
            failed: c.failed,
        }
    }
}

/// LLM tokens of one model (`kasten usage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelUsage {
    pub model: Option<String>,
    pub notes: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
}

impl From<kasten_store::ModelUsage> for ModelUsage {
    fn from(u: kasten_store::ModelUsage) -> Self {
        Self {
            model: u.model,
            notes: u.notes,
            tokens_in: u.tokens_in,
            tokens_out: u.tokens_out,
        }
    }
}

/// A pipeline event (one per enriched note), as `kasten events` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventSummary {
    pub id: String,
    pub note: String,
    pub kind: String,
    pub model: Option<String>,
    pub prompt_version: Option<String>,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub tokens_estimated: bool,
    pub llm_calls: i64,
    pub unknown_handles: i64,
    pub dropped: i64,
    pub links: i64,
    pub revisions: i64,
    pub created_at: DateTime<Utc>,
    /// Milliseconds per stage (see [`EventSummary::timings_ms`]).
    #[serde(skip)]
    timings: serde_json::Value,
}

impl EventSummary {
    /// Milliseconds per stage (`construct`, `embed`, `link_evolve`, `total`); `{}` for
    /// events that recorded none.
    pub fn timings_ms(&self) -> serde_json::Value {
        self.timings.clone()
    }
}

impl From<kasten_store::EventSummary> for EventSummary {
    fn from(e: kasten_store::EventSummary) -> Self {
        let timings = e.timings_ms();
        Self {
            id: e.id,
            note: e.note,
            kind: e.kind,
            model: e.model,
            prompt_version: e.prompt_version,
            tokens_in: e.tokens_in,
            tokens_out: e.tokens_out,
            tokens_estimated: e.tokens_estimated,
            llm_calls: e.llm_calls,
            unknown_handles: e.unknown_handles,
            dropped: e.dropped,
            links: e.links,
            revisions: e.revisions,
            created_at: e.created_at,
            timings,
        }
    }
}

/// A note's annotations: what enrichment and review change.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Fields {
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
}

impl From<kasten_store::Fields> for Fields {
    fn from(f: kasten_store::Fields) -> Self {
        Self {
            keywords: f.keywords,
            tags: f.tags,
            context: f.context,
        }
    }
}

/// One change of a revision with its own reason: an evolution operation (`add_tag`,
/// `remove_tag`, `add_keyword`, `remove_keyword`, `set_context`) and what it named.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Change {
    pub op: String,
    pub value: String,
    pub reason: String,
}

impl From<kasten_store::Change> for Change {
    fn from(c: kasten_store::Change) -> Self {
        Self {
            op: c.op,
            value: c.value,
            reason: c.reason,
        }
    }
}

/// Store changes as the engine reports them.
pub(crate) fn changes(c: Vec<kasten_store::Change>) -> Vec<Change> {
    c.into_iter().map(Change::from).collect()
}

/// How far a backup or restore is: rows of `table` done out of `total`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProgress {
    pub table: String,
    pub done: u64,
    pub total: u64,
}

impl From<&kasten_store::TableProgress> for TableProgress {
    fn from(p: &kasten_store::TableProgress) -> Self {
        Self {
            table: p.table.clone(),
            done: p.done,
            total: p.total,
        }
    }
}

/// A progress sink for backups and restores.
pub type TableProgressFn<'a> = &'a (dyn Fn(&TableProgress) + Send + Sync);

/// A backup file that was read whole and found sound ([`BackupFile::scan`]).
#[derive(Debug, Clone)]
pub struct BackupFile(pub(crate) kasten_store::BackupFile);

impl BackupFile {
    /// Reads the whole file once, writing nothing: the header must be a Kasten backup's
    /// this build can restore, and every row must convert to the value a restore writes.
    /// Memory stays at one row.
    pub fn scan(path: &Path) -> Result<BackupFile, EngineError> {
        Ok(Self(kasten_store::BackupFile::scan(path)?))
    }

    /// The schema version the backup was written with.
    pub fn schema_version(&self) -> u32 {
        self.0.schema_version
    }
}

/// Rows restored per table, and the schema version the backup was written with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestoreSummary {
    pub tables: BTreeMap<String, u64>,
    pub schema_version: u32,
}

impl From<kasten_store::RestoreSummary> for RestoreSummary {
    fn from(s: kasten_store::RestoreSummary) -> Self {
        Self {
            tables: s.tables,
            schema_version: s.schema_version,
        }
    }
}

/// A link written as an import writes it ([`crate::Engine::insert_links`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedLink {
    pub from: NoteId,
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    pub status: LinkStatus,
    pub created_at: DateTime<Utc>,
}

impl From<ImportedLink> for kasten_store::ImportLinkWrite {
    fn from(l: ImportedLink) -> Self {
        Self {
            from: l.from,
            to: l.to,
            kind: l.kind,
            reason: l.reason,
            confidence: l.confidence,
            status: l.status,
            created_at: l.created_at,
        }
    }
}

/// A project and whether it is still active (`kasten project`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectState {
    pub name: String,
    pub active: bool,
    pub changed_at: DateTime<Utc>,
}

impl From<kasten_store::ProjectState> for ProjectState {
    fn from(p: kasten_store::ProjectState) -> Self {
        Self {
            name: p.name,
            active: p.active,
            changed_at: p.changed_at,
        }
    }
}

/// An accepted supersession of a note: the newer note (`by`) and since when (the newer
/// note's time, when its value took effect).
#[derive(Debug, Clone, PartialEq)]
pub struct Successor {
    pub note: NoteId,
    pub by: NoteId,
    pub since: DateTime<Utc>,
    pub reason: String,
}

impl From<kasten_store::Successor> for Successor {
    fn from(s: kasten_store::Successor) -> Self {
        Self {
            note: s.note,
            by: s.by,
            since: s.since,
            reason: s.reason,
        }
    }
}
