//! Memory features in the engine: chat with citations, merge on write under both policies,
//! archive/restore, reinforcement, and Boxes.

use std::sync::Mutex;
use std::time::Duration;

use kasten_core::lifecycle::{Reinforce, Tier};
use kasten_core::{NewNote, NoteId, NoteStatus};
use kasten_fakellm::{FakeLlm, Mode};
use kasten_llm::{LlmClient, Provider};
use kasten_store::Endpoint;

use crate::tests::HashEmbedder;
use crate::{Engine, EngineOptions, PipelineOptions, Policy, PolicyMode, Retrieval};

fn client(fake: &FakeLlm) -> LlmClient {
    crate::pipeline_tests::client(fake, Provider::Openai, Duration::from_secs(10))
}

async fn engine(fake: Option<&FakeLlm>) -> Engine {
    let options = EngineOptions {
        llm: fake.map(client),
        pipeline: PipelineOptions::default(),
        storage: None,
    };
    Engine::open_with(
        &Endpoint::Mem,
        HashEmbedder::arc("h", 128, 3),
        options,
        &|_| {},
    )
    .await
    .unwrap()
}

const NOTES: &[&str] = &[
    "My cat is called Miso and she loves tuna",
    "Anna's birthday is on May 3rd and she likes orchids",
    "I parked the car on level 3 of the Central garage",
    "The quarterly report for the Rust migration is due on Friday",
];

async fn add_all(e: &Engine) -> Vec<NoteId> {
    let mut ids = Vec::new();
    for n in NOTES {
        ids.push(e.add(NewNote::new(n).unwrap()).await.unwrap().id);
    }
    ids
}

#[tokio::test]
async fn answers_cite_only_notes_shown_to_the_model_and_stream() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(Some(&fake)).await;
    let ids = add_all(&e).await;
    let streamed = Mutex::new(String::new());
    let a = e
        .ask("what is my cat called", &[], &|t| {
            streamed.lock().unwrap().push_str(t)
        })
        .await
        .unwrap();
    assert!(!a.not_in_memory, "{a:?}");
    assert!(!a.citations.is_empty());
    let shown: Vec<&NoteId> = a.notes.iter().map(|n| &n.id).collect();
    for c in &a.citations {
        assert!(shown.contains(&c), "cited {c} was not shown");
    }
    assert_eq!(a.citations[0], ids[0]);
    // what was streamed is the model's text; the answer is it tidied (the test server
    // opens with "According to my notes, …", an opening that only names the source)
    let streamed = streamed.lock().unwrap().clone();
    assert!(
        streamed.starts_with("According to my notes, "),
        "{streamed}"
    );
    assert_eq!(kasten_core::chat::tidy_answer(&streamed), a.answer);
    assert!(!a.answer.starts_with("According"), "{a:?}");
    // what the model saw: the cited note's text under its number
    let reqs = fake.requests();
    let last = reqs.last().unwrap();
    let body = last.body.to_string();
    assert!(body.contains("[1]") && body.contains("My cat is called Miso"));
    // reinforcement: the cited note was used once
    let n = e.store().get_note(&ids[0]).await.unwrap().unwrap();
    assert_eq!(n.access_count, 1);
    assert!(n.last_accessed.is_some());
    e.close().await;
}

#[tokio::test]
async fn an_unrelated_question_is_not_in_memory_without_calling_the_model() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(Some(&fake)).await;
    add_all(&e).await;
    let before = fake.requests().len();
    let a = e
        .ask("which volcano erupted in Iceland", &[], &|_| {})
        .await
        .unwrap();
    assert!(a.not_in_memory);
    assert_eq!(a.answer, "Not in memory.");
    assert!(a.citations.is_empty() && a.notes.is_empty());
    assert_eq!(fake.requests().len(), before, "no LLM call was needed");
    e.close().await;
}

#[tokio::test]
async fn small_talk_skips_retrieval() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(Some(&fake)).await;
    add_all(&e).await;
    let a = e.ask("hello!", &[], &|_| {}).await.unwrap();
    assert!(matches!(a.retrieval, Retrieval::Skipped { .. }));
    assert!(a.notes.is_empty() && a.citations.is_empty());
    // the prompt carried no notes
    let body = fake.requests().last().unwrap().body.to_string();
    assert!(!body.contains("Miso"));
    // without an LLM, small talk is still answered
    let offline = engine(None).await;
    let a = offline.ask("thanks", &[], &|_| {}).await.unwrap();
    assert!(matches!(a.retrieval, Retrieval::Skipped { .. }));
    e.close().await;
    offline.close().await;
}

#[tokio::test]
async fn follow_ups_send_history_and_retrieve_with_the_previous_question() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(Some(&fake)).await;
    let ids = add_all(&e).await;
    let first = e
        .ask("when is Anna's birthday", &[], &|_| {})
        .await
        .unwrap();
    e.record_chat("s", "when is Anna's birthday", &first)
        .await
        .unwrap();
    let history = e.chat_history("s", 6).await.unwrap();
    assert_eq!(history.len(), 2);
    let a = e
        .ask("and what does she like", &history, &|_| {})
        .await
        .unwrap();
    assert!(a.notes.iter().any(|n| n.id == ids[1]), "{a:?}");
    let body = fake.requests().last().unwrap().body.to_string();
    assert!(body.contains("when is Anna's birthday"));
    e.close().await;
}

#[tokio::test]
async fn near_duplicates_become_merge_proposals_under_both_policies() {
    for mode in [PolicyMode::Auto, PolicyMode::Review] {
        let e = engine(None).await;
        e.set_policy(&Policy {
            links: mode,
            edits: mode,
            auto_accept_confidence: None,
        })
        .await
        .unwrap();
        let ids = add_all(&e).await;
        let count = e.count().await.unwrap();
        let b = e
            .add_batch_merging(vec![
                NewNote::new("My cat is called Miso, and she loves tuna!").unwrap(),
            ])
            .await
            .unwrap();
        assert_eq!(b.merges.len(), 1, "{mode:?}");
        let m = &b.merges[0];
        assert_eq!(m.duplicate_of, ids[0]);
        assert_eq!(
            m.status,
            if mode == PolicyMode::Auto {
                kasten_core::LinkStatus::Accepted
            } else {
                kasten_core::LinkStatus::Proposed
            }
        );
        // not a second note: not listed, not retrieved
        let listed = e.list(100, 0).await.unwrap();
        assert_eq!(listed.len() as u64, count);
        // the old note was reinforced (as repeated; the search below reinforces it again)
        let old = e.store().get_note(&ids[0]).await.unwrap().unwrap();
        assert_eq!(old.access_count, 1);
        let hits = e.search("cat called Miso", 10).await.unwrap().hits;
        assert!(hits.iter().all(|h| h.note.id != m.note));
        // the new text is kept
        let dup = e.store().get_note(&m.note).await.unwrap().unwrap();
        assert_eq!(dup.status, NoteStatus::Merged);
        // it is in the review queue
        let queue = e.proposals(&[], 50).await.unwrap();
        let item = queue.iter().find(|i| i.label == "same-entity").unwrap();
        // rejecting the merge makes it a note of its own
        e.reject(&item.id, "user").await.unwrap();
        let dup = e.store().get_note(&m.note).await.unwrap().unwrap();
        assert_eq!(dup.status, NoteStatus::Active);
        let hits = e.search("cat called Miso tuna", 10).await.unwrap().hits;
        assert!(hits.iter().any(|h| h.note.id == m.note));
        assert_eq!(e.store().job_counts().await.unwrap().queued, 5);
        e.close().await;
    }
}

/// A correction reads like what it corrects, but a negation or a change word is a fact:
/// it is a note of its own, linked `contradicts` for review, never merged.
#[tokio::test]
async fn a_correction_is_not_merged_into_what_it_corrects() {
    let e = engine(None).await;
    // thresholds at which the two notes (and the control pair) are merge candidates
    e.set_merge_options(&crate::MergeOptions {
        enabled: true,
        min_cosine: 0.8,
        min_jaccard: 0.6,
        supersede: true,
        supersede_llm: true,
    })
    .await
    .unwrap();
    let old = e
        .add_batch_merging(vec![
            NewNote::new("The deploy script requires sudo").unwrap(),
        ])
        .await
        .unwrap();
    let b = e
        .add_batch_merging(vec![
            NewNote::new("The deploy script no longer requires sudo").unwrap(),
        ])
        .await
        .unwrap();
    assert!(b.merges.is_empty(), "{:?}", b.merges);
    assert_eq!(b.notes[0].status, NoteStatus::Active);
    let queue = e.proposals(&[], 50).await.unwrap();
    let item = queue
        .iter()
        .find(|i| i.label == "contradicts")
        .unwrap_or_else(|| panic!("no contradicts link in {queue:?}"));
    assert_eq!(item.note, b.notes[0].id.to_string());
    assert_eq!(item.target.as_deref(), Some(old.notes[0].id.as_str()));
    assert!(item.reason.contains("no longer"), "{}", item.reason);
    // the same sentence told again is still merged at these thresholds
    let again = e
        .add_batch_merging(vec![
            NewNote::new("The deploy script requires sudo!").unwrap(),
        ])
        .await
        .unwrap();
    assert_eq!(again.merges.len(), 1);
    assert_eq!(again.merges[0].duplicate_of, old.notes[0].id);
    e.close().await;
}

#[tokio::test]
async fn the_same_words_at_different_times_are_different_events() {
    let e = engine(None).await;
    let day = |d| {
        chrono::DateTime::parse_from_rfc3339(&format!("2023-07-{d:02}T12:00:00Z"))
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let b = e
        .add_batch_merging(vec![
            NewNote::new("went hiking with the dog")
                .unwrap()
                .at(Some(day(1))),
            NewNote::new("went hiking with the dog")
                .unwrap()
                .at(Some(day(9))),
            NewNote::new("went hiking with the dog!")
                .unwrap()
                .at(Some(day(9))),
        ])
        .await
        .unwrap();
    assert_eq!(b.merges.len(), 1);
    assert_eq!(b.merges[0].duplicate_of, b.notes[1].id);
    // a bulk import keeps every record
    let b = e
        .add_batch(vec![
            NewNote::new("went hiking with the dog")
                .unwrap()
                .at(Some(day(9))),
        ])
        .await
        .unwrap();
    assert!(b.merges.is_empty());
    assert_eq!(b.notes[0].status, NoteStatus::Active);
    e.close().await;
}

#[tokio::test]
async fn archive_and_restore_round_trip() {
    let e = engine(None).await;
    let ids = add_all(&e).await;
    let before = e.get(&ids[2]).await.unwrap();
    e.archive(&ids[2], "user").await.unwrap();
    assert_eq!(
        e.store().get_note(&ids[2]).await.unwrap().unwrap().status,
        NoteStatus::Archived
    );
    let hits = e.search("parked the car garage", 10).await.unwrap().hits;
    assert!(hits.iter().all(|h| h.note.id != ids[2]));
    assert!(e.archive(&ids[2], "user").await.is_err());
    e.restore_archived(&ids[2], "user").await.unwrap();
    let mut after = e.get(&ids[2]).await.unwrap();
    // each status change is a change of the note
    assert_eq!(after.note.version, before.note.version + 2);
    after.note.version = before.note.version;
    assert_eq!(after.note, before.note);
    assert_eq!(after.links, before.links);
    let hits = e.search("parked the car garage", 10).await.unwrap().hits;
    assert_eq!(hits[0].note.id, ids[2]);
    assert!(e.restore_archived(&ids[2], "user").await.is_err());
    // the audit log has both
    let audit = e.store().audit_of(&ids[2]).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert!(actions.contains(&"archive") && actions.contains(&"restore"));
    e.close().await;
}

#[tokio::test]
async fn weak_notes_are_candidates_and_reinforcement_lifts_them() {
    let e = engine(None).await;
    let ids = add_all(&e).await;
    // nothing is weak in a fresh memory
    assert!(e.archive_candidates(None, 10).await.unwrap().is_empty());
    // everything is below a threshold above 1; reinforcement keeps it at most 1
    assert_eq!(e.archive_candidates(Some(1.01), 10).await.unwrap().len(), 4);
    e.reinforce(&[ids[0].clone()], Reinforce::Cited)
        .await
        .unwrap();
    let s = e.strength_now(&[ids[0].clone()]).await.unwrap();
    assert!(s[&ids[0]] <= 1.0 && s[&ids[0]] > 0.99);
    // a short-term note's tier is the user's choice; a project one needs a name
    e.set_tier(&ids[1], Tier::ShortTerm, None).await.unwrap();
    assert!(e.set_tier(&ids[1], Tier::Project, None).await.is_err());
    let n = e
        .set_tier(&ids[3], Tier::Project, Some("rust"))
        .await
        .unwrap();
    assert_eq!(n.project.as_deref(), Some("rust"));
    assert!(e.projects().await.unwrap()[0].active);
    e.set_project_active("rust", false).await.unwrap();
    assert!(!e.projects().await.unwrap()[0].active);
    e.close().await;
}

#[tokio::test]
async fn boxes_group_linked_notes_and_keep_their_ids() {
    let e = engine(None).await;
    let texts = [
        "cat Miso tuna food bowl",
        "cat Miso vet visit tuna",
        "cat Miso toy mouse tuna",
        "garden tomatoes basil water",
        "garden tomatoes harvest basil",
        "garden basil tomatoes seeds",
    ];
    for t in texts {
        e.add(NewNote::new(t).unwrap()).await.unwrap();
    }
    let r = e.recompute_boxes().await.unwrap();
    assert_eq!(r.boxes, 2, "{r:?}");
    assert!(r.modularity > 0.3, "{r:?}");
    let first = e.boxes().await.unwrap();
    assert!(
        first
            .iter()
            .any(|b| b.label.contains("miso") || b.label.contains("tuna"))
    );
    assert!(
        first
            .iter()
            .any(|b| b.label.contains("tomato") || b.label.contains("basil"))
    );
    let r2 = e.recompute_boxes().await.unwrap();
    assert_eq!(r2.kept_ids, 2);
    let second = e.boxes().await.unwrap();
    let mut a: Vec<_> = first.iter().map(|b| b.id.clone()).collect();
    let mut b: Vec<_> = second.iter().map(|b| b.id.clone()).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    e.close().await;
}

/// The app and the MCP server run these on a multi-threaded runtime: their futures must be
/// Send (checked at compile time).
#[allow(dead_code)]
fn engine_futures_are_send(e: &Engine) {
    fn assert_send<T: Send>(_: &T) {}
    assert_send(&e.ask("q", &[], &|_| {}));
    assert_send(&e.recompute_boxes());
    assert_send(&e.place_in_box(&NoteId::generate()));
    assert_send(&e.add_batch(Vec::new()));
    assert_send(&e.archive(&NoteId::generate(), "user"));
    assert_send(&e.restore_archived(&NoteId::generate(), "user"));
    assert_send(&e.archive_candidates(None, 1));
    assert_send(&e.run_pending(&|_| {}));
    assert_send(&e.search("q", 1));
    let edit = crate::FieldEdit::default();
    assert_send(&e.accept("x", &edit, "user"));
    assert_send(&e.reject("x", "user"));
    assert_send(&e.rollback("x", "user"));
    assert_send(&e.reapply("x", "user"));
    assert_send(&e.edit_note(&NoteId::generate(), &edit, "user", "r"));
    assert_send(&e.proposals(&[], 1));
    assert_send(&e.history(&NoteId::generate()));
}

#[tokio::test]
async fn strength_weighting_decides_which_notes_make_the_top_k() {
    let e = engine(None).await;
    let strong = e
        .add(NewNote::new("Every morning Pixel runs along Brighton beach with Ada").unwrap())
        .await
        .unwrap()
        .id;
    let weak = e
        .add(NewNote::new("Pixel the dog loves the beach at Brighton in summer").unwrap())
        .await
        .unwrap()
        .id;
    let q = "Pixel the dog loves the beach at Brighton in summer";
    let plain = e.search(q, 1).await.unwrap().hits;
    assert_eq!(
        plain[0].note.id, weak,
        "without weighting the closer note wins"
    );
    // the closer note was last used long ago and has faded almost to nothing
    let long_ago = chrono::Utc::now() - chrono::Duration::days(3650);
    e.store()
        .reinforce(&[(weak.clone(), 0.01, long_ago)])
        .await
        .unwrap();
    let options = crate::SearchOptions {
        strength_weight: 1.0,
        ..crate::SearchOptions::default()
    };
    let weighted = e.search_with(q, 1, &options).await.unwrap().hits;
    assert_eq!(weighted.len(), 1);
    assert_eq!(
        weighted[0].note.id, strong,
        "strength takes part in choosing the top k, not only in ordering it"
    );
    e.close().await;
}

#[tokio::test]
async fn every_retrieval_surface_reinforces_unless_the_setting_says_otherwise() {
    let e = engine(None).await;
    let id = e
        .add(NewNote::new("Ada keeps the spare key under the blue flowerpot").unwrap())
        .await
        .unwrap()
        .id;
    let count = |d: crate::NoteDetail| d.note.access_count;
    assert_eq!(
        count(e.get(&id).await.unwrap()),
        0,
        "get alone is not an open"
    );
    // default `all`: a search and an open each reinforce the note
    assert_eq!(e.reinforce_on(), crate::ReinforceOn::All);
    assert_eq!(e.search("spare key", 3).await.unwrap().hits[0].note.id, id);
    assert_eq!(count(e.get(&id).await.unwrap()), 1);
    e.open_note(&id).await.unwrap();
    assert_eq!(count(e.get(&id).await.unwrap()), 2);
    // `chat`: search and opening leave it alone
    e.set_setting_checked("retrieval.reinforce", "chat")
        .await
        .unwrap();
    assert_eq!(e.reinforce_on(), crate::ReinforceOn::Chat);
    e.search("spare key", 3).await.unwrap();
    e.open_note(&id).await.unwrap();
    assert_eq!(count(e.get(&id).await.unwrap()), 2);
    assert!(
        e.set_setting_checked("retrieval.reinforce", "sometimes")
            .await
            .is_err()
    );
    e.close().await;
}
