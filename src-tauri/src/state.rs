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
    /// Woken once the memory is open (or failed to open).
    pub opened: Notify,
    pub llm: Mutex<LlmSeen>,
    /// Milliseconds from process start until the memory was open.
    pub opened_ms: Mutex<Option<u64>>,
    pub started: std::time::Instant,
    /// The memory served to the user's other Kasten processes (`kasten mcp`, `kasten
    /// add`, …) while the app has it open.
    pub owner: tokio::sync::Mutex<Option<kasten_share::Owner>>,
    /// Held while a backup is restored over the memory (one restore at a time).
    pub restoring: tokio::sync::Mutex<()>,
    /// Where the idle consolidation pass stands ([`crate::consolidate`]).
    pub consolidation: Mutex<Consolidation>,
}

/// The idle consolidation pass, as the status bar shows it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consolidation {
    pub running: bool,
    /// Notes compared so far of `total`.
    pub done: u64,
    pub total: u64,
    /// Supersessions filed as proposals since the app started.
    pub proposed: u64,
}

impl AppState {
    pub fn new(started: std::time::Instant) -> Self {
        AppState {
            slot: RwLock::new(Slot::Opening { done: 0, total: 0 }),
            kick: Notify::new(),
            reconfigure: AtomicBool::new(false),
            enriching: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            opened: Notify::new(),
            llm: Mutex::new(LlmSeen::default()),
            opened_ms: Mutex::new(None),
            started,
            owner: tokio::sync::Mutex::new(None),
            consolidation: Mutex::new(Consolidation::default()),
            restoring: tokio::sync::Mutex::new(()),
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

    /// The open engine, waiting while the memory is still opening: a note saved right
    /// after launch is written once the memory is open instead of being refused.
    pub async fn engine_when_open(&self) -> AppResult<Arc<Engine>> {
        loop {
            let opened = self.opened.notified();
            tokio::pin!(opened);
            // registered before the slot is read, so an open finishing in between wakes it
            opened.as_mut().enable();
            if !matches!(&*self.slot.read().await, Slot::Opening { .. }) {
                return self.engine().await;
            }
            opened.await;
        }
    }

    /// The memory is open (or failed to open): wakes everything waiting for it.
    pub async fn set_opened(&self, slot: Slot) {
        *self.slot.write().await = slot;
        self.opened.notify_waiters();
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

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::panic)] // test code fails loudly

    use std::time::{Duration, Instant};

    use kasten_embed::{EmbedError, Embedder};
    use kasten_engine::Endpoint;

    use super::*;

    /// Words hashed into a few dimensions: enough for an engine that only stores.
    pub(crate) struct Words;
    impl Embedder for Words {
        fn model_id(&self) -> &str {
            "test-words"
        }
        fn dim(&self) -> usize {
            8
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.1f32; 8];
                    for w in t.split_whitespace() {
                        v[w.len() % 8] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_note_saved_while_the_memory_opens_is_written_once_it_is_open() {
        let state = Arc::new(AppState::new(Instant::now()));
        let saving = {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                crate::commands::add_note_to(&state, "saved right after launch".into()).await
            })
        };
        // the memory takes a while to open
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !saving.is_finished(),
            "the save did not wait for the memory"
        );
        let engine = Engine::open(&Endpoint::Mem, Arc::new(Words), &|_| {})
            .await
            .unwrap_or_else(|e| panic!("open: {e}"));
        state.set_opened(Slot::Ready(Arc::new(engine))).await;
        let saved = tokio::time::timeout(Duration::from_secs(10), saving)
            .await
            .unwrap_or_else(|_| panic!("the save never finished"))
            .unwrap_or_else(|e| panic!("join: {e}"))
            .unwrap_or_else(|e| panic!("the save was refused: {e}"));
        assert_eq!(saved.content, "saved right after launch");
        let engine = state.engine().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(engine.count().await.unwrap_or(0), 1);
    }

    /// The status says how far the open got in numbers (the UI words them in its
    /// language), and claims no LLM either way before the memory that chooses it is open.
    #[tokio::test]
    async fn the_status_while_opening_says_how_far_in_numbers() {
        let state = AppState::new(Instant::now());
        *state.slot.write().await = Slot::Opening {
            done: 10,
            total: 100,
        };
        let s = crate::status::status_of(&state).await;
        assert_eq!(s.memory, crate::events::MemoryState::Opening);
        assert_eq!((s.opening_done, s.opening_total), (10, 100));
        assert!(!s.llm_configured);
        assert_eq!(s.llm_label, "");
        let engine = Engine::open(&Endpoint::Mem, Arc::new(Words), &|_| {})
            .await
            .unwrap_or_else(|e| panic!("open: {e}"));
        state.set_opened(Slot::Ready(Arc::new(engine))).await;
        let s = crate::status::status_of(&state).await;
        assert_eq!(s.memory, crate::events::MemoryState::Ready);
        assert_eq!((s.opening_done, s.opening_total), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_save_waiting_for_a_memory_that_fails_to_open_says_why() {
        let state = Arc::new(AppState::new(Instant::now()));
        let saving = {
            let state = Arc::clone(&state);
            tokio::spawn(async move { crate::commands::add_note_to(&state, "x".into()).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        state
            .set_opened(Slot::Failed("the disk is gone".into()))
            .await;
        let e = tokio::time::timeout(Duration::from_secs(10), saving)
            .await
            .unwrap_or_else(|_| panic!("the save never finished"))
            .unwrap_or_else(|e| panic!("join: {e}"))
            .err()
            .unwrap_or_else(|| panic!("saved into a memory that failed to open"));
        assert!(e.to_string().contains("the disk is gone"), "{e}");
    }
}
