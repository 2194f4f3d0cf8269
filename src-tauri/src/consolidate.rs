//! The idle consolidation pass: while the app is open and nothing else runs, the notes never
//! compared on write (imports, notes from before supersession was detected, notes other
//! processes added) are compared with their nearest notes a slice at a time
//! (`Engine::consolidate` over new notes only, its own cursor), and the supersessions found
//! wait in Review. Each note is compared once however often the pass runs; a new import is
//! compared at the next idle moment.
//!
//! - **Idle**: not while the enrichment worker runs a pass or jobs wait, not while the
//!   memory opens or is restored; between slices it yields, so a note added or a search
//!   typed is never held up by more than one slice.
//! - **Every** `KASTEN_CONSOLIDATE_IDLE` seconds (60 by default; `0` turns the pass off),
//!   and at once again while a walk is unfinished.
//! - **Shown**: the status bar says how far the walk is; when it files proposals the status
//!   event's count changes and the UI reads Review again.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kasten_engine::{ConsolidateOptions, ConsolidateProgress, EngineError};
use tauri::{AppHandle, Manager};

use crate::state::AppState;
use crate::worker::emit_status;

/// Seconds between idle passes unless `KASTEN_CONSOLIDATE_IDLE` says otherwise.
const EVERY: u64 = 60;
/// Notes per slice: a page or two of the walk (a few hundred milliseconds on 2 cores).
const SLICE: u64 = 200;
/// The pause between slices of an unfinished walk.
const BETWEEN: Duration = Duration::from_secs(1);

/// How often the pass runs: `KASTEN_CONSOLIDATE_IDLE` seconds, `None` when it is off.
fn interval() -> Option<Duration> {
    let secs = match std::env::var("KASTEN_CONSOLIDATE_IDLE") {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) => n,
            Err(_) => {
                tracing::warn!(
                    "KASTEN_CONSOLIDATE_IDLE={v:?} is not a number of seconds; using {EVERY}"
                );
                EVERY
            }
        },
        Err(_) => EVERY,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// Runs the idle pass until the app stops.
pub async fn run(app: AppHandle) {
    let Some(every) = interval() else {
        tracing::info!("the idle consolidation pass is off (KASTEN_CONSOLIDATE_IDLE=0)");
        return;
    };
    let mut wait = every;
    loop {
        tokio::time::sleep(wait).await;
        wait = every;
        let state = app.state::<AppState>();
        if state.stop.load(Ordering::SeqCst) {
            return;
        }
        if state.is_enriching() {
            continue;
        }
        let Ok(engine) = state.engine().await else {
            continue; // opening, restoring or failed
        };
        match engine.job_counts().await {
            Ok(c) if c.queued + c.running == 0 => {}
            _ => continue,
        }
        set(&app, |c| c.running = true);
        let progress = |p: &ConsolidateProgress| {
            set(&app, |c| {
                c.done = p.done_before + p.scanned;
                c.total = p.total.max(c.done);
            });
        };
        let options = ConsolidateOptions {
            batch: 0,
            limit: Some(SLICE),
            new_only: true,
        };
        let result = engine.consolidate(&options, &progress).await;
        drop(engine);
        match result {
            Ok(s) => {
                set(&app, |c| {
                    c.running = !s.finished;
                    c.proposed += s.proposed;
                });
                if s.proposed > 0 {
                    tracing::info!(
                        "the idle pass filed {} supersession(s) in Review",
                        s.proposed
                    );
                }
                if !s.finished {
                    wait = BETWEEN;
                }
            }
            Err(EngineError::Closing) => return,
            Err(e) => {
                set(&app, |c| c.running = false);
                tracing::warn!("the idle consolidation pass failed: {e}");
            }
        }
    }
}

/// Changes the pass's state and tells the status bar.
fn set(app: &AppHandle, f: impl FnOnce(&mut crate::state::Consolidation)) {
    let state = app.state::<AppState>();
    if let Ok(mut c) = state.consolidation.lock() {
        f(&mut c);
    }
    let h = app.clone();
    tauri::async_runtime::spawn(async move { emit_status(&h).await });
}
