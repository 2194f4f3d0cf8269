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

mod body;
mod export;
mod front_matter;
mod vault;

use body::scan_body;
pub use export::{
    FileNamer, MAX_NAME_BYTES, NoteView, RenderLink, base_file_name, file_names, render_note,
};
pub use front_matter::parse_date;
use front_matter::push_unique;
use front_matter::read_front_matter;
pub use vault::{ReadResult, VaultEntry, VaultFile, VaultImport, plan_vault, plan_vault_reading};

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
pub const WIKILINK_KIND: &str = crate::LinkKind::Wikilink.as_str();

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

#[cfg(test)]
mod tests;
