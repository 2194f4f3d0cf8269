//! Evaluation and benchmarks of Kasten, kept out of the product crates: the pure core has
//! no benchmark formats and no random numbers, and the CLI's `kasten eval` / `kasten bench`
//! are thin entries that hand their arguments to [`eval::run`] and [`bench::run`].
//!
//! - [`locomo`]: the LoCoMo benchmark format and its metrics (pure).
//! - [`factconsolidation`]: the MemoryAgentBench FactConsolidation format and its metrics
//!   (pure).
//! - [`synthetic`]: the synthetic corpus of `kasten bench search` and the criterion
//!   benchmarks.
//! - [`eval`], [`eval_fact`]: `kasten eval locomo` / `factconsolidation` — a real memory
//!   per sample, ingest, retrieval and answer scoring, resumable caches.
//! - [`bench`]: `kasten bench search` / `share` — latency, throughput, RSS, bytes per note.
//!
//! The shell that runs them (the CLI) provides how a memory is opened and how progress is
//! shown, through [`Shell`], so both stay written once, in the CLI.

pub mod bench;
mod cache;
pub mod eval;
pub mod eval_fact;
pub mod factconsolidation;
pub mod locomo;
#[cfg(test)]
mod near_duplicates;
pub mod synthetic;
#[cfg(test)]
mod test_shape;

pub use bench::BenchCommand;
pub use eval::EvalCommand;

use futures_util::future::BoxFuture;
use indicatif::ProgressBar;
use kasten_engine::Engine;

/// What the evaluation needs from the program that runs it.
pub trait Shell: Sync {
    /// Opens the memory at `db` (an endpoint; the default one when `None`) with the real
    /// embedder, showing progress for long opens.
    fn open_engine(&self, db: Option<String>) -> BoxFuture<'static, anyhow::Result<Engine>>;
    /// A progress bar for long work (hidden when nobody watches).
    fn progress_bar(&self) -> ProgressBar;
}

/// Reads the LLM choice from the settings and the environment, as every CLI command does.
pub(crate) async fn configure_llm(engine: &mut Engine) -> anyhow::Result<()> {
    let env = |k: &str| std::env::var(k).ok();
    Ok(engine.configure_from_settings(&env, None, true).await?)
}
