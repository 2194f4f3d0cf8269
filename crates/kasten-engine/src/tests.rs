use std::sync::Mutex;

use super::*;
use kasten_core::Via;

/// An engine on a fresh in-memory store with the test embedder and `fake` as its LLM (no
/// client retries), running `workers` enrichment jobs at a time.
pub(crate) async fn engine_with_fake(fake: &kasten_fakellm::FakeLlm, workers: usize) -> Engine {
    engine_with_fake_and(fake, workers, HashEmbedder::arc("h", 64, 7)).await
}

/// [`engine_with_fake`] with another embedder.
pub(crate) async fn engine_with_fake_and(
    fake: &kasten_fakellm::FakeLlm,
    workers: usize,
    embedder: Arc<dyn Embedder>,
) -> Engine {
    let config = kasten_llm::LlmConfig {
        provider: kasten_llm::Provider::Openai,
        base_url: fake.openai_base_url(),
        model: "fake".into(),
        api_key: None,
    };
    let llm = kasten_llm::LlmClient::new(
        config,
        kasten_llm::ClientOptions {
            max_retries: 0,
            ..kasten_llm::ClientOptions::default()
        },
    )
    .unwrap();
    let options = EngineOptions {
        llm: Some(llm),
        pipeline: PipelineOptions {
            workers,
            ..PipelineOptions::default()
        },
        storage: None,
    };
    Engine::open_with(&kasten_store::Endpoint::Mem, embedder, options, &|_| {})
        .await
        .unwrap()
}

/// A deterministic bag-of-words embedder (feature hashing): enough to test the engine's
/// logic without the real model. `salt` makes two "models" with different vectors.
pub(crate) struct HashEmbedder {
    id: String,
    dim: usize,
    salt: u64,
}

impl HashEmbedder {
    pub(crate) fn arc(id: &str, dim: usize, salt: u64) -> Arc<dyn Embedder> {
        Arc::new(Self {
            id: id.into(),
            dim,
            salt,
        })
    }
}

impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; self.dim];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let mut h = self.salt ^ 0xcbf29ce484222325;
                    for b in w.to_lowercase().bytes() {
                        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
                    }
                    v[(h % self.dim as u64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

fn quiet() -> ProgressFn<'static> {
    &|_| {}
}

async fn open(ep: &Endpoint, e: Arc<dyn Embedder>) -> Engine {
    match Engine::open(ep, e, quiet()).await {
        Ok(x) => x,
        Err(err) => panic!("open: {err}"),
    }
}

fn new(s: &str) -> NewNote {
    NewNote::new(s).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn hybrid_search_finds_notes_and_says_how() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem, HashEmbedder::arc("h", 64, 1)).await;
    let a = e
        .add(new("Caroline went to the LGBTQ support group yesterday"))
        .await?;
    let _b = e
        .add(new("Melanie painted a sunrise over the lake"))
        .await?;
    let _c = e.add(new("The quarterly report is due on Friday")).await?;
    let out = e.search("support group", 2).await?;
    assert_eq!(out.hits[0].note.id, a.id);
    assert!(out.hits[0].via.contains(&Via::Keyword));
    assert!(out.hits[0].via.contains(&Via::Vector));
    assert!(out.hits.len() <= 2);
    assert!(matches!(
        e.search("   ", 5).await,
        Err(EngineError::EmptyQuery)
    ));
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn deleted_notes_leave_search_and_unknown_ids_are_not_found() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem, HashEmbedder::arc("h", 64, 1)).await;
    let a = e.add(new("alpha bravo charlie")).await?;
    e.delete(&a.id).await?;
    assert!(e.search("alpha bravo", 5).await?.hits.is_empty());
    assert!(matches!(
        e.delete(&a.id).await,
        Err(EngineError::NotFound(_))
    ));
    assert!(matches!(e.get(&a.id).await, Err(EngineError::NotFound(_))));
    assert_eq!(e.index_sizes()?, (0, 0));
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn indexes_are_rebuilt_from_the_store_at_open() -> Result<(), EngineError> {
    let dir = tempfile::tempdir().map_err(|e| EngineError::Internal(e.to_string()))?;
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let e = open(&ep, HashEmbedder::arc("h", 64, 1)).await;
    let batch = e
        .add_batch(
            (0..30)
                .map(|i| new(&format!("note number {i} about topic{i}")))
                .collect(),
        )
        .await?;
    e.close().await;
    let e = open(&ep, HashEmbedder::arc("h", 64, 1)).await;
    assert_eq!(e.index_sizes()?, (30, 30));
    let out = e.search("topic17", 3).await?;
    assert_eq!(
        out.hits.first().map(|h| h.note.id.clone()),
        Some(batch.notes[17].id.clone())
    );
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn switching_models_reembeds_everything_with_progress() -> Result<(), EngineError> {
    let dir = tempfile::tempdir().map_err(|e| EngineError::Internal(e.to_string()))?;
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let e = open(&ep, HashEmbedder::arc("model-a", 64, 1)).await;
    e.add_batch(
        (0..10)
            .map(|i| new(&format!("fact {i} concerns subject{i}")))
            .collect(),
    )
    .await?;
    e.close().await;

    let seen = Mutex::new(Vec::new());
    let record = |p: Progress| {
        if let Ok(mut s) = seen.lock() {
            s.push(p);
        }
    };
    let b = HashEmbedder::arc("model-b", 32, 2);
    let e = Engine::open(&ep, Arc::clone(&b), &record).await?;
    let seen = seen.into_inner().unwrap_or_default();
    assert!(
        seen.contains(&Progress::Reembedding {
            done: 10,
            total: 10
        }),
        "{seen:?}"
    );
    assert_eq!(
        e.store().get_setting(EMBEDDING_SETTING).await?,
        Some(serde_json::json!({"model": "model-b", "dim": 32}))
    );
    // every vector now comes from model-b: a note's own text finds it with cosine 1
    let v = b
        .embed(&["fact 3 concerns subject3"])?
        .pop()
        .unwrap_or_default();
    let top = e.rank_vector(&v, 1)?;
    assert!((top[0].1 - 1.0).abs() < 1e-4, "{top:?}");
    e.close().await;

    // reopening with the same model re-embeds nothing
    let seen = Mutex::new(Vec::new());
    let record = |p: Progress| {
        if let Ok(mut s) = seen.lock() {
            s.push(p);
        }
    };
    let e = Engine::open(&ep, b, &record).await?;
    let seen = seen.into_inner().unwrap_or_default();
    assert!(
        !seen
            .iter()
            .any(|p| matches!(p, Progress::Reembedding { .. })),
        "{seen:?}"
    );
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn a_failed_write_leaves_the_index_unchanged() -> Result<(), EngineError> {
    // an embedder that returns the wrong dimension makes the batch fail before storing
    struct Bad;
    impl Embedder for Bad {
        fn model_id(&self) -> &str {
            "bad"
        }
        fn dim(&self) -> usize {
            8
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Err(EmbedError::Count {
                expected: texts.len(),
                got: 0,
            })
        }
    }
    let e = open(&Endpoint::Mem, Arc::new(Bad)).await;
    assert!(e.add(new("will not be stored")).await.is_err());
    assert_eq!(e.count().await?, 0);
    assert_eq!(e.index_sizes()?, (0, 0));
    e.close().await;
    Ok(())
}

/// The hash embedder, failing on any text that holds `poison`.
struct PoisonedEmbedder(Arc<dyn Embedder>);

impl Embedder for PoisonedEmbedder {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.iter().any(|t| t.contains("poison")) {
            return Err(EmbedError::Inference("poisoned text".into()));
        }
        self.0.embed(texts)
    }
}

fn batches(contents: &[&[&str]]) -> Vec<Vec<NewNote>> {
    contents
        .iter()
        .map(|b| b.iter().map(|s| new(s)).collect())
        .collect()
}

#[tokio::test]
async fn batches_embedded_ahead_are_saved_in_order_and_all_indexed() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem, HashEmbedder::arc("h", 64, 1)).await;
    let mut seen: Vec<Vec<String>> = Vec::new();
    e.add_batches(
        batches(&[
            &["alpha one", "alpha two"],
            &["beta one"],
            &["gamma one", "gamma two", "gamma three"],
        ]),
        |b| seen.push(b.notes.iter().map(|n| n.content.clone()).collect()),
    )
    .await?;
    assert_eq!(
        seen,
        vec![
            vec!["alpha one", "alpha two"],
            vec!["beta one"],
            vec!["gamma one", "gamma two", "gamma three"],
        ]
    );
    assert_eq!(e.count().await?, 6);
    assert_eq!(e.index_sizes()?.0, 6);
    let hit = e.search("beta", 1).await?;
    assert_eq!(
        hit.hits.first().map(|h| h.note.content.as_str()),
        Some("beta one")
    );
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn a_batch_that_fails_stops_the_run_and_keeps_the_batches_before_it()
-> Result<(), EngineError> {
    let e = open(
        &Endpoint::Mem,
        Arc::new(PoisonedEmbedder(HashEmbedder::arc("h", 64, 1))),
    )
    .await;
    let mut saved = 0;
    let out = e
        .add_batches(
            batches(&[
                &["first batch a", "first batch b"],
                &["second batch a"],
                &["third batch poison", "third batch b"],
                &["fourth batch a"],
            ]),
            |b| saved += b.notes.len(),
        )
        .await;
    assert!(matches!(out, Err(EngineError::Embed(_))), "{out:?}");
    assert_eq!(saved, 3);
    // the batches before the failing one are stored and indexed, the rest is not
    assert_eq!(e.count().await?, 3);
    assert_eq!(e.index_sizes()?.0, 3);
    let listed: Vec<String> = e
        .list(10, 0)
        .await?
        .into_iter()
        .map(|n| n.content)
        .collect();
    assert!(
        listed
            .iter()
            .all(|c| !c.starts_with("third") && !c.starts_with("fourth")),
        "{listed:?}"
    );
    e.close().await;
    Ok(())
}
