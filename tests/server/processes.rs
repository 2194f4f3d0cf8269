//! Processes that hold or leave a memory: `kasten mcp` serving the embedded one, a process
//! stopped mid-job on a server.

use super::*;

/// A `kasten mcp` process driven over stdio with JSON-RPC lines.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Mcp {
    fn start(m: &Memory, agent: &str) -> Self {
        let mut child = m
            .cmd(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start kasten mcp: {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("no stdout")));
        let mut mcp = Self {
            child,
            stdin,
            stdout,
            next: 1,
        };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": agent, "version": "1"}}),
        );
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("stdin closed"));
        writeln!(stdin, "{msg}").unwrap_or_else(|e| panic!("write to kasten mcp: {e}"));
        stdin.flush().unwrap_or_else(|e| panic!("{e}"));
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self
                .stdout
                .read_line(&mut line)
                .unwrap_or_else(|e| panic!("read kasten mcp: {e}"));
            assert!(n > 0, "kasten mcp closed its output during {method}");
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    fn add(&mut self, content: &str) -> Value {
        let r = self.request(
            "tools/call",
            json!({"name": "add_memory", "arguments": {"content": content}}),
        );
        assert_ne!(r["isError"], json!(true), "add_memory: {r}");
        r
    }

    /// Closes stdin (the client leaves) and waits for a clean exit.
    fn close(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap_or_else(|e| panic!("{e}"));
        assert!(status.success(), "kasten mcp exited with {status}");
    }
}

#[test]
fn while_kasten_mcp_holds_the_embedded_memory_others_go_through_it_and_nothing_breaks() {
    let llm = FakeServer::start("normal");
    let m = Memory::embedded(&llm);
    m.ok(&["add", "The deploy key lives in the team vault"]);
    let mut agent = Mcp::start(&m, "agent one");
    agent.add("Priya booked the Lisbon trip for May");

    // `kasten add` and a second MCP server go through the agent's server (which serves
    // the memory while it has it open) ...
    m.ok(&["add", "a second writer"]);
    let mut second = Mcp::start(&m, "agent two");
    second.add("a second agent's note");
    second.close();
    // ... an import needs the memory to itself and is refused
    let f = m.file("more.jsonl", &corpus(200, 5));
    let args = Memory::import_args(&f);
    let out = m
        .cmd(&args)
        .output()
        .unwrap_or_else(|e| panic!("kasten {args:?}: {e}"));
    assert!(
        !out.status.success(),
        "kasten {args:?} opened a held memory"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("open in another process"),
        "kasten {args:?}: {err}"
    );
    // the holder is unaffected, and after it leaves everything is there, once
    agent.add("Feed the sourdough starter on Sundays");
    agent.close();
    let list: Value =
        serde_json::from_str(&m.ok(&["--json", "list"])).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<&str> = list["notes"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n["content"].as_str()).collect())
        .unwrap_or_default();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "Feed the sourdough starter on Sundays",
            "Priya booked the Lisbon trip for May",
            "The deploy key lives in the team vault",
            "a second agent's note",
            "a second writer",
        ],
        "{list:#}"
    );
    m.ok(&["import", &f, "--format", "jsonl"]);
}

#[test]
fn a_process_that_stops_mid_job_on_a_server_gives_the_job_back() {
    // On a server `running` jobs are not requeued at open (another process may be working
    // on them); a clean exit must give back what it holds instead of leaving it leased for
    // ten minutes.
    let llm = FakeServer::start("slow:2500");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = SurrealServer::start(dir.path());
    let m = Memory::on_server(&server, &llm);
    let mut agent = Mcp::start(&m, "agent on a server");
    agent.add("The team standup moved to 9:30 on Mondays");
    // the agent's background worker has claimed the job and waits for the slow LLM
    let deadline = Instant::now() + Duration::from_secs(30);
    while llm_requests(&llm).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the MCP server never started the job"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    agent.close();
    let v: Value =
        serde_json::from_str(&m.ok(&["--json", "enrich"])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v["summary"]["done"].as_u64(),
        Some(1),
        "the job the agent was running when it stopped is still held: {v:#}"
    );
    let tables = m.tables();
    let job = &rows(&tables, "job")[0];
    assert_eq!(job["state"].as_str(), Some("done"), "{job}");
    assert_eq!(
        job["attempts"].as_i64(),
        Some(1),
        "the cut-off attempt was given back, not counted: {job}"
    );
}
