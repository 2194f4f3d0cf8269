//! Carrying out a prepared command: here, or through the process that has the memory
//! open (the commands of `served_by_owner`).

use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use chrono::NaiveDate;
use kasten_engine::{Engine, JobOutcome};
use kasten_share::{Memory, ReviewChange};

use crate::args::*;
use crate::open::progress_bar;
use crate::prepare::*;
use crate::{ACTOR, llm, memory, output, transfer};

/// The commands of [`served_by_owner`], over the engine here or the owner's.
pub(crate) async fn execute_shared(memory: &Memory, cmd: Prepared, json: bool) -> Result<()> {
    match cmd {
        Prepared::Add(new, false) => {
            let mut added = memory.add(vec![new]).await?;
            if let Some(m) = added.merges.first() {
                memory::merged(json, m);
                return Ok(());
            }
            let note = added
                .notes
                .pop()
                .ok_or_else(|| anyhow!("the saved note went missing"))?;
            output::added(json, &note, None);
        }
        Prepared::Show(id) => output::show(json, &memory.get(&id).await?),
        Prepared::List(limit, None) => output::list(
            json,
            &list(memory, limit).await?,
            memory.list_counts().await?,
        ),
        Prepared::List(limit, Some(day)) => {
            let (total, notes) = list_as_of(memory, limit, day).await?;
            let merged = memory.list_counts().await?.merged;
            output::list_as_of(
                json,
                &notes,
                kasten_engine::ListCounts { total, merged },
                day,
            )
        }
        Prepared::Search(q, k, as_of) => {
            output::search(json, &memory.search_as_of(&q, k, as_of).await?)
        }
        Prepared::Memory(memory::MemoryCmd::Ask {
            question,
            session: None,
            new,
            k,
            as_of,
        }) => memory::ask(memory, &question, None, new, k, as_of, json).await?,
        Prepared::Memory(memory::MemoryCmd::Consolidate(options)) => {
            memory::consolidate(memory, &options, json).await?
        }
        Prepared::Proposals(statuses, by, limit) => output::proposals(
            json,
            &memory.proposals(&statuses, by.as_deref(), limit).await?,
        ),
        Prepared::History(id) => output::history(json, &id, &memory.history(&id).await?),
        Prepared::Delete(id) => {
            memory.delete(&id).await?;
            output::deleted(json, &id);
        }
        Prepared::Accept(id, edit) => {
            review(memory, ReviewChange::Accept { id, edit }, json).await?
        }
        Prepared::Reject(id) => review(memory, ReviewChange::Reject { id }, json).await?,
        Prepared::BothTrue(id) => review(memory, ReviewChange::BothTrue { id }, json).await?,
        Prepared::Rollback(id) => review(memory, ReviewChange::Rollback { id }, json).await?,
        Prepared::Reapply(id) => review(memory, ReviewChange::Reapply { id }, json).await?,
        Prepared::Edit(id, edit) => {
            let reason = "edited by the user".to_owned();
            review(memory, ReviewChange::Edit { id, edit, reason }, json).await?
        }
        Prepared::Manual(c) => review(memory, c, json).await?,
        _ => bail!("internal error: this command cannot go through another process"),
    }
    Ok(())
}

/// Up to `limit` notes, newest first, in pages of the most one call serves (a note added
/// between two pages may show twice or not at all; `list` is a look, not a snapshot).
async fn list(memory: &Memory, limit: usize) -> Result<Vec<kasten_core::Note>> {
    let mut notes = Vec::new();
    while notes.len() < limit {
        let page = (limit - notes.len()).min(kasten_share::MAX_RESULTS);
        let got = memory.list(page, notes.len()).await?;
        let full = got.len() == page;
        notes.extend(got);
        if !full {
            break;
        }
    }
    Ok(notes)
}

/// Up to `limit` of the notes that had taken effect by the end of `day`, newest first, and
/// how many there are, in pages as [`list`].
async fn list_as_of(
    memory: &Memory,
    limit: usize,
    day: NaiveDate,
) -> Result<(u64, Vec<kasten_core::Note>)> {
    let mut notes = Vec::new();
    loop {
        let page = (limit - notes.len()).min(kasten_share::MAX_RESULTS);
        let (total, got) = memory.list_as_of(page.max(1), notes.len(), day).await?;
        let full = got.len() == page;
        notes.extend(got);
        notes.truncate(limit);
        if !full || notes.len() >= limit {
            return Ok((total, notes));
        }
    }
}

/// A review or a change by hand, as the user, here or in the owner's engine.
pub(crate) async fn review(memory: &Memory, change: ReviewChange, json: bool) -> Result<()> {
    output::reviewed(json, &memory.review(change, ACTOR).await?);
    Ok(())
}

pub(crate) async fn execute(engine: &Arc<Engine>, cmd: Prepared, json: bool) -> Result<()> {
    if served_by_owner(&cmd) {
        return execute_shared(&Memory::Local(Arc::clone(engine)), cmd, json).await;
    }
    match cmd {
        Prepared::Add(new, wait) => {
            let mut added = engine.add_batch_merging(vec![new]).await?;
            if let Some(m) = added.merges.first() {
                memory::merged(json, m);
                return Ok(());
            }
            let note = added
                .notes
                .pop()
                .ok_or_else(|| anyhow!("the saved note went missing"))?;
            if !wait {
                output::added(json, &note, None);
                return Ok(());
            }
            if engine.llm_client().is_none() {
                output::added(json, &note, None);
                bail!(
                    "the note was saved ({}) but cannot be enriched: {}",
                    note.id,
                    engine.llm_missing_reason()
                );
            }
            let outcome = engine.enrich_note(&note.id).await?;
            output::added(json, &note, outcome.as_ref());
            match outcome {
                Some(JobOutcome::Retrying { error, .. })
                | Some(JobOutcome::Failed { error, .. }) => {
                    bail!(
                        "the note was saved ({}) but enrichment failed: {error}",
                        note.id
                    )
                }
                _ => {}
            }
        }
        Prepared::Enrich(retry_failed) => enrich(engine, retry_failed, json).await?,
        Prepared::Usage(limit) => output::usage(
            json,
            &engine.usage_by_model().await?,
            &engine.usage_by_note(limit).await?,
        ),
        Prepared::Events(limit) => output::events(json, &engine.events(limit).await?),
        Prepared::Config(action) => config(engine, action, json).await?,
        Prepared::Llm(action) => llm::run(engine, action, json).await?,
        Prepared::Quality => llm::quality(engine, json).await?,
        Prepared::Import(job) => import(engine, job, json).await?,
        Prepared::ImportPlan(plan) => transfer::import(engine, plan, json).await?,
        Prepared::Export(dir) => transfer::export(engine, &dir, json).await?,
        Prepared::Backup(file) => transfer::backup(engine, &file, json).await?,
        Prepared::Restore(target) => transfer::restore(engine, target, json).await?,
        Prepared::Memory(c) => memory::execute(engine, c, json).await?,
        // the rest is what the owner also serves (returned above)
        cmd => execute_shared(&Memory::Local(Arc::clone(engine)), cmd, json).await?,
    }
    Ok(())
}

pub(crate) async fn enrich(engine: &Engine, retry_failed: bool, json: bool) -> Result<()> {
    if engine.llm_client().is_none() {
        bail!("{}", engine.llm_missing_reason());
    }
    if !json {
        eprintln!("enriching with {}", engine.llm_label());
    }
    if retry_failed {
        let n = engine.retry_failed().await?;
        if !json && n > 0 {
            eprintln!("queued {n} failed job(s) again");
        }
    }
    let counts = engine.job_counts().await?;
    let pb = progress_bar();
    pb.set_message("enriching");
    pb.set_length(counts.queued + counts.running);
    let on_job = |o: &JobOutcome| {
        pb.inc(1);
        match o {
            JobOutcome::Retrying { note, error } => {
                pb.println(format!("{note}: will retry: {error}"))
            }
            JobOutcome::Failed { note, error } => pb.println(format!("{note}: failed: {error}")),
            _ => {}
        }
    };
    let summary = engine.run_pending(&on_job).await?;
    pb.finish_and_clear();
    // the Boxes after what was enriched, as the app's and `kasten mcp`'s worker loop does
    if let Err(e) = engine.refresh_boxes(summary.done).await {
        eprintln!("warning: cannot compute the Boxes: {e}");
    }
    if let Some(local) = engine.llm_client().and_then(|c| c.local()) {
        let st = local.status();
        if st.requests > 0 {
            eprintln!(
                "{}: loaded in {:.1} s ({} MB), read {:.0} prompt tokens/s, wrote {:.1} tokens/s, \
                 {:.0} % of prompt tokens reused from the cache, CPU code: {}",
                engine.llm_label(),
                st.load_ms as f64 / 1000.0,
                st.model_bytes / 1_000_000,
                st.prompt_per_sec(),
                st.generation_per_sec(),
                100.0 * st.prompt_tokens_reused as f64 / st.prompt_tokens.max(1) as f64,
                kasten_llm::cpu_variant().unwrap_or_else(|| "built in".to_owned())
            );
        }
    }
    output::enriched(json, &summary, &engine.job_counts().await?);
    if summary.done == 0 && (summary.failed > 0 || summary.retrying > 0) {
        bail!(
            "no note could be enriched: {}",
            summary
                .errors
                .first()
                .map(String::as_str)
                .unwrap_or("unknown error")
        );
    }
    Ok(())
}

pub(crate) async fn config(
    engine: &Engine,
    action: Option<ConfigAction>,
    json: bool,
) -> Result<()> {
    match action {
        None => {}
        Some(ConfigAction::Set { key, value }) => engine.set_setting_checked(&key, &value).await?,
        Some(ConfigAction::Unset { key }) => engine.unset_setting(&key).await?,
    }
    let env = |k: &str| std::env::var(k).ok();
    let effective = engine.effective_settings(&env).await?;
    output::settings(json, &engine.settings_view().await?, &effective);
    Ok(())
}

pub(crate) async fn import(engine: &Engine, job: ImportJob, json: bool) -> Result<()> {
    use std::io::Write;
    let pb = progress_bar();
    pb.set_message("importing");
    pb.set_length(job.good as u64);
    let mut imported = 0u64;
    let mut existing = 0u64;
    let mut stdout = std::io::stdout().lock();
    let mut batches = transfer::JsonlBatches::open(&job.file, job.batch)?;
    while let Some(chunk) = batches.next_batch()? {
        let first_line = chunk.first().map_or(0, |c| c.0);
        // lines already imported (same source and content) are skipped
        let notes = transfer::not_yet_imported(engine, &job.file, &chunk).await?;
        existing += (chunk.len() - notes.len()) as u64;
        if notes.is_empty() {
            pb.set_position(imported + existing);
            continue;
        }
        let saved = engine.add_batch(notes).await.with_context(|| {
            format!(
                "import stopped at line {first_line} of {}: {imported} note(s) before it were saved, this batch and the rest were not",
                job.file.display()
            )
        })?;
        imported += saved.notes.len() as u64;
        if job.print_ids {
            for n in &saved.notes {
                writeln!(stdout, "{}", n.id)?;
            }
            stdout.flush()?;
        }
        pb.set_position(imported + existing);
    }
    pb.finish_and_clear();
    if existing > 0 && !json {
        eprintln!("{existing} line(s) were already imported earlier and were skipped");
    }
    output::imported(json, &job.file, imported, &job.skipped);
    Ok(())
}
