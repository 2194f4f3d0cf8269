//! A vault in: which files are notes, read one at a time, and their links resolved by
//! file name, path or alias as Obsidian resolves them.

use super::*;

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

pub(super) fn file_stem(path: &str) -> String {
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
pub(super) fn target_key(t: &str) -> String {
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
pub(super) fn is_attachment_target(t: &str) -> bool {
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

pub(super) fn resolve_links(parsed: &[(String, ParsedFile)], out: &mut VaultImport) {
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
