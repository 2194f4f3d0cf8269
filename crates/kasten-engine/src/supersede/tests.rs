use std::collections::BTreeSet;

use kasten_core::{LinkStatus, NewNote};
use kasten_store::{Endpoint, SUPERSEDES};

use super::*;
use crate::tests::HashEmbedder;
use crate::{EngineOptions, NoteFilter, PipelineOptions, Policy, PolicyMode, ReviewStatus};

/// An in-memory engine without an LLM under the links and edits policy `mode`.
pub(crate) async fn engine(mode: PolicyMode) -> Engine {
    let options = EngineOptions {
        llm: None,
        pipeline: PipelineOptions::default(),
        storage: None,
    };
    let e = Engine::open_with(
        &Endpoint::Mem,
        HashEmbedder::arc("h", 128, 3),
        options,
        &|_| {},
    )
    .await
    .unwrap();
    e.set_policy(&Policy {
        links: mode,
        edits: mode,
        auto_accept_confidence: None,
    })
    .await
    .unwrap();
    e
}

fn at(day: &str) -> Option<DateTime<Utc>> {
    Some(format!("{day}T09:00:00Z").parse().unwrap())
}

pub(super) async fn add(e: &Engine, text: &str, day: &str) -> NoteId {
    e.add(NewNote::new(text).unwrap().at(at(day)))
        .await
        .unwrap()
        .id
}

pub(super) const NOISE: &[&str] = &[
    "The landlord is called Anna Virtanen.",
    "Goaltender is a position in ice hockey and bandy.",
    "We pay 40 euros a month for electricity.",
];

pub(super) async fn supersedes_links(e: &Engine, id: &NoteId) -> Vec<kasten_core::Link> {
    e.get(id)
        .await
        .unwrap()
        .links
        .into_iter()
        .filter(|l| l.kind == SUPERSEDES)
        .collect()
}

#[tokio::test]
async fn a_new_value_supersedes_the_old_one_with_what_changed() {
    let e = engine(PolicyMode::Auto).await;
    for n in NOISE {
        add(&e, n, "2026-02-01").await;
    }
    let old = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
    let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
    let links = supersedes_links(&e, &new).await;
    assert_eq!(links.len(), 1, "{links:?}");
    let l = &links[0];
    assert_eq!((&l.from, &l.to), (&new, &old));
    assert_eq!(l.reason, "rent: 1,200 euros → 1,300 euros");
    assert_eq!(l.status, LinkStatus::Accepted);
    assert_eq!(l.created_by, "merge");
    // when it took effect: the newer note's time
    let succ = e
        .store()
        .successors_of(std::slice::from_ref(&old))
        .await
        .unwrap();
    assert_eq!(succ.len(), 1);
    assert_eq!(succ[0].by, new);
    assert_eq!(Some(succ[0].since), at("2026-09-01"));
    // the electricity bill is another quantity: not superseded
    let all = e.store().accepted_links().await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    // search: the current value first, the old one still found, saying what replaced it
    for q in ["Our rent is 1,200 euros a month.", "how much is the rent"] {
        let hits = e.search(q, 3).await.unwrap().hits;
        let pos = |id: &NoteId| hits.iter().position(|h| &h.note.id == id);
        let (pn, po) = (pos(&new).unwrap(), pos(&old).unwrap());
        assert!(pn < po, "{q}: {hits:?}");
        let by = hits[po].superseded_by.as_ref().unwrap();
        // since the new value took effect: the month its text names
        assert_eq!((&by.id, by.since), (&new, midnight("2026-09-01")));
        assert_eq!(by.reason, "rent: 1,200 euros → 1,300 euros");
        assert!(hits[pn].superseded_by.is_none());
    }
    e.close().await;
}

#[tokio::test]
async fn an_old_fact_written_later_is_superseded_by_the_newer_one() {
    let e = engine(PolicyMode::Auto).await;
    let new = add(
        &e,
        "goaltender is associated with the sport of pesäpallo.",
        "2026-05-01",
    )
    .await;
    let old = add(
        &e,
        "goaltender is associated with the sport of ice hockey.",
        "2026-01-01",
    )
    .await;
    let links = supersedes_links(&e, &old).await;
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!((&links[0].from, &links[0].to), (&new, &old));
    assert_eq!(links[0].reason, "sport: ice hockey → pesäpallo");
    // a batch finds it among its own notes too, and keeps one link per pair
    let b = e
        .add_batch_merging(vec![
            NewNote::new("The chairperson of Fatah is Mahmoud Abbas.")
                .unwrap()
                .at(at("2026-01-01")),
            NewNote::new("The chairperson of Fatah is Yasser Arafat.")
                .unwrap()
                .at(at("2026-02-01")),
        ])
        .await
        .unwrap();
    let links = supersedes_links(&e, &b.notes[1].id).await;
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(
        links[0].reason,
        "chairperson: Mahmoud Abbas → Yasser Arafat"
    );
    // without the setting, nothing is recorded
    e.set_merge_options(&crate::MergeOptions {
        supersede: false,
        ..Default::default()
    })
    .await
    .unwrap();
    let off = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
    let off2 = add(&e, "Our rent is 1,300 euros a month.", "2026-09-01").await;
    assert!(supersedes_links(&e, &off).await.is_empty());
    assert!(supersedes_links(&e, &off2).await.is_empty());
    e.close().await;
}

/// Batches written one after another while the next is embedded find what one call per
/// batch finds: a supersession across two batches, one inside a batch, a repeat of an
/// earlier batch's note merged into it.
#[tokio::test]
async fn batches_written_while_the_next_embeds_find_supersessions_and_repeats() {
    let e = engine(PolicyMode::Auto).await;
    let note = |text: &str, day: &str| NewNote::new(text).unwrap().at(at(day));
    let batches = vec![
        vec![
            note("The chairperson of Fatah is Mahmoud Abbas.", "2026-01-01"),
            note(NOISE[1], "2026-01-01"),
        ],
        vec![
            note("The chairperson of Fatah is Yasser Arafat.", "2026-02-01"),
            note("Our rent is 1,200 euros a month.", "2026-03-01"),
            note(NOISE[0], "2026-03-01"),
            note("Our rent is 1,300 euros a month.", "2026-09-01"),
        ],
        vec![note(
            "The chairperson of Fatah is Yasser Arafat.",
            "2026-02-01",
        )],
    ];
    let mut saved = Vec::new();
    e.add_batches_merging(batches, |b| saved.push(b))
        .await
        .unwrap();
    assert_eq!(
        saved.iter().map(|b| b.notes.len()).collect::<Vec<_>>(),
        [2, 4, 1]
    );
    let (abbas, arafat) = (&saved[0].notes[0].id, &saved[1].notes[0].id);
    let (rent_old, rent_new) = (&saved[1].notes[1].id, &saved[1].notes[3].id);
    // across batches
    let links = supersedes_links(&e, abbas).await;
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!((&links[0].from, &links[0].to), (arafat, abbas));
    assert_eq!(
        links[0].reason,
        "chairperson: Mahmoud Abbas → Yasser Arafat"
    );
    // inside one batch
    let links = supersedes_links(&e, rent_old).await;
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!((&links[0].from, &links[0].to), (rent_new, rent_old));
    assert_eq!(links[0].reason, "rent: 1,200 → 1,300");
    // the last batch repeats a note of the one before: merged into it, nothing else
    assert!(saved[0].merges.is_empty() && saved[1].merges.is_empty());
    assert_eq!(saved[2].merges.len(), 1);
    assert_eq!(&saved[2].merges[0].duplicate_of, arafat);
    assert_eq!(saved[2].notes[0].status, kasten_core::NoteStatus::Merged);
    assert!(supersedes_links(&e, &saved[2].notes[0].id).await.is_empty());
    e.close().await;
}

#[tokio::test]
async fn under_review_a_supersession_is_a_proposal_accepted_and_rolled_back_exactly() {
    let e = engine(PolicyMode::Review).await;
    for n in NOISE {
        add(&e, n, "2026-02-01").await;
    }
    let old = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
    let links_before: BTreeSet<_> = e
        .store()
        .accepted_links()
        .await
        .unwrap()
        .into_iter()
        .collect();
    let old_before = e.get(&old).await.unwrap().note;
    let new = add(&e, "Our rent is 1,300 euros a month.", "2026-09-01").await;
    // a proposal: nothing in force yet
    assert!(
        e.store()
            .successors_of(std::slice::from_ref(&old))
            .await
            .unwrap()
            .is_empty()
    );
    let hits = e
        .search("Our rent is 1,200 euros a month.", 5)
        .await
        .unwrap()
        .hits;
    assert_eq!(hits[0].note.id, old, "{hits:?}");
    assert!(hits.iter().all(|h| h.superseded_by.is_none()));
    let queue = e.proposals(&[], 50).await.unwrap();
    let item = queue
        .iter()
        .find(|i| i.label == SUPERSEDES)
        .unwrap_or_else(|| panic!("no supersedes proposal in {queue:?}"));
    assert_eq!(item.note, new.to_string());
    assert_eq!(item.target.as_deref(), Some(old.as_str()));
    assert_eq!(item.reason, "rent: 1,200 → 1,300");
    let merged_queue: Vec<_> = queue.iter().filter(|i| i.label == "contradicts").collect();
    assert!(
        merged_queue.is_empty(),
        "the supersession replaces contradicts: {merged_queue:?}"
    );
    // accept: in force
    e.accept(&item.id, &crate::FieldEdit::default(), "user")
        .await
        .unwrap();
    let succ = e
        .store()
        .successors_of(std::slice::from_ref(&old))
        .await
        .unwrap();
    assert_eq!(succ.len(), 1);
    assert_eq!(succ[0].by, new);
    let hits = e
        .search("Our rent is 1,200 euros a month.", 5)
        .await
        .unwrap()
        .hits;
    let po = hits.iter().position(|h| h.note.id == old).unwrap();
    assert!(hits[..po].iter().any(|h| h.note.id == new), "{hits:?}");
    assert_eq!(hits[po].superseded_by.as_ref().map(|s| &s.id), Some(&new));
    let applied = e.proposals(&[ReviewStatus::Accepted], 50).await.unwrap();
    assert!(applied.iter().any(|i| i.id == item.id), "{applied:?}");
    // roll back: the memory is as before the acceptance
    e.rollback(&item.id, "user").await.unwrap();
    assert!(
        e.store()
            .successors_of(std::slice::from_ref(&old))
            .await
            .unwrap()
            .is_empty()
    );
    let links_after: BTreeSet<_> = e
        .store()
        .accepted_links()
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(links_after, links_before);
    let old_after = e.get(&old).await.unwrap().note;
    assert_eq!(
        (
            &old_after.content,
            &old_after.keywords,
            &old_after.tags,
            &old_after.context,
            old_after.status,
            old_after.version
        ),
        (
            &old_before.content,
            &old_before.keywords,
            &old_before.tags,
            &old_before.context,
            old_before.status,
            old_before.version
        )
    );
    let hits = e
        .search("Our rent is 1,200 euros a month.", 5)
        .await
        .unwrap()
        .hits;
    assert_eq!(hits[0].note.id, old, "ranked as before: {hits:?}");
    assert!(hits.iter().all(|h| h.superseded_by.is_none()));
    let l = supersedes_links(&e, &new).await;
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].status, LinkStatus::RolledBack, "kept in history");
    e.close().await;
}

#[tokio::test]
async fn a_chain_of_changes_ranks_the_current_value_first() {
    let e = engine(PolicyMode::Auto).await;
    for n in NOISE {
        add(&e, n, "2026-02-01").await;
    }
    let a = add(&e, "Our rent is 1,100 euros a month.", "2025-03-01").await;
    let b = add(&e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
    let c = add(&e, "Our rent is 1,300 euros a month.", "2026-09-01").await;
    let hits = e
        .search("Our rent is 1,100 euros a month.", 4)
        .await
        .unwrap()
        .hits;
    let ids: Vec<&NoteId> = hits.iter().map(|h| &h.note.id).collect();
    assert_eq!(ids.first(), Some(&&c), "{hits:?}");
    for old in [&a, &b] {
        let h = hits.iter().find(|h| &h.note.id == old).unwrap();
        assert!(h.superseded_by.is_some(), "{h:?}");
    }
    e.close().await;
}

fn midnight(day: &str) -> DateTime<Utc> {
    format!("{day}T00:00:00Z").parse().unwrap()
}

fn day(s: &str) -> chrono::NaiveDate {
    s.parse().unwrap()
}

/// The rent example: 1,200 euros noted in March, "From September … 1,300 euros" noted
/// in March too (its value takes effect in September).
async fn rent(e: &Engine) -> (NoteId, NoteId) {
    for n in NOISE {
        add(e, n, "2026-02-01").await;
    }
    let old = add(e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
    let new = add(e, "From September the rent is 1,300 euros.", "2026-03-10").await;
    (old, new)
}

#[tokio::test]
async fn validity_runs_from_the_stated_date_until_the_successors_and_rolls_back() {
    let e = engine(PolicyMode::Review).await;
    let (old, new) = rent(&e).await;
    let d = e.get(&old).await.unwrap();
    assert_eq!(
        Some(d.valid_from),
        at("2026-03-01"),
        "no date in the text: its time"
    );
    assert_eq!(
        (d.valid_until, &d.superseded_by),
        (None, &None),
        "a proposal only"
    );
    let d = e.get(&new).await.unwrap();
    assert_eq!(
        d.valid_from,
        midnight("2026-09-01"),
        "the month the text names"
    );
    assert_eq!(d.valid_until, None);
    let item = e
        .proposals(&[], 50)
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.label == SUPERSEDES)
        .unwrap();
    e.accept(&item.id, &crate::FieldEdit::default(), "user")
        .await
        .unwrap();
    let d = e.get(&old).await.unwrap();
    assert_eq!(
        d.valid_until,
        Some(midnight("2026-09-01")),
        "the successor's valid_from"
    );
    let by = d.superseded_by.unwrap();
    assert_eq!((&by.id, by.since), (&new, midnight("2026-09-01")));
    assert_eq!(by.reason, "rent: 1,200 euros → 1,300 euros");
    assert_eq!(e.get(&new).await.unwrap().valid_until, None);
    // and search says the same
    let hits = e.search("what is the rent", 5).await.unwrap().hits;
    let h = hits.iter().find(|h| h.note.id == old).unwrap();
    assert_eq!(
        h.superseded_by.as_ref().map(|s| s.since),
        Some(midnight("2026-09-01"))
    );
    // a rolled-back supersession ends nothing
    e.rollback(&item.id, "user").await.unwrap();
    let d = e.get(&old).await.unwrap();
    assert_eq!((d.valid_until, d.superseded_by), (None, None));
    assert_eq!(Some(d.valid_from), at("2026-03-01"));
    e.close().await;
}

#[tokio::test]
async fn as_of_a_day_search_returns_what_was_current_then() {
    let e = engine(PolicyMode::Auto).await;
    let (old, new) = rent(&e).await;
    let moved = add(&e, "In 2020 we moved to Helsinki.", "2026-03-02").await;
    let q = "Our rent is 1,200 euros a month.";
    let ids = |hits: &[crate::SearchHit]| -> Vec<NoteId> {
        hits.iter().map(|h| h.note.id.clone()).collect()
    };
    // today: the new value first, the old one below it, replaced since September
    let today = e.search(q, 3).await.unwrap().hits;
    let pos = |hits: &[crate::SearchHit], id: &NoteId| ids(hits).iter().position(|x| x == id);
    assert!(
        pos(&today, &new).unwrap() < pos(&today, &old).unwrap(),
        "{today:?}"
    );
    // on the last day of June the new value had not taken effect: the old one is
    // current and the new one left out
    let june = e
        .search_as_of(q, 3, Some(day("2026-06-30")))
        .await
        .unwrap()
        .hits;
    assert_eq!(june[0].note.id, old, "{june:?}");
    assert!(june[0].superseded_by.is_none());
    assert_eq!(pos(&june, &new), None, "{june:?}");
    // asked with the new note's own words, the old note takes its place
    let words = e
        .search_as_of(
            "From September the rent is 1,300 euros.",
            3,
            Some(day("2026-06-30")),
        )
        .await
        .unwrap()
        .hits;
    assert_eq!(words[0].note.id, old, "{words:?}");
    assert_eq!(pos(&words, &new), None);
    // on the day it took effect, as today
    let sept = e
        .search_as_of(q, 3, Some(day("2026-09-01")))
        .await
        .unwrap()
        .hits;
    assert!(
        pos(&sept, &new).unwrap() < pos(&sept, &old).unwrap(),
        "{sept:?}"
    );
    let by = sept[pos(&sept, &old).unwrap()]
        .superseded_by
        .as_ref()
        .unwrap();
    assert_eq!((&by.id, by.since), (&new, midnight("2026-09-01")));
    // before either was true, neither is found
    let feb = e
        .search_as_of(q, 5, Some(day("2026-02-15")))
        .await
        .unwrap()
        .hits;
    assert_eq!((pos(&feb, &old), pos(&feb, &new)), (None, None), "{feb:?}");
    // a date in the text counts, not when it was written down
    for (d, found) in [("2021-05-01", true), ("2019-12-31", false)] {
        let hits = e
            .search_as_of("moved to Helsinki", 3, Some(day(d)))
            .await
            .unwrap()
            .hits;
        assert_eq!(
            hits.iter().any(|h| h.note.id == moved),
            found,
            "{d}: {hits:?}"
        );
    }
    e.close().await;
}

/// The list of notes (no query) as of a day leaves out what search leaves out: notes
/// whose value had not taken effect by then; paged and counted over what is left.
#[tokio::test]
async fn as_of_a_day_the_list_holds_the_notes_valid_then() {
    let e = engine(PolicyMode::Auto).await;
    let (old, new) = rent(&e).await;
    let moved = add(&e, "In 2020 we moved to Helsinki.", "2026-03-02").await;
    let all = NoteFilter::default();
    let ids = |notes: &[Note]| -> Vec<NoteId> { notes.iter().map(|n| n.id.clone()).collect() };
    let (total, today) = e.notes_page_as_of(&all, 100, 0, None).await.unwrap();
    assert_eq!(total as usize, NOISE.len() + 3);
    assert_eq!(ids(&today)[..3], [new.clone(), moved.clone(), old.clone()]);
    // June: the September rent is not in force yet
    let (total, june) = e
        .notes_page_as_of(&all, 100, 0, Some(day("2026-06-30")))
        .await
        .unwrap();
    assert_eq!(total as usize, NOISE.len() + 2);
    assert!(!ids(&june).contains(&new) && ids(&june).contains(&old));
    // pages over what is left, newest first, the count the same on every page
    let (t1, p1) = e
        .notes_page_as_of(&all, 1, 0, Some(day("2026-06-30")))
        .await
        .unwrap();
    let (t2, p2) = e
        .notes_page_as_of(&all, 1, 1, Some(day("2026-06-30")))
        .await
        .unwrap();
    assert_eq!((t1, t2), (total, total));
    assert_eq!(
        ids(&p1).into_iter().chain(ids(&p2)).collect::<Vec<_>>(),
        [moved.clone(), old.clone()]
    );
    // before 2020 nothing of these was true; a date in the text counts
    let (_, then) = e
        .notes_page_as_of(&all, 100, 0, Some(day("2019-12-31")))
        .await
        .unwrap();
    assert!(!ids(&then).iter().any(|i| [&old, &new, &moved].contains(&i)));
    let (_, later) = e
        .notes_page_as_of(&all, 100, 0, Some(day("2021-05-01")))
        .await
        .unwrap();
    assert!(ids(&later).contains(&moved) && !ids(&later).contains(&old));
    // a filter still applies
    let tagged = NoteFilter {
        ids: Some(vec![old.clone(), new.clone()]),
        ..NoteFilter::default()
    };
    let (n, notes) = e
        .notes_page_as_of(&tagged, 100, 0, Some(day("2026-06-30")))
        .await
        .unwrap();
    assert_eq!((n, ids(&notes)), (1, vec![old.clone()]));
    e.close().await;
}

#[tokio::test]
async fn the_answer_prompt_marks_a_replaced_note_with_its_successor() {
    let fake = kasten_fakellm::FakeLlm::start(kasten_fakellm::Mode::Normal)
        .await
        .unwrap();
    let options = EngineOptions {
        llm: Some(crate::pipeline_tests::client(
            &fake,
            kasten_llm::Provider::Openai,
            std::time::Duration::from_secs(10),
        )),
        pipeline: PipelineOptions::default(),
        storage: None,
    };
    let e = Engine::open_with(
        &Endpoint::Mem,
        HashEmbedder::arc("h", 128, 3),
        options,
        &|_| {},
    )
    .await
    .unwrap();
    let (old, new) = rent(&e).await;
    let last_prompt = || fake.requests().last().unwrap().body.to_string();
    let a = e.ask("what is our rent", &[], &|_| {}).await.unwrap();
    let n_of = |id: &NoteId| a.notes.iter().find(|n| &n.id == id).map(|n| n.n);
    let (n_new, n_old) = (n_of(&new).unwrap(), n_of(&old).unwrap());
    assert!(n_new < n_old, "{a:?}");
    let body = last_prompt();
    let mark = format!("replaced since 2026-09-01 by [{n_new}] (not current)");
    let at_mark = body
        .find(&mark)
        .unwrap_or_else(|| panic!("no mark in {body}"));
    let old_line = body.find(&format!("[{n_old}] (")).unwrap();
    assert!(
        old_line < at_mark,
        "the mark follows the replaced note: {body}"
    );
    assert_eq!(body.matches("(not current)").count(), 1, "{body}");
    assert!(body.contains("no longer current"));
    // as of June the old value was current: no mark, the new note not shown
    let options = crate::AskOptions {
        as_of: Some(day("2026-06-30")),
        ..Default::default()
    };
    let a = e
        .ask_with("what is our rent", &[], &options, &|_| {})
        .await
        .unwrap();
    assert!(a.notes.iter().any(|n| n.id == old), "{a:?}");
    assert!(a.notes.iter().all(|n| n.id != new), "{a:?}");
    let body = last_prompt();
    assert!(
        !body.contains("(not current)") && !body.contains("1,300"),
        "{body}"
    );
    assert!(body.contains("The question is about 2026-06-30"), "{body}");
    e.close().await;
}
