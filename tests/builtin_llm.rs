//! The built-in model (Qwen2.5-Coder-0.5B-Instruct in process through llama.cpp), as a user
//! without any LLM setting gets it: the real pipeline, a real model, no mock. Needs the
//! model that `scripts/setup` installs; without it these tests fail and say so.

use kasten_tests::Home;
use serde_json::Value;

/// Everyday notes of one person (a few are about the same things, so links can form).
const NOTES: &[&str] = &[
    "Booked the dentist for Thursday at 9: the cracked molar needs a crown.",
    "Anna's birthday is on June 14; she wants a cast-iron pan for her cooking.",
    "The dentist said the crown costs 450 euros and takes two visits.",
    "Started reading 'The Overstory' by Richard Powers, a novel about trees.",
    "Anna and I will cook paella with the new cast-iron pan on Saturday.",
    "Garden: the tomato plants have blight; remove the lower leaves tomorrow.",
];

fn enriched(h: &Home, id: &str) -> Value {
    let n = h.json(&["show", id]);
    assert_eq!(n["enrich_state"].as_str(), Some("done"), "{n:#}");
    n
}

#[test]
fn a_fresh_memory_is_enriched_by_the_builtin_model_with_sensible_annotations() {
    let h = Home::with_builtin_llm();
    // the first note, with --wait: enriched before the command returns
    let first = h.json(&["add", "--wait", NOTES[0]]);
    let first_id = first["id"].as_str().unwrap_or_default().to_owned();
    let n = enriched(&h, &first_id);
    let keywords: Vec<String> = n["keywords"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str())
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default();
    assert!(!keywords.is_empty(), "{n:#}");
    let content = NOTES[0].to_lowercase();
    for k in &keywords {
        assert!(
            k.split_whitespace().all(|w| content.contains(w)),
            "keyword {k:?} is not taken from the note: {n:#}"
        );
    }
    // the rest, then the queue
    for text in &NOTES[1..] {
        h.ok(&["add", text]);
    }
    h.ok(&["enrich"]);
    let ids = h.all_ids();
    assert_eq!(ids.len(), NOTES.len());
    for id in &ids {
        let n = enriched(&h, id);
        // every link joins two existing notes and says what they share
        for l in n["links"].as_array().into_iter().flatten() {
            for end in ["from", "to"] {
                let other = l[end].as_str().unwrap_or_default();
                assert!(ids.iter().any(|i| i == other), "dangling link {l:#}");
            }
        }
    }
    // the quality check over the whole memory (no prompt text, keywords from the notes,
    // contexts that are sentences, at most five links per note, varied reasons)
    let out = h.run(&["--json", "quality"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        out.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        report["notes"].as_u64(),
        Some(NOTES.len() as u64),
        "{report:#}"
    );
    assert_eq!(report["passed"].as_bool(), Some(true), "{report:#}");
    // events record the guided prompts and exact token counts
    let events = h.json(&["events", "--limit", "50"]);
    let events = events["events"].as_array().cloned().unwrap_or_default();
    let enrichments: Vec<&Value> = events
        .iter()
        .filter(|e| e["prompt_version"].is_string())
        .collect();
    assert_eq!(enrichments.len(), NOTES.len(), "{events:#?}");
    for e in enrichments {
        assert_eq!(
            e["prompt_version"].as_str(),
            Some(kasten_core::prompts::GUIDED_PROMPT_VERSION),
            "{e:#}"
        );
        assert_eq!(e["tokens_estimated"].as_bool(), Some(false), "{e:#}");
    }

    // an answer from memory that cites existing notes (a question one note answers in its
    // own words: asked "When is the dentist appointment?", the model may decline, as the
    // booking note does not say "appointment")
    let a = h.json(&["ask", "What does Anna want for her birthday?"]);
    let cited: Vec<&str> = a["citations"]
        .as_array()
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(a["not_in_memory"].as_bool(), Some(false), "{a:#}");
    assert!(!cited.is_empty(), "{a:#}");
    // the small model quotes the note it cites: its words, in order, then the number
    let answer = a["answer"].as_str().unwrap_or_default();
    let (quote, cite) = answer
        .rsplit_once(" [")
        .unwrap_or_else(|| panic!("no citation at the end: {a:#}"));
    let n: usize = cite.trim_end_matches("].").parse().unwrap_or(0);
    let note = a["notes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|x| x["n"].as_u64() == Some(n as u64)))
        .and_then(|x| x["content"].as_str())
        .unwrap_or_default();
    assert!(
        !quote.is_empty() && note.contains(quote),
        "the answer is not a quote of note {n} ({note:?}): {a:#}"
    );
    for c in cited {
        assert!(
            ids.iter().any(|i| i == c),
            "cites a note that does not exist: {a:#}"
        );
    }
}

#[test]
fn kasten_llm_names_the_builtin_model_and_what_it_runs() {
    let h = Home::with_builtin_llm();
    let v = h.json(&["llm"]);
    let in_use = &v["in_use"];
    assert_eq!(
        in_use["label"].as_str(),
        Some("built-in Qwen2.5-Coder-0.5B"),
        "{v:#}"
    );
    assert_eq!(in_use["source"].as_str(), Some("built_in"));
    assert_eq!(in_use["ready"].as_bool(), Some(true), "{v:#}");
    assert_eq!(in_use["profile"].as_str(), Some("small"));
    assert!(
        in_use["steps"]
            .as_str()
            .is_some_and(|s| s.contains("no evolution"))
    );
    assert!(v["discovered"].is_array());
    let human = h.ok(&["llm"]);
    assert!(
        human.contains("LLM in use: built-in Qwen2.5-Coder-0.5B"),
        "{human}"
    );
}

#[test]
fn a_missing_or_corrupt_model_file_names_the_fix_and_loses_no_note() {
    let h = Home::with_builtin_llm();
    let bad = h.dir.path().join("broken.gguf");
    std::fs::write(&bad, b"this is not a model").unwrap_or_default();
    // a bad path is refused when it is set
    let out = h.run(&[
        "config",
        "set",
        "llm.model_path",
        bad.to_str().unwrap_or_default(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a GGUF"));
    // one that goes bad afterwards: the note is saved and searchable, the error says why
    let good = h.dir.path().join("model.gguf");
    std::fs::write(&good, b"GGUF but truncated").unwrap_or_default();
    h.ok(&[
        "config",
        "set",
        "llm.model_path",
        good.to_str().unwrap_or_default(),
    ]);
    std::fs::write(&good, b"garbage now").unwrap_or_default();
    let out = h.run(&["add", "--wait", "Water the tomato plants every morning"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a GGUF") && err.contains("scripts/setup"),
        "{err}"
    );
    let hits = h.json(&["search", "watering tomatoes", "-k", "1"]);
    assert!(
        hits["hits"][0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("tomato")),
        "{hits:#}"
    );
    // a bad setting never locks out the commands that do not need the LLM
    h.ok(&["list"]);
    h.ok(&["config", "unset", "llm.model_path"]);
}

#[test]
fn the_model_runs_on_the_widest_cpu_code_found_and_says_when_none_is() {
    let h = Home::with_builtin_llm();
    // ggml's CPU variants beside the program: one is loaded and named
    h.ok(&[
        "add",
        "Water the tomato plants every morning before it gets hot.",
    ]);
    let out = h.run(&["enrich"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let variant = err
        .split("CPU code: ")
        .nth(1)
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default();
    assert!(
        !variant.is_empty() && variant != "built",
        "no CPU variant named: {err}"
    );
    // pointed at a directory without them: a clear error, the note kept and found
    let empty = h.dir.path().join("no-cpu-code");
    std::fs::create_dir_all(&empty).unwrap_or_default();
    let out = h
        .cmd(&[
            "add",
            "--wait",
            "The plumber comes on Monday to fix the boiler.",
        ])
        .env("KASTEN_CPU_BACKENDS_DIR", &empty)
        .output()
        .unwrap_or_else(|e| panic!("cannot run kasten: {e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KASTEN_CPU_BACKENDS_DIR") && err.contains("libggml-cpu-*.so"),
        "{err}"
    );
    let hits = h.json(&["search", "boiler repair", "-k", "1"]);
    assert!(
        hits["hits"][0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("plumber")),
        "{hits:#}"
    );
}

#[test]
fn the_model_catalog_lists_installs_and_uses_builtin_models() {
    let h = Home::with_builtin_llm();
    let home = h.dir.path().join("home");
    // models installed on this machine (KASTEN_MODELS=all scripts/setup) are not this
    // home's: another data dir, with the embedder and ONNX Runtime named where they are
    let machine = dirs_data().join("kasten");
    let data = h.dir.path().join("data");
    let with_home = |args: &[&str]| {
        let mut c = h.cmd(args);
        c.env("KASTEN_HOME", &home)
            .env("XDG_DATA_HOME", &data)
            .env(
                "KASTEN_MODEL_DIR",
                machine.join("models/all-minilm-l6-v2-int8"),
            )
            .env(
                "ORT_DYLIB_PATH",
                machine.join("lib/libonnxruntime.so.1.31.1"),
            );
        c.output()
            .unwrap_or_else(|e| panic!("kasten {args:?}: {e}"))
    };
    let json_of = |args: &[&str]| -> Value {
        let out = with_home(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
    };
    let list = json_of(&["--json", "llm", "models"]);
    let models = list["models"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = models.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(
        names,
        ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    );
    assert_eq!(models[1]["default"], true, "{list:#}");
    assert_eq!(models[0]["default"], false);
    let q = &models[2];
    assert_eq!(q["installed"], false, "{q:#}");
    assert!(q["path"].is_null() && q["notes_per_hour"].is_null() && q["quality"].is_null());
    assert_eq!(q["size"].as_u64(), Some(1_117_320_768));
    assert_eq!(q["license"], "Apache-2.0");
    assert_eq!(q["languages"], serde_json::json!(["en", "zh"]));

    // a model that is not installed cannot be used, and an unknown one is named
    let out = with_home(&["llm", "builtin", "qwen2.5-coder-1.5b"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not installed: `kasten llm install qwen2.5-coder-1.5b`"),
        "{err}"
    );
    let out = with_home(&["llm", "install", "llama-70b"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no built-in model 'llama-70b'") && err.contains("qwen2.5-coder-1.5b"),
        "{err}"
    );

    // installed (a sparse stand-in of the right size: `kasten llm` checks, it does not load)
    let dir = home.join("models/qwen2.5-coder-1.5b-instruct");
    std::fs::create_dir_all(&dir).unwrap_or_default();
    let file = dir.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    let f = std::fs::File::create(&file).unwrap_or_else(|e| panic!("{e}"));
    use std::io::Write;
    (&f).write_all(b"GGUF").unwrap_or_default();
    f.set_len(1_117_320_768).unwrap_or_default();
    let list = json_of(&["--json", "llm", "models"]);
    assert_eq!(list["models"][2]["installed"], true, "{list:#}");
    assert_eq!(list["models"][2]["path"].as_str(), file.to_str());

    // builtin NAME uses it, the same setting the app writes; builtin alone goes back to
    // the default, named where it should be although this home does not hold it
    let out = with_home(&["llm", "builtin", "qwen2.5-coder-1.5b"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&["--json", "llm"]);
    assert_eq!(
        v["in_use"]["label"], "local Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        "{v:#}"
    );
    assert_eq!(v["in_use"]["model_path"].as_str(), file.to_str());
    // the 1.5B runs A-Mem's prompts without evolution: its measurements decided it
    assert_eq!(v["in_use"]["profile"], "links", "{v:#}");
    assert!(
        v["in_use"]["steps"]
            .as_str()
            .is_some_and(|s| s.starts_with("construction and links; no evolution")),
        "{v:#}"
    );
    let cfg = json_of(&["--json", "config"]);
    assert_eq!(cfg["llm"]["model_path"].as_str(), file.to_str(), "{cfg:#}");
    let out = with_home(&["llm", "builtin"]);
    assert!(out.status.success());
    let v = json_of(&["--json", "llm"]);
    assert_eq!(v["in_use"]["label"], "built-in Qwen2.5-Coder-0.5B", "{v:#}");

    // remove deletes it
    let out = with_home(&["llm", "remove", "qwen2.5-coder-1.5b"]);
    assert!(out.status.success());
    assert!(!file.exists());
}

/// The machine's data dir (`$XDG_DATA_HOME`, else `~/.local/share`), where scripts/setup
/// installs.
fn dirs_data() -> std::path::PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".local/share")
        })
}

/// A model that answers in its own words (the profile `links`) quotes the current note when
/// a shown note was replaced: which value is current is the memory's knowledge, not the
/// model's. The answer is the newer note's words with its number, never the old value.
#[test]
fn a_replaced_value_is_answered_by_quoting_the_note_that_replaced_it() {
    let h = Home::with_builtin_llm();
    // a command with one variable set, which must succeed, and its --json output
    let json_with = |var: &str, value: &str, args: &[&str]| -> Value {
        let out = h
            .cmd(args)
            .env(var, value)
            .output()
            .unwrap_or_else(|e| panic!("cannot run kasten {args:?}: {e}"));
        assert!(
            out.status.success(),
            "kasten {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    };
    // written without an LLM: the supersession is found on write by the rule
    let add = |text: &str, time: &str| -> String {
        let v = json_with(
            "KASTEN_LLM_PROVIDER",
            "none",
            &["--json", "add", text, "--time", time],
        );
        v["id"].as_str().unwrap_or_default().to_owned()
    };
    let old = add("Our rent is 1,200 euros a month.", "2026-03-01");
    let new = add("From September the rent is 1,300 euros.", "2026-03-10");
    assert_eq!(
        h.json(&["show", &old])["superseded_by"]["id"],
        new.as_str(),
        "the rule did not find the change"
    );
    let a = json_with(
        "KASTEN_LLM_PROFILE",
        "links",
        &["--json", "ask", "How much is our rent?"],
    );
    let answer = a["answer"].as_str().unwrap_or_default();
    assert!(
        !answer.contains("1,200"),
        "the replaced value as the answer: {a:#}"
    );
    let (quote, cite) = answer
        .rsplit_once(" [")
        .unwrap_or_else(|| panic!("no citation at the end: {a:#}"));
    assert!(
        !quote.is_empty() && "From September the rent is 1,300 euros.".contains(quote),
        "not a quote of the current note: {a:#}"
    );
    let n: u64 = cite.trim_end_matches("].").parse().unwrap_or(0);
    let cited = a["notes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|x| x["n"].as_u64() == Some(n)))
        .and_then(|x| x["id"].as_str())
        .unwrap_or_default();
    assert_eq!(cited, new, "{a:#}");
}

/// A note that contradicts an older one is put to the built-in model after its enrichment:
/// "is it an update of the older note?" The model answers in the asked shape, whatever its
/// verdict, and anything filed is a proposal in Review created by the LLM.
#[test]
fn the_builtin_model_is_asked_whether_a_contradicting_note_replaces_the_older_one() {
    let h = Home::with_builtin_llm();
    let add = |time: &str, text: &str| h.ok(&["add", "--time", time, text]).trim().to_owned();
    let old = add("2026-03-01T09:00:00Z", "My dentist is Dr. Korhonen.");
    let new = add(
        "2026-09-01T09:00:00Z",
        "I switched to a new dentist, Dr. Salo.",
    );
    h.ok(&["link", &new, &old, "--kind", "contradicts"]);
    let out = h
        .cmd(&["enrich"])
        .env("KASTEN_LOG", "warn,kasten_engine::supersede=debug")
        .output()
        .unwrap_or_else(|e| panic!("cannot run kasten enrich: {e}"));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let asked = log
        .lines()
        .filter(|l| l.contains("supersede::confirm") && l.contains("answer={\"answer\":"))
        .count();
    assert_eq!(asked, 1, "one question, answered in shape: {log}");
    assert!(!log.contains("could not say"), "{log}");
    for l in h.json(&["show", &new])["links"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if l["kind"] == "supersedes" {
            assert_eq!(
                (l["status"].as_str(), l["created_by"].as_str()),
                (Some("proposed"), Some("llm")),
                "{l}"
            );
        }
    }
}

/// A-Mem's whole loop with a real model that may evolve notes: Qwen2.5-Coder-1.5B on the
/// full prompts (construction, links, evolution) over five related notes, one at a time.
/// Every note is enriched; links and evolutions, whatever the model chose, passed `vet`
/// and pass the quality check (each evolution's reason names something the two notes
/// share). Where the model is not installed it says so and checks nothing.
#[test]
fn a_stronger_model_runs_the_whole_loop_and_what_it_keeps_passes_the_check() {
    let Some(model) = kasten_llm::catalog::find_model("qwen2.5-coder-1.5b") else {
        panic!("the catalog has no qwen2.5-coder-1.5b");
    };
    let Some(path) = kasten_llm::catalog::installed_path(&model, |k| std::env::var(k).ok()) else {
        eprintln!(
            "skipped: {} is not installed (`kasten llm install {}`)",
            model.title, model.name
        );
        return;
    };
    let h = Home::with_builtin_llm();
    let run = |args: &[&str]| {
        let out = h
            .cmd(args)
            .env("KASTEN_LLM_PROVIDER", "local")
            .env("KASTEN_LLM_MODEL_PATH", &path)
            .env("KASTEN_LLM_PROFILE", "full")
            .output()
            .unwrap_or_else(|e| panic!("cannot run kasten: {e}"));
        assert!(
            out.status.success(),
            "kasten {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let notes = [
        "Maya joined the climbing gym downtown in March.",
        "Maya's birthday is on 3 June; she wants a climbing harness.",
        "Maya sprained her ankle bouldering and cannot climb for six weeks.",
        "Maya switched from climbing to swimming while her ankle heals.",
        "Bought Maya a swimming cap instead of the harness for her birthday.",
    ];
    for text in notes {
        run(&["add", text]);
        run(&["enrich"]);
    }
    let ids = h.all_ids();
    assert_eq!(ids.len(), notes.len());
    for id in &ids {
        enriched(&h, id);
    }
    // the full prompts ran: construction for every note, links and evolution for each
    // note that had older ones
    let events: Value =
        serde_json::from_slice(&run(&["--json", "events", "--limit", "50"])).unwrap_or(Value::Null);
    let enrichments: Vec<&Value> = events["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "enrich")
        .collect();
    assert_eq!(enrichments.len(), notes.len(), "{events:#}");
    for e in &enrichments {
        assert_eq!(
            e["prompt_version"].as_str(),
            Some(kasten_core::prompts::PROMPT_VERSION),
            "{e:#}"
        );
    }
    let two_calls = enrichments
        .iter()
        .filter(|e| e["llm_calls"].as_u64() == Some(2))
        .count();
    assert_eq!(two_calls, notes.len() - 1, "{events:#}");
    // what it kept passes the check
    let out = h
        .cmd(&["--json", "quality"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run kasten quality: {e}"));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["passed"].as_bool(), Some(true), "{report:#}");
    assert_eq!(
        report["evolutions_naming_shared"], report["evolutions_with_source"],
        "{report:#}"
    );
    let applied: Value = serde_json::from_slice(&run(&[
        "--json",
        "proposals",
        "--status",
        "applied",
        "--limit",
        "200",
    ]))
    .unwrap_or(Value::Null);
    let items = applied["items"].as_array().cloned().unwrap_or_default();
    let links = items.iter().filter(|i| i["kind"] == "link").count();
    let evolutions: Vec<&Value> = items
        .iter()
        .filter(|i| i["kind"] == "edit" && i["label"] == "evolution")
        .collect();
    for e in &evolutions {
        assert!(
            !e["reason"].as_str().unwrap_or_default().trim().is_empty(),
            "{e:#}"
        );
    }
    eprintln!(
        "{}: {links} links, {} evolutions, quality check passed",
        model.title,
        evolutions.len()
    );
}
