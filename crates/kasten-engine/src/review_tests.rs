//! Review, history and rollback: the conflict rule, the review policy, the audit trail (the
//! property test that rolling everything back restores the memory exactly is in
//! `review_rollback_tests.rs`).

use std::collections::BTreeSet;

use kasten_core::{NewNote, NoteId};
use kasten_fakellm::{FakeLlm, Mode};
use kasten_store::Fields;

use crate::tests::HashEmbedder;
use crate::{Engine, EngineError, FieldEdit, Policy, PolicyMode, ReviewStatus};

pub(super) async fn engine(fake: &FakeLlm) -> Engine {
    crate::tests::engine_with_fake(fake, 1).await
}

pub(super) async fn add(e: &Engine, text: &str) -> NoteId {
    let n = e.add(NewNote::new(text).unwrap()).await.unwrap();
    e.enrich_note(&n.id).await.unwrap();
    n.id
}

/// (id, content, annotations, stored embedding, indexed vector)
type NoteState = (NoteId, String, Fields, Vec<f32>, Option<Vec<f32>>);

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Snapshot {
    pub(super) fields: Vec<NoteState>,
    pub(super) links: BTreeSet<(NoteId, NoteId)>,
}

pub(super) async fn snapshot(e: &Engine, ids: &[NoteId]) -> Snapshot {
    let mut fields = Vec::new();
    for id in ids {
        let n = e.get(id).await.unwrap().note;
        let f = Fields {
            keywords: n.keywords.clone(),
            tags: n.tags.clone(),
            context: n.context.clone(),
        };
        let stored = e.store().embedding_of(id).await.unwrap().unwrap();
        let indexed = e
            .read_indexes()
            .unwrap()
            .vector
            .get(id)
            .unwrap()
            .map(|v| v.to_vec());
        fields.push((id.clone(), n.content, f, stored, indexed));
    }
    let links = e
        .store()
        .accepted_links()
        .await
        .unwrap()
        .into_iter()
        .collect();
    Snapshot { fields, links }
}

#[tokio::test]
async fn rolling_back_an_older_event_under_a_later_change_is_refused_by_name() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    let s = add(&e, "Caroline plans a trip to Berlin in May").await;
    let original = snapshot(&e, std::slice::from_ref(&s)).await;
    let a = add(&e, "Caroline booked flights to Berlin").await;
    let b = add(&e, "Caroline cancelled the Berlin flights").await;
    let history = e.history(&s).await.unwrap();
    let evolutions: Vec<_> = history.iter().filter(|h| h.action == "evolution").collect();
    assert_eq!(
        evolutions.len(),
        2,
        "both later notes evolve the first: {history:#?}"
    );
    let ev_a = e
        .store()
        .events(10)
        .await
        .unwrap()
        .into_iter()
        .find(|ev| ev.note == a.to_string())
        .unwrap()
        .id;
    let ev_b = e
        .store()
        .events(10)
        .await
        .unwrap()
        .into_iter()
        .find(|ev| ev.note == b.to_string())
        .unwrap()
        .id;
    let err = e
        .rollback(&ev_a, "user")
        .await
        .err()
        .map(|x| x.to_string())
        .unwrap_or_default();
    // the blocker is one of B's revisions (of S or of A), named with its event
    let b_revs: Vec<String> = e
        .store()
        .revisions_where(None, Some(&ev_b))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert!(
        b_revs.iter().any(|r| err.contains(r.as_str())) && err.contains("cannot be rolled back"),
        "{err}"
    );
    assert!(
        err.contains(&ev_b),
        "the message offers rolling back the later event: {err}"
    );
    // refused means unchanged
    assert_eq!(e.history(&s).await.unwrap().len(), history.len());

    e.rollback(&ev_b, "user").await.unwrap();
    e.rollback(&ev_a, "user").await.unwrap();
    assert_eq!(
        snapshot(&e, std::slice::from_ref(&s)).await.fields,
        original.fields,
        "fields and embedding restored exactly"
    );
    // and re-applying works in the original order
    e.reapply(&ev_a, "user").await.unwrap();
    e.reapply(&ev_b, "user").await.unwrap();
    let h = e.history(&s).await.unwrap();
    for action in [
        "created",
        "construction",
        "evolution",
        "rollback",
        "reapply",
    ] {
        assert!(
            h.iter().any(|x| x.action == action),
            "history lacks {action}: {h:#?}"
        );
    }
    assert!(h.iter().all(|x| !x.actor.as_str().is_empty()));
    e.close().await;
}

#[tokio::test]
async fn under_review_policy_nothing_proposed_changes_retrieval_until_accepted() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    e.set_policy(&Policy {
        links: PolicyMode::Review,
        edits: PolicyMode::Review,
        auto_accept_confidence: None,
    })
    .await
    .unwrap();
    let a = e
        .add(NewNote::new("Melanie runs a pottery studio").unwrap())
        .await
        .unwrap()
        .id;
    let b = e
        .add(NewNote::new("Melanie's pottery studio opens in June").unwrap())
        .await
        .unwrap()
        .id;
    let before = snapshot(&e, &[a.clone(), b.clone()]).await;
    let hits_before: Vec<_> = e
        .search("pottery studio", 5)
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.note.id, h.via))
        .collect();
    e.run_pending(&|_| {}).await.unwrap();
    assert_eq!(
        snapshot(&e, &[a.clone(), b.clone()]).await,
        before,
        "proposals changed the memory"
    );
    let hits_after: Vec<_> = e
        .search("pottery studio", 5)
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.note.id, h.via))
        .collect();
    assert_eq!(hits_before, hits_after);

    let queue = e.proposals(&[], 100).await.unwrap();
    assert!(queue.iter().all(|i| i.status == ReviewStatus::Proposed));
    let link = queue
        .iter()
        .find(|i| i.kind == kasten_core::ReviewKind::Link)
        .expect("a proposed link");
    e.accept(&link.id, &FieldEdit::default(), "user")
        .await
        .unwrap();
    assert_eq!(e.store().accepted_links().await.unwrap().len(), 1);
    let edit = queue
        .iter()
        .find(|i| i.kind == kasten_core::ReviewKind::Edit && i.note == b.to_string())
        .expect("a proposed edit of b");
    // edit-then-accept: the user adjusts the proposed tags
    e.accept(
        &edit.id,
        &FieldEdit {
            tags: Some(vec!["ceramics".into()]),
            ..FieldEdit::default()
        },
        "user",
    )
    .await
    .unwrap();
    let nb = e.get(&b).await.unwrap().note;
    assert_eq!(nb.tags, vec!["ceramics".to_owned()]);
    assert_eq!(nb.context, edit.after.as_ref().unwrap().context);
    // accepted items leave the queue; rejecting the rest empties it
    for item in e.proposals(&[], 100).await.unwrap() {
        e.reject(&item.id, "user").await.unwrap();
    }
    assert!(e.proposals(&[], 100).await.unwrap().is_empty());
    assert!(
        !e.proposals(&[ReviewStatus::Rejected], 100)
            .await
            .unwrap()
            .is_empty()
    );
    let h = e.history(&b).await.unwrap();
    assert!(h.iter().any(|x| x.action == "accept" && x.actor == "user"));
    assert!(h.iter().any(|x| x.action == "edit" && x.actor == "user"));
    e.close().await;
}

#[tokio::test]
async fn rejected_links_leave_search_and_graph_but_stay_in_history() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    add(&e, "Jon opened a dance studio downtown").await;
    let n = add(&e, "Jon's dance studio hosted a competition").await;
    let link = e
        .proposals(&[ReviewStatus::Applied], 10)
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.kind == kasten_core::ReviewKind::Link)
        .unwrap();
    e.reject(&link.id, "user").await.unwrap();
    assert!(e.store().accepted_links().await.unwrap().is_empty());
    assert!(e.read_indexes().unwrap().links.values().all(Vec::is_empty));
    let d = e.get(&n).await.unwrap();
    assert!(
        d.links
            .iter()
            .any(|l| l.status == kasten_core::LinkStatus::Rejected),
        "kept in history"
    );
    assert!(matches!(
        e.accept("nope", &FieldEdit::default(), "user").await,
        Err(EngineError::UnknownItem(_))
    ));
    e.close().await;
}

#[tokio::test]
async fn queue_pages_are_filtered_and_ordered_by_the_store() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    add(&e, "Mia adopted a grey cat named Pixel").await;
    add(&e, "Mia's cat Pixel likes the window seat").await;
    add(&e, "Pixel the cat went to the vet with Mia").await;
    let all_states = [
        ReviewStatus::Proposed,
        ReviewStatus::Applied,
        ReviewStatus::Accepted,
        ReviewStatus::Rejected,
        ReviewStatus::RolledBack,
    ];
    let everything = e.proposals(&all_states, usize::MAX).await.unwrap();
    assert!(
        everything.len() >= 2,
        "the fake LLM proposes links and edits"
    );
    // one state moves to each other state, so every filter has something to find
    e.reject(&everything[0].id, "user").await.unwrap();
    e.accept(&everything[1].id, &FieldEdit::default(), "user")
        .await
        .unwrap();
    let everything = e.proposals(&all_states, usize::MAX).await.unwrap();
    // newest first, ties by id
    assert!(everything.windows(2).all(|w| {
        w[0].created_at > w[1].created_at
            || (w[0].created_at == w[1].created_at && w[0].id <= w[1].id)
    }));
    // a short page is the head of the long one
    for n in 1..=everything.len() {
        let page: Vec<_> = e
            .proposals(&all_states, n)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        let head: Vec<_> = everything.iter().take(n).map(|i| i.id.clone()).collect();
        assert_eq!(page, head);
    }
    // each state filter returns exactly the items in that state
    for s in all_states {
        let got: Vec<_> = e
            .proposals(&[s], usize::MAX)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        let want: Vec<_> = everything
            .iter()
            .filter(|i| i.status == s)
            .map(|i| i.id.clone())
            .collect();
        assert_eq!(got, want, "state {s:?}");
    }
    assert!(
        everything
            .iter()
            .any(|i| i.status == ReviewStatus::Rejected)
    );
    e.close().await;
}

/// An embedder that cannot embed texts containing "unembeddable" (a model error), and is
/// otherwise [`HashEmbedder`].
struct Picky(std::sync::Arc<dyn kasten_embed::Embedder>);

impl kasten_embed::Embedder for Picky {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, kasten_embed::EmbedError> {
        if texts.iter().any(|t| t.contains("unembeddable")) {
            return Err(kasten_embed::EmbedError::Model("cannot embed this".into()));
        }
        self.0.embed(texts)
    }
}

/// Accept-with-edit is one transaction: when the adjustment fails, the proposal is not
/// accepted either and the note is as it was.
#[tokio::test]
async fn an_accept_whose_edit_fails_accepts_nothing() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = crate::tests::engine_with_fake_and(
        &fake,
        1,
        std::sync::Arc::new(Picky(HashEmbedder::arc("h", 64, 7))),
    )
    .await;
    e.set_policy(&Policy {
        links: PolicyMode::Review,
        edits: PolicyMode::Review,
        auto_accept_confidence: None,
    })
    .await
    .unwrap();
    let a = e
        .add(NewNote::new("Melanie runs a pottery studio").unwrap())
        .await
        .unwrap()
        .id;
    e.run_pending(&|_| {}).await.unwrap();
    let before = snapshot(&e, std::slice::from_ref(&a)).await;
    let edit = e
        .proposals(&[], 100)
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.kind == kasten_core::ReviewKind::Edit && i.note == a.to_string())
        .expect("a proposed edit");
    let r = e
        .accept(
            &edit.id,
            &FieldEdit {
                context: Some("an unembeddable context".into()),
                ..FieldEdit::default()
            },
            "user",
        )
        .await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(snapshot(&e, std::slice::from_ref(&a)).await, before);
    let still = e.proposals(&[ReviewStatus::Proposed], 100).await.unwrap();
    assert!(still.iter().any(|i| i.id == edit.id), "{still:?}");
    assert!(
        !e.history(&a)
            .await
            .unwrap()
            .iter()
            .any(|x| x.action == "accept")
    );
    e.close().await;
}

/// The enrichment event of a note that was deleted still rolls back as a unit: the edits
/// it made to the notes that remain are undone (the deleted note's own revisions have
/// nothing left to restore), and it can be re-applied.
#[tokio::test]
async fn the_event_of_a_deleted_note_still_rolls_back_its_edits_of_other_notes() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    let a = add(&e, "Caroline plans a trip to Berlin in May").await;
    let original = snapshot(&e, std::slice::from_ref(&a)).await;
    let b = add(&e, "Caroline booked flights to Berlin").await;
    let evolved = snapshot(&e, std::slice::from_ref(&a)).await;
    assert_ne!(evolved.fields, original.fields, "B evolves A");
    let event = e
        .store()
        .events(10)
        .await
        .unwrap()
        .into_iter()
        .find(|ev| ev.note == b.to_string())
        .unwrap()
        .id;
    e.delete(&b).await.unwrap();
    let out = e.rollback(&event, "user").await.unwrap();
    assert_eq!(out.notes, vec![a.to_string()]);
    assert_eq!(
        snapshot(&e, std::slice::from_ref(&a)).await.fields,
        original.fields,
        "A restored exactly"
    );
    assert!(
        e.history(&a)
            .await
            .unwrap()
            .iter()
            .any(|h| h.action == "rollback" && h.id.as_deref() == Some(event.as_str()))
    );
    e.reapply(&event, "user").await.unwrap();
    assert_eq!(
        snapshot(&e, std::slice::from_ref(&a)).await.fields,
        evolved.fields
    );
    e.close().await;
}

/// "Accept all above a confidence" is one store transaction over the links that qualify;
/// the link index follows without reloading every link.
#[tokio::test]
async fn accepting_all_links_above_a_confidence_takes_exactly_those() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    e.set_policy(&Policy {
        links: PolicyMode::Review,
        edits: PolicyMode::Review,
        auto_accept_confidence: None,
    })
    .await
    .unwrap();
    for t in [
        "Melanie runs a pottery studio",
        "Melanie's pottery studio opens in June",
        "The pottery studio sells bowls",
    ] {
        e.add(NewNote::new(t).unwrap()).await.unwrap();
    }
    e.run_pending(&|_| {}).await.unwrap();
    let links: Vec<_> = e
        .proposals(&[], 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.kind == kasten_core::ReviewKind::Link)
        .collect();
    assert!(!links.is_empty());
    assert_eq!(e.accept_links_above(2.0, "user").await.unwrap(), 0);
    assert!(e.store().accepted_links().await.unwrap().is_empty());
    let n = e.accept_links_above(0.0, "user").await.unwrap();
    assert_eq!(n, links.len());
    assert_eq!(e.store().accepted_links().await.unwrap().len(), links.len());
    assert!(
        e.proposals(&[], 100)
            .await
            .unwrap()
            .iter()
            .all(|i| i.kind != kasten_core::ReviewKind::Link)
    );
    // the in-memory adjacency is what a full reload would build
    let incremental = e.read_indexes().unwrap().links.clone();
    e.reload_links().await.unwrap();
    let mut a: Vec<_> = incremental.into_iter().collect();
    let mut b: Vec<_> = e
        .read_indexes()
        .unwrap()
        .links
        .clone()
        .into_iter()
        .collect();
    for v in a.iter_mut().chain(b.iter_mut()) {
        v.1.sort();
    }
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert!(!a.is_empty());
    // rejecting one accepted link takes its notes apart unless another link joins them
    let first = &links[0];
    e.reject(&first.id, "user").await.unwrap();
    let from = NoteId::parse(&first.note).unwrap();
    let to = NoteId::parse(first.target.as_deref().unwrap_or_default()).unwrap();
    let joined = e.store().linked(&from, &to).await.unwrap();
    let neighbours = e
        .read_indexes()
        .unwrap()
        .links
        .get(&from)
        .is_some_and(|v| v.contains(&to));
    assert_eq!(neighbours, joined);
    e.close().await;
}

/// "Both stay true" on a supersession proposal: the link leaves the queue rejected, nothing
/// comes into force, both notes' history says so, and the pair is never proposed again.
#[tokio::test]
async fn both_stay_true_removes_the_supersession_and_remembers_the_pair() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    e.set_policy(&Policy {
        links: PolicyMode::Review,
        edits: PolicyMode::Review,
        auto_accept_confidence: None,
    })
    .await
    .unwrap();
    let at = |d: &str| Some(format!("{d}T09:00:00Z").parse().unwrap());
    let old = e
        .add(
            NewNote::new("Our rent is 1,200 euros a month.")
                .unwrap()
                .at(at("2026-03-01")),
        )
        .await
        .unwrap()
        .id;
    let new = e
        .add(
            NewNote::new("From September the rent is 1,300 euros.")
                .unwrap()
                .at(at("2026-03-10")),
        )
        .await
        .unwrap()
        .id;
    let supersession = |items: &[crate::ReviewItem]| {
        items
            .iter()
            .find(|i| i.label == kasten_store::SUPERSEDES)
            .cloned()
    };
    let item = supersession(&e.proposals(&[], 50).await.unwrap())
        .expect("the rent change is a proposal under review");
    assert_eq!(
        (item.note.as_str(), item.target.as_deref()),
        (new.as_str(), Some(old.as_str()))
    );
    // the pair as detection sees it when the newer note is compared again
    let newer = e.get(&new).await.unwrap().note;
    let vector = e
        .read_indexes()
        .unwrap()
        .vector
        .get(&new)
        .unwrap()
        .unwrap()
        .to_vec();
    let again = || async {
        e.find_supersessions(
            std::slice::from_ref(&newer),
            std::slice::from_ref(&vector),
            false,
            chrono::Utc::now(),
        )
        .await
        .unwrap()
    };
    let before = again().await;
    assert!(
        before.iter().any(|d| d.from == new && d.to == old),
        "found before the decision: {before:?}"
    );
    // only a supersession can be kept as both true
    let other = e
        .add(NewNote::new("The landlord is Anna.").unwrap())
        .await
        .unwrap()
        .id;
    let plain = e
        .link(&other, &old, Some("relates"), "same flat", "user")
        .await
        .unwrap();
    assert!(matches!(
        e.keep_both(&plain.target, "user").await,
        Err(EngineError::Invalid(_))
    ));
    assert!(matches!(
        e.keep_both("nosuchlink", "user").await,
        Err(EngineError::UnknownItem(_))
    ));

    let out = e.keep_both(&item.id, "user").await.unwrap();
    assert_eq!((out.action.as_str(), out.links), ("both_true", 1));
    // out of the queue, rejected, nothing in force
    assert!(supersession(&e.proposals(&[], 50).await.unwrap()).is_none());
    let rejected = e.proposals(&[ReviewStatus::Rejected], 50).await.unwrap();
    assert!(rejected.iter().any(|i| i.id == item.id), "{rejected:?}");
    assert!(
        e.store()
            .successors_of(std::slice::from_ref(&old))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(e.get(&old).await.unwrap().superseded_by, None);
    // both histories record the decision, apart from a plain rejection
    for id in [&old, &new] {
        let h = e.history(id).await.unwrap();
        let d = h
            .iter()
            .find(|x| x.id.as_deref() == Some(item.id.as_str()))
            .unwrap_or_else(|| panic!("no decision in {h:#?}"));
        assert_eq!((d.action.as_str(), d.actor.as_str()), ("both_true", "user"));
        assert!(d.reason.contains(&item.reason), "{}", d.reason);
        assert!(d.reason.starts_with("both stay true"), "{}", d.reason);
    }
    // remembered: never proposed again, in either direction
    assert!(again().await.is_empty(), "proposed again");
    let kept = e.kept_both(std::slice::from_ref(&old)).await.unwrap();
    assert!(
        kept.contains(&(new.clone(), old.clone())) && kept.contains(&(old.clone(), new.clone()))
    );
    // a decision is final, like a rejection
    assert!(matches!(
        e.keep_both(&item.id, "user").await,
        Err(EngineError::Invalid(_))
    ));
    assert!(
        e.accept(&item.id, &FieldEdit::default(), "user")
            .await
            .is_err()
    );
    e.close().await;
}
