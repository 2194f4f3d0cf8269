//! `kasten mcp` driven by a real MCP client (the official Rust SDK, `rmcp`) over stdio:
//! initialize, tools/list and every tool, with `ask_memory` answered by the deterministic
//! LLM server (`kasten-fakellm`).
#![allow(clippy::panic)] // test code fails loudly

use kasten_tests::{FakeServer, Home};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ClientConfig>;

async fn connect(h: &Home, name: &str) -> Client {
    connect_with(h, name, &[]).await
}

/// `kasten mcp` with `flags` (e.g. `--read-only`), as the client `name`.
async fn connect_with(h: &Home, name: &str, flags: &[&str]) -> Client {
    let mut args = vec!["mcp"];
    args.extend_from_slice(flags);
    let mut cmd = h.cmd(&args);
    cmd.stdin(std::process::Stdio::piped());
    let (transport, _stderr) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start kasten mcp: {e}"));
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, "1.0"),
    )
    .serve(transport)
    .await
    .unwrap_or_else(|e| panic!("initialize failed: {e}"))
}

async fn call(c: &Client, tool: &str, args: Value) -> Result<CallToolResult, String> {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    c.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map))
        .await
        .map_err(|e| e.to_string())
}

/// The structured result of a successful call.
async fn ok(c: &Client, tool: &str, args: Value) -> Value {
    let r = call(c, tool, args.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {args} failed: {e}"));
    assert_ne!(r.is_error, Some(true), "{tool} {args}: {r:?}");
    match r.structured_content {
        Some(v) => v,
        None => panic!("{tool} returned no structured content: {:?}", r.content),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_uses_every_tool_through_a_real_mcp_client() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    // a note written by the user through the CLI, before the agent connects
    h.ok(&[
        "add",
        "Caroline is researching adoption agencies for her future family",
        "--time",
        "2023-05-08T13:00:00Z",
    ]);

    let c = connect(&h, "test-agent").await;
    let info = c.peer_info().unwrap_or_else(|| panic!("no server info"));
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("kasten")
    );

    let tools = c
        .list_all_tools()
        .await
        .unwrap_or_else(|e| panic!("tools/list: {e}"));
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "add_memory",
            "ask_memory",
            "link_notes",
            "list_recent",
            "read_note",
            "search_memory"
        ]
    );
    for t in &tools {
        assert!(
            t.description.as_deref().is_some_and(|d| d.len() > 20),
            "{} lacks a description",
            t.name
        );
    }

    // add_memory: saved, queued for enrichment, attributed to the client
    let added = ok(
        &c,
        "add_memory",
        json!({"content": "Melanie painted a sunrise over the lake with her kids", "time": "2023-07-02"}),
    )
    .await;
    let id = added["id"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        added["source"].as_str(),
        Some("mcp:test-agent:1"),
        "{added}"
    );
    assert_eq!(added["created_at"].as_str(), Some("2023-07-02T00:00:00Z"));
    let pottery = ok(
        &c,
        "add_memory",
        json!({"content": "Melanie signed up for a pottery class in August"}),
    )
    .await["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // link_notes: an accepted link attributed to the agent, visible to read_note
    let linked = ok(
        &c,
        "link_notes",
        json!({"from": pottery, "to": id, "kind": "follows", "reason": "both of Melanie's crafts"}),
    )
    .await;
    assert!(
        linked["link"].as_str().is_some_and(|l| !l.is_empty()),
        "{linked}"
    );
    let read = ok(&c, "read_note", json!({"id": pottery})).await;
    let link = read["links"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["to"] == id.as_str()).cloned())
        .unwrap_or_default();
    assert_eq!(
        (
            link["kind"].as_str(),
            link["created_by"].as_str(),
            link["status"].as_str()
        ),
        (Some("follows"), Some("agent:test-agent"), Some("accepted")),
        "{read}"
    );
    let e = call(
        &c,
        "link_notes",
        json!({"from": pottery, "to": id, "kind": "likes"}),
    )
    .await
    .expect_err("an unknown kind is an error");
    assert!(e.contains("not a link kind"), "{e}");

    // search_memory: hits with provenance
    let found = ok(
        &c,
        "search_memory",
        json!({"query": "painting at the lake", "k": 3}),
    )
    .await;
    let hits = found["hits"].as_array().cloned().unwrap_or_default();
    assert!(!hits.is_empty() && hits.len() <= 3, "{found}");
    let top = &hits[0];
    assert_eq!(top["id"].as_str(), Some(id.as_str()), "{found}");
    assert_eq!(top["source"].as_str(), Some("mcp:test-agent:1"));
    assert!(top["via"].as_array().is_some_and(|v| !v.is_empty()));
    for field in ["content", "score", "created_at"] {
        assert!(top.get(field).is_some(), "hit lacks {field}: {top}");
    }

    // read_note: the note with its links
    let note = ok(&c, "read_note", json!({"id": id})).await;
    assert_eq!(
        note["note"]["content"].as_str(),
        Some("Melanie painted a sunrise over the lake with her kids")
    );
    assert!(note["links"].is_array(), "{note}");

    // list_recent: newest first, all three notes
    let recent = ok(&c, "list_recent", json!({"limit": 10})).await;
    assert_eq!(recent["total"].as_u64(), Some(3), "{recent}");
    assert_eq!(recent["notes"].as_array().map(Vec::len), Some(3));

    // ask_memory: an answer with citations from the fake LLM
    let answer = ok(
        &c,
        "ask_memory",
        json!({"question": "What did Melanie paint?"}),
    )
    .await;
    assert!(
        answer["answer"].as_str().is_some_and(|a| !a.is_empty()),
        "{answer}"
    );
    let cited = answer["citations"].as_array().cloned().unwrap_or_default();
    assert!(!cited.is_empty(), "no citations: {answer}");
    // the fake model cites: the citations are its own, not read back from the words
    assert_eq!(answer["citations_inferred"], false, "{answer}");
    let all_ids: Vec<String> = recent["notes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for c in &cited {
        assert!(
            all_ids.iter().any(|i| Some(i.as_str()) == c.as_str()),
            "cited a note that does not exist: {c}"
        );
    }

    // errors are MCP errors with readable messages
    let e = call(&c, "read_note", json!({"id": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"}))
        .await
        .expect_err("an unknown id is an error");
    assert!(e.contains("no note with id"), "{e}");
    let e = call(&c, "add_memory", json!({"content": "   "}))
        .await
        .expect_err("empty content is an error");
    assert!(e.contains("empty"), "{e}");
    let e = call(
        &c,
        "add_memory",
        json!({"content": "x", "time": "yesterday"}),
    )
    .await
    .expect_err("a bad time is an error");
    assert!(e.contains("yesterday"), "{e}");
    let e = call(&c, "search_memory", json!({"query": " "}))
        .await
        .expect_err("an empty query is an error");
    assert!(e.contains("empty"), "{e}");

    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
    // the server released the memory: the CLI can open it and sees the agent's notes
    let mut ok_after = false;
    for _ in 0..100 {
        let out = h.run(&["--json", "show", &id]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            assert_eq!(v["source"].as_str(), Some("mcp:test-agent:1"));
            ok_after = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        ok_after,
        "the memory stayed locked after the MCP client left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_llm_ask_memory_says_why_and_the_rest_works() {
    let h = Home::new();
    let c = connect(&h, "agent two").await;
    ok(
        &c,
        "add_memory",
        json!({"content": "The deploy key lives in the vault"}),
    )
    .await;
    let e = call(
        &c,
        "ask_memory",
        json!({"question": "Where is the deploy key?"}),
    )
    .await
    .expect_err("no LLM");
    assert!(e.to_lowercase().contains("llm"), "{e}");
    let found = ok(&c, "search_memory", json!({"query": "deploy key"})).await;
    assert_eq!(
        found["hits"][0]["source"].as_str(),
        Some("mcp:agent two:1"),
        "{found}"
    );
    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
}

/// `add_memory` says whether the note was merged into one already there, and into which;
/// a correction of a note is not merged into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_memory_says_when_a_note_was_merged_and_into_which() {
    let h = Home::new();
    let c = connect(&h, "agent three").await;
    let first = ok(
        &c,
        "add_memory",
        json!({"content": "The deploy script for the staging servers requires sudo"}),
    )
    .await;
    assert_eq!(first["merged"], json!(false), "{first}");
    assert!(first["merged_into"].is_null(), "{first}");
    let again = ok(
        &c,
        "add_memory",
        json!({"content": "The deploy script for the staging servers requires sudo!"}),
    )
    .await;
    assert_eq!(again["merged"], json!(true), "{again}");
    assert_eq!(again["merged_into"], first["id"], "{again}");
    let correction = ok(
        &c,
        "add_memory",
        json!({"content": "The deploy script for the staging servers no longer requires sudo"}),
    )
    .await;
    assert_eq!(correction["merged"], json!(false), "{correction}");
    assert!(correction["merged_into"].is_null(), "{correction}");
    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
}

/// An agent that disconnects while a tool call still waits for a slow LLM: the server
/// stops the call before it writes anything, closes the store and exits 0 at once,
/// instead of giving up on the memory after 10 s with an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_during_a_slow_answer_still_closes_the_memory() {
    let fake = FakeServer::start("slow:120000");
    let h = Home::with_llm(&fake.openai_url());
    h.ok(&[
        "add",
        "Melanie painted a sunrise over the lake with her kids",
    ]);

    let mut cmd = tokio::process::Command::from(h.cmd(&["mcp"]));
    cmd.env("KASTEN_LLM_TIMEOUT", "600")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start kasten mcp: {e}"));
    let (Some(stdout), Some(stdin), Some(mut stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        panic!("no pipes")
    };
    let c = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("leaving-agent", "1.0"),
    )
    .serve((stdout, stdin))
    .await
    .unwrap_or_else(|e| panic!("initialize failed: {e}"));
    let peer = c.peer().clone();
    let before = fake.request_count();
    let asking = tokio::spawn(async move {
        let mut args = serde_json::Map::new();
        args.insert("question".into(), json!("What did Melanie paint?"));
        peer.call_tool(CallToolRequestParams::new("ask_memory").with_arguments(args))
            .await
    });
    // wait until the answer is being generated
    let t0 = std::time::Instant::now();
    while fake.request_count() <= before && t0.elapsed() < std::time::Duration::from_secs(60) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(fake.request_count() > before, "the LLM was never asked");

    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
    let left = std::time::Instant::now();
    let status = tokio::time::timeout(std::time::Duration::from_secs(8), child.wait())
        .await
        .unwrap_or_else(|_| panic!("kasten mcp still running 8 s after the client left"))
        .unwrap_or_else(|e| panic!("wait: {e}"));
    let mut err = String::new();
    let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut err).await;
    assert!(status.success(), "exit {status:?}; stderr:\n{err}");
    assert!(
        left.elapsed() < std::time::Duration::from_secs(8),
        "took {:?}",
        left.elapsed()
    );
    asking.abort();
    // the memory is free again and the note is there
    assert_eq!(h.all_ids().len(), 1);
}

/// The link `from -> to` as read_note shows it.
async fn link_of(c: &Client, from: &str, to: &str) -> Value {
    let read = ok(c, "read_note", json!({"id": from})).await;
    read["links"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["to"] == to).cloned())
        .unwrap_or_else(|| panic!("no link {from} -> {to}: {read}"))
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_is_annotated_and_a_read_only_agent_cannot_write() {
    let h = Home::new();
    let a = id_of(&h.json(&["add", "Mia starts at the bakery on Monday"]));
    let b = id_of(&h.json(&["add", "The bakery opens at six in the morning"]));
    let c = connect_with(&h, "reader", &["--read-only"]).await;

    let tools = c
        .list_all_tools()
        .await
        .unwrap_or_else(|e| panic!("tools/list: {e}"));
    assert_eq!(tools.len(), 6);
    for t in &tools {
        let v = serde_json::to_value(t).unwrap_or_default();
        let ann = &v["annotations"];
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(ann[hint].is_boolean(), "{} lacks {hint}: {v}", t.name);
        }
        let writes = matches!(t.name.as_ref(), "add_memory" | "link_notes");
        assert_eq!(ann["readOnlyHint"].as_bool(), Some(!writes), "{v}");
        // nothing an agent can do here deletes or overwrites, and nothing leaves the memory
        assert_eq!(ann["destructiveHint"].as_bool(), Some(false), "{v}");
        assert_eq!(ann["openWorldHint"].as_bool(), Some(false), "{v}");
    }

    // writes are refused, saying why; nothing was written
    let e = call(&c, "add_memory", json!({"content": "Mia likes rye bread"}))
        .await
        .expect_err("a read-only agent cannot add");
    assert!(e.contains("read-only"), "{e}");
    let e = call(&c, "link_notes", json!({"from": a, "to": b}))
        .await
        .expect_err("a read-only agent cannot link");
    assert!(e.contains("read-only"), "{e}");
    // reading works
    let found = ok(&c, "search_memory", json!({"query": "bakery"})).await;
    assert_eq!(found["hits"].as_array().map(Vec::len), Some(2), "{found}");
    let read = ok(&c, "read_note", json!({"id": a})).await;
    assert_eq!(read["links"].as_array().map(Vec::len), Some(0), "{read}");
    let recent = ok(&c, "list_recent", json!({})).await;
    assert_eq!(recent["total"].as_u64(), Some(2), "{recent}");
    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_link_review_an_agents_link_is_a_proposal_recorded_under_its_name() {
    let h = Home::new();
    h.ok(&["config", "set", "policy.links", "review"]);
    let a = id_of(&h.json(&["add", "Mia starts at the bakery on Monday"]));
    let b = id_of(&h.json(&["add", "The bakery opens at six in the morning"]));
    let c = connect(&h, "planner").await;

    let linked = ok(
        &c,
        "link_notes",
        json!({"from": a, "to": b, "reason": "both about the bakery"}),
    )
    .await;
    assert_eq!(linked["status"].as_str(), Some("proposed"), "{linked}");
    let link = link_of(&c, &a, &b).await;
    assert_eq!(
        (link["status"].as_str(), link["created_by"].as_str()),
        (Some("proposed"), Some("agent:planner")),
        "{link}"
    );
    // the same call again: the same proposal
    let again = ok(&c, "link_notes", json!({"from": a, "to": b})).await;
    assert_eq!(again["link"], linked["link"], "{again}");

    // a note the agent adds is recorded as its own
    let added = ok(
        &c,
        "add_memory",
        json!({"content": "Mia's shift at the bakery ends at two"}),
    )
    .await;
    let added = added["id"].as_str().unwrap_or_default().to_owned();

    // the user sees the proposal in Review and, in the history, which agent made it;
    // these commands go through the MCP server, which has the memory open
    let queue = h.json(&["proposals"]);
    let items = queue["items"].as_array().cloned().unwrap_or_default();
    assert!(
        items
            .iter()
            .any(|i| i["id"] == linked["link"] && i["status"] == "proposed"),
        "{queue:#}"
    );
    // Review filters by who made a proposal: this agent, any agent, or another one
    let mine = h.json(&["proposals", "--by", "agent:planner"]);
    let mine = mine["items"].as_array().cloned().unwrap_or_default();
    assert!(
        mine.len() == 1 && mine[0]["id"] == linked["link"] && mine[0]["by"] == "agent:planner",
        "{mine:#?}"
    );
    let agents = h.json(&["proposals", "--by", "agent"]);
    assert_eq!(
        agents["items"].as_array().map(Vec::len),
        Some(1),
        "{agents:#}"
    );
    let other = h.json(&["proposals", "--by", "agent:someone-else"]);
    assert_eq!(
        other["items"].as_array().map(Vec::len),
        Some(0),
        "{other:#}"
    );
    let llm = h.json(&["proposals", "--by", "llm"]);
    assert_eq!(llm["items"].as_array().map(Vec::len), Some(0), "{llm:#}");
    let hist = h.json(&["history", &a]);
    let entries = hist["history"].as_array().cloned().unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "propose_link" && e["actor"] == "agent:planner"),
        "{hist:#}"
    );
    let hist = h.json(&["history", &added]);
    assert_eq!(
        hist["history"][0]["actor"].as_str(),
        Some("agent:planner"),
        "{hist:#}"
    );
    // accepted by the user, it is a link like any other
    let link_id = linked["link"].as_str().unwrap_or_default();
    h.ok(&["accept", link_id]);
    let link = link_of(&c, &a, &b).await;
    assert_eq!(link["status"].as_str(), Some("accepted"), "{link}");
    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_propose_only_agent_proposes_links_and_cannot_add_notes() {
    // links are accepted at once for other agents (policy auto)
    let h = Home::new();
    let a = id_of(&h.json(&["add", "Mia starts at the bakery on Monday"]));
    let b = id_of(&h.json(&["add", "The bakery opens at six in the morning"]));
    let full = connect(&h, "owner-agent").await;
    // this one goes through the first server, which has the memory open
    let c = connect_with(&h, "cautious", &["--propose-only"]).await;

    let e = call(&c, "add_memory", json!({"content": "Mia likes rye bread"}))
        .await
        .expect_err("a propose-only agent cannot add a note");
    assert!(e.contains("propose-only"), "{e}");
    let linked = ok(&c, "link_notes", json!({"from": a, "to": b})).await;
    assert_eq!(linked["status"].as_str(), Some("proposed"), "{linked}");
    let link = link_of(&full, &a, &b).await;
    assert_eq!(link["status"].as_str(), Some("proposed"), "{link}");
    let hist = h.json(&["history", &b]);
    let entries = hist["history"].as_array().cloned().unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "propose_link" && e["actor"] == "agent:cautious"),
        "{hist:#}"
    );
    // the full agent's link is accepted, and recorded under its name
    let direct = ok(
        &full,
        "link_notes",
        json!({"from": b, "to": a, "kind": "elaborates"}),
    )
    .await;
    assert_eq!(direct["status"].as_str(), Some("accepted"), "{direct}");
    let hist = h.json(&["history", &a]);
    let entries = hist["history"].as_array().cloned().unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "link" && e["actor"] == "agent:owner-agent"),
        "{hist:#}"
    );
    c.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
    full.cancel().await.unwrap_or_else(|e| panic!("close: {e}"));
}

/// The rent example over MCP: `search_memory` says which note replaced which (and since
/// when), `as_of` returns what was current on a day, `read_note` gives the validity — the
/// same from the process that has the memory open and from one that reaches it through
/// that process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_memory_marks_replaced_notes_and_answers_as_of_a_day() {
    let h = Home::new();
    let owner = connect(&h, "owner agent").await;
    let add = |content: &'static str, time: &'static str| {
        let owner = &owner;
        async move {
            id_of(
                &ok(
                    owner,
                    "add_memory",
                    json!({"content": content, "time": time}),
                )
                .await,
            )
        }
    };
    add("The landlord is called Anna Virtanen.", "2026-02-01").await;
    let old = add("Our rent is 1,200 euros a month.", "2026-03-01").await;
    // noted in March, true from September
    let new = add("From September the rent is 1,300 euros.", "2026-03-10").await;
    let client = connect(&h, "client agent").await;
    let ids = |v: &Value| -> Vec<String> {
        v["hits"]
            .as_array()
            .map(|a| a.iter().map(id_of).collect())
            .unwrap_or_default()
    };
    let hit = |v: &Value, id: &str| -> Value {
        v["hits"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["id"] == id).cloned())
            .unwrap_or_else(|| panic!("no hit {id} in {v}"))
    };
    let mut seen = Vec::new();
    for c in [&owner, &client] {
        let q = json!({"query": "how much is the rent", "k": 5});
        let today = ok(c, "search_memory", q).await;
        let order = ids(&today);
        let pos = |id: &str| order.iter().position(|x| x == id);
        assert!(pos(&new).unwrap() < pos(&old).unwrap(), "{today}");
        let by = &hit(&today, &old)["superseded_by"];
        assert_eq!(by["id"], json!(new), "{today}");
        assert_eq!(by["since"], "2026-09-01T00:00:00Z", "{today}");
        assert!(
            by["reason"].as_str().unwrap_or("").contains("1,300"),
            "{by}"
        );
        assert!(hit(&today, &new).get("superseded_by").is_none(), "{today}");
        assert_eq!(hit(&today, &new)["valid_from"], "2026-09-01T00:00:00Z");
        assert_eq!(hit(&today, &old)["valid_from"], "2026-03-01T00:00:00Z");
        let june = ok(
            c,
            "search_memory",
            json!({"query": "how much is the rent", "k": 5, "as_of": "2026-06-30"}),
        )
        .await;
        assert_eq!(ids(&june).first(), Some(&old), "{june}");
        assert!(!ids(&june).contains(&new), "{june}");
        assert!(hit(&june, &old).get("superseded_by").is_none(), "{june}");
        let bad = call(
            c,
            "search_memory",
            json!({"query": "rent", "as_of": "30.06.2026"}),
        )
        .await;
        let text = match bad {
            Err(e) => e,
            Ok(r) => format!("{r:?}"),
        };
        assert!(text.contains("YYYY-MM-DD"), "{text}");
        let read = ok(c, "read_note", json!({"id": old})).await;
        assert_eq!(read["valid_from"], "2026-03-01T00:00:00Z", "{read}");
        assert_eq!(read["valid_until"], "2026-09-01T00:00:00Z", "{read}");
        assert_eq!(read["superseded_by"]["id"], json!(new), "{read}");
        let read = ok(c, "read_note", json!({"id": new})).await;
        assert!(read["valid_until"].is_null(), "{read}");
        seen.push((order, ids(&june)));
    }
    assert_eq!(seen[0], seen[1], "both paths answer alike");
    client
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
    owner
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
}
