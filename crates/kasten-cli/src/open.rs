//! How a command opens the memory: where it is, the embedder, progress for long work,
//! the LLM settings; also what `kasten eval` / `kasten bench` are given to open theirs.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kasten_embed::{Embedder, LazyEmbedder};
use kasten_engine::{Endpoint, StorageLimits};
use kasten_engine::{Engine, EngineOptions, Progress};

pub(crate) fn endpoint(db: Option<&str>) -> Result<Endpoint> {
    Ok(match db {
        Some(s) => Endpoint::parse(s)?,
        None => Endpoint::default_from_env()?,
    })
}

/// The embedding model, checked now (the error names `scripts/setup` when it is missing)
/// and loaded when something is first embedded: a command that embeds nothing (backup,
/// restore, list, history, export) does not load ONNX Runtime.
pub(crate) fn load_embedder() -> Result<Arc<dyn Embedder>> {
    let e = LazyEmbedder::new_default().context("cannot load the embedding model")?;
    Ok(Arc::new(e))
}

/// A progress bar on stderr for the engine's long work (hidden when not a terminal).
pub(crate) fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:32}] {pos}/{len} ({per_sec}, {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}

/// How `kasten eval` and `kasten bench` open memories and show progress: as every command.
pub(crate) struct CliShell;

impl kasten_eval::Shell for CliShell {
    fn open_engine(
        &self,
        db: Option<String>,
    ) -> futures_util::future::BoxFuture<'static, Result<Engine>> {
        Box::pin(async move { open_engine(db.as_deref()).await })
    }

    fn progress_bar(&self) -> ProgressBar {
        progress_bar()
    }
}

pub(crate) async fn open_engine(db: Option<&str>) -> Result<Engine> {
    let ep = endpoint(db)?;
    open_engine_with(&ep, load_embedder()?, None).await
}

/// Opens the memory at `ep` with `embedder`, and with `storage` limits where given
/// (otherwise the defaults and the environment's).
pub(crate) async fn open_engine_with(
    ep: &Endpoint,
    embedder: Arc<dyn Embedder>,
    storage: Option<StorageLimits>,
) -> Result<Engine> {
    let pb = progress_bar();
    let report = |p: Progress| {
        let (msg, done, total) = match p {
            Progress::Loading { done, total } => ("loading", done, total),
            Progress::Reembedding { done, total } => ("re-embedding", done, total),
        };
        // small memories open instantly; only show a bar for real work
        if total >= 5000 || matches!(p, Progress::Reembedding { .. }) {
            pb.set_message(msg);
            pb.set_length(total);
            pb.set_position(done);
        }
    };
    let options = EngineOptions {
        storage,
        ..EngineOptions::default()
    };
    let engine = Engine::open_with(ep, embedder, options, &report)
        .await
        .with_context(|| format!("cannot open the memory at {ep}"))?;
    pb.finish_and_clear();
    Ok(engine)
}

/// The LLM and pipeline settings: environment first, then what `kasten config` stored,
/// then the built-in model. With `need_llm` false the LLM is not set up at all, so a bad
/// LLM setting never stops a command that does not use the LLM.
pub(crate) async fn configure(
    engine: &mut Engine,
    workers: Option<usize>,
    need_llm: bool,
) -> Result<()> {
    let env = |k: &str| std::env::var(k).ok();
    Ok(engine
        .configure_from_settings(&env, workers, need_llm)
        .await?)
}
