//! `kasten bench share`: a search here and through the memory's owner (kasten-share).

use std::path::Path;
use std::time::Instant;

use crate::{Shell, synthetic};
use anyhow::{Context, Result, bail};
use kasten_core::NewNote;
use kasten_engine::Endpoint;
use kasten_engine::Engine;
use kasten_share::MemoryOps;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::report::{ShareReport, print_json};

use super::search::INGEST_BATCH;
use super::stats::stats;

/// See [`BenchCommand::Share`]. The memory is a new folder under the system's temporary
/// directory, removed afterwards.
pub(crate) async fn share(
    n: usize,
    q: usize,
    k: usize,
    json_out: bool,
    shell: &dyn Shell,
) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("kasten-bench-share-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ep = Endpoint::SurrealKv(dir.clone());
    let engine = std::sync::Arc::new(shell.open_engine(Some(ep.to_string())).await?);
    let result = share_measure(&engine, &dir, n, q, k, json_out).await;
    // work still holding the engine is asked to stop; the store is closed in any case
    Engine::close_shared(engine).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

pub(crate) async fn share_measure(
    engine: &std::sync::Arc<Engine>,
    dir: &Path,
    n: usize,
    q: usize,
    k: usize,
    json_out: bool,
) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(7);
    let notes: Vec<NewNote> = (0..n)
        .filter_map(|_| NewNote::new(&synthetic::sentence(&mut rng)).ok())
        .collect();
    engine
        .add_batches(notes.chunks(INGEST_BATCH).map(<[NewNote]>::to_vec), |_| {})
        .await?;
    let owner = kasten_share::Owner::start(
        std::sync::Arc::clone(engine),
        dir,
        kasten_share::OwnerInfo::this_process("`kasten bench share`"),
        None,
    )
    .await?;
    let measured = async {
        let client = kasten_share::Client::connect(dir)
            .await?
            .context("the owner did not answer on its socket")?;
        let texts: Vec<String> = (0..q).map(|_| synthetic::sentence(&mut rng)).collect();
        let (mut local, mut remote, mut added, mut ping) = (vec![], vec![], vec![], vec![]);
        for (i, t) in texts.iter().enumerate() {
            let t0 = Instant::now();
            let a = engine.search(t, k).await?;
            let l = t0.elapsed();
            let t1 = Instant::now();
            let b = client.search(t, k).await?;
            let r = t1.elapsed();
            let t2 = Instant::now();
            client.ping().await?;
            let p = t2.elapsed();
            if a.hits.len() != b.hits.len() {
                bail!(
                    "the client got {} hits, the engine {}",
                    b.hits.len(),
                    a.hits.len()
                );
            }
            if i >= 10 {
                // the first few warm caches on both sides
                local.push(l);
                remote.push(r);
                added.push(r.saturating_sub(l));
                ping.push(p);
            }
        }
        Ok::<_, anyhow::Error>(ShareReport {
            notes: n,
            k,
            search_here: stats(local),
            search_through_owner: stats(remote),
            added_by_round_trip: stats(added),
            empty_round_trip: stats(ping),
        })
    }
    .await;
    owner.stop().await;
    let v = measured?;
    if json_out {
        print_json(&v)?;
    } else {
        println!(
            "search p50 {:.3} ms here, {:.3} ms through the owner: +{:.3} ms p50 (p95 +{:.3} ms); empty round trip p50 {:.3} ms ({} queries, {} notes, k {})",
            v.search_here.p50_ms,
            v.search_through_owner.p50_ms,
            v.added_by_round_trip.p50_ms,
            v.added_by_round_trip.p95_ms,
            v.empty_round_trip.p50_ms,
            q.saturating_sub(10),
            n,
            k
        );
    }
    Ok(())
}
