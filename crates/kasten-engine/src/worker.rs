//! One background enrichment loop and one shutdown signal for every surface that owns a
//! memory for a while (the app, `kasten mcp`).
//!
//! [`run_worker`] wakes when told (a note was added, settings changed) or every `every`,
//! asks its [`Worker`] for the engine to use (the app hands it out per pass, so the engine
//! can be reconfigured between passes), runs the pending jobs ([`Engine::run_pending`]),
//! refreshes the Boxes after what was enriched ([`Engine::refresh_boxes`]), and reports
//! each outcome and the pass. It ends when the worker says so or the engine
//! starts closing ([`Engine::begin_close`]); a pass cut off by the close gives its job
//! back, and the next open requeues it. [`shutdown_signal`] is what ends a surface: Ctrl-C
//! or SIGTERM; the surface then closes the engine with [`Engine::close_shared`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::{Engine, EngineError, JobOutcome, RunSummary};

/// What the next pass does.
pub enum Pass {
    /// Run the pending jobs on this engine.
    Run(Arc<Engine>),
    /// Nothing to do now (no LLM, the memory is not open yet); wait for the next wake-up.
    Skip,
    /// End the loop.
    Stop,
}

/// A surface's part of the enrichment loop.
pub trait Worker: Send + Sync {
    /// Called after each wake-up: the engine for this pass, or why there is none.
    fn next_pass(&mut self) -> impl Future<Output = Pass> + Send;
    /// Each job's outcome, as it happens.
    fn on_job(&self, outcome: &JobOutcome);
    /// After the pass (the engine is still held; it is dropped right after).
    fn pass_done(
        &mut self,
        engine: &Engine,
        result: Result<RunSummary, EngineError>,
    ) -> impl Future<Output = ()> + Send;
}

/// Runs `worker`'s passes until it stops or the engine closes.
pub async fn run_worker(worker: &mut impl Worker, wake: &Notify, every: Duration) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(every) => {}
        }
        let engine = match worker.next_pass().await {
            Pass::Run(e) => e,
            Pass::Skip => continue,
            Pass::Stop => return,
        };
        if engine.is_closing() {
            return;
        }
        let w = &*worker;
        let result = engine.run_pending(&|o: &JobOutcome| w.on_job(o)).await;
        let closing = matches!(result, Err(EngineError::Closing)) || engine.is_closing();
        if let Ok(s) = &result
            && !closing
        {
            refresh_boxes(&engine, s.done).await;
        }
        worker.pass_done(&engine, result).await;
        drop(engine);
        if closing {
            return;
        }
    }
}

/// The Box refresh after a pass, before the surface hears of the pass (so what it shows
/// then has the Boxes); a failure is logged and the loop goes on.
async fn refresh_boxes(engine: &Engine, enriched: usize) {
    match engine.refresh_boxes(enriched).await {
        Ok(Some(r)) => tracing::info!("{} Boxes over {} notes", r.boxes, r.notes),
        Ok(None) | Err(EngineError::Closing) => {}
        Err(e) => tracing::warn!("cannot compute the Boxes: {e}"),
    }
}

/// Resolves when the process is asked to end: Ctrl-C, or SIGTERM on Unix.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kasten_core::NewNote;

    use super::*;
    use crate::tests::HashEmbedder;

    /// Counts passes and hands out the engine; stops after `passes`.
    struct Counting {
        engine: Arc<Engine>,
        passes: usize,
        seen: Mutex<Vec<String>>,
        done: Vec<Result<usize, String>>,
    }

    impl Worker for Counting {
        async fn next_pass(&mut self) -> Pass {
            if self.done.len() >= self.passes {
                Pass::Stop
            } else {
                Pass::Run(Arc::clone(&self.engine))
            }
        }
        fn on_job(&self, o: &JobOutcome) {
            if let Ok(mut s) = self.seen.lock() {
                s.push(format!("{o:?}"));
            }
        }
        async fn pass_done(&mut self, _: &Engine, r: Result<RunSummary, EngineError>) {
            self.done.push(
                r.map(|s| s.done + s.failed + s.retrying)
                    .map_err(|e| e.to_string()),
            );
        }
    }

    /// The loop runs a pass per wake-up and reports it, stops when the worker says so,
    /// and stops at once when the engine starts closing (so a close never waits for it).
    #[tokio::test]
    async fn the_loop_runs_a_pass_per_wake_up_and_stops_when_the_engine_closes() {
        let engine = Engine::open(
            &kasten_store::Endpoint::Mem,
            HashEmbedder::arc("hash", 32, 1),
            &|_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let engine = Arc::new(engine);
        engine
            .add(NewNote::new("a note waiting for an LLM").unwrap_or_else(|e| panic!("{e}")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let wake = Notify::new();
        let mut w = Counting {
            engine: Arc::clone(&engine),
            passes: 2,
            seen: Mutex::new(vec![]),
            done: vec![],
        };
        wake.notify_one();
        // the second pass comes after `every`
        tokio::time::timeout(
            Duration::from_secs(20),
            run_worker(&mut w, &wake, Duration::from_millis(50)),
        )
        .await
        .unwrap_or_else(|_| panic!("the loop did not stop"));
        assert_eq!(w.done.len(), 2);
        // without an LLM the pass fails in words, and the loop goes on to the next
        assert!(w.done.iter().all(|r| r.is_err()), "{:?}", w.done);
        drop(w);

        // closing: the loop ends on its next wake-up without running a pass
        let mut w = Counting {
            engine: Arc::clone(&engine),
            passes: usize::MAX,
            seen: Mutex::new(vec![]),
            done: vec![],
        };
        engine.begin_close();
        wake.notify_one();
        tokio::time::timeout(
            Duration::from_secs(20),
            run_worker(&mut w, &wake, Duration::from_secs(3600)),
        )
        .await
        .unwrap_or_else(|_| panic!("the loop did not stop at the close"));
        assert!(w.done.is_empty());
        drop(w);
        Engine::close_shared(engine).await;
    }

    /// Every surface's loop refreshes the Boxes after a pass that enriched notes: a
    /// memory without Boxes has them after its first pass, whichever shell runs the loop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_that_enriches_notes_refreshes_the_boxes() {
        let fake = kasten_fakellm::FakeLlm::start(kasten_fakellm::Mode::Normal)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let engine = Arc::new(crate::tests::engine_with_fake(&fake, 2).await);
        let texts = [
            "tomato seedlings in the garden need water every morning",
            "the garden tomato seedlings need water and sun every morning",
            "water the tomato seedlings in the garden every morning",
            "the train to the city leaves the station at nine",
            "the city train leaves the station at nine every day",
            "at nine the train leaves the station for the city",
        ];
        let notes = texts
            .iter()
            .map(|t| NewNote::new(t).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        engine
            .add_batch(notes)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let boxes = engine.boxes().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(boxes.is_empty(), "{boxes:?}");

        let wake = Notify::new();
        let mut w = Counting {
            engine: Arc::clone(&engine),
            passes: 1,
            seen: Mutex::new(vec![]),
            done: vec![],
        };
        wake.notify_one();
        // one pass, then the loop asks again after `every` and is told to stop
        tokio::time::timeout(
            Duration::from_secs(60),
            run_worker(&mut w, &wake, Duration::from_millis(50)),
        )
        .await
        .unwrap_or_else(|_| panic!("the loop did not stop"));
        assert_eq!(w.done, vec![Ok(texts.len())]);
        drop(w);
        let boxes = engine.boxes().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(!boxes.is_empty(), "no Boxes after the pass");
        let boxed: usize = boxes.iter().map(|b| b.members.len()).sum();
        assert!(boxed >= 3, "{boxes:?}");
        Engine::close_shared(engine).await;
    }
}
