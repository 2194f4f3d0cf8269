//! Memory through the CLI on the real stack (embedded SurrealDB, MiniLM): `ask` with
//! citations against `kasten-fakellm`, "not in memory", `boxes`, merge on write under both
//! review policies, archive and restore.
#![allow(clippy::panic)] // test helpers fail loudly

use kasten_tests::{FakeServer, Home};
use serde_json::Value;

const NOTES: &[&str] = &[
    "My cat is called Miso and she loves tuna.",
    "Anna's birthday is on the third of May; she likes orchids.",
    "I parked the car on level 3 of the Central garage.",
    "The quarterly report on the Rust migration is due on Friday.",
    "Miso the cat had her vaccination at the vet on Tuesday.",
];

fn add_all(h: &Home) -> Vec<String> {
    NOTES
        .iter()
        .map(|n| {
            h.json(&["add", n])["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn strs(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ask_cites_notes_it_showed_and_says_when_something_is_not_in_memory() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    let ids = add_all(&h);

    let a = h.json(&["ask", "What is my cat called?"]);
    let citations = strs(&a["citations"]);
    assert!(!citations.is_empty(), "{a:#}");
    let shown: Vec<String> = a["notes"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|n| n["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for c in &citations {
        assert!(shown.contains(c), "cited {c} was not shown: {a:#}");
        assert!(ids.contains(c));
    }
    assert_eq!(citations[0], ids[0], "{a:#}");
    assert_eq!(a["not_in_memory"], false);
    assert!(a["answer"].as_str().unwrap_or_default().contains("[1]"));
    // the model's own citations, not read back from the answer's words
    assert_eq!(a["citations_inferred"], false, "{a:#}");
    // the cited note was reinforced
    let n = h.json(&["show", &ids[0]]);
    assert_eq!(n["access_count"], 1, "{n:#}");

    let a = h.json(&["ask", "Which volcano erupted in Iceland last winter?"]);
    assert_eq!(a["not_in_memory"], true, "{a:#}");
    assert_eq!(a["answer"], "Not in memory.");
    assert!(strs(&a["citations"]).is_empty());
    assert_eq!(a["citations_inferred"], false, "{a:#}");

    // small talk skips retrieval, and says so
    let a = h.json(&["ask", "hello!"]);
    assert_eq!(a["retrieval"]["mode"], "skipped", "{a:#}");

    // a session keeps the conversation
    h.json(&["ask", "When is Anna's birthday?", "--session", "t", "--new"]);
    let a = h.json(&["ask", "and what does she like?", "--session", "t"]);
    assert!(
        a["notes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|n| n["id"] == ids[1].as_str())),
        "{a:#}"
    );
}

#[test]
fn ask_without_an_llm_still_answers_not_in_memory_and_explains_otherwise() {
    let h = Home::new();
    add_all(&h);
    let a = h.json(&["ask", "Which volcano erupted in Iceland last winter?"]);
    assert_eq!(a["not_in_memory"], true);
    let out = h.run(&["ask", "What is my cat called?"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("LLM") || err.contains("llm"), "{err}");
}

#[test]
fn a_failed_quality_check_is_one_json_report_and_a_failing_exit() {
    let h = Home::new();
    add_all(&h);
    // nothing enriched: the check fails ("nothing checked")
    let out = h.run(&["--json", "quality"]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {stdout}"));
    assert_eq!(report["passed"], false, "{report:#}");
    assert!(report.get("error").is_none(), "{report:#}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the quality check failed"), "{err}");
}

#[test]
fn near_duplicates_are_merge_proposals_not_second_notes_under_both_policies() {
    for policy in ["auto", "review"] {
        let h = Home::new();
        h.ok(&["config", "set", "policy.links", policy]);
        let ids = add_all(&h);
        let m = h.json(&["add", "My cat is called Miso, and she loves tuna!"]);
        assert_eq!(m["merged_into"], ids[0].as_str(), "{policy}: {m:#}");
        assert_eq!(m["merged"], true, "{policy}: {m:#}");
        assert_eq!(
            m["status"],
            if policy == "auto" {
                "accepted"
            } else {
                "proposed"
            }
        );
        let list = h.json(&["list"]);
        assert_eq!(
            list["notes"].as_array().map(Vec::len),
            Some(NOTES.len()),
            "{policy}: {list:#}"
        );
        // the total counts what the list can show; the merged note is counted apart
        assert_eq!(list["total"].as_u64(), Some(NOTES.len() as u64), "{list:#}");
        assert_eq!(list["merged"].as_u64(), Some(1), "{list:#}");
        let q = h.json(&["proposals"]);
        let item = q["items"]
            .as_array()
            .and_then(|v| v.iter().find(|i| i["label"] == "same-entity").cloned())
            .unwrap_or_else(|| panic!("{policy}: no merge proposal in {q:#}"));
        // rolling back the merge event keeps the note separately
        let event = item["event"].as_str().unwrap_or_default().to_owned();
        h.ok(&["rollback", &event]);
        let list = h.json(&["list"]);
        assert_eq!(
            list["notes"].as_array().map(Vec::len),
            Some(NOTES.len() + 1)
        );
    }
}

/// Deleting a note settles the merges into it: the note merged into it comes back as a
/// regular note, listed and found by search.
#[test]
fn deleting_a_note_brings_back_the_note_merged_into_it() {
    let h = Home::new();
    let ids = add_all(&h);
    let m = h.json(&["add", "My cat is called Miso, and she loves tuna!"]);
    assert_eq!(m["merged_into"], ids[0].as_str(), "{m:#}");
    let dup = m["id"].as_str().unwrap_or_default().to_owned();
    h.ok(&["delete", &ids[0]]);
    let list = h.json(&["list"]);
    let listed: Vec<&str> = list["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert!(listed.contains(&dup.as_str()), "{list:#}");
    assert_eq!(listed.len(), NOTES.len(), "{list:#}");
    assert_eq!(list["merged"].as_u64(), Some(0), "{list:#}");
    let found = h.json(&["search", "what is my cat called", "-k", "3"]);
    assert_eq!(
        found["hits"][0]["id"].as_str(),
        Some(dup.as_str()),
        "{found:#}"
    );
    let shown = h.json(&["show", &dup]);
    assert_eq!(shown["status"].as_str(), Some("active"), "{shown:#}");
}

/// Notes that read alike but state other amounts or numbers (also the same numbers in
/// another order) are two notes, linked for review with what differs: `supersedes` when the
/// newer one gives another value for the same thing, else `contradicts`.
#[test]
fn notes_that_read_alike_but_state_other_facts_are_not_merged() {
    for (old, new, label, shown) in [
        (
            "Anna paid 40 euros for the concert tickets",
            "Anna paid 90 euros for the concert tickets",
            "supersedes",
            "paid: 40 euros → 90 euros",
        ),
        (
            "round 3 note 4 of the planning meeting: ship the beta",
            "round 4 note 3 of the planning meeting: ship the beta",
            "contradicts",
            "numbers 4, 3 ≠ 3, 4",
        ),
        // a correction: negation and change words are facts too
        (
            "The deploy script for the staging servers requires sudo",
            "The deploy script for the staging servers no longer requires sudo",
            "contradicts",
            "change no longer ≠ -",
        ),
    ] {
        let h = Home::new();
        let old_id = h.json(&["add", old])["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let added = h.json(&["add", new]);
        assert!(added["merged_into"].is_null(), "{new}: {added:#}");
        assert_eq!(added["merged"], false, "{new}: {added:#}");
        let new_id = added["id"].as_str().unwrap_or_default().to_owned();
        let list = h.json(&["list"]);
        assert_eq!(list["notes"].as_array().map(Vec::len), Some(2), "{list:#}");
        assert_eq!(list["total"].as_u64(), Some(2), "{list:#}");
        let q = h.json(&["proposals"]);
        let item = q["items"]
            .as_array()
            .and_then(|v| v.iter().find(|i| i["label"] == label).cloned())
            .unwrap_or_else(|| panic!("{new}: no {label} link in {q:#}"));
        assert_eq!(item["note"].as_str(), Some(new_id.as_str()), "{item:#}");
        assert_eq!(item["target"].as_str(), Some(old_id.as_str()), "{item:#}");
        let reason = item["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(shown), "{reason}");
        let found = h.json(&["search", new, "-k", "2"]);
        assert!(
            found["hits"]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x["id"] == new_id.as_str())),
            "{found:#}"
        );
    }
}

#[test]
fn boxes_and_archive_round_trip() {
    let h = Home::new();
    let ids = add_all(&h);
    let boxes = h.json(&["boxes", "--recompute"]);
    let arr = boxes.as_array().cloned().unwrap_or_default();
    for b in &arr {
        assert!(b["id"].is_string() && b["label"].is_string(), "{b:#}");
        assert!(b["members"].is_array());
    }

    let before = h.json(&["show", &ids[2]]);
    h.ok(&["archive", &ids[2]]);
    let hits = h.json(&["search", "where did I park the car"]);
    assert!(
        hits["hits"]
            .as_array()
            .is_some_and(|v| v.iter().all(|x| x["id"] != ids[2].as_str())),
        "{hits:#}"
    );
    h.ok(&["restore", &ids[2]]);
    let after = h.json(&["show", &ids[2]]);
    assert_eq!(after["content"], before["content"]);
    assert_eq!(after["status"], "active");
    // archive and restore are each a change of the note
    assert_eq!(
        after["version"].as_u64(),
        before["version"].as_u64().map(|v| v + 2)
    );
    let hits = h.json(&["search", "where did I park the car"]);
    assert_eq!(hits["hits"][0]["id"], ids[2].as_str(), "{hits:#}");

    // tiers and candidates
    h.ok(&["tier", &ids[3], "project", "--project", "rust"]);
    let p = h.json(&["project", "close", "rust"]);
    assert_eq!(p[0]["active"], false, "{p:#}");
    let c = h.json(&["archive-candidates", "--threshold", "1.01"]);
    assert_eq!(c.as_array().map(Vec::len), Some(NOTES.len()), "{c:#}");
    let c = h.json(&["archive-candidates"]);
    assert_eq!(c.as_array().map(Vec::len), Some(0), "{c:#}");

    // keeping a fading note reinforces it and is in its history, as the app's Keep is
    let kept = h.json(&["keep", &ids[4]]);
    assert_eq!(kept["id"], ids[4].as_str(), "{kept:#}");
    assert!(
        kept["strength"].as_f64().is_some_and(|s| s > 0.99),
        "{kept:#}"
    );
    let hist = h.json(&["history", &ids[4]]);
    let entries = hist["history"].as_array().cloned().unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "keep" && e["actor"] == "user"),
        "{hist:#}"
    );
}

/// The answer prompt shows each note's context, not only its content: a question whose
/// answer is only in a note's context is answered from it, citing that note.
#[test]
fn ask_answers_from_a_notes_context() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    add_all(&h);
    let id = h.json(&["add", "Met Jo on Tuesday afternoon.", "--wait"])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    h.json(&["edit", &id, "--context", "Jo is Caroline's piano teacher."]);

    let a = h.json(&["ask", "Who is Caroline's piano teacher?"]);
    let answer = a["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("Jo is Caroline's piano teacher"), "{a:#}");
    assert_eq!(strs(&a["citations"]).first(), Some(&id), "{a:#}");
}

/// Search, opening a note and agents' searches reinforce what they return, as chat does;
/// `retrieval.reinforce chat` limits it to chat again.
#[test]
fn searching_and_opening_a_note_reinforce_it_as_configured() {
    let h = Home::new();
    let ids = add_all(&h);
    let count = |id: &str| {
        let n = h.json(&["show", id]);
        n["access_count"].as_u64().unwrap_or(u64::MAX)
    };
    // `show` reports the note as it was opened, then reinforces it
    assert_eq!(count(&ids[2]), 0);
    assert_eq!(count(&ids[2]), 1);
    let found = h.json(&["search", "where did I park the car"]);
    assert_eq!(found["hits"][0]["id"], ids[2].as_str(), "{found:#}");
    assert_eq!(count(&ids[2]), 3, "the search reinforced it");

    h.ok(&["config", "set", "retrieval.reinforce", "chat"]);
    h.json(&["search", "where did I park the car"]);
    // the last open counted; from now on nothing does
    assert_eq!(count(&ids[2]), 4);
    assert_eq!(count(&ids[2]), 4);
    let bad = h.run(&["config", "set", "retrieval.reinforce", "sometimes"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("retrieval.reinforce"));
}

/// The rent example in the CLI: `show` gives a note's validity (from the date its text
/// states, until its successor's), `search --as-of` and `ask --as-of` what was current on
/// a day, and a date in another form is refused with the form to use.
#[test]
fn show_gives_the_validity_and_as_of_returns_what_was_current_then() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    let id = |v: Value| v["id"].as_str().unwrap_or_default().to_owned();
    h.json(&[
        "add",
        "The landlord is called Anna Virtanen.",
        "--time",
        "2026-02-01",
    ]);
    let old = id(h.json(&[
        "add",
        "Our rent is 1,200 euros a month.",
        "--time",
        "2026-03-01",
    ]));
    // noted in March, true from September
    let new = id(h.json(&[
        "add",
        "From September the rent is 1,300 euros.",
        "--time",
        "2026-03-10",
    ]));
    let shown = h.json(&["show", &old]);
    assert_eq!(
        shown["valid_from"], "2026-03-01T00:00:00+00:00",
        "{shown:#}"
    );
    assert_eq!(
        shown["valid_until"], "2026-09-01T00:00:00+00:00",
        "{shown:#}"
    );
    assert_eq!(shown["superseded_by"]["id"], new.as_str(), "{shown:#}");
    assert_eq!(
        shown["content"], "Our rent is 1,200 euros a month.",
        "kept: {shown:#}"
    );
    let shown = h.json(&["show", &new]);
    assert_eq!(
        shown["valid_from"], "2026-09-01T00:00:00+00:00",
        "{shown:#}"
    );
    assert!(shown["valid_until"].is_null(), "{shown:#}");
    let text = h.ok(&["show", &old]);
    assert!(
        text.contains(&format!(
            "valid:     2026-03-01 until 2026-09-01 (superseded by {new}"
        )),
        "{text}"
    );

    let ids = |v: &Value, key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let today = ids(
        &h.json(&["search", "how much is the rent", "-k", "3"]),
        "hits",
    );
    let pos = |v: &[String], x: &str| v.iter().position(|i| i == x);
    assert!(pos(&today, &new) < pos(&today, &old), "{today:?}");
    let june = ids(
        &h.json(&[
            "search",
            "how much is the rent",
            "-k",
            "3",
            "--as-of",
            "2026-06-30",
        ]),
        "hits",
    );
    assert_eq!(june.first(), Some(&old), "{june:?}");
    assert_eq!(pos(&june, &new), None, "{june:?}");
    let asked = h.json(&["ask", "how much is the rent", "--as-of", "2026-06-30"]);
    let shown = ids(&asked, "notes");
    assert!(shown.contains(&old) && !shown.contains(&new), "{asked:#}");
    let asked = h.json(&["ask", "how much is the rent"]);
    let shown = ids(&asked, "notes");
    assert!(pos(&shown, &new) < pos(&shown, &old), "{asked:#}");

    // the list as of a day: the notes that had taken effect by its end, newest first
    let listed = h.json(&["list", "--as-of", "2026-06-30"]);
    assert_eq!(ids(&listed, "notes")[0], old, "{listed:#}");
    assert_eq!(pos(&ids(&listed, "notes"), &new), None, "{listed:#}");
    assert_eq!(listed["total"], 2, "{listed:#}");
    assert_eq!(listed["as_of"], "2026-06-30", "{listed:#}");
    let listed = h.json(&["list", "--as-of", "2026-09-01", "--limit", "1"]);
    assert_eq!(
        ids(&listed, "notes"),
        std::slice::from_ref(&new),
        "{listed:#}"
    );
    assert_eq!(listed["total"], 3, "{listed:#}");
    let before = h.ok(&["list", "--as-of", "2026-01-31"]);
    assert!(
        before.contains("No note had taken effect by the end of 2026-01-31"),
        "{before}"
    );
    assert_eq!(h.json(&["list"])["total"], 3);

    for cmd in [
        vec!["search", "rent", "--as-of", "30.06.2026"],
        vec!["ask", "how much is the rent", "--as-of", "2026-6-30"],
        vec!["list", "--as-of", "June"],
    ] {
        let out = h.run(&cmd);
        assert!(!out.status.success(), "{cmd:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--as-of") && err.contains("YYYY-MM-DD"),
            "{cmd:?}: {err}"
        );
    }
}

/// Facts imported (a bulk import compares nothing on write), two of them replaced by a
/// later fact, and a note built on the old rent.
const FACTS: &[(&str, &str)] = &[
    ("The landlord is called Anna Virtanen.", "2026-01-01"),
    ("Our rent is 1,200 euros a month.", "2026-03-01"),
    ("We pay 40 euros a month for electricity.", "2026-01-02"),
    ("The chairperson of Fatah is Mahmoud Abbas.", "2026-01-03"),
    ("Budget for the year: rent 14,400 euros.", "2026-03-02"),
    ("From September the rent is 1,300 euros.", "2026-09-01"),
    ("The chairperson of Fatah is Yasser Arafat.", "2026-02-03"),
];

#[test]
fn consolidate_files_supersessions_among_imported_notes_once_and_accepting_one_flags_its_dependents()
 {
    let h = Home::new();
    let lines: String = FACTS
        .iter()
        .map(|(t, d)| format!("{}\n", serde_json::json!({ "content": t, "time": d })))
        .collect();
    let file = h.file("facts.jsonl", lines.as_bytes());
    let file = file.to_string_lossy().into_owned();
    let ids: Vec<String> = h
        .ok(&["import", &file, "--format", "jsonl", "--print-ids"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(ids.len(), FACTS.len());
    let (old, budget, new) = (&ids[1], &ids[4], &ids[5]);
    h.ok(&[
        "link",
        budget,
        old,
        "--kind",
        "elaborates",
        "--reason",
        "twelve months of it",
    ]);
    let supersessions = |h: &Home, status: &str| -> Vec<(String, String, String)> {
        let q = h.json(&["proposals", "--status", status, "--limit", "100"]);
        q["items"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|i| i["label"] == "supersedes")
                    .map(|i| {
                        (
                            i["note"].as_str().unwrap_or_default().to_owned(),
                            i["target"].as_str().unwrap_or_default().to_owned(),
                            i["id"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        supersessions(&h, "proposed").is_empty(),
        "an import compares nothing"
    );

    let s = h.json(&["consolidate"]);
    assert_eq!(s["scanned"], FACTS.len(), "{s:#}");
    assert_eq!(s["proposed"], 2, "{s:#}");
    assert_eq!(s["already_known"], 0, "{s:#}");
    assert_eq!(s["finished"], true, "{s:#}");
    assert_eq!(s["resumed_from"], serde_json::Value::Null, "{s:#}");
    assert!(s["seconds"].as_f64().is_some(), "{s:#}");
    // proposals under the default auto policy too; the newer fact replaces the older
    let mut found: Vec<(String, String)> = supersessions(&h, "proposed")
        .into_iter()
        .map(|(a, b, _)| (a, b))
        .collect();
    found.sort();
    let mut want = vec![(new.clone(), old.clone()), (ids[6].clone(), ids[3].clone())];
    want.sort();
    assert_eq!(found, want);
    // a second run proposes nothing again
    let again = h.json(&["consolidate"]);
    assert_eq!(
        (&again["proposed"], &again["already_known"]),
        (&serde_json::json!(0), &serde_json::json!(2)),
        "{again:#}"
    );

    // accepting the rent's supersession flags the budget, not the landlord
    let rent = supersessions(&h, "proposed")
        .into_iter()
        .find(|(a, _, _)| a == new)
        .map(|(_, _, id)| id)
        .unwrap_or_default();
    h.ok(&["accept", &rent]);
    let q = h.json(&["proposals"]);
    let flags: Vec<&Value> = q["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| i["label"] == "may_be_outdated")
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(flags.len(), 1, "{q:#}");
    let f = flags[0];
    assert_eq!(f["target"], budget.as_str());
    assert_eq!(f["outdated"]["note"], budget.as_str());
    assert_eq!(f["outdated"]["superseded"], old.as_str());
    assert_eq!(f["outdated"]["successor"], new.as_str());
    assert_eq!(f["outdated"]["supersession"], rent.as_str());
    assert!(
        f["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("uses rent"),
        "{f:#}"
    );
    let text = h.ok(&["proposals"]);
    assert!(text.contains("may be outdated: uses rent"), "{text}");
    // the note itself is untouched
    let b = h.json(&["show", budget]);
    assert_eq!(b["content"], "Budget for the year: rent 14,400 euros.");
    // rolling the supersession back withdraws the flag
    h.ok(&["rollback", &rent]);
    let q = h.json(&["proposals"]);
    assert!(
        q["items"]
            .as_array()
            .is_some_and(|a| a.iter().all(|i| i["label"] != "may_be_outdated")),
        "{q:#}"
    );
}
