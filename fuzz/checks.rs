//! What each fuzz target does with one input: call the pure parser and check the
//! invariants it promises. Shared, word for word, by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/*.rs`, nightly, libFuzzer) and by `tests/fuzz_corpus.rs`, which
//! replays the committed corpus on stable Rust in `cargo test`. A broken invariant is an
//! `assert!` failure: libFuzzer reports it as a crash, the test as a failure.
//!
//! Depends on `kasten-core`, `kasten-llm` and `serde_json` only (no database, no IO).

use std::collections::HashSet;
use std::sync::OnceLock;

use kasten_core::chat::{
    ShownLink, ShownNote, answer_prompt, citations, notes_the_answer_uses, says_not_in_memory,
    small_talk,
};
use kasten_core::import::{parse_jsonl_bytes, parse_time};
use kasten_core::markdown::{
    LINKS_MARKER, NoteView, RenderLink, VaultFile, file_names, parse_date, parse_file, plan_vault,
    render_note,
};
use kasten_core::prompts::{
    Construction, Handles, LinkEvolve, Neighbour, OpKind, construct, is_llm_kind, link_evolve,
    parse_replacement, replaces,
};
use kasten_core::supersession::supersedes;
use kasten_core::transfer::parse_chat;
use kasten_core::{LinkStatus, NoteId};
use kasten_llm::{
    ChatResponse, ClientOptions, LlmClient, LlmConfig, LlmError, ParseError, Provider,
    parse_json_lenient,
};
use serde_json::Value;

/// What a target does with one input.
pub type Check = fn(&[u8]);

/// Every target, by name: the corpus folder `fuzz/corpus/<name>/` and the fuzz binary.
pub const TARGETS: &[(&str, Check)] = &[
    ("llm_json", llm_json),
    ("llm_answers", llm_answers),
    ("llm_wire", llm_wire),
    ("chat_answer", chat_answer),
    ("import_jsonl", import_jsonl),
    ("import_chat", import_chat),
    ("import_markdown", import_markdown),
    ("export_markdown", export_markdown),
    ("supersession", supersession),
];

/// `parse_json_lenient` on model output: never panics; text that is JSON as a whole is
/// returned as it is; a "cut off" error really has something unclosed.
pub fn llm_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let r = parse_json_lenient(&text);
    if let Ok(whole) = serde_json::from_str::<Value>(text.trim()) {
        assert_eq!(
            r.as_ref().ok(),
            Some(&whole),
            "valid JSON must parse as itself"
        );
    }
    match &r {
        Ok(_) => {}
        Err(ParseError::Truncated {
            unclosed,
            in_string,
        }) => assert!(*unclosed > 0 || *in_string, "cut off, but nothing is open"),
        Err(ParseError::Empty) => assert!(text.trim().is_empty()),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

fn note_id(i: usize) -> NoteId {
    // ids as the store makes them; a literal that is a valid key
    NoteId::parse(&format!("01HZZZZZZZZZZZZZZZZZZZZZ{i:02}")).unwrap_or_else(|_| NoteId::generate())
}

/// The two A-Mem answers (construction; link + evolve) after lenient parsing, validated
/// against `n` shown handles (`n` = first byte mod 13): links and updates name only
/// shown notes, kinds are known, confidences are in 0..=1, limits hold, nothing repeats.
/// The answer about a replaced value: a replacement names two different, non-empty values
/// and reads back as the rule's reason (`attribute: before → now`, one arrow, one colon).
/// The same text as note content must stay inside its fence in every prompt.
pub fn llm_answers(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(first % 13);
    let text = String::from_utf8_lossy(rest);
    let ids: Vec<NoteId> = (0..n).map(note_id).collect();
    let handles = Handles::new(ids.clone());
    if let Ok(v) = parse_json_lenient(&text) {
        if let Ok(c) = Construction::from_value(&v) {
            assert!(c.keywords.len() <= 8 && c.tags.len() <= 6, "{c:?}");
            for list in [&c.keywords, &c.tags] {
                let mut seen = HashSet::new();
                for k in list.iter() {
                    assert!(!k.trim().is_empty() && k.trim() == k, "{c:?}");
                    assert!(seen.insert(k.to_lowercase()), "repeated term in {c:?}");
                }
            }
            assert!(c.tags.iter().all(|t| *t == t.to_lowercase()), "{c:?}");
            assert!(c.context.chars().count() <= 301, "{c:?}");
        }
        if let Ok(le) = LinkEvolve::from_value(&v, &handles) {
            assert!(le.links.len() <= 5, "{le:?}");
            let mut seen = HashSet::new();
            for l in &le.links {
                assert!(ids.contains(&l.to), "link to a note not shown: {le:?}");
                assert!(is_llm_kind(&l.kind), "{le:?}");
                assert!((0.0..=1.0).contains(&l.confidence), "{le:?}");
                assert!(seen.insert((l.to.clone(), l.kind.clone())), "{le:?}");
            }
            let mut updated = HashSet::new();
            for u in &le.updates {
                assert!(
                    ids.contains(&u.target),
                    "update of a note not shown: {le:?}"
                );
                assert!(updated.insert(u.target.clone()), "{le:?}");
                // operations only, each naming something, at most two per note
                assert!(!u.ops.is_empty() && u.ops.len() <= 2, "{le:?}");
                assert!(u.ops.iter().all(|o| !o.value.is_empty()), "{le:?}");
            }
            assert!(le.updates.len() <= 2, "{le:?}");
            // the new note's own annotations: one tag operation at most
            assert!(le.note_tags.len() <= 1, "{le:?}");
            assert!(
                le.note_tags
                    .iter()
                    .all(|o| matches!(o.op, OpKind::AddTag | OpKind::RemoveTag)),
                "{le:?}"
            );
        }
    }
    if let Ok(v) = parse_json_lenient(&text)
        && let Ok(Some(r)) = parse_replacement(&v)
    {
        assert!(
            !r.attribute.is_empty() && !r.attribute.contains(':'),
            "{r:?}"
        );
        assert!(!r.old_value.is_empty() && !r.new_value.is_empty(), "{r:?}");
        assert_ne!(r.old_value.to_lowercase(), r.new_value.to_lowercase());
        let reason = r.reason();
        assert_eq!(reason.matches(" → ").count(), 1, "{reason}");
        assert!(
            !reason.contains("<<<") && !reason.contains(">>>"),
            "{reason}"
        );
        let (attribute, _) = reason.split_once(": ").unwrap_or_default();
        assert_eq!(attribute, r.attribute, "{reason}");
    }
    // hostile note text stays data: exactly one fence per note shown
    let p = replaces(&text, "2024-05-01", &text, "2024-06-01");
    let user = &p.messages[1].content;
    assert_eq!(user.matches("<<<").count(), 2, "{user}");
    assert_eq!(user.matches(">>>").count(), 2, "{user}");
    let p = construct(&text, "2024-05-01");
    let user = &p.messages[1].content;
    assert_eq!(user.matches("<<<").count(), 1, "{user}");
    assert_eq!(user.matches(">>>").count(), 1, "{user}");
    let shown = |i: usize| Neighbour {
        id: note_id(i),
        content: text.to_string(),
        keywords: vec!["k".into()],
        tags: vec!["t".into()],
        context: "c".into(),
        time: Some("2024-05-01".into()),
    };
    let neighbours: Vec<Neighbour> = (0..n).map(shown).collect();
    let p = link_evolve(&shown(99), &neighbours, &handles);
    let user = &p.messages[1].content;
    assert_eq!(user.matches("<<<").count(), n + 1, "{user}");
    assert_eq!(user.matches(">>>").count(), n + 1, "{user}");
}

fn client(provider: Provider) -> &'static LlmClient {
    static CLIENTS: OnceLock<Option<(LlmClient, LlmClient)>> = OnceLock::new();
    let make = |provider| {
        let config = LlmConfig {
            provider,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "fuzz-model".into(),
            api_key: None,
        };
        LlmClient::new(config, ClientOptions::default()).ok()
    };
    let pair = CLIENTS.get_or_init(|| Some((make(Provider::Openai)?, make(Provider::Ollama)?)));
    match (pair, provider) {
        (Some((openai, _)), Provider::Openai | Provider::Local) => openai,
        (Some((_, ollama)), Provider::Ollama) => ollama,
        (None, _) => unreachable!("a client for a loopback URL always builds"),
    }
}

fn same(a: &Result<ChatResponse, LlmError>, b: &Result<ChatResponse, LlmError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.to_string() == b.to_string(),
        _ => false,
    }
}

/// What a server sends back: a whole response body (OpenAI or Ollama, by the first bit
/// of the first byte) and the same bytes as a stream (SSE / NDJSON). The stream is cut
/// into pieces at positions taken from the first bytes; the result must not depend on
/// the cuts, and the pieces handed out must add up to the answer.
pub fn llm_wire(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let provider = if first & 1 == 0 {
        Provider::Openai
    } else {
        Provider::Ollama
    };
    let c = client(provider);
    let _ = c.parse_response_body(&String::from_utf8_lossy(rest));
    let mut tokens = String::new();
    let whole = c.parse_stream_body(&[rest], &mut |p| tokens.push_str(p));
    if let Ok(r) = &whole {
        assert_eq!(tokens, r.text, "the streamed pieces are the answer");
    }
    // cut points: every byte of value b after the first cuts b bytes further on
    let step = usize::from(first >> 1).max(1);
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    while at < rest.len() {
        let end = (at + step + usize::from(rest[at] % 7)).min(rest.len());
        pieces.push(&rest[at..end]);
        at = end;
    }
    let mut tokens2 = String::new();
    let cut = c.parse_stream_body(&pieces, &mut |p| tokens2.push_str(p));
    assert!(
        same(&whole, &cut),
        "chunking changed the result: {whole:?} vs {cut:?}"
    );
    if whole.is_ok() {
        assert_eq!(tokens, tokens2);
    }
}

/// The answer of `ask`: citations only name notes that were shown (1-based, no
/// repeats), whatever the model wrote; note text and the question stay inside the
/// answer prompt's fences.
pub fn chat_answer(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let shown = usize::from(first % 32);
    let answer = String::from_utf8_lossy(rest);
    let (cited, invalid) = citations(&answer, shown);
    let mut seen = HashSet::new();
    for n in &cited {
        assert!((1..=shown).contains(n), "[{n}] cited with {shown} shown");
        assert!(seen.insert(*n), "[{n}] repeated");
    }
    if !answer.contains('[') {
        assert!(cited.is_empty() && invalid == 0);
    }
    let _ = says_not_in_memory(&answer);
    let _ = small_talk(&answer);
    let notes: Vec<ShownNote> = (0..shown.min(4))
        .map(|i| ShownNote {
            time: format!("2024-05-0{}", i + 1),
            content: answer.to_string(),
            // the annotations are model output: as hostile as the content
            context: if i % 2 == 0 {
                answer.to_string()
            } else {
                String::new()
            },
            keywords: vec![answer.to_string(); i],
        })
        .collect();
    let links: Vec<ShownLink> = (1..notes.len())
        .map(|i| ShownLink {
            from: i + 1,
            to: 1,
            kind: answer.chars().take(8).collect(),
            reason: answer.to_string(),
        })
        .collect();
    let msgs = answer_prompt(&notes, &links, &[], &answer);
    let user = &msgs[msgs.len() - 1].content;
    // every piece of note data (content, context, keywords, link reasons) is one fenced
    // line: newlines become spaces, fences inside are defused
    let data = user
        .rsplit_once("\nQuestion: ")
        .map_or(user.as_str(), |(d, _)| d);
    let mut fenced = 0;
    for line in data.lines().filter(|l| l.contains("<<<")) {
        let inner = line
            .split_once("<<<")
            .and_then(|(_, r)| r.strip_suffix(">>>"))
            .unwrap_or_else(|| panic!("note data is not fenced: {line}"));
        assert!(!inner.contains(">>>") && !inner.contains("<<<"), "{line}");
        fenced += 1;
    }
    assert!(fenced >= notes.len(), "{user}");
    // an answer read back to the notes holding its words: shown notes only, each once,
    // at most three; the notes are pieces of the input, the question its first half
    let pieces: Vec<String> = answer.split('\n').take(shown).map(str::to_owned).collect();
    let half: String = answer.chars().take(answer.chars().count() / 2).collect();
    let tokenizer = kasten_core::text::Tokenizer::default();
    let used = notes_the_answer_uses(&tokenizer, &answer, &half, &pieces);
    assert!(used.len() <= 3, "{used:?}");
    let mut once = HashSet::new();
    for n in &used {
        assert!((1..=pieces.len()).contains(n), "{n} of {}", pieces.len());
        assert!(once.insert(*n), "{n} repeated");
    }
}

/// JSON Lines import: every record is a note with content, good and bad lines are told
/// apart by increasing line numbers within the file.
pub fn import_jsonl(data: &[u8]) {
    let (ok, bad) = parse_jsonl_bytes(data);
    let lines = data.split(|b| *b == b'\n').count();
    let mut numbers: Vec<usize> = ok.iter().map(|r| r.line).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    for r in &ok {
        assert!(
            !r.note.content.is_empty(),
            "empty note from line {}",
            r.line
        );
        assert_eq!(r.note.content.trim(), r.note.content);
    }
    for e in &bad {
        assert!(!e.message.is_empty());
    }
    numbers.extend(bad.iter().map(|e| e.line));
    let all: HashSet<usize> = numbers.iter().copied().collect();
    assert_eq!(all.len(), numbers.len(), "a line is both good and bad");
    assert!(numbers.iter().all(|&n| n >= 1 && n <= lines));
    if let Ok(t) = std::str::from_utf8(data) {
        let _ = parse_time(t);
        let _ = parse_date(t);
    }
}

/// Chat transcript import: every message becomes a note with content or a problem, in
/// order, with the source `FILE:N` of its position.
pub fn import_chat(data: &[u8]) {
    let Ok(c) = parse_chat("talk.json", data) else {
        return;
    };
    let mut numbers = Vec::new();
    for n in &c.notes {
        assert!(!n.note.content.trim().is_empty(), "empty note {n:?}");
        let source = n.note.source.as_deref().unwrap_or("");
        let k: usize = source
            .strip_prefix("talk.json:")
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("source {source:?}"));
        assert_eq!(n.origin, format!("talk.json message {k}"));
        numbers.push(k);
    }
    for p in &c.problems {
        let k: usize = p
            .origin
            .strip_prefix("talk.json message ")
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("origin {:?}", p.origin));
        numbers.push(k);
    }
    numbers.sort_unstable();
    let expected: Vec<usize> = (1..=numbers.len()).collect();
    assert_eq!(
        numbers, expected,
        "each message is a note or a problem, once"
    );
}

/// Markdown / Obsidian import. The input is a small vault: files separated by NUL
/// bytes, each `path\ncontents`. Every file is a note, a problem, an attachment or
/// hidden; notes have content; links join two different notes of the import, once per
/// kind. Every imported note, exported with `render_note` and read back with
/// `parse_file`, keeps its content, annotations and time (the export round trip).
pub fn import_markdown(data: &[u8]) {
    let _ = parse_file(data);
    let files: Vec<VaultFile> = data
        .split(|b| *b == 0)
        .take(16)
        .map(|f| {
            let (path, bytes) = match f.iter().position(|b| *b == b'\n') {
                Some(i) => (&f[..i], &f[i + 1..]),
                None => (f, &[][..]),
            };
            let path = String::from_utf8_lossy(path).trim().to_owned();
            let md = kasten_core::markdown::is_markdown(&path);
            VaultFile {
                path,
                bytes: md.then(|| bytes.to_vec()),
                modified: None,
            }
        })
        .collect();
    let v = plan_vault("vault", &files);
    assert_eq!(
        v.notes.len() + v.problems.len() + v.attachments + v.hidden,
        files.len(),
        "every file is accounted for once"
    );
    for n in &v.notes {
        assert!(!n.note.content.is_empty(), "empty note from {}", n.origin);
    }
    let mut seen = HashSet::new();
    for l in &v.links {
        assert!(l.from < v.notes.len() && l.to < v.notes.len(), "{l:?}");
        assert_ne!(l.from, l.to, "{l:?}");
        assert!((0.0..=1.0).contains(&l.confidence), "{l:?}");
        assert!(seen.insert((l.from, l.to, l.kind.clone())), "{l:?}");
    }
    // the export round trip
    let ids: Vec<NoteId> = (0..v.notes.len()).map(note_id).collect();
    let views: Vec<NoteView<'_>> = v
        .notes
        .iter()
        .zip(&ids)
        .map(|(n, id)| NoteView {
            id,
            content: &n.note.content,
            created_at: n.note.created_at.unwrap_or_default(),
            keywords: &n.keywords,
            tags: &n.tags,
            context: &n.context,
            source: n.note.source.as_deref(),
            enriched: n.enriched,
            archived: n.archived,
        })
        .collect();
    let names = file_names(&views);
    assert_eq!(names.len(), views.len());
    for name in &names {
        // a name is cut by bytes: with `.md` it fits any file system
        assert!(
            name.len() + 3 <= 255 && !name.is_empty(),
            "file name too long: {name}"
        );
    }
    let tokenizer = kasten_core::text::Tokenizer::default();
    for n in &v.notes {
        // every term a query cuts the text into is a term its document is indexed under
        let indexed: HashSet<String> = tokenizer
            .tokenize_document(&n.note.content)
            .into_iter()
            .collect();
        for t in tokenizer.tokenize(&n.note.content) {
            assert!(indexed.contains(&t), "{t} is not indexed");
        }
        assert!(
            kasten_core::period::periods_in(&n.note.content).len()
                <= kasten_core::period::MAX_PERIODS
        );
    }
    let lower: HashSet<String> = names.iter().map(|n| n.to_lowercase()).collect();
    assert_eq!(
        lower.len(),
        names.len(),
        "file names must differ: {names:?}"
    );
    for (n, view) in v.notes.iter().zip(&views) {
        if n.note.content.lines().any(|l| l.trim() == LINKS_MARKER) {
            continue; // the marker line is the end of the content by design
        }
        let file = render_note(*view, &[], &[]);
        let back = parse_file(file.as_bytes())
            .unwrap_or_else(|e| panic!("an export does not read back: {e}\n{file}"));
        assert_eq!(back.body, n.note.content, "content changed:\n{file}");
        assert_eq!(back.kasten_id.as_ref(), Some(view.id));
        assert_eq!(
            back.kasten_source,
            n.note.source.clone().filter(|s| !s.trim().is_empty())
        );
        assert_eq!(back.keywords, n.keywords, "keywords changed:\n{file}");
        assert_eq!(back.tags, n.tags, "tags changed:\n{file}");
        assert_eq!(back.context, n.context, "context changed:\n{file}");
        assert_eq!(back.created, Some(view.created_at), "time changed:\n{file}");
        assert_eq!(
            (back.kasten_enriched, back.kasten_archived),
            (n.enriched, n.archived)
        );
    }
}

/// Trimmed, non-empty, unique: how `parse_file` returns a list property.
fn normal_list(text: &str, strip_hash: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in text.split('\n') {
        let item = if strip_hash {
            item.trim().trim_start_matches('#').trim()
        } else {
            item.trim()
        };
        if !item.is_empty() && !out.iter().any(|x| x == item) {
            out.push(item.to_owned());
        }
    }
    out
}

/// Markdown export of any note: whatever its content and annotations (any text, as a user
/// edit or an LLM may leave them), `render_note` writes a file that `parse_file` reads
/// back to the same content, id, source, keywords, tags, context, time and state, and
/// whose links section is not content. Fields are NUL-separated: content, context,
/// source, keywords (one per line), tags, link target, link kind, link reason; the first
/// 8 bytes are the time (seconds, years 1–9999) and flags.
pub fn export_markdown(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let (head, rest) = data.split_at(8);
    let mut secs = [0u8; 8];
    secs.copy_from_slice(head);
    let flags = head[0];
    // 0001-01-01 .. 9999-12-31: RFC 3339 has four-digit years
    let span = 253_402_300_799_i64 + 62_135_596_800;
    let t = i64::from_le_bytes(secs).rem_euclid(span) - 62_135_596_800;
    let Some(created) = chrono::DateTime::from_timestamp(t, u32::from(head[1]) * 3_900_000) else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut f = text.split('\0');
    let mut next = || f.next().unwrap_or("").to_owned();
    let (content, context, source) = (next(), next(), next());
    let (keywords, tags) = (normal_list(&next(), false), normal_list(&next(), true));
    let (target, kind, reason) = (next(), next(), next());
    let content = content.trim();
    if content.is_empty() || content.lines().any(|l| l.trim() == LINKS_MARKER) {
        return;
    }
    let id = note_id(1);
    let source = (!source.trim().is_empty()).then_some(source.as_str());
    let view = NoteView {
        id: &id,
        content,
        created_at: created,
        keywords: &keywords,
        tags: &tags,
        context: context.trim(),
        source,
        enriched: flags & 1 == 1,
        archived: flags & 2 == 2,
    };
    let links: Vec<RenderLink> = (flags & 4 == 4)
        .then(|| RenderLink {
            target: target.clone(),
            kind: kind.clone(),
            reason: reason.clone(),
            confidence: 0.5,
            status: LinkStatus::Accepted,
        })
        .into_iter()
        .collect();
    let file = render_note(view, &[], &links);
    let back = parse_file(file.as_bytes())
        .unwrap_or_else(|e| panic!("an export does not read back: {e}\n{file}"));
    assert_eq!(back.body, content, "content changed:\n{file}");
    assert_eq!(back.kasten_id.as_ref(), Some(&id));
    assert_eq!(
        back.kasten_source.as_deref(),
        source,
        "source changed:\n{file}"
    );
    assert_eq!(back.keywords, keywords, "keywords changed:\n{file}");
    assert_eq!(back.tags, tags, "tags changed:\n{file}");
    assert_eq!(back.context, context.trim(), "context changed:\n{file}");
    assert_eq!(back.created, Some(created), "time changed:\n{file}");
    assert_eq!(
        (back.kasten_enriched, back.kasten_archived),
        (view.enriched, view.archived)
    );
    assert!(back.links.len() <= links.len(), "{file}");
}

/// Supersession between two notes (the input cut at its first NUL: newer, older): never
/// panics; a note never supersedes itself; a supersession names an attribute and two
/// different values.
pub fn supersession(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (newer, older) = text.split_once('\0').unwrap_or((&text, ""));
    for (a, b) in [(newer, older), (older, newer)] {
        if let Some(s) = supersedes(a, b) {
            assert!(!s.attribute.is_empty(), "{s:?}");
            assert_ne!(s.old_value, s.new_value, "{s:?}");
            assert!(s.reason().contains(" → "), "{s:?}");
        }
    }
    assert_eq!(
        supersedes(newer, newer),
        None,
        "{newer:?} supersedes itself"
    );
}
