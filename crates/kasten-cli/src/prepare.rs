//! A command with its input read and checked before anything is opened, and which
//! commands the memory's owner can carry out or need the LLM.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use chrono::NaiveDate;
use kasten_core::import::{LineError, parse_time};
use kasten_core::{NewNote, NoteId};
use kasten_engine::{FieldEdit, ReviewStatus};
use kasten_share::ReviewChange;

use crate::args::*;
use crate::{manual, memory, transfer};

/// A command with its input already read and checked.
pub(crate) enum Prepared {
    Add(NewNote, bool),
    Enrich(bool),
    Usage(usize),
    Events(usize),
    Config(Option<ConfigAction>),
    Llm(Option<LlmAction>),
    Quality,
    Proposals(Vec<ReviewStatus>, Option<String>, usize),
    Accept(String, FieldEdit),
    Reject(String),
    BothTrue(String),
    Rollback(String),
    Reapply(String),
    History(NoteId),
    Edit(NoteId, FieldEdit),
    Show(NoteId),
    List(usize, Option<NaiveDate>),
    Delete(NoteId),
    Search(String, usize, Option<NaiveDate>),
    Import(ImportJob),
    ImportPlan(transfer::ImportPlan),
    Export(PathBuf),
    Backup(PathBuf),
    Restore(transfer::RestoreTarget),
    Memory(memory::MemoryCmd),
    /// `link`, `unlink`, `edit --content`: a change by hand, its input checked.
    Manual(ReviewChange),
}

pub(crate) struct ImportJob {
    pub(crate) file: PathBuf,
    /// Good lines found when the file was checked; they are read again, a batch at a time.
    pub(crate) good: usize,
    pub(crate) skipped: Vec<LineError>,
    pub(crate) batch: usize,
    pub(crate) print_ids: bool,
}

/// `--as-of DATE`, checked: a day as YYYY-MM-DD.
pub(crate) fn as_of_day(s: &Option<String>) -> Result<Option<NaiveDate>> {
    s.as_deref()
        .map(|d| kasten_core::validity::parse_day(d).map_err(|e| anyhow!("--as-of: {e}")))
        .transpose()
}

pub(crate) fn prepare(cmd: &Command) -> Result<Prepared> {
    Ok(match cmd {
        Command::Add { text, time, wait } => {
            let content = if text == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("cannot read the note from stdin")?;
                s
            } else {
                text.clone()
            };
            let at = time
                .as_deref()
                .map(parse_time)
                .transpose()
                .map_err(|e| anyhow!(e))?;
            Prepared::Add(NewNote::new(&content)?.at(at), *wait)
        }
        Command::Show { id } => Prepared::Show(NoteId::parse(id)?),
        Command::List { limit, as_of } => Prepared::List(*limit, as_of_day(as_of)?),
        Command::Delete { id } => Prepared::Delete(NoteId::parse(id)?),
        Command::Search { query, k, as_of } => {
            if query.trim().is_empty() {
                bail!("the search query is empty");
            }
            Prepared::Search(query.clone(), (*k).max(1), as_of_day(as_of)?)
        }
        Command::Import(a) if matches!(a.format, ImportFormat::Markdown) => {
            Prepared::ImportPlan(transfer::plan_markdown(&a.file, a.batch.clamp(1, 10_000))?)
        }
        Command::Import(a) if matches!(a.format, ImportFormat::Chat) => {
            Prepared::ImportPlan(transfer::plan_chat(&a.file, a.batch.clamp(1, 10_000))?)
        }
        Command::Export { dir, format } => {
            let ExportFormat::Markdown = format;
            Prepared::Export(dir.clone())
        }
        Command::Backup { file } => Prepared::Backup(file.clone()),
        Command::Restore { target, replace } => {
            Prepared::Restore(transfer::restore_target(target, *replace)?)
        }
        Command::Mcp { .. } => bail!("mcp is handled separately"),
        Command::Ask {
            question,
            session,
            new,
            k,
            as_of,
        } => {
            if question.trim().is_empty() {
                bail!("the question is empty");
            }
            Prepared::Memory(memory::MemoryCmd::Ask {
                question: question.clone(),
                session: session.clone(),
                new: *new,
                k: *k,
                as_of: as_of_day(as_of)?,
            })
        }
        Command::Boxes { recompute } => Prepared::Memory(memory::MemoryCmd::Boxes {
            recompute: *recompute,
        }),
        Command::ArchiveCandidates { threshold, limit } => {
            Prepared::Memory(memory::MemoryCmd::ArchiveCandidates {
                threshold: *threshold,
                limit: *limit,
            })
        }
        Command::Archive { id } => Prepared::Memory(memory::MemoryCmd::Archive(NoteId::parse(id)?)),
        Command::Keep { id } => Prepared::Memory(memory::MemoryCmd::Keep(NoteId::parse(id)?)),
        Command::Tier { id, tier, project } => Prepared::Memory(memory::MemoryCmd::Tier {
            id: NoteId::parse(id)?,
            tier: memory::parse_tier(tier)?,
            project: project.clone(),
        }),
        Command::Project { action } => Prepared::Memory(memory::MemoryCmd::Project(action.clone())),
        Command::Consolidate { batch, limit } => {
            if *batch == 0 {
                bail!("--batch is at least 1");
            }
            Prepared::Memory(memory::MemoryCmd::Consolidate(
                kasten_engine::ConsolidateOptions {
                    batch: (*batch).min(10_000),
                    limit: *limit,
                    new_only: false,
                },
            ))
        }
        Command::Import(a) => {
            // read to the end once, holding only the bad lines: a file of any size
            let (good, bad) = transfer::scan_jsonl(&a.file)?;
            if !bad.is_empty() && !a.skip_invalid {
                let shown: Vec<String> = bad
                    .iter()
                    .take(20)
                    .map(|e| format!("  {}: {e}", a.file.display()))
                    .collect();
                let more = if bad.len() > 20 {
                    format!("\n  … and {} more", bad.len() - 20)
                } else {
                    String::new()
                };
                bail!(
                    "{} invalid line(s) in {}; nothing was imported. Fix them, or pass --skip-invalid to import the other {} line(s):\n{}{}",
                    bad.len(),
                    a.file.display(),
                    good,
                    shown.join("\n"),
                    more
                );
            }
            Prepared::Import(ImportJob {
                file: a.file.clone(),
                good,
                skipped: bad,
                batch: a.batch.clamp(1, 10_000),
                print_ids: a.print_ids,
            })
        }
        Command::Enrich { retry_failed, .. } => Prepared::Enrich(*retry_failed),
        Command::Usage { limit } => Prepared::Usage(*limit),
        Command::Events { limit } => Prepared::Events(*limit),
        Command::Config { action } => Prepared::Config(action.clone()),
        Command::Llm { action } => Prepared::Llm(action.clone()),
        Command::Quality => Prepared::Quality,
        Command::Proposals { status, by, limit } => {
            let statuses = match status.as_deref() {
                None => vec![],
                // `rolled-back` is taken too
                Some(s) => vec![
                    ReviewStatus::parse(&s.replace('-', "_"))
                        .map_err(|e| anyhow!("--status: {e}"))?,
                ],
            };
            let by = by.as_deref().map(str::trim).filter(|b| !b.is_empty());
            if let Some(b) = by
                && !matches!(
                    kasten_core::Actor::parse(b),
                    kasten_core::Actor::Llm | kasten_core::Actor::Merge
                )
                && !kasten_engine::is_agent(b)
            {
                bail!("--by is llm, merge, agent (every agent) or agent:NAME (not '{b}')");
            }
            if *limit > kasten_share::MAX_RESULTS {
                bail!(
                    "--limit is at most {} (not {limit})",
                    kasten_share::MAX_RESULTS
                );
            }
            Prepared::Proposals(statuses, by.map(str::to_owned), *limit)
        }
        Command::Accept { id, fields } => Prepared::Accept(id.trim().to_owned(), fields.edit()),
        Command::Reject { id } => Prepared::Reject(id.trim().to_owned()),
        Command::BothTrue { id } => Prepared::BothTrue(id.trim().to_owned()),
        Command::Rollback { id } => Prepared::Rollback(id.trim().to_owned()),
        Command::Reapply { id } => Prepared::Reapply(id.trim().to_owned()),
        Command::History { id } => Prepared::History(NoteId::parse(id)?),
        Command::Edit {
            id,
            fields,
            content: Some(text),
        } => {
            if !fields.edit().is_empty() {
                bail!("change the text (--content) and the annotations in two separate edits");
            }
            Prepared::Manual(ReviewChange::Content {
                id: NoteId::parse(id)?,
                text: manual::read_content(text)?,
            })
        }
        Command::Edit { id, fields, .. } => {
            let edit = fields.edit();
            if edit.is_empty() {
                bail!("nothing to change: give --content, or --tags, --keywords and/or --context");
            }
            Prepared::Edit(NoteId::parse(id)?, edit)
        }
        Command::Link {
            from,
            to,
            kind,
            reason,
        } => Prepared::Manual(ReviewChange::Link {
            from: NoteId::parse(from)?,
            to: NoteId::parse(to)?,
            kind: kind.clone(),
            reason: reason.clone(),
        }),
        Command::Unlink { from, to, kind } => Prepared::Manual(ReviewChange::Unlink {
            from: NoteId::parse(from)?,
            to: NoteId::parse(to)?,
            kind: kind.clone(),
        }),
        Command::Bench { .. } => bail!("bench is handled separately"),
        Command::Eval { .. } => bail!("eval is handled separately"),
    })
}

/// Commands another process that has the memory open can carry out for this one.
pub(crate) fn served_by_owner(p: &Prepared) -> bool {
    matches!(
        p,
        Prepared::Add(_, false)
            | Prepared::Show(_)
            | Prepared::List(..)
            | Prepared::Search(..)
            | Prepared::Memory(memory::MemoryCmd::Ask { session: None, .. })
            | Prepared::Memory(memory::MemoryCmd::Consolidate(_))
            | Prepared::Proposals(..)
            | Prepared::Accept(..)
            | Prepared::Reject(_)
            | Prepared::BothTrue(_)
            | Prepared::Rollback(_)
            | Prepared::Reapply(_)
            | Prepared::History(_)
            | Prepared::Edit(..)
            | Prepared::Manual(_)
            | Prepared::Delete(_)
    )
}

/// Whether a command uses the LLM.
pub(crate) fn needs_llm(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Add { wait: true, .. }
            | Command::Enrich { .. }
            | Command::Ask { .. }
            | Command::Llm { .. }
    )
}
