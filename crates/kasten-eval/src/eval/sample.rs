//! One conversation: its notes, its cached memory, the ingest (resumable), its scoring.

use std::path::Path;
use std::time::Instant;

use crate::Shell;
use crate::locomo::Sample;
use anyhow::{Context, Result, bail};
use kasten_core::NewNote;
use kasten_engine::{Engine, JobOutcome, SearchOptions};

use super::answers::Answers;
use super::checkpoint::Checkpoint;
use super::model::*;
use super::schema::{Ingest, Partial, SampleIngest};
use super::score::*;

/// The notes a sample becomes, in conversation order.
pub(crate) fn sample_notes(sample: &Sample) -> Vec<NewNote> {
    sample
        .turns()
        .filter_map(|(session, turn)| {
            NewNote::new(&turn.note_content()).ok().map(|n| {
                n.at(session.date)
                    .with_source(Some(sample.source_of(&turn.dia_id)))
            })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn eval_sample(
    sample: &Sample,
    dir: &Path,
    fresh: bool,
    as_it_stands: bool,
    k: usize,
    options: &SearchOptions,
    mode: &Mode,
    checkpoint: Option<(&Path, std::time::Duration)>,
    totals: &mut Totals,
    log: &dyn Fn(String),
    shell: &dyn Shell,
) -> Result<SampleReport> {
    let marker = dir.join(COMPLETE);
    let partial = dir.join(PARTIAL);
    let mut cached = !fresh && marker.is_file();
    let enrich = mode.llm.is_some() && mode.enrich;
    let mut resume = !fresh && !cached && enrich && partial.is_file();
    if as_it_stands && !cached {
        // never cleared nor ingested into: it is the caller's memory
        bail!(
            "{} is not a memory this eval finished (no {COMPLETE} in it); restore a complete \
             checkpoint there first (`kasten --db surrealkv://DIR restore FILE`, then copy the \
             checkpoint's {COMPLETE} into DIR)",
            dir.display()
        );
    }
    if !cached && !resume && dir.exists() {
        // a partial ingest without an LLM (quick to redo) or --fresh: start over
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot clear the cached memory {}", dir.display()))?;
    }
    // only an enriching ingest is worth carrying to another machine
    let checkpoint = match checkpoint {
        Some((root, every)) if enrich => Some(Checkpoint::new(root, dir, every)?),
        _ => None,
    };
    let notes = sample_notes(sample);
    let endpoint = format!("surrealkv://{}", dir.display());
    let mut engine = shell.open_engine(Some(endpoint)).await?;
    if let Some(c) = checkpoint
        .as_ref()
        .filter(|c| !fresh && !cached && !resume && c.exists())
    {
        log(format!(
            "{}: no cached memory here; restoring the checkpoint {}",
            sample.sample_id,
            c.dir().display()
        ));
        if let Err(e) = c.restore(&engine, dir).await {
            engine.close().await;
            return Err(e);
        }
        cached = marker.is_file();
        resume = !cached && partial.is_file();
    }
    if mode.llm.is_some() {
        if let Err(e) = crate::configure_llm(&mut engine).await {
            engine.close().await;
            return Err(e);
        }
        if enrich {
            engine.set_steps(mode.steps);
        }
    }
    let result = async {
        let ingest = if cached {
            log(format!(
                "{}: cached memory at {}",
                sample.sample_id,
                dir.display()
            ));
            let info = std::fs::read_to_string(&marker).unwrap_or_default();
            // a marker that cannot be read counts as an ingest of nothing
            let ingest: Ingest = serde_json::from_str(&info).unwrap_or_default();
            // a memory finished before checkpoints were asked for gets one now
            if let Some(c) = checkpoint.as_ref().filter(|c| !c.exists()) {
                write_checkpoint(c, &engine, dir, log).await;
            }
            SampleIngest {
                ingest,
                cached: true,
            }
        } else {
            log(format!(
                "{}: ingesting {} turns into {}",
                sample.sample_id,
                notes.len(),
                dir.display()
            ));
            let progress = Progress {
                path: &partial,
                resume,
                checkpoint: checkpoint.as_ref().map(|c| (c, dir)),
                log,
                shell,
            };
            let v = ingest(&engine, &notes, enrich, &progress).await?;
            totals.ingest_seconds += v.seconds;
            totals.ingested_notes += notes.len();
            std::fs::write(&marker, serde_json::to_string_pretty(&v)?)
                .with_context(|| format!("cannot write {}", marker.display()))?;
            // the complete marker supersedes it; a leftover one is harmless
            let _ = std::fs::remove_file(&partial);
            progress.checkpoint(&engine).await;
            SampleIngest {
                ingest: v,
                cached: false,
            }
        };
        totals.ingest_tokens.0 += ingest.ingest.llm_tokens_in;
        totals.ingest_tokens.1 += ingest.ingest.llm_tokens_out;
        totals.enriched += ingest.ingest.enriched;
        totals.enrich_failed += ingest.ingest.enrichment_failed;
        let count = engine.count().await? as usize;
        // a memory scored as it stands (`--memory`) may have lost notes on purpose
        if count != notes.len() && !as_it_stands {
            bail!(
                "the cached memory at {} holds {count} notes, expected {}; run again with --fresh",
                dir.display(),
                notes.len()
            );
        }
        // a checkpointed run keeps its answers beside the checkpoint, so answering resumes
        let mut kept = match &checkpoint {
            Some(c) if mode.answer => Some(Answers::open(c.dir(), fresh)),
            _ => None,
        };
        score_questions(
            &engine,
            sample,
            k,
            options,
            mode,
            totals,
            kept.as_mut(),
            log,
        )
        .await?;
        if let Some(a) = kept.as_ref().filter(|a| a.reused > 0) {
            totals.answers_reused += a.reused;
            log(format!(
                "{}: {} answers taken from an earlier run ({})",
                sample.sample_id,
                a.reused,
                a.file().display()
            ));
        }
        Ok(SampleReport {
            sample_id: sample.sample_id.clone(),
            notes: notes.len(),
            sessions: sample.sessions.len(),
            questions: sample.questions.len(),
            ingest,
        })
    }
    .await;
    engine.close().await;
    result
}

/// Where an enriching ingest records its progress, and whether it resumes from it.
pub(crate) struct Progress<'a> {
    pub(crate) path: &'a Path,
    pub(crate) resume: bool,
    /// Where the progress is also checkpointed, with the cached memory's folder.
    pub(crate) checkpoint: Option<(&'a Checkpoint, &'a Path)>,
    pub(crate) log: &'a dyn Fn(String),
    pub(crate) shell: &'a dyn Shell,
}

impl Progress<'_> {
    /// (notes enriched, failed, seconds spent) by the runs before this one.
    fn before(&self) -> (u64, u64, f64) {
        if !self.resume {
            return (0, 0, 0.0);
        }
        let p: Partial = std::fs::read_to_string(self.path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        (p.enriched, p.enrichment_failed, p.seconds)
    }

    /// Writes the checkpoint, if there is one ([`write_checkpoint`]).
    async fn checkpoint(&self, engine: &Engine) {
        if let Some((c, dir)) = self.checkpoint {
            write_checkpoint(c, engine, dir, self.log).await;
        }
    }

    fn save(&self, added: usize, enriched: u64, failed: u64, seconds: f64) -> Result<()> {
        let p = Partial {
            added,
            enriched,
            enrichment_failed: failed,
            seconds,
        };
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_string(&p)?)
            .and_then(|()| std::fs::rename(&tmp, self.path))
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// Writes the checkpoint of the memory cached at `dir`. A failure is said and the run goes
/// on: the memory cached here still holds everything.
async fn write_checkpoint(c: &Checkpoint, engine: &Engine, dir: &Path, log: &dyn Fn(String)) {
    match c.save(engine, dir).await {
        Ok(()) => log(format!("checkpoint written to {}", c.dir().display())),
        Err(e) => log(format!(
            "warning: the checkpoint in {} was not written ({e:#}); the memory cached in {} keeps the progress",
            c.dir().display(),
            dir.display()
        )),
    }
}

/// Writes the notes into the (empty) memory. With an LLM each note is enriched before
/// the next is added, so its links and evolution only see the conversation so far; the
/// progress is saved as it goes, and a run that finds it resumes after the last note added
/// (finishing that note's enrichment first).
pub(crate) async fn ingest(
    engine: &Engine,
    notes: &[NewNote],
    enrich: bool,
    progress: &Progress<'_>,
) -> Result<Ingest> {
    // one note per turn, as in the A-Mem protocol: a repeated turn ("Thanks!") stays a
    // note of its own instead of being merged into the earlier one
    engine
        .set_merge_options(&kasten_engine::MergeOptions {
            enabled: false,
            supersede: false,
            ..Default::default()
        })
        .await?;
    let t0 = Instant::now();
    let (mut enriched, mut failed, secs_before) = progress.before();
    if enrich {
        let start = if progress.resume {
            let added = (engine.count().await? as usize).min(notes.len());
            (progress.log)(format!(
                "resuming after note {added} of {} (saved progress in {})",
                notes.len(),
                progress.path.display()
            ));
            let s = engine.run_pending(&|_| {}).await?;
            enriched += s.done as u64;
            failed += (s.failed + s.retrying) as u64;
            added
        } else {
            0
        };
        progress.save(start, enriched, failed, secs_before)?;
        let pb = progress.shell.progress_bar();
        pb.set_message("enriching");
        pb.set_length(notes.len() as u64);
        pb.set_position(start as u64);
        for (i, n) in notes.iter().enumerate().skip(start) {
            let note = engine.add(n.clone()).await?;
            match engine.enrich_note(&note.id).await? {
                Some(JobOutcome::Done { .. }) => enriched += 1,
                Some(JobOutcome::Retrying { error, .. } | JobOutcome::Failed { error, .. }) => {
                    failed += 1;
                    if i + 1 == EARLY_FAILURES && failed as usize == EARLY_FAILURES {
                        bail!("the first {EARLY_FAILURES} notes could not be enriched: {error}");
                    }
                }
                Some(JobOutcome::Gone { .. }) | None => failed += 1,
            }
            pb.inc(1);
            progress.save(
                i + 1,
                enriched,
                failed,
                secs_before + t0.elapsed().as_secs_f64(),
            )?;
            if progress.checkpoint.is_some_and(|(c, _)| c.due()) {
                progress.checkpoint(engine).await;
            }
        }
        pb.finish_and_clear();
    } else {
        engine
            .add_batches(notes.chunks(BATCH).map(<[NewNote]>::to_vec), |_| {})
            .await?;
    }
    let secs = secs_before + t0.elapsed().as_secs_f64();
    let (mut tin, mut tout) = (0i64, 0i64);
    if enrich {
        for u in engine.usage_by_model().await? {
            tin += u.tokens_in;
            tout += u.tokens_out;
        }
    }
    Ok(Ingest {
        notes: notes.len(),
        seconds: secs,
        notes_per_s: notes.len() as f64 / secs.max(1e-9),
        enriched,
        enrichment_failed: failed,
        llm_tokens_in: u64::try_from(tin).unwrap_or(0),
        llm_tokens_out: u64::try_from(tout).unwrap_or(0),
    })
}
