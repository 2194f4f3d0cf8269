use chrono::{DateTime, TimeZone, Utc};
use kasten_core::{NewNote, NoteId, Via};
use kasten_store::Endpoint;

use super::SearchOptions;
use crate::tests::HashEmbedder;
use crate::{Engine, EngineError};

async fn open(ep: &Endpoint) -> Result<Engine, EngineError> {
    Engine::open(ep, HashEmbedder::arc("h", 64, 1), &|_| {}).await
}

fn note(text: &str, source: Option<&str>, at: DateTime<Utc>) -> Result<NewNote, EngineError> {
    Ok(NewNote::new(text)?
        .at(Some(at))
        .with_source(source.map(str::to_owned)))
}

pub(super) fn day(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

/// A question that chains three notes gets them first, in the order of the chain,
/// each current: the one-search answer holds only the first. (The test embedder
/// knows no synonyms: the relations are worded as the question words them.)
#[tokio::test]
async fn a_question_is_followed_through_its_chain_of_notes() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem).await?;
    let texts = [
        "The author of Our Mutual Friend is Charles Darwin.",
        "The spouse of Charles Darwin is Amala Paul.",
        "Amala Paul is a citizen of Belgium.",
        "The author of Lady Windermere's Fan is Oscar Wilde.",
        "Oscar Wilde is married to Constance Lloyd.",
        "The country of citizenship of Ada Lovelace is England.",
        "The spouse of Ada Lovelace is William King.",
        "Charles Darwin is a citizen of England.",
    ];
    let notes = e
        .add_batch(
            texts
                .iter()
                .map(|t| NewNote::new(t))
                .collect::<Result<Vec<_>, _>>()?,
        )
        .await?
        .notes;
    let q = "What is the country of citizenship of the spouse of the author of Our Mutual Friend?";
    let chained = SearchOptions {
        chain: true,
        ..SearchOptions::default()
    };
    let out = e.search_with(q, 5, &chained).await?;
    let got: Vec<&str> = out.hits.iter().map(|h| h.note.content.as_str()).collect();
    assert_eq!(&got[..3], &texts[..3], "{got:?}");
    assert!(
        out.hits[1].via.contains(&Via::Chain {
            from: notes[0].id.clone()
        }),
        "{:?}",
        out.hits[1].via
    );
    // without the chain, the spouse's citizenship is not among the first three
    let plain = e.search_with(q, 5, &SearchOptions::default()).await?;
    let first: Vec<&str> = plain
        .hits
        .iter()
        .take(3)
        .map(|h| h.note.content.as_str())
        .collect();
    assert!(!first.contains(&texts[2]), "{first:?}");
    // a question whose note adds nothing new stays one search
    let out = e
        .search_with("Amala Paul is a citizen of Belgium", 5, &chained)
        .await?;
    assert_eq!(out.hits[0].note.content, texts[2]);
    Ok(())
}

/// A filtered search returns only the notes the filter admits, even when others rank
/// higher.
#[tokio::test]
async fn a_filtered_search_keeps_to_the_box_tag_and_state() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem).await?;
    let notes = e
        .add_batch(vec![
            NewNote::new("the lake at sunrise, the lake at dawn")?,
            NewNote::new("a lake")?,
            NewNote::new("groceries are expensive")?,
        ])
        .await?
        .notes;
    let all = e.search("lake sunrise", 3).await?;
    assert_eq!(all.hits[0].note.id, notes[0].id);
    let in_box = crate::NoteFilter {
        ids: Some(vec![notes[1].id.clone(), notes[2].id.clone()]),
        ..Default::default()
    };
    let hits = e.search_filtered("lake sunrise", 3, &in_box).await?.hits;
    assert!(!hits.is_empty());
    assert!(
        hits.iter().all(|h| h.note.id != notes[0].id),
        "a note outside the Box was found"
    );
    assert_eq!(hits[0].note.id, notes[1].id);
    let failed = crate::NoteFilter {
        enrich_state: Some(kasten_core::Enrich::Failed),
        ..Default::default()
    };
    assert!(e.search_filtered("lake", 3, &failed).await?.hits.is_empty());
    let tagged = crate::NoteFilter {
        tag: Some("nature".into()),
        ..Default::default()
    };
    assert!(e.search_filtered("lake", 3, &tagged).await?.hits.is_empty());
    e.close().await;
    Ok(())
}

/// A filtered search as of a day (the app's Notes search with its date control): the
/// filter still applies, and a note whose value took effect after the day is left out.
#[tokio::test]
async fn a_filtered_search_as_of_a_day_leaves_out_what_was_not_true_yet() -> Result<(), EngineError>
{
    let e = open(&Endpoint::Mem).await?;
    let at = |d: &str| format!("{d}T09:00:00Z").parse().ok();
    let notes = e
        .add_batch(vec![
            NewNote::new("the lake cabin costs 90 euros a night")?.at(at("2026-03-01")),
            NewNote::new("the lake cabin since June 2026 costs 120 euros")?.at(at("2026-03-05")),
            NewNote::new("groceries are expensive")?.at(at("2026-03-01")),
        ])
        .await?
        .notes;
    let ids: Vec<NoteId> = notes.iter().map(|n| n.id.clone()).collect();
    let in_box = crate::NoteFilter {
        ids: Some(vec![ids[0].clone(), ids[1].clone()]),
        ..Default::default()
    };
    let found = |hits: &[crate::SearchHit]| -> Vec<NoteId> {
        hits.iter().map(|h| h.note.id.clone()).collect()
    };
    let today = e
        .search_filtered_as_of("lake cabin", 5, &in_box, None)
        .await?
        .hits;
    assert!(found(&today).contains(&ids[1]), "{today:?}");
    assert!(!found(&today).contains(&ids[2]), "outside the filter");
    let may = "2026-05-31".parse().ok();
    let then = e
        .search_filtered_as_of("lake cabin", 5, &in_box, may)
        .await?
        .hits;
    assert!(found(&then).contains(&ids[0]), "{then:?}");
    assert!(!found(&then).contains(&ids[1]), "not true yet: {then:?}");
    assert!(!found(&then).contains(&ids[2]), "outside the filter");
    // without a filter, the same
    let none = crate::NoteFilter::default();
    let all = e
        .search_filtered_as_of("lake cabin", 5, &none, may)
        .await?
        .hits;
    assert!(!found(&all).contains(&ids[1]), "{all:?}");
    e.close().await;
    Ok(())
}

/// A chat session where the answer ("Last Friday, at the lake!") shares no word with
/// the question, and an unrelated note in another stream at the same time.
async fn chat(e: &Engine) -> Result<Vec<kasten_core::Note>, EngineError> {
    let t = day(2023, 5, 8);
    Ok(e.add_batch(vec![
        note("Ann: How was your week?", Some("chat:S1:1"), t)?,
        note(
            "Ann: When did you paint the sunrise picture?",
            Some("chat:S1:2"),
            t,
        )?,
        note("Bo: Last Friday, at the lake!", Some("chat:S1:3"), t)?,
        note("Bo: Also, groceries are expensive.", Some("other:S9:1"), t)?,
    ])
    .await?
    .notes)
}

/// Link expansion: a linked note never takes the place of a direct hit nearer the
/// question, comes in when there is room, and which of a hit's linked notes comes depends
/// on the notes, not on the order the links were made in.
#[tokio::test]
async fn a_linked_note_comes_in_only_where_no_nearer_direct_hit_goes() -> Result<(), EngineError> {
    // `tax_first`: the order the two links of the first note are made in
    async fn memory(tax_first: bool) -> Result<(Engine, Vec<NoteId>), EngineError> {
        let e = open(&Endpoint::Mem).await?;
        let mut ids = Vec::new();
        for (i, text) in [
            "Anna has a cat named Miso.",
            "Anna feeds the cat at seven.",
            "The cat sleeps on the bed of Anna.",
            "The boiler was serviced in March.",
            "Quarterly taxes mention the cat food.",
        ]
        .into_iter()
        .enumerate()
        {
            let d = u32::try_from(i).unwrap_or(0) + 1;
            ids.push(e.add(note(text, None, day(2024, 1, d))?).await?.id);
        }
        let (boiler, tax) = (ids[3].clone(), ids[4].clone());
        let order = if tax_first {
            [tax, boiler]
        } else {
            [boiler, tax]
        };
        for to in &order {
            e.link(&ids[0], to, None, "test", "user").await?;
        }
        Ok((e, ids))
    }
    let linked_from = |out: &crate::SearchOutput, id: &NoteId| {
        out.hits
            .iter()
            .position(|h| &h.note.id == id && h.via.iter().any(|v| matches!(v, Via::Link { .. })))
    };
    let (e, ids) = memory(false).await?;
    // three places, three notes about Anna's cat: no linked note displaces one
    let three = e.search("Anna cat", 3).await?;
    assert!(
        three
            .hits
            .iter()
            .all(|h| !h.via.iter().any(|v| matches!(v, Via::Link { .. }))),
        "{:?}",
        three.hits
    );
    // room for every note: the first hit's linked note nearest the question follows it
    let all = e.search("Anna cat", 10).await?;
    let first = all.hits.first().map(|h| h.note.id.clone());
    assert_eq!(first.as_ref(), Some(&ids[0]), "{:?}", all.hits);
    assert_eq!(linked_from(&all, &ids[4]), Some(1), "{:?}", all.hits);
    assert_eq!(linked_from(&all, &ids[3]), None, "one linked note per hit");
    e.close().await;
    // the links made the other way round: the same list
    let (e2, ids2) = memory(true).await?;
    let again = e2.search("Anna cat", 10).await?;
    let as_positions = |out: &crate::SearchOutput, ids: &[NoteId]| -> Vec<Option<usize>> {
        out.hits
            .iter()
            .map(|h| ids.iter().position(|i| i == &h.note.id))
            .collect()
    };
    assert_eq!(as_positions(&again, &ids2), as_positions(&all, &ids));
    e2.close().await;
    Ok(())
}

#[tokio::test]
async fn a_hit_brings_its_neighbour_in_the_same_stream() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem).await?;
    let notes = chat(&e).await?;
    let (question, answer) = (&notes[1], &notes[2]);
    let out = e.search("paint sunrise picture", 3).await?;
    let ids: Vec<_> = out.hits.iter().map(|h| &h.note.id).collect();
    assert_eq!(ids[0], &question.id);
    // both neighbours follow, the reply with the label that says why
    assert!(ids.contains(&&answer.id), "{ids:?}");
    let reply = out.hits.iter().find(|h| h.note.id == answer.id);
    assert!(
        reply.is_some_and(|h| h.via.contains(&Via::Context {
            of: question.id.clone()
        })),
        "{:?}",
        out.hits
    );
    // the note of another stream is never context, even at the same time
    assert!(!ids.contains(&&notes[3].id));
    let labels: Vec<String> = out.hits[1].via.iter().map(Via::label).collect();
    assert!(labels.iter().any(|l| l.starts_with("context of ")));

    // without context the reply has nothing to do with the query
    let plain = SearchOptions {
        context_weight: 0.0,
        ..SearchOptions::default()
    };
    let out = e.search_with("paint sunrise picture", 3, &plain).await?;
    assert!(
        out.hits
            .iter()
            .all(|h| !h.via.iter().any(|v| matches!(v, Via::Context { .. })))
    );
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn a_time_gap_ends_the_context_and_deleted_notes_leave_it() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem).await?;
    let added = e
        .add_batch(vec![
            note(
                "planted tomatoes in the garden",
                Some("diary.md"),
                day(2023, 5, 1),
            )?,
            note("it rained all day", Some("diary.md"), day(2023, 5, 2))?,
        ])
        .await?
        .notes;
    let out = e.search("tomatoes garden", 2).await?;
    assert!(
        out.hits
            .iter()
            .all(|h| h.via.iter().all(|v| !matches!(v, Via::Context { .. })))
    );
    // within the gap they are context
    let wide = SearchOptions {
        context_max_gap_secs: 2 * 86_400,
        ..SearchOptions::default()
    };
    let out = e.search_with("tomatoes garden", 2, &wide).await?;
    assert_eq!(out.hits.len(), 2);
    assert_eq!(
        out.hits[1].via,
        vec![
            Via::Vector,
            Via::Context {
                of: added[0].id.clone()
            }
        ]
    );
    e.delete(&added[0].id).await?;
    let out = e.search_with("tomatoes garden", 2, &wide).await?;
    assert!(out.hits.iter().all(|h| h.note.id != added[0].id));
    assert!(
        out.hits
            .iter()
            .all(|h| h.via.iter().all(|v| !matches!(v, Via::Context { .. })))
    );
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn a_named_period_ranks_its_notes_first() -> Result<(), EngineError> {
    let e = open(&Endpoint::Mem).await?;
    let added = e
        .add_batch(vec![
            note("went hiking with the dog", None, day(2023, 3, 1))?,
            note("went hiking with the dog", None, day(2023, 7, 7))?,
            note("went hiking with the dog", None, day(2024, 7, 7))?,
        ])
        .await?
        .notes;
    for q in [
        "hiking in July 2023",
        "hiking on 7 July, 2023",
        "hiking 2023-07-07",
    ] {
        let out = e.search(q, 3).await?;
        assert_eq!(out.hits[0].note.id, added[1].id, "{q}");
        assert!(out.hits[0].via.contains(&Via::Date), "{q}");
        assert!(
            out.hits[1..].iter().all(|h| !h.via.contains(&Via::Date)),
            "{q}"
        );
    }
    let off = SearchOptions {
        date_weight: 0.0,
        ..SearchOptions::default()
    };
    let out = e.search_with("hiking in July 2023", 3, &off).await?;
    assert!(out.hits.iter().all(|h| !h.via.contains(&Via::Date)));
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn the_timeline_is_rebuilt_when_a_memory_is_opened_again() -> Result<(), EngineError> {
    let dir = tempfile::tempdir().map_err(|e| EngineError::Internal(e.to_string()))?;
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let e = open(&ep).await?;
    let notes = chat(&e).await?;
    e.close().await;
    let e = open(&ep).await?;
    let out = e.search("paint sunrise picture", 3).await?;
    assert!(out.hits.iter().any(|h| h.note.id == notes[2].id
        && h.via.contains(&Via::Context {
            of: notes[1].id.clone()
        })));
    let ranked = e.rank(
        "paint sunrise picture",
        &e.embed_query("paint sunrise picture").await?,
        0,
        &SearchOptions::default(),
    )?;
    assert!(ranked.is_empty());
    e.close().await;
    Ok(())
}

#[test]
fn options_serialise_for_reports() {
    let v = serde_json::to_value(SearchOptions::default()).unwrap_or_default();
    assert_eq!(v["context_weight"], 0.5);
    assert!(!SearchOptions::fusion_only().links);
}
