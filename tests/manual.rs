//! Links and text edits made by hand through the CLI (`link`, `unlink`, `edit --content`):
//! in history, rolled back exactly, and the edited note enriched again (against
//! `kasten-fakellm`).
#![allow(clippy::panic)] // test helpers fail loudly

use kasten_tests::{FakeServer, Home};

fn id(v: &serde_json::Value) -> String {
    v["id"].as_str().unwrap_or_default().to_owned()
}

fn accepted_links(h: &Home, note: &str) -> Vec<serde_json::Value> {
    h.json(&["show", note])["links"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter(|x| x["status"] == "accepted")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn history_actions(h: &Home, note: &str) -> Vec<(String, String)> {
    h.json(&["history", note])["history"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["action"].as_str().unwrap_or_default().to_owned(),
                        e["id"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_link_by_hand_shows_in_history_and_rollback_removes_it() {
    let h = Home::new();
    let a = id(&h.json(&["add", "Tea grows on the slopes of Darjeeling"]));
    let b = id(&h.json(&["add", "北京的茶馆很安静"]));

    let out = h.json(&[
        "link",
        &a,
        &b,
        "--kind",
        "supports",
        "--reason",
        "both about tea",
    ]);
    assert_eq!(out["action"], "link", "{out:#}");
    let link = out["target"].as_str().unwrap_or_default().to_owned();
    let links = accepted_links(&h, &a);
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0]["kind"], "supports");
    assert_eq!(links[0]["reason"], "both about tea");
    assert_eq!(links[0]["created_by"], "user");
    for n in [&a, &b] {
        assert!(
            history_actions(&h, n).contains(&("link".into(), link.clone())),
            "the link is in the history of both notes"
        );
    }

    let r = h.json(&["rollback", &link]);
    assert_eq!(r["action"], "rollback", "{r:#}");
    assert!(accepted_links(&h, &a).is_empty());
    assert!(
        history_actions(&h, &a).contains(&("rollback".into(), link.clone())),
        "the rollback is in the history"
    );

    // unlink and reapply
    let again = h.json(&["link", &a, &b]);
    assert_eq!(accepted_links(&h, &b)[0]["kind"], "relates", "{again:#}");
    let un = h.json(&["unlink", &b, &a]);
    assert_eq!(un["links"].as_u64(), Some(1), "either direction: {un:#}");
    assert!(accepted_links(&h, &a).is_empty());
    let relates = again["target"].as_str().unwrap_or_default();
    h.json(&["reapply", relates]);
    assert_eq!(accepted_links(&h, &a).len(), 1);
    let text = h.ok(&["history", &a]);
    assert!(
        text.contains("unlink") && text.contains("reapply"),
        "{text}"
    );
}

#[test]
fn link_and_unlink_refuse_bad_input_in_words() {
    let h = Home::new();
    let a = id(&h.json(&["add", "one"]));
    let b = id(&h.json(&["add", "two"]));
    let cases: [(&[&str], &str); 5] = [
        (
            &["link", &a, &b, "--kind", "likes"],
            "'likes' is not a link kind",
        ),
        (&["link", &a, &a], "itself"),
        (
            &["link", &a, "01JZZZZZZZZZZZZZZZZZZZZZZZ"],
            "no note with id",
        ),
        (&["link", &a, "not an id!"], "id"),
        (&["unlink", &a, &b], "not linked"),
    ];
    for (args, expected) in cases {
        let out = h.run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    h.json(&["link", &a, &b]);
    let dup = h.run(&["link", &a, &b]);
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already linked"));
}

#[test]
fn editing_the_text_shows_a_diff_and_rollback_restores_it_exactly() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    let original = "The ferry to Lindau leaves at nine.\nBring the bikes.";
    let n = id(&h.json(&["add", original, "--wait"]));
    h.json(&["add", "Ferry timetables change in winter", "--wait"]);
    let events = h.json(&["events"])["events"].as_array().map_or(0, Vec::len);

    let edited = "The ferry to Bregenz leaves at ten.\nBring the bikes.\n  两辆自行车  ";
    let out = h.json(&["edit", &n, "--content", edited]);
    assert_eq!(out["action"], "edit_content", "{out:#}");
    let rev = out["target"].as_str().unwrap_or_default().to_owned();
    let shown = h.json(&["show", &n]);
    assert_eq!(shown["content"], edited.trim());
    assert_eq!(
        shown["enrich_state"], "pending",
        "queued for enrichment again: {shown:#}"
    );
    let hits = h.json(&["search", "Bregenz"]);
    assert_eq!(hits["hits"][0]["id"], n.as_str(), "re-indexed: {hits:#}");

    let hist = h.json(&["history", &n]);
    let entry = hist["history"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["id"] == rev.as_str()).cloned())
        .unwrap_or_default();
    assert_eq!(entry["content_before"], original);
    assert_eq!(entry["content_after"], edited.trim());
    let text = h.ok(&["history", &n]);
    assert!(
        text.contains("- The ferry to Lindau leaves at nine.")
            && text.contains("+ The ferry to Bregenz leaves at ten.")
            && text.contains("  Bring the bikes."),
        "{text}"
    );

    // enriched again: a new event, its changes in Review
    h.json(&["enrich"]);
    let after = h.json(&["events"])["events"].as_array().map_or(0, Vec::len);
    assert_eq!(after, events + 1);
    assert_eq!(h.json(&["show", &n])["enrich_state"], "done");

    let r = h.json(&["rollback", &rev]);
    assert_eq!(r["action"], "rollback", "{r:#}");
    assert_eq!(h.json(&["show", &n])["content"], original, "exactly");
    let hits = h.json(&["search", "Bregenz"]);
    assert!(
        hits["hits"]
            .as_array()
            .is_none_or(|a| a.iter().all(|x| x["content"] != edited.trim())),
        "{hits:#}"
    );
    let twice = h.run(&["rollback", &rev]);
    assert_eq!(twice.status.code(), Some(1));

    let empty = h.run(&["edit", &n, "--content", "  "]);
    assert!(String::from_utf8_lossy(&empty.stderr).contains("empty"));
    let both = h.run(&["edit", &n, "--content", "x", "--tags", "a"]);
    assert!(String::from_utf8_lossy(&both.stderr).contains("two separate edits"));
}
