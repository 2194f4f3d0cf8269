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

use kasten_tests::{FakeServer, Home, Rng, kasten_bin_in};
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

#[path = "share/failures.rs"]
mod failures;
#[path = "share/together.rs"]
mod together;
