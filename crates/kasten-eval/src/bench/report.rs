//! What `kasten --json bench search` and `bench share` print, as types: field names,
//! nesting, nulls and number types are what scripts and docs read. Printed through a
//! `serde_json::Value` (keys sorted), as they always were.

use serde::{Deserialize, Serialize};

/// Latencies in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Latency {
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) mean_ms: f64,
    pub(crate) n: usize,
}

/// The notes ingested in this run (null when the memory already held them all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ingest {
    pub(crate) notes: usize,
    pub(crate) seconds: f64,
    pub(crate) notes_per_s: f64,
    pub(crate) embed_seconds: f64,
    pub(crate) store_seconds: f64,
    pub(crate) embed_notes_per_s: f64,
    pub(crate) store_notes_per_s: f64,
    pub(crate) embedder_alone_notes: usize,
    pub(crate) embedder_alone_notes_per_s: f64,
    pub(crate) share_of_embedder: f64,
}

/// The links the bench made (null when the memory had them already).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LinksBuilt {
    pub(crate) links: u64,
    pub(crate) seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Links {
    pub(crate) built: Option<LinksBuilt>,
    pub(crate) in_expansion_index: usize,
}

/// A query naming 2,000 periods against one naming one, and writes meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ManyPeriods {
    pub(crate) periods_named: usize,
    pub(crate) hits: usize,
    pub(crate) many_periods_rank: Latency,
    pub(crate) one_period_rank: Latency,
    pub(crate) plain_rank: Latency,
    pub(crate) rss_growth_mib: f64,
    pub(crate) add_alone: Latency,
    pub(crate) add_during_many_periods: Latency,
    pub(crate) many_period_searches_meanwhile: usize,
    pub(crate) add_during_one_period: Latency,
    pub(crate) one_period_searches_meanwhile: usize,
}

/// The figures `measure` takes on an open memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Measured {
    pub(crate) notes: u64,
    pub(crate) k: usize,
    pub(crate) queries: usize,
    pub(crate) threads: usize,
    pub(crate) open_seconds: f64,
    pub(crate) ingest: Option<Ingest>,
    pub(crate) query_embedding: Latency,
    pub(crate) vector_search: Latency,
    pub(crate) vector_recall_vs_exact: f64,
    pub(crate) fused_lists_depth: usize,
    pub(crate) vector_search_fused_depth: Latency,
    pub(crate) keyword_search_fused_depth: Latency,
    pub(crate) hybrid_rank: Latency,
    pub(crate) hybrid_rank_without_links: Latency,
    pub(crate) links: Links,
    pub(crate) note_fetch: Latency,
    pub(crate) note_fetch_again: Latency,
    pub(crate) rss_before_queries_mib: f64,
    pub(crate) hybrid_search_with_fetch: Latency,
    /// Null without queries.
    pub(crate) many_periods: Option<ManyPeriods>,
    pub(crate) rss_mib: f64,
    pub(crate) peak_rss_mib: f64,
    pub(crate) vector_index_mib: f64,
    pub(crate) db_bytes: u64,
    pub(crate) db_bytes_per_note: f64,
}

/// The full Box recompute (null with `--no-boxes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Boxes {
    pub(crate) seconds: f64,
    pub(crate) boxes: usize,
    pub(crate) boxed_notes: usize,
    pub(crate) edges: usize,
    pub(crate) modularity: f64,
    pub(crate) graph_ms: u64,
    pub(crate) cluster_ms: u64,
    pub(crate) largest: usize,
}

/// `--reopen`: a rebuild from the store, then an open from the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reopen {
    pub(crate) rebuild_seconds: f64,
    pub(crate) close_writing_snapshot_seconds: f64,
    pub(crate) snapshot_bytes: u64,
    pub(crate) from_snapshot_seconds: f64,
    pub(crate) close_unchanged_seconds: f64,
    pub(crate) speedup: f64,
}

/// What `kasten --json bench search` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SearchReport {
    #[serde(flatten)]
    pub(crate) measured: Measured,
    pub(crate) vector_prefilter: bool,
    pub(crate) boxes: Option<Boxes>,
    pub(crate) opened_from_snapshot: bool,
    pub(crate) close_seconds: f64,
    /// With `--reopen` (absent without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reopen: Option<Reopen>,
}

/// What `kasten --json bench share` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ShareReport {
    pub(crate) notes: usize,
    pub(crate) k: usize,
    pub(crate) search_here: Latency,
    pub(crate) search_through_owner: Latency,
    pub(crate) added_by_round_trip: Latency,
    pub(crate) empty_round_trip: Latency,
}

/// `--export`'s meta.json (for bench/chroma_bench.py).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExportMeta {
    pub(crate) dim: usize,
    pub(crate) corpus: usize,
    pub(crate) queries: usize,
}

/// Prints a report as pretty JSON on stdout, through a `Value` (keys sorted).
pub(crate) fn print_json<T: Serialize>(r: &T) -> anyhow::Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::to_value(r)?)?
    );
    Ok(())
}
