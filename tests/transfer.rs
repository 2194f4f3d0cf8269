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

#[path = "transfer/backup.rs"]
mod backup;
#[path = "transfer/import.rs"]
mod import;
