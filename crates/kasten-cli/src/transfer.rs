//! `kasten import --format markdown|chat`, `kasten export`, `kasten backup`, `kasten restore`
//! (into an empty memory, or `--replace` in place of this one).
//!
//! Files are read and parsed before the memory is opened (a wrong path or a broken file is
//! reported without touching anything); the engine then saves what is new. Per-file
//! problems (malformed front matter, a bad message) are reported and the rest imported.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use kasten_core::import::{JsonlLines, LineError};
use kasten_core::transfer::Problem;
use kasten_core::{NewNote, NoteId};
use kasten_engine::{BackupFile, StagedRestore, StorageLimits, TableProgress};
use kasten_engine::{Engine, ImportProgress, Progress};
use serde_json::json;

use crate::open::progress_bar;

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

/// Reads a JSON Lines file to the end once: how many lines are good, and the bad ones.
/// Only the bad lines are held.
pub fn scan_jsonl(file: &Path) -> Result<(usize, Vec<LineError>)> {
    let f = std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    let (mut good, mut bad) = (0usize, Vec::new());
    for item in JsonlLines::new(std::io::BufReader::new(f)) {
        match item.with_context(|| format!("cannot read {}", file.display()))? {
            Ok(_) => good += 1,
            Err(e) => bad.push(e),
        }
    }
    Ok((good, bad))
}

/// The good records of a JSON Lines file, `batch` at a time (with their line numbers);
/// bad lines are passed over (they were reported when the file was checked).
pub struct JsonlBatches {
    lines: JsonlLines<std::io::BufReader<std::fs::File>>,
    batch: usize,
    file: PathBuf,
}

impl JsonlBatches {
    pub fn open(file: &Path, batch: usize) -> Result<Self> {
        let f =
            std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
        Ok(JsonlBatches {
            lines: JsonlLines::new(std::io::BufReader::new(f)),
            batch: batch.max(1),
            file: file.to_owned(),
        })
    }

    pub fn next_batch(&mut self) -> Result<Option<Vec<(usize, NewNote)>>> {
        let mut out = Vec::with_capacity(self.batch);
        while out.len() < self.batch {
            let Some(item) = self.lines.next() else {
                break;
            };
            if let Ok(r) = item.with_context(|| format!("cannot read {}", self.file.display()))? {
                out.push((r.line, r.note));
            }
        }
        Ok((!out.is_empty()).then_some(out))
    }
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
        .import_notes(plan.notes, &plan.links, plan.batch, &report)
        .await
        .with_context(|| {
            format!(
                "the import of {} stopped; batches committed before the error are saved, and importing again skips them",
                plan.path.display()
            )
        })?;
    pb.finish_and_clear();
    for n in &summary.new_ids {
        eprintln!("new id: {n}");
    }
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
            "new_ids": summary.new_ids.iter().map(|n| json!({
                "file": n.origin,
                "kasten_id": n.carried,
                "id": n.id,
            })).collect::<Vec<_>>(),
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
        if !summary.new_ids.is_empty() {
            println!(
                "{} file(s) carried the id of another note and got a new one (listed above)",
                summary.new_ids.len()
            );
        }
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
    let boxes = engine.export_boxes().await?;
    let pb = progress_bar();
    pb.set_message("exporting");
    let mut names = Vec::new();
    engine
        .export_vault_each(
            &boxes,
            &mut |f| {
                let p = dir.join(&f.name);
                std::fs::write(&p, &f.text).map_err(|e| {
                    kasten_engine::EngineError::File(format!("cannot write {}: {e}", p.display()))
                })?;
                names.push(json!({"file": f.name, "id": f.note}));
                Ok(())
            },
            &|done, total| {
                pb.set_length(total);
                pb.set_position(done);
            },
        )
        .await?;
    pb.finish_and_clear();
    if json {
        println!(
            "{}",
            json!({"dir": dir.display().to_string(), "files": names.len(), "names": names})
        );
    } else {
        println!("exported {} note(s) to {}", names.len(), dir.display());
    }
    Ok(())
}

/// Writes a full backup to `file`, a page of rows at a time (via a temporary file, so a
/// failure leaves no half file).
pub async fn backup(engine: &Engine, file: &Path, json: bool) -> Result<()> {
    let pb = progress_bar();
    let report = |p: &TableProgress| {
        pb.set_message(format!("backing up {}", p.table));
        pb.set_length(p.total);
        pb.set_position(p.done);
    };
    let counts = engine.backup_to_file(file, &report).await?;
    pb.finish_and_clear();
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
    /// A backup file, read whole once and found sound (nothing is held but where its
    /// tables are).
    Backup(PathBuf, BackupFile),
    /// A backup file (checked as for `Backup`) to take the place of this memory.
    Replace(PathBuf, BackupFile),
    /// An archived note.
    Note(NoteId),
}

/// A TARGET that is an existing file is a backup; anything else must be a note id. A
/// backup is checked to the end before the memory is opened: a damaged or cut-off file
/// is refused without writing anything.
/// With `replace`, TARGET must be a backup file.
pub fn restore_target(target: &str, replace: bool) -> Result<RestoreTarget> {
    let p = Path::new(target);
    if p.is_file() {
        let file = BackupFile::scan(p).map_err(|e| anyhow::anyhow!("{e}; nothing was restored"))?;
        return Ok(if replace {
            RestoreTarget::Replace(p.to_owned(), file)
        } else {
            RestoreTarget::Backup(p.to_owned(), file)
        });
    }
    if replace {
        bail!("{target} is not a backup file; --replace takes one (nothing was restored)");
    }
    match NoteId::parse(target) {
        Ok(id) => Ok(RestoreTarget::Note(id)),
        Err(_) => bail!("{target} is neither a backup file nor a note id"),
    }
}

pub async fn restore(engine: &Engine, target: RestoreTarget, json: bool) -> Result<()> {
    match target {
        RestoreTarget::Backup(path, file) => {
            let pb = progress_bar();
            let rows = |p: &TableProgress| {
                pb.set_message(format!("restoring {}", p.table));
                pb.set_length(p.total);
                pb.set_position(p.done);
            };
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
                .restore_backup_file(&file, &rows, &report)
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
        // `run` hands a replacement to `replace` before any memory is opened
        RestoreTarget::Replace(path, _) => bail!(
            "{} replaces the memory and cannot be restored into an open one",
            path.display()
        ),
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

/// `kasten restore --replace FILE`: the backup takes the place of this memory, as the app's
/// Restore does (`kasten_engine::replace`). The memory is held while the backup is restored
/// and checked beside it, so nothing changes it meanwhile; then it is closed, moved aside
/// (kept, named in the output) and the restored folder put in its place. A failure before
/// the swap changes nothing.
pub async fn replace(db: Option<&str>, path: &Path, file: &BackupFile, json: bool) -> Result<()> {
    let ep = crate::open::endpoint(db)?;
    let Some(dir) = kasten_share::shared_dir(&ep) else {
        bail!(
            "--replace puts a restored folder in the place of the memory's, and {ep} is not a folder; restore into an empty memory there instead (nothing was restored)"
        );
    };
    let storage = Some(StorageLimits::for_bulk_writes_from_env());
    let engine = match crate::share::open_or_connect(db, false, storage).await? {
        crate::share::Opened::Local(e) => Arc::new(*e),
        crate::share::Opened::Remote(_) => {
            bail!("the memory at {ep} is open in another process; nothing was restored")
        }
    };
    let pb = progress_bar();
    let rows = |p: &TableProgress| {
        pb.set_message(format!("restoring {}", p.table));
        pb.set_length(p.total);
        pb.set_position(p.done);
    };
    let report = |p: Progress| {
        let (msg, done, total) = match p {
            Progress::Loading { done, total } => ("indexing", done, total),
            Progress::Reembedding { done, total } => ("re-embedding", done, total),
        };
        pb.set_message(msg);
        pb.set_length(total);
        pb.set_position(done);
    };
    let staged = tokio::select! {
        r = Box::pin(StagedRestore::stage(&dir, file, engine.shared_embedder(), storage, &rows, &report)) => {
            r.map_err(|e| anyhow!("cannot restore {}: {e}; nothing was changed: the memory is as it was", path.display()))
        }
        _ = kasten_engine::shutdown_signal() => Err(anyhow!("interrupted; nothing was changed: the memory is as it was")),
    };
    pb.finish_and_clear();
    Engine::close_shared(engine).await;
    let done = staged?.swap().map_err(|e| {
        let state = if dir.exists() {
            format!("; the memory is as it was in {}", dir.display())
        } else {
            String::new()
        };
        anyhow!("cannot restore {}: {e}{state}", path.display())
    })?;
    let s = &done.summary;
    if json {
        println!(
            "{}",
            json!({
                "restored": path.display().to_string(),
                "tables": s.tables,
                "schema_version": s.schema_version,
                "previous": done.previous.display().to_string(),
            })
        );
    } else {
        let list: Vec<String> = s.tables.iter().map(|(k, v)| format!("{v} {k}")).collect();
        println!(
            "restored {} in place of the memory: {}",
            path.display(),
            list.join(", ")
        );
        println!(
            "the memory as it was is kept in {}",
            done.previous.display()
        );
    }
    Ok(())
}
