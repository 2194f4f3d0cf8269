//! `kasten`: the command line over Kasten's engine.
//!
//! Every command opens the memory, does its work, and closes the store before the process
//! exits, on success, on error and on Ctrl-C alike (see kasten-store's durability notes).
//! Errors go to stderr in plain words with exit code 1; usage errors exit 2.

mod args;
mod execute;
mod llm;
mod manual;
mod mcp;
mod memory;
mod open;
mod oserror;
mod output;
mod prepare;
mod share;
mod transfer;

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use clap::{CommandFactory, FromArgMatches};
use kasten_engine::StorageLimits;
use kasten_share::Memory;

use args::*;
use execute::{execute, execute_shared};
use open::{CliShell, configure};
use prepare::{Prepared, needs_llm, prepare, served_by_owner};

/// Who the CLI acts as in the audit history.
const ACTOR: &str = kasten_core::Actor::User.as_str();

/// jemalloc rather than the system allocator: glibc's malloc held ~30 % more of a
/// 100k-note restore (0.97–1.06 GB peak against 0.73 GB; "Memory: what holds the RSS" in
/// docs/BENCHMARKS.md). It also serves C and C++ `malloc` (ONNX Runtime's): see the
/// `tikv-jemallocator` features in the root Cargo.toml.
#[cfg(not(target_os = "windows"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    init_logging();
    output::quiet_closed_stdout();
    // the subcommand's name as typed (`archive-candidates`): what other processes are told
    // is using the memory
    let matches = Cli::command().get_matches();
    let name = matches.subcommand_name().unwrap_or("kasten").to_owned();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let json = cli.json;
    let rt = match kasten_engine::runtime() {
        Ok(rt) => rt,
        Err(e) => return output::fail(json, &anyhow!("cannot start the async runtime: {e}")),
    };
    let result = rt.block_on(run(cli, &name));
    // The store was closed inside `run`; let any background work wind down before exit.
    rt.shutdown_timeout(std::time::Duration::from_secs(10));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => output::fail(json, &e),
    }
}

fn init_logging() {
    // surrealkv warns "No runtime available for closing the store" when a clone of its
    // tree is dropped after `Store::close` already closed it; that is noise, not a problem.
    // llama.cpp's own log comes under two targets: `llama_cpp_2::log` and, for what it says
    // while loading a model (Qwen's "control-looking token … was not control-type"),
    // `llama-cpp-2`; neither is the user's concern unless the load fails.
    let filter = tracing_subscriber::EnvFilter::try_from_env("KASTEN_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,surrealkv=error,llama_cpp_2=error,llama-cpp-2=error",
        )
    });
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, filter::LevelFilter};
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_filter(filter);
    // The OS error behind a refused write is only logged by the storage engine (at ERROR,
    // also when KASTEN_LOG hides it): kept so the error message can name it.
    tracing_subscriber::registry()
        .with(fmt)
        .with(oserror::OsErrorLayer.with_filter(LevelFilter::ERROR))
        .init();
}

async fn run(cli: Cli, name: &str) -> Result<()> {
    // The person waits for `enrich` and `eval`: the built-in model takes every core.
    if matches!(cli.command, Command::Enrich { .. } | Command::Eval { .. }) {
        kasten_llm::set_foreground(true);
    }
    // `bench` manages its own memories.
    if let Command::Bench { what } = &cli.command {
        return kasten_eval::bench::run(what, cli.db.as_deref(), cli.json, &CliShell).await;
    }
    // `eval` manages its own memories too.
    if let Command::Eval { what } = &cli.command {
        return kasten_eval::eval::run(what, cli.json, &CliShell).await;
    }
    // the model catalog works on files, not on a memory
    if let Command::Llm {
        action:
            Some(action @ (LlmAction::Models | LlmAction::Install { .. } | LlmAction::Remove { .. })),
    } = &cli.command
    {
        return llm::catalog(action, cli.json).await;
    }
    // `mcp` serves until the client disconnects.
    if let Command::Mcp {
        read_only,
        propose_only,
    } = &cli.command
    {
        let access = if *read_only {
            kasten_mcp::Access::ReadOnly
        } else if *propose_only {
            kasten_mcp::Access::ProposeOnly
        } else {
            kasten_mcp::Access::Full
        };
        return mcp::run(cli.db.as_deref(), access).await;
    }
    // Validate what can be validated before opening anything.
    let prepared = match prepare(&cli.command)? {
        // a restore by replacement opens, closes and swaps memories itself
        Prepared::Restore(transfer::RestoreTarget::Replace(path, file)) => {
            return transfer::replace(cli.db.as_deref(), &path, &file, cli.json).await;
        }
        p => p,
    };
    // A command the memory's owner can carry out goes through it when another process
    // has the memory open.
    let as_client = served_by_owner(&prepared);
    // a restore or a vault import writes a whole memory in transactions of at most
    // ~4 MiB: a smaller memtable keeps its peak memory down (not the JSONL import, whose
    // batches are counted in lines only)
    let bulk = matches!(
        prepared,
        Prepared::Restore(transfer::RestoreTarget::Backup(..)) | Prepared::ImportPlan(_)
    );
    let storage = bulk.then(StorageLimits::for_bulk_writes_from_env);
    let mut engine = match share::open_or_connect(cli.db.as_deref(), as_client, storage).await? {
        share::Opened::Remote(client) => {
            let memory = Memory::Remote(client);
            return tokio::select! {
                r = output::until_stdout_closed(execute_shared(&memory, prepared, cli.json)) => r,
                _ = kasten_engine::shutdown_signal() => Err(anyhow!("interrupted; everything committed so far is saved")),
            };
        }
        share::Opened::Local(e) => *e,
    };
    let workers = match &cli.command {
        Command::Enrich { workers, .. } => *workers,
        _ => None,
    };
    if let Err(e) = configure(&mut engine, workers, needs_llm(&cli.command)).await {
        engine.close().await;
        return Err(e);
    }
    let engine = Arc::new(engine);
    // While it runs, this command serves the memory to other Kasten processes; not a
    // restore, which fills an empty memory table by table and must be alone in it.
    let owner = if matches!(prepared, Prepared::Restore(_)) {
        None
    } else {
        share::serve(
            &engine,
            cli.db.as_deref(),
            &format!("`kasten {name}`"),
            None,
        )
        .await
    };
    let result = tokio::select! {
        r = output::until_stdout_closed(execute(&engine, prepared, cli.json)) => r,
        _ = kasten_engine::shutdown_signal() => Err(anyhow!("interrupted; everything committed so far is saved")),
    };
    share::close(owner, engine).await?;
    result
}
