//! `kasten eval factconsolidation` end to end on a small file of its own in the
//! MemoryAgentBench format (the real MiniLM model, embedded memories under a private cache
//! directory): facts that change, found superseded on write, and the current one ranked
//! first.
#![allow(clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};

use kasten_tests::{FakeServer, Home};
use serde_json::{Value, json};

const FACTS: &[&str] = &[
    "goaltender is associated with the sport of ice hockey.",
    "The chairperson of Fatah is Mahmoud Abbas.",
    "Our rent is 1,200 euros a month.",
    "Thomas Kyd was born in the city of London.",
    "The author of The Marriage of Figaro is Thomas Kyd.",
    "goaltender is associated with the sport of pesäpallo.",
    "The chairperson of Fatah is Yasser Arafat.",
    "Thomas Kyd was born in the city of Leeds.",
    "Leeds is located in the continent of Europe.",
];

fn file() -> Value {
    json!({"items": [
        {
            "source": "fc_sh_tiny",
            "facts": FACTS,
            "questions": [
                {"id": "sh0", "question": "Which sport is goaltender associated with?", "answers": ["pesäpallo"]},
                {"id": "sh1", "question": "Who is the chairperson of Fatah?", "answers": ["Yasser Arafat"]},
                {"id": "sh2", "question": "In which city was Thomas Kyd born?", "answers": ["Leeds"]}
            ]
        },
        {
            "source": "fc_mh_tiny",
            "facts": FACTS,
            "questions": [
                {"id": "mh0", "question": "In which city was the author of The Marriage of Figaro born?", "answers": ["Leeds"]}
            ]
        }
    ]})
}

fn setup(h: &Home) -> (PathBuf, PathBuf) {
    let f = h.file(
        "fc.json",
        serde_json::to_string(&file())
            .unwrap_or_default()
            .as_bytes(),
    );
    (f, h.dir.path().join("eval-cache"))
}

fn eval(h: &Home, file: &Path, cache: &Path, extra: &[&str]) -> Value {
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let mut args = vec!["eval", "factconsolidation", &f, "--cache", &c];
    args.extend_from_slice(extra);
    h.json(&args)
}

fn item<'a>(r: &'a Value, source: &str) -> &'a Value {
    r["items"]
        .as_array()
        .and_then(|v| v.iter().find(|i| i["source"] == source))
        .unwrap_or_else(|| panic!("no item {source} in {r:#}"))
}

#[test]
fn the_current_fact_is_found_first_and_the_old_ones_superseded() {
    let h = Home::new();
    let (file, cache) = setup(&h);
    let r = eval(&h, &file, &cache, &["--no-llm", "--per-question"]);
    let sh = item(&r, "fc_sh_tiny");
    assert_eq!(sh["kind"], "single_hop", "{r:#}");
    assert_eq!(sh["cached"], false);
    // ice hockey, Mahmoud Abbas and London were replaced, and found so on write
    assert_eq!(sh["facts_replaced_in_data"], 3, "{sh:#}");
    assert_eq!(sh["notes_superseded"], 3, "{sh:#}");
    assert_eq!(sh["replaced_facts_found_superseded"], 3, "{sh:#}");
    assert_eq!(sh["notes_merged"], 0);
    assert_eq!(sh["resolved"], 3);
    assert_eq!(sh["current_fact_at_1"], 1.0, "{r:#}");
    assert_eq!(sh["current_fact_at_5"], 1.0);
    assert!(sh["accuracy"].is_null(), "no answers without an LLM");
    assert_eq!(sh["tokens_per_fact"], 0.0);
    assert!(sh["seconds_per_fact"].as_f64().is_some_and(|s| s > 0.0));
    // the multi-hop question is a chain: the author, then where he was born now
    let mh = item(&r, "fc_mh_tiny");
    assert_eq!(mh["kind"], "multi_hop");
    let q = r["questions"]
        .as_array()
        .and_then(|v| v.iter().find(|q| q["id"] == "mh0"))
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(q["targets"], json!([4, 7]), "{q:#}");
    assert_eq!(mh["current_fact_at_5"], 1.0, "{q:#}");
    assert_eq!(r["overall"]["single_hop"]["questions"], 3);
    assert_eq!(r["overall"]["all"]["questions"], 4);

    // the second run reuses the memories
    let again = eval(&h, &file, &cache, &["--no-llm", "--samples", "fc_sh_tiny"]);
    assert_eq!(item(&again, "fc_sh_tiny")["cached"], true, "{again:#}");
    assert_eq!(again["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        item(&again, "fc_sh_tiny")["current_fact_at_1"],
        sh["current_fact_at_1"]
    );

    // an unknown item is named, with the ones the file has
    let (f, c) = (file.display().to_string(), cache.display().to_string());
    let out = h.run(&[
        "eval",
        "factconsolidation",
        &f,
        "--no-llm",
        "--cache",
        &c,
        "--samples",
        "nope",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no item nope") && err.contains("fc_sh_tiny"),
        "{err}"
    );
    // a file of another format says what it expected
    let bad = h.file("bad.json", b"[1, 2]");
    let out = h.run(&[
        "eval",
        "factconsolidation",
        &bad.display().to_string(),
        "--no-llm",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a FactConsolidation file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn with_an_llm_notes_are_enriched_and_answers_scored() {
    let llm = FakeServer::start("normal");
    let h = Home::with_llm(&llm.openai_url());
    let (file, cache) = setup(&h);
    let r = eval(&h, &file, &cache, &["--answer", "--samples", "fc_sh_tiny"]);
    assert_eq!(r["llm"], "fake-model", "{r:#}");
    let sh = item(&r, "fc_sh_tiny");
    let acc = sh["accuracy"].as_f64().unwrap_or(-1.0);
    assert!((0.0..=1.0).contains(&acc), "{sh:#}");
    assert!(
        sh["tokens_per_fact"].as_f64().is_some_and(|t| t > 0.0),
        "{sh:#}"
    );
    assert!(
        sh["answer_tokens_per_question"]
            .as_f64()
            .is_some_and(|t| t > 0.0),
        "{sh:#}"
    );
    // supersession needs no LLM: the same pairs are found
    assert_eq!(sh["notes_superseded"], 3, "{sh:#}");
}
