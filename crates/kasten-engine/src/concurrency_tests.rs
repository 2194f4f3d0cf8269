//! The in-memory indexes against the store under concurrent writers: enrichment passes
//! with several workers, user edits of the same notes and review actions, all at once.
//! Whatever order the writes commit in, the indexes must end up showing the last one.
#![allow(clippy::unwrap_used, clippy::panic)] // test code fails loudly

use std::sync::Arc;

use kasten_core::{NewNote, NoteId};
use kasten_fakellm::{FakeLlm, Mode};

use crate::snapshot_tests::fingerprint;
use crate::{Engine, FieldEdit, Indexes};

async fn engine(fake: &FakeLlm) -> Engine {
    crate::tests::engine_with_fake(fake, 3).await
}

const TOPICS: [&str; 6] = [
    "Ada's dog Pixel loves the beach at sunset",
    "the pottery class meets on Saturday mornings",
    "Ben fixed the harbor boat engine with Ada",
    "the garden tomatoes need water every evening",
    "Pixel chased gulls along the harbor beach",
    "Saturday pottery glaze turned a deep blue",
];

/// Rebuilds the indexes from the store, as an open without a snapshot does.
async fn rebuilt(e: &Engine) -> crate::snapshot_tests::Fingerprint {
    *e.write_indexes().unwrap() = Indexes {
        vector: kasten_core::vector::VectorIndex::new(e.embedder.dim()),
        text: kasten_core::bm25::TextIndex::new(),
        links: Default::default(),
        timeline: kasten_core::timeline::Timeline::new(),
    };
    e.load(&|_| {}).await.unwrap();
    fingerprint(e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_and_review_actions_leave_the_indexes_equal_to_the_store() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = Arc::new(engine(&fake).await);
    let mut ids: Vec<NoteId> = Vec::new();
    for t in TOPICS {
        ids.push(e.add(NewNote::new(t).unwrap()).await.unwrap().id);
    }
    for n in &ids {
        e.enrich_note(n).await.unwrap();
    }
    // every other write waits 100 ms between its commit and its index update (the first
    // one does), so writes of the same note can overtake each other there
    e.stagger.store(2, std::sync::atomic::Ordering::SeqCst);

    // first, one overtaking for certain: a second edit of a note starts once the first is
    // committed, while the first still waits before its index update
    let first = {
        let (e, id) = (Arc::clone(&e), ids[0].clone());
        tokio::spawn(async move {
            let edit = FieldEdit {
                context: Some("the first edit".into()),
                ..FieldEdit::default()
            };
            e.edit_note(&id, &edit, "user", "").await
        })
    };
    let t0 = std::time::Instant::now();
    while e.store.get_note(&ids[0]).await.unwrap().map(|n| n.context)
        != Some("the first edit".into())
    {
        assert!(
            t0.elapsed().as_secs() < 20,
            "the first edit never committed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let second = FieldEdit {
        context: Some("the second edit".into()),
        ..FieldEdit::default()
    };
    e.edit_note(&ids[0], &second, "user", "").await.unwrap();
    first.await.unwrap().unwrap();
    let live = fingerprint(&e);
    assert!(
        live == rebuilt(&e).await,
        "the first edit's late index update hid the second edit"
    );

    for round in 0..6 {
        let mut tasks = Vec::new();
        // more notes to enrich while the others are edited; enrichment also rewrites
        // neighbours (evolution)
        for (i, t) in TOPICS.iter().enumerate() {
            let e = Arc::clone(&e);
            let text = format!("{t}, again in round {round} ({i})");
            tasks.push(tokio::spawn(async move {
                let _ = e.add(NewNote::new(&text).unwrap()).await;
            }));
        }
        for _ in 0..2 {
            let e = Arc::clone(&e);
            tasks.push(tokio::spawn(async move {
                let _ = e.run_pending(&|_| {}).await;
            }));
        }
        // three people editing the same notes at once
        for w in 0..3 {
            let (e, ids) = (Arc::clone(&e), ids.clone());
            tasks.push(tokio::spawn(async move {
                for (i, id) in ids.iter().enumerate() {
                    let edit = FieldEdit {
                        keywords: Some(vec![format!("kw{round}x{w}x{i}")]),
                        tags: Some(vec![format!("tag{w}")]),
                        context: Some(format!("edited by writer {w} in round {round}")),
                    };
                    // two editors reading the same version: one of them is refused
                    let _ = e.edit_note(id, &edit, "user", "").await;
                }
            }));
        }
        // review actions on whatever the pipeline and the editors did
        {
            let e = Arc::clone(&e);
            tasks.push(tokio::spawn(async move {
                let items = e.proposals(&[], 30).await.unwrap_or_default();
                for (i, item) in items.iter().enumerate() {
                    let _ = match i % 3 {
                        0 => e.rollback(&item.id, "user").await,
                        1 => e.reject(&item.id, "user").await,
                        _ => e.accept(&item.id, &FieldEdit::default(), "user").await,
                    };
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // after every round, not only at the end: a later write of a note would hide an
        // earlier disagreement
        let live = fingerprint(&e);
        let from_store = rebuilt(&e).await;
        if live != from_store {
            let differ: Vec<&String> = live
                .vectors
                .iter()
                .filter(|(id, v)| from_store.vectors.get(*id) != Some(v))
                .map(|(id, _)| id)
                .chain(
                    live.text
                        .iter()
                        .filter(|(id, t)| from_store.text.get(*id) != Some(t))
                        .map(|(id, _)| id),
                )
                .collect();
            // the adjacency entries that differ: live first, then the rebuild's
            type Entry<'a> = (&'a String, Option<&'a Vec<String>>, Option<&'a Vec<String>>);
            let links: Vec<Entry> = live
                .links
                .keys()
                .chain(from_store.links.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|id| live.links.get(*id) != from_store.links.get(*id))
                .map(|id| (id, live.links.get(id), from_store.links.get(id)))
                .collect();
            panic!(
                "round {round}: the indexes disagree with the store after concurrent writes; notes {differ:?}; links (live, rebuilt) {links:?}"
            );
        }
    }
}

/// A link the user rejected is not made again by a later enrichment of the same note (the
/// store keeps the rejected one), so the adjacency must not gain it either: search would
/// follow a link nobody can see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_link_proposed_again_stays_out_of_the_adjacency() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    let mut ids: Vec<NoteId> = Vec::new();
    for t in TOPICS {
        ids.push(e.add(NewNote::new(t).unwrap()).await.unwrap().id);
    }
    for n in &ids {
        e.enrich_note(n).await.unwrap();
    }
    let last = ids.last().unwrap().to_string();
    let items = e.proposals(&[], 100).await.unwrap();
    let link = items
        .iter()
        .find(|i| i.kind == kasten_core::ReviewKind::Link && i.note == last)
        .unwrap_or_else(|| panic!("the fake LLM linked the last note: {items:?}"));
    let to = NoteId::parse(link.target.as_deref().unwrap()).unwrap();
    let from = ids.last().unwrap().clone();
    // every link between the two (the other note's enrichment may have made one too)
    let pair = |i: &crate::ReviewItem| {
        let (a, b) = (i.note.as_str(), i.target.as_deref().unwrap_or(""));
        i.kind == kasten_core::ReviewKind::Link
            && ((a == from.as_str() && b == to.as_str())
                || (a == to.as_str() && b == from.as_str()))
    };
    for i in items.iter().filter(|i| pair(i)) {
        e.reject(&i.id, "user").await.unwrap();
    }
    assert!(!e.store.linked(&from, &to).await.unwrap());
    // enriched again: the fake proposes the same link, which the store skips
    e.store
        .enqueue_job(&from, &kasten_core::JobId::generate())
        .await
        .unwrap();
    e.enrich_note(&from).await.unwrap().unwrap();
    assert!(!e.store.linked(&from, &to).await.unwrap());
    let live = fingerprint(&e);
    assert!(
        !live
            .links
            .get(&from.to_string())
            .is_some_and(|v| v.contains(&to.to_string())),
        "the rejected link came back into the adjacency: {:?}",
        live.links.get(&from.to_string())
    );
    assert!(
        live == rebuilt(&e).await,
        "the indexes disagree with the store"
    );
}
