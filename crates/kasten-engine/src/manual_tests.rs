//! Links made and removed by hand, and a note's text rewritten: recorded in history and
//! undone exactly.

use kasten_core::{LinkStatus, NewNote, NoteId};
use kasten_fakellm::{FakeLlm, Mode};
use kasten_store::Endpoint;

use crate::tests::HashEmbedder;
use crate::{Engine, EngineError, EngineOptions, JobOutcome};

async fn plain() -> Engine {
    Engine::open_with(
        &Endpoint::Mem,
        HashEmbedder::arc("h", 64, 7),
        EngineOptions::default(),
        &|_| {},
    )
    .await
    .unwrap()
}

async fn with_llm(fake: &FakeLlm) -> Engine {
    crate::tests::engine_with_fake(fake, 1).await
}

async fn note(e: &Engine, text: &str) -> NoteId {
    e.add(NewNote::new(text).unwrap()).await.unwrap().id
}

fn adjacent(e: &Engine, a: &NoteId, b: &NoteId) -> bool {
    e.read_indexes()
        .unwrap()
        .links
        .get(a)
        .is_some_and(|v| v.contains(b))
}

#[tokio::test]
async fn a_link_by_hand_is_accepted_in_history_and_rolled_back() {
    let e = plain().await;
    let a = note(&e, "Tea grows on the slopes of Darjeeling").await;
    let b = note(&e, "Monsoon rains shape the flush of tea").await;
    let out = e
        .link(&a, &b, Some("supports"), "same harvest", "user")
        .await
        .unwrap();
    assert_eq!(out.action, "link");
    let link = out.target.clone();
    let d = e.get(&a).await.unwrap();
    let l = d.links.iter().find(|l| l.to == b).unwrap();
    assert_eq!(
        (
            l.kind.as_str(),
            l.reason.as_str(),
            l.created_by.as_str(),
            l.status
        ),
        ("supports", "same harvest", "user", LinkStatus::Accepted)
    );
    assert!(adjacent(&e, &a, &b) && adjacent(&e, &b, &a));
    for id in [&a, &b] {
        let h = e.history(id).await.unwrap();
        assert!(
            h.iter()
                .any(|x| x.action == "link" && x.id.as_deref() == Some(link.as_str())),
            "{h:?}"
        );
    }
    // links made by hand are not waiting for review
    assert!(e.proposals(&[], 50).await.unwrap().is_empty());

    e.rollback(&link, "user").await.unwrap();
    assert!(!adjacent(&e, &a, &b));
    assert!(e.store.accepted_links().await.unwrap().is_empty());

    // linking again takes the rolled-back record over
    let again = e.link(&a, &b, Some("supports"), "", "user").await.unwrap();
    assert_eq!(again.target, link);
    assert!(adjacent(&e, &a, &b));
    e.close().await;
}

#[tokio::test]
async fn a_link_by_hand_defaults_to_relates_and_refuses_bad_input_in_words() {
    let e = plain().await;
    let a = note(&e, "first").await;
    let b = note(&e, "second").await;
    e.link(&a, &b, None, "", "user").await.unwrap();
    let d = e.get(&a).await.unwrap();
    assert_eq!(d.links[0].kind, "relates");

    let again = e.link(&a, &b, None, "", "user").await.unwrap_err();
    assert!(again.to_string().contains("already linked"), "{again}");
    let kind = e.link(&a, &b, Some("likes"), "", "user").await.unwrap_err();
    assert!(
        kind.to_string().contains("'likes' is not a link kind")
            && kind.to_string().contains("supports"),
        "{kind}"
    );
    let own = e.link(&a, &a, None, "", "user").await.unwrap_err();
    assert!(own.to_string().contains("itself"), "{own}");
    let ghost = NoteId::generate();
    assert!(matches!(
        e.link(&a, &ghost, None, "", "user").await,
        Err(EngineError::NotFound(_))
    ));
    e.close().await;
}

#[tokio::test]
async fn unlink_removes_both_directions_and_reapply_brings_a_link_back() {
    let e = plain().await;
    let a = note(&e, "alpha").await;
    let b = note(&e, "beta").await;
    let ab = e.link(&a, &b, None, "", "user").await.unwrap().target;
    let ba = e
        .link(&b, &a, Some("elaborates"), "", "agent")
        .await
        .unwrap()
        .target;
    assert_eq!(
        e.get(&b).await.unwrap().links[1].created_by,
        "agent",
        "an agent's link says so"
    );
    let out = e.unlink(&a, &b, None, "user").await.unwrap();
    assert_eq!(out.links, 2);
    assert!(!adjacent(&e, &a, &b));
    let h = e.history(&a).await.unwrap();
    assert_eq!(h.iter().filter(|x| x.action == "unlink").count(), 2);
    assert!(
        e.unlink(&a, &b, None, "user")
            .await
            .unwrap_err()
            .to_string()
            .contains("not linked")
    );

    e.reapply(&ba, "user").await.unwrap();
    assert!(adjacent(&e, &a, &b));
    let d = e.get(&a).await.unwrap();
    let accepted: Vec<_> = d
        .links
        .iter()
        .filter(|l| l.status == LinkStatus::Accepted)
        .collect();
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].kind, "elaborates");
    // only the kind asked for goes
    e.link(&a, &b, None, "", "user").await.unwrap();
    e.unlink(&a, &b, Some("relates"), "user").await.unwrap();
    assert!(adjacent(&e, &a, &b), "the elaborates link stays");
    assert!(e.store.link(&ab).await.unwrap().unwrap().status == LinkStatus::RolledBack);
    e.close().await;
}

#[tokio::test]
async fn editing_the_text_is_versioned_reindexed_and_rolled_back_exactly() {
    let e = plain().await;
    let id = note(&e, "The ferry to Lindau leaves at nine").await;
    let before = e.get(&id).await.unwrap().note;
    let emb_before = e.store.embedding_of(&id).await.unwrap().unwrap();
    let indexed_before = e
        .read_indexes()
        .unwrap()
        .vector
        .get(&id)
        .unwrap()
        .map(|v| v.to_vec());
    let text = "The ferry to Bregenz leaves at ten,\nfrom pier 3 — 渡轮";
    let out = e.edit_content(&id, text, "user").await.unwrap();
    assert_eq!((out.action.as_str(), out.revisions), ("edit_content", 1));
    let rev = out.target.clone();
    let after = e.get(&id).await.unwrap().note;
    assert_eq!(after.content, text);
    assert!(after.version > before.version);
    let emb_after = e.store.embedding_of(&id).await.unwrap().unwrap();
    assert_ne!(emb_after, emb_before, "re-embedded");
    let indexed_after = e
        .read_indexes()
        .unwrap()
        .vector
        .get(&id)
        .unwrap()
        .map(|v| v.to_vec());
    assert!(
        indexed_after.is_some() && indexed_after != indexed_before,
        "the vector index follows"
    );
    let keyword = |hits: Vec<crate::SearchHit>| {
        hits.into_iter()
            .filter(|h| h.via.contains(&kasten_core::fusion::Via::Keyword))
            .map(|h| h.note.id)
            .collect::<Vec<_>>()
    };
    let hits = e.search("Bregenz", 5).await.unwrap().hits;
    assert_eq!(keyword(hits), vec![id.clone()], "re-indexed");

    let h = e.history(&id).await.unwrap();
    let entry = h
        .iter()
        .find(|x| x.id.as_deref() == Some(rev.as_str()))
        .unwrap();
    assert_eq!(entry.action, "edit");
    assert_eq!(
        entry.content_before.as_deref(),
        Some(before.content.as_str())
    );
    assert_eq!(entry.content_after.as_deref(), Some(text));

    // the same text again changes nothing
    let same = e.edit_content(&id, text, "user").await.unwrap();
    assert_eq!(same.revisions, 0);
    assert!(e.edit_content(&id, "   ", "user").await.is_err());

    e.rollback(&rev, "user").await.unwrap();
    let back = e.get(&id).await.unwrap().note;
    assert_eq!(back.content, before.content);
    assert_eq!(
        e.store.embedding_of(&id).await.unwrap().unwrap(),
        emb_before,
        "nothing else touched the note: the exact embedding"
    );
    assert_eq!(
        e.read_indexes()
            .unwrap()
            .vector
            .get(&id)
            .unwrap()
            .map(|v| v.to_vec()),
        indexed_before
    );
    assert!(keyword(e.search("Bregenz", 5).await.unwrap().hits).is_empty());
    assert!(
        e.rollback(&rev, "user").await.is_err(),
        "not in force any more"
    );
    e.close().await;
}

#[tokio::test]
async fn rolling_back_an_older_text_edit_under_a_later_one_is_refused_by_name() {
    let e = plain().await;
    let id = note(&e, "one").await;
    let first = e.edit_content(&id, "two", "user").await.unwrap().target;
    let second = e.edit_content(&id, "three", "user").await.unwrap().target;
    let err = e.rollback(&first, "user").await.unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)));
    assert!(err.to_string().contains(&second), "{err}");
    e.rollback(&second, "user").await.unwrap();
    e.rollback(&first, "user").await.unwrap();
    assert_eq!(e.get(&id).await.unwrap().note.content, "one");
    e.close().await;
}

#[tokio::test]
async fn an_edited_note_is_enriched_again_with_its_proposals_in_review() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = with_llm(&fake).await;
    let a = note(&e, "Jon opened a dance studio downtown").await;
    e.enrich_note(&a).await.unwrap();
    let b = note(&e, "Gina bought a bakery by the river").await;
    e.enrich_note(&b).await.unwrap();
    let events = e.store.events(10).await.unwrap().len();

    e.edit_content(
        &b,
        "Gina's dance studio competition downtown was a hit",
        "user",
    )
    .await
    .unwrap();
    assert!(
        matches!(
            e.get(&b).await.unwrap().note.enrich_state,
            kasten_core::EnrichState::Pending { .. }
        ),
        "queued again"
    );
    let outcome = e.enrich_note(&b).await.unwrap();
    assert!(
        matches!(outcome, Some(JobOutcome::Done { .. })),
        "{outcome:?}"
    );
    assert_eq!(e.store.events(10).await.unwrap().len(), events + 1);
    let h = e.history(&b).await.unwrap();
    assert_eq!(
        h.iter().filter(|x| x.action == "construction").count(),
        2,
        "constructed again from the new text: {h:?}"
    );
    // the new event's changes wait in Review
    let queue = e.proposals(&[], 50).await.unwrap();
    assert_eq!(
        queue
            .iter()
            .filter(|i| i.note == b.as_str() && i.label == "construction")
            .count(),
        2,
        "{queue:?}"
    );
    e.close().await;
}
