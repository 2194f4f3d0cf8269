//! Typed events from the shell to the UI (tauri-specta): job outcomes as the enrichment
//! worker reports them, and the status bar's figures.

use kasten_engine::JobOutcome;
use serde::{Deserialize, Serialize};
use specta::Type;
use tauri_specta::Event;

/// One enrichment job finished an attempt.
#[derive(Debug, Clone, Serialize, Deserialize, Type, Event)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum JobEvent {
    /// The note was enriched: annotations, `links` links and `updates` neighbour edits
    /// (applied or proposed, per the review policy).
    Done {
        note: String,
        links: u32,
        updates: u32,
        tokens: u32,
    },
    /// The attempt failed and the job will run again.
    Retrying { note: String, error: String },
    /// The job gave up after its attempts.
    Failed { note: String, error: String },
    /// The note was deleted before its job ran.
    Gone { note: String },
}

impl From<&JobOutcome> for JobEvent {
    fn from(o: &JobOutcome) -> Self {
        let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        match o {
            JobOutcome::Done {
                note,
                links,
                updates,
                tokens,
            } => JobEvent::Done {
                note: note.to_string(),
                links: n(*links),
                updates: n(*updates),
                tokens: u32::try_from(*tokens).unwrap_or(u32::MAX),
            },
            JobOutcome::Retrying { note, error } => JobEvent::Retrying {
                note: note.to_string(),
                error: error.clone(),
            },
            JobOutcome::Failed { note, error } => JobEvent::Failed {
                note: note.to_string(),
                error: error.clone(),
            },
            JobOutcome::Gone { note } => JobEvent::Gone {
                note: note.to_string(),
            },
        }
    }
}

/// Where the app's memory stands.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, Type, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MemoryState {
    /// Being opened (or connected to).
    #[default]
    Opening,
    Ready,
    /// Could not be opened, or the app is shutting down.
    Failed,
}

/// The status bar's figures; sent whenever they change.
#[derive(Debug, Clone, Serialize, Deserialize, Type, Event, PartialEq)]
pub struct StatusEvent {
    pub memory: MemoryState,
    /// Why the memory could not be opened, or how far opening got.
    pub memory_message: String,
    pub notes: u32,
    pub llm_configured: bool,
    /// The LLM in use in words ("built-in Qwen2.5-Coder-0.5B", "Ollama qwen2.5:7b"), or why
    /// there is none.
    pub llm_label: String,
    /// `null` until the first call; then whether the last call worked.
    pub llm_ok: Option<bool>,
    pub llm_message: String,
    pub jobs_queued: u32,
    pub jobs_running: u32,
    pub jobs_failed: u32,
    pub jobs_done: u32,
    pub enriching: bool,
    /// Milliseconds from process start to the memory being open.
    pub opened_ms: Option<u32>,
    /// Other Kasten processes (agents over `kasten mcp`, `kasten` commands) connected to
    /// this app's memory now.
    pub clients: u32,
    /// While the memory opens: notes read into the search indexes so far, of
    /// `opening_total` (both 0 until the count is known), for the UI to say in its language.
    pub opening_done: u32,
    pub opening_total: u32,
    /// The idle pass is comparing notes for facts that replaced others: `consolidate_done`
    /// of `consolidate_total` notes.
    pub consolidating: bool,
    pub consolidate_done: u32,
    pub consolidate_total: u32,
    /// Supersessions the idle pass filed in Review since the app started (a change tells
    /// the UI to read Review again).
    pub consolidate_proposed: u32,
}
