//! The derived indexes after churn — deletes, user edits (re-embedded), enrichment with
//! neighbour evolution (re-embedded), and a model switch (notes whose vectors came from
//! another model are re-embedded at open) — agree with a brute-force scan of what the
//! store holds: vector rankings against exact cosine over the stored embeddings, keyword
//! hits against a scan of every note's indexed text.

use std::collections::{HashMap, HashSet};

use kasten_tests::{FakeServer, Home, record_key};

/// Stop words only: the keyword index has nothing for these, so a search for one of them
/// ranks by the vector index alone.
const PROBES: [&str; 6] = [
    "what would they have been doing there before then",
    "which of them was it and why were we there",
    "she would have it that so if he could",
    "whom did you and yours do it for",
    "we could be here after all of those",
    "when were they at that and who was with them",
];
/// A word that occurs only where the test puts it.
const TOKEN: &str = "zqvortex";

fn b64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
    for v in s.bytes().filter_map(val) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Stored embeddings of active notes, by id.
fn vectors(tables: &serde_json::Value) -> HashMap<String, Vec<f32>> {
    tables["note"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["status"].as_str() == Some("active"))
        .map(|n| {
            let bytes = b64(n["embedding"]["$bytes"].as_str().unwrap_or_default());
            let v: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            assert_eq!(v.len(), 384, "{}", n["id"]);
            (record_key(&n["id"]).unwrap_or_default(), v)
        })
        .collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Each probe's search ranks exactly as cosine over the stored vectors does.
fn check_vector_rankings(h: &Home, tables: &serde_json::Value) -> usize {
    let vecs = vectors(tables);
    let mut checked = 0;
    for n in tables["note"].as_array().into_iter().flatten() {
        let content = n["content"].as_str().unwrap_or_default();
        let untouched = n["keywords"] == serde_json::json!([])
            && n["tags"] == serde_json::json!([])
            && n["context"].as_str().unwrap_or("").is_empty();
        if !PROBES.contains(&content) || !untouched {
            continue; // annotated notes are embedded with more than their content
        }
        let id = record_key(&n["id"]).unwrap_or_default();
        let q = &vecs[&id];
        let mut exact: Vec<(f32, &String)> = vecs.iter().map(|(i, v)| (dot(q, v), i)).collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0));
        let r = h.json(&["search", content, "-k", "10"]);
        let hits = r["hits"].as_array().cloned().unwrap_or_default();
        assert_eq!(hits.len(), 10, "{r}");
        for (i, hit) in hits.iter().enumerate() {
            let hid = hit["id"].as_str().unwrap_or_default();
            assert_eq!(
                hit["via"],
                serde_json::json!(["vector"]),
                "{content}: {hit}"
            );
            let cos = vecs
                .get(hid)
                .map(|v| dot(q, v))
                .unwrap_or_else(|| panic!("hit {hid} is not an active note in the store"));
            // the i-th hit has the i-th best cosine (ties within float noise either way)
            assert!(
                (cos - exact[i].0).abs() < 1e-3,
                "{content}: hit {i} is {hid} (cos {cos}), brute force has {} (cos {})",
                exact[i].1,
                exact[i].0
            );
        }
        checked += 1;
    }
    checked
}

/// Notes found by keyword for TOKEN are exactly those whose indexed text has it.
fn check_keyword_hits(h: &Home, tables: &serde_json::Value) -> usize {
    let mut want = HashSet::new();
    let mut active = 0;
    for n in tables["note"].as_array().into_iter().flatten() {
        if n["status"].as_str() != Some("active") {
            continue;
        }
        active += 1;
        let text = format!(
            "{} {} {} {}",
            n["content"].as_str().unwrap_or_default(),
            n["keywords"],
            n["tags"],
            n["context"].as_str().unwrap_or_default()
        );
        if text.to_lowercase().contains(TOKEN) {
            want.insert(record_key(&n["id"]).unwrap_or_default());
        }
    }
    let r = h.json(&["search", TOKEN, "-k", &active.to_string()]);
    let got: HashSet<String> = r["hits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|hit| {
            hit["via"]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x == "keyword"))
        })
        .filter_map(|hit| hit["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(got, want, "keyword hits for {TOKEN}");
    want.len()
}

#[test]
fn indexes_after_churn_match_brute_force_over_the_store() {
    let fake = FakeServer::start("normal");
    let h = Home::with_llm(&fake.openai_url());
    // links only proposed: searches are not expanded, rankings stay comparable
    h.ok(&["config", "set", "policy.links", "review"]);
    let topics = [
        "the pottery class",
        "a new guitar",
        "the marathon",
        "a sunset over the lake",
        "the dance studio",
        "a science fiction novel",
        "the farmers market",
        "a broken bicycle",
    ];
    let mut lines = String::new();
    for i in 0..90 {
        let mut content = format!("Note {i}: Sam talked about {}", topics[i % topics.len()]);
        if i % 9 == 0 {
            content.push_str(&format!(" and the {TOKEN} project"));
        }
        // one source each and three hours apart: no note is another's context
        let hour = i * 3;
        lines.push_str(&format!(
            "{{\"content\": \"{content}\", \"source\": \"doc{i}\", \"time\": \"2024-01-{:02}T{:02}:00:00Z\"}}\n",
            1 + hour / 24,
            hour % 24
        ));
    }
    for (i, p) in PROBES.iter().enumerate() {
        lines.push_str(&format!("{{\"content\": \"{p}\", \"source\": \"probe{i}\", \"time\": \"2024-03-{:02}T00:00:00Z\"}}\n", i + 1));
    }
    let f = h.file("notes.jsonl", lines.as_bytes());
    h.ok(&[
        "import",
        f.to_str().unwrap_or_default(),
        "--format",
        "jsonl",
    ]);
    let dump = h.dump();
    let ids: Vec<(String, String)> = dump["note"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                record_key(&n["id"]).unwrap_or_default(),
                n["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let by_number = |k: usize| {
        ids.iter()
            .find(|(_, c)| c.starts_with(&format!("Note {k}:")))
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("note {k}"))
    };
    // deletes: every eighth note (some carry the token)
    for k in (0..90).step_by(8) {
        h.ok(&["delete", &by_number(k)]);
    }
    // user edits: annotations change, the note is re-embedded; some gain the token
    for k in [1, 2, 3, 4, 6, 7] {
        let kw = if k % 2 == 0 { TOKEN } else { "errand" };
        h.ok(&[
            "edit",
            &by_number(k),
            "--keywords",
            kw,
            "--context",
            "edited by hand",
        ]);
    }
    // enrichment: new notes annotated, neighbours evolved and re-embedded
    for t in [
        "Sam finished the marathon in the rain",
        "Sam fixed the broken bicycle",
    ] {
        let v = h.json(&["add", t, "--wait"]);
        assert_eq!(v["enrich_state"].as_str(), Some("done"), "{v:#}");
    }
    let tables = h.dump();
    let evolved = tables["revision"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["reason"].as_str() == Some("evolution"))
        .count();
    assert!(evolved > 0, "the enrichment evolved neighbours");
    let probes = check_vector_rankings(&h, &tables);
    assert!(probes >= 3, "only {probes} probes left unannotated");
    let with_token = check_keyword_hits(&h, &tables);
    assert!(with_token >= 5);

    // model switch: a third of the notes carry vectors of a retired model (or none)
    let backup = h.dir.path().join("switch.json");
    h.ok(&["backup", backup.to_str().unwrap_or_default()]);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&backup).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    let mut switched = 0;
    for (i, n) in doc["tables"]["note"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if i % 3 == 0
            && let Some(o) = n.as_object_mut()
        {
            o.insert("embed_model".into(), serde_json::json!("retired/model-v0"));
            o.remove("embedding");
            switched += 1;
        }
    }
    std::fs::write(&backup, doc.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let h2 = Home::with_llm(&fake.openai_url());
    h2.ok(&["restore", backup.to_str().unwrap_or_default()]);
    h2.ok(&["list"]); // opening re-embeds the switched notes
    let after = h2.dump();
    let (old, new) = (vectors(&tables), vectors(&after));
    assert_eq!(old.len(), new.len());
    for (id, v) in &new {
        // re-embedding the same text with the same model gives the same vector
        assert!(dot(v, &old[id]) > 0.9999, "{id} re-embedded differently");
    }
    for n in after["note"].as_array().into_iter().flatten() {
        assert_ne!(n["embed_model"].as_str(), Some("retired/model-v0"), "{n}");
    }
    let probes2 = check_vector_rankings(&h2, &after);
    assert_eq!(probes2, probes);
    assert_eq!(check_keyword_hits(&h2, &after), with_token);
    eprintln!(
        "index: {} active notes after 12 deletes, 6 edits, 2 enrichments ({evolved} evolutions) and {switched} re-embedded for a model switch; {probes} vector probes x 10 ranks and {with_token} keyword hits matched brute force, twice",
        new.len()
    );
}

/// Runs a search with the engine's log on and says whether the open read the indexes from
/// the snapshot (`true`) or rebuilt them (`false`); fails on anything else.
fn opened_from_snapshot(h: &Home) -> bool {
    let out = h
        .cmd(&["--json", "search", TOKEN, "-k", "5"])
        .env("KASTEN_LOG", "warn,kasten_engine=info,surrealkv=error")
        .output()
        .unwrap_or_else(|e| panic!("search: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "search failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    match (
        err.contains("read the indexes from the snapshot"),
        err.contains("rebuilding the indexes from the store"),
    ) {
        (true, false) => true,
        (false, true) => false,
        _ => panic!("the open said neither or both:\n{err}"),
    }
}

fn snapshot_lines(from: usize, n: usize, token: bool) -> String {
    let mut lines = String::new();
    for i in from..from + n {
        let mut content = format!("Note {i}: Kim wrote about harbour number {}", i * 7 % 61);
        if token {
            content.push_str(&format!(" and the {TOKEN} plan"));
        }
        let hour = i * 3;
        lines.push_str(&format!(
            "{{\"content\": \"{content}\", \"source\": \"s{i}\", \"time\": \"2024-02-{:02}T{:02}:00:00Z\"}}\n",
            1 + (hour / 24) % 28,
            hour % 24
        ));
    }
    lines
}

#[test]
fn a_snapshot_is_never_trusted_after_a_kill_or_damage() {
    use std::io::BufRead;
    let h = Home::new();
    let mut lines = snapshot_lines(0, 40, false);
    for (i, p) in PROBES.iter().enumerate() {
        lines.push_str(&format!("{{\"content\": \"{p}\", \"source\": \"probe{i}\", \"time\": \"2024-03-{:02}T00:00:00Z\"}}\n", i + 1));
    }
    let f = h.file("first.jsonl", lines.as_bytes());
    h.ok(&[
        "import",
        f.to_str().unwrap_or_default(),
        "--format",
        "jsonl",
    ]);
    let snapshot = h.dir.path().join("db").join("kasten-index.snapshot");
    assert!(snapshot.exists(), "the clean close wrote no snapshot");
    assert!(
        opened_from_snapshot(&h),
        "a clean close's snapshot was not used"
    );

    // kill -9 an import once it has acknowledged a batch: its notes are committed, the
    // snapshot on disk predates them
    let f = h.file("second.jsonl", snapshot_lines(100, 400, true).as_bytes());
    let mut child = h
        .cmd(&[
            "import",
            f.to_str().unwrap_or_default(),
            "--format",
            "jsonl",
            "--print-ids",
            "--batch",
            "10",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn import: {e}"));
    let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut acked = Vec::new();
    for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
        acked.push(l.trim().to_owned());
        if acked.len() >= 10 {
            break;
        }
    }
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    assert_eq!(acked.len(), 10, "the import acknowledged no batch");
    assert!(
        !opened_from_snapshot(&h),
        "a snapshot older than a write was used"
    );
    let tables = h.dump();
    let active = vectors(&tables).len();
    assert!(active >= 56, "{active} active notes");
    assert!(check_vector_rankings(&h, &tables) >= 3);
    // every acknowledged note carries the token: a stale index would miss them
    assert!(check_keyword_hits(&h, &tables) >= acked.len());
    // the close after that rebuild wrote a fresh snapshot
    assert!(opened_from_snapshot(&h));

    // damaged snapshots: rebuilt, the same answers, no panic
    for how in ["flip", "truncate", "empty"] {
        let mut bytes = std::fs::read(&snapshot).unwrap_or_else(|e| panic!("{e}"));
        match how {
            "flip" => {
                let i = bytes.len() / 2;
                bytes[i] ^= 0x10;
            }
            "truncate" => bytes.truncate(bytes.len() / 3),
            _ => bytes.clear(),
        }
        std::fs::write(&snapshot, bytes).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !opened_from_snapshot(&h),
            "{how}: a damaged snapshot was used"
        );
        assert!(check_vector_rankings(&h, &tables) >= 3, "{how}");
        assert!(check_keyword_hits(&h, &tables) >= acked.len(), "{how}");
    }
    eprintln!(
        "snapshot: {active} notes; after kill -9 of an import ({} acknowledged) and 3 kinds of damage the open rebuilt and matched brute force",
        acked.len()
    );
}
