//! Generates a large memory for the graph performance figure (README, "Desktop app"):
//! `KASTEN_PERF_NOTES` notes (default 10,000) on 24 topics, each note linked to 3 earlier
//! notes (mostly of its own topic), so 3 links per note. Notes go through the engine (real
//! embeddings); links are written the way the pipeline writes them (one enrichment
//! transaction per note, through the engine so its indexes follow), so the app sees an
//! ordinary memory.
//!
//! ```sh
//! KASTEN_PERF_HOME=/tmp/kperf cargo test -p kasten-desktop perf_memory -- --ignored --nocapture
//! ```

use std::sync::Arc;

use kasten_core::NewNote;
use kasten_embed::{Embedder, FastEmbedder};
use kasten_engine::Endpoint;
use kasten_engine::Engine;
use kasten_engine::testing::{ApplyMode, ClaimedJob, Enrichment, Fields, LinkWrite};

const TOPICS: [&str; 24] = [
    "garden",
    "piano",
    "rust",
    "climbing",
    "budget",
    "kitchen",
    "travel",
    "reading",
    "running",
    "chess",
    "photography",
    "sailing",
    "pottery",
    "astronomy",
    "cycling",
    "baking",
    "birds",
    "poetry",
    "coffee",
    "carpentry",
    "hiking",
    "movies",
    "language",
    "meditation",
];

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "generates a large memory for a measurement; run by hand"]
async fn perf_memory() -> Result<(), String> {
    let home = std::env::var("KASTEN_PERF_HOME").map_err(|_| "set KASTEN_PERF_HOME")?;
    let n: usize = std::env::var("KASTEN_PERF_NOTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let ep = Endpoint::parse(&format!("surrealkv://{home}/db")).map_err(|e| e.to_string())?;
    let embedder: Arc<dyn Embedder> =
        Arc::new(FastEmbedder::load_default().map_err(|e| e.to_string())?);
    let engine = Engine::open(&ep, embedder, &|_| {})
        .await
        .map_err(|e| e.to_string())?;
    let result = generate(&engine, n).await;
    engine.close().await;
    result
}

async fn generate(engine: &Engine, n: usize) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut rng = Lcg(42);
    let t0 = std::time::Instant::now();
    let mut ids = Vec::with_capacity(n);
    let mut topic_of = Vec::with_capacity(n);
    for chunk in 0..n.div_ceil(500) {
        let notes: Vec<NewNote> = (chunk * 500..((chunk + 1) * 500).min(n))
            .map(|i| {
                let t = rng.below(TOPICS.len());
                topic_of.push(t);
                NewNote::new(&format!(
                    "Note {i} about {}: observation {} with detail {}.",
                    TOPICS[t],
                    rng.below(1000),
                    rng.below(1000)
                ))
                .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        let added = engine.add_batch(notes).await.map_err(|e| err(&e))?;
        ids.extend(added.notes.into_iter().map(|x| x.id));
    }
    eprintln!("{n} notes in {:.1} s", t0.elapsed().as_secs_f64());
    let index: std::collections::HashMap<_, _> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), i))
        .collect();
    let mut links = 0usize;
    let embed_model = engine.embedder().model_id().to_owned();
    let mut make = |job: &ClaimedJob, embedding: Vec<f32>| -> Option<Enrichment> {
        let &i = index.get(&job.note)?;
        let mut targets: Vec<usize> = Vec::new();
        while i >= 3 && targets.len() < 3 {
            // mostly the same topic, sometimes another (links across Boxes)
            let j = rng.below(i);
            let same = topic_of[j] == topic_of[i] || rng.below(10) == 0;
            if same && !targets.contains(&j) {
                targets.push(j);
            }
        }
        let t = TOPICS[topic_of[i]];
        links += targets.len();
        Some(Enrichment {
            read: Default::default(),
            job: job.id.clone(),
            note: job.note.clone(),
            after: Fields {
                keywords: vec![t.into(), "observation".into()],
                tags: vec![t.into()],
                context: format!("An observation about {t}."),
            },
            construction_changes: Vec::new(),
            embedding,
            construction_mode: ApplyMode::Apply,
            tier: None,
            embed_model: embed_model.clone(),
            llm_model: "perf-generator".into(),
            prompt_version: "perf".into(),
            tokens_in: 0,
            tokens_out: 0,
            tokens_estimated: true,
            llm_calls: 0,
            unknown_handles: 0,
            dropped: 0,
            timings_ms: serde_json::json!({}),
            links: targets
                .iter()
                .enumerate()
                .map(|(k, &j)| LinkWrite {
                    to: ids[j].clone(),
                    kind: kasten_core::LinkKind::Relates.as_str().into(),
                    reason: format!("both about {t}"),
                    confidence: 0.8,
                    // one link in ten waits for review (drawn dashed)
                    mode: if k == 0 && rng.below(10) == 0 {
                        ApplyMode::Hold
                    } else {
                        ApplyMode::Apply
                    },
                })
                .collect(),
            updates: vec![],
        })
    };
    // through the engine, so the indexes follow each enrichment as the pipeline's
    engine
        .enrich_queued_with("perf", chrono::Duration::hours(1), &mut make)
        .await
        .map_err(|e| err(&e))?;
    eprintln!("{links} links; total {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}
