//! Every way the LLM server can fail, through the CLI against `kasten-fakellm`: notes are
//! saved and searchable whatever happens, jobs move queued → failed after three attempts
//! (or to done when the fault is survivable), the CLI and `kasten show` say why in words,
//! and after the server recovers `enrich --retry-failed` finishes the queue.
//! tests/pipeline.rs covers `add --wait` with the server down and the timeout setting;
//! this file runs the whole matrix through `kasten enrich`.

use kasten_tests::{FakeServer, Home};

use super::consistency;

const NOTES: [&str; 3] = [
    "Caroline went to the LGBTQ support group and felt accepted",
    "Melanie painted a sunrise over the lake with her kids",
    "Caroline and Melanie talked about painting classes at the support group",
];

/// Text that must never reach a user: Rust debug output and internals.
fn assert_readable(text: &str) {
    for internal in [
        "Error {",
        "Llm(",
        "Some(",
        "panicked",
        "RUST_BACKTRACE",
        "src/",
        "reqwest::",
        "kind: ",
        "\\\"",
    ] {
        assert!(
            !text.contains(internal),
            "internals ({internal}) in: {text}"
        );
    }
}

fn add_notes(h: &Home) -> Vec<String> {
    NOTES
        .iter()
        .map(|n| h.ok(&["add", n]).trim().to_owned())
        .collect()
}

/// Runs `kasten enrich` against a failing server and checks what it says and leaves.
fn failing_pass(h: &Home, env: &[(&str, &str)], pass: u32, words: &str) {
    let mut cmd = h.cmd(&["enrich"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1), "pass {pass}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("pass {pass}: no error line in {stderr}"));
    assert!(
        error.starts_with("error: no note could be enriched: LLM: the ") && error.contains(words),
        "pass {pass}: {error}"
    );
    assert_readable(error);
    let (queue, stdout) = (NOTES.len(), String::from_utf8_lossy(&out.stdout));
    let want = if pass < 3 {
        format!("enriched 0 note(s) (0 tokens); {queue} will be retried, 0 failed")
    } else {
        format!("enriched 0 note(s) (0 tokens); 0 will be retried, {queue} failed")
    };
    assert!(stderr.contains(&want), "pass {pass}: {stderr}");
    assert!(stdout.trim().is_empty(), "{stdout}");
}

/// A fault the pipeline cannot get past: three passes, then `failed`, then recovery.
fn unrecoverable(mode: &str, env: &[(&str, &str)], words: &str) {
    let fake = FakeServer::start(mode);
    let h = Home::with_llm(&fake.openai_url());
    let ids = add_notes(&h);
    for pass in 1..=3 {
        failing_pass(&h, env, pass, words);
        let jobs = h.json(&["list", "--limit", "10"]);
        let want = if pass < 3 { "pending" } else { "failed" };
        for n in jobs["notes"].as_array().cloned().unwrap_or_default() {
            assert_eq!(n["enrich_state"].as_str(), Some(want), "{mode} pass {pass}");
        }
    }
    // the note says why, in words, in JSON and for people
    let shown = h.json(&["show", &ids[0]]);
    let error = shown["enrich_error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("LLM: the ") && error.contains(words),
        "{shown:#}"
    );
    assert_readable(error);
    let human = h.ok(&["show", &ids[0]]);
    assert!(human.contains(words), "{human}");
    // saved and searchable all along
    let hits = h.json(&["search", "sunrise over the lake", "-k", "1"]);
    assert_eq!(
        hits["hits"][0]["id"].as_str(),
        Some(ids[1].as_str()),
        "{hits}"
    );
    let c = consistency::check(&h.dump(), mode);
    assert_eq!((c.notes, c.events), (NOTES.len(), 0));
    // the server recovers: the failed jobs run again and finish
    fake.set_mode(r#"{"mode": "normal"}"#);
    let v = h.json(&["enrich", "--retry-failed"]);
    assert_eq!(
        v["jobs"]["done"].as_u64(),
        Some(NOTES.len() as u64),
        "{v:#}"
    );
    let c = consistency::check(&h.dump(), &format!("{mode}, recovered"));
    assert_eq!(c.events, NOTES.len());
}

#[test]
fn server_down() {
    let fake = FakeServer::start("normal");
    let url = fake.openai_url();
    drop(fake); // nothing listens there any more
    let h = Home::with_llm(&url);
    let ids = add_notes(&h);
    for pass in 1..=3 {
        failing_pass(&h, &[], pass, "is not reachable");
    }
    let shown = h.json(&["show", &ids[2]]);
    assert_eq!(shown["enrich_state"].as_str(), Some("failed"), "{shown:#}");
    assert!(
        shown["enrich_error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("the LLM server at {url} is not reachable"))),
        "{shown:#}"
    );
    let hits = h.json(&["search", "painting classes", "-k", "1"]);
    assert_eq!(hits["hits"][0]["id"].as_str(), Some(ids[2].as_str()));
    consistency::check(&h.dump(), "server down");
}

#[test]
fn slower_than_the_timeout() {
    unrecoverable(
        "slow:2500",
        &[("KASTEN_LLM_TIMEOUT", "1")],
        "did not answer within 1s",
    );
}

#[test]
fn http_500() {
    unrecoverable("http500", &[], "answered HTTP 500");
}

#[test]
fn malformed_json() {
    unrecoverable(
        "malformed",
        &[],
        "not usable, also after one repair request",
    );
}

#[test]
fn truncated_json() {
    unrecoverable("truncated", &[], "the JSON is cut off");
}

#[test]
fn json_of_the_wrong_shape() {
    unrecoverable("wrong_shape", &[], "does not fit the schema");
}

#[test]
fn unknown_handles_are_dropped_and_counted() {
    let fake = FakeServer::start("unknown_handles");
    let h = Home::with_llm(&fake.openai_url());
    add_notes(&h);
    let v = h.json(&["enrich", "--workers", "1"]);
    assert_eq!(
        v["jobs"]["done"].as_u64(),
        Some(NOTES.len() as u64),
        "{v:#}"
    );
    let events = h.json(&["events"]);
    let evs = events["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(evs.len(), NOTES.len());
    // the first note had no neighbours to name; the others named only handles never shown
    let counted: u64 = evs
        .iter()
        .map(|e| e["unknown_handles"].as_u64().unwrap_or(0))
        .sum();
    assert!(counted > 0, "{events:#}");
    assert!(
        evs.iter().all(|e| e["links"].as_u64() == Some(0)),
        "{events:#}"
    );
    let c = consistency::check(&h.dump(), "unknown handles");
    assert_eq!((c.links, c.events), (0, NOTES.len()));
    // no neighbour was changed through a handle that was never shown
    assert!(
        c.revisions == NOTES.len(),
        "only construction revisions: {c:?}"
    );
}

#[test]
fn flaky_server_every_other_call_fails() {
    let fake = FakeServer::start("flaky");
    let h = Home::with_llm(&fake.openai_url());
    add_notes(&h);
    // the client retries each 500 once the backoff has passed: every note gets through
    // (one worker: a failed call is always followed by one that succeeds)
    let out = h
        .cmd(&["--json", "enrich", "--workers", "1"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        v["jobs"]["done"].as_u64(),
        Some(NOTES.len() as u64),
        "{v:#}"
    );
    assert_eq!(v["summary"]["retrying"].as_u64(), Some(0), "{v:#}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("retrying"), "the 500s were seen: {stderr}");
    let c = consistency::check(&h.dump(), "flaky");
    assert_eq!(c.events, NOTES.len());
    assert!(c.links > 0);
}
