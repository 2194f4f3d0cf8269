//! `kasten bench search`: ingest, query embedding, vector, hybrid and date-aware search,
//! note fetch, reopening, RSS and bytes per note.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{Shell, synthetic};
use anyhow::{Context, Result, bail};
use kasten_core::NewNote;
use kasten_engine::Endpoint;
use kasten_engine::{Engine, SearchOptions};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::report::{
    ExportMeta, Ingest, Links, LinksBuilt, ManyPeriods, Measured, Reopen, SearchReport,
};

use super::stats::{rss_mib, stats, write_f32};

/// Links per note in the bench memory (see `measure`).
pub(crate) const LINKS_PER_NOTE: usize = 3;
/// Notes per batch of the bench's ingest.
pub(crate) const INGEST_BATCH: usize = 256;
/// How many of the corpus's notes the embedder embeds on its own first (its throughput is
/// what the ingest's is compared with).
pub(crate) const EMBED_ALONE_NOTES: usize = 5_120;

/// Opens the memory with `embedder` (loaded once, so model loading is not timed) and
/// closes it again: (open seconds, close seconds, read from the snapshot).
pub(crate) async fn time_open(
    ep: &Endpoint,
    embedder: &std::sync::Arc<dyn kasten_embed::Embedder>,
) -> Result<(f64, f64, bool)> {
    let t0 = Instant::now();
    let engine = Engine::open(ep, std::sync::Arc::clone(embedder), &|_| {}).await?;
    let open = t0.elapsed().as_secs_f64();
    let from_snapshot = engine.opened_from_snapshot();
    let t1 = Instant::now();
    engine.close().await;
    Ok((open, t1.elapsed().as_secs_f64(), from_snapshot))
}

/// `--reopen`: a rebuild from the store (snapshot removed), then an open from the snapshot
/// the rebuild's close wrote.
pub(crate) async fn measure_reopen(
    ep: &Endpoint,
    embedder: std::sync::Arc<dyn kasten_embed::Embedder>,
    log: &dyn Fn(String),
) -> Result<Reopen> {
    let Endpoint::SurrealKv(dir) = ep else {
        bail!("--reopen needs an embedded memory (surrealkv://DIR)");
    };
    let snapshot = dir.join(kasten_engine::SNAPSHOT_FILE);
    let _ = std::fs::remove_file(&snapshot);
    let (rebuild, write, rebuilt_from_snapshot) = time_open(ep, &embedder).await?;
    let bytes = std::fs::metadata(&snapshot).map_or(0, |m| m.len());
    let (load, close, from_snapshot) = time_open(ep, &embedder).await?;
    log(format!(
        "bench: reopen: rebuild {rebuild:.2} s (close writing the snapshot {write:.2} s, {bytes} bytes), from the snapshot {load:.2} s (close {close:.3} s)"
    ));
    if rebuilt_from_snapshot || !from_snapshot {
        bail!(
            "--reopen: the snapshot was not used as expected (rebuild used it: {rebuilt_from_snapshot}, second open used it: {from_snapshot})"
        );
    }
    Ok(Reopen {
        rebuild_seconds: rebuild,
        close_writing_snapshot_seconds: write,
        snapshot_bytes: bytes,
        from_snapshot_seconds: load,
        close_unchanged_seconds: close,
        speedup: if load > 0.0 { rebuild / load } else { 0.0 },
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn measure(
    engine: &Engine,
    n: usize,
    q: usize,
    k: usize,
    export: Option<&Path>,
    open_time: Duration,
    log: &dyn Fn(String),
    shell: &dyn Shell,
) -> Result<Measured> {
    // the corpus is exactly N notes: generated sentences that happen to repeat each other
    // are not merged
    engine
        .set_merge_options(&kasten_engine::MergeOptions {
            enabled: false,
            supersede: false,
            ..Default::default()
        })
        .await?;
    // the model is loaded on its first embedding: not in any timed figure
    engine.shared_embedder().embed(&["warm-up"])?;
    let have = engine.count().await? as usize;
    if have > n {
        bail!(
            "the bench memory already holds {have} notes (more than {n}); pass --fresh to rebuild it"
        );
    }
    let mut ingest = None;
    if have < n {
        let rng = StdRng::seed_from_u64(0x6b61_7374_656e + have as u64);
        let todo = n - have;
        // The embedder on its own, in the same run: the first batches of the corpus, embedded
        // as the ingest embeds them (batches of INGEST_BATCH), nothing stored.
        let alone = todo.min(EMBED_ALONE_NOTES);
        let mut r = rng.clone();
        let texts: Vec<String> = (0..alone).map(|_| synthetic::sentence(&mut r)).collect();
        let embedder = engine.shared_embedder();
        let te = Instant::now();
        for chunk in texts.chunks(INGEST_BATCH) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            embedder.embed(&refs)?;
        }
        let embed_alone = alone as f64 / te.elapsed().as_secs_f64().max(1e-9);
        drop(texts);
        log(format!(
            "bench: the embedder alone: {embed_alone:.0} notes/s ({alone} notes)"
        ));

        let pb = shell.progress_bar();
        pb.set_message("ingesting");
        pb.set_length(todo as u64);
        let (mut embed_t, mut store_t) = (Duration::ZERO, Duration::ZERO);
        let t0 = Instant::now();
        let mut done = 0usize;
        let mut r = rng;
        let batches = (0..todo).step_by(INGEST_BATCH).map(|start| {
            (start..todo.min(start + INGEST_BATCH))
                .filter_map(|_| NewNote::new(&synthetic::sentence(&mut r)).ok())
                .collect::<Vec<NewNote>>()
        });
        engine
            .add_batches(batches, |saved| {
                embed_t += saved.embed_time;
                store_t += saved.store_time;
                done += saved.notes.len();
                pb.set_position(done as u64);
            })
            .await?;
        pb.finish_and_clear();
        let total = t0.elapsed().as_secs_f64();
        let notes_per_s = done as f64 / total;
        ingest = Some(Ingest {
            notes: done,
            seconds: total,
            notes_per_s,
            embed_seconds: embed_t.as_secs_f64(),
            store_seconds: store_t.as_secs_f64(),
            embed_notes_per_s: done as f64 / embed_t.as_secs_f64().max(1e-9),
            store_notes_per_s: done as f64 / store_t.as_secs_f64().max(1e-9),
            embedder_alone_notes: alone,
            embedder_alone_notes_per_s: embed_alone,
            share_of_embedder: notes_per_s / embed_alone.max(1e-9),
        });
        log(format!("bench: ingested {done} notes in {total:.1} s"));
    }

    // Links, as an enriched memory has them (A-Mem links a note to a few neighbours): each
    // note to its LINKS_PER_NOTE nearest notes, accepted, so link expansion has work to do.
    let mut links_built = None;
    if !engine.has_accepted_links().await? {
        let t0 = Instant::now();
        let ids = engine.indexed_ids()?;
        let pb = shell.progress_bar();
        pb.set_message("linking");
        pb.set_length(ids.len() as u64);
        let mut total = 0u64;
        for chunk in ids.chunks(512) {
            let mut writes = Vec::new();
            for id in chunk {
                let Some(v) = engine.vector_of(id)? else {
                    continue;
                };
                for (other, cos) in engine.rank_vector(&v, LINKS_PER_NOTE + 1)? {
                    if &other != id {
                        writes.push(kasten_engine::ImportedLink {
                            from: id.clone(),
                            to: other,
                            kind: "related".into(),
                            reason: "bench: nearest neighbour".into(),
                            confidence: f64::from(cos.clamp(0.0, 1.0)),
                            status: kasten_core::LinkStatus::Accepted,
                            created_at: chrono::Utc::now(),
                        });
                    }
                }
            }
            total += engine.insert_links(&writes).await?;
            pb.inc(chunk.len() as u64);
        }
        pb.finish_and_clear();
        links_built = Some(LinksBuilt {
            links: total,
            seconds: t0.elapsed().as_secs_f64(),
        });
        log(format!(
            "bench: linked each note to its {LINKS_PER_NOTE} nearest ({total} links)"
        ));
    }
    let expansion_links = engine.reload_links().await?;

    // Queries: fresh sentences from another seed (same vocabulary, different combinations).
    let mut rng = StdRng::seed_from_u64(0x0071_7565_7279);
    let texts: Vec<String> = (0..q).map(|_| synthetic::sentence(&mut rng)).collect();
    let mut embed_lat = Vec::with_capacity(q);
    let mut vectors = Vec::with_capacity(q);
    for t in &texts {
        let t0 = Instant::now();
        vectors.push(engine.embed_query(t).await?);
        embed_lat.push(t0.elapsed());
    }
    // warm-up: touch the index once
    for v in vectors.iter().take(5) {
        engine.rank_vector(v, k)?;
    }
    let (mut vec_lat, mut hyb_lat, mut full_lat, mut fetch_lat) = (vec![], vec![], vec![], vec![]);
    let mut unexpanded_lat = vec![];
    let mut refetch_lat = vec![];
    let (rss_before_queries, _) = rss_mib();
    // the two lists the hybrid ranking fuses, at the depth it asks them for
    let (mut vec_n_lat, mut kw_n_lat) = (vec![], vec![]);
    let fused_n = (k * 3).max(30);
    let no_links = SearchOptions {
        links: false,
        ..SearchOptions::default()
    };
    let mut vector_hits = Vec::with_capacity(q);
    for (t, v) in texts.iter().zip(&vectors) {
        let t0 = Instant::now();
        let hits = engine.rank_vector(v, k)?;
        vec_lat.push(t0.elapsed());
        let t1 = Instant::now();
        engine.rank_vector(v, fused_n)?;
        vec_n_lat.push(t1.elapsed());
        let t1 = Instant::now();
        engine.rank_keyword(t, fused_n)?;
        kw_n_lat.push(t1.elapsed());

        // with and without link expansion, both timed second (warm) so the difference is
        // the expansion's cost and not the cache
        engine.rank_expanded(t, v, k, &SearchOptions::default())?;
        let t1 = Instant::now();
        engine.rank_expanded(t, v, k, &no_links)?;
        unexpanded_lat.push(t1.elapsed());
        let t1 = Instant::now();
        let fused = engine.rank_expanded(t, v, k, &SearchOptions::default())?;
        hyb_lat.push(t1.elapsed());
        let ids: Vec<_> = fused.iter().map(|h| h.id.clone()).collect();
        let t2 = Instant::now();
        let notes = engine.get_notes(&ids).await?;
        fetch_lat.push(t2.elapsed());
        full_lat.push(t1.elapsed());
        // the same hits again, as a follow-up search would fetch them (the note cache)
        let t3 = Instant::now();
        engine.get_notes(&ids).await?;
        refetch_lat.push(t3.elapsed());
        vector_hits.push(hits);
        if notes.len() != ids.len() {
            bail!(
                "search returned {} ids but only {} notes were found",
                ids.len(),
                notes.len()
            );
        }
    }
    let many_periods = many_periods(engine, &texts, &vectors, k).await?;
    let p50 = |f: fn(&ManyPeriods) -> f64| many_periods.as_ref().map_or(f64::NAN, f);
    log(format!(
        "bench: a query naming 2,000 periods ranks in {:.2} ms (one period {:.2} ms); a write while such queries run {:.1} ms (while one-period queries run {:.1} ms, alone {:.1} ms)",
        p50(|m| m.many_periods_rank.p50_ms),
        p50(|m| m.one_period_rank.p50_ms),
        p50(|m| m.add_during_many_periods.p50_ms),
        p50(|m| m.add_during_one_period.p50_ms),
        p50(|m| m.add_alone.p50_ms),
    ));

    // recall against the exact f32 ranking, after the timings: its full f32 scan evicts
    // the caches, so it must not run next to a timed call
    let (mut recall_hits, mut recall_total) = (0usize, 0usize);
    for (v, hits) in vectors.iter().zip(&vector_hits) {
        let exact = engine.rank_vector_exact(v, k)?;
        recall_total += exact.len();
        recall_hits += exact
            .iter()
            .filter(|(id, _)| hits.iter().any(|(h, _)| h == id))
            .count();
    }
    let count = engine.count().await?;
    let disk = engine.disk_bytes();
    let (rss, hwm) = rss_mib();

    if let Some(dir) = export {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let corpus = engine.export_vectors()?;
        write_f32(&dir.join("corpus.f32"), &corpus)?;
        write_f32(&dir.join("queries.f32"), &vectors)?;
        let dim = vectors.first().map_or(0, Vec::len);
        std::fs::write(
            dir.join("meta.json"),
            serde_json::to_string(&ExportMeta {
                dim,
                corpus: corpus.len(),
                queries: vectors.len(),
            })?,
        )?;
        log(format!(
            "bench: exported {} corpus and {} query vectors to {}",
            corpus.len(),
            vectors.len(),
            dir.display()
        ));
    }

    Ok(Measured {
        notes: count,
        k,
        queries: q,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        open_seconds: open_time.as_secs_f64(),
        ingest,
        query_embedding: stats(embed_lat),
        vector_search: stats(vec_lat),
        vector_recall_vs_exact: recall_hits as f64 / recall_total.max(1) as f64,
        fused_lists_depth: fused_n,
        vector_search_fused_depth: stats(vec_n_lat),
        keyword_search_fused_depth: stats(kw_n_lat),
        hybrid_rank: stats(hyb_lat),
        hybrid_rank_without_links: stats(unexpanded_lat),
        links: Links {
            built: links_built,
            in_expansion_index: expansion_links,
        },
        note_fetch: stats(fetch_lat),
        note_fetch_again: stats(refetch_lat),
        rss_before_queries_mib: rss_before_queries,
        hybrid_search_with_fetch: stats(full_lat),
        many_periods,
        rss_mib: rss,
        peak_rss_mib: hwm,
        vector_index_mib: engine.vector_index_bytes()? as f64 / (1024.0 * 1024.0),
        db_bytes: disk,
        db_bytes_per_note: if count > 0 {
            disk as f64 / count as f64
        } else {
            0.0
        },
    })
}

/// Rounds of the many-periods measurement (each: one ranking of each query, one write).
pub(crate) const HOSTILE_ROUNDS: usize = 20;

/// A query naming 2,000 periods ("since 1000 since 1001 … since 2999", which any agent can
/// send) against one naming a single period and a plain query, ranked with everything on,
/// and the latency of a write (a note added and deleted again, so the memory keeps its
/// size) alone and while another thread ranks that query in a loop: the work the query does
/// under the index lock is bounded, and a writer waits no longer than behind any search.
pub(crate) async fn many_periods(
    engine: &Engine,
    texts: &[String],
    vectors: &[Vec<f32>],
    k: usize,
) -> Result<Option<ManyPeriods>> {
    let hostile: String = (1000..3000).map(|y| format!("since {y} ")).collect();
    let one = "since 1000";
    let (Some(text), Some(v)) = (texts.first(), vectors.first()) else {
        return Ok(None);
    };
    let options = SearchOptions::default();
    let (mut hostile_lat, mut one_lat, mut plain_lat) = (vec![], vec![], vec![]);
    let rss_before = rss_mib().0;
    let mut candidates = 0usize;
    for _ in 0..HOSTILE_ROUNDS {
        let t = Instant::now();
        candidates = engine.rank_expanded(&hostile, v, k, &options)?.len();
        hostile_lat.push(t.elapsed());
        let t = Instant::now();
        engine.rank_expanded(one, v, k, &options)?;
        one_lat.push(t.elapsed());
        let t = Instant::now();
        engine.rank_expanded(text, v, k, &options)?;
        plain_lat.push(t.elapsed());
    }
    let rss_after = rss_mib().0;

    let write = |i: usize| {
        NewNote::new(&format!("bench writer note {i}: {text}")).map_err(anyhow::Error::from)
    };
    let mut added = Vec::new();
    let mut alone = vec![];
    for i in 0..HOSTILE_ROUNDS {
        let note = write(i)?;
        let t = Instant::now();
        added.push(engine.add(note).await?.id);
        alone.push(t.elapsed());
    }
    // the same writes while another thread ranks, without pause, the many-periods query;
    // then the one-period query, as the peer
    let handle = tokio::runtime::Handle::current();
    let mut during = Vec::new();
    for (round, query) in [hostile.as_str(), one].into_iter().enumerate() {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let added_now = &mut added;
        let measured = tokio::task::block_in_place(|| {
            std::thread::scope(|s| {
                let searcher = s.spawn(|| {
                    let mut n = 0usize;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        if engine.rank_expanded(query, v, k, &options).is_err() {
                            break;
                        }
                        n += 1;
                    }
                    n
                });
                let lat = handle.block_on(async {
                    let mut lat = vec![];
                    for i in 0..HOSTILE_ROUNDS {
                        let note = write((round + 1) * HOSTILE_ROUNDS + i)?;
                        let t = Instant::now();
                        added_now.push(engine.add(note).await?.id);
                        lat.push(t.elapsed());
                    }
                    Ok::<_, anyhow::Error>(lat)
                });
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                let searched = searcher.join().unwrap_or(0);
                lat.map(|l| (l, searched))
            })
        })?;
        during.push(measured);
    }
    let [(during_many, searched_many), (during_one, searched_one)] =
        <[_; 2]>::try_from(during).map_err(|_| anyhow::anyhow!("two write rounds"))?;
    for id in &added {
        engine.delete(id).await?;
    }
    Ok(Some(ManyPeriods {
        periods_named: 2000,
        hits: candidates,
        many_periods_rank: stats(hostile_lat),
        one_period_rank: stats(one_lat),
        plain_rank: stats(plain_lat),
        rss_growth_mib: rss_after - rss_before,
        add_alone: stats(alone),
        add_during_many_periods: stats(during_many),
        many_period_searches_meanwhile: searched_many,
        add_during_one_period: stats(during_one),
        one_period_searches_meanwhile: searched_one,
    }))
}

pub(crate) fn print_report(r: &SearchReport) {
    let m = &r.measured;
    println!("notes:                {}", m.notes);
    println!(
        "open:                 {:.2} s ({})",
        m.open_seconds,
        if r.opened_from_snapshot {
            "indexes from the snapshot"
        } else {
            "index rebuild"
        }
    );
    if let Some(re) = &r.reopen {
        println!(
            "reopen:               rebuild {:.2} s, from snapshot {:.2} s ({:.0}x; snapshot {} bytes, written in {:.2} s)",
            re.rebuild_seconds,
            re.from_snapshot_seconds,
            re.speedup,
            re.snapshot_bytes,
            re.close_writing_snapshot_seconds
        );
    }
    if let Some(i) = &m.ingest {
        println!(
            "ingest:               {:.0} notes/s ({} notes; {:.0} % of the embedder alone at {:.0} notes/s; within the ingest: embedding {:.0} notes/s, storage {:.0} notes/s, overlapping)",
            i.notes_per_s,
            i.notes,
            100.0 * i.share_of_embedder,
            i.embedder_alone_notes_per_s,
            i.embed_notes_per_s,
            i.store_notes_per_s
        );
    }
    for (label, l) in [
        ("query embedding", &m.query_embedding),
        ("vector top-k", &m.vector_search),
        ("vector top-3k", &m.vector_search_fused_depth),
        ("keyword top-3k", &m.keyword_search_fused_depth),
        ("rank, no links", &m.hybrid_rank_without_links),
        ("hybrid rank", &m.hybrid_rank),
        ("note fetch", &m.note_fetch),
        ("same fetch again", &m.note_fetch_again),
        ("hybrid + fetch", &m.hybrid_search_with_fetch),
    ] {
        println!(
            "{label:<21} p50 {:>8.3} ms   p95 {:>8.3} ms",
            l.p50_ms, l.p95_ms
        );
    }
    if let Some(b) = &r.boxes {
        println!(
            "boxes:                {} Boxes over {} notes in {:.2} s (graph {} ms, clustering {} ms), modularity {:.3}",
            b.boxes, b.boxed_notes, b.seconds, b.graph_ms, b.cluster_ms, b.modularity
        );
    }
    println!("vector recall vs exact: {:.4}", m.vector_recall_vs_exact);
    println!(
        "memory:               RSS {:.0} MiB (before the queries {:.0} MiB, peak {:.0} MiB); vector index {:.1} MiB",
        m.rss_mib, m.rss_before_queries_mib, m.peak_rss_mib, m.vector_index_mib
    );
    println!(
        "disk:                 {} bytes ({:.0} bytes/note)",
        m.db_bytes, m.db_bytes_per_note
    );
}
