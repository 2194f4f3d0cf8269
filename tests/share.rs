//! One memory, many processes: the process that has an embedded memory open (`kasten mcp`,
//! a long `kasten import`) serves it to the user's other Kasten processes, which go
//! through it instead of being refused. Real processes throughout: MCP clients of the
//! official SDK, `kasten` commands run concurrently, clients and owners killed with
//! SIGKILL. After each, every acknowledged note is in the memory exactly once.
#![allow(clippy::panic)] // test code fails loudly

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kasten_tests::{FakeServer, Home, Rng, kasten_bin};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ClientConfig>;

fn socket(h: &Home) -> PathBuf {
    h.dir.path().join("db").join("kasten.sock")
}

/// Waits until some process serves the memory.
fn wait_for_owner(h: &Home) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !socket(h).exists() {
        assert!(
            Instant::now() < deadline,
            "nobody started serving the memory"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kasten mcp` for an agent called `name`, its stderr into `log` (or inherited); the
/// process id for killing it.
async fn mcp(h: &Home, name: &str, log: Option<&Path>) -> (Client, u32) {
    let mut cmd = h.cmd(&["mcp"]);
    cmd.stdin(std::process::Stdio::piped());
    let stderr = match log {
        Some(p) => std::process::Stdio::from(
            std::fs::File::create(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        ),
        None => std::process::Stdio::inherit(),
    };
    let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start kasten mcp: {e}"));
    let pid = transport.id().unwrap_or_else(|| panic!("no pid"));
    let c = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, "1.0"),
    )
    .serve(transport)
    .await
    .unwrap_or_else(|e| panic!("initialize failed: {e}"));
    (c, pid)
}

/// The structured result of a successful tool call.
async fn tool(c: &Client, name: &str, args: Value) -> Value {
    let Value::Object(map) = args.clone() else {
        panic!("arguments must be an object")
    };
    let r = c
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(map))
        .await
        .unwrap_or_else(|e| panic!("{name} {args}: {e}"));
    assert_ne!(r.is_error, Some(true), "{name} {args}: {r:?}");
    r.structured_content
        .unwrap_or_else(|| panic!("{name}: no structured content"))
}

fn hit_ids(v: &Value) -> Vec<String> {
    v["hits"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|h| h["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// How many times each content is in the memory (ids must be unique too).
fn contents(h: &Home) -> HashMap<String, usize> {
    let v = h.json(&["list", "--limit", "1000000"]);
    let notes = v["notes"].as_array().cloned().unwrap_or_default();
    let mut ids = std::collections::HashSet::new();
    let mut count = HashMap::new();
    for n in &notes {
        let id = n["id"].as_str().unwrap_or_default().to_owned();
        assert!(ids.insert(id.clone()), "note {id} listed twice");
        *count
            .entry(n["content"].as_str().unwrap_or_default().to_owned())
            .or_insert(0) += 1;
    }
    count
}

fn assert_each_once(h: &Home, acknowledged: &[String]) {
    let count = contents(h);
    for c in acknowledged {
        assert_eq!(
            count.get(c).copied().unwrap_or(0),
            1,
            "acknowledged note {c:?} is not there exactly once"
        );
    }
    for (c, n) in &count {
        assert_eq!(*n, 1, "{c:?} is in the memory {n} times");
    }
}

/// `kasten --json add TEXT` in a thread-friendly form: the id when acknowledged.
fn add(h: &Home, text: &str) -> Option<String> {
    let out = h.run(&["--json", "add", text]);
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("add printed invalid JSON ({e})"));
    v["id"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_and_commands_share_one_memory_while_kasten_mcp_has_it_open() {
    let h = Home::new();
    let (owner, _) = mcp(&h, "agent-one", None).await;
    wait_for_owner(&h);
    // a second agent's server finds the owner and goes through it
    let (other, _) = mcp(&h, "agent-two", None).await;
    let a = tool(
        &owner,
        "add_memory",
        json!({"content": "The heron nests by the old mill pond"}),
    )
    .await;
    let b = tool(
        &other,
        "add_memory",
        json!({"content": "Invoices are due on the first Monday of the month"}),
    )
    .await;
    // attributed to the agent that wrote it, numbered in its own session
    assert_eq!(b["source"], json!("mcp:agent-two:1"));
    let (a_id, b_id) = (
        a["id"].as_str().unwrap_or_default().to_owned(),
        b["id"].as_str().unwrap_or_default().to_owned(),
    );
    // each sees the other's note at once: one index
    let found = tool(
        &owner,
        "search_memory",
        json!({"query": "when are invoices due", "k": 3}),
    )
    .await;
    assert_eq!(hit_ids(&found).first(), Some(&b_id), "{found}");
    let found = tool(
        &other,
        "search_memory",
        json!({"query": "heron mill pond", "k": 3}),
    )
    .await;
    assert_eq!(hit_ids(&found).first(), Some(&a_id), "{found}");
    let read = tool(&other, "read_note", json!({"id": a_id})).await;
    assert_eq!(
        read["note"]["content"],
        json!("The heron nests by the old mill pond")
    );
    let recent = tool(&other, "list_recent", json!({})).await;
    assert_eq!(recent["total"], json!(2));
    // and so does the CLI, through the same owner
    let cli = h.json(&["search", "heron", "-k", "3"]);
    assert_eq!(hit_ids(&cli).first(), Some(&a_id), "{cli}");
    // the second agent leaves; the owner keeps serving
    other.cancel().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(add(&h, "Water the fig tree every Thursday").is_some());
    owner.cancel().await.unwrap_or_else(|e| panic!("{e}"));
    assert_each_once(
        &h,
        &[
            "The heron nests by the old mill pond".into(),
            "Invoices are due on the first Monday of the month".into(),
            "Water the fig tree every Thursday".into(),
        ],
    );
    assert!(!socket(&h).exists(), "the owner left its socket behind");
}

/// Twelve unrelated notes and a query that finds each.
const ERRANDS: [(&str, &str); 12] = [
    (
        "The plumber comes Tuesday to fix the kitchen tap",
        "plumber kitchen tap",
    ),
    (
        "Margot's birthday dinner is at the Thai place on Elm Street",
        "Margot birthday dinner",
    ),
    (
        "Renew the car insurance before the end of April",
        "car insurance renewal",
    ),
    (
        "The spare house key is under the blue flowerpot",
        "spare house key",
    ),
    (
        "Yusuf recommended the novel Piranesi",
        "novel Yusuf recommended",
    ),
    (
        "Quarterly tax payment is due on the fifteenth",
        "quarterly tax payment",
    ),
    (
        "The wifi password for the cabin is on the fridge",
        "cabin wifi password",
    ),
    (
        "Book club meets in the library annex on Wednesdays",
        "book club library annex",
    ),
    (
        "Dr. Osei moved her clinic to Harbour Road",
        "Osei clinic Harbour Road",
    ),
    (
        "Our flight to Oslo leaves at seven in the morning",
        "flight to Oslo",
    ),
    (
        "The bike chain needs oil after the rainy commute",
        "bike chain oil",
    ),
    (
        "Grandma's lentil soup recipe uses smoked paprika",
        "lentil soup recipe paprika",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_concurrently_through_the_owner_with_the_same_output_and_errors() {
    let llm = FakeServer::start("normal");
    let h = Arc::new(Home::with_llm(&llm.openai_url()));
    let (owner, _) = mcp(&h, "agent", None).await;
    wait_for_owner(&h);
    let acked = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let mut threads = Vec::new();
    for t in 0..3 {
        let (h, acked) = (Arc::clone(&h), Arc::clone(&acked));
        threads.push(std::thread::spawn(move || {
            for i in 0..4 {
                // distinct notes (near-duplicates would be merged on write)
                let (text, query) = ERRANDS[t * 4 + i];
                let id = add(&h, text).unwrap_or_else(|| panic!("add {text:?} failed"));
                let shown = h.json(&["show", &id]);
                assert_eq!(shown["content"], json!(text));
                let hits = h.json(&["search", query, "-k", "5"]);
                assert!(hit_ids(&hits).contains(&id), "{query}: {hits}");
                let text = text.to_owned();
                acked
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((id, text));
            }
        }));
    }
    // the agent writes meanwhile
    let agent = tool(
        &owner,
        "add_memory",
        json!({"content": "The agent booked the dentist for Friday"}),
    )
    .await;
    for t in threads {
        t.join()
            .unwrap_or_else(|_| panic!("a command thread failed"));
    }
    // the owner's engine sees what the commands wrote
    let found = tool(
        &owner,
        "search_memory",
        json!({"query": ERRANDS[9].1, "k": 3}),
    )
    .await;
    assert!(!hit_ids(&found).is_empty());
    // ask goes through the owner's LLM
    let asked = h.json(&["ask", "when is the dentist?"]);
    assert!(
        asked["answer"].as_str().is_some_and(|a| !a.is_empty()),
        "{asked}"
    );
    let text_ask = h.run(&["ask", "when is the dentist?"]);
    assert!(text_ask.status.success());
    // output and errors through the owner, kept to compare with the memory opened here
    let some_id = acked.lock().unwrap_or_else(|e| e.into_inner())[0].0.clone();
    let remote_show = h.json(&["show", &some_id]);
    let missing = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let remote_missing = h.run(&["show", missing]);
    let remote_empty = h.run(&["search", "  "]);
    let remote_list = h.ok(&["list"]);
    owner.cancel().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!socket(&h).exists());

    let local_missing = h.run(&["show", missing]);
    assert_eq!(remote_missing.status.code(), Some(1));
    assert_eq!(remote_missing.status.code(), local_missing.status.code());
    assert_eq!(
        String::from_utf8_lossy(&remote_missing.stderr),
        String::from_utf8_lossy(&local_missing.stderr)
    );
    let local_empty = h.run(&["search", "  "]);
    assert_eq!(remote_empty.status.code(), local_empty.status.code());
    let local_show = h.json(&["show", &some_id]);
    // (links and annotations may have grown meanwhile: the owner was enriching)
    for field in ["id", "content", "created_at", "source"] {
        assert_eq!(remote_show[field], local_show[field], "{field}");
    }
    // the text listing is the same but for enrichment that finished in between
    assert_eq!(remote_list.lines().count(), h.ok(&["list"]).lines().count());

    let mut all: Vec<String> = acked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(all.len(), 12);
    all.push(
        agent["id"]
            .as_str()
            .map(|_| "The agent booked the dentist for Friday".to_owned())
            .unwrap_or_default(),
    );
    assert_each_once(&h, &all);
}

/// Reviewing and editing by hand (`link`, `unlink`, `edit`, `edit --content`, `history`,
/// `proposals`, `rollback`, `reapply`, `delete`) work while another process has the memory
/// open, as the user, and the owner sees every change at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_and_editing_commands_go_through_the_owner() {
    let h = Home::new();
    let (owner, _) = mcp(&h, "agent", None).await;
    wait_for_owner(&h);
    let id = |v: Value| v["id"].as_str().unwrap_or_default().to_owned();
    let a = id(h.json(&["add", "The ferry to Lindau leaves at nine"]));
    let b = id(h.json(&["add", "Bikes ride free on the lake ferries"]));

    let linked = h.json(&["link", &a, &b, "--kind", "supports", "--reason", "ferries"]);
    assert_eq!(linked["action"], "link", "{linked:#}");
    let link = linked["target"].as_str().unwrap_or_default().to_owned();
    // the owner's engine has it, made by the user
    let got = tool(&owner, "read_note", json!({"id": a})).await;
    let links = got["links"].as_array().cloned().unwrap_or_default();
    assert!(
        links
            .iter()
            .any(|l| l["created_by"] == "user" && l["kind"] == "supports"),
        "{got:#}"
    );

    let tagged = h.json(&["edit", &a, "--tags", "travel,lake"]);
    assert_eq!(tagged["action"], "edit", "{tagged:#}");
    let text = h.json(&[
        "edit",
        &a,
        "--content",
        "The ferry to Bregenz leaves at ten",
    ]);
    assert_eq!(text["action"], "edit_content", "{text:#}");
    let got = tool(&owner, "read_note", json!({"id": a})).await;
    assert_eq!(
        got["note"]["content"], "The ferry to Bregenz leaves at ten",
        "{got:#}"
    );

    let history = h.json(&["history", &a]);
    let actions: Vec<&str> = history["history"]
        .as_array()
        .map(|e| e.iter().filter_map(|x| x["action"].as_str()).collect())
        .unwrap_or_default();
    for want in ["link", "edit"] {
        assert!(actions.contains(&want), "{want} missing: {history:#}");
    }
    let text_edit = history["history"]
        .as_array()
        .and_then(|e| {
            e.iter()
                .find(|x| x["content_after"] == "The ferry to Bregenz leaves at ten")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        text_edit["content_before"], "The ferry to Lindau leaves at nine",
        "{history:#}"
    );
    let queue = h.json(&["proposals", "--status", "accepted"]);
    assert!(queue["items"].is_array(), "{queue:#}");

    let tag_rev = history["history"]
        .as_array()
        .and_then(|e| {
            e.iter().find(|x| {
                x["action"] == "edit"
                    && x["after"]["tags"]
                        .as_array()
                        .is_some_and(|t| t.iter().any(|t| t == "lake"))
            })
        })
        .and_then(|x| x["id"].as_str())
        .unwrap_or_default()
        .to_owned();
    let back = h.json(&["rollback", &tag_rev]);
    assert_eq!(back["action"], "rollback", "{back:#}");
    let shown = h.json(&["show", &a]);
    assert!(
        shown["tags"]
            .as_array()
            .is_none_or(|t| !t.iter().any(|x| x == "lake")),
        "{shown:#}"
    );
    let un = h.json(&["unlink", &a, &b]);
    assert_eq!(un["links"].as_u64(), Some(1), "{un:#}");
    h.json(&["reapply", &link]);
    // errors through the owner are the engine's own words
    let missing = h.run(&["history", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]);
    let bad_rollback = h.run(&["rollback", "no-such-change"]);
    assert!(!bad_rollback.status.success());
    let deleted = h.json(&["delete", &b]);
    assert_eq!(deleted["deleted"], b.as_str(), "{deleted:#}");
    assert!(socket(&h).exists(), "the owner still serves");
    owner.cancel().await.unwrap_or_else(|e| panic!("{e}"));

    // the same commands with the memory opened here answer alike
    let local_missing = h.run(&["history", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]);
    assert_eq!(missing.status.code(), local_missing.status.code());
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        String::from_utf8_lossy(&local_missing.stderr)
    );
    let local_bad = h.run(&["rollback", "no-such-change"]);
    assert_eq!(
        String::from_utf8_lossy(&bad_rollback.stderr),
        String::from_utf8_lossy(&local_bad.stderr)
    );
    let shown = h.json(&["show", &a]);
    assert_eq!(shown["content"], "The ferry to Bregenz leaves at ten");
    let kept: Vec<Value> = shown["links"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l["status"] == "accepted")
        .collect();
    assert!(
        kept.is_empty(),
        "the link went with the deleted note: {kept:?}"
    );
    assert!(h.run(&["show", &b]).status.code() == Some(1), "deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_killed_mid_call_do_not_disturb_the_owner() {
    let h = Home::new();
    let (owner, _) = mcp(&h, "agent", None).await;
    wait_for_owner(&h);
    let mut rng = Rng::from_env("KASTEN_TEST_SEED");
    let mut acked = Vec::new();
    for i in 0..10 {
        let text = format!("A note whose writer was killed, number {i}");
        let mut child = h
            .cmd(&["add", &text])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(rng.range(0, 400)));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // the owner answers the next one at once
        let text = format!("A note written after kill {i}");
        let r = tool(&owner, "add_memory", json!({"content": text})).await;
        assert!(r["id"].is_string());
        acked.push(text);
    }
    // a killed search client too
    let mut child = h
        .cmd(&["search", "killed writer"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_millis(150));
    let _ = child.kill();
    let _ = child.wait();
    let found = tool(
        &owner,
        "search_memory",
        json!({"query": "written after kill 9", "k": 3}),
    )
    .await;
    assert!(!hit_ids(&found).is_empty());
    assert!(add(&h, "The owner still takes commands").is_some());
    acked.push("The owner still takes commands".into());
    owner.cancel().await.unwrap_or_else(|e| panic!("{e}"));
    // acknowledged notes once; a killed writer's note at most once (it may have landed)
    assert_each_once(&h, &acked);
}

#[test]
fn the_owner_killed_mid_write_leaves_a_memory_the_next_command_opens_itself() {
    let h = Arc::new(Home::new());
    assert!(add(&h, "Written before the import").is_some());
    // a long import owns the memory and serves it while it writes
    let (mut importer, mut reader) = h.spawn_import(3000, Some(25));
    let mut imported = Vec::new();
    let mut line = String::new();
    let _ = reader.read_line(&mut line);
    imported.push(line.trim().to_owned());
    wait_for_owner(&h);
    // clients write through the importer meanwhile
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let writer = {
        let (h, stop, acked) = (Arc::clone(&h), Arc::clone(&stop), Arc::clone(&acked));
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let text = format!("Client note {i} written while the owner may die");
                if add(&h, &text).is_some() {
                    acked.lock().unwrap_or_else(|e| e.into_inner()).push(text);
                }
                i += 1;
            }
        })
    };
    // let both write for a while, then kill the owner mid-write
    while imported.len() < 150 {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        imported.push(line.trim().to_owned());
    }
    while acked.lock().unwrap_or_else(|e| e.into_inner()).len() < 3 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = importer.kill(); // SIGKILL
    let _ = importer.wait();
    for l in reader.lines().map_while(Result::ok) {
        imported.push(l.trim().to_owned());
    }
    // the clients after the kill find the dead owner's socket, and open the memory
    // themselves; give them a few rounds
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    writer
        .join()
        .unwrap_or_else(|_| panic!("the writer thread failed"));
    assert!(
        add(&h, "Written after the owner died").is_some(),
        "the next command could not open the memory"
    );
    let ids: std::collections::HashSet<String> = h.all_ids().into_iter().collect();
    for id in imported.iter().filter(|i| !i.is_empty()) {
        assert!(ids.contains(id), "acknowledged import note {id} lost");
    }
    let mut expected = acked.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(expected.len() >= 3);
    expected.push("Written before the import".into());
    expected.push("Written after the owner died".into());
    assert_each_once(&h, &expected);
    // and search agrees with the store after the crash
    let hits = h.json(&["search", "Written after the owner died", "-k", "1"]);
    assert_eq!(
        hits["hits"][0]["content"],
        json!("Written after the owner died")
    );
}

/// Whether this test runs as root (needed to run a command as another user).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_user_cannot_use_the_memory_even_with_the_files_opened_up() {
    if !is_root() {
        eprintln!("SKIPPED: running a command as another user needs root");
        return;
    }
    let h = Home::new();
    let log = h.dir.path().join("owner.log");
    let (owner, _) = mcp(&h, "agent", Some(&log)).await;
    wait_for_owner(&h);
    tool(
        &owner,
        "add_memory",
        json!({"content": "A private note of the owner"}),
    )
    .await;
    // the binary where user nobody can run it
    let bindir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bin = bindir.path().join("kasten");
    if std::fs::hard_link(kasten_bin(), &bin).is_err() {
        std::fs::copy(kasten_bin(), &bin).unwrap_or_else(|e| panic!("{e}"));
    }
    use std::os::unix::fs::PermissionsExt;
    let open = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()))
    };
    open(bindir.path(), 0o755);
    let as_nobody = |args: &[&str]| {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(args)
            .env("KASTEN_DB", h.db())
            .env("KASTEN_LLM_PROVIDER", "none")
            .stdin(std::process::Stdio::null());
        c.output().unwrap_or_else(|e| panic!("setpriv: {e}"))
    };
    // as made: the socket and token are 0600, so nobody cannot even connect
    let out = as_nobody(&["--json", "list"]);
    assert!(!out.status.success(), "another user listed the memory");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("private note"));
    // opened up by mistake (folders, socket and token readable by all): the owner
    // still refuses a peer of another uid
    open(h.dir.path(), 0o755);
    open(&h.dir.path().join("db"), 0o755);
    open(&socket(&h), 0o666);
    open(&h.dir.path().join("db").join("kasten.token"), 0o644);
    let out = as_nobody(&["--json", "list"]);
    assert!(!out.status.success(), "another user listed the memory");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("private note"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("refused a connection from another user") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the owner did not refuse: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // and the owner serves its user as before
    let v = h.json(&["list"]);
    assert_eq!(
        v["notes"][0]["content"],
        json!("A private note of the owner")
    );
    owner.cancel().await.unwrap_or_else(|e| panic!("{e}"));
}

/// SIGTERM (what a supervisor or an MCP client sends to stop a server) ends `kasten mcp`
/// as Ctrl-C does: it stops serving and closes the store, which writes the index snapshot
/// after the write it served, and exits 0 instead of dying by the signal.
#[test]
fn sigterm_to_kasten_mcp_closes_the_memory_cleanly() {
    let h = Home::new();
    let log = h.dir.path().join("mcp.log");
    let mut child = h
        .cmd(&["mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}")),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start kasten mcp: {e}"));
    wait_for_owner(&h);
    // a write through the owner, so the close has an index snapshot to write
    h.ok(&["add", "A note written while kasten mcp owned the memory"]);
    let snapshot = h.dir.path().join("db").join("kasten-index.snapshot");
    let _ = std::fs::remove_file(&snapshot);
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap_or_else(|e| panic!("{e}")) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "kasten mcp did not end after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{status:?}: {stderr}");
    assert!(!socket(&h).exists(), "still serving after the exit");
    assert!(snapshot.exists(), "the store was not closed: {stderr}");
    let listed = h.json(&["list"]);
    assert_eq!(
        listed["notes"].as_array().map(Vec::len),
        Some(1),
        "{listed:#}"
    );
}
