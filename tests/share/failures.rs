//! What goes wrong between processes: clients and owners killed mid-call, another user,
//! a signal to stop.

use super::*;

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
    let bin = kasten_bin_in(bindir.path());
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
