//! Concurrency and the server path (docs/SERVER.md).
//!
//! - Two Kasten processes share one memory on a real SurrealDB 3.3.5 server (`ws://`,
//!   built from crates.io in `tests/surreal-server`): both write and run the enrichment
//!   queue at the same time against the deterministic LLM server. Nothing acknowledged is
//!   lost or doubled, every job is claimed and applied exactly once (one claim, one event,
//!   one construction revision per note, every LLM request accounted for by an applied
//!   event), no update is lost (each note's fields are the last applied revision's, and
//!   every applied revision starts from the one before), and the results are those of the
//!   embedded store given the same input.
//! - On the embedded store, `kasten mcp` holds the memory and serves it: `kasten add` and
//!   a second MCP server go through it, an import (which needs the memory to itself) is
//!   told it is open in another process, and nothing is damaged (tests/crash.rs covers
//!   CLI against CLI, tests/share.rs the sharing itself).
//!
//! The server binary: `$KASTEN_SURREAL_SERVER`, else `kasten-surreal-server` next to the
//! `kasten` binary (same target directory), else under `$CARGO_TARGET_DIR/debug` or
//! `target/debug`. Missing, the tests fail and name the command that builds it.
#![allow(clippy::panic)] // test helpers fail loudly

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kasten_tests::{FakeServer, Home, kasten_bin};
use serde_json::{Value, json};

const SERVER_NAME: &str = "kasten-surreal-server";
const SERVER_BUILD: &str = "cargo build --manifest-path tests/surreal-server/Cargo.toml --locked";

/// Where the SurrealDB server binary is; fails with the build command when it is missing.
fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("KASTEN_SURREAL_SERVER") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "KASTEN_SURREAL_SERVER={} is not a file; build the server with `{SERVER_BUILD}`",
            p.display()
        );
        return p;
    }
    let mut candidates = vec![kasten_bin().with_file_name(SERVER_NAME)];
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(t).join("debug").join(SERVER_NAME));
    }
    candidates.push(
        kasten_tests::tests_dir()
            .join("../target/debug")
            .join(SERVER_NAME),
    );
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return found.clone();
    }
    panic!(
        "the SurrealDB server binary `{SERVER_NAME}` was not found (looked at {}): build it with \
         `{SERVER_BUILD}` (scripts/test does, into the same CARGO_TARGET_DIR), or set \
         KASTEN_SURREAL_SERVER to its path",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A plain HTTP/1.1 GET on loopback: (status, body).
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.split_whitespace().nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// A SurrealDB server (in-memory storage) on a free loopback port; killed on drop.
struct SurrealServer {
    child: Child,
    port: u16,
}

impl SurrealServer {
    fn start(dir: &Path) -> Self {
        let bin = server_bin();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no free port: {e}"));
        let log_path = dir.join("surreal.log");
        let log = std::fs::File::create(&log_path).unwrap_or_else(|e| panic!("log: {e}"));
        let err = log.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
        let bind = format!("127.0.0.1:{port}");
        let mut child = Command::new(&bin)
            .args(["start", "--unauthenticated", "--bind", &bind])
            .args(["--log", "warn", "memory"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if http_get(port, "/health").is_some_and(|(s, _)| s == 200) {
                return Self { child, port };
            }
            let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the SurrealDB server exited ({status}):\n{}", log());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the SurrealDB server did not answer in 60 s:\n{}", log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }
}

impl Drop for SurrealServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A memory: a Kasten home whose commands use `db` (a server URL or the home's own
/// embedded store) and the LLM at `llm`.
struct Memory {
    home: Home,
    db: String,
}

impl Memory {
    fn on_server(server: &SurrealServer, llm: &FakeServer) -> Self {
        Self {
            home: Home::with_llm(&llm.openai_url()),
            db: server.url(),
        }
    }

    fn embedded(llm: &FakeServer) -> Self {
        let home = Home::with_llm(&llm.openai_url());
        let db = home.db();
        Self { home, db }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.home.cmd(args);
        c.env("KASTEN_DB", &self.db);
        c
    }

    fn spawn(&self, args: &[&str]) -> Group {
        let mut c = self.cmd(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        Group::start(c)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self
            .cmd(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run kasten {args:?}: {e}"));
        succeeded(&format!("kasten {args:?}"), out)
    }

    fn file(&self, name: &str, notes: &[Value]) -> String {
        let lines: String = notes.iter().map(|n| format!("{n}\n")).collect();
        let p = self.home.file(name, lines.as_bytes());
        p.to_str().unwrap_or_default().to_owned()
    }

    /// `kasten import FILE` printing ids as batches commit (small batches, so that two
    /// importers interleave their transactions).
    fn import_args(file: &str) -> Vec<&str> {
        vec![
            "import",
            file,
            "--format",
            "jsonl",
            "--print-ids",
            "--batch",
            "4",
        ]
    }

    /// Every table, every row (a full backup).
    fn tables(&self) -> Value {
        let path = self.home.dir.path().join("check.json");
        let _ = std::fs::remove_file(&path);
        self.ok(&["backup", path.to_str().unwrap_or_default()]);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("backup: {e}"));
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("backup: {e}"));
        v["tables"].clone()
    }
}

/// Asserts a finished process succeeded; returns its stdout.
fn succeeded(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A process started in a group of its own (with its children: `sh -c` runs kasten as
/// one), killed with the whole group on drop: a test that fails while another process
/// still runs does not leave it running.
struct Group(Option<Child>);

impl Group {
    fn start(mut c: Command) -> Self {
        use std::os::unix::process::CommandExt;
        c.process_group(0);
        Group(Some(
            c.spawn()
                .unwrap_or_else(|e| panic!("cannot start {c:?}: {e}")),
        ))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.wait();
        }
    }
}

fn finish(what: &str, mut group: Group) -> String {
    let child = group
        .0
        .take()
        .unwrap_or_else(|| panic!("{what}: already finished"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    succeeded(what, out)
}

/// `n` distinct notes with fixed times (the construction prompt shows the time, so the
/// same input gives the same LLM answers in every run).
fn corpus(from: usize, n: usize) -> Vec<Value> {
    const PEOPLE: &[&str] = &[
        "Caroline", "Melanie", "Jon", "Gina", "Priya", "Tomas", "Aiko", "Bruno",
    ];
    const TOPICS: &[&str] = &[
        "adoption agencies",
        "painting classes",
        "a dance studio",
        "an online clothing store",
        "marathon training",
        "the Rust borrow checker",
        "sourdough baking",
        "solar panels",
        "a trip to Lisbon",
        "the chess club",
        "vintage cameras",
        "the community garden",
    ];
    (from..from + n)
        .map(|i| {
            json!({
                "content": format!(
                    "{} talked about {} with {} (entry {i})",
                    PEOPLE[i % PEOPLE.len()],
                    TOPICS[(i * 5) % TOPICS.len()],
                    PEOPLE[(i + 3) % PEOPLE.len()]
                ),
                "time": format!("2024-03-{:02}T{:02}:{:02}:00Z", 1 + i % 28, 8 + i % 12, i % 60),
            })
        })
        .collect()
}

fn contents(notes: &[Value]) -> BTreeSet<String> {
    notes
        .iter()
        .filter_map(|n| n["content"].as_str().map(str::to_owned))
        .collect()
}

fn ids(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The key of a backup's `{"$record": {"table", "key"}}`.
fn key(v: &Value) -> String {
    v["$record"]["key"]
        .as_str()
        .unwrap_or_else(|| panic!("not a record: {v}"))
        .to_owned()
}

fn rows<'a>(tables: &'a Value, table: &str) -> &'a [Value] {
    tables[table].as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn fields(v: &Value) -> Value {
    json!({"keywords": v["keywords"], "tags": v["tags"], "context": v["context"]})
}

/// What a run produced that does not depend on the order jobs ran in, by note content.
#[derive(Debug, PartialEq)]
struct Outcome {
    notes: BTreeSet<String>,
    /// The construction each note got (what the LLM proposed for it).
    construction: BTreeMap<String, Value>,
    links: BTreeSet<(String, String, String, String)>,
    evolution: BTreeSet<(String, String, String, String)>,
}

/// Checks the exactly-once and no-lost-update invariants of a memory whose queue has run
/// to the end; returns what the run produced.
fn check(tables: &Value, expected: &BTreeSet<String>, acknowledged: &HashSet<String>) -> Outcome {
    let notes = rows(tables, "note");
    let by_id: HashMap<String, &Value> = notes.iter().map(|n| (key(&n["id"]), n)).collect();
    let content = |id: &str| -> String {
        by_id
            .get(id)
            .and_then(|n| n["content"].as_str())
            .unwrap_or_else(|| panic!("no note {id}"))
            .to_owned()
    };
    // no lost write, no duplicate
    assert_eq!(by_id.len(), notes.len(), "a note id appears twice");
    let got: BTreeSet<String> = notes.iter().map(|n| content(&key(&n["id"]))).collect();
    assert_eq!(got.len(), notes.len(), "a note was stored twice");
    assert_eq!(
        &got, expected,
        "the memory holds other notes than were written"
    );
    for id in acknowledged {
        assert!(by_id.contains_key(id), "acknowledged note {id} is missing");
    }
    // every job claimed once and done; one event per note
    let jobs = rows(tables, "job");
    assert_eq!(jobs.len(), notes.len(), "one job per note");
    for j in jobs {
        assert_eq!(j["state"].as_str(), Some("done"), "{j}");
        assert_eq!(
            j["attempts"].as_i64(),
            Some(1),
            "a job was claimed twice: {j}"
        );
    }
    let jobs_of: HashSet<String> = jobs.iter().map(|j| key(&j["note"])).collect();
    assert_eq!(jobs_of.len(), notes.len(), "two jobs for one note");
    let events = rows(tables, "event");
    let events_of: HashSet<String> = events.iter().map(|e| key(&e["note"])).collect();
    assert_eq!(events.len(), notes.len(), "one event per note");
    assert_eq!(events_of.len(), notes.len(), "a note was enriched twice");
    for n in notes {
        assert_eq!(n["enrich_state"].as_str(), Some("done"), "{}", n["content"]);
    }
    let event_ids: HashSet<String> = events.iter().map(|e| key(&e["id"])).collect();

    // revisions: one construction per note; per note, the applied revisions form one chain
    // (each starts from the fields the previous one left) ending in the note's fields
    let revisions = rows(tables, "revision");
    let mut construction = BTreeMap::new();
    let mut applied: HashMap<String, Vec<&Value>> = HashMap::new();
    let mut evolution = BTreeSet::new();
    for r in revisions {
        let note = key(&r["note"]);
        assert!(event_ids.contains(&key(&r["event"])), "orphan revision {r}");
        match r["reason"].as_str() {
            Some("construction") => {
                let before = construction.insert(content(&note), r["after"].clone());
                assert!(before.is_none(), "two constructions for {}", content(&note));
            }
            Some("evolution") => {
                evolution.insert((
                    content(&note),
                    r["before"].to_string(),
                    r["after"].to_string(),
                    r["status"].as_str().unwrap_or_default().to_owned(),
                ));
            }
            other => panic!("unexpected revision reason {other:?}"),
        }
        if r["status"].as_str() == Some("applied") {
            applied.entry(note).or_default().push(r);
        }
    }
    assert_eq!(
        construction.len(),
        notes.len(),
        "a note has no construction"
    );
    let empty = json!({"keywords": [], "tags": [], "context": ""});
    for n in notes {
        let id = key(&n["id"]);
        let mut chain = applied.remove(&id).unwrap_or_default();
        chain.sort_by(|a, b| {
            let t = |r: &Value| {
                r["created_at"]["$datetime"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            };
            t(a).cmp(&t(b))
        });
        let mut current = empty.clone();
        for r in &chain {
            assert_eq!(
                fields(&r["before"]),
                current,
                "lost update: a revision of '{}' does not start where the previous one ended",
                content(&id)
            );
            current = fields(&r["after"]);
        }
        assert_eq!(
            fields(n),
            current,
            "lost update: '{}' does not hold its last applied revision",
            content(&id)
        );
    }

    // links: unique, between existing notes, each made by an existing event
    let mut links = BTreeSet::new();
    for l in rows(tables, "link") {
        let (from, to) = (key(&l["in"]), key(&l["out"]));
        assert!(event_ids.contains(&key(&l["event"])), "orphan link {l}");
        let k = (
            content(&from),
            content(&to),
            l["kind"].as_str().unwrap_or_default().to_owned(),
            l["status"].as_str().unwrap_or_default().to_owned(),
        );
        assert!(links.insert(k), "duplicate link {l}");
    }
    Outcome {
        notes: got,
        construction,
        links,
        evolution,
    }
}

/// The fake LLM's recorded requests: (schema name, last user message).
fn llm_requests(llm: &FakeServer) -> Vec<(String, String)> {
    let (status, body) = http_get(llm.port, "/_fake/requests")
        .unwrap_or_else(|| panic!("cannot read the fake LLM's requests"));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/chat/completions"))
        })
        .map(|r| {
            let b = &r["body"];
            let name = b["response_format"]["json_schema"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let user = b["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            (name, user)
        })
        .collect()
}

/// No job ran twice: every note's construction was asked for exactly once, and every
/// LLM request belongs to an event that was applied (none was spent on a lost race).
fn assert_llm_work_done_once(llm: &FakeServer, tables: &Value, expected: &BTreeSet<String>) {
    let reqs = llm_requests(llm);
    for c in expected {
        let asked = reqs
            .iter()
            .filter(|(name, user)| name == "note_construction" && user.contains(c.as_str()))
            .count();
        assert_eq!(
            asked, 1,
            "the construction of '{c}' was asked for {asked} times"
        );
    }
    let calls: i64 = rows(tables, "event")
        .iter()
        .map(|e| e["llm_calls"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(
        calls,
        reqs.len() as i64,
        "LLM requests not accounted for by applied events"
    );
}

/// `enrich --json` outputs → (notes done, conflict retries).
fn enrich_totals(outputs: &[String]) -> (u64, u64) {
    outputs.iter().fold((0, 0), |(d, c), o| {
        let v: Value = serde_json::from_str(o).unwrap_or_else(|e| panic!("{e}: {o}"));
        (
            d + v["summary"]["done"].as_u64().unwrap_or(0),
            c + v["summary"]["conflict_retries"].as_u64().unwrap_or(0),
        )
    })
}

/// The same input into one embedded memory, one process at a time.
fn embedded_run(a: &[Value], b: &[Value], review: bool) -> (Outcome, f64) {
    let llm = FakeServer::start("normal");
    let m = Memory::embedded(&llm);
    let t = Instant::now();
    for (name, notes) in [("a.jsonl", a), ("b.jsonl", b)] {
        let f = m.file(name, notes);
        m.ok(&Memory::import_args(&f));
    }
    if review {
        m.ok(&["config", "set", "policy.links", "review"]);
        m.ok(&["config", "set", "policy.edits", "review"]);
    }
    m.ok(&["--json", "enrich", "--workers", "2"]);
    let secs = t.elapsed().as_secs_f64();
    let expected: BTreeSet<String> = contents(a).union(&contents(b)).cloned().collect();
    let tables = m.tables();
    let outcome = check(&tables, &expected, &HashSet::new());
    assert_llm_work_done_once(&llm, &tables, &expected);
    (outcome, secs)
}

#[path = "server/processes.rs"]
mod processes;
#[path = "server/store.rs"]
mod store;
