//! Micro-benchmarks of the hot paths in kasten-core (kept here, beside the synthetic corpus they share with `kasten bench`): rank fusion, Box computation, parsing
//! the construction answer, and mapping citations. Run: `cargo bench -p kasten-eval --bench hot_paths`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kasten_core::bm25::TextIndex;
use kasten_core::boxes::{BoxGraph, BoxParams, detect};
use kasten_core::chat::citations;
use kasten_core::fusion::rrf;
use kasten_core::prompts::Construction;
use kasten_core::vector::{Prefilter, VectorIndex};
use kasten_core::{NoteId, Via};
use kasten_eval::synthetic;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn ids(n: usize) -> Vec<NoteId> {
    (0..n)
        .map(|i| NoteId::parse(&format!("n{i:06}")).unwrap_or_else(|_| NoteId::generate()))
        .collect()
}

fn fusion(c: &mut Criterion) {
    let v = ids(400);
    let mut rng = StdRng::seed_from_u64(7);
    let list = |rng: &mut StdRng| -> Vec<(NoteId, f32)> {
        let mut l: Vec<(NoteId, f32)> = (0..100)
            .map(|_| (v[rng.random_range(0..v.len())].clone(), rng.random::<f32>()))
            .collect();
        l.sort_by(|a, b| b.1.total_cmp(&a.1));
        l.dedup_by(|a, b| a.0 == b.0);
        l
    };
    let (a, b) = (list(&mut rng), list(&mut rng));
    c.bench_function("rrf 2 lists x 100 -> top 10", |bch| {
        bch.iter(|| {
            rrf(
                black_box(&[(Via::Vector, 1.0, &a), (Via::Keyword, 1.0, &b)]),
                10,
            )
        })
    });
}

/// 10k notes, 30k edges: 100 planted groups of 100, 80 % of edges inside a group.
fn planted_graph(n: usize, edges: usize) -> BoxGraph {
    let v = ids(n);
    let mut rng = StdRng::seed_from_u64(11);
    let mut g = BoxGraph::new();
    for id in &v {
        g.add_note(id);
    }
    let group = 100;
    for _ in 0..edges {
        let a = rng.random_range(0..n);
        let b = if rng.random::<f32>() < 0.8 {
            (a / group) * group + rng.random_range(0..group)
        } else {
            rng.random_range(0..n)
        };
        g.add_edge(&v[a], &v[b.min(n - 1)], rng.random_range(0.3..1.0));
    }
    g
}

fn boxes(c: &mut Criterion) {
    let g = planted_graph(10_000, 30_000);
    let mut group = c.benchmark_group("boxes");
    group.sample_size(10);
    group.bench_function("louvain 10k notes / 30k edges", |b| {
        b.iter(|| detect(black_box(&g), &BoxParams::default()))
    });
    let small = planted_graph(1_000, 3_000);
    group.bench_function("louvain 1k notes / 3k edges", |b| {
        b.iter(|| detect(black_box(&small), &BoxParams::default()))
    });
    group.finish();
}

fn parsing(c: &mut Criterion) {
    let v = serde_json::json!({
        "keywords": ["Caroline", "LGBTQ support group", "acceptance", "courage", "community"],
        "tags": ["Personal", "identity", "support", "events"],
        "context": "Caroline tells Melanie about the LGBTQ support group she attended and how accepted she felt there.",
        "tier": "long_term"
    });
    c.bench_function("construction answer validate+clean", |b| {
        b.iter(|| Construction::from_value(black_box(&v)))
    });
    let answer = "Caroline went to the support group on 7 May [1], and Melanie painted a sunrise [2, 3]; \
                  see also [4-5] and [the notes] [12].";
    c.bench_function("citations in an answer", |b| {
        b.iter(|| citations(black_box(answer), 8))
    });
}

/// Vectors for the vector-index benchmark: the export of `kasten bench search --export DIR`
/// when `KASTEN_BENCH_VECTORS=DIR` is set (real MiniLM embeddings), else 100k clustered
/// synthetic ones (500 topics plus noise). Returns (corpus, queries).
fn bench_vectors() -> (Vec<Vec<f32>>, Vec<Vec<f32>>, String) {
    let d = 384;
    if let Ok(dir) = std::env::var("KASTEN_BENCH_VECTORS") {
        let read = |name: &str| -> Vec<Vec<f32>> {
            let bytes = std::fs::read(std::path::Path::new(&dir).join(name)).unwrap_or_default();
            let floats: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            floats.chunks_exact(d).map(<[f32]>::to_vec).collect()
        };
        let (c, q) = (read("corpus.f32"), read("queries.f32"));
        if !c.is_empty() && !q.is_empty() {
            return (c, q, dir);
        }
    }
    let mut rng = StdRng::seed_from_u64(23);
    let centers: Vec<Vec<f32>> = (0..500)
        .map(|_| (0..d).map(|_| rng.random_range(-1.0f32..1.0)).collect())
        .collect();
    let point = |rng: &mut StdRng| -> Vec<f32> {
        let c = &centers[rng.random_range(0..centers.len())];
        c.iter()
            .map(|x| x + 0.5 * rng.random_range(-1.0f32..1.0))
            .collect()
    };
    let corpus = (0..100_000).map(|_| point(&mut rng)).collect();
    let queries = (0..200).map(|_| point(&mut rng)).collect();
    (corpus, queries, "synthetic".into())
}

fn vector(c: &mut Criterion) {
    let (corpus, queries, source) = bench_vectors();
    let n = corpus.len();
    let ids = ids(n);
    let mut ix = VectorIndex::new(384);
    for (id, v) in ids.iter().zip(&corpus) {
        let _ = ix.upsert(id.clone(), v);
    }
    let recall_at = |ix: &VectorIndex, k: usize| {
        let (mut hit, mut all) = (0, 0);
        for q in &queries {
            let fast = ix.search(q, k).unwrap_or_default();
            let exact = ix.search_exact(q, k).unwrap_or_default();
            all += exact.len();
            hit += exact
                .iter()
                .filter(|e| fast.iter().any(|f| f.0 == e.0))
                .count();
        }
        hit as f64 / all.max(1) as f64
    };
    let recall = |ix: &VectorIndex| recall_at(ix, 10);
    // how recall falls as the prefilter keeps fewer candidates (the default keeps
    // max(1000, n / 100, 8 x the int8 cut))
    if std::env::var_os("KASTEN_BENCH_PREFILTER_SWEEP").is_some() {
        for keep in [2000, 1000, 700, 500, 300] {
            ix.set_prefilter(Some(Prefilter {
                min_len: 0,
                min_candidates: keep,
                fraction: usize::MAX,
                per_cut: 0,
            }));
            eprintln!(
                "prefilter keeping {keep} of {n}: recall@10 {:.4}, recall@30 {:.4}",
                recall_at(&ix, 10),
                recall_at(&ix, 30)
            );
        }
        ix.set_prefilter(Some(Prefilter::default()));
    }
    eprintln!(
        "vector bench: {n} vectors from {source}; recall@10 vs exact f32: prefilter {:.4}",
        recall(&ix)
    );
    let mut group = c.benchmark_group(format!("vector top-10, {n} vectors"));
    group.sample_size(30);
    let mut i = 0;
    group.bench_function("sign-code prefilter + int8 + f32 (default)", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            ix.search(black_box(&queries[i]), 10)
        })
    });
    group.bench_function("sign-code prefilter + int8 + f32, top 30", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            ix.search(black_box(&queries[i]), 30)
        })
    });
    ix.set_prefilter(None);
    group.bench_function("exact int8 scan + f32, threads", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            ix.search(black_box(&queries[i]), 10)
        })
    });
    ix.set_threads(1);
    group.bench_function("exact int8 scan + f32, 1 thread", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            ix.search(black_box(&queries[i]), 10)
        })
    });
    ix.set_prefilter(Some(Prefilter::default()));
    group.finish();
}

fn text(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(29);
    let mut ix = TextIndex::new();
    let n = 100_000;
    for id in ids(n) {
        ix.upsert(id, &synthetic::sentence(&mut rng));
    }
    let queries: Vec<String> = (0..100).map(|_| synthetic::sentence(&mut rng)).collect();
    let mut group = c.benchmark_group(format!("bm25 top-30, {n} short notes"));
    group.sample_size(30);
    let mut i = 0;
    group.bench_function("search", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            ix.search(black_box(&queries[i]), 30)
        })
    });
    group.finish();
    let mut group = c.benchmark_group("bm25 index");
    group.sample_size(10);
    let notes: Vec<String> = (0..10_000).map(|_| synthetic::sentence(&mut rng)).collect();
    let note_ids = ids(10_000);
    group.bench_function("upsert 10k short notes", |b| {
        b.iter(|| {
            let mut ix = TextIndex::new();
            for (id, t) in note_ids.iter().zip(&notes) {
                ix.upsert(id.clone(), t);
            }
            ix
        })
    });
    group.finish();
}

/// Chinese notes: runs of characters drawn from a pool of 600 common ones (the index holds
/// their bigrams and unigrams); queries of four characters and of one.
fn chinese(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(31);
    let pool: Vec<char> = (0x4E00u32..0x4E00 + 600)
        .filter_map(char::from_u32)
        .collect();
    let sentence = |rng: &mut StdRng, len: usize| -> String {
        (0..len)
            .map(|_| pool[rng.random_range(0..pool.len())])
            .collect()
    };
    let n = 20_000;
    let mut ix = TextIndex::new();
    for id in ids(n) {
        let len = rng.random_range(10..40);
        ix.upsert(id, &sentence(&mut rng, len));
    }
    let long: Vec<String> = (0..100).map(|_| sentence(&mut rng, 4)).collect();
    let one: Vec<String> = (0..100).map(|_| sentence(&mut rng, 1)).collect();
    let mut group = c.benchmark_group(format!("bm25 top-30, {n} Chinese notes"));
    group.sample_size(30);
    for (name, queries) in [
        ("four-character query", &long),
        ("one-character query", &one),
    ] {
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                ix.search(black_box(&queries[i]), 30)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fusion, boxes, parsing, vector, text, chinese);
criterion_main!(benches);
