//! Latency statistics, the process's memory, and the vectors written for ChromaDB.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::report::Latency;

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

pub(crate) fn stats(mut v: Vec<Duration>) -> Latency {
    v.sort();
    let mean = v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len().max(1) as f64 * 1e3;
    Latency {
        p50_ms: percentile(&v, 0.5),
        p95_ms: percentile(&v, 0.95),
        mean_ms: mean,
        n: v.len(),
    }
}

/// (VmRSS, VmHWM) of this process in MiB.
pub(crate) fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub(crate) fn write_f32(path: &Path, rows: &[Vec<f32>]) -> Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    );
    for r in rows {
        for x in r {
            f.write_all(&x.to_le_bytes())?;
        }
    }
    f.flush()?;
    Ok(())
}
