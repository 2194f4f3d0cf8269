//! Imports: Markdown vaults in and out and in again, chat transcripts, JSON lines, a
//! generated vault with malformed files.

use super::*;

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
