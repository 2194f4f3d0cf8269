//! Reading import sources from disk: a Markdown folder or Obsidian vault, one Markdown
//! file, a chat transcript. Parsing is pure (`kasten_core::markdown`, `kasten_core::
//! transfer`); this reads the files and says in words which one could not be read. The CLI
//! and the desktop app both use it, then save with [`Engine::import_notes`].
//!
//! [`Engine::import_notes`]: crate::Engine::import_notes

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use kasten_core::markdown::{VaultEntry, is_hidden, is_markdown, plan_vault_reading};
use kasten_core::transfer::{ImportLink, ImportNote, Problem, parse_chat};

use crate::EngineError;

fn file_error(what: String, e: std::io::Error) -> EngineError {
    EngineError::File(format!("{what}: {e}"))
}

/// An import, parsed and ready to save.
pub struct ImportPlan {
    pub path: PathBuf,
    pub format: &'static str,
    pub notes: Vec<ImportNote>,
    pub links: Vec<ImportLink>,
    /// Files or records not imported.
    pub problems: Vec<Problem>,
    /// Imported, with something ignored.
    pub warnings: Vec<Problem>,
    /// Links whose target is not a note of the import.
    pub unresolved: Vec<Problem>,
    pub attachments: usize,
    pub hidden: usize,
    pub batch: usize,
}

/// Reads a Markdown folder or Obsidian vault (`.obsidian/` and other hidden folders are
/// ignored; files that are not Markdown are counted as attachments and not read). The
/// folder is listed first and each Markdown file read only when its turn comes, so the
/// vault is held in memory once, as its notes; a file that cannot be read is a problem
/// of the import (named, the others imported), not its end.
pub fn plan_markdown(path: &Path, batch: usize) -> Result<ImportPlan, EngineError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| file_error(format!("cannot read {}", path.display()), e))?;
    let (root, base, entries) = if meta.is_dir() {
        let mut entries = Vec::new();
        walk(path, path, &mut entries)?;
        (dir_name(path), path.to_owned(), entries)
    } else {
        // one Markdown file: a vault of one note, named after its folder
        let parent = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !is_markdown(&name) {
            return Err(EngineError::File(format!(
                "{} is not a Markdown file or folder",
                path.display()
            )));
        }
        // a single file that cannot be read is the import's error, not a problem of it
        std::fs::File::open(path)
            .map_err(|e| file_error(format!("cannot read {}", path.display()), e))?;
        (
            dir_name(parent),
            parent.to_owned(),
            vec![VaultEntry {
                path: name,
                modified: mtime(&meta),
            }],
        )
    };
    let v = plan_vault_reading(&root, entries, &mut |rel| {
        let p = base.join(rel);
        std::fs::read(&p)
            .map(Some)
            .map_err(|e| format!("cannot read {}: {e}", p.display()))
    });
    Ok(ImportPlan {
        path: path.to_owned(),
        format: "markdown",
        notes: v.notes,
        links: v.links,
        problems: v.problems,
        warnings: v.warnings,
        unresolved: v.unresolved,
        attachments: v.attachments,
        hidden: v.hidden,
        batch,
    })
}

fn dir_name(p: &Path) -> String {
    let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    abs.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "vault".into())
}

fn mtime(m: &std::fs::Metadata) -> Option<DateTime<Utc>> {
    m.modified().ok().map(DateTime::<Utc>::from)
}

/// Lists the files under `dir` (relative to `root`, `/`-separated) without reading them;
/// symbolic links to folders are not followed (no loops), hidden folders are not entered
/// but listed (to be counted).
fn walk(root: &Path, dir: &Path, out: &mut Vec<VaultEntry>) -> Result<(), EngineError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| file_error(format!("cannot read {}", dir.display()), e))?;
    let mut entries: Vec<_> = rd
        .collect::<std::io::Result<_>>()
        .map_err(|e| file_error(format!("cannot read {}", dir.display()), e))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .unwrap_or(&p)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let ft = e
            .file_type()
            .map_err(|err| file_error(format!("cannot read {}", p.display()), err))?;
        if ft.is_dir() {
            if is_hidden(&rel) {
                out.push(VaultEntry {
                    path: rel,
                    modified: None,
                });
                continue;
            }
            walk(root, &p, out)?;
        } else if ft.is_file() || ft.is_symlink() {
            let meta = match std::fs::metadata(&p) {
                Ok(m) if m.is_file() => m,
                _ => continue,
            };
            out.push(VaultEntry {
                path: rel,
                modified: mtime(&meta),
            });
        }
    }
    Ok(())
}

/// Reads a chat transcript (a JSON list of `{role, content, time}`).
pub fn plan_chat(path: &Path, batch: usize) -> Result<ImportPlan, EngineError> {
    let bytes = std::fs::read(path)
        .map_err(|e| file_error(format!("cannot read {}", path.display()), e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "chat".into());
    let c = parse_chat(&name, &bytes)
        .map_err(|e| EngineError::File(format!("{}: {e}", path.display())))?;
    Ok(ImportPlan {
        path: path.to_owned(),
        format: "chat",
        notes: c.notes,
        links: Vec::new(),
        problems: c.problems,
        warnings: Vec::new(),
        unresolved: Vec::new(),
        attachments: 0,
        hidden: 0,
        batch,
    })
}

/// Reads a JSON Lines file (`{"content": …, "time"?: …, "source"?: …}` per line). Bad lines
/// are problems, the rest is imported; a line without a source gets `FILE:LINE`, so that
/// importing the file again adds nothing.
pub fn plan_jsonl(path: &Path, batch: usize) -> Result<ImportPlan, EngineError> {
    let bytes = std::fs::read(path)
        .map_err(|e| file_error(format!("cannot read {}", path.display()), e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "import".into());
    let (records, bad) = kasten_core::import::parse_jsonl_bytes(&bytes);
    let notes = records
        .into_iter()
        .map(|r| {
            let origin = format!("{name}:{}", r.line);
            let mut note = r.note;
            if note.source.is_none() {
                note.source = Some(origin.clone());
            }
            ImportNote::plain(note, origin)
        })
        .collect();
    Ok(ImportPlan {
        path: path.to_owned(),
        format: "jsonl",
        notes,
        links: Vec::new(),
        problems: bad
            .into_iter()
            .map(|e| Problem {
                origin: format!("{name}:{}", e.line),
                message: e.message,
            })
            .collect(),
        warnings: Vec::new(),
        unresolved: Vec::new(),
        attachments: 0,
        hidden: 0,
        batch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_plans_keep_good_lines_and_name_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("n.jsonl");
        std::fs::write(
            &f,
            "{\"content\":\"a\"}\nnot json\n{\"content\":\"b\",\"source\":\"s\"}\n",
        )
        .unwrap();
        let p = plan_jsonl(&f, 10).unwrap();
        assert_eq!(p.notes.len(), 2);
        assert_eq!(p.notes[0].note.source.as_deref(), Some("n.jsonl:1"));
        assert_eq!(p.notes[1].note.source.as_deref(), Some("s"));
        assert_eq!(p.problems.len(), 1);
        assert_eq!(p.problems[0].origin, "n.jsonl:2");
    }

    #[test]
    fn unreadable_paths_are_errors_in_words() {
        let err = plan_markdown(Path::new("/nonexistent/vault"), 10)
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent/vault"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.txt");
        std::fs::write(&f, "hi").unwrap();
        assert!(plan_markdown(&f, 10).is_err());
        assert!(plan_chat(&f, 10).is_err());
    }
}
