//! Micro-benchmarks of the hot paths in kasten-core: rank fusion, Box computation, parsing
//! the construction answer, and mapping citations. Run: `cargo bench -p kasten-core`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kasten_core::boxes::{BoxGraph, BoxParams, detect};
use kasten_core::chat::citations;
use kasten_core::fusion::rrf;
use kasten_core::prompts::Construction;
use kasten_core::{NoteId, Via};
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

criterion_group!(benches, fusion, boxes, parsing);
criterion_main!(benches);
