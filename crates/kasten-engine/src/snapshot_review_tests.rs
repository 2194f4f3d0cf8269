//! The index snapshot after enrichment, review and edits: accepted links, archived and
//! merged notes, and a model swap are in the next snapshot exactly as a rebuild has them.

use super::tests::HashEmbedder;
use super::*;
use crate::snapshot_tests::{assert_snapshot_equals_rebuild, fingerprint, new, open, quiet};

/// An engine on `ep` with the fake LLM for enrichment (the same embedder as [`open`]).
async fn open_with_llm(ep: &Endpoint, fake: &kasten_fakellm::FakeLlm) -> Engine {
    let config = kasten_llm::LlmConfig {
        provider: kasten_llm::Provider::Openai,
        base_url: fake.openai_base_url(),
        model: "fake".into(),
        api_key: None,
    };
    let options = kasten_llm::ClientOptions {
        max_retries: 0,
        ..kasten_llm::ClientOptions::default()
    };
    let llm = kasten_llm::LlmClient::new(config, options).unwrap_or_else(|err| panic!("{err}"));
    let options = EngineOptions {
        llm: Some(llm),
        ..EngineOptions::default()
    };
    Engine::open_with(ep, HashEmbedder::arc("h", 48, 1), options, quiet())
        .await
        .unwrap_or_else(|err| panic!("open: {err}"))
}

/// Accepting every link above a confidence changes the link index: a session opened from
/// the snapshot that does only that leaves a snapshot the next open reads as a rebuild.
#[tokio::test]
async fn accepting_all_links_above_a_confidence_is_in_the_next_snapshot() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let fake = kasten_fakellm::FakeLlm::start(kasten_fakellm::Mode::Normal)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let e = open_with_llm(&ep, &fake).await;
    e.set_policy(&Policy {
        links: PolicyMode::Review,
        edits: PolicyMode::Review,
        auto_accept_confidence: None,
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    for t in [
        "Melanie runs a pottery studio",
        "Melanie's pottery studio opens in June",
        "The pottery studio sells bowls",
    ] {
        e.add(new(t, None))
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
    e.run_pending(&|_| {})
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.close().await;
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    assert!(fingerprint(&e).links.is_empty(), "links were proposed only");
    let accepted = e
        .accept_links_above(0.0, "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(accepted > 0);
    let fp = fingerprint(&e);
    assert!(!fp.links.is_empty());
    e.close().await;
    let e = open(&ep).await;
    assert_eq!(fingerprint(&e), fp);
    e.close().await;
    assert_snapshot_equals_rebuild(&ep).await;
}

/// Whether a search for `query` returns `id`, and whether the indexes hold it at all.
async fn found(e: &Engine, query: &str, id: &NoteId) -> (bool, bool) {
    let hits = e
        .search(query, 20)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let indexed = e
        .indexed_ids()
        .unwrap_or_else(|err| panic!("{err}"))
        .contains(id);
    (hits.hits.iter().any(|h| &h.note.id == id), indexed)
}

/// Only active notes are in the indexes: an archived or a merged note whose annotations
/// are edited, and whose edit is rolled back, stays out of search, in the session and in
/// the snapshot its close writes. A status change is a change of the note (its version).
#[tokio::test]
async fn archived_and_merged_notes_stay_out_of_search_after_an_edit_or_a_rollback() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let e = open(&ep).await;
    e.add(new("a note about chess in the garden", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let archived = e
        .add(new("the zebra crossing on elm street", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"))
        .id;
    let batch = e
        .add_batch_merging(vec![
            new("the heron by the quiet pond", None),
            new("the heron by the quiet pond", None),
        ])
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(batch.merges.len(), 1);
    let merged = batch.merges[0].note.clone();
    let version = |n: NoteDetail| n.note.version;
    let before = version(e.get(&archived).await.unwrap_or_else(|err| panic!("{err}")));
    e.archive(&archived, "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let after = version(e.get(&archived).await.unwrap_or_else(|err| panic!("{err}")));
    assert!(after > before, "archiving left the version at {after}");
    let cases = [
        (&archived, "zebra crossing elm street"),
        (&merged, "heron quiet pond"),
    ];
    let edit = FieldEdit {
        keywords: Some(vec!["crossing".into()]),
        tags: Some(vec!["street".into()]),
        context: None,
    };
    for (id, query) in cases {
        assert_eq!(found(&e, query, id).await, (false, false), "{query}");
        e.edit_note(id, &edit, "user", "test")
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(found(&e, query, id).await, (false, false), "{query}: edit");
        let rev = e
            .store()
            .revisions_where(Some(id), None)
            .await
            .unwrap_or_else(|err| panic!("{err}"))
            .pop()
            .unwrap_or_else(|| panic!("no revision"));
        e.rollback(&rev.id, "user")
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            found(&e, query, id).await,
            (false, false),
            "{query}: rollback"
        );
        e.edit_note(id, &edit, "user", "test again")
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
    e.close().await;
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    for (id, query) in cases {
        assert_eq!(
            found(&e, query, id).await,
            (false, false),
            "{query}: reopened"
        );
    }
    e.close().await;
    assert_snapshot_equals_rebuild(&ep).await;
}

/// A memory reopened with another model of the same dimension: the notes out of the
/// indexes (archived, merged) still hold the old model's vectors; one that comes back
/// (restored, its merge rolled back) is embedded by the new model, never with the old
/// vector.
#[tokio::test]
async fn a_note_back_after_a_model_swap_of_the_same_dimension_gets_the_new_models_vector() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let e = open(&ep).await;
    e.add(new("a note about chess in the garden", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let archived = e
        .add(new("the zebra crossing on elm street", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"))
        .id;
    let batch = e
        .add_batch_merging(vec![
            new("the heron by the quiet pond", None),
            new("the heron by the quiet pond", None),
        ])
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(batch.merges.len(), 1);
    let (merged, merge_event) = (batch.merges[0].note.clone(), batch.merges[0].event.clone());
    e.archive(&archived, "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.close().await;

    let other = HashEmbedder::arc("other", 48, 9);
    let e = Engine::open(&ep, Arc::clone(&other), quiet())
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.restore_archived(&archived, "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.rollback(&merge_event, "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    for id in [&archived, &merged] {
        let note = e.get(id).await.unwrap_or_else(|err| panic!("{err}")).note;
        assert_eq!(note.status, NoteStatus::Active);
        let want = other
            .embed(&[note.index_text().as_str()])
            .unwrap_or_else(|err| panic!("{err}"))
            .pop()
            .unwrap_or_default();
        let got = e
            .vector_of(id)
            .unwrap_or_else(|err| panic!("{err}"))
            .unwrap_or_else(|| panic!("{id} is not indexed"));
        let off = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            off < 1e-5,
            "{id}: the indexed vector is not the new model's ({off})"
        );
        let stored = e
            .store()
            .embedding_with_model(id)
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(stored.map(|(_, m)| m), Some(Some("other".to_owned())));
    }
    e.close().await;
}
