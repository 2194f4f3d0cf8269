//! `kasten eval locomo` end to end on a small generated file in the LoCoMo format (the
//! real MiniLM model, embedded memories under a private cache directory).
#![allow(clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};

use kasten_tests::{FakeServer, Home};
use serde_json::{Value, json};

/// Two short conversations. In `conv-a` the answer to "When did Ann paint the sunrise?"
/// is Bo's reply, which shares no word with the question.
fn locomo_file() -> Value {
    json!([
        {
            "sample_id": "conv-a",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo, how was your week?"},
                    {"speaker": "Bo", "dia_id": "D1:2", "text": "Busy! Did you ever paint that sunrise over the lake?"},
                    {"speaker": "Ann", "dia_id": "D1:3", "text": "Yes, last Friday, with my new brushes."},
                    {"speaker": "Bo", "dia_id": "D1:4", "text": "I adopted a rescue greyhound called Pixel.",
                     "img_url": ["http://example.invalid/dog.jpg"], "blip_caption": "a photo of a grey dog on a sofa"}
                ],
                "session_2_date_time": "10:37 am on 27 June, 2023",
                "session_2": [
                    {"speaker": "Ann", "dia_id": "D2:1", "text": "I started a pottery class downtown."},
                    {"speaker": "Bo", "dia_id": "D2:2", "text": "Pixel learned to fetch the newspaper."},
                    {"speaker": "Ann", "dia_id": "D2:3", "text": "My sister is moving to Lisbon in August."}
                ]
            },
            "qa": [
                {"question": "When did Ann paint the sunrise?", "answer": "The Friday before 8 May 2023", "evidence": ["D1:3"], "category": 2},
                {"question": "What is the name of Bo's dog?", "answer": "Pixel", "evidence": ["D1:4", "D2:2"], "category": 1},
                {"question": "What class did Ann start?", "answer": "pottery", "evidence": ["D2:1"], "category": 4},
                {"question": "Where is Ann's sister moving?", "answer": "Lisbon", "evidence": ["D2:3", "D9:99"], "category": 4},
                {"question": "What did Bo paint?", "adversarial_answer": "a sunrise", "evidence": ["D1:3"], "category": 5}
            ]
        },
        {
            "sample_id": "conv-b",
            "conversation": {
                "speaker_a": "Cy",
                "speaker_b": "Di",
                "session_1_date_time": "9:00 am on 3 March, 2023",
                "session_1": [
                    {"speaker": "Cy", "dia_id": "D1:1", "text": "I finally fixed my old bicycle."},
                    {"speaker": "Di", "dia_id": "D1:2", "text": "Nice. I am training for a marathon in Boston."}
                ]
            },
            "qa": [
                {"question": "What is Di training for?", "answer": "a marathon", "evidence": ["D1:2"], "category": 4},
                {"question": "What would Cy enjoy?", "answer": "cycling", "evidence": [], "category": 3}
            ]
        }
    ])
}

fn setup(h: &Home) -> (PathBuf, PathBuf) {
    let file = h.file(
        "locomo.json",
        serde_json::to_string_pretty(&locomo_file())
            .unwrap_or_default()
            .as_bytes(),
    );
    (file, h.dir.path().join("eval-cache"))
}

fn eval(h: &Home, file: &Path, cache: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--no-llm"];
    args.extend_from_slice(extra);
    eval_with_llm(h, file, cache, &args)
}

/// `kasten --json eval locomo FILE --cache CACHE …` with the home's LLM.
fn eval_with_llm(h: &Home, file: &Path, cache: &Path, extra: &[&str]) -> Value {
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let mut args = vec!["eval", "locomo", &f, "--cache", &c];
    args.extend_from_slice(extra);
    h.json(&args)
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn recall_per_category_with_baselines_and_a_cached_second_run() {
    let h = Home::new();
    let (file, cache) = setup(&h);
    let r = eval(&h, &file, &cache, &["-k", "3", "--per-question"]);

    // 4 + 1 questions of categories 1-4; the adversarial one and the one without
    // evidence are counted, not scored; the unknown evidence id is dropped
    assert_eq!(r["k"], 3, "{r:#}");
    assert_eq!(r["questions"]["scored"], 5, "{r:#}");
    assert_eq!(r["questions"]["adversarial_not_scored"], 1);
    assert_eq!(r["questions"]["without_known_evidence"], 1);
    assert_eq!(r["questions"]["unknown_evidence_ids_dropped"], 1);
    for system in [
        "kasten",
        "dense",
        "bm25",
        "rrf",
        "score_fusion",
        "kasten_without_context",
        "kasten_without_dates",
        "kasten_without_links",
        "kasten_with_links",
        "kasten_two_hops",
        "kasten_box_boost",
    ] {
        let rec = &r["systems"][system]["recall_at_k"];
        let overall = num(&rec["overall"]);
        assert!((0.0..=1.0).contains(&overall), "{system}: {rec}");
        assert_eq!(rec["questions"], 5, "{system}");
    }
    assert_eq!(r["recall_at_k"], r["systems"]["kasten"]["recall_at_k"]);
    // no small model here: the default search follows links (retrieval.follow_links auto)
    assert_eq!(r["search_follows_links"], true, "{r:#}");
    let by = &r["recall_at_k"]["by_category"];
    assert_eq!(by["multi-hop"]["category"], 1);
    assert_eq!(by["temporal"]["questions"], 1);
    assert_eq!(by["single-hop"]["questions"], 3);
    assert!(
        by["open-domain"].is_null(),
        "no scored open-domain question"
    );
    assert_eq!(r["systems"]["rrf"]["baseline"], true);
    assert_eq!(r["systems"]["kasten"]["baseline"], false);

    // Kasten finds the reply that answers the question through its context
    let questions = r["per_question"].as_array().cloned().unwrap_or_default();
    assert_eq!(questions.len(), 5);
    let sunrise = questions
        .iter()
        .find(|q| q["question"] == "When did Ann paint the sunrise?")
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(sunrise["systems"]["kasten"]["recall"], 1.0, "{sunrise:#}");
    for q in &questions {
        for s in ["kasten", "dense", "bm25", "rrf"] {
            let got = q["systems"][s]["retrieved"].as_array().map_or(0, Vec::len);
            assert!(got <= 3, "{q:#}");
        }
    }

    // latency, tokens and ingest are reported
    assert!(num(&r["latency_ms"]["search"]["p50"]) > 0.0);
    assert!(num(&r["latency_ms"]["search"]["p95"]) >= num(&r["latency_ms"]["search"]["p50"]));
    assert_eq!(r["tokens"]["ingest_llm"]["in"], 0);
    assert_eq!(r["tokens"]["query_llm"]["out"], 0);
    let samples = r["samples"].as_array().cloned().unwrap_or_default();
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[0]["notes"], 7);
    assert_eq!(samples[0]["ingest"]["cached"], false);
    assert_eq!(r["ingest"]["notes"], 9);

    // a k sweep reuses the memories
    let again = eval(&h, &file, &cache, &["-k", "3"]);
    assert_eq!(again["samples"][0]["ingest"]["cached"], true, "{again:#}");
    assert_eq!(again["samples"][1]["ingest"]["cached"], true);
    assert_eq!(again["ingest"]["notes"], 0);
    assert_eq!(again["recall_at_k"], r["recall_at_k"]);
    let wider = eval(&h, &file, &cache, &["-k", "10"]);
    assert_eq!(wider["samples"][0]["ingest"]["cached"], true);
    assert_eq!(num(&wider["recall_at_k"]["overall"]), 1.0, "{wider:#}");

    // the memory is a normal Kasten memory: one note per turn, the session date as its
    // time, the turn as its source, images with their caption
    let dir = std::fs::read_dir(&cache)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("-conv-a-plain-"))
        .unwrap_or_else(|| panic!("no cached memory for conv-a in {}", cache.display()));
    let db = format!("surrealkv://{}", dir.display());
    let list = h.json(&["--db", &db, "list", "--limit", "100"]);
    let notes = list["notes"].as_array().cloned().unwrap_or_default();
    assert_eq!(notes.len(), 7);
    let dog = notes
        .iter()
        .find(|n| n["source"] == "conv-a:D1:4")
        .unwrap_or_else(|| panic!("{list:#}"));
    assert_eq!(
        dog["content"],
        "Bo: [shares a photo of a grey dog on a sofa] I adopted a rescue greyhound called Pixel."
    );
    assert!(
        dog["created_at"]
            .as_str()
            .is_some_and(|t| t.starts_with("2023-05-08T13:56")),
        "{dog:#}"
    );
}

#[test]
fn samples_can_be_chosen_and_mistakes_are_explained() {
    let h = Home::new();
    let (file, cache) = setup(&h);
    let r = eval(&h, &file, &cache, &["--samples", "conv-b"]);
    assert_eq!(r["samples"].as_array().map(Vec::len), Some(1));
    assert_eq!(r["samples"][0]["sample_id"], "conv-b");
    assert_eq!(r["questions"]["scored"], 1);

    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let out = h.run(&[
        "eval",
        "locomo",
        &f,
        "--no-llm",
        "--cache",
        &c,
        "--samples",
        "conv-z",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("conv-z") && err.contains("conv-a, conv-b"),
        "{err}"
    );

    let bad = h.file("bad.json", b"{\"not\": \"a list\"}");
    let out = h.run(&[
        "eval",
        "locomo",
        &bad.display().to_string(),
        "--no-llm",
        "--cache",
        &c,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a LoCoMo file"));

    let out = h.run(&["eval", "locomo", "/nonexistent/locomo.json", "--no-llm"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn without_an_llm_the_eval_says_to_pass_no_llm() {
    // the LLM switched off (KASTEN_LLM_PROVIDER=none), as `Home::new` does
    let h = Home::new();
    let (file, cache) = setup(&h);
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    for extra in [&[][..], &["--answer"][..]] {
        let mut args = vec!["eval", "locomo", &f, "--cache", &c];
        args.extend_from_slice(extra);
        let out = h.run(&args);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--no-llm") && err.contains("no LLM configured"),
            "{err}"
        );
    }
    let out = h.run(&["eval", "locomo", &f, "--no-llm", "--answer"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
}

#[test]
fn with_an_llm_notes_are_enriched_and_questions_answered_and_scored() {
    let llm = FakeServer::start("normal");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let r = eval_with_llm(
        &h,
        &file,
        &cache,
        &[
            "--answer",
            "-k",
            "3",
            "--samples",
            "conv-a",
            "--per-question",
        ],
    );
    assert_eq!(r["llm"]["model"], "fake-model", "{r:#}");
    let ingest = &r["tokens"]["ingest_llm"];
    assert_eq!(ingest["notes_enriched"], 7, "{r:#}");
    assert!(ingest["in"].as_u64().unwrap_or(0) > 0 && ingest["out"].as_u64().unwrap_or(0) > 0);
    // every question is answered, the adversarial one too
    let a = &r["answers"];
    assert_eq!(a["questions"], 5, "{r:#}");
    for key in ["f1", "bleu1", "locomo_f1"] {
        let overall = num(&a[key]["overall"]);
        assert!((0.0..=1.0).contains(&overall), "{key}: {a:#}");
        assert!(a[format!("{key}_categories_1_to_4")].is_number());
    }
    assert_eq!(a["f1"]["by_category"]["adversarial"]["questions"], 1);
    assert!(r["tokens"]["query_llm"]["in"].as_u64().unwrap_or(0) > 0);
    assert!(num(&r["latency_ms"]["answer"]["p50"]) > 0.0);
    let q = &r["per_question"][0];
    assert!(
        q["answer"]["prediction"]
            .as_str()
            .is_some_and(|p| !p.is_empty()),
        "{q:#}"
    );
    // retrieval is still measured, on the enriched memory, and cached apart from plain notes
    assert_eq!(r["questions"]["scored"], 4);
    let plain = eval(&h, &file, &cache, &["-k", "3", "--samples", "conv-a"]);
    assert_eq!(plain["samples"][0]["ingest"]["cached"], false, "{plain:#}");
    // the same conversation with the LLM, `extra` flags after it
    let conv_a = |extra: &[&'static str]| {
        let mut a: Vec<String> = ["eval", "locomo", &f, "--cache", &c, "-k", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(
            ["--samples", "conv-a"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string()),
        );
        a
    };
    let json_of = |args: Vec<String>| h.json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let again = json_of(conv_a(&[]));
    assert_eq!(again["samples"][0]["ingest"]["cached"], true, "{again:#}");
    assert_eq!(again["tokens"]["ingest_llm"], r["tokens"]["ingest_llm"]);
    assert_eq!(r["llm"]["steps"], "full");
    assert_eq!(
        r["llm"]["prompt_version"],
        kasten_core::prompts::PROMPT_VERSION
    );

    // an ablation is a memory of its own: not the full system's cache, and its step skipped
    let ablated = json_of(conv_a(&["--no-links", "--no-evolution"]));
    assert_eq!(
        ablated["llm"]["steps"], "no-links+no-evolution",
        "{ablated:#}"
    );
    assert_eq!(
        ablated["samples"][0]["ingest"]["cached"], false,
        "{ablated:#}"
    );
    // without evolution the link prompt asks for links alone: its own prompt version
    assert_eq!(
        ablated["llm"]["prompt_version"],
        kasten_core::prompts::LINKS_PROMPT_VERSION
    );
    let ablated_in = ablated["tokens"]["ingest_llm"]["in"].as_u64().unwrap_or(0);
    let full_in = r["tokens"]["ingest_llm"]["in"].as_u64().unwrap_or(0);
    assert!(
        ablated_in > 0 && ablated_in < full_in,
        "construction only reads less: {ablated_in} vs {full_in}"
    );

    // A-Mem's prompts without evolution (the profile `links`) are the run without
    // evolution: the same steps, the same memory in the cache
    let without = json_of(conv_a(&["--no-evolution"]));
    assert_eq!(without["llm"]["steps"], "no-evolution", "{without:#}");
    assert_eq!(without["samples"][0]["ingest"]["cached"], false);
    let mut args = vec!["--json".to_owned()];
    args.extend(conv_a(&[]));
    let out = h
        .cmd(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .env("KASTEN_LLM_PROFILE", "links")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(links["llm"]["steps"], "no-evolution", "{links:#}");
    assert_eq!(
        links["llm"]["prompt_version"],
        kasten_core::prompts::LINKS_PROMPT_VERSION
    );
    assert_eq!(links["samples"][0]["ingest"]["cached"], true, "{links:#}");
}

/// `--no-enrich`: the LLM only answers, from the memory `--no-llm` builds (the same cached
/// memory), so the answers of one model can be compared with and without its enrichment.
#[test]
fn with_no_enrich_the_llm_only_answers_from_the_plain_memory() {
    let llm = FakeServer::start("normal");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let r = eval_with_llm(
        &h,
        &file,
        &cache,
        &["--answer", "--no-enrich", "-k", "3", "--samples", "conv-a"],
    );
    assert_eq!(r["llm"]["enriched"], false, "{r:#}");
    assert_eq!(r["samples"][0]["ingest"]["enriched"], 0, "{r:#}");
    assert_eq!(
        r["tokens"]["ingest_llm"]["in"].as_u64().unwrap_or(0),
        0,
        "{r:#}"
    );
    assert_eq!(r["answers"]["questions"], 5, "{r:#}");
    assert!(
        r["tokens"]["query_llm"]["in"].as_u64().unwrap_or(0) > 0,
        "{r:#}"
    );
    // the memory is the one --no-llm reads
    let plain = eval(&h, &file, &cache, &["-k", "3", "--samples", "conv-a"]);
    assert_eq!(plain["samples"][0]["ingest"]["cached"], true, "{plain:#}");
    assert_eq!(plain["recall_at_k"], r["recall_at_k"], "{plain:#}");
    // it needs --answer
    let out = h.run(&["eval", "locomo", &f, "--cache", &c, "--no-enrich"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--answer-with ask`: the questions are answered as chat answers them, and the report
/// says what the answers cite (turns of the conversation) beside their scores.
#[test]
fn answers_by_ask_are_scored_and_their_citations_reported() {
    let llm = FakeServer::start("normal");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let r = eval_with_llm(
        &h,
        &file,
        &cache,
        &[
            "--answer",
            "--answer-with",
            "ask",
            "--no-enrich",
            "--per-question",
            "--samples",
            "conv-a",
        ],
    );
    let a = &r["answers"];
    assert_eq!(a["by"], "ask", "{r:#}");
    assert_eq!(a["questions"], 5, "{r:#}");
    // the test server cites the first note it is shown in every answer it gives
    let citing = num(&a["ask"]["citing"]);
    assert!(citing > 0.0 && citing <= 1.0, "{r:#}");
    assert!(num(&a["ask"]["notes_shown_per_answer"]) > 0.0, "{r:#}");
    let turns = ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3"];
    let mut cited_any = false;
    for q in r["per_question"].as_array().into_iter().flatten() {
        let ans = &q["answer"];
        let prediction = ans["prediction"].as_str().unwrap_or_default();
        for t in ans["cited"].as_array().into_iter().flatten() {
            cited_any = true;
            assert!(turns.contains(&t.as_str().unwrap_or_default()), "{q:#}");
            assert!(prediction.contains('['), "the answer as given: {q:#}");
        }
    }
    assert!(cited_any, "{r:#}");
    assert!(num(&a["locomo_f1_categories_1_to_4"]) > 0.0, "{r:#}");
    // it needs --answer
    let out = h.run(&["eval", "locomo", &f, "--cache", &c, "--answer-with", "ask"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--search-terms`: the LLM writes each scored question's search terms; the searches
/// with them are scored beside Kasten's own, with the calls' tokens and each question's
/// terms. Without the flag, none of it is in the report.
#[test]
fn search_terms_are_scored_beside_kasten_s_own_search() {
    let llm = FakeServer::start("normal");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let args = ["--per-question", "--samples", "conv-a"];
    let mut with = vec!["--search-terms"];
    with.extend_from_slice(&args);
    let r = eval_with_llm(&h, &file, &cache, &with);
    for system in ["kasten_with_terms", "llm_terms", "kasten_fused_terms"] {
        let rec = &r["systems"][system]["recall_at_k"];
        assert_eq!(rec["questions"], 4, "{system}: {r:#}");
        assert!((0.0..=1.0).contains(&num(&rec["overall"])), "{system}");
    }
    let calls = &r["tokens"]["search_terms"];
    assert_eq!(calls["questions"], 4, "{r:#}");
    assert_eq!(calls["failed"], 0, "{r:#}");
    assert!(num(&calls["per_question"]) > 0.0, "{r:#}");
    // the adversarial question is not scored for retrieval: no terms are asked for it
    let questions = r["per_question"].as_array().cloned().unwrap_or_default();
    let with_terms = questions
        .iter()
        .filter(|q| q["search_terms"].as_array().is_some_and(|t| !t.is_empty()))
        .count();
    assert_eq!(with_terms, 4, "{r:#}");
    let sunrise = questions
        .iter()
        .find(|q| q["question"] == "When did Ann paint the sunrise?")
        .cloned()
        .unwrap_or_default();
    let terms = sunrise["search_terms"].to_string();
    assert!(terms.contains("paint"), "{sunrise:#}");

    let plain = eval_with_llm(&h, &file, &cache, &args);
    assert!(
        plain["systems"].get("kasten_with_terms").is_none(),
        "{plain:#}"
    );
    assert!(plain["tokens"].get("search_terms").is_none(), "{plain:#}");
}

/// An enriching ingest killed part way resumes after the last note added on the next run,
/// instead of starting over (a run with a real model takes hours).
#[test]
fn an_interrupted_enriching_ingest_resumes_where_it_stopped() {
    let llm = FakeServer::start("slow:300");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let args = [
        "eval",
        "locomo",
        &f,
        "--cache",
        &c,
        "-k",
        "3",
        "--samples",
        "conv-a",
    ];
    // three notes in, then killed without warning
    let partial = kill_when(&h, &args, "no progress saved", || {
        std::fs::read_dir(&cache).ok().and_then(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path().join("kasten-eval-partial.json"))
                .find(|p| added_at_least(p, 3))
        })
    });
    let before = llm.request_count();
    llm.set_mode(r#"{"mode": "normal"}"#);

    let out = h.run(&[
        "--json",
        "eval",
        "locomo",
        &f,
        "--cache",
        &c,
        "-k",
        "3",
        "--samples",
        "conv-a",
    ]);
    let r = resumed(&out, llm.request_count() - before);
    let ingest = &r["samples"][0]["ingest"];
    assert_eq!(
        num(&ingest["enriched"]) + num(&ingest["enrichment_failed"]),
        7.0,
        "{r:#}"
    );
    assert!(
        !partial.exists(),
        "the finished memory keeps no progress file"
    );
}

/// `--held-out` chooses the ranking settings on the other conversations and scores them on
/// the one left out, so a reported figure is not tuned on the questions it scores.
#[test]
fn held_out_settings_are_tuned_on_the_other_conversations() {
    let h = Home::new();
    let (file, cache) = setup(&h);
    let r = eval(&h, &file, &cache, &["-k", "3", "--held-out"]);
    let ho = &r["held_out"];
    let rows = ho["conversations"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 2, "{ho:#}");
    for row in &rows {
        let held = row["held_out"].as_str().unwrap_or_default();
        let tuned_on: Vec<&str> = row["tuned_on"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(tuned_on.len(), 1, "{row:#}");
        assert_ne!(tuned_on[0], held, "tuned on what it scores: {row:#}");
        for key in [
            "recall_held_out",
            "recall_default_held_out",
            "recall_tuned_on_others",
        ] {
            assert!((0.0..=1.0).contains(&num(&row[key])), "{key}: {row:#}");
        }
    }
    assert_eq!(ho["grid"], 36);
    // one conversation cannot be held out against anything
    let one = eval(
        &h,
        &file,
        &cache,
        &["-k", "3", "--held-out", "--samples", "conv-a"],
    );
    assert!(one.get("held_out").is_none(), "{one:#}");
}

/// `--ablations` runs the full system, each A-Mem step switched off and no LLM, and
/// reports them side by side in one report.
#[test]
fn ablations_are_reported_side_by_side_with_the_full_system() {
    let llm = FakeServer::start("normal");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let r = eval_with_llm(
        &h,
        &file,
        &cache,
        &["-k", "3", "--samples", "conv-a", "--ablations"],
    );
    let rows = r["ablations"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = rows
        .iter()
        .filter_map(|row| row["configuration"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "full",
            "no-construction",
            "no-links",
            "no-evolution",
            "no-llm"
        ],
        "{r:#}"
    );
    for row in &rows {
        let recall = num(&row["recall_at_k"]["overall"]);
        assert!((0.0..=1.0).contains(&recall), "{row:#}");
    }
    assert_eq!(rows[0]["recall_at_k"], r["recall_at_k"]);
    assert_eq!(rows[2]["steps"], "no-links");
    // without evolution nothing is written for it (the fake fills every array it may)
    assert!(
        num(&rows[3]["tokens_per_note"]) < num(&rows[0]["tokens_per_note"]),
        "{r:#}"
    );
    assert!(num(&rows[0]["tokens_per_note"]) > 0.0, "{r:#}");
    assert_eq!(num(&rows[4]["tokens_per_note"]), 0.0, "{r:#}");
    // the flag runs only with an LLM, and not with a single ablation
    let out = h.run(&[
        "eval",
        "locomo",
        &f,
        "--cache",
        &c,
        "--ablations",
        "--no-llm",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// A checkpoint carries an enriching ingest to a machine whose cache is empty: the run
/// restores it and goes on after its last note, and a finished one is scored without the
/// LLM enriching anything again.
#[test]
fn a_checkpoint_carries_an_enriching_ingest_to_an_empty_cache() {
    let (llm, h, cache, checkpoints, [f, c, cp]) = checkpointed("slow:300");
    let args = [
        "--json",
        "eval",
        "locomo",
        &f,
        "--cache",
        &c,
        "-k",
        "3",
        "--samples",
        "conv-a",
        "--checkpoint",
        &cp,
        "--checkpoint-every",
        "0",
    ];
    // the checkpoint holds three notes, then the run is killed without warning
    let folder = kill_when(&h, &args, "no checkpoint written", || {
        std::fs::read_dir(&checkpoints).ok().and_then(|d| {
            d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                p.join("memory.json.gz").is_file()
                    && added_at_least(&p.join("kasten-eval-partial.json"), 3)
            })
        })
    });
    // another machine: nothing cached
    std::fs::remove_dir_all(&cache).unwrap_or_else(|e| panic!("cannot clear the cache: {e}"));
    let before = llm.request_count();
    llm.set_mode(r#"{"mode": "normal"}"#);

    let r = resumed(&h.run(&args), llm.request_count() - before);
    // the finished memory is the checkpoint now
    assert!(folder.join("kasten-eval-complete.json").is_file());
    assert!(!folder.join("kasten-eval-partial.json").exists());

    // and a third machine scores it without enriching anything
    std::fs::remove_dir_all(&cache).unwrap_or_else(|e| panic!("cannot clear the cache: {e}"));
    let before = llm.request_count();
    let again = h.run(&args);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let a: Value = serde_json::from_slice(&again.stdout).unwrap_or_default();
    assert_eq!(a["samples"][0]["ingest"]["cached"], true, "{a:#}");
    // the same memory: every note in and enriched as the run that made it said, and it
    // ranks as the original (link expansion picks a hit's linked note by the notes alone,
    // not by the order the links were accepted in, which a restore does not keep)
    let (was, is) = (&r["samples"][0]["ingest"], &a["samples"][0]["ingest"]);
    assert_eq!(
        (&is["notes"], &is["enriched"]),
        (&was["notes"], &was["enriched"]),
        "{a:#}"
    );
    assert_eq!(a["recall_at_k"], r["recall_at_k"], "{a:#}");
    assert_eq!(a["questions"]["scored"], 4, "{a:#}");
    assert_eq!(
        llm.request_count(),
        before,
        "the restored memory was enriched again"
    );
}

/// A checkpointed run keeps its answers beside the checkpoint: run again after it was
/// stopped, it takes them instead of asking the model, with the same predictions, tokens
/// and scores. (A question whose prompt differs, as after a change in ranking, is asked
/// again.)
#[test]
fn a_checkpointed_run_answers_each_question_once() {
    let (llm, h, _, _, [f, c, cp]) = checkpointed("normal");
    let args = [
        "eval",
        "locomo",
        &f,
        "--answer",
        "--cache",
        &c,
        "-k",
        "3",
        "--samples",
        "conv-a",
        "--per-question",
        "--checkpoint",
        &cp,
    ];
    let first = h.json(&args);
    assert_eq!(first["answers"]["questions"], 5, "{first:#}");
    assert!(
        first["tokens"]["query_llm"].get("reused").is_none(),
        "{first:#}"
    );

    let before = llm.request_count();
    let again = h.json(&args);
    assert_eq!(
        llm.request_count(),
        before,
        "the model was asked again: {again:#}"
    );
    assert_eq!(again["tokens"]["query_llm"]["reused"], 5, "{again:#}");
    assert_eq!(
        again["tokens"]["query_llm"]["in"],
        first["tokens"]["query_llm"]["in"]
    );
    assert_eq!(again["answers"]["f1"], first["answers"]["f1"], "{again:#}");
    let predictions = |r: &Value| -> Vec<Value> {
        r["per_question"]
            .as_array()
            .map(|qs| {
                qs.iter()
                    .map(|q| q["answer"]["prediction"].clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(predictions(&again), predictions(&first));
    assert_eq!(predictions(&first).len(), 5, "{first:#}");

    // --fresh asks again
    let mut fresh = args.to_vec();
    fresh.push("--fresh");
    let before = llm.request_count();
    let redone = h.json(&fresh);
    assert!(
        redone["tokens"]["query_llm"].get("reused").is_none(),
        "{redone:#}"
    );
    assert!(llm.request_count() >= before + 5);
}

/// A home on a fake LLM in `mode` with the LoCoMo fixture, for the checkpointed runs: the
/// server, the home, the cache and checkpoint folders, and the fixture, cache and
/// checkpoint paths as the command line takes them.
fn checkpointed(mode: &str) -> (FakeServer, Home, PathBuf, PathBuf, [String; 3]) {
    let llm = FakeServer::start(mode);
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let checkpoints = h.dir.path().join("checkpoints");
    let paths = [
        file.display().to_string(),
        cache.display().to_string(),
        checkpoints.display().to_string(),
    ];
    (llm, h, cache, checkpoints, paths)
}

/// Runs kasten with `args`, waits (two minutes at most, else fails with `stalled`) until
/// `found` finds something, then kills it without warning and returns what was found.
fn kill_when(
    h: &Home,
    args: &[&str],
    stalled: &str,
    found: impl Fn() -> Option<PathBuf>,
) -> PathBuf {
    let mut child = h
        .cmd(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start kasten: {e}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let hit = loop {
        if let Some(p) = found() {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "{stalled}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    hit
}

/// Whether the progress file `p` says at least `n` notes were added.
fn added_at_least(p: &Path, n: u64) -> bool {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| v["added"].as_u64().unwrap_or(0) >= n)
}

/// The report of a run that resumed conv-a part way: all 7 notes in, the 4 questions
/// scored, and fewer LLM calls (`calls`) than enriching the 7 notes from the start needs
/// (one construction call each, and a link call for each note after the first).
fn resumed(out: &std::process::Output, calls: usize) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let ingest = &r["samples"][0]["ingest"];
    assert_eq!(ingest["cached"], false, "{r:#}");
    assert_eq!(ingest["notes"], 7, "{r:#}");
    assert_eq!(r["questions"]["scored"], 4, "{r:#}");
    assert!(calls < 13, "{calls} calls: started over?");
    r
}

/// `--memory` scores a finished memory as it stands: restored from a backup of the cached
/// one it ranks as that did; with a note deleted from it, the question that note answered
/// loses its evidence. It takes one conversation and only a memory the eval finished.
#[test]
fn a_finished_memory_is_scored_as_it_stands() {
    let h = Home::new();
    let (file, cache) = setup(&h);
    let cached = eval(&h, &file, &cache, &["-k", "3", "--samples", "conv-a"]);
    let folder = std::fs::read_dir(&cache)
        .ok()
        .and_then(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.is_dir())
        })
        .unwrap_or_else(|| panic!("no cached memory in {}", cache.display()));

    // the cached memory backed up and restored elsewhere, with its marker beside it
    let backup = h.dir.path().join("conv-a.json");
    let memory = h.dir.path().join("mem");
    let db = |p: &Path| format!("surrealkv://{}", p.display());
    let b = backup.display().to_string();
    h.ok(&["--db", &db(&folder), "backup", &b]);
    let f = file.display().to_string();
    let m = memory.display().to_string();
    let scored = |extra: &[&str]| -> std::process::Output {
        let mut args = vec![
            "--json", "eval", "locomo", &f, "--no-llm", "-k", "3", "--memory", &m,
        ];
        args.extend_from_slice(extra);
        h.run(&args)
    };
    h.ok(&["--db", &db(&memory), "restore", &b]);
    let unfinished = scored(&["--samples", "conv-a"]);
    assert!(!unfinished.status.success());
    assert!(
        String::from_utf8_lossy(&unfinished.stderr).contains("not a memory this eval finished"),
        "{}",
        String::from_utf8_lossy(&unfinished.stderr)
    );
    std::fs::copy(
        folder.join("kasten-eval-complete.json"),
        memory.join("kasten-eval-complete.json"),
    )
    .unwrap_or_else(|e| panic!("cannot copy the marker: {e}"));
    let both = scored(&[]);
    assert!(!both.status.success());
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("one conversation"),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );

    let as_is = |out: std::process::Output| -> Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let same = as_is(scored(&["--samples", "conv-a", "--per-question"]));
    assert_eq!(same["recall_at_k"], cached["recall_at_k"], "{same:#}");
    assert_eq!(same["samples"][0]["ingest"]["cached"], true, "{same:#}");

    // the pottery turn deleted from the memory: its question has nothing left to find
    let listed = h.json(&["--db", &db(&memory), "list", "--limit", "100"]);
    let pottery = listed["notes"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|n| n["content"].as_str().is_some_and(|c| c.contains("pottery")))
        })
        .and_then(|n| n["id"].as_str())
        .unwrap_or_else(|| panic!("no pottery note: {listed:#}"))
        .to_owned();
    h.ok(&["--db", &db(&memory), "delete", &pottery]);
    let without = as_is(scored(&["--samples", "conv-a", "--per-question"]));
    let recall_of = |r: &Value, question: &str| -> Value {
        r["per_question"]
            .as_array()
            .and_then(|qs| qs.iter().find(|q| q["question"] == question))
            .map(|q| q["systems"]["kasten"]["recall"].clone())
            .unwrap_or_default()
    };
    assert_eq!(
        recall_of(&same, "What class did Ann start?"),
        1.0,
        "{same:#}"
    );
    assert_eq!(
        recall_of(&without, "What class did Ann start?"),
        0.0,
        "{without:#}"
    );
    assert!(
        num(&without["recall_at_k"]["overall"]) < num(&same["recall_at_k"]["overall"]),
        "{without:#}"
    );
}
