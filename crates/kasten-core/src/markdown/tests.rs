use super::*;

fn file(path: &str, text: &str) -> VaultFile {
    VaultFile {
        path: path.to_owned(),
        bytes: Some(text.as_bytes().to_vec()),
        modified: None,
    }
}

fn attachment(path: &str) -> VaultFile {
    VaultFile {
        path: path.to_owned(),
        bytes: None,
        modified: None,
    }
}

#[test]
fn front_matter_fields_tags_and_wikilinks_are_read() {
    let text = "---\ntags: [rust, \"#async\"]\nkeywords: runtime, tokio\ncreated: 2024-03-01 09:30\naliases:\n  - Tokio runtime\ncontext: An async runtime\n---\n# Tokio\n\nSee [[Rust]] and [[Futures|the futures crate]] and [[Rust#Ownership]].\nAlso #networking and #2024 and `#not-a-tag` and ![[diagram.png]].\n```\n[[InCode]] #incode\n```\n";
    let p = parse_file(text.as_bytes()).expect("parses");
    assert_eq!(p.tags, vec!["rust", "async", "networking"]);
    assert_eq!(p.keywords, vec!["runtime", "tokio"]);
    assert_eq!(p.aliases, vec!["Tokio runtime"]);
    assert_eq!(p.context, "An async runtime");
    assert_eq!(
        p.created.map(|t| t.to_rfc3339()),
        Some("2024-03-01T09:30:00+00:00".into())
    );
    let targets: Vec<&str> = p.wikilinks.iter().map(|w| w.target.as_str()).collect();
    assert_eq!(targets, vec!["Rust", "Futures", "Rust"]);
    assert_eq!(p.wikilinks[1].alias.as_deref(), Some("the futures crate"));
    assert!(p.body.starts_with("# Tokio"));
}

#[test]
fn tags_and_wikilinks_come_from_text_only() {
    let text = "Read [the setup](#setup) and [[Setup#Build|how to build]] #real.\n\n    #include <stdio.h>\n    [[Indented]]\n\n~~~\n#tilde [[Tilde]]\n~~~\n\n- item #listed\n\n  continued #continued\n\n<div>#htmlblock [[Html]]</div>\n\nInline <span title=\"#x\">#spanned</span>, `#code [[Code]]`, <https://a.org/(#auto)>, https://a.org/(#bare) and www.a.org/(#www) and ![[Embed.png]] and ![alt #img](pic.png) and (#paren) and [#linktext](https://a.org/#frag).\n";
    let p = parse_file(text.as_bytes()).expect("parses");
    assert_eq!(
        p.tags,
        vec![
            "real",
            "listed",
            "continued",
            "spanned",
            "paren",
            "linktext"
        ]
    );
    assert_eq!(
        p.wikilinks,
        vec![WikiLink {
            target: "Setup".into(),
            alias: Some("how to build".into())
        }]
    );
}

#[test]
fn malformed_front_matter_is_an_error_for_that_file_only() {
    let bad_yaml = "---\ntags: [unclosed\nkeywords: x\n---\nbody\n";
    let unclosed = "---\ntags: [a]\nbody without end\n";
    let not_a_map = "---\n- a\n- b\n---\nbody\n";
    for (name, t) in [
        ("bad", bad_yaml),
        ("unclosed", unclosed),
        ("list", not_a_map),
    ] {
        assert!(parse_file(t.as_bytes()).is_err(), "{name} accepted");
    }
    let vault = plan_vault(
        "V",
        &[
            file("good.md", "---\ntags: [x]\n---\nfine"),
            file("bad.md", bad_yaml),
            file("also good.md", "no front matter at all"),
        ],
    );
    assert_eq!(vault.notes.len(), 2);
    assert_eq!(vault.problems.len(), 1);
    assert_eq!(vault.problems[0].origin, "bad.md");
    assert!(
        vault.problems[0].message.contains("not valid YAML"),
        "{}",
        vault.problems[0]
    );
}

#[test]
fn a_bad_date_is_a_warning_not_a_lost_note() {
    let v = plan_vault("V", &[file("a.md", "---\ndate: next Tuesday\n---\ntext")]);
    assert_eq!(v.notes.len(), 1);
    assert_eq!(v.warnings.len(), 1);
    assert!(v.notes[0].note.created_at.is_none());
}

#[test]
fn links_resolve_by_name_path_and_alias_and_attachments_are_counted() {
    let v = plan_vault(
        "Vault",
        &[
            file(
                "Rust.md",
                "Systems language. [[Tokio]] [[Missing note]] [[pic.png]]",
            ),
            file(
                "libs/Tokio.md",
                "---\naliases: [tokio-rs]\n---\nUses [[Rust|the language]] and [[libs/Futures]].",
            ),
            file(
                "libs/Futures.md",
                "Futures. Back to [[tokio-rs]]. Self [[Futures]].",
            ),
            attachment("pic.png"),
            attachment("docs/paper.pdf"),
            file(".obsidian/workspace.md", "ignored"),
            attachment(".obsidian/app.json"),
        ],
    );
    assert_eq!(v.attachments, 2);
    assert_eq!(v.hidden, 2);
    let names: Vec<&str> = v.notes.iter().map(|n| n.origin.as_str()).collect();
    assert_eq!(names, vec!["Rust.md", "libs/Futures.md", "libs/Tokio.md"]);
    let mut edges: Vec<(&str, &str)> = v
        .links
        .iter()
        .map(|l| (names[l.from], names[l.to]))
        .collect();
    edges.sort();
    assert_eq!(
        edges,
        vec![
            ("Rust.md", "libs/Tokio.md"),
            ("libs/Futures.md", "libs/Tokio.md"),
            ("libs/Tokio.md", "Rust.md"),
            ("libs/Tokio.md", "libs/Futures.md"),
        ]
    );
    assert!(v.links.iter().all(|l| l.status == LinkStatus::Accepted));
    assert_eq!(v.unresolved.len(), 1, "{:?}", v.unresolved);
    assert!(v.unresolved[0].message.contains("Missing note"));
    // the file name is the title when the body has none
    assert!(
        v.notes[0]
            .note
            .content
            .starts_with("# Rust\n\nSystems language.")
    );
    assert_eq!(v.notes[0].note.source.as_deref(), Some("Vault/Rust.md"));
}

struct Owned {
    id: NoteId,
    content: String,
    created_at: DateTime<Utc>,
    keywords: Vec<String>,
    tags: Vec<String>,
    context: String,
    source: Option<String>,
}

impl Owned {
    fn view(&self) -> NoteView<'_> {
        NoteView {
            id: &self.id,
            content: &self.content,
            created_at: self.created_at,
            keywords: &self.keywords,
            tags: &self.tags,
            context: &self.context,
            source: self.source.as_deref(),
            enriched: true,
            archived: self.id.as_str().starts_with("01B"),
        }
    }
}

fn note(id: &str, content: &str, source: Option<&str>) -> Owned {
    let t = DateTime::parse_from_rfc3339("2024-01-02T03:04:05.123456789Z")
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or_default();
    Owned {
        id: NoteId::parse(id).unwrap_or_else(|_| NoteId::generate()),
        content: content.to_owned(),
        created_at: t,
        keywords: vec!["alpha".into(), "beta \"quoted\"".into()],
        tags: vec!["support group".into()],
        context: "A context: with colons\nand a newline".into(),
        source: source.map(str::to_owned),
    }
}

#[test]
fn an_exported_note_imports_back_to_the_same_note_and_links() {
    let a = note(
        "01AAAAAAAAAAAAAAAAAAAAAAAA",
        "# Tokio\n\nAn async runtime. See [[Rust]].",
        Some("V/Tokio.md"),
    );
    let b = note(
        "01BBBBBBBBBBBBBBBBBBBBBBBB",
        "Rust is a language #lang",
        None,
    );
    let names = file_names(&[a.view(), b.view()]);
    assert_eq!(names, vec!["Tokio", "Rust is a language lang"]);
    let links = vec![RenderLink {
        target: names[1].clone(),
        kind: "elaborates".into(),
        reason: "Tokio: \"is written in\" Rust".into(),
        confidence: 0.85,
        status: LinkStatus::Accepted,
    }];
    let text_a = render_note(a.view(), &["Rust async".to_owned()], &links);
    let text_b = render_note(b.view(), &[], &[]);
    assert!(text_a.contains("[[Rust is a language lang]]"), "{text_a}");
    assert!(text_a.contains("box: \"Rust async\""), "{text_a}");
    let v = plan_vault(
        "Export",
        &[
            file(&format!("{}.md", names[0]), &text_a),
            file(&format!("{}.md", names[1]), &text_b),
        ],
    );
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(v.notes.len(), 2);
    let back_a = v
        .notes
        .iter()
        .find(|n| n.id.as_ref() == Some(&a.id))
        .expect("a is back");
    assert_eq!(back_a.note.content, a.content);
    assert_eq!(back_a.note.created_at, Some(a.created_at));
    assert_eq!(back_a.note.source, a.source);
    assert_eq!(back_a.keywords, a.keywords);
    assert_eq!(back_a.tags, a.tags);
    assert_eq!(back_a.context, a.context);
    assert!(back_a.enriched);
    let back_b = v
        .notes
        .iter()
        .find(|n| n.id.as_ref() == Some(&b.id))
        .expect("b is back");
    assert_eq!(back_b.note.content, b.content);
    assert_eq!(back_b.note.source, None);
    assert!(back_b.archived && !back_a.archived);
    // the front matter link, once (the body's [[Rust]] names no note of the export)
    assert_eq!(v.links.len(), 1, "{:?}", v.links);
    let l = &v.links[0];
    assert_eq!(v.notes[l.from].id, Some(a.id.clone()));
    assert_eq!(v.notes[l.to].id, Some(b.id.clone()));
    assert_eq!(l.kind, "elaborates");
    assert_eq!(l.reason, "Tokio: \"is written in\" Rust");
    assert_eq!(l.confidence, 0.85);
}

#[test]
fn file_names_are_safe_and_unique() {
    let a = note("01AAAAAAAAAAAAAAAAAAAAAAAA", "What? a/b: c [x] #y", None);
    let b = note("01BBBBBBBBBBBBBBBBBBBBBBBB", "what  a b c x y", None);
    let c = note("01CCCCCCCCCCCCCCCCCCCCCCCC", "...", None);
    let names = file_names(&[a.view(), b.view(), c.view()]);
    assert_eq!(names[0], "What a b c x y");
    assert_eq!(names[1], "what a b c x y 2");
    assert_eq!(names[2], "note 01CCCCCCCCCCCCCCCCCCCCCCCC");
}

#[test]
fn deep_nesting_and_huge_front_matter_are_refused_without_crashing() {
    let deep = format!("---\nx: {}\n---\nbody", "[".repeat(100_000));
    assert!(parse_file(deep.as_bytes()).is_err());
    let dashes = format!("---\nx:\n{}a\n---\nbody", "- ".repeat(100_000));
    assert!(parse_file(dashes.as_bytes()).is_err());
    let huge = format!("---\nx: \"{}\"\n---\nbody", "a".repeat(100_000));
    assert!(parse_file(huge.as_bytes()).is_err());
    // deep, but within the size limit: refused by the event scan, no deep recursion
    for deep in [
        format!("---\nx:\n{}a\n---\nbody", "- ".repeat(30_000)),
        format!("---\nx: {}\n---\nbody", "[".repeat(30_000)),
        format!("---\nx: {}1{}\n---\nbody", "[".repeat(65), "]".repeat(65)),
    ] {
        assert!(parse_file(deep.as_bytes()).is_err());
    }
}

#[test]
fn brackets_and_dashes_inside_values_are_not_nesting() {
    // found by fuzzing the export round trip (fuzz/regressions/export_markdown): a tag
    // with many `{` was counted as nesting, so the exported note did not import again
    let tag = format!("c{}", "{".repeat(80));
    let context = "a - b ".repeat(80);
    let text = format!(
        "---\ntags: [{}]\ncontext: {}\nkeywords:\n  - \"[[[{}\"\n---\nbody",
        serde_json::Value::String(tag.clone()),
        serde_json::Value::String(context.clone()),
        "[".repeat(70)
    );
    let p = parse_file(text.as_bytes()).unwrap();
    assert_eq!(p.tags, vec![tag]);
    assert_eq!(p.context, context.trim());
    assert_eq!(p.keywords.len(), 1);
}

#[test]
fn yaml_aliases_cannot_blow_up_front_matter() {
    // found by fuzzing (fuzz/regressions/import_markdown): 445 bytes that the YAML loader
    // expanded to gigabytes, one alias level at a time
    let mut fm = String::from("a0: &a0 [x, y, z, w, v, u, t, s]\n");
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 8].join(", ");
        fm.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let err = parse_file(format!("---\n{fm}---\nbody").as_bytes()).unwrap_err();
    assert!(err.contains("aliases"), "{err}");
    let v = plan_vault("V", &[file("lol.md", &format!("---\n{fm}---\nbody"))]);
    assert_eq!((v.notes.len(), v.problems.len()), (0, 1));
    // an alias used as intended still works
    let p = parse_file(b"---\ntags: &t [rust, async]\nkeywords: *t\n---\nbody").unwrap();
    assert_eq!(p.keywords, vec!["rust", "async"]);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_file(&bytes);
            let mut with_fm = b"---\n".to_vec();
            with_fm.extend_from_slice(&bytes);
            let _ = parse_file(&with_fm);
        }

        #[test]
        fn never_panics_on_markdownish_text(s in "(---\n|\\[\\[|\\]\\]|#|\\||`|\n|[a-z: \\-\\[\\]{}\"'])*") {
            let v = plan_vault("V", &[file("a.md", &s), file("b.md", &format!("---\n{s}\n---\n{s}"))]);
            prop_assert!(v.notes.len() + v.problems.len() == 2);
        }
    }
}

#[test]
fn a_vault_is_read_one_file_at_a_time_and_an_unreadable_file_is_a_problem() {
    let entries: Vec<VaultEntry> = ["b.md", "a.md", "c.md", "pic.png", ".obsidian"]
        .iter()
        .map(|p| VaultEntry {
            path: (*p).to_owned(),
            modified: None,
        })
        .collect();
    let mut asked: Vec<String> = Vec::new();
    let v = plan_vault_reading("v", entries, &mut |path| {
        asked.push(path.to_owned());
        match path {
            "a.md" => Ok(Some(b"Alpha links to [[b]] and [[c]]".to_vec())),
            "b.md" => Err("cannot read v/b.md: permission denied".to_owned()),
            "c.md" => Ok(Some(b"Gamma".to_vec())),
            _ => Ok(None),
        }
    });
    // only the Markdown files are read, each once, in path order
    assert_eq!(asked, ["a.md", "b.md", "c.md"]);
    assert_eq!(v.notes.len(), 2);
    assert_eq!(v.problems.len(), 1);
    assert_eq!(v.problems[0].origin, "b.md");
    assert!(v.problems[0].message.contains("permission denied"));
    assert_eq!((v.attachments, v.hidden), (1, 1));
    // the link to the unread file is unresolved, the other one made
    assert_eq!(v.links.len(), 1);
    assert_eq!(v.unresolved.len(), 1);
    // the same as planning the files read up front
    let eager = plan_vault(
        "v",
        &[
            file("a.md", "Alpha links to [[b]] and [[c]]"),
            file("c.md", "Gamma"),
            attachment("pic.png"),
            attachment(".obsidian"),
        ],
    );
    let contents = |v: &VaultImport| -> Vec<String> {
        v.notes.iter().map(|n| n.note.content.clone()).collect()
    };
    assert_eq!(contents(&v), contents(&eager));
    assert_eq!(v.links, eager.links);
}

#[test]
fn long_titles_in_wide_characters_give_names_a_file_system_holds() {
    // 80 four-byte characters: 320 bytes, more than the 255 a file name may have
    let title = "😀".repeat(80);
    let a = note("01AAAAAAAAAAAAAAAAAAAAAAAA", &title, None);
    let b = note("01BBBBBBBBBBBBBBBBBBBBBBBB", &title, None);
    let from_source = format!("V/{}.md", "語".repeat(120));
    let c = note("01CCCCCCCCCCCCCCCCCCCCCCCC", "x", Some(&from_source));
    let names = file_names(&[a.view(), b.view(), c.view()]);
    for name in &names {
        let file = format!("{name}.md");
        assert!(file.len() <= 255, "{} bytes: {file}", file.len());
        assert!(!name.is_empty());
    }
    // cut on a character boundary, as much of the title as fits
    assert!(names[0].chars().all(|c| c == '😀'), "{}", names[0]);
    assert!(names[0].len() >= 150, "{}", names[0].len());
    // the second of one title: as much of it as leaves room for " 2"
    let second = names[1].strip_suffix(" 2").unwrap_or_default();
    assert!(
        !second.is_empty() && names[0].starts_with(second),
        "{}",
        names[1]
    );
    assert!(names[2].chars().all(|c| c == '語'), "{}", names[2]);
    // and an ASCII title keeps its words as before
    let d = note("01DDDDDDDDDDDDDDDDDDDDDDDD", "Short title", None);
    assert_eq!(file_names(&[d.view()]), vec!["Short title"]);
}
