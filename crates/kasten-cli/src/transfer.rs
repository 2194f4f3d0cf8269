//! `kasten import --format markdown|chat`, `kasten export`, `kasten backup`, `kasten restore`.
//!
//! Files are read and parsed before the memory is opened (a wrong path or a broken file is
//! reported without touching anything); the engine then saves what is new. Per-file
//! problems (malformed front matter, a bad message) are reported and the rest imported.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kasten_core::transfer::Problem;
use kasten_core::{NewNote, NoteId};
use kasten_engine::{BoxLabel, Engine, ImportProgress, Progress};
use serde_json::json;

use crate::progress_bar;

pub use kasten_engine::files::{ImportPlan, plan_chat, plan_markdown};

/// The JSON Lines records of one batch that are not in the memory yet. A line without a
/// `source` gets `FILE:LINE` (the stream convention of `kasten_core::timeline`), so
/// importing the same file again — after a crash, say — adds only what is missing.
pub async fn not_yet_imported(
    engine: &Engine,
    file: &Path,
    chunk: &[(usize, NewNote)],
) -> Result<Vec<NewNote>> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "import".into());
    let notes: Vec<NewNote> = chunk
        .iter()
        .map(|(line, n)| {
            let mut n = n.clone();
            if n.source.is_none() {
                n.source = Some(format!("{name}:{line}"));
            }
            n
        })
        .collect();
    let sources: Vec<String> = notes.iter().filter_map(|n| n.source.clone()).collect();
    let there: std::collections::HashSet<(Option<String>, String)> = engine
        .notes_with_sources(&sources)
        .await?
        .into_iter()
        .map(|(_, s, c)| (s, c))
        .collect();
    Ok(notes
        .into_iter()
        .filter(|n| !there.contains(&(n.source.clone(), n.content.clone())))
        .collect())
}

/// Saves an import with a progress bar and reports what happened.
pub async fn import(engine: &Engine, plan: ImportPlan, json: bool) -> Result<()> {
    // per-file problems first, on stderr (before the bar, which is hidden without a terminal)
    for p in &plan.problems {
        eprintln!("not imported: {p}");
    }
    for p in &plan.warnings {
        eprintln!("warning: {p}");
    }
    let pb = progress_bar();
    let report = |p: ImportProgress| {
        let (msg, done, total) = match p {
            ImportProgress::Notes { done, total } => ("importing", done, total),
            ImportProgress::Links { done, total } => ("linking", done, total),
        };
        pb.set_message(msg);
        pb.set_length(total);
        pb.set_position(done);
    };
    let summary = engine
        .import_notes(&plan.notes, &plan.links, plan.batch, &report)
        .await
        .with_context(|| {
            format!(
                "the import of {} stopped; batches committed before the error are saved, and importing again skips them",
                plan.path.display()
            )
        })?;
    pb.finish_and_clear();
    let problems = |v: &[Problem]| -> Vec<serde_json::Value> {
        v.iter()
            .map(|p| json!({"file": p.origin, "message": p.message}))
            .collect()
    };
    if json {
        let v = json!({
            "path": plan.path.display().to_string(),
            "format": plan.format,
            "created": summary.created,
            "existing": summary.existing,
            "links_created": summary.links_created,
            "links_existing": summary.links_existing,
            "queued": summary.queued,
            "attachments_skipped": plan.attachments,
            "hidden_skipped": plan.hidden,
            "problems": problems(&plan.problems),
            "warnings": problems(&plan.warnings),
            "unresolved_links": problems(&plan.unresolved),
            "ids": summary.ids,
        });
        println!("{v}");
    } else {
        println!(
            "imported {} new note(s) from {} ({} already there), {} new link(s) ({} already there)",
            summary.created,
            plan.path.display(),
            summary.existing,
            summary.links_created,
            summary.links_existing
        );
        if plan.attachments > 0 {
            println!("skipped {} attachment(s) (not Markdown)", plan.attachments);
        }
        if !plan.problems.is_empty() {
            println!(
                "{} file(s)/record(s) not imported (listed above)",
                plan.problems.len()
            );
        }
        if !plan.unresolved.is_empty() {
            println!(
                "{} link(s) name no imported note and were not created",
                plan.unresolved.len()
            );
        }
        if summary.queued > 0 {
            println!(
                "{} note(s) wait for enrichment (`kasten enrich`)",
                summary.queued
            );
        }
    }
    Ok(())
}

/// Writes every note into `dir` (new or empty) as an Obsidian vault.
pub async fn export(engine: &Engine, dir: &Path, json: bool) -> Result<()> {
    if dir.exists() {
        let mut rd =
            std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        if rd.next().is_some() {
            bail!(
                "{} is not empty; export into a new or empty folder (nothing was written)",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let boxes: Vec<BoxLabel> = engine
        .boxes()
        .await?
        .into_iter()
        .map(|b| BoxLabel {
            label: b.label,
            members: b.members,
        })
        .collect();
    let files = engine.export_vault(&boxes).await?;
    let pb = progress_bar();
    pb.set_message("exporting");
    pb.set_length(files.len() as u64);
    for f in &files {
        let p = dir.join(&f.name);
        std::fs::write(&p, &f.text).with_context(|| format!("cannot write {}", p.display()))?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    if json {
        println!(
            "{}",
            json!({"dir": dir.display().to_string(), "files": files.len(),
                   "names": files.iter().map(|f| json!({"file": f.name, "id": f.note})).collect::<Vec<_>>()})
        );
    } else {
        println!("exported {} note(s) to {}", files.len(), dir.display());
    }
    Ok(())
}

/// Writes a full backup to `file` (via a temporary file, so a failure leaves no half file).
pub async fn backup(engine: &Engine, file: &Path, json: bool) -> Result<()> {
    let doc = engine.backup().await?;
    let tmp = file.with_extension("partial");
    {
        let f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, &doc)?;
        w.flush()?;
        w.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, file).with_context(|| format!("cannot write {}", file.display()))?;
    let counts: serde_json::Map<String, serde_json::Value> = doc["tables"]
        .as_object()
        .map(|t| {
            t.iter()
                .map(|(k, v)| (k.clone(), json!(v.as_array().map_or(0, Vec::len))))
                .collect()
        })
        .unwrap_or_default();
    if json {
        println!(
            "{}",
            json!({"file": file.display().to_string(), "tables": counts})
        );
    } else {
        let list: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        println!("backed up to {}: {}", file.display(), list.join(", "));
    }
    Ok(())
}

/// What `kasten restore TARGET` means.
pub enum RestoreTarget {
    /// A backup file, read and parsed.
    Backup(PathBuf, serde_json::Value),
    /// An archived note.
    Note(NoteId),
}

/// A TARGET that is an existing file is a backup; anything else must be a note id.
pub fn restore_target(target: &str) -> Result<RestoreTarget> {
    let p = Path::new(target);
    if p.is_file() {
        let f = std::fs::File::open(p).with_context(|| format!("cannot read {target}"))?;
        let doc: serde_json::Value = serde_json::from_reader(std::io::BufReader::new(f))
            .with_context(|| format!("{target} is not a Kasten backup (not JSON)"))?;
        if doc.get("format").and_then(|f| f.as_str()) != Some(kasten_store::BACKUP_FORMAT) {
            bail!("{target} is not a Kasten backup (it has no \"format\": \"kasten-backup\")");
        }
        return Ok(RestoreTarget::Backup(p.to_owned(), doc));
    }
    match NoteId::parse(target) {
        Ok(id) => Ok(RestoreTarget::Note(id)),
        Err(_) => bail!("{target} is neither a backup file nor a note id"),
    }
}

pub async fn restore(engine: &Engine, target: RestoreTarget, json: bool) -> Result<()> {
    match target {
        RestoreTarget::Backup(path, doc) => {
            let pb = progress_bar();
            let report = |p: Progress| {
                let (msg, done, total) = match p {
                    Progress::Loading { done, total } => ("indexing", done, total),
                    Progress::Reembedding { done, total } => ("re-embedding", done, total),
                };
                pb.set_message(msg);
                pb.set_length(total);
                pb.set_position(done);
            };
            let busy = !engine.non_empty_tables().await?.is_empty();
            let s = engine
                .restore_backup(&doc, &report)
                .await
                .with_context(|| {
                    if busy {
                        format!("cannot restore {}", path.display())
                    } else {
                        format!(
                            "cannot restore {}; what was written so far is incomplete: delete this memory and restore into a new one",
                            path.display()
                        )
                    }
                })?;
            pb.finish_and_clear();
            if json {
                println!(
                    "{}",
                    json!({"restored": path.display().to_string(), "tables": s.tables, "schema_version": s.schema_version})
                );
            } else {
                let list: Vec<String> = s.tables.iter().map(|(k, v)| format!("{v} {k}")).collect();
                println!("restored {}: {}", path.display(), list.join(", "));
            }
            Ok(())
        }
        RestoreTarget::Note(id) => {
            let note = engine.restore_archived(&id, crate::ACTOR).await?;
            if json {
                println!(
                    "{}",
                    json!({"restored": note.id, "status": note.status.as_str()})
                );
            } else {
                println!("restored note {} to the active memory", note.id);
            }
            Ok(())
        }
    }
}
