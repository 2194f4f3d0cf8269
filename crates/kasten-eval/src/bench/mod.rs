//! `kasten bench search`: builds (or reuses) a memory of N synthetic notes with the real
//! embedder and store, then measures ingest throughput, query embedding, vector search,
//! hybrid search and note fetch latency, RSS and bytes on disk per note.
//! `--export DIR` writes the corpus and query vectors for `bench/chroma_bench.py`, so
//! ChromaDB can be measured on exactly the same vectors.
//! `kasten bench share`: what going through the memory's owner (kasten-share) adds to a
//! search: the same queries in the owning engine and through a client on its socket.

mod report;
mod search;
mod share;
mod stats;
#[cfg(test)]
mod tests;

use search::{measure, measure_reopen, print_report};
use share::share;

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::Shell;
use anyhow::{Result, bail};
use clap::Subcommand;
use kasten_engine::Endpoint;
use report::{Boxes, SearchReport, print_json};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Search latency and ingest throughput on a memory of N notes.
    Search {
        /// Size of the memory to measure.
        #[arg(long)]
        notes: usize,
        /// Queries to time.
        #[arg(long, default_value_t = 200)]
        queries: usize,
        #[arg(short, default_value_t = 10)]
        k: usize,
        /// Build the corpus again even if one of this size exists.
        #[arg(long)]
        fresh: bool,
        /// Write corpus.f32, queries.f32 and meta.json here (for bench/chroma_bench.py).
        #[arg(long)]
        export: Option<PathBuf>,
        /// Skip the full Box recompute (minutes at 100k notes) after the search figures.
        #[arg(long)]
        no_boxes: bool,
        /// Scan every int8 vector (no sign-code prefilter), as before the prefilter existed.
        #[arg(long)]
        exact_scan: bool,
        /// Afterwards, time reopening the memory: once rebuilding the indexes from the
        /// store (the index snapshot removed first) and once from the snapshot the close
        /// after that wrote. Embedded memories only.
        #[arg(long)]
        reopen: bool,
    },
    /// What a client round trip through the memory's owner adds to `search`: the same
    /// queries on a new memory of N notes, in the owning engine and through a client
    /// connected to its socket (the socket, token check and tarpc as between processes).
    Share {
        #[arg(long, default_value_t = 1000)]
        notes: usize,
        #[arg(long, default_value_t = 200)]
        queries: usize,
        #[arg(short, default_value_t = 10)]
        k: usize,
    },
}

pub async fn run(
    cmd: &BenchCommand,
    db: Option<&str>,
    json_out: bool,
    shell: &dyn Shell,
) -> Result<()> {
    let BenchCommand::Search {
        notes,
        queries,
        k,
        fresh,
        export,
        no_boxes,
        exact_scan,
        reopen,
    } = cmd
    else {
        let BenchCommand::Share { notes, queries, k } = cmd else {
            bail!("unknown bench");
        };
        return share(*notes, (*queries).max(1), (*k).max(1), json_out, shell).await;
    };
    let (n, q, k) = (*notes, (*queries).max(1), (*k).max(1));
    if n == 0 {
        bail!("--notes must be at least 1");
    }
    let ep = match db {
        Some(s) => Endpoint::parse(s)?,
        None => {
            let base = match Endpoint::default_from_env()? {
                Endpoint::SurrealKv(p) => p.parent().map(Path::to_path_buf).unwrap_or(p),
                _ => PathBuf::from("."),
            };
            Endpoint::SurrealKv(base.join("bench").join(format!("notes-{n}")))
        }
    };
    if *fresh && let Endpoint::SurrealKv(dir) = &ep {
        let _ = std::fs::remove_dir_all(dir);
    }
    let log = |s: String| {
        if !json_out {
            eprintln!("{s}");
        }
    };
    log(format!("bench: memory at {ep}"));
    let t_open = Instant::now();
    let engine = shell
        .open_engine(Some(db.map_or_else(|| ep.to_string(), str::to_owned)))
        .await?;
    let open_time = t_open.elapsed();
    let opened_from_snapshot = engine.opened_from_snapshot();
    let embedder = engine.shared_embedder();
    if *exact_scan {
        engine.set_vector_prefilter(None)?;
    }
    let result = measure(&engine, n, q, k, export.as_deref(), open_time, &log, shell).await;
    // a full Box recompute (similarity graph for weakly linked notes + Louvain), which the
    // app runs off its UI thread
    let boxes = if !*no_boxes && result.is_ok() {
        let t0 = Instant::now();
        let b = match engine.recompute_boxes().await {
            Ok(b) => b,
            Err(e) => {
                engine.close().await;
                return Err(e.into());
            }
        };
        let seconds = t0.elapsed().as_secs_f64();
        log(format!(
            "bench: {} Boxes in {seconds:.2} s (modularity {:.3})",
            b.boxes, b.modularity
        ));
        Some(Boxes {
            seconds,
            boxes: b.boxes,
            boxed_notes: b.boxed_notes,
            edges: b.edges,
            modularity: b.modularity,
            graph_ms: u64::try_from(b.graph_ms).unwrap_or(u64::MAX),
            cluster_ms: u64::try_from(b.cluster_ms).unwrap_or(u64::MAX),
            largest: b.sizes.first().copied().unwrap_or(0),
        })
    } else {
        None
    };
    let t_close = Instant::now();
    engine.close().await;
    let close_seconds = t_close.elapsed().as_secs_f64();
    let measured = result?;
    let report = SearchReport {
        measured,
        vector_prefilter: !*exact_scan,
        boxes,
        opened_from_snapshot,
        close_seconds,
        reopen: if *reopen {
            Some(measure_reopen(&ep, embedder, &log).await?)
        } else {
            None
        },
    };
    if json_out {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(())
}
