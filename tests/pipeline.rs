//! The enrichment pipeline end to end through the CLI, against the deterministic LLM
//! server (`kasten-fakellm`) on loopback: `add --wait`, `enrich`, `usage`, `events`, a dead
//! server, and `kill -9` in the middle of `enrich`.
#![allow(clippy::panic)] // test helpers fail loudly

use std::collections::HashSet;
use std::time::Duration;

use kasten_tests::{FakeServer, Home};

const NOTES: &[&str] = &[
    "Caroline went to the LGBTQ support group and felt accepted",
    "Caroline is researching adoption agencies for her future family",
    "Melanie painted a sunrise over the lake with her kids",
    "Melanie and Caroline talked about adoption and painting classes",
    "Jon lost his banking job and wants to open a dance studio",
    "Gina opened an online clothing store after losing her job",
];

#[test]
fn add_wait_returns_an_enriched_note_with_links_to_existing_notes() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    let mut ids = Vec::new();
    for n in NOTES {
        let v = h.json(&["add", n, "--wait"]);
        assert_eq!(v["enrich_state"].as_str(), Some("done"), "{v:#}");
        ids.push(v["id"].as_str().unwrap_or_default().to_owned());
    }
    let last = h.json(&["show", &ids[3]]);
    assert!(
        last["keywords"].as_array().is_some_and(|k| !k.is_empty()),
        "{last:#}"
    );
    assert!(last["tags"].as_array().is_some_and(|k| !k.is_empty()));
    assert!(last["context"].as_str().is_some_and(|c| !c.is_empty()));
    assert_eq!(last["enrich_state"].as_str(), Some("done"));
    let links = last["links"].as_array().cloned().unwrap_or_default();
    assert!(
        !links.is_empty(),
        "the fourth note should link to earlier ones: {last:#}"
    );
    for l in &links {
        for end in ["from", "to"] {
            let id = l[end].as_str().unwrap_or_default();
            assert!(
                ids.iter().any(|x| x == id),
                "link to a note that does not exist: {l}"
            );
        }
        for field in ["kind", "reason", "confidence", "status"] {
            assert!(l.get(field).is_some(), "link lacks {field}: {l}");
        }
    }
    let human = h.ok(&["show", &ids[3]]);
    assert!(
        human.contains("links:") && !human.contains("links:     none"),
        "{human}"
    );

    let usage = h.json(&["usage"]);
    let m = &usage["by_model"][0];
    assert_eq!(m["model"].as_str(), Some("fake-model"));
    assert_eq!(m["notes"].as_u64(), Some(NOTES.len() as u64));
    assert!(m["tokens_in"].as_u64().unwrap_or(0) > 0);
    let events = h.json(&["events"]);
    assert_eq!(events["events"].as_array().map(Vec::len), Some(NOTES.len()));
}

#[test]
fn enrich_runs_the_queue_and_a_dead_server_loses_nothing() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    for n in NOTES {
        h.ok(&["add", n]);
    }
    let v = h.json(&["enrich"]);
    assert_eq!(
        v["summary"]["done"].as_u64(),
        Some(NOTES.len() as u64),
        "{v:#}"
    );
    assert_eq!(v["jobs"]["queued"].as_u64(), Some(0));

    // the server dies: a new note is saved, searchable, pending with a readable reason
    drop(fake);
    let out = h.run(&["add", "saved while the model server is down", "--wait"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("saved") && err.contains("not reachable"),
        "{err}"
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let note = h.json(&["show", &id]);
    assert_eq!(note["enrich_state"].as_str(), Some("pending"));
    assert!(
        note["enrich_error"]
            .as_str()
            .is_some_and(|e| e.contains("not reachable")),
        "{note:#}"
    );
    let hits = h.json(&["search", "model server is down", "-k", "1"]);
    assert_eq!(hits["hits"][0]["id"].as_str(), Some(id.as_str()));
}

#[test]
fn without_an_llm_enrich_says_why() {
    let h = Home::new();
    h.ok(&["add", "a note"]);
    let out = h.run(&["enrich"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no LLM configured"));
}

#[test]
fn kill_9_during_enrich_then_restart_resumes_without_duplicates() {
    let fake = FakeServer::start("slow:60");
    let h = Home::with_llm(&fake.openai_url());
    let notes: Vec<String> = (0..24)
        .map(|i| format!("{} (variant {i})", NOTES[i % NOTES.len()]))
        .collect();
    let lines: String = notes
        .iter()
        .map(|n| format!("{{\"content\": \"{n}\"}}\n"))
        .collect();
    let f = h.file("notes.jsonl", lines.as_bytes());
    h.ok(&[
        "import",
        f.to_str().unwrap_or_default(),
        "--format",
        "jsonl",
    ]);

    for delay_ms in [900u64, 1700, 600] {
        let mut child = h
            .cmd(&["enrich", "--workers", "2"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }
    // restart: the rest of the queue runs to completion
    let v = h.json(&["enrich"]);
    assert_eq!(v["jobs"]["queued"].as_u64(), Some(0), "{v:#}");
    assert_eq!(v["jobs"]["running"].as_u64(), Some(0));
    assert_eq!(v["jobs"]["done"].as_u64(), Some(notes.len() as u64));

    // exactly one event per note; no duplicate links
    let events = h.json(&["events", "--limit", "1000"]);
    let evs = events["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(evs.len(), notes.len());
    let per_note: HashSet<&str> = evs.iter().filter_map(|e| e["note"].as_str()).collect();
    assert_eq!(per_note.len(), notes.len(), "a note was enriched twice");
    let list = h.json(&["list", "--limit", "1000"]);
    let mut seen_links = HashSet::new();
    for n in list["notes"].as_array().cloned().unwrap_or_default() {
        assert_eq!(n["enrich_state"].as_str(), Some("done"));
        let id = n["id"].as_str().unwrap_or_default();
        let show = h.json(&["show", id]);
        for l in show["links"].as_array().cloned().unwrap_or_default() {
            if l["from"].as_str() == Some(id) {
                let key = (
                    l["from"].to_string(),
                    l["to"].to_string(),
                    l["kind"].to_string(),
                );
                assert!(seen_links.insert(key), "duplicate link {l}");
            }
        }
    }
}

#[test]
fn the_llm_timeout_is_a_setting() {
    let fake = FakeServer::start("slow:2500");
    let h = Home::with_llm(&fake.openai_url());
    let out = h
        .cmd(&["add", "a slow one", "--wait"])
        .env("KASTEN_LLM_TIMEOUT", "1")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not answer within 1s"), "{err}");
    let out = h
        .cmd(&["enrich"])
        .env("KASTEN_LLM_TIMEOUT", "soon")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("whole seconds"));
    // stored as a setting, it applies too (the environment wins when both are set)
    h.ok(&["config", "set", "llm.timeout", "10"]);
    let v = h.json(&["add", "patient enough", "--wait"]);
    assert_eq!(v["enrich_state"].as_str(), Some("done"), "{v:#}");
}
