//! The `kasten` CLI end to end on the real stack: embedded SurrealDB (surrealkv), the
//! MiniLM embedding model, hybrid search.
#![allow(clippy::panic)] // test helpers fail loudly

use kasten_tests::{Home, jsonl};

#[test]
fn a_paraphrase_with_no_shared_content_word_finds_the_right_note_first() {
    let h = Home::new();
    let dog = h
        .ok(&[
            "add",
            "I adopted a golden retriever puppy named Max last spring",
        ])
        .trim()
        .to_owned();
    let _budget = h.ok(&["add", "The quarterly budget report is due next Friday"]);
    let sister = h
        .ok(&["add", "My sister moved to Berlin to study architecture"])
        .trim()
        .to_owned();

    let r = h.json(&["search", "new dog", "-k", "3"]);
    assert_eq!(r["hits"][0]["id"].as_str(), Some(dog.as_str()), "{r:#}");
    assert_eq!(r["hits"][0]["via"][0].as_str(), Some("vector"));
    assert!(r["hits"][0]["score"].as_f64().is_some());
    assert!(
        r["hits"][0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("puppy"))
    );

    let r = h.json(&["search", "where does my sibling live", "-k", "3"]);
    assert_eq!(r["hits"][0]["id"].as_str(), Some(sister.as_str()), "{r:#}");
}

#[test]
fn keyword_hits_say_so_and_k_limits_results() {
    let h = Home::new();
    for t in [
        "Zephyrine runs the pottery studio",
        "Bob likes trains",
        "Carla plays chess on Sundays",
        "Dmitri bakes bread",
    ] {
        h.ok(&["add", t]);
    }
    let r = h.json(&["search", "Zephyrine", "-k", "2"]);
    let hits = r["hits"].as_array().cloned().unwrap_or_default();
    assert_eq!(hits.len(), 2);
    let via: Vec<&str> = hits[0]["via"]
        .as_array()
        .map(|v| v.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    assert!(via.contains(&"keyword"), "{r:#}");
    assert!(
        hits[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("Zephyrine"))
    );
}

#[test]
fn notes_survive_restart_with_every_field() {
    let h = Home::new();
    let id = h.json(&["add", "Remember the milk", "--time", "2023-05-08T13:56:00Z"])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // each command is its own process: this is a restart
    let n = h.json(&["show", &id]);
    for field in [
        "id",
        "content",
        "created_at",
        "keywords",
        "tags",
        "context",
        "links",
        "enrich_state",
    ] {
        assert!(n.get(field).is_some(), "show --json lacks {field}: {n:#}");
    }
    assert_eq!(n["content"].as_str(), Some("Remember the milk"));
    assert_eq!(n["created_at"].as_str(), Some("2023-05-08T13:56:00+00:00"));
    assert_eq!(n["enrich_state"].as_str(), Some("pending"));
    assert!(n["enrich_error"].as_str().is_none(), "{n:#}");
    let human = h.ok(&["show", &id]);
    assert!(human.contains("no LLM configured"), "{human}");
    h.ok(&["delete", &id]);
    assert!(h.all_ids().is_empty());
}

#[test]
fn add_reads_stdin_with_dash() {
    use std::io::Write;
    let h = Home::new();
    let mut child = h
        .cmd(&["add", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all("多行的笔记\n第二行".as_bytes());
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(
        h.json(&["show", &id])["content"].as_str(),
        Some("多行的笔记\n第二行")
    );
    // Chinese text is found by a Chinese keyword inside the sentence
    let r = h.json(&["search", "笔记"]);
    assert_eq!(r["hits"][0]["id"].as_str(), Some(id.as_str()));
    assert!(
        r["hits"][0]["via"]
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == "keyword")),
        "{r:#}"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code_1() {
    let h = Home::new();
    h.ok(&["add", "something to keep"]);
    for (args, needle) in [
        (
            vec!["show", "01ZZZZZZZZZZZZZZZZZZZZZZZZ"],
            "no note with id",
        ),
        (
            vec!["delete", "01ZZZZZZZZZZZZZZZZZZZZZZZZ"],
            "no note with id",
        ),
        (vec!["show", "not an id!"], "not a valid note id"),
        (vec!["add", "   "], "cannot be empty"),
        (vec!["add", "x", "--time", "yesterday"], "RFC 3339"),
        (vec!["search", " "], "empty"),
    ] {
        let out = h.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(h.all_ids().len(), 1, "nothing was added or lost");
}

#[test]
fn import_is_batched_and_a_corrupt_line_stops_it_before_any_write() {
    let h = Home::new();
    let mut text = jsonl(30);
    text.push_str("{\"content\": \"unterminated\n");
    text.push_str(&jsonl(5));
    let f = h.file("bad.jsonl", text.as_bytes());
    let out = h.run(&[
        "import",
        f.to_str().unwrap_or_default(),
        "--format",
        "jsonl",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 31"), "{err}");
    assert!(err.contains("nothing was imported"), "{err}");
    assert!(
        h.all_ids().is_empty(),
        "a corrupt file must not be half-imported"
    );

    // with --skip-invalid the good lines go in and the bad one is reported
    let r = h.json(&[
        "import",
        f.to_str().unwrap_or_default(),
        "--format",
        "jsonl",
        "--skip-invalid",
        "--batch",
        "7",
    ]);
    assert_eq!(r["imported"].as_u64(), Some(35));
    assert_eq!(r["skipped"][0]["line"].as_u64(), Some(31));
    assert_eq!(h.all_ids().len(), 35);
}

#[test]
fn a_missing_import_file_is_a_clear_error() {
    let h = Home::new();
    let out = h.run(&["import", "/nonexistent/notes.jsonl", "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/notes.jsonl"));
}

#[test]
fn json_errors_are_json_too() {
    let h = Home::new();
    let out = h.run(&["--json", "show", "01ZZZZZZZZZZZZZZZZZZZZZZZZ"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("no note")),
        "{v}"
    );
}

#[test]
fn a_bad_setting_is_refused_with_its_fix_and_never_locks_the_cli_out() {
    let h = Home::new();
    let id = h.ok(&["add", "Buy oat milk"]).trim().to_owned();
    for (key, value, words) in [
        ("llm.provider", "opneai", "openai | ollama | local | none"),
        ("llm.timeout", "soon", "seconds"),
        ("pipeline.k", "500", "1-50"),
        ("llm.base_url", "localhost:8080", "http"),
    ] {
        let out = h.run(&["config", "set", key, value]);
        assert_eq!(out.status.code(), Some(1), "{key} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key) && err.contains(words), "{err}");
    }
    // nothing bad was stored: every command still works
    let settings = h.json(&["config"]);
    assert!(settings["llm"].get("provider").is_none(), "{settings:#}");
    h.ok(&["show", &id]);
    h.ok(&["search", "milk"]);
    // a good value is stored, shown, and can be removed again
    h.ok(&["config", "set", "llm.timeout", "120"]);
    assert_eq!(h.json(&["config"])["llm"]["timeout"].as_u64(), Some(120));
    h.ok(&["config", "unset", "llm.timeout"]);
    assert!(h.json(&["config"])["llm"].get("timeout").is_none());
}

/// `kasten --json list | head -1`: the reader of stdout goes away. The command ends as a
/// success without a panic report, and the memory was closed (the next command opens it).
#[test]
fn a_closed_stdout_ends_the_command_quietly_and_closes_the_memory() {
    let h = Home::new();
    for i in 0..3 {
        h.ok(&[
            "add",
            &format!("note number {i} about pipes that close early"),
        ]);
    }
    let mut child = h
        .cmd(&["--json", "list"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn kasten: {e}"));
    // the reader is gone before the memory is even open
    drop(child.stdout.take());
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for kasten: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    let l = h.json(&["list"]);
    assert_eq!(l["notes"].as_array().map(Vec::len), Some(3), "{l:#}");
}

/// "since 2022" names everything from 2022 on, not the year 2022 alone: a note written in
/// 2024 is found by date, one from 2021 is not.
#[test]
fn since_a_year_finds_notes_written_after_it() {
    let h = Home::new();
    let old = h
        .ok(&[
            "add",
            "--time",
            "2021-06-01T10:00:00Z",
            "Went hiking in the Alps with Ben",
        ])
        .trim()
        .to_owned();
    let new = h
        .ok(&[
            "add",
            "--time",
            "2024-06-01T10:00:00Z",
            "Went hiking in the Pyrenees with Ben",
        ])
        .trim()
        .to_owned();
    let r = h.json(&["search", "hiking trips since 2022", "-k", "5"]);
    let via = |id: &str| -> Vec<String> {
        r["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|hit| hit["id"].as_str() == Some(id))
            .and_then(|hit| hit["via"].as_array())
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(via(&new).iter().any(|v| v == "date"), "{r:#}");
    assert!(!via(&old).iter().any(|v| v == "date"), "{r:#}");
}

/// One settings model for every surface: a value in effect comes from the environment,
/// else the stored settings, else the default; `kasten config` says which. A bad value
/// (in the environment, or stored before values were checked) is skipped and named with
/// its fix, and commands go on.
#[test]
fn settings_in_effect_come_from_the_environment_then_the_settings_then_the_defaults() {
    let config = |h: &Home, env: &[(&str, &str)]| -> serde_json::Value {
        let mut c = h.cmd(&["--json", "config"]);
        c.env_remove("KASTEN_LLM_TIMEOUT");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c
            .output()
            .unwrap_or_else(|e| panic!("cannot run kasten config: {e}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"))
    };
    let in_effect = |v: &serde_json::Value, key: &str| {
        let e = &v["effective"][key];
        (
            e["value"].clone(),
            e["source"].as_str().unwrap_or("").to_owned(),
        )
    };
    let h = Home::new();
    let v = config(&h, &[]);
    assert_eq!(
        in_effect(&v, "llm.timeout"),
        (serde_json::json!(60), "default".into())
    );
    assert_eq!(
        in_effect(&v, "pipeline.k"),
        (serde_json::json!(10), "default".into())
    );
    h.ok(&["config", "set", "llm.timeout", "120"]);
    h.ok(&["config", "set", "pipeline.k", "7"]);
    let v = config(&h, &[]);
    assert_eq!(
        in_effect(&v, "llm.timeout"),
        (serde_json::json!(120), "settings".into())
    );
    assert_eq!(
        in_effect(&v, "pipeline.k"),
        (serde_json::json!(7), "settings".into())
    );
    let v = config(&h, &[("KASTEN_LLM_TIMEOUT", "30")]);
    assert_eq!(
        in_effect(&v, "llm.timeout"),
        (serde_json::json!(30), "environment".into())
    );
    // a bad variable: the stored value is used and the variable is named
    let v = config(&h, &[("KASTEN_LLM_TIMEOUT", "soon")]);
    assert_eq!(
        in_effect(&v, "llm.timeout"),
        (serde_json::json!(120), "settings".into())
    );
    let problem = v["effective"]["llm.timeout"]["problem"]
        .as_str()
        .unwrap_or("");
    assert!(
        problem.contains("KASTEN_LLM_TIMEOUT") && problem.contains("soon"),
        "{v:#}"
    );

    // a bad value stored before values were checked (put there through a restore)
    let backup = h.dir.path().join("settings.json");
    h.ok(&["backup", backup.to_str().unwrap_or_default()]);
    let mut doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&backup).unwrap_or_else(|e| panic!("read backup: {e}")),
    )
    .unwrap_or_else(|e| panic!("backup is not JSON: {e}"));
    let rows = doc["tables"]["setting"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("no settings in the backup"));
    let row = rows
        .iter_mut()
        .find(|r| r["id"]["$record"]["key"] == "llm")
        .unwrap_or_else(|| panic!("no llm setting in the backup"));
    row["value"] = serde_json::json!(serde_json::json!({"timeout": "soon"}).to_string());
    let bad = h.file("bad-settings.json", doc.to_string().as_bytes());
    let b = Home::new();
    b.ok(&["restore", bad.to_str().unwrap_or_default()]);
    let v = config(&b, &[]);
    assert_eq!(
        in_effect(&v, "llm.timeout"),
        (serde_json::json!(60), "default".into())
    );
    let problem = v["effective"]["llm.timeout"]["problem"]
        .as_str()
        .unwrap_or("");
    assert!(
        problem.contains("llm.timeout") && problem.contains("kasten config unset llm.timeout"),
        "{v:#}"
    );
    // the text output warns on stderr; other commands are not stopped by it
    let out = b.run(&["config"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: the stored llm.timeout is ignored"),
        "{stderr}"
    );
    b.ok(&["add", "a note while a setting is bad"]);
    b.ok(&["config", "unset", "llm.timeout"]);
    let v = config(&b, &[]);
    assert!(v["effective"]["llm.timeout"]["problem"].is_null(), "{v:#}");
}
