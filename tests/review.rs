//! Review, history and rollback through the CLI (`proposals`, `accept`, `reject`,
//! `rollback`, `reapply`, `history`, `edit`), against `kasten-fakellm`.
#![allow(clippy::panic)] // test helpers fail loudly

use kasten_tests::{FakeServer, Home};

fn ids(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn review_rollback_and_history_round_trip() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    let s = h.json(&["add", "Caroline plans a trip to Berlin in May", "--wait"])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let before = h.json(&["show", &s]);
    h.json(&["add", "Caroline booked flights to Berlin", "--wait"]);
    h.json(&["add", "Caroline cancelled the Berlin flights", "--wait"]);

    // auto policy: everything is applied and waits for review
    let queue = h.json(&["proposals"]);
    let items = queue["items"].as_array().cloned().unwrap_or_default();
    assert!(
        items.iter().any(|i| i["kind"] == "link") && items.iter().any(|i| i["kind"] == "edit"),
        "{queue:#}"
    );
    assert!(items.iter().all(|i| i["status"] == "applied"));

    // rolling back the older event is refused (a later one changed the same fields)
    let events = h.json(&["events"]);
    let evs = ids(&events, "events"); // newest first
    let out = h.run(&["rollback", &evs[1]]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot be rolled back") && err.contains(&evs[0]),
        "{err}"
    );
    // newest first works, and restores the first note exactly
    for ev in &evs[..2] {
        let r = h.json(&["rollback", ev]);
        assert_eq!(r["action"].as_str(), Some("rollback_event"), "{r:#}");
    }
    let after = h.json(&["show", &s]);
    for f in ["keywords", "tags", "context"] {
        assert_eq!(after[f], before[f], "{f} not restored");
    }
    assert!(
        after["links"]
            .as_array()
            .is_some_and(|l| l.iter().all(|x| x["status"] != "accepted")),
        "{after:#}"
    );

    // re-apply, then a user edit, all in the history with actor and reason
    h.json(&["reapply", &evs[1]]);
    let e = h.json(&[
        "edit",
        &s,
        "--tags",
        "travel, berlin",
        "--context",
        "Trip planning",
    ]);
    assert_eq!(e["revisions"].as_u64(), Some(1));
    let shown = h.json(&["show", &s]);
    assert_eq!(shown["tags"], serde_json::json!(["travel", "berlin"]));
    let hist = h.json(&["history", &s]);
    let actions: Vec<&str> = hist["history"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["action"].as_str()).collect())
        .unwrap_or_default();
    for a in [
        "created",
        "construction",
        "evolution",
        "rollback",
        "reapply",
        "edit",
    ] {
        assert!(actions.contains(&a), "history lacks {a}: {actions:?}");
    }
    assert!(hist["history"].as_array().is_some_and(|a| {
        a.iter()
            .all(|x| x["actor"].as_str().is_some() && x["at"].as_str().is_some())
    }));

    // reject a link: it leaves the graph, and shows as rejected
    let links: Vec<String> = h.json(&["proposals", "--status", "applied"])["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| i["kind"] == "link")
                .filter_map(|i| i["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(l) = links.first() {
        h.json(&["reject", l]);
        let rejected = h.json(&["proposals", "--status", "rejected"]);
        assert!(ids(&rejected, "items").contains(l));
    }
    // unknown ids and bad statuses are clear errors
    let out = h.run(&["accept", "nosuchthing"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing with id nosuchthing"));
    let out = h.run(&["proposals", "--status", "maybe"]);
    assert_eq!(out.status.code(), Some(1));
}

/// Evolution is a list of operations, each with its own reason: the history of an evolved
/// neighbour says why each change was made, and what no operation named is still there.
#[test]
fn an_evolved_neighbour_says_why_each_change_was_made() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    let s = h.json(&["add", "Caroline plans a trip to Berlin in May", "--wait"])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let before = h.json(&["show", &s]);
    let second = h.json(&["add", "Caroline booked flights to Berlin", "--wait"])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    let hist = h.json(&["history", &s]);
    let entries = hist["history"].as_array().cloned().unwrap_or_default();
    let evolution: Vec<_> = entries
        .iter()
        .filter(|e| e["action"] == "evolution")
        .collect();
    assert_eq!(evolution.len(), 1, "{hist:#}");
    let ev = evolution[0];
    let changes = ev["changes"].as_array().cloned().unwrap_or_default();
    assert!(!changes.is_empty(), "{ev:#}");
    for c in &changes {
        let reason = c["reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty() && reason != "evolution", "{c:#}");
        assert!(c["op"].as_str().is_some_and(|o| o.contains('_')), "{c:#}");
    }
    assert_ne!(ev["reason"], "evolution", "{ev:#}");
    // the fake adds a tag from the new note; the keywords nobody named are untouched
    let after = h.json(&["show", &s]);
    assert_eq!(after["keywords"], before["keywords"]);
    for c in changes.iter().filter(|c| c["op"] == "add_tag") {
        assert!(
            after["tags"]
                .as_array()
                .is_some_and(|t| t.contains(&c["value"])),
            "{after:#}"
        );
    }

    // the new note's own tags were revised in the same call, and say why
    let hist2 = h.json(&["history", &second]);
    let construction = hist2["history"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["action"] == "construction").cloned())
        .unwrap_or_default();
    let own = construction["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        own.iter()
            .all(|c| c["op"].as_str().is_some_and(|o| o.ends_with("_tag"))
                && !c["reason"].as_str().unwrap_or_default().is_empty()),
        "{construction:#}"
    );

    // the text history shows each change with its reason
    let out = h.run(&["history", &s]);
    let text = String::from_utf8_lossy(&out.stdout);
    let first = changes[0]["reason"].as_str().unwrap_or_default();
    assert!(text.contains(first), "{text}");
}

/// `kasten both-true`: a supersession proposal settled as "both stay true" leaves the queue,
/// is recorded in both notes' history, and other links are refused.
#[test]
fn both_true_settles_a_supersession_proposal() {
    let h = Home::new();
    h.ok(&["config", "set", "policy.links", "review"]);
    let old = h.json(&[
        "add",
        "--time",
        "2026-03-01T09:00:00Z",
        "Our rent is 1,200 euros a month.",
    ])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let new = h.json(&[
        "add",
        "--time",
        "2026-03-10T09:00:00Z",
        "From September the rent is 1,300 euros.",
    ])["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let queue = h.json(&["proposals"]);
    let items = queue["items"].as_array().cloned().unwrap_or_default();
    let item = items
        .iter()
        .find(|i| i["label"] == "supersedes")
        .unwrap_or_else(|| panic!("no supersession proposed: {queue:#}"));
    assert_eq!(
        (item["note"].as_str(), item["target"].as_str()),
        (Some(new.as_str()), Some(old.as_str()))
    );
    let id = item["id"].as_str().unwrap_or_default().to_owned();
    let out = h.json(&["both-true", &id]);
    assert_eq!(out["action"].as_str(), Some("both_true"), "{out:#}");
    let queue = h.json(&["proposals"]);
    assert!(
        queue["items"]
            .as_array()
            .is_none_or(|a| a.iter().all(|i| i["id"] != id.as_str())),
        "{queue:#}"
    );
    let shown = h.json(&["show", &old]);
    assert!(shown["superseded_by"].is_null(), "{shown:#}");
    let history = h.json(&["history", &new]);
    assert!(history.to_string().contains("both_true"), "{history:#}");
    // a decision is final
    assert!(!h.run(&["both-true", &id]).status.success());
}
