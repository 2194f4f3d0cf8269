//! Import, export, backup and restore through the real `kasten` binary:
//! a Markdown vault in and out and in again, re-imports without duplicates, chat
//! transcripts, a generated 1,000-note vault with malformed files, and backup → restore
//! compared table by table.
#![allow(clippy::panic)] // test code fails loudly

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kasten_tests::{FakeServer, Home, kasten_bin};
use serde_json::Value;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
    }
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

/// A small Obsidian vault: front matter, aliases, folders, #tags, [[links]], an
/// attachment, the .obsidian folder and one file with broken front matter.
fn sample_vault(root: &Path) {
    write(
        root,
        "Rust.md",
        "---\ntags: [language]\naliases: [RustLang]\ncreated: 2024-02-01\n---\nA systems programming language without a garbage collector. See [[Tokio]] and [[Ownership|how memory works]].\n",
    );
    write(
        root,
        "libs/Tokio.md",
        "---\nkeywords: [runtime, async]\n---\n# Tokio\n\nAn asynchronous runtime for [[RustLang]]. #async\n![[diagram.png]]\n",
    );
    write(
        root,
        "concepts/Ownership.md",
        "Every value has one owner; borrowing is checked at compile time. Related: [[libs/Tokio]], [[Nowhere]].\n",
    );
    write(
        root,
        "journal/2024-03-02.md",
        "---\ndate: 2024-03-02T09:15:00Z\n---\nStarted reading the Tokio tutorial with #rust friends.\n",
    );
    write(
        root,
        "Broken.md",
        "---\ntags: [unclosed\ncontext: oops\n---\nThis file's front matter is not YAML.\n",
    );
    write(root, "diagram.png", "\u{89}PNG not really");
    write(root, ".obsidian/app.json", "{}");
    write(root, ".obsidian/workspace.md", "not a note");
}

/// Notes by content: (time, tags, keywords, context, source).
fn notes_by_content(h: &Home) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for id in h.all_ids() {
        let n = h.json(&["show", &id]);
        let content = n["content"].as_str().unwrap_or_default().to_owned();
        out.insert(
            content,
            serde_json::json!({
                "id": n["id"], "created_at": n["created_at"], "tags": n["tags"],
                "keywords": n["keywords"], "context": n["context"], "source": n["source"],
                "status": n["status"], "enrich_state": n["enrich_state"],
            }),
        );
    }
    out
}

/// Accepted links as (from content, to content, kind, reason).
fn links_by_content(h: &Home) -> BTreeSet<(String, String, String, String)> {
    let mut content = BTreeMap::new();
    let mut links = BTreeSet::new();
    let ids = h.all_ids();
    let shown: Vec<Value> = ids.iter().map(|id| h.json(&["show", id])).collect();
    for n in &shown {
        content.insert(
            n["id"].as_str().unwrap_or_default().to_owned(),
            n["content"].as_str().unwrap_or_default().to_owned(),
        );
    }
    for n in &shown {
        for l in n["links"].as_array().cloned().unwrap_or_default() {
            if l["status"].as_str() != Some("accepted") {
                continue;
            }
            let end = |k: &str| {
                content
                    .get(l[k].as_str().unwrap_or_default())
                    .cloned()
                    .unwrap_or_default()
            };
            links.insert((
                end("from"),
                end("to"),
                l["kind"].as_str().unwrap_or_default().to_owned(),
                l["reason"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    links
}

fn import_json(h: &Home, path: &Path, format: &str) -> Value {
    h.json(&[
        "import",
        path.to_str().unwrap_or_default(),
        "--format",
        format,
    ])
}

#[test]
fn markdown_vault_imports_once_and_export_imports_back_to_the_same_notes_and_links() {
    let fake = FakeServer::start("normal");
    let a = Home::with_llm(&fake.openai_url());
    let vault = a.dir.path().join("My Vault");
    sample_vault(&vault);

    let v = import_json(&a, &vault, "markdown");
    assert_eq!(v["created"].as_u64(), Some(4), "{v:#}");
    assert_eq!(v["attachments_skipped"].as_u64(), Some(1), "{v:#}");
    assert_eq!(v["hidden_skipped"].as_u64(), Some(1), "{v:#}"); // the .obsidian folder
    let problems = v["problems"].as_array().cloned().unwrap_or_default();
    assert_eq!(problems.len(), 1, "{v:#}");
    assert_eq!(problems[0]["file"].as_str(), Some("Broken.md"));
    assert!(
        problems[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("YAML")),
        "{v:#}"
    );
    // Rust→Tokio, Rust→Ownership, Tokio→Rust (alias), Ownership→Tokio (path), journal none
    assert_eq!(v["links_created"].as_u64(), Some(4), "{v:#}");
    assert_eq!(
        v["unresolved_links"].as_array().map(Vec::len),
        Some(1),
        "{v:#}"
    );

    // the front matter and inline tags reached the notes; links are accepted import links
    let by_content = notes_by_content(&a);
    let rust = by_content
        .iter()
        .find(|(c, _)| c.starts_with("# Rust\n\nA systems"))
        .map(|(_, n)| n.clone())
        .unwrap_or_else(|| panic!("Rust note missing: {by_content:#?}"));
    assert_eq!(rust["tags"], serde_json::json!(["language"]));
    assert_eq!(
        rust["created_at"].as_str(),
        Some("2024-02-01T00:00:00+00:00")
    );
    assert_eq!(rust["source"].as_str(), Some("My Vault/Rust.md"));
    let tokio_note = by_content
        .iter()
        .find(|(c, _)| c.starts_with("# Tokio"))
        .map(|(_, n)| n.clone())
        .unwrap_or_default();
    assert_eq!(
        tokio_note["keywords"],
        serde_json::json!(["runtime", "async"])
    );
    assert_eq!(tokio_note["tags"], serde_json::json!(["async"]));
    let rust_id = rust["id"].as_str().unwrap_or_default().to_owned();
    let shown = a.json(&["show", &rust_id]);
    let out_links: Vec<&Value> = shown["links"]
        .as_array()
        .map(|l| l.iter().filter(|l| l["from"] == rust["id"]).collect())
        .unwrap_or_default();
    assert_eq!(out_links.len(), 2, "{shown:#}");
    for l in out_links {
        assert_eq!(l["created_by"].as_str(), Some("import"));
        assert_eq!(l["status"].as_str(), Some("accepted"));
    }

    // importing the same vault again creates nothing
    let again = import_json(&a, &vault, "markdown");
    assert_eq!(again["created"].as_u64(), Some(0), "{again:#}");
    assert_eq!(again["existing"].as_u64(), Some(4));
    assert_eq!(again["links_created"].as_u64(), Some(0));
    assert_eq!(a.all_ids().len(), 4);

    // the LLM annotates and links; one note is archived; then export
    a.ok(&["enrich"]);
    let journal = by_content
        .iter()
        .find(|(c, _)| c.starts_with("# 2024-03-02"))
        .and_then(|(_, n)| n["id"].as_str().map(str::to_owned))
        .unwrap_or_default();
    a.ok(&["archive", &journal]);
    let before_notes = notes_by_content(&a);
    let before_links = links_by_content(&a);
    assert!(
        before_links.len() > 4,
        "enrichment should have added links: {before_links:#?}"
    );
    let out = a.dir.path().join("export");
    let e = a.json(&["export", out.to_str().unwrap_or_default()]);
    assert_eq!(e["files"].as_u64(), Some(4), "{e:#}");
    let rust_file = std::fs::read_to_string(out.join("Rust.md"))
        .unwrap_or_else(|e| panic!("Rust.md was not exported: {e}"));
    for field in [
        "kasten_id:",
        "created: 2024-02-01T00:00:00Z",
        "keywords: [",
        "tags: [",
        "context: ",
        "links:",
        "kind: ",
        "reason: ",
        "[[Tokio]]",
    ] {
        assert!(rust_file.contains(field), "{field} missing:\n{rust_file}");
    }
    // every note in a Box carries its label(s) in the front matter
    let boxes = a.json(&["boxes", "--recompute"]);
    let boxes = boxes.as_array().cloned().unwrap_or_default();
    assert!(!boxes.is_empty(), "the linked vault should form a Box");
    let names = e["names"].as_array().cloned().unwrap_or_default();
    let out2 = a.dir.path().join("export2");
    let e2 = a.json(&["export", out2.to_str().unwrap_or_default()]);
    assert_eq!(e2["files"].as_u64(), Some(4));
    for b in &boxes {
        let label = b["label"].as_str().unwrap_or_default();
        for m in b["members"].as_array().cloned().unwrap_or_default() {
            let file = names
                .iter()
                .find(|f| f["id"] == m)
                .and_then(|f| f["file"].as_str())
                .unwrap_or_else(|| panic!("member {m} was not exported"));
            let text = std::fs::read_to_string(out2.join(file)).unwrap_or_default();
            assert!(
                text.contains(&format!("box: \"{label}\""))
                    || text.contains(&format!("\"{label}\", "))
                    || text.contains(&format!(", \"{label}\"")),
                "{file} lacks its Box {label}:\n{text}"
            );
        }
    }
    // exporting into a folder that is not empty is refused
    let refused = a.run(&["export", out.to_str().unwrap_or_default()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not empty"));

    // a fresh memory imports the export: the same notes (ids too) and the same links
    let b = Home::new();
    let v = import_json(&b, &out, "markdown");
    assert_eq!(v["created"].as_u64(), Some(4), "{v:#}");
    assert_eq!(
        v["queued"].as_u64(),
        Some(0),
        "enriched notes need no enrichment"
    );
    assert!(v["problems"].as_array().is_some_and(Vec::is_empty), "{v:#}");
    assert_eq!(notes_by_content(&b), before_notes);
    assert_eq!(links_by_content(&b), before_links);
    // and the export imported into the memory it came from adds nothing
    let back = import_json(&a, &out, "markdown");
    assert_eq!(back["created"].as_u64(), Some(0), "{back:#}");
    assert_eq!(back["links_created"].as_u64(), Some(0), "{back:#}");
}

/// A title of 80 four-byte characters exports (its file name is cut by bytes), and a
/// vault where an exported note was copied and the copy edited imports: the copy is a
/// note of its own under a new id, the report says so, and importing again adds nothing.
#[test]
fn wide_titles_export_and_a_copied_export_imports_as_its_own_note() {
    let a = Home::new();
    let wide = "😀".repeat(80);
    a.ok(&["add", &wide]);
    a.ok(&["add", "The deploy script requires sudo"]);
    let out = a.dir.path().join("export");
    let e = a.json(&["export", out.to_str().unwrap_or_default()]);
    assert_eq!(e["files"].as_u64(), Some(2), "{e:#}");
    let names = e["names"].as_array().cloned().unwrap_or_default();
    let file_of = |needle: &str| -> String {
        names
            .iter()
            .filter_map(|f| f["file"].as_str())
            .find(|f| std::fs::read_to_string(out.join(f)).is_ok_and(|t| t.contains(needle)))
            .unwrap_or_else(|| panic!("no file holds {needle}: {e:#}"))
            .to_owned()
    };
    let wide_file = file_of(&wide);
    assert!(wide_file.len() <= 255, "{wide_file}");
    // a copy of an exported file, edited: it carries the same kasten_id
    let sudo = std::fs::read_to_string(out.join(file_of("requires sudo")))
        .unwrap_or_else(|e| panic!("{e}"));
    write(
        &out,
        "copy.md",
        &sudo.replace("requires sudo", "requires sudo on the build host"),
    );
    let b = Home::new();
    let v = import_json(&b, &out, "markdown");
    assert_eq!(v["created"].as_u64(), Some(3), "{v:#}");
    let new_ids = v["new_ids"].as_array().cloned().unwrap_or_default();
    assert_eq!(new_ids.len(), 1, "{v:#}");
    assert_eq!(new_ids[0]["file"].as_str(), Some("copy.md"), "{v:#}");
    let again = import_json(&b, &out, "markdown");
    assert_eq!(again["created"].as_u64(), Some(0), "{again:#}");
    assert_eq!(again["existing"].as_u64(), Some(3), "{again:#}");
}

/// Tags and wikilinks come from a note's text only: a link to a heading, code (indented,
/// fenced, inline), HTML and URLs name no tag and no note.
#[test]
fn markdown_import_takes_tags_and_links_from_text_not_code_or_urls() {
    let h = Home::new();
    let vault = h.dir.path().join("vault");
    write(&vault, "Setup.md", "How to set up the build. #build\n");
    write(
        &vault,
        "Guide.md",
        "A guide, [see](#setup) and [[Setup]] #guide.\n\n    #include <stdio.h>\n    [[Setup]] in code\n\n```\n#fenced [[Nope]]\n```\n\nInline `#inline` code, <a href=\"#html\">html</a>, <https://example.org/(#autolink)> and https://example.org/(#bare).\n",
    );
    let v = import_json(&h, &vault, "markdown");
    assert_eq!(v["created"].as_u64(), Some(2), "{v:#}");
    let notes = notes_by_content(&h);
    let guide = notes
        .iter()
        .find(|(c, _)| c.contains("A guide"))
        .map(|(_, n)| n.clone())
        .unwrap_or_else(|| panic!("no guide note: {notes:#?}"));
    assert_eq!(guide["tags"], serde_json::json!(["guide"]), "{guide:#}");
    let links = links_by_content(&h);
    assert_eq!(
        links.len(),
        1,
        "one [[Setup]] in text, none in code: {links:#?}"
    );
}

#[test]
fn chat_transcripts_import_once_with_problems_reported() {
    let h = Home::new();
    let f = h.file(
        "talk.json",
        br#"[
            {"role": "user", "content": "We moved the launch to the 14th of June", "time": "2024-05-03T10:00:00Z"},
            {"role": "assistant", "content": "Noted: launch on June 14.", "time": "2024-05-03T10:00:04Z"},
            {"role": "user", "content": ""},
            {"role": "user", "content": "Sam owns the release notes", "time": "2024-05-03T10:01:00Z"}
        ]"#,
    );
    let v = import_json(&h, &f, "chat");
    assert_eq!(v["created"].as_u64(), Some(3), "{v:#}");
    assert_eq!(v["problems"].as_array().map(Vec::len), Some(1), "{v:#}");
    let again = import_json(&h, &f, "chat");
    assert_eq!(again["created"].as_u64(), Some(0), "{again:#}");
    assert_eq!(h.all_ids().len(), 3);
    let hits = h.json(&["search", "who writes the release notes", "-k", "1"]);
    let top = &hits["hits"][0];
    assert_eq!(
        top["content"].as_str(),
        Some("user: Sam owns the release notes")
    );
    let shown = h.json(&["show", top["id"].as_str().unwrap_or_default()]);
    assert_eq!(shown["source"].as_str(), Some("talk.json:4"));
    assert_eq!(
        shown["created_at"].as_str(),
        Some("2024-05-03T10:01:00+00:00")
    );
    let bad = h.file("bad.json", b"{\"not\": \"a transcript\"}");
    let out = h.run(&[
        "import",
        bad.to_str().unwrap_or_default(),
        "--format",
        "chat",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a chat transcript"));
}

#[test]
fn json_lines_imported_twice_are_saved_once() {
    let h = Home::new();
    let f = h.file(
        "journal.jsonl",
        b"{\"content\": \"Bought a bike\", \"time\": \"2024-04-01\"}\n{\"content\": \"Rode to the lake\"}\n{\"content\": \"Made pancakes for breakfast with blueberries\"}\n{\"content\": \"turn 3\", \"source\": \"conv-1:D1:3\"}\n",
    );
    let v = import_json(&h, &f, "jsonl");
    assert_eq!(v["imported"].as_u64(), Some(4), "{v:#}");
    let again = import_json(&h, &f, "jsonl");
    assert_eq!(again["imported"].as_u64(), Some(0), "{again:#}");
    assert_eq!(h.all_ids().len(), 4);
    let sources: BTreeSet<String> = h
        .all_ids()
        .iter()
        .map(|id| {
            h.json(&["show", id])["source"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let want: BTreeSet<String> = [
        "journal.jsonl:1",
        "journal.jsonl:2",
        "journal.jsonl:3",
        "conv-1:D1:3",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(sources, want);
}

/// A vault of `n` notes, each linking to the next and to one further away, with
/// attachments and `bad` files whose front matter is malformed.
fn generated_vault(root: &Path, n: usize, bad: usize) -> usize {
    let mut links = 0;
    for i in 0..n {
        let next = (i + 1) % n;
        let far = (i * 7 + 3) % n;
        let mut body = format!(
            "---\ntags: [generated, topic-{}]\ncreated: 2024-01-01T00:{:02}:{:02}Z\n---\nNote {i} about topic {} and the number {}. Next: [[note-{next:04}]].",
            i % 13,
            (i / 60) % 60,
            i % 60,
            i % 13,
            i * i
        );
        links += 1;
        if far != i && far != next {
            body.push_str(&format!(" See also [[note-{far:04}|a far note]]."));
            links += 1;
        }
        write(root, &format!("d{}/note-{i:04}.md", i % 10), &body);
        if i % 100 == 0 {
            write(root, &format!("d{}/attachment-{i}.pdf", i % 10), "%PDF");
        }
    }
    for j in 0..bad {
        write(
            root,
            &format!("bad/broken-{j}.md"),
            "---\ntitle: \"unterminated\ntags: [x\n---\nbody\n",
        );
    }
    links
}

#[test]
fn a_generated_vault_of_1000_notes_imports_with_progress_and_nothing_lost() {
    let h = Home::new();
    let vault = h.dir.path().join("big");
    let expected_links = generated_vault(&vault, 1000, 3);

    // under a terminal the import draws a progress bar (stderr)
    let script_cmd = format!(
        "{} import {} --format markdown",
        kasten_bin().display(),
        vault.display()
    );
    let shown = std::process::Command::new("script")
        .args(["-qec", &script_cmd, "/dev/null"])
        .env("KASTEN_DB", h.db())
        .env("COLUMNS", "120")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("script: {e}"));
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "import under a terminal failed: {text}"
    );
    assert!(
        text.contains("importing") && text.contains("/1000"),
        "no progress bar:\n{text}"
    );
    for j in 0..3 {
        assert!(
            text.contains(&format!("bad/broken-{j}.md")),
            "broken-{j} not reported:\n{text}"
        );
    }
    assert!(text.contains("imported 1000 new note(s)"), "{text}");
    assert!(text.contains("skipped 10 attachment(s)"), "{text}");

    // nothing lost: every note, with its time and tags, and every link
    let ids = h.all_ids();
    assert_eq!(ids.len(), 1000);
    let again = import_json(&h, &vault, "markdown");
    assert_eq!(again["created"].as_u64(), Some(0), "{again}");
    assert_eq!(again["existing"].as_u64(), Some(1000));
    assert_eq!(
        again["links_existing"].as_u64(),
        Some(expected_links as u64)
    );
    assert_eq!(again["problems"].as_array().map(Vec::len), Some(3));
    let hits = h.json(&["search", "Note 617 about topic 6", "-k", "1"]);
    let top = &hits["hits"][0];
    assert!(
        top["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("# note-0617\n\nNote 617 about topic 6")),
        "{hits:#}"
    );
    let n = h.json(&["show", top["id"].as_str().unwrap_or_default()]);
    assert_eq!(n["created_at"].as_str(), Some("2024-01-01T00:10:17+00:00"));
    assert_eq!(n["tags"], serde_json::json!(["generated", "topic-6"]));
    let links = n["links"].as_array().cloned().unwrap_or_default();
    // out: 618 and 7*617+3 mod 1000 = 322; in: from 616 and from the notes whose far is 617
    let outgoing = links.iter().filter(|l| l["from"] == n["id"]).count();
    assert_eq!(outgoing, 2, "{n:#}");
    assert!(links.len() >= 3, "{n:#}");
}

/// Every table of a backup except the schema record (written by the migrations, with
/// its own time), as JSON text per table.
fn tables(file: &PathBuf) -> BTreeMap<String, Value> {
    let v: Value = serde_json::from_slice(
        &std::fs::read(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display())),
    )
    .unwrap_or_else(|e| panic!("backup is not JSON: {e}"));
    assert_eq!(v["format"].as_str(), Some("kasten-backup"));
    v["tables"]
        .as_object()
        .map(|t| {
            t.iter()
                .filter(|(k, _)| k.as_str() != "schema_version")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn backup_then_restore_reproduces_the_memory_exactly() {
    let fake = FakeServer::start("normal");
    let a = Home::with_llm(&fake.openai_url());
    for (i, t) in [
        "Caroline went to the LGBTQ support group and felt accepted",
        "Caroline is researching adoption agencies for her future family",
        "Melanie painted a sunrise over the lake with her kids",
        "Melanie and Caroline talked about adoption and painting classes",
        "Jon lost his banking job and wants to open a dance studio",
    ]
    .iter()
    .enumerate()
    {
        a.ok(&["add", t, "--time", &format!("2023-05-0{}T10:00:00Z", i + 1)]);
    }
    a.ok(&["enrich"]);
    // user edits, a rejected proposal and a rolled-back event: revisions, audit, statuses
    let events = a.json(&["events"]);
    let rolled = events["events"][0]["id"].as_str().is_some();
    assert!(rolled, "{events:#}");
    if let Some(ev) = events["events"].as_array().and_then(|e| e.first()) {
        a.ok(&["rollback", ev["id"].as_str().unwrap_or_default()]);
    }
    let ids = a.all_ids();
    a.ok(&["edit", &ids[0], "--tags", "family,adoption"]);
    let props = a.json(&["proposals"]);
    let items = props["items"]
        .as_array()
        .or_else(|| props.as_array())
        .cloned()
        .unwrap_or_default();
    if let Some(link) = items.iter().find(|i| i["kind"].as_str() == Some("link")) {
        a.ok(&["reject", link["id"].as_str().unwrap_or_default()]);
    }
    a.ok(&["add", "A note still waiting for the LLM"]);

    let b1 = a.dir.path().join("backup.json");
    let v = a.json(&["backup", b1.to_str().unwrap_or_default()]);
    for t in [
        "note", "link", "revision", "event", "job", "audit", "setting",
    ] {
        assert!(
            v["tables"][t].as_u64().is_some_and(|n| n > 0),
            "{t} is empty in the backup: {v:#}"
        );
    }

    // restore into a new memory, back it up again: every table is identical
    let b = Home::new();
    let r = b.json(&["restore", b1.to_str().unwrap_or_default()]);
    assert_eq!(r["tables"]["note"].as_u64(), Some(6), "{r:#}");
    let b2 = b.dir.path().join("backup2.json");
    b.ok(&["backup", b2.to_str().unwrap_or_default()]);
    let (ta, tb) = (tables(&b1), tables(&b2));
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    for (name, rows) in &ta {
        assert!(
            tb.get(name) == Some(rows),
            "table {name} differs after restore"
        );
    }
    // and what the commands show is the same
    for args in [
        vec!["list", "--limit", "100"],
        vec!["events", "--limit", "100"],
        vec!["proposals", "--status", "rejected"],
        vec!["proposals", "--status", "rolled_back"],
        vec!["usage"],
    ] {
        assert_eq!(a.json(&args), b.json(&args), "{args:?} differs");
    }
    for id in &ids {
        assert_eq!(a.json(&["show", id]), b.json(&["show", id]), "show {id}");
        assert_eq!(
            a.json(&["history", id]),
            b.json(&["history", id]),
            "history {id}"
        );
    }
    // search works on the restored memory (the indexes were rebuilt)
    let hits = b.json(&["search", "adoption agencies", "-k", "1"]);
    assert!(
        hits["hits"][0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("adoption agencies")),
        "{hits:#}"
    );

    // a memory that is not empty is refused, and nothing changes
    let refused = a.run(&["restore", b1.to_str().unwrap_or_default()]);
    assert!(!refused.status.success());
    let msg = String::from_utf8_lossy(&refused.stderr);
    assert!(msg.contains("only into an empty memory"), "{msg}");
    assert_eq!(a.all_ids().len(), 6);
    // something that is not a backup is refused before anything is opened
    let junk = a.file("junk.json", b"[1, 2, 3]");
    let out = a.run(&["restore", junk.to_str().unwrap_or_default()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a Kasten backup"));
    let out = a.run(&["restore", "no/such/file.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither a backup file nor a note id"));
}

/// A memory whose settings hold the API key (the fallback where no OS keyring works):
/// its backups leave the key out. The key is put there through a restore, so the test
/// never touches a real keyring.
#[test]
fn a_backup_never_holds_the_api_key() {
    const KEY: &str = "sk-kasten-backup-7a6b5c4d3e2f1a0b";
    let a = Home::new();
    a.ok(&["add", "Ada's dog Pixel loves the beach"]);
    let first = a.dir.path().join("first.json");
    a.ok(&["backup", first.to_str().unwrap_or_default()]);
    let mut v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&first).unwrap_or_else(|e| panic!("read backup: {e}")),
    )
    .unwrap_or_else(|e| panic!("backup is not JSON: {e}"));
    let settings = v["tables"]["setting"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("no settings in the backup"));
    let mut row = settings
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no setting row to copy"));
    row["id"]["$record"]["key"] = serde_json::json!("llm");
    row["value"] = serde_json::json!(
        serde_json::json!({"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": KEY})
            .to_string()
    );
    settings.retain(|r| r["id"]["$record"]["key"] != "llm");
    settings.push(row);
    let with_key = a.file("with-key.json", v.to_string().as_bytes());

    let b = Home::new();
    b.ok(&["restore", with_key.to_str().unwrap_or_default()]);
    // the key is in this memory's settings (masked when shown) ...
    let config = b.ok(&["--json", "config"]);
    assert!(
        config.contains("********") && !config.contains(KEY),
        "{config}"
    );
    // ... and not in its backup, which keeps the rest of the LLM settings
    let second = b.dir.path().join("second.json");
    b.ok(&["backup", second.to_str().unwrap_or_default()]);
    let text = std::fs::read_to_string(&second).unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains(KEY), "the backup holds the API key");
    assert!(
        text.contains("127.0.0.1:9"),
        "the LLM settings were dropped"
    );
}

/// Backups, exports and JSON Lines imports are read and written a page at a time; a
/// damaged backup is refused whole: the scan reads it to the end before anything is
/// written, so the memory stays empty and a sound copy restores afterwards.
#[test]
fn a_cut_off_backup_restores_nothing_and_a_sound_one_everything() {
    let a = Home::new();
    let f = a.file("notes.jsonl", kasten_tests::jsonl(40).as_bytes());
    let v = import_json(&a, &f, "jsonl");
    assert_eq!(v["imported"].as_u64(), Some(40), "{v:#}");
    let good = a.dir.path().join("backup.json");
    a.ok(&["backup", good.to_str().unwrap_or_default()]);
    let bytes = std::fs::read(&good).unwrap_or_else(|e| panic!("read backup: {e}"));

    let b = Home::new();
    let cut = b.file("cut.json", &bytes[..bytes.len() / 2]);
    let out = b.run(&["restore", cut.to_str().unwrap_or_default()]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("cut off") && msg.contains("nothing was restored"),
        "{msg}"
    );
    assert!(b.all_ids().is_empty(), "a refused backup wrote notes");

    let r = b.json(&["restore", good.to_str().unwrap_or_default()]);
    assert_eq!(r["tables"]["note"].as_u64(), Some(40), "{r:#}");
    assert_eq!(b.all_ids().len(), 40);
    let again = b.dir.path().join("again.json");
    b.ok(&["backup", again.to_str().unwrap_or_default()]);
    assert_eq!(tables(&good), tables(&again));

    // the export writes one file per note
    let vault = b.dir.path().join("vault");
    let e = b.json(&["export", vault.to_str().unwrap_or_default()]);
    assert_eq!(e["files"].as_u64(), Some(40), "{e:#}");
    let written = std::fs::read_dir(&vault)
        .unwrap_or_else(|e| panic!("read vault: {e}"))
        .count();
    assert_eq!(written, 40);
}

/// The entries of a folder, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v
}

/// `kasten restore --replace FILE`: the backup takes the place of a memory that changed
/// since, row for row; the memory as it was is kept beside it (named in the output) and
/// opens with everything it held. A damaged backup is refused first and changes nothing.
#[test]
fn restore_replace_puts_a_backup_in_the_memorys_place_and_keeps_the_one_before() {
    let a = Home::new();
    let f = a.file("notes.jsonl", kasten_tests::jsonl(12).as_bytes());
    let v = import_json(&a, &f, "jsonl");
    assert_eq!(v["imported"].as_u64(), Some(12), "{v:#}");
    let mut ids = a.all_ids();
    ids.sort();
    let backup = a.dir.path().join("backup.json");
    let backup_arg = backup.to_str().unwrap_or_default();
    a.ok(&["backup", backup_arg]);
    // changed since the backup: a note added, one deleted
    a.ok(&["add", "written after the backup"]);
    a.ok(&["delete", &ids[0]]);
    let mut changed = a.all_ids();
    changed.sort();
    assert_ne!(changed, ids);
    let home_before = entries(a.dir.path());

    // a plain restore refuses a memory that is not empty, and names the way to replace it
    let out = a.run(&["restore", backup_arg]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("only into an empty memory") && msg.contains("--replace"),
        "{msg}"
    );
    // a damaged backup: refused before anything is opened; the memory and its folder stay
    let bytes = std::fs::read(&backup).unwrap_or_else(|e| panic!("read backup: {e}"));
    let cut = a.file("cut.json", &bytes[..bytes.len() / 2]);
    let home_before = {
        let mut v = home_before;
        v.push("cut.json".into());
        v.sort();
        v
    };
    let out = a.run(&["restore", "--replace", cut.to_str().unwrap_or_default()]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("cut off") && msg.contains("nothing was restored"),
        "{msg}"
    );
    let mut now = a.all_ids();
    now.sort();
    assert_eq!(now, changed, "a refused backup changed the memory");
    assert_eq!(
        entries(a.dir.path()),
        home_before,
        "something moved or was left"
    );
    // --replace takes a backup file only
    let out = a.run(&["restore", "--replace", &ids[1]]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a backup file"));

    // the replacement: the memory is the backup's again, every table as backed up
    let r = a.json(&["restore", "--replace", backup_arg]);
    assert_eq!(r["tables"]["note"].as_u64(), Some(12), "{r:#}");
    let previous = PathBuf::from(r["previous"].as_str().unwrap_or_default());
    let name = previous
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        previous.parent() == Some(a.dir.path()) && name.starts_with("db.before-restore-"),
        "{r:#}"
    );
    let mut now = a.all_ids();
    now.sort();
    assert_eq!(now, ids);
    let again = a.dir.path().join("again.json");
    a.ok(&["backup", again.to_str().unwrap_or_default()]);
    assert_eq!(tables(&backup), tables(&again));
    assert!(
        !a.dir.path().join("db.restoring").exists(),
        "the work folder is left"
    );
    // the memory as it was opens, with its change
    let kept = format!("surrealkv://{}", previous.display());
    let listed = a.json(&["--db", &kept, "list", "--limit", "100"]);
    let notes = listed["notes"].as_array().cloned().unwrap_or_default();
    assert_eq!(notes.len(), changed.len(), "{listed:#}");
    assert!(
        notes
            .iter()
            .any(|n| n["content"].as_str() == Some("written after the backup")),
        "{listed:#}"
    );
    // and the text output says where it is
    let out = a.ok(&["restore", "--replace", backup_arg]);
    assert!(out.contains("is kept in"), "{out}");
}
