//! The app's state: the engine (opened in the background so the window appears at once),
//! the LLM connection as last seen, and the enrichment worker's signals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kasten_engine::Engine;
use tokio::sync::{Notify, RwLock};

use crate::error::{AppError, AppResult};

pub enum Slot {
    Opening { done: u64, total: u64 },
    Ready(Arc<Engine>),
    Failed(String),
    Closed,
}

/// What the app last learnt about the LLM server.
#[derive(Debug, Clone, Default)]
pub struct LlmSeen {
    pub ok: Option<bool>,
    pub message: String,
}

pub struct AppState {
    pub slot: RwLock<Slot>,
    /// Wakes the enrichment worker (a note was added, settings changed, a retry asked).
    pub kick: Notify,
    /// Settings changed: the worker rebuilds the LLM client before its next pass.
    pub reconfigure: AtomicBool,
    /// The worker is inside a `run_pending` pass.
    pub enriching: AtomicBool,
    pub stop: AtomicBool,
    pub llm: Mutex<LlmSeen>,
    /// Milliseconds from process start until the memory was open.
    pub opened_ms: Mutex<Option<u64>>,
    pub started: std::time::Instant,
    /// The memory served to the user's other Kasten processes (`kasten mcp`, `kasten
    /// add`, …) while the app has it open.
    pub owner: tokio::sync::Mutex<Option<kasten_share::Owner>>,
}

impl AppState {
    pub fn new(started: std::time::Instant) -> Self {
        AppState {
            slot: RwLock::new(Slot::Opening { done: 0, total: 0 }),
            kick: Notify::new(),
            reconfigure: AtomicBool::new(false),
            enriching: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            llm: Mutex::new(LlmSeen::default()),
            opened_ms: Mutex::new(None),
            started,
            owner: tokio::sync::Mutex::new(None),
        }
    }

    /// The open engine, or why there is none.
    pub async fn engine(&self) -> AppResult<Arc<Engine>> {
        match &*self.slot.read().await {
            Slot::Ready(e) => Ok(Arc::clone(e)),
            Slot::Opening { done, total } => Err(AppError::NotReady(if *total > 0 {
                format!("the memory is still opening ({done} of {total} notes read)")
            } else {
                "the memory is still opening".into()
            })),
            Slot::Failed(m) => Err(AppError::Unavailable(m.clone())),
            Slot::Closed => Err(AppError::Unavailable("Kasten is shutting down".into())),
        }
    }

    pub fn set_llm(&self, ok: Option<bool>, message: impl Into<String>) {
        if let Ok(mut l) = self.llm.lock() {
            *l = LlmSeen {
                ok,
                message: message.into(),
            };
        }
    }

    pub fn llm_seen(&self) -> LlmSeen {
        self.llm.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn is_enriching(&self) -> bool {
        self.enriching.load(Ordering::SeqCst)
    }
}
