//! `kill -9` at random points during `kasten import` and during `kasten enrich` (the queue
//! worker, against `kasten-fakellm`). After every kill the memory is opened again and
//! checked: every acknowledged note is there exactly once, no enrichment is half-applied
//! ([`super::consistency::check`]), and in the end the queue runs to completion.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kasten_tests::{FakeServer, Home, Rng};

use super::consistency;

/// Kills that must land while the process is still running, per test.
const IMPORT_KILLS: usize = 12;
const ENRICH_KILLS: usize = 10;

/// Notes of import file `f`: distinct content per file and line.
fn import_file(f: usize, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"content\": \"file {f} line {i}: a remark on subject {} and detail {}\"}}\n",
                i % 53,
                (i * 7 + f) % 31
            )
        })
        .collect()
}

/// When a kill lands: `delay` after the start, or `delay` after the work visibly began.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// Counted from the spawn: usually while the store opens or the model loads.
    Start(Duration),
    /// Counted from the moment `started` first holds (a committed batch, an LLM call).
    Working(Duration),
}

/// Runs `kasten` with `args` and SIGKILLs it at `at`; stdout lines seen before the kill
/// are returned. `true` if the kill landed while it ran.
fn run_and_kill(
    h: &Home,
    args: &[&str],
    at: KillAt,
    started: &dyn Fn(&[String]) -> bool,
) -> (bool, Vec<String>) {
    let mut child = h
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {args:?}: {e}"));
    let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(mut v) = lines.lock() {
                    v.push(l.trim().to_owned());
                }
            }
        })
    };
    let seen = || lines.lock().map(|v| v.clone()).unwrap_or_default();
    let delay = match at {
        KillAt::Start(d) => d,
        KillAt::Working(d) => {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !started(&seen()) && Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            d
        }
    };
    let start = Instant::now();
    let mut killed = false;
    while start.elapsed() < delay {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill(); // SIGKILL: no destructor, no close, nothing flushed by us
        killed = true;
    }
    let _ = child.wait();
    let _ = reader.join();
    (killed, seen())
}

#[test]
fn kill_9_at_random_points_during_import() {
    let mut rng = Rng::from_env("KASTEN_RELIABILITY_SEED");
    let h = Home::new();
    let per_file = 300;
    let mut file = 0;
    let mut path = h.file("import-0.jsonl", import_file(0, per_file).as_bytes());
    let mut acknowledged: HashSet<String> = HashSet::new();
    let (mut kills, mut rounds, mut finished) = (0, 0, 0);
    while kills < IMPORT_KILLS {
        rounds += 1;
        assert!(rounds < IMPORT_KILLS * 4, "too few kills landed: {kills}");
        let batch = rng.range(5, 80).to_string();
        // one kill in four while it starts up, the others while batches are committing
        let at = if rng.range(0, 3) == 0 {
            KillAt::Start(Duration::from_millis(rng.range(0, 1500)))
        } else {
            KillAt::Working(Duration::from_millis(rng.range(0, 2500)))
        };
        let args = [
            "import",
            path.to_str().unwrap_or_default(),
            "--format",
            "jsonl",
            "--print-ids",
            "--batch",
            &batch,
        ];
        let (killed, ids) = run_and_kill(&h, &args, at, &|lines| !lines.is_empty());
        acknowledged.extend(ids.into_iter().filter(|l| !l.is_empty()));
        eprintln!(
            "import round {rounds}: file {file}, batch {batch}, kill {at:?}: {}",
            if killed { "killed" } else { "finished first" }
        );
        if killed {
            kills += 1;
        } else {
            // the file is in: the next rounds import a new one
            finished += 1;
            file += 1;
            path = h.file(
                &format!("import-{file}.jsonl"),
                import_file(file, per_file).as_bytes(),
            );
        }

        // reopen: every acknowledged note once, no line twice
        let list = h.json(&["list", "--limit", "1000000"]);
        let notes = list["notes"].as_array().cloned().unwrap_or_default();
        let ids: HashSet<String> = notes
            .iter()
            .filter_map(|n| n["id"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(ids.len(), notes.len(), "round {rounds}: duplicate ids");
        let lost: Vec<&String> = acknowledged.difference(&ids).collect();
        assert!(
            lost.is_empty(),
            "round {rounds}: {} acknowledged notes lost, e.g. {:?}",
            lost.len(),
            lost.first()
        );
        let mut per_content: HashMap<&str, usize> = HashMap::new();
        for n in &notes {
            *per_content
                .entry(n["content"].as_str().unwrap_or_default())
                .or_default() += 1;
        }
        let twice: Vec<_> = per_content.iter().filter(|(_, c)| **c > 1).collect();
        assert!(
            twice.is_empty(),
            "round {rounds}: lines imported twice: {twice:?}"
        );
    }
    // finish the last file; the whole memory is consistent and searchable
    h.ok(&[
        "import",
        path.to_str().unwrap_or_default(),
        "--format",
        "jsonl",
    ]);
    let tables = h.dump();
    let c = consistency::check(&tables, "after the import kills");
    assert_eq!(c.notes, (file + 1) * per_file, "every line of every file");
    let r = h.json(&[
        "search",
        "file 0 line 17: a remark on subject 17",
        "-k",
        "3",
    ]);
    assert!(r["hits"].as_array().is_some_and(|a| !a.is_empty()), "{r}");
    eprintln!(
        "import: {kills} kills in {rounds} rounds ({finished} finished first), {} acknowledged ids, {} notes checked",
        acknowledged.len(),
        c.notes
    );
}

#[test]
fn kill_9_at_random_points_during_enrichment() {
    let mut rng = Rng::from_env("KASTEN_RELIABILITY_SEED");
    // every LLM answer takes 30 ms, so a pass over the queue takes a few seconds
    let fake = FakeServer::start("slow:30");
    let h = Home::with_llm(&fake.openai_url());
    let topics = [
        "Caroline joined a support group and felt accepted",
        "Melanie painted a sunrise over the lake with her kids",
        "Jon lost his banking job and wants to open a dance studio",
        "Gina opened an online clothing store",
        "the pottery class meets on Thursday evenings",
    ];
    // queues 30 more notes (a fast machine may finish a queue between two kills)
    let add_notes = |part: usize| {
        let lines: String = (0..30)
            .map(|i| {
                format!(
                    "{{\"content\": \"{} (part {part}, entry {i})\"}}\n",
                    topics[i % topics.len()]
                )
            })
            .collect();
        let f = h.file(&format!("notes-{part}.jsonl"), lines.as_bytes());
        h.ok(&[
            "import",
            f.to_str().unwrap_or_default(),
            "--format",
            "jsonl",
        ]);
    };
    let mut parts = 2;
    add_notes(0);
    add_notes(1);
    let (mut kills, mut rounds) = (0, 0);
    let mut checked = consistency::Checked::default();
    while kills < ENRICH_KILLS {
        rounds += 1;
        assert!(rounds < ENRICH_KILLS * 4, "too few kills landed: {kills}");
        let workers = rng.range(1, 3).to_string();
        let at = if rng.range(0, 3) == 0 {
            KillAt::Start(Duration::from_millis(rng.range(0, 1500)))
        } else {
            KillAt::Working(Duration::from_millis(rng.range(0, 1500)))
        };
        let before = fake.request_count();
        let (killed, _) = run_and_kill(&h, &["enrich", "--workers", &workers], at, &|_| {
            fake.request_count() > before
        });
        eprintln!(
            "enrich round {rounds}: {workers} worker(s), kill {at:?}: {}",
            if killed { "killed" } else { "finished first" }
        );
        if killed {
            kills += 1;
        }
        checked = consistency::check(&h.dump(), &format!("enrich round {rounds}"));
        if checked.events == checked.notes {
            add_notes(parts); // the queue ran dry: give the next kills something to hit
            parts += 1;
        }
    }
    let notes = parts * 30;
    // restart: the queue resumes and finishes; each note enriched exactly once
    let v = h.json(&["enrich"]);
    assert_eq!(v["jobs"]["queued"].as_u64(), Some(0), "{v:#}");
    assert_eq!(v["jobs"]["running"].as_u64(), Some(0), "{v:#}");
    assert_eq!(v["jobs"]["failed"].as_u64(), Some(0), "{v:#}");
    assert_eq!(v["jobs"]["done"].as_u64(), Some(notes as u64), "{v:#}");
    let last = consistency::check(&h.dump(), "after the enrich kills");
    assert_eq!(last.events, notes, "one event per note");
    assert!(last.links > 0, "the enrichment made links");
    eprintln!(
        "enrich: {kills} kills in {rounds} rounds; before the last pass {} of {notes} notes were enriched; at the end {} events, {} links, {} revisions checked",
        checked.events, last.events, last.links, last.revisions
    );
}
