//! Agents and commands working on one memory through the process that has it open.

use super::*;

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

/// `kasten consolidate` while another process has the memory open runs in that process's
/// engine, in parts with progress, and files the same proposals as alone: imported facts
/// were never compared, consolidation finds the replaced rent and chairperson once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidate_goes_through_the_owner() {
    let h = Home::new();
    let lines: String = [
        ("Our rent is 1,200 euros a month.", "2026-03-01"),
        ("We pay 40 euros a month for electricity.", "2026-01-02"),
        ("The chairperson of Fatah is Mahmoud Abbas.", "2026-01-03"),
        ("From September the rent is 1,300 euros.", "2026-09-01"),
        ("The chairperson of Fatah is Yasser Arafat.", "2026-02-03"),
    ]
    .iter()
    .map(|(t, d)| format!("{}\n", json!({ "content": t, "time": d })))
    .collect();
    let file = h.file("facts.jsonl", lines.as_bytes());
    h.ok(&["import", &file.to_string_lossy(), "--format", "jsonl"]);
    let (owner, _) = mcp(&h, "agent", None).await;
    wait_for_owner(&h);
    let s = h.json(&["consolidate", "--batch", "2"]);
    assert_eq!(
        (&s["scanned"], &s["proposed"], &s["finished"], &s["total"]),
        (&json!(5), &json!(2), &json!(true), &json!(5)),
        "{s:#}"
    );
    let again = h.json(&["consolidate"]);
    assert_eq!(
        (&again["proposed"], &again["already_known"]),
        (&json!(0), &json!(2)),
        "{again:#}"
    );
    // the owner's engine holds the proposals
    let q = h.json(&["proposals", "--by", "merge"]);
    let filed = q["items"]
        .as_array()
        .map(|a| a.iter().filter(|i| i["label"] == "supersedes").count())
        .unwrap_or_default();
    assert_eq!(filed, 2, "{q:#}");
    // a listing larger than one call serves comes in pages
    let all = h.json(&["list", "--limit", "1000000"]);
    assert_eq!(all["notes"].as_array().map(Vec::len), Some(5), "{all:#}");
    let too_many = h.run(&["proposals", "--limit", "10001"]);
    assert_eq!(too_many.status.code(), Some(1), "{too_many:?}");
    assert!(
        String::from_utf8_lossy(&too_many.stderr).contains("--limit is at most 10000"),
        "{too_many:?}"
    );
    drop(owner);
}
