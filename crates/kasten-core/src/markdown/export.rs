//! Notes out: file names that are unique and safe, and a note rendered as a file
//! Obsidian opens (front matter, content, the links again as wikilinks).

use super::vault::file_stem;
use super::*;

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
pub(super) fn cut_name(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim_end_matches(|c: char| c == '.' || c.is_whitespace())
}

/// The first line's first words, at most ~60 characters.
pub(super) fn title_words(content: &str) -> String {
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

pub(super) fn sanitize_name(s: &str) -> String {
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
pub(super) fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

pub(super) fn list(v: &[String]) -> String {
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
                LinkStatus::Proposed => LinkStatus::Proposed,
                _ => LinkStatus::Accepted,
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
pub(super) fn yaml_float(x: f64) -> String {
    let x = if x.is_finite() { x } else { 0.0 };
    let s = format!("{x}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}
