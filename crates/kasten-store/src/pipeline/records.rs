//! The records of the queue and of an enrichment: a claimed job, the fields and changes
//! a run writes, its links and neighbour updates, and the summaries read back.

use chrono::{DateTime, Utc};
use kasten_core::{JobId, NoteId};
use surrealdb::types::{Bytes, SurrealValue};

/// A job a worker now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    pub id: JobId,
    pub note: NoteId,
    /// Including this one.
    pub attempts: u32,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(super) struct ClaimRow {
    pub(super) id: String,
    pub(super) note: String,
    pub(super) attempts: i64,
}

/// Annotations of a note (the fields the LLM may write).
#[derive(
    Debug, Clone, PartialEq, Eq, Default, SurrealValue, serde::Serialize, serde::Deserialize,
)]
#[surreal(crate = "surrealdb::types")]
pub struct Fields {
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
}

/// One change of a revision with its own reason: an evolution operation (`add_tag`,
/// `remove_tag`, `add_keyword`, `remove_keyword`, `set_context`) and what it named.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, SurrealValue, serde::Serialize, serde::Deserialize,
)]
#[surreal(crate = "surrealdb::types")]
pub struct Change {
    pub op: String,
    pub value: String,
    pub reason: String,
}

/// Whether an LLM proposal is in force or waits for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// Applied at once, still listed for review.
    Apply,
    /// Recorded as a proposal; nothing changes until accepted.
    Hold,
}

#[derive(Debug, Clone)]
pub struct LinkWrite {
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    pub mode: ApplyMode,
}

#[derive(Debug, Clone)]
pub struct NeighbourWrite {
    pub id: NoteId,
    /// The version the pipeline read; the apply is refused if it changed since.
    pub version: u64,
    pub before: Fields,
    pub after: Fields,
    pub embedding_before: Option<Vec<f32>>,
    pub embedding_after: Vec<f32>,
    pub mode: ApplyMode,
    /// The operations that make `after` from `before`, each with its reason.
    pub changes: Vec<Change>,
}

/// The parts of a note an enrichment was made from (see [`Enrichment::read`]).
#[derive(Debug, Clone, Default)]
pub struct NoteRead {
    pub content: String,
    pub status: kasten_core::NoteStatus,
    pub set_by: Vec<kasten_core::provenance::Origin>,
}

impl NoteRead {
    pub fn of(n: &kasten_core::Note) -> Self {
        Self {
            content: n.content.clone(),
            status: n.status,
            set_by: n.set_by.clone(),
        }
    }
}

/// What one pipeline run produced for one note.
#[derive(Debug, Clone)]
pub struct Enrichment {
    pub job: JobId,
    pub note: NoteId,
    /// What the job read of the note: the apply is refused with [`StoreError::Conflict`]
    /// if the note's text, status or a person's annotations changed since, and the job
    /// runs again on what the note is now. (Another job's evolution of the note's LLM
    /// annotations is no reason: construction replaces those anyway.)
    pub read: NoteRead,
    /// The construction's annotations; what they replace (and the embedding before) is
    /// read inside the apply transaction, so the revision is exact even if another job
    /// evolved the note meanwhile.
    pub after: Fields,
    /// Changes the link step made to the construction's tags (A-Mem's `tags_to_update`),
    /// each with its reason; already part of `after`.
    pub construction_changes: Vec<Change>,
    pub embedding: Vec<f32>,
    /// Whether construction is applied at once or held for review.
    pub construction_mode: ApplyMode,
    /// The tier construction proposed (`long_term`/`short_term`); applied with the
    /// construction, never over a tier the user chose.
    pub tier: Option<String>,
    pub embed_model: String,
    pub llm_model: String,
    pub prompt_version: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_estimated: bool,
    pub llm_calls: u32,
    pub unknown_handles: u32,
    pub dropped: u32,
    pub timings_ms: serde_json::Value,
    pub links: Vec<LinkWrite>,
    pub updates: Vec<NeighbourWrite>,
}

#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(super) struct LinkParam {
    pub(super) to: String,
    pub(super) kind: String,
    pub(super) reason: String,
    pub(super) confidence: f64,
    pub(super) status: String,
}

#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(super) struct ReadParam {
    pub(super) content: String,
    pub(super) status: String,
    pub(super) set_by: Vec<crate::OriginRow>,
}

#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(super) struct UpdateParam {
    pub(super) id: String,
    pub(super) version: i64,
    pub(super) apply: bool,
    pub(super) before: Fields,
    pub(super) after: Fields,
    pub(super) embedding_before: Option<Bytes>,
    pub(super) embedding_after: Bytes,
    pub(super) changes: Vec<Change>,
}

#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(super) struct EventParam {
    pub(super) model: String,
    pub(super) prompt_version: String,
    pub(super) tokens_in: i64,
    pub(super) tokens_out: i64,
    pub(super) tokens_estimated: bool,
    pub(super) llm_calls: i64,
    pub(super) unknown_handles: i64,
    pub(super) dropped: i64,
    pub(super) timings: String,
}

/// An event as listed by `kasten events`.
#[derive(Debug, Clone, SurrealValue, serde::Serialize)]
#[surreal(crate = "surrealdb::types")]
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
    /// The stage timings as stored (a JSON object of milliseconds, see `timings_ms`).
    #[serde(skip)]
    pub timings: Option<String>,
}

impl EventSummary {
    /// Milliseconds per stage (`construct`, `embed`, `link_evolve`, `total`); `{}` for
    /// events that recorded none.
    pub fn timings_ms(&self) -> serde_json::Value {
        self.timings
            .as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .filter(serde_json::Value::is_object)
            .unwrap_or_else(|| serde_json::json!({}))
    }
}

/// Token totals per model (for `kasten usage`).
#[derive(Debug, Clone, SurrealValue, serde::Serialize)]
#[surreal(crate = "surrealdb::types")]
pub struct ModelUsage {
    pub model: Option<String>,
    pub notes: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
}

/// A revision as listed in a history.
#[derive(Debug, Clone, SurrealValue, serde::Serialize)]
#[surreal(crate = "surrealdb::types")]
pub struct RevisionSummary {
    pub id: String,
    pub note: String,
    pub event: Option<String>,
    pub actor: String,
    pub reason: String,
    pub status: String,
    pub before: serde_json::Value,
    pub after: serde_json::Value,
    pub created_at: DateTime<Utc>,
    /// Each change with its own reason (see [`Change`]).
    pub changes: Vec<Change>,
}

/// Counts of jobs by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct JobCounts {
    pub queued: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
}
