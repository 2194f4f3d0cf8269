//! The status bar's figures: what the memory and the LLM are doing, read from the app's
//! state (pushed as `StatusEvent`, and answered by the `app_status` command).

use crate::dto::clamp_u32;
use crate::events::{MemoryState, StatusEvent};
use crate::state::{AppState, Slot};

/// What the status bar shows now: the memory's state (opening with its progress, ready,
/// failed), the LLM in use and whether it answered, the enrichment jobs, the clients.
pub async fn status_of(state: &AppState) -> StatusEvent {
    let seen = state.llm_seen();
    let opened_ms = state.opened_ms.lock().ok().and_then(|o| *o).map(clamp_u32);
    let mut s = StatusEvent {
        memory: MemoryState::Opening,
        memory_message: String::new(),
        notes: 0,
        llm_configured: false,
        llm_label: String::new(),
        llm_ok: seen.ok,
        llm_message: seen.message,
        jobs_queued: 0,
        jobs_running: 0,
        jobs_failed: 0,
        jobs_done: 0,
        enriching: state.is_enriching(),
        opened_ms,
        clients: state
            .owner
            .try_lock()
            .ok()
            .and_then(|o| o.as_ref().map(|o| clamp_u32(o.clients() as u64)))
            .unwrap_or(0),
        opening_done: 0,
        opening_total: 0,
        consolidating: false,
        consolidate_done: 0,
        consolidate_total: 0,
        consolidate_proposed: 0,
    };
    if let Ok(c) = state.consolidation.lock() {
        s.consolidating = c.running;
        s.consolidate_done = clamp_u32(c.done);
        s.consolidate_total = clamp_u32(c.total);
        s.consolidate_proposed = clamp_u32(c.proposed);
    }
    let engine = match &*state.slot.read().await {
        Slot::Ready(e) => std::sync::Arc::clone(e),
        Slot::Opening { done, total } => {
            if *total > 0 {
                s.memory_message = format!("reading notes: {done} of {total}");
            }
            s.opening_done = clamp_u32(*done);
            s.opening_total = clamp_u32(*total);
            return s;
        }
        Slot::Failed(m) => {
            s.memory = MemoryState::Failed;
            s.memory_message = m.clone();
            return s;
        }
        Slot::Closed => {
            s.memory = MemoryState::Failed;
            s.memory_message = "Kasten is shutting down".into();
            return s;
        }
    };
    s.memory = MemoryState::Ready;
    s.llm_configured = engine.llm_client().is_some();
    s.llm_label = engine.llm_label().to_owned();
    if !s.llm_configured {
        s.llm_ok = None;
        s.llm_message = engine.llm_missing_reason();
        s.llm_label = "no LLM".into();
    }
    s.notes = engine.count().await.map(clamp_u32).unwrap_or(0);
    if let Ok(c) = engine.job_counts().await {
        s.jobs_queued = clamp_u32(c.queued);
        s.jobs_running = clamp_u32(c.running);
        s.jobs_failed = clamp_u32(c.failed);
        s.jobs_done = clamp_u32(c.done);
    }
    s
}
