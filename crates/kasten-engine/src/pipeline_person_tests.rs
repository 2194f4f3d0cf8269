//! What a person set survives enrichment: construction and evolution only propose to
//! change it, an edit during enrichment makes the job run again, and the quality check
//! reads the reasons of evolutions (against kasten-fakellm, as `pipeline_tests.rs`).

use std::time::Duration;

use kasten_core::{EnrichState, NewNote, NoteId, Via};
use kasten_fakellm::{FakeLlm, Mode};
use kasten_llm::Provider;

use crate::pipeline_tests::engine_with;
use crate::{Engine, JobOutcome};

/// An LLM answer to the link-and-evolve prompt that removes `tags` from every neighbour
/// shown and replaces their context: what a person set must only ever be proposed.
fn evolve_everything(view: &kasten_fakellm::RequestView, tags: &[&str]) -> Option<String> {
    if view.schema_name() != Some("link_and_evolve") {
        return None;
    }
    let handles: Vec<String> = (1..=10)
        .map(|i| format!("N{i}"))
        .filter(|h| view.last_user().contains(&format!("{h} ")))
        .collect();
    let updates: Vec<serde_json::Value> = handles
        .iter()
        .map(|h| {
            let mut ops: Vec<serde_json::Value> = tags
                .iter()
                .map(|t| serde_json::json!({"op": "remove_tag", "tag": t, "reason": "both notes are about Rust"}))
                .collect();
            ops.push(serde_json::json!({"op": "set_context", "context": "A note about the Rust ecosystem", "reason": "both notes are about Rust"}));
            serde_json::json!({"target": h, "ops": ops})
        })
        .collect();
    Some(serde_json::json!({"links": [], "updates": updates, "note_tags": []}).to_string())
}

/// Evolutions of `note` waiting in Review.
async fn proposed(e: &Engine, note: &NoteId) -> usize {
    e.store()
        .revisions_where(Some(note), None)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.reason == "evolution" && r.status == kasten_core::RevisionStatus::Proposed)
        .count()
}

#[tokio::test]
async fn what_a_person_set_survives_construction_and_evolution_only_proposes_to_change_it() {
    use kasten_core::markdown::{VaultFile, plan_vault};
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine_with(&fake, Provider::Openai, Duration::from_secs(10), 3).await;
    // a vault note with front-matter tags, imported as not enriched
    let vault = vec![VaultFile {
        path: "Rust.md".into(),
        bytes: Some(
            b"---\ntags: [shelf-seven]\n---\nRust is a language with a borrow checker.\n".to_vec(),
        ),
        modified: None,
    }];
    let plan = plan_vault("v", &vault);
    let a = e
        .import_notes(plan.notes, &plan.links, 10, &|_| {})
        .await
        .unwrap()
        .ids[0]
        .clone();
    // a note the user tags and describes by hand while it is still pending
    let b = e
        .add(NewNote::new("Tokio is an async runtime for Rust programs").unwrap())
        .await
        .unwrap()
        .id;
    let edit = crate::FieldEdit {
        tags: Some(vec!["my-runtime".into()]),
        context: Some("What I use at work".into()),
        ..Default::default()
    };
    e.edit_note(&b, &edit, "user", "").await.unwrap();
    e.run_pending(&|_| {}).await.unwrap();
    let (na, nb) = (e.get(&a).await.unwrap().note, e.get(&b).await.unwrap().note);
    assert_eq!(na.enrich_state, EnrichState::Done);
    assert_eq!(nb.enrich_state, EnrichState::Done);
    assert_eq!(
        na.tags.first().map(String::as_str),
        Some("shelf-seven"),
        "{:?}",
        na.tags
    );
    assert!(na.tags.len() > 1, "the LLM's tags are added: {:?}", na.tags);
    assert_eq!(
        nb.tags.first().map(String::as_str),
        Some("my-runtime"),
        "{:?}",
        nb.tags
    );
    assert_eq!(nb.context, "What I use at work");
    let files = e.export_vault(&[]).await.unwrap();
    let rust = files
        .iter()
        .find(|f| f.text.contains("borrow checker"))
        .unwrap();
    assert!(
        rust.text.contains("shelf-seven"),
        "exported again:\n{}",
        rust.text
    );

    let held_before = proposed(&e, &b).await;
    // evolution that removes a person's tag or replaces their context is held for review
    fake.set_responder(|v| evolve_everything(v, &["shelf-seven", "my-runtime"]));
    e.add(NewNote::new("Cargo builds Rust crates and fetches their dependencies").unwrap())
        .await
        .unwrap();
    e.run_pending(&|_| {}).await.unwrap();
    let (na2, nb2) = (e.get(&a).await.unwrap().note, e.get(&b).await.unwrap().note);
    assert!(
        na2.tags.contains(&"shelf-seven".to_owned()),
        "{:?}",
        na2.tags
    );
    assert!(
        nb2.tags.contains(&"my-runtime".to_owned()),
        "{:?}",
        nb2.tags
    );
    assert_eq!(nb2.context, "What I use at work");
    assert_eq!(
        proposed(&e, &b).await,
        held_before + 1,
        "the change is in Review"
    );
    e.close().await;
}

#[tokio::test]
async fn an_edit_during_enrichment_makes_the_job_run_again_on_the_new_text() {
    let fake = FakeLlm::start(Mode::Slow { delay_ms: 600 }).await.unwrap();
    let e = engine_with(&fake, Provider::Openai, Duration::from_secs(10), 3).await;
    let id = e
        .add(NewNote::new("The ferry to Lindau leaves at nine").unwrap())
        .await
        .unwrap()
        .id;
    // this note's job alone, so that the job the edit queues does not mend it afterwards
    let run = e.enrich_note(&id);
    let edit = async {
        // the first LLM call is under way
        while fake.request_count() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        e.edit_content(&id, "The ferry to Bregenz leaves at ten", "user")
            .await
            .unwrap();
    };
    let (outcome, ()) = tokio::join!(run, edit);
    assert!(
        matches!(outcome, Ok(Some(JobOutcome::Done { .. }))),
        "{outcome:?}"
    );
    let n = e.get(&id).await.unwrap().note;
    assert_eq!(n.enrich_state, EnrichState::Done);
    let hits = e.search("Bregenz", 5).await.unwrap().hits;
    assert!(
        hits.iter()
            .any(|h| h.note.id == id && h.via.contains(&Via::Keyword)),
        "the new word is in the keyword index"
    );
    let stored = e.store().embedding_of(&id).await.unwrap().unwrap();
    let expected = e
        .embedder()
        .embed(&[n.index_text().as_str()])
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(stored, expected, "the stored embedding is the new text's");
    e.close().await;
}

#[tokio::test]
async fn an_evolution_the_quality_check_would_flag_is_not_stored_and_one_it_passes_is_read() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine_with(&fake, Provider::Openai, Duration::from_secs(10), 3).await;
    let first = e
        .add(NewNote::new("Tokio is an async runtime for Rust programs").unwrap())
        .await
        .unwrap()
        .id;
    e.run_pending(&|_| {}).await.unwrap();
    let context_before = e.get(&first).await.unwrap().note.context;
    // both shown notes (the third note sees two) are evolved with the same reason
    let answer_with = |reason: &'static str| {
        move |v: &kasten_fakellm::RequestView| {
            if v.schema_name() != Some("link_and_evolve") {
                return None;
            }
            let ops = serde_json::json!([
                {"op": "set_context", "context": "A runtime that Cargo projects depend on", "reason": reason}
            ]);
            let handles = v.schema.as_ref()?["properties"]["updates"]["items"]["properties"]
                ["target"]["enum"]
                .as_array()?
                .clone();
            let updates: Vec<serde_json::Value> = handles
                .iter()
                .map(|h| serde_json::json!({"target": h, "ops": ops}))
                .collect();
            Some(serde_json::json!({"links": [], "updates": updates, "note_tags": []}).to_string())
        }
    };
    // a reason in the prompt's words: not stored, counted on the event
    fake.set_responder(answer_with("the schema says it is a dependency"));
    e.add(NewNote::new("Cargo builds Rust crates and fetches their dependencies").unwrap())
        .await
        .unwrap();
    e.run_pending(&|_| {}).await.unwrap();
    assert_eq!(e.get(&first).await.unwrap().note.context, context_before);
    let r = e.quality_report(100).await.unwrap();
    assert_eq!(r.evolutions, 0, "{r:#?}");
    let events = e.events(10).await.unwrap();
    assert!(events[0].dropped >= 1, "{events:#?}");
    // a reason naming what both notes are about is stored, and the check reads it against
    // the note that led to it ("Rust" is a word of all three)
    fake.set_responder(answer_with("both are about Rust"));
    e.add(NewNote::new("Cargo.lock pins the versions of a Rust crate's dependencies").unwrap())
        .await
        .unwrap();
    e.run_pending(&|_| {}).await.unwrap();
    assert_eq!(
        e.get(&first).await.unwrap().note.context,
        "A runtime that Cargo projects depend on"
    );
    let r = e.quality_report(100).await.unwrap();
    assert_eq!(
        (
            r.evolutions,
            r.evolutions_with_source,
            r.evolutions_naming_shared
        ),
        (2, 2, 2),
        "{r:#?}"
    );
    assert!(r.passed, "{r:#?}");
    e.close().await;
}
