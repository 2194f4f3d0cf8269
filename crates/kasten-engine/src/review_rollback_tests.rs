//! A property test of review: any sequence of adds, edits, accepts, rejects and rollbacks,
//! rolled back in reverse, restores the memory exactly.

use std::time::Duration;

use kasten_fakellm::{FakeLlm, Mode};
use proptest::prelude::*;

use crate::review_tests::{add, engine, snapshot};
use crate::{EngineError, FieldEdit, Policy, PolicyMode, ReviewStatus};

#[derive(Debug, Clone)]
enum Op {
    Add(usize),
    Edit(usize, usize),
    Accept(usize),
    Reject(usize),
    Rollback(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..TEXTS.len()).prop_map(Op::Add),
        2 => (0..8usize, 0..3usize).prop_map(|(n, f)| Op::Edit(n, f)),
        1 => (0..8usize).prop_map(Op::Accept),
        1 => (0..8usize).prop_map(Op::Reject),
        1 => (0..8usize).prop_map(Op::Rollback),
    ]
}

const TEXTS: &[&str] = &[
    "Caroline researches adoption agencies",
    "Melanie paints sunsets at the lake",
    "Caroline and Melanie talk about adoption and painting",
    "Jon wants to open a dance studio",
    "Gina sells clothes online after losing her job",
    "Caroline joined a support group for adoptive parents",
];

async fn run_case(review_policy: bool, ops: Vec<Op>) {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let e = engine(&fake).await;
    let seeds = vec![
        add(&e, "Caroline wants to build a family").await,
        add(&e, "Melanie loves painting with her kids").await,
    ];
    let initial = snapshot(&e, &seeds).await;
    let t0 = chrono::Utc::now();
    if review_policy {
        e.set_policy(&Policy {
            links: PolicyMode::Review,
            edits: PolicyMode::Review,
            auto_accept_confidence: None,
        })
        .await
        .unwrap();
    }
    let mut notes = seeds.clone();
    for op in ops {
        match op {
            Op::Add(i) => notes.push(add(&e, TEXTS[i]).await),
            Op::Edit(n, f) => {
                let id = &notes[n % notes.len()];
                let edit = match f {
                    0 => FieldEdit {
                        tags: Some(vec![format!("tag{n}")]),
                        ..FieldEdit::default()
                    },
                    1 => FieldEdit {
                        context: Some(format!("user context {n}")),
                        ..FieldEdit::default()
                    },
                    _ => FieldEdit {
                        keywords: Some(vec![format!("kw{n}"), "x".into()]),
                        ..FieldEdit::default()
                    },
                };
                e.edit_note(id, &edit, "user", "proptest").await.unwrap();
            }
            Op::Accept(i) | Op::Reject(i) | Op::Rollback(i) => {
                // only what happened during the sequence is fair game: the unwinding below
                // undoes exactly that
                let items: Vec<_> = e
                    .proposals(
                        &[
                            ReviewStatus::Proposed,
                            ReviewStatus::Applied,
                            ReviewStatus::Accepted,
                        ],
                        100,
                    )
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|it| it.created_at >= t0)
                    .collect();
                if items.is_empty() {
                    continue;
                }
                let id = items[i % items.len()].id.clone();
                // refusals (conflicts, wrong state) are allowed outcomes: they change nothing
                let _ = match op {
                    Op::Accept(_) => e.accept(&id, &FieldEdit::default(), "user").await,
                    Op::Reject(_) => e.reject(&id, "user").await,
                    _ => e.rollback(&id, "user").await,
                };
            }
        }
    }
    // unwind: every event and every user edit since t0, newest first
    let mut timeline: Vec<(chrono::DateTime<chrono::Utc>, String, bool)> = Vec::new();
    for ev in e.store().events(1000).await.unwrap() {
        if ev.created_at >= t0 {
            timeline.push((ev.created_at, ev.id, true));
        }
    }
    for r in e.store().revisions_where(None, None).await.unwrap() {
        if r.actor == "user" && r.created_at >= t0 {
            timeline.push((r.created_at, r.id, false));
        }
    }
    timeline.sort();
    for (_, id, is_event) in timeline.into_iter().rev() {
        let r = e.rollback(&id, "user").await;
        match r {
            Ok(_) => {}
            // already rolled back / rejected while the sequence ran
            Err(EngineError::Invalid(_)) if !is_event => {}
            Err(err) => panic!("unwinding {id}: {err}"),
        }
    }
    let end = snapshot(&e, &seeds).await;
    assert_eq!(
        end.fields, initial.fields,
        "seed notes differ after unwinding"
    );
    assert_eq!(end.links, initial.links, "links differ after unwinding");
    e.close().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn rolling_back_everything_in_reverse_restores_the_memory_exactly(
        review in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..7),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(120), run_case(review, ops)).await.expect("case timed out");
        });
    }
}
