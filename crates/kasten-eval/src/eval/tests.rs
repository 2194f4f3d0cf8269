//! The `--json` report of `kasten eval locomo` against what it was before it was typed:
//! `testdata/` holds the JSON the `serde_json::Value` builder wrote for the fixed inputs
//! here, and what a real run printed.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::locomo::{Category, MeanByCategory};
use kasten_engine::{LlmConfig, SearchOptions};
use serde_json::Value;

use crate::test_shape::shape;

use super::model::*;
use super::report::*;
use super::schema::*;

fn means(values: &[(Category, f64)]) -> MeanByCategory {
    let mut m = MeanByCategory::default();
    for (c, v) in values {
        m.add(*c, *v);
    }
    m
}

fn totals(answer: bool) -> Totals {
    let mut t = Totals::default();
    t.recall.insert(
        System::Kasten,
        means(&[
            (Category::SingleHop, 1.0),
            (Category::SingleHop, 0.5),
            (Category::Temporal, 0.25),
        ]),
    );
    t.recall
        .insert(System::Bm25, means(&[(Category::MultiHop, 0.75)]));
    if answer {
        t.f1 = means(&[(Category::SingleHop, 0.5), (Category::Adversarial, 1.0)]);
        t.bleu1 = means(&[(Category::SingleHop, 0.25)]);
        t.locomo_f1 = means(&[(Category::OpenDomain, 0.125)]);
    }
    let mut retrieved = HashMap::new();
    retrieved.insert(System::Kasten, vec!["D1:1".to_owned(), "D1:2".to_owned()]);
    retrieved.insert(System::Dense, vec![]);
    let mut recall = HashMap::new();
    recall.insert(System::Kasten, 0.5);
    t.results.push(QuestionResult {
        sample: "conv-a".to_owned(),
        question: "Who?".to_owned(),
        category: Category::SingleHop,
        evidence: vec!["D1:1".to_owned()],
        retrieved,
        recall,
        answer: answer.then(|| Answered {
            prediction: "Ann".to_owned(),
            f1: 1.0,
            bleu1: 0.5,
            locomo_f1: 0.75,
            cited: Vec::new(),
        }),
        search_terms: None,
    });
    t.search_latency = vec![Duration::from_millis(3), Duration::from_millis(5)];
    t.answer_latency = vec![];
    t.context_chars = vec![10, 20];
    t.skipped_no_evidence = 1;
    t.unknown_evidence = 2;
    t.adversarial = 3;
    t.ingest_seconds = 1.5;
    t.ingested_notes = 7;
    t.ingest_tokens = (100, 20);
    t.enriched = 6;
    t.enrich_failed = 1;
    t.query_tokens = (30, 4);
    t.query_tokens_estimated = true;
    t.follows_links = Some(true);
    t.grid = vec![
        (
            "conv-a".to_owned(),
            (0..GRID.len())
                .map(|i| vec![if i == 5 { 1.0 } else { 0.5 }, 0.0])
                .collect(),
        ),
        (
            "conv-b".to_owned(),
            (0..GRID.len())
                .map(|i| vec![if i == 5 { 0.75 } else { 0.25 }])
                .collect(),
        ),
    ];
    t
}

fn mode(llm: bool, answer: bool) -> Mode {
    Mode {
        llm: llm.then(|| LlmConfig {
            provider: kasten_llm::Provider::Openai,
            base_url: "http://localhost:1".to_owned(),
            model: "m".to_owned(),
            api_key: None,
        }),
        profile: kasten_engine::ModelProfile::Full,
        prompt_version: "p1",
        compact_json: false,
        steps: kasten_engine::Steps {
            construction: true,
            links: false,
            evolution: true,
        },
        answer,
        answer_with: AnswerWith::Amem,
        enrich: true,
        held_out: true,
        search_terms: false,
    }
}

/// The header of the fixed inputs' run.
fn header<'a>(options: &'a SearchOptions, mode: &'a Mode) -> Header<'a> {
    Header {
        file: Path::new("/data/locomo.json"),
        hash: 0xabc,
        cache: Path::new("/cache"),
        k: 3,
        options,
        mode,
    }
}

/// The report of the fixed inputs, with or without an LLM and answers.
fn report(llm: bool, answer: bool, per_question: bool) -> Report {
    let options = SearchOptions::default();
    let m = mode(llm, answer);
    let header = header(&options, &m);
    let samples = vec![
        SampleReport {
            sample_id: "conv-a".to_owned(),
            notes: 4,
            sessions: 2,
            questions: 5,
            ingest: SampleIngest {
                ingest: Ingest {
                    notes: 4,
                    seconds: 2.0,
                    notes_per_s: 2.0,
                    enriched: 3,
                    enrichment_failed: 1,
                    llm_tokens_in: 100,
                    llm_tokens_out: 20,
                },
                cached: false,
            },
        },
        SampleReport {
            sample_id: "conv-b".to_owned(),
            notes: 3,
            sessions: 1,
            questions: 2,
            ingest: SampleIngest {
                ingest: Ingest {
                    notes: 3,
                    seconds: 1.0,
                    notes_per_s: 3.0,
                    ..Ingest::default()
                },
                cached: true,
            },
        },
    ];
    let t = totals(answer);
    build_report(
        &header,
        &samples,
        &t,
        per_question,
        Duration::from_millis(2500),
    )
}

/// The report of `t` alone (no samples), every question in it.
fn per_question_report(options: &SearchOptions, m: &Mode, t: &Totals) -> Value {
    typed(&build_report(
        &header(options, m),
        &[],
        t,
        true,
        Duration::ZERO,
    ))
}

fn typed(r: &Report) -> Value {
    serde_json::to_value(r).unwrap_or_else(|e| panic!("the report does not serialise: {e}"))
}

fn captured(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {e}"))
}

/// With an LLM, answers, per-question results and two conversations held out: the same
/// JSON, field for field and value for value, as the untyped builder wrote.
#[test]
fn the_report_is_the_json_it_always_was() {
    let old = captured(include_str!("testdata/locomo-full.json"));
    let new = typed(&report(true, true, true));
    assert_eq!(shape(&new), shape(&old));
    assert_eq!(new, old);
}

/// Without an LLM (`llm` and `answers` null, no `per_question`) and with the rows of
/// `--ablations` (`steps` null for the memory without an LLM).
#[test]
fn the_report_without_an_llm_and_its_ablations_are_the_json_they_were() {
    let full = report(true, true, true);
    let mut plain = report(false, false, false);
    plain.ablations = Some(vec![
        ablation_row("full", &full),
        ablation_row("no-llm", &plain),
    ]);
    let old = captured(include_str!("testdata/locomo-plain-ablations.json"));
    let new = typed(&plain);
    assert_eq!(shape(&new), shape(&old));
    assert_eq!(new, old);
    assert!(new.get("per_question").is_none(), "absent, not null");
    assert!(
        new.get("answers").is_some_and(Value::is_null),
        "null, not absent"
    );
}

/// With `--search-terms`: the searches with the LLM's terms are reported beside Kasten's,
/// with the calls' tokens and each question's terms; without it, none of them appears.
#[test]
fn search_terms_add_their_searches_and_calls_to_the_report() {
    let options = SearchOptions::default();
    let mut m = mode(true, false);
    m.search_terms = true;
    let mut t = totals(false);
    t.recall
        .insert(System::WithTerms, means(&[(Category::SingleHop, 1.0)]));
    t.terms = TermsTally {
        questions: 2,
        failed: 1,
        tokens: (150, 30),
        latency: vec![Duration::from_millis(900), Duration::from_millis(1100)],
    };
    t.results[0].search_terms = Some(vec!["Ann".to_owned(), "painting".to_owned()]);
    let v = per_question_report(&options, &m, &t);
    assert_eq!(
        v["systems"]["kasten_with_terms"]["recall_at_k"]["overall"],
        1.0
    );
    assert!(v["systems"]["llm_terms"].is_object(), "{v:#}");
    assert!(v["systems"]["kasten_fused_terms"].is_object(), "{v:#}");
    let calls = &v["tokens"]["search_terms"];
    assert_eq!(calls["questions"], 2);
    assert_eq!(calls["failed"], 1);
    assert_eq!(calls["per_question"], 90.0);
    assert_eq!(calls["latency_ms"]["mean"], 1000.0);
    assert_eq!(v["per_question"][0]["search_terms"][1], "painting");

    let plain = typed(&report(true, false, true));
    assert!(plain["systems"].get("kasten_with_terms").is_none());
    assert!(plain["systems"].get("llm_terms").is_none());
    assert!(plain["systems"].get("kasten_fused_terms").is_none());
    assert!(plain["tokens"].get("search_terms").is_none());
    assert!(plain["per_question"][0].get("search_terms").is_none());
}

/// Answered by `ask`: the report says so and gives what the answers cite, as shares of
/// the answers they are taken of; the per-question answer lists the turns it cites.
#[test]
fn answers_by_ask_report_their_citations_and_declines() {
    let options = SearchOptions::default();
    let mut m = mode(true, true);
    m.answer_with = AnswerWith::Ask;
    let mut t = totals(true);
    t.ask = AskTally {
        answerable: 4,
        answerable_declined: 1,
        answerable_citing: 3,
        answerable_inferred: 1,
        inferred: 2,
        inferred_evidence: 1,
        cited: 5,
        cited_evidence: 2,
        with_evidence: 4,
        evidence_cited: 2,
        adversarial: 2,
        adversarial_declined: 2,
        shown: 30,
        invalid_citations: 1,
    };
    if let Some(a) = t.results[0].answer.as_mut() {
        a.cited = vec!["D1:1".to_owned()];
    }
    let v = per_question_report(&options, &m, &t);
    let a = &v["answers"];
    assert_eq!(a["by"], "ask");
    assert_eq!(a["ask"]["citing"], 0.75);
    assert_eq!(a["ask"]["citation_precision"], 0.4);
    assert_eq!(a["ask"]["citing_inferred"], 0.25);
    assert_eq!(a["ask"]["inferred_precision"], 0.5);
    assert_eq!(a["ask"]["evidence_cited"], 0.5);
    assert_eq!(a["ask"]["declined_answerable"], 0.25);
    assert_eq!(a["ask"]["declined_adversarial"], 1.0);
    assert_eq!(a["ask"]["notes_shown_per_answer"], 5.0);
    assert_eq!(a["ask"]["invalid_citations"], 1);
    assert_eq!(v["per_question"][0]["answer"]["cited"][0], "D1:1");
    // A-Mem's answers say nothing of it: the report is the one it always was
    assert!(
        typed(&report(true, true, true))["answers"]
            .get("by")
            .is_none()
    );
}

/// What `kasten --json eval locomo --no-llm --per-question --held-out` printed on the
/// end-to-end test's file before the report was typed reads into the types and prints
/// back unchanged.
#[test]
fn a_report_of_a_real_run_reads_back_unchanged() {
    let old = captured(include_str!("testdata/locomo-no-llm-run.json"));
    let r: Report =
        serde_json::from_value(old.clone()).unwrap_or_else(|e| panic!("does not read: {e}"));
    assert_eq!(shape(&typed(&r)), shape(&old));
    assert_eq!(typed(&r), old);
}

/// The files a cached memory holds: today's read back whole, older ones without a field
/// read with it zero.
#[test]
fn cache_files_read_back_with_missing_fields_zero() {
    let i = Ingest {
        notes: 4,
        seconds: 2.5,
        notes_per_s: 1.6,
        enriched: 3,
        enrichment_failed: 1,
        llm_tokens_in: 10,
        llm_tokens_out: 2,
    };
    let text = serde_json::to_string(&i).unwrap_or_default();
    assert_eq!(serde_json::from_str::<Ingest>(&text).ok(), Some(i));
    let old: Partial = serde_json::from_str(r#"{"added": 7, "seconds": 1.5}"#)
        .unwrap_or_else(|e| panic!("an older progress file does not read: {e}"));
    assert_eq!((old.added, old.enriched, old.seconds), (7, 0, 1.5));
    let s = SampleIngest {
        ingest: Ingest::default(),
        cached: true,
    };
    let v = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(v["cached"], true);
    assert_eq!(v["seconds"], 0.0);
    assert!(v["seconds"].is_f64() && v["notes"].is_u64());
}
