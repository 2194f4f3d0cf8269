#![allow(clippy::panic)]
use super::*;

/// (before the subject, between subject and value): the benchmark's templates.
const TEMPLATES: &[(&str, &str)] = &[
    ("The headquarters of ", " is located in the city of "),
    ("The univeristy where ", " was educated is "),
    ("The name of the current head of the ", " government is "),
    ("The name of the current head of state in ", " is "),
    ("The company that produced ", " is "),
    ("The Prime Minister of ", " is "),
    ("The President of ", " is "),
    ("The Mayor of ", " is "),
    ("The Governor of ", " is "),
    ("The author of ", " is "),
    ("The capital of ", " is "),
    ("The type of ", " is "),
    ("The official language of ", " is "),
    ("The chief executive officer of ", " is "),
    ("The chairperson of ", " is "),
    ("The director of ", " is "),
    ("The origianl broadcaster of ", " is "),
    ("The head coach of ", " is "),
    ("The original language of ", " is "),
    ("", " was born in the city of "),
    ("", " died in the city of "),
    ("", " worked in the city of "),
    ("", " plays the position of "),
    ("", " is located in the continent of "),
    ("", " is married to "),
    ("", " was founded in the city of "),
    ("", " was founded by "),
    ("", " is associated with the sport of "),
    ("", " is a citizen of "),
    ("", " was performed by "),
    ("", " is famous for "),
    ("", " was created in the country of "),
    ("", " was written in the language of "),
    ("", " speaks the language of "),
    ("", " is employed by "),
    ("", " was created by "),
    ("", " was developed by "),
    ("", " is affiliated with the religion of "),
    ("", " works in the field of "),
    ("", "'s child is "),
    ("", " is a member of the "),
];

/// (template, subject) and value of a fact.
fn parse(fact: &str) -> Option<((usize, String), String)> {
    let body = fact.strip_suffix('.')?;
    TEMPLATES.iter().enumerate().find_map(|(t, (pre, mid))| {
        let rest = body.strip_prefix(pre)?;
        let at = rest.find(mid)?;
        let (subject, value) = (rest.get(..at)?, rest.get(at + mid.len()..)?);
        (!subject.is_empty() && !value.is_empty())
            .then(|| ((t, subject.to_owned()), value.to_owned()))
    })
}

#[test]
#[ignore = "a measurement: needs KASTEN_FACTCONSOLIDATION=<the dev file>"]
fn factconsolidation_pairs() {
    let path = std::env::var("KASTEN_FACTCONSOLIDATION")
        .unwrap_or_else(|_| panic!("set KASTEN_FACTCONSOLIDATION to the dev file"));
    let which = std::env::var("KASTEN_FC_ITEMS").unwrap_or_else(|_| "_sh_6k".into());
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let data: serde_json::Value =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    let tokenizer = Tokenizer::default();
    let mut measured = 0;
    let items = data["items"].as_array();
    for item in items.unwrap_or_else(|| panic!("{path}: no items")) {
        let source = item["source"]
            .as_str()
            .unwrap_or_else(|| panic!("an item without a source"));
        if !source.contains(&which) {
            continue;
        }
        measured += 1;
        let facts: Vec<&str> = item["facts"]
            .as_array()
            .unwrap_or_else(|| panic!("{source}: no facts"))
            .iter()
            .map(|f| {
                f.as_str()
                    .unwrap_or_else(|| panic!("{source}: a fact is not text"))
            })
            .collect();
        let parsed: Vec<_> = facts
            .iter()
            .map(|f| parse(f).unwrap_or_else(|| panic!("no template for {f}")))
            .collect();
        let (mut truth, mut found, mut missed, mut false_pos) = (0, 0, Vec::new(), Vec::new());
        for j in 0..facts.len() {
            for i in 0..j {
                let same = parsed[i].0 == parsed[j].0 && parsed[i].1 != parsed[j].1;
                let got = supersedes_with(&tokenizer, facts[j], facts[i]);
                truth += usize::from(same);
                match (same, got) {
                    (true, Some(_)) => found += 1,
                    (true, None) => missed.push(format!("{} | {}", facts[i], facts[j])),
                    (false, Some(s)) => {
                        false_pos.push(format!("{} | {} | {}", facts[i], facts[j], s.reason()))
                    }
                    (false, None) => {}
                }
            }
        }
        println!(
            "{source}: {} facts, {truth} supersession pairs, found {found}, missed {}, false {}",
            facts.len(),
            missed.len(),
            false_pos.len()
        );
        for m in missed.iter().take(20) {
            println!("  missed: {m}");
        }
        for f in false_pos.iter().take(20) {
            println!("  false: {f}");
        }
        assert!(truth > 0, "{source}: no pairs in the ground truth");
        assert!(missed.is_empty() && false_pos.is_empty(), "{source}");
    }
    assert!(measured > 0, "no item matches {which}");
}
