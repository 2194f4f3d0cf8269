//! Opening the memory and the background enrichment worker.
//!
//! The memory is opened as every shell opens it (`kasten_share::open_here`): when another
//! Kasten process has it (a command, `kasten mcp`), the app waits for the handover.
//!
//! The worker is the engine's loop (`kasten_engine::run_worker`, shared with `kasten mcp`):
//! it wakes when a note is added, settings change, or every 30 s, and runs the engine's
//! pending jobs (the Boxes refreshed after them), forwarding each outcome as a
//! [`JobEvent`]. A pass runs to the end of the queue; settings changes are applied between
//! passes (the engine is reconfigured only while no pass holds it). On exit the worker is stopped and the engine closed (see
//! `lib.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kasten_embed::{Embedder, FastEmbedder};
use kasten_engine::Endpoint;
use kasten_engine::{Engine, Progress};
use tauri::{AppHandle, Manager};
use tauri_specta::Event;

use crate::events::JobEvent;
use crate::state::{AppState, Slot};

pub async fn open(app: AppHandle) {
    let state = app.state::<AppState>();
    let result = async {
        let ep = Endpoint::default_from_env().map_err(|e| e.to_string())?;
        let embedder: Arc<dyn Embedder> = Arc::new(
            tokio::task::spawn_blocking(FastEmbedder::load_default)
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("cannot load the embedding model: {e}"))?,
        );
        let progress = |p: Progress| {
            let (done, total) = match p {
                Progress::Loading { done, total } | Progress::Reembedding { done, total } => {
                    (done, total)
                }
            };
            if let Ok(mut s) = state.slot.try_write() {
                *s = Slot::Opening { done, total };
            }
        };
        debug_open_delay().await;
        // a `kasten` command or `kasten mcp` holding the memory hands it over when it ends:
        // waited for, as every shell does (kasten-share)
        let (at, progress) = (&ep, &progress);
        let mut engine = kasten_share::open_here(
            at,
            move || Engine::open(at, Arc::clone(&embedder), progress),
            kasten_share::is_locked,
        )
        .await
        .map_err(|e| format!("cannot open the memory at {ep}: {e}"))?;
        configure_llm(&mut engine).await;
        Ok::<_, String>(engine)
    }
    .await;
    match result {
        Ok(engine) => {
            let ms = state.started.elapsed().as_millis() as u64;
            if let Ok(mut o) = state.opened_ms.lock() {
                *o = Some(ms);
            }
            tracing::info!("memory open after {ms} ms");
            let engine = Arc::new(engine);
            state.set_opened(Slot::Ready(Arc::clone(&engine))).await;
            // the window learns at once that the memory is open: computing the Boxes of a
            // memory that has none (10k notes: seconds) must not hold it until its next poll
            emit_status(&app).await;
            start_sharing(&app, &engine).await;
        }
        Err(m) => {
            tracing::error!("{m}");
            state.set_opened(Slot::Failed(m)).await;
        }
    }
    if let Ok(engine) = state.engine().await
        && matches!(engine.count().await, Ok(n) if n > 1)
    {
        boxes_if_none(&engine).await;
    }
    emit_status(&app).await;
    state.kick.notify_one();
}

/// Debug builds only (release builds do not read it): `KASTEN_DEBUG_OPEN_DELAY_MS` holds the
/// open this many milliseconds, as a large memory would, so that the e2e suite can check
/// the first screen while the memory opens (tests/e2e/specs.mjs, `slowOpen`).
#[cfg(debug_assertions)]
async fn debug_open_delay() {
    let ms = std::env::var("KASTEN_DEBUG_OPEN_DELAY_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(ms) = ms {
        tracing::info!("KASTEN_DEBUG_OPEN_DELAY_MS: opening the memory {ms} ms late");
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

#[cfg(not(debug_assertions))]
async fn debug_open_delay() {}

/// Applies the LLM the memory's settings choose to a freshly opened engine.
pub(crate) async fn configure_llm(engine: &mut Engine) {
    match crate::settings::llm_choice(engine).await {
        Ok((choice, pipeline)) => {
            match &choice.problem {
                None => tracing::info!("LLM: {}", choice.label),
                Some(p) => tracing::warn!("no LLM: {p}"),
            }
            engine.configure_choice(choice, pipeline)
        }
        Err(e) => tracing::warn!("LLM settings not usable: {e}"),
    }
}

/// The stored LLM settings changed: the client is rebuilt before the next enrichment
/// pass (the worker is woken for it), and the window gets the status at once.
pub async fn llm_settings_changed(app: &AppHandle, state: &AppState) {
    state.reconfigure.store(true, Ordering::SeqCst);
    state.kick.notify_one();
    emit_status(app).await;
}

pub async fn emit_status(app: &AppHandle) {
    let status = crate::status::status_of(&app.state::<AppState>()).await;
    if let Err(e) = status.emit(app) {
        tracing::warn!("cannot send the status to the window: {e}");
    }
}

/// Serves the open memory to the user's other Kasten processes (kasten-share): their
/// writes wake the enrichment worker and refresh the status bar. A memory on a server is
/// shared by the server, so only an embedded one is served.
pub(crate) async fn start_sharing(app: &AppHandle, engine: &Arc<Engine>) {
    let Ok(Endpoint::SurrealKv(dir)) = Endpoint::default_from_env() else {
        return;
    };
    let handle = app.clone();
    let on_write: kasten_share::OnWrite = Arc::new(move || {
        handle.state::<AppState>().kick.notify_one();
        let h = handle.clone();
        tauri::async_runtime::spawn(async move { emit_status(&h).await });
    });
    let info = kasten_share::OwnerInfo::this_process("the Kasten app");
    match kasten_share::Owner::start(Arc::clone(engine), &dir, info, Some(on_write)).await {
        Ok(owner) => *app.state::<AppState>().owner.lock().await = Some(owner),
        Err(e) => tracing::warn!("{e}"),
    }
}

/// Stops serving the memory to other processes (they wait, then find it again).
pub async fn stop_sharing(state: &AppState) {
    let owner = state.owner.lock().await.take();
    if let Some(o) = owner {
        o.stop().await;
    }
}

/// Rebuilds the LLM client from the settings; waits until nobody else holds the engine
/// (sharing pauses meanwhile: the served connections hold it too).
async fn reconfigure(app: &AppHandle) {
    let state = app.state::<AppState>();
    let sharing = state.owner.lock().await.is_some();
    stop_sharing(&state).await;
    reconfigure_engine(&state).await;
    if sharing && let Ok(engine) = state.engine().await {
        start_sharing(app, &engine).await;
    }
}

async fn reconfigure_engine(state: &AppState) {
    let mut slot = state.slot.write().await;
    let Slot::Ready(arc) = &mut *slot else { return };
    let config = crate::settings::llm_choice(arc).await;
    for _ in 0..200 {
        if let Some(engine) = Arc::get_mut(arc) {
            match config {
                Ok((choice, pipeline)) => {
                    engine.configure_choice(choice, pipeline);
                    state.set_llm(None, "");
                }
                Err(e) => state.set_llm(Some(false), e.to_string()),
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // commands still running: try again on the next wake-up
    state.reconfigure.store(true, Ordering::SeqCst);
}

/// Computes the Boxes of a memory that has none yet (opened or restored without them);
/// after enrichment the engine's loop refreshes them ([`Engine::refresh_boxes`]).
pub(crate) async fn boxes_if_none(engine: &Engine) {
    match engine.refresh_boxes(1).await {
        Ok(Some(r)) => tracing::info!("{} Boxes over {} notes", r.boxes, r.notes),
        Ok(None) => {}
        Err(e) => tracing::warn!("cannot compute the Boxes: {e}"),
    }
}

/// The app's part of the engine's enrichment loop ([`kasten_engine::run_worker`]): the
/// engine is handed out per pass (so settings changes can rebuild its LLM client between
/// passes), outcomes go to the window as [`JobEvent`]s and to the status bar.
struct AppWorker(AppHandle);

impl kasten_engine::Worker for AppWorker {
    async fn next_pass(&mut self) -> kasten_engine::Pass {
        let app = &self.0;
        let state = app.state::<AppState>();
        if state.stop.load(Ordering::SeqCst) {
            return kasten_engine::Pass::Stop;
        }
        if state.reconfigure.swap(false, Ordering::SeqCst) {
            reconfigure(app).await;
        }
        let Ok(engine) = state.engine().await else {
            return kasten_engine::Pass::Skip;
        };
        if engine.llm_client().is_none() {
            drop(engine);
            emit_status(app).await;
            return kasten_engine::Pass::Skip;
        }
        state.enriching.store(true, Ordering::SeqCst);
        emit_status(app).await;
        kasten_engine::Pass::Run(engine)
    }

    fn on_job(&self, o: &kasten_engine::JobOutcome) {
        let handle = &self.0;
        let st = handle.state::<AppState>();
        match o {
            kasten_engine::JobOutcome::Done { .. } => st.set_llm(Some(true), "connected"),
            kasten_engine::JobOutcome::Retrying { error, .. }
            | kasten_engine::JobOutcome::Failed { error, .. } => {
                st.set_llm(Some(false), error.clone())
            }
            kasten_engine::JobOutcome::Gone { .. } => {}
        }
        if let Err(e) = JobEvent::from(o).emit(handle) {
            tracing::warn!("cannot send a job event: {e}");
        }
        let h = handle.clone();
        tauri::async_runtime::spawn(async move { emit_status(&h).await });
    }

    async fn pass_done(
        &mut self,
        _: &Engine,
        result: Result<kasten_engine::RunSummary, kasten_engine::EngineError>,
    ) {
        let state = self.0.state::<AppState>();
        state.enriching.store(false, Ordering::SeqCst);
        match result {
            // the engine's loop refreshed the Boxes before this
            Ok(_) | Err(kasten_engine::EngineError::Closing) => {}
            Err(e) => {
                tracing::warn!("enrichment pass failed: {e}");
                state.set_llm(Some(false), crate::error::AppError::from(e).to_string());
            }
        }
        let app = self.0.clone();
        // the engine is dropped before the status is read again (after this returns)
        tauri::async_runtime::spawn(async move { emit_status(&app).await });
    }
}

pub async fn run(app: AppHandle) {
    let handle = app.clone();
    let state = handle.state::<AppState>();
    let mut w = AppWorker(app);
    kasten_engine::run_worker(&mut w, &state.kick, Duration::from_secs(30)).await;
}
