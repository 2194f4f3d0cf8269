//! Markdown folders and Obsidian vaults, in and out (pure: the caller walks the folder and
//! reads the bytes; nothing here panics on any input).
//!
//! **In.** Every `.md` file is one note. YAML front matter gives `tags`, `keywords`,
//! `context` (or `description`), `created` / `date`, `aliases`; inline `#tags` are added to
//! the tags; `[[target]]`, `[[target|alias]]`, `[[target#heading]]` become *accepted*
//! links of kind `wikilink` to the notes they name (by file name, path or alias — as
//! Obsidian resolves them).
//! Embeds (`![[image.png]]`) and links to attachments are not links between notes. A note
//! without an H1 heading gets its file name as one, since in Obsidian the file name is the
//! title. A file whose front matter cannot be read is a [`Problem`] for that file and the
//! rest of the vault is imported.
//!
//! **Out.** [`render_note`] writes a note as a file Obsidian opens: front matter with
//! `kasten_id` (and `kasten_source`, `kasten_enriched`, `kasten_archived`), `created`,
//! `keywords`, `tags`, `context`, `box` and `links` (target, kind, reason, confidence),
//! the content, and the links again as `[[wikilinks]]` below a marker line that import
//! recognises (that section is generated, not content). Importing such a file restores the
//! note: same id, content, time, annotations, source, state and accepted links.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use pulldown_cmark::{Event as MdEvent, LinkType, Options, Parser as MdParser, Tag, TagEnd};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::{ScanError, Yaml, YamlLoader};

use crate::transfer::{ImportLink, ImportNote, Problem};
use crate::{EnrichState, LinkStatus, NewNote, Note, NoteId};

/// The line above the generated links section of an exported note.
pub const LINKS_MARKER: &str = "%% kasten links: generated on export, ignored on import %%";

/// Front matter larger than this is not read (a file is a note, not a database).
const MAX_FRONT_MATTER: usize = 64 * 1024;
/// Nesting deeper than this in front matter is refused before the tree is built.
const MAX_NESTING: usize = 64;
/// Front matter that grows beyond this when its YAML aliases are expanded is refused.
const MAX_EXPANDED: usize = 1024 * 1024;
/// The link kind of a plain `[[wikilink]]`: the user wrote it, the kind is not said. It is
/// not one of the kinds the LLM uses, so a note's enrichment never proposes a link that
/// collides with one its file already had (links are unique per ends and kind).
pub const WIKILINK_KIND: &str = "wikilink";

/// Whether a path names a Markdown file.
pub fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown")
}

/// Whether a path (relative to the vault, `/`-separated) is inside a hidden folder such as
/// `.obsidian/`, `.trash/` or `.git/`, or is a hidden file: not part of the notes.
pub fn is_hidden(path: &str) -> bool {
    path.split(['/', '\\']).any(|c| c.starts_with('.'))
}

/// A link written in a note's front matter (a Kasten export).
#[derive(Debug, Clone, PartialEq)]
pub struct FrontMatterLink {
    pub target: String,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    pub status: LinkStatus,
}

/// A `[[wikilink]]` in a note's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiLink {
    /// The target as written, without `#heading` / `^block` parts.
    pub target: String,
    pub alias: Option<String>,
}

/// One Markdown file, read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedFile {
    /// The body (without front matter and the generated links section), trimmed.
    pub body: String,
    pub created: Option<DateTime<Utc>>,
    pub tags: Vec<String>,
    pub keywords: Vec<String>,
    pub context: String,
    pub aliases: Vec<String>,
    /// Written by a Kasten export.
    pub kasten_id: Option<NoteId>,
    pub kasten_source: Option<String>,
    pub kasten_enriched: bool,
    pub kasten_archived: bool,
    pub links: Vec<FrontMatterLink>,
    pub wikilinks: Vec<WikiLink>,
    /// Fields that were present but unusable (the note is still imported).
    pub warnings: Vec<String>,
}

/// Reads one Markdown file. An error means the file cannot be imported as it is (not
/// UTF-8, front matter that is not closed or not valid YAML, nesting too deep).
pub fn parse_file(bytes: &[u8]) -> Result<ParsedFile, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "not valid UTF-8 text (bad byte at offset {})",
            e.valid_up_to()
        )
    })?;
    let text = text.trim_start_matches('\u{feff}');
    let (front, body) = split_front_matter(text)?;
    let mut p = ParsedFile::default();
    if let Some(front) = front {
        read_front_matter(front, &mut p)?;
    }
    let body = match find_marker(body) {
        Some(at) => &body[..at],
        None => body,
    };
    p.body = body.trim().to_owned();
    // In a Kasten export the front matter is the whole truth: its tags and links are what
    // the note had (a `#tag` or `[[link]]` in the content may have been changed or
    // rejected since).
    if p.kasten_id.is_none() {
        let scan = scan_body(&p.body);
        for t in scan.tags {
            push_unique(&mut p.tags, t);
        }
        p.wikilinks = scan.links;
    }
    Ok(p)
}

fn find_marker(body: &str) -> Option<usize> {
    let mut at = 0;
    for line in body.split_inclusive('\n') {
        if line.trim() == LINKS_MARKER {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// Splits `---\n…\n---` front matter from the body. No opening line: no front matter.
fn split_front_matter(text: &str) -> Result<(Option<&str>, &str), String> {
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return Ok((None, text));
    };
    if first.trim_end() != "---" {
        return Ok((None, text));
    }
    let start = first.len();
    let mut at = start;
    for line in lines {
        let t = line.trim_end();
        if t == "---" || t == "..." {
            let front = &text[start..at];
            let body = &text[at + line.len()..];
            return Ok((Some(front), body));
        }
        at += line.len();
    }
    Err("front matter opened with '---' on line 1 is never closed by a '---' line".into())
}

fn read_front_matter(front: &str, p: &mut ParsedFile) -> Result<(), String> {
    if front.len() > MAX_FRONT_MATTER {
        return Err(format!(
            "front matter of {} KB is larger than the {} KB this importer reads",
            front.len() / 1024,
            MAX_FRONT_MATTER / 1024
        ));
    }
    let yaml_error = |e: ScanError| {
        let m = e.marker();
        format!(
            "front matter is not valid YAML: {} (line {}, column {} of the front matter)",
            e.info(),
            m.line() + 1,
            m.col() + 1
        )
    };
    // Measured with the YAML event parser (which keeps its own stacks, so any nesting is
    // safe to scan) before the tree is built: deep nesting would make dropping the tree
    // recurse that deep, and YAML aliases are copied where they are used, so a few hundred
    // bytes of nested `*a` expand to gigabytes ("billion laughs").
    let mut size = ExpandedSize::default();
    let mut events = Parser::new_from_str(front);
    loop {
        // event by event: `Parser::load` would recurse once per nesting level
        let (event, _) = events.next_token().map_err(yaml_error)?;
        if event == Event::StreamEnd {
            break;
        }
        size.add(event);
    }
    if size.deepest > MAX_NESTING {
        return Err("front matter is nested too deeply to be note properties".into());
    }
    if size.total > MAX_EXPANDED {
        return Err(format!(
            "front matter expands to more than {} KB through YAML aliases (*name); not read",
            MAX_EXPANDED / 1024
        ));
    }
    let docs = YamlLoader::load_from_str(front).map_err(yaml_error)?;
    let map = match docs.into_iter().next() {
        None | Some(Yaml::Null) => return Ok(()),
        Some(Yaml::Hash(h)) => h,
        Some(_) => {
            return Err("front matter is not a list of `key: value` properties".into());
        }
    };
    for (k, v) in &map {
        let Some(key) = scalar(k) else { continue };
        let key = key.to_ascii_lowercase();
        match key.as_str() {
            "tags" | "tag" => {
                for t in strings(v, true) {
                    push_unique(&mut p.tags, t.trim_start_matches('#').trim().to_owned());
                }
            }
            "keywords" | "keyword" => {
                for t in strings(v, false) {
                    push_unique(&mut p.keywords, t);
                }
            }
            "context" | "description" | "summary" if p.context.is_empty() => {
                p.context = scalar(v).unwrap_or_default().trim().to_owned();
            }
            "aliases" | "alias" => {
                for t in strings(v, false) {
                    push_unique(&mut p.aliases, t);
                }
            }
            "created" | "date" | "created_at" | "created-at" | "time" => {
                if p.created.is_some() && key != "created" {
                    continue;
                }
                match scalar(v).map(|s| parse_date(&s)) {
                    Some(Some(t)) => p.created = Some(t),
                    Some(None) | None if matches!(v, Yaml::Null) => {}
                    _ => p.warnings.push(format!(
                        "'{key}' is not a date or time this importer understands ({}); the note gets the file's time",
                        scalar(v).unwrap_or_else(|| "not text".into())
                    )),
                }
            }
            "kasten_id" => match scalar(v).map(|s| NoteId::parse(&s)) {
                Some(Ok(id)) => p.kasten_id = Some(id),
                _ => p
                    .warnings
                    .push("'kasten_id' is not a Kasten note id; a new id is given".into()),
            },
            "kasten_source" => p.kasten_source = scalar(v).filter(|s| !s.trim().is_empty()),
            "kasten_enriched" => p.kasten_enriched = matches!(v, Yaml::Boolean(true)),
            "kasten_archived" => p.kasten_archived = matches!(v, Yaml::Boolean(true)),
            "links" => read_links(v, p),
            _ => {}
        }
    }
    Ok(())
}

/// The size of a YAML stream as the loader builds it, every alias expanded: the bytes of
/// each scalar plus one per node. Anchors are measured when they close; an alias adds the
/// size of its anchor again.
#[derive(Default)]
struct ExpandedSize {
    /// Open sequences and mappings: their anchor id (0: none) and size so far.
    open: Vec<(usize, usize)>,
    anchors: HashMap<usize, usize>,
    total: usize,
    /// The deepest nesting of sequences and mappings.
    deepest: usize,
}

impl ExpandedSize {
    fn add(&mut self, ev: Event) {
        let size = match ev {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.open.push((anchor, 1));
                self.deepest = self.deepest.max(self.open.len());
                return;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((anchor, size)) = self.open.pop() else {
                    return;
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, size);
                }
                size
            }
            Event::Scalar(value, _, anchor, _) => {
                let size = value.len().saturating_add(1);
                if anchor > 0 {
                    self.anchors.insert(anchor, size);
                }
                size
            }
            Event::Alias(anchor) => self.anchors.get(&anchor).copied().unwrap_or(1),
            _ => return,
        };
        match self.open.last_mut() {
            Some((_, parent)) => *parent = parent.saturating_add(size),
            None => self.total = self.total.saturating_add(size),
        }
    }
}

fn read_links(v: &Yaml, p: &mut ParsedFile) {
    let Yaml::Array(items) = v else {
        // Obsidian users also keep `links: "[[a]]"` style properties: plain targets
        for t in strings(v, false) {
            push_plain_link(&t, p);
        }
        return;
    };
    for item in items {
        match item {
            Yaml::Hash(h) => {
                let get = |k: &str| h.get(&Yaml::String(k.to_owned()));
                let Some(target) = get("target").or_else(|| get("to")).and_then(scalar) else {
                    p.warnings
                        .push("a link in the front matter has no 'target'; skipped".into());
                    continue;
                };
                let kind = get("kind")
                    .and_then(scalar)
                    .map(|k| k.trim().to_owned())
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| WIKILINK_KIND.to_owned());
                let reason = get("reason").and_then(scalar).unwrap_or_default();
                let confidence = get("confidence")
                    .and_then(|c| match c {
                        Yaml::Real(r) => r.parse::<f64>().ok(),
                        Yaml::Integer(i) => Some(*i as f64),
                        _ => None,
                    })
                    .filter(|c| c.is_finite())
                    .map_or(1.0, |c| c.clamp(0.0, 1.0));
                let status = match get("status").and_then(scalar).as_deref() {
                    Some("proposed") => LinkStatus::Proposed,
                    _ => LinkStatus::Accepted,
                };
                p.links.push(FrontMatterLink {
                    target: strip_brackets(&target),
                    kind,
                    reason,
                    confidence,
                    status,
                });
            }
            other => {
                if let Some(t) = scalar(other) {
                    push_plain_link(&t, p);
                }
            }
        }
    }
}

fn push_plain_link(t: &str, p: &mut ParsedFile) {
    let target = strip_brackets(t);
    if !target.is_empty() {
        p.links.push(FrontMatterLink {
            target,
            kind: WIKILINK_KIND.to_owned(),
            reason: String::new(),
            confidence: 1.0,
            status: LinkStatus::Accepted,
        });
    }
}

/// `[[a|b]]` → `a`; `a` → `a`.
fn strip_brackets(t: &str) -> String {
    let t = t.trim();
    let t = t
        .strip_prefix("[[")
        .and_then(|x| x.strip_suffix("]]"))
        .unwrap_or(t);
    t.split('|').next().unwrap_or("").trim().to_owned()
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A list property: a YAML list, or one text split at commas (and spaces, for tags).
fn strings(y: &Yaml, split_spaces: bool) -> Vec<String> {
    let parts: Vec<String> = match y {
        Yaml::Array(a) => a.iter().filter_map(scalar).collect(),
        other => match scalar(other) {
            Some(s) => s
                .split(|c: char| c == ',' || (split_spaces && c.is_whitespace()))
                .map(str::to_owned)
                .collect(),
            None => Vec::new(),
        },
    };
    parts
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !s.is_empty() && !v.iter().any(|x| x == &s) {
        v.push(s);
    }
}

/// RFC 3339, `YYYY-MM-DD`, `YYYY-MM-DD HH:MM[:SS]`, `YYYY-MM-DDTHH:MM[:SS]` (UTC).
pub fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(s, f) {
            return Some(d.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
}

struct BodyScan {
    tags: Vec<String>,
    links: Vec<WikiLink>,
}

/// Inline `#tags` and `[[wikilinks]]` of a body, read as Markdown (CommonMark with
/// Obsidian's wikilinks): taken only from text, never from code blocks (fenced or
/// indented), code spans, HTML, link destinations, autolinks or bare URLs. Embeds
/// (`![[image.png]]`) are not links.
fn scan_body(body: &str) -> BodyScan {
    let mut out = BodyScan {
        tags: Vec::new(),
        links: Vec::new(),
    };
    // Text runs are gathered until something that is not text ends them, since the parser
    // may cut one run of text into several events.
    let mut run = String::new();
    // The wikilink being read: its target, whether it has an alias (`|`), the alias text.
    let mut wiki: Option<(String, bool, String)> = None;
    // Depth inside embeds, images, code blocks, HTML blocks and autolinks: no tags there.
    let mut opaque = 0usize;
    for event in MdParser::new_ext(body, Options::ENABLE_WIKILINKS) {
        if opaque > 0 {
            match event {
                MdEvent::Start(_) => opaque += 1,
                MdEvent::End(_) => opaque -= 1,
                _ => {}
            }
            continue;
        }
        match event {
            MdEvent::Text(t) => {
                if let Some((_, _, alias)) = wiki.as_mut() {
                    alias.push_str(&t);
                } else {
                    run.push_str(&t);
                }
            }
            MdEvent::SoftBreak | MdEvent::HardBreak => run.push('\n'),
            MdEvent::Start(Tag::Link {
                link_type: LinkType::WikiLink { has_pothole },
                dest_url,
                ..
            }) if wiki.is_none() => {
                scan_text(&run, &mut out);
                run.clear();
                wiki = Some((dest_url.to_string(), has_pothole, String::new()));
            }
            MdEvent::End(TagEnd::Link) if wiki.is_some() => {
                if let Some((target, has_alias, alias)) = wiki.take()
                    && let Some(mut l) = wikilink(&target)
                {
                    let alias = alias.trim();
                    l.alias = (has_alias && !alias.is_empty()).then(|| alias.to_owned());
                    out.links.push(l);
                }
            }
            MdEvent::Start(
                Tag::Image { .. }
                | Tag::CodeBlock(_)
                | Tag::HtmlBlock
                | Tag::Link {
                    link_type: LinkType::Autolink | LinkType::Email | LinkType::WikiLink { .. },
                    ..
                },
            ) => {
                scan_text(&run, &mut out);
                run.clear();
                opaque += 1;
            }
            _ => {
                // code spans, inline HTML, rules, the start or end of any other block or span
                scan_text(&run, &mut out);
                run.clear();
            }
        }
    }
    scan_text(&run, &mut out);
    out
}

/// `#tags` in a run of text: a `#` at the start of a word (or after `(`) followed by
/// letters, digits, `_`, `-` or `/`, not only digits (`#2024` is not a tag). Words that
/// are URLs are skipped.
fn scan_text(text: &str, out: &mut BodyScan) {
    for word in text.split_whitespace() {
        if word.contains("://") || word.starts_with("www.") {
            continue;
        }
        let mut prev: Option<char> = None;
        for (at, c) in word.char_indices() {
            if c == '#' && matches!(prev, None | Some('(')) {
                let tag: String = word[at + 1..]
                    .chars()
                    .take_while(|x| x.is_alphanumeric() || matches!(x, '_' | '-' | '/'))
                    .collect();
                let tag = tag.trim_end_matches('/');
                if !tag.is_empty() && tag.chars().any(|x| !x.is_ascii_digit()) {
                    push_unique(&mut out.tags, tag.to_owned());
                }
            }
            prev = Some(c);
        }
    }
}

fn wikilink(inner: &str) -> Option<WikiLink> {
    let (target, alias) = match inner.split_once('|') {
        Some((t, a)) => (t, Some(a.trim().to_owned()).filter(|a| !a.is_empty())),
        None => (inner, None),
    };
    let target = target.split(['#', '^']).next().unwrap_or("").trim();
    if target.is_empty() {
        return None; // [[#heading]]: a link inside the same note
    }
    Some(WikiLink {
        target: target.to_owned(),
        alias,
    })
}

/// One file of a vault. `bytes` is `None` for files that are not Markdown (attachments:
/// the caller need not read them).
#[derive(Debug, Clone)]
pub struct VaultFile {
    /// Relative to the vault, `/`-separated.
    pub path: String,
    pub bytes: Option<Vec<u8>>,
    /// The file's modification time, the note's time when the front matter has none.
    pub modified: Option<DateTime<Utc>>,
}

/// What a vault turns into.
#[derive(Debug, Clone, Default)]
pub struct VaultImport {
    pub notes: Vec<ImportNote>,
    pub links: Vec<ImportLink>,
    /// Files that were not imported, and why.
    pub problems: Vec<Problem>,
    /// Imported, but something in them was ignored.
    pub warnings: Vec<Problem>,
    /// Links whose target is not a note of the vault.
    pub unresolved: Vec<Problem>,
    /// Files that are not Markdown (images, PDFs, …), skipped.
    pub attachments: usize,
    /// Files inside hidden folders (`.obsidian/`, `.trash/`, …), ignored.
    pub hidden: usize,
}

/// One file of a vault as listed, before it is read ([`plan_vault_reading`] reads the
/// Markdown ones one at a time).
#[derive(Debug, Clone)]
pub struct VaultEntry {
    /// Relative to the vault, `/`-separated.
    pub path: String,
    /// The file's modification time, the note's time when the front matter has none.
    pub modified: Option<DateTime<Utc>>,
}

/// What reading one file of a vault gave: its bytes, nothing (not Markdown after all: an
/// attachment), or why it could not be read (the file is a problem, the import goes on).
pub type ReadResult = Result<Option<Vec<u8>>, String>;

/// Turns the files of a vault called `root` into notes and links. Sources are
/// `ROOT/relative/path.md` unless the file is a Kasten export (`kasten_id`), whose source
/// is its `kasten_source` (or none).
pub fn plan_vault(root: &str, files: &[VaultFile]) -> VaultImport {
    let entries = files
        .iter()
        .map(|f| VaultEntry {
            path: f.path.clone(),
            modified: f.modified,
        })
        .collect();
    let bytes: HashMap<&str, &[u8]> = files
        .iter()
        .filter_map(|f| Some((f.path.as_str(), f.bytes.as_deref()?)))
        .collect();
    plan_vault_reading(root, entries, &mut |path| {
        Ok(bytes.get(path).map(|b| b.to_vec()))
    })
}

/// [`plan_vault`] over a listing, reading each Markdown file with `read` (given the
/// entry's path as listed) only when its turn comes and dropping its bytes once parsed:
/// a vault is held once, as the notes it turns into, never also as files and parses.
pub fn plan_vault_reading(
    root: &str,
    mut entries: Vec<VaultEntry>,
    read: &mut dyn FnMut(&str) -> ReadResult,
) -> VaultImport {
    let mut out = VaultImport::default();
    // as many notes as Markdown files, reserved at once: at 100k notes a list grown by
    // doubling holds a quarter of itself unused, and both copies while it moves
    let notes = entries
        .iter()
        .filter(|f| !is_hidden(&f.path) && is_markdown(&f.path))
        .count();
    out.notes.reserve_exact(notes);
    let mut parsed: Vec<(String, ParsedFile)> = Vec::with_capacity(notes);
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    for f in entries {
        let path = f.path.replace('\\', "/");
        if is_hidden(&path) {
            out.hidden += 1;
            continue;
        }
        if !is_markdown(&path) {
            out.attachments += 1;
            continue;
        }
        let bytes = match read(&f.path) {
            Ok(Some(b)) => b,
            Ok(None) => {
                out.attachments += 1;
                continue;
            }
            Err(message) => {
                out.problems.push(Problem {
                    origin: path.clone(),
                    message,
                });
                continue;
            }
        };
        let parsed_file = parse_file(&bytes);
        drop(bytes);
        let mut p = match parsed_file {
            Ok(p) => p,
            Err(message) => {
                out.problems.push(Problem {
                    origin: path.clone(),
                    message,
                });
                continue;
            }
        };
        let stem = file_stem(&path);
        // a Kasten export's body is the content; a note with its own H1 keeps it
        // the body moves into the note: link resolution needs only the rest of the parse
        let body = std::mem::take(&mut p.body);
        let content = if p.kasten_id.is_some()
            || p.kasten_source.is_some()
            || body.lines().next().is_some_and(|l| l.starts_with("# "))
        {
            body
        } else if body.is_empty() {
            format!("# {stem}")
        } else {
            format!("# {stem}\n\n{body}")
        };
        let note = match NewNote::new(&content) {
            Ok(n) => n,
            Err(e) => {
                out.problems.push(Problem {
                    origin: path.clone(),
                    message: e.to_string(),
                });
                continue;
            }
        };
        for w in p.warnings.drain(..) {
            out.warnings.push(Problem {
                origin: path.clone(),
                message: w,
            });
        }
        // a Kasten export says where the note came from (nowhere, without kasten_source)
        let source = match (&p.kasten_source, &p.kasten_id) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(format!("{root}/{path}")),
        };
        let file_source = Some(format!("{root}/{path}"));
        out.notes.push(ImportNote {
            note: note.at(p.created.or(f.modified)).with_source(source),
            id: p.kasten_id.clone(),
            keywords: std::mem::take(&mut p.keywords),
            tags: std::mem::take(&mut p.tags),
            context: std::mem::take(&mut p.context),
            enriched: p.kasten_enriched,
            archived: p.kasten_archived,
            origin: path.clone(),
            file_source,
        });
        parsed.push((path, p));
    }
    resolve_links(&parsed, &mut out);
    out
}

fn file_stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    for ext in [".markdown", ".md"] {
        if lower.ends_with(ext) {
            return name[..name.len() - ext.len()].to_owned();
        }
    }
    name.to_owned()
}

/// A target as a lookup key: lowercase, no `.md`, no leading `./` or `/`.
fn target_key(t: &str) -> String {
    let t = t.trim().replace('\\', "/");
    let t = t.trim_start_matches("./").trim_start_matches('/');
    let lower = t.to_lowercase();
    for ext in [".markdown", ".md"] {
        if let Some(s) = lower.strip_suffix(ext) {
            return s.to_owned();
        }
    }
    lower
}

/// Whether a target names a file that is not a note (`photo.png`, `paper.pdf`).
fn is_attachment_target(t: &str) -> bool {
    let name = t.rsplit('/').next().unwrap_or(t);
    match name.rsplit_once('.') {
        Some((_, ext)) => {
            let ext = ext.to_ascii_lowercase();
            !ext.is_empty()
                && ext.len() <= 5
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext != "md"
                && ext != "markdown"
        }
        None => false,
    }
}

fn resolve_links(parsed: &[(String, ParsedFile)], out: &mut VaultImport) {
    // path without extension → note; stem → notes (shortest path wins); alias → note
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut by_stem: HashMap<String, usize> = HashMap::new();
    let mut by_alias: HashMap<String, usize> = HashMap::new();
    for (i, (path, p)) in parsed.iter().enumerate() {
        by_path.entry(target_key(path)).or_insert(i);
        let stem = target_key(&file_stem(path));
        match by_stem.get(&stem) {
            Some(&j) if parsed[j].0.len() <= path.len() => {}
            _ => {
                by_stem.insert(stem, i);
            }
        }
        for a in &p.aliases {
            by_alias.entry(target_key(a)).or_insert(i);
        }
    }
    let resolve = |t: &str| -> Option<usize> {
        let key = target_key(t);
        if let Some(&i) = by_path.get(&key) {
            return Some(i);
        }
        let last = key.rsplit('/').next().unwrap_or(&key);
        if key.contains('/') {
            // a path that is not the full relative path: match its end
            if let Some((i, _)) = parsed
                .iter()
                .enumerate()
                .find(|(_, (p, _))| target_key(p).ends_with(&format!("/{key}")))
            {
                return Some(i);
            }
        }
        by_stem.get(last).or_else(|| by_alias.get(&key)).copied()
    };
    let mut seen: HashSet<(usize, usize, String)> = HashSet::new();
    for (i, (path, p)) in parsed.iter().enumerate() {
        let mut targets_done: HashSet<usize> = HashSet::new();
        let mut push = |to: usize, l: ImportLink, out: &mut VaultImport| {
            if seen.insert((l.from, to, l.kind.clone())) {
                out.links.push(l);
            }
        };
        for fl in &p.links {
            match resolve(&fl.target) {
                Some(to) if to != i => {
                    targets_done.insert(to);
                    push(
                        to,
                        ImportLink {
                            from: i,
                            to,
                            kind: fl.kind.clone(),
                            reason: fl.reason.clone(),
                            confidence: fl.confidence,
                            status: fl.status,
                        },
                        out,
                    );
                }
                Some(_) => {}
                None if is_attachment_target(&fl.target) => {}
                None => out.unresolved.push(Problem {
                    origin: path.clone(),
                    message: format!("link to '{}' names no note of the vault", fl.target),
                }),
            }
        }
        for wl in &p.wikilinks {
            match resolve(&wl.target) {
                Some(to) if to != i && !targets_done.contains(&to) => {
                    targets_done.insert(to);
                    push(
                        to,
                        ImportLink {
                            from: i,
                            to,
                            kind: WIKILINK_KIND.to_owned(),
                            reason: format!("[[{}]] in {path}", wl.target),
                            confidence: 1.0,
                            status: LinkStatus::Accepted,
                        },
                        out,
                    );
                }
                Some(_) => {}
                None if is_attachment_target(&wl.target) => {}
                None => out.unresolved.push(Problem {
                    origin: path.clone(),
                    message: format!("[[{}]] names no note of the vault", wl.target),
                }),
            }
        }
    }
}

/// A link as written into an exported file.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderLink {
    /// The target note's file name without `.md`.
    pub target: String,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    pub status: LinkStatus,
}

/// What an exported file shows of a note.
#[derive(Debug, Clone, Copy)]
pub struct NoteView<'a> {
    pub id: &'a NoteId,
    pub content: &'a str,
    pub created_at: DateTime<Utc>,
    pub keywords: &'a [String],
    pub tags: &'a [String],
    pub context: &'a str,
    pub source: Option<&'a str>,
    /// The LLM's enrichment is done (the annotations are final).
    pub enriched: bool,
    /// Archived: kept, out of retrieval.
    pub archived: bool,
}

impl<'a> From<&'a Note> for NoteView<'a> {
    fn from(n: &'a Note) -> Self {
        NoteView {
            id: &n.id,
            content: &n.content,
            created_at: n.created_at,
            keywords: &n.keywords,
            tags: &n.tags,
            context: &n.context,
            source: n.source.as_deref(),
            enriched: n.enrich_state == EnrichState::Done,
            archived: n.status == crate::NoteStatus::Archived,
        }
    }
}

/// File names (without `.md`) for notes, unique ignoring case, in the order given: the
/// source file's name for notes imported from Markdown, otherwise the content's first
/// words; characters file systems or Obsidian links cannot hold are dropped.
pub fn file_names(notes: &[NoteView<'_>]) -> Vec<String> {
    let mut namer = FileNamer::default();
    notes
        .iter()
        .map(|n| namer.unique(base_file_name(n)))
        .collect()
}

/// A note's file name before it is made unique ([`file_names`]).
pub fn base_file_name(n: &NoteView<'_>) -> String {
    let base = n
        .source
        .filter(|s| is_markdown(s))
        .map(file_stem)
        .map(|s| sanitize_name(&s))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| sanitize_name(&title_words(n.content)));
    if base.is_empty() {
        format!("note {}", n.id)
    } else {
        base
    }
}

/// Makes file names unique ignoring case, in the order they are given: the second
/// `Name` becomes `Name 2`, and so on. Holds the names given so far (for a memory that
/// is exported a page at a time).
#[derive(Debug, Default)]
pub struct FileNamer {
    used: HashSet<String>,
}

impl FileNamer {
    pub fn unique(&mut self, base: String) -> String {
        let base = cut_name(&base, MAX_NAME_BYTES).to_owned();
        let mut name = base.clone();
        let mut k = 2;
        while !self.used.insert(name.to_lowercase()) {
            let suffix = format!(" {k}");
            let room = MAX_NAME_BYTES.saturating_sub(suffix.len());
            name = format!("{}{suffix}", cut_name(&base, room));
            k += 1;
        }
        name
    }
}

/// The most bytes of a file name before `.md`. File systems count a name's length in
/// bytes (255 on ext4 and APFS; NTFS counts 255 UTF-16 units, never more than the bytes):
/// a name is cut by bytes, never by characters, since 80 characters of 4 bytes each are
/// 320 bytes. With `.md` a name stays well under 255.
pub const MAX_NAME_BYTES: usize = 200;

/// `s` cut to at most `max` bytes on a character boundary, without a trailing space or
/// dot (Windows drops those, and a name must not end in one).
fn cut_name(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim_end_matches(|c: char| c == '.' || c.is_whitespace())
}

/// The first line's first words, at most ~60 characters.
fn title_words(content: &str) -> String {
    let first = content
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out = String::new();
    for w in first.split_whitespace() {
        if !out.is_empty() && out.chars().count() + w.chars().count() + 1 > 60 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out.chars().take(80).collect()
}

fn sanitize_name(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' | '#' | '^' | '[' | ']' => ' ',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let joined = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = joined.trim_matches(|c: char| c == '.' || c.is_whitespace());
    let short: String = trimmed.chars().take(100).collect();
    cut_name(&short, MAX_NAME_BYTES).to_owned()
}

/// YAML text for a string: a JSON string is a valid YAML double-quoted scalar.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn list(v: &[String]) -> String {
    format!(
        "[{}]",
        v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")
    )
}

/// A note as an Obsidian Markdown file (see the module docs).
pub fn render_note(note: NoteView<'_>, boxes: &[String], links: &[RenderLink]) -> String {
    let mut s = String::with_capacity(note.content.len() + 512);
    s.push_str("---\n");
    s.push_str(&format!("kasten_id: {}\n", note.id));
    if let Some(src) = note.source {
        s.push_str(&format!("kasten_source: {}\n", q(src)));
    }
    if note.enriched {
        s.push_str("kasten_enriched: true\n");
    }
    if note.archived {
        s.push_str("kasten_archived: true\n");
    }
    s.push_str(&format!(
        "created: {}\n",
        note.created_at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    ));
    s.push_str(&format!("keywords: {}\n", list(note.keywords)));
    s.push_str(&format!("tags: {}\n", list(note.tags)));
    s.push_str(&format!("context: {}\n", q(note.context)));
    match boxes {
        [] => {}
        [one] => s.push_str(&format!("box: {}\n", q(one))),
        many => s.push_str(&format!("box: {}\n", list(many))),
    }
    if links.is_empty() {
        s.push_str("links: []\n");
    } else {
        s.push_str("links:\n");
        for l in links {
            s.push_str(&format!(
                "  - target: {}\n",
                q(&format!("[[{}]]", l.target))
            ));
            s.push_str(&format!("    kind: {}\n", q(&l.kind)));
            s.push_str(&format!("    reason: {}\n", q(&l.reason)));
            s.push_str(&format!("    confidence: {}\n", yaml_float(l.confidence)));
            let status = match l.status {
                LinkStatus::Proposed => "proposed",
                _ => "accepted",
            };
            s.push_str(&format!("    status: {status}\n"));
        }
    }
    s.push_str("---\n");
    s.push_str(note.content);
    s.push('\n');
    if !links.is_empty() {
        s.push('\n');
        s.push_str(LINKS_MARKER);
        s.push('\n');
        for l in links {
            let reason = l.reason.replace('\n', " ");
            let proposed = if l.status == LinkStatus::Proposed {
                " (proposed)"
            } else {
                ""
            };
            if reason.is_empty() {
                s.push_str(&format!("- {}{proposed} [[{}]]\n", l.kind, l.target));
            } else {
                s.push_str(&format!(
                    "- {}{proposed} [[{}]]: {reason}\n",
                    l.kind, l.target
                ));
            }
        }
    }
    s
}

/// A float YAML reads back as the same float (always with a `.` so it stays a float).
fn yaml_float(x: f64) -> String {
    let x = if x.is_finite() { x } else { 0.0 };
    let s = format!("{x}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests;
