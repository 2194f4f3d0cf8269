//! `kasten eval locomo`: Kasten on the LoCoMo benchmark.
//!
//! One fresh memory per conversation (a normal embedded memory under the cache
//! directory), one note per dialogue turn (`Speaker: text`, image turns with their
//! caption, the session date as the note's time, `<sample>:<dia_id>` as its source). With
//! an LLM each note is enriched as it arrives, in conversation order (A-Mem's note
//! construction, links and evolution), so a note only ever sees the notes before it. The
//! memories are cached on disk, keyed by the file's content hash, the sample id and the
//! LLM (or none), so a sweep over `-k` ingests once.
//!
//! For every question of categories 1-4 it measures evidence recall@k of Kasten's default
//! search (expansions count toward k) and, in the same run, of the simple baselines
//! (dense top-k, BM25 top-k, their plain reciprocal-rank fusion) and of Kasten with parts
//! of its ranking turned off. With `--answer` the LLM answers every question from the k
//! notes Kasten retrieves, scored with A-Mem's token F1 and BLEU-1 and the official
//! LoCoMo F1.

mod answers;
mod checkpoint;
mod model;
mod report;
mod sample;
mod schema;
mod score;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::Shell;
use crate::locomo::{self, Sample};
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use kasten_engine::{LlmConfig, SearchOptions};
use serde_json::json;

use crate::cache::{default_cache_dir, fnv1a64, safe_name};
pub use model::AnswerWith;
use model::*;
use report::*;
use sample::*;

#[derive(Subcommand, Debug)]
pub enum EvalCommand {
    /// Evidence recall@k (and, with --answer, answer quality) on a LoCoMo file.
    Locomo {
        /// A LoCoMo JSON file (the format of the public locomo10.json).
        file: PathBuf,
        /// Only these samples (comma-separated sample ids, e.g. conv-26,conv-30).
        #[arg(long, value_delimiter = ',')]
        samples: Vec<String>,
        /// Notes retrieved per question.
        #[arg(short, default_value_t = 10)]
        k: usize,
        /// Without an LLM: notes are not enriched, questions are not answered.
        #[arg(long)]
        no_llm: bool,
        /// Answer every question with the LLM from the notes retrieved and score the
        /// answers (A-Mem's F1 and BLEU-1, the official LoCoMo F1).
        #[arg(long, conflicts_with = "no_llm")]
        answer: bool,
        /// How --answer answers: `amem`, A-Mem's answer prompt over the top k (the
        /// published figures); `ask`, Kasten's own `ask` as chat, the CLI and MCP answer
        /// (its retrieval, its prompt with citations), scored with the citations taken
        /// out and "Not in memory." read as "not mentioned", and reported with what the
        /// answers cite. Answers of `ask` are always asked afresh.
        #[arg(long, value_enum, default_value_t = AnswerWith::Amem, requires = "answer")]
        answer_with: AnswerWith,
        /// Ablation: the LLM writes no keywords, tags or context (links and evolution still
        /// run). Cached apart from the full system.
        #[arg(long, conflicts_with = "no_llm")]
        no_construction: bool,
        /// Ablation: the LLM proposes no links.
        #[arg(long, conflicts_with = "no_llm")]
        no_links: bool,
        /// Ablation: the LLM never edits older notes.
        #[arg(long, conflicts_with = "no_llm")]
        no_evolution: bool,
        /// Where the ingested memories are cached (default: $KASTEN_HOME/eval).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Ingest again even if a cached memory exists.
        #[arg(long)]
        fresh: bool,
        /// Include every question's result in the --json report.
        #[arg(long)]
        per_question: bool,
        /// Ranking settings measured out of sample: for each conversation, the grid setting
        /// (vector, context and date weights) with the best recall on the other
        /// conversations, and its recall on this one (needs two or more conversations).
        #[arg(long)]
        held_out: bool,
        /// Also run each ablation (no construction, no links, no evolution) and the memory
        /// without an LLM, each in a cached memory of its own, and report them side by side
        /// with the full system.
        #[arg(long, conflicts_with_all = ["no_llm", "no_construction", "no_links", "no_evolution"])]
        ablations: bool,
        /// Write the turns without enriching them (the memory is the one --no-llm builds,
        /// cached and shared with it); the LLM in use only answers. What the model's answers
        /// are worth without the memory it organised.
        #[arg(long, requires = "answer", conflicts_with = "ablations")]
        no_enrich: bool,
        /// Also keep each enriching ingest in DIR (a gzipped backup of the memory and its
        /// progress, written every --checkpoint-every seconds and at the end): a run that finds no cached
        /// memory but a checkpoint restores it and goes on, on this machine or another.
        #[arg(long, value_name = "DIR")]
        checkpoint: Option<PathBuf>,
        /// Seconds between checkpoints while a conversation is enriched.
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = 600,
            requires = "checkpoint"
        )]
        checkpoint_every: u64,
        /// Score the memory in DIR as it stands instead of a cached one: a memory this eval
        /// finished (its kasten-eval-complete.json beside it), e.g. a checkpoint restored
        /// there and changed by hand (evolution rolled back, annotations removed). Nothing
        /// is ingested or enriched; one conversation (--samples).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["fresh", "ablations", "checkpoint"])]
        memory: Option<PathBuf>,
        /// The LLM first writes each question's search terms, as A-Mem retrieves; the
        /// search on the question with them (`kasten_with_terms`) and on them alone
        /// (`llm_terms`) are scored beside Kasten's, with the calls' tokens and time.
        #[arg(long, conflicts_with = "no_llm")]
        search_terms: bool,
    },
    /// Current facts when facts change (MemoryAgentBench FactConsolidation): whether the
    /// newest fact asked about is in the top 1 / 5 of the search (and, with --answer, the
    /// answer's accuracy), per item and overall.
    Factconsolidation {
        /// A FactConsolidation JSON file ({"items": [{"source", "facts", "questions"}]}).
        file: PathBuf,
        /// Only these items (comma-separated sources, e.g. factconsolidation_sh_6k).
        #[arg(long, value_delimiter = ',')]
        samples: Vec<String>,
        /// Without an LLM: notes are not enriched, questions are not answered.
        #[arg(long)]
        no_llm: bool,
        /// Answer every question with `ask` and the LLM in use, scored by the benchmark's
        /// rule.
        #[arg(long, conflicts_with = "no_llm")]
        answer: bool,
        /// Where the ingested memories are cached (default: $KASTEN_HOME/eval).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Ingest again even if a cached memory exists.
        #[arg(long)]
        fresh: bool,
        /// Include every question's result in the --json report.
        #[arg(long)]
        per_question: bool,
        /// Write the facts without enriching them (no LLM at ingest: the memory is the one
        /// --no-llm builds, cached and shared with it); the LLM in use only answers.
        #[arg(long, requires = "answer")]
        no_enrich: bool,
        /// Ask only the first N questions of each item.
        #[arg(long)]
        questions: Option<usize>,
    },
}

pub async fn run(cmd: &EvalCommand, json_out: bool, shell: &dyn Shell) -> Result<()> {
    if let EvalCommand::Factconsolidation {
        file,
        samples,
        no_llm,
        answer,
        cache,
        fresh,
        per_question,
        no_enrich,
        questions,
    } = cmd
    {
        let args = crate::eval_fact::Args {
            file,
            samples,
            no_llm: *no_llm,
            answer: *answer,
            cache: cache.as_deref(),
            fresh: *fresh,
            per_question: *per_question,
            no_enrich: *no_enrich,
            questions: *questions,
        };
        return crate::eval_fact::run(&args, json_out, shell).await;
    }
    let EvalCommand::Locomo {
        file,
        samples: only,
        k,
        no_llm,
        answer,
        answer_with,
        no_construction,
        no_links,
        no_evolution,
        cache,
        fresh,
        per_question,
        held_out,
        ablations,
        no_enrich,
        checkpoint,
        checkpoint_every,
        memory,
        search_terms,
    } = cmd
    else {
        bail!("no such benchmark")
    };
    let k = (*k).max(1);
    // the LLM every other command would use: the environment, else the built-in model
    // (each sample is a memory of its own, with no stored settings)
    let mut profile = kasten_engine::ModelProfile::Full;
    let mut compact_json = false;
    let mut steps = kasten_engine::Steps {
        construction: !no_construction,
        links: !no_links,
        evolution: !no_evolution,
    };
    let llm = if *no_llm {
        None
    } else {
        let env = |k: &str| std::env::var(k).ok();
        let choice = kasten_engine::LlmSettings::combine(&env, &json!({})).choose(&env);
        match (&choice.client, &choice.problem) {
            (Some(c), _) => {
                // A-Mem's prompts without evolution are the full profile's run without it:
                // the same steps, the same memory in the cache (a small model's guided
                // prompts keep their own steps' name, "full")
                profile = choice.profile;
                if !profile.guided() && !profile.evolves() {
                    steps.evolution = false;
                }
                compact_json = c.local().is_some_and(|l| l.options().compact_json);
                Some(c.config().clone())
            }
            (None, problem) => bail!(
                "{}; or pass --no-llm to evaluate retrieval on plain notes",
                problem
                    .clone()
                    .unwrap_or_else(|| LlmConfig::missing_reason().to_owned())
            ),
        }
    };
    let mode = Mode {
        llm,
        profile,
        prompt_version: profile.prompt_version(steps),
        compact_json,
        steps,
        answer: *answer,
        answer_with: *answer_with,
        enrich: !no_enrich,
        held_out: *held_out,
        search_terms: *search_terms,
    };
    let t_run = Instant::now();
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let hash = fnv1a64(&bytes);
    let mut samples =
        locomo::parse(&bytes).with_context(|| format!("cannot read {}", file.display()))?;
    if !only.is_empty() {
        let missing: Vec<&str> = only
            .iter()
            .filter(|id| !samples.iter().any(|s| &s.sample_id == *id))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let known: Vec<&str> = samples.iter().map(|s| s.sample_id.as_str()).collect();
            bail!(
                "no sample {} in {}; it has {}",
                missing.join(", "),
                file.display(),
                known.join(", ")
            );
        }
        samples.retain(|s| only.contains(&s.sample_id));
    }
    if samples.is_empty() {
        bail!("{} holds no conversations", file.display());
    }
    if memory.is_some() && samples.len() != 1 {
        let ids: Vec<&str> = samples.iter().map(|s| s.sample_id.as_str()).collect();
        bail!(
            "--memory scores one conversation; name it with --samples (here: {})",
            ids.join(", ")
        );
    }
    let cache_dir = match (memory, cache) {
        (Some(m), _) => m.clone(),
        (None, Some(d)) => d.clone(),
        (None, None) => default_cache_dir()?,
    };
    let log = |s: String| {
        if !json_out {
            eprintln!("{s}");
        }
    };
    let options = SearchOptions::default();
    let sink = Sink {
        samples: &samples,
        cache: &cache_dir,
        hash,
        fresh: *fresh,
        k,
        options: &options,
        checkpoint: checkpoint
            .as_deref()
            .map(|d| (d, std::time::Duration::from_secs(*checkpoint_every))),
        memory: memory.as_deref(),
        log: &log,
        shell,
    };
    let (reports, totals) = sink.run(&mode).await?;
    fn header<'a>(
        file: &'a Path,
        hash: u64,
        cache: &'a Path,
        k: usize,
        options: &'a SearchOptions,
        mode: &'a Mode,
    ) -> Header<'a> {
        Header {
            file,
            hash,
            cache,
            k,
            options,
            mode,
        }
    }
    let mut report = build_report(
        &header(file, hash, &cache_dir, k, &options, &mode),
        &reports,
        &totals,
        *per_question,
        t_run.elapsed(),
    );
    if *ablations {
        let mut rows = vec![ablation_row("full", &report)];
        for (label, m) in ablation_modes(&mode) {
            log(format!("ablation: {label}"));
            let t = Instant::now();
            let (r, tot) = sink.run(&m).await?;
            rows.push(ablation_row(
                label,
                &build_report(
                    &header(file, hash, &cache_dir, k, &options, &m),
                    &r,
                    &tot,
                    false,
                    t.elapsed(),
                ),
            ));
        }
        report.ablations = Some(rows);
    }
    if json_out {
        // through a `Value`, whose keys are sorted, as the report has always been printed
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&report)?)?
        );
    } else {
        print_report(&report);
    }
    Ok(())
}

/// What every configuration of one run shares: the conversations and where they are cached.
struct Sink<'a> {
    samples: &'a [Sample],
    cache: &'a Path,
    hash: u64,
    fresh: bool,
    k: usize,
    options: &'a SearchOptions,
    /// Where enriching ingests are checkpointed, and how often.
    checkpoint: Option<(&'a Path, std::time::Duration)>,
    /// A memory to score as it stands (`--memory`), in place of the cached one.
    memory: Option<&'a Path>,
    log: &'a dyn Fn(String),
    shell: &'a dyn Shell,
}

impl Sink<'_> {
    /// Ingests (or reuses) and scores every conversation under `mode`, each in a cached
    /// memory keyed by the file, the conversation, the model, the prompt version and steps.
    async fn run(&self, mode: &Mode) -> Result<(Vec<SampleReport>, Totals)> {
        let variant = match &mode.llm {
            Some(c) if mode.enrich => format!(
                "llm-{}-{}{}-{}",
                safe_name(&c.model),
                safe_name(mode.prompt_version),
                if mode.compact_json { "-compact" } else { "" },
                mode.steps.label()
            ),
            _ => "plain".to_owned(),
        };
        let mut totals = Totals::default();
        let mut reports = Vec::new();
        for sample in self.samples {
            let dir = match self.memory {
                Some(m) => m.to_path_buf(),
                None => self.cache.join(format!(
                    "{:016x}-{}-{variant}-v{NOTE_FORMAT}",
                    self.hash,
                    safe_name(&sample.sample_id)
                )),
            };
            let run = eval_sample(
                sample,
                &dir,
                self.fresh,
                self.memory.is_some(),
                self.k,
                self.options,
                mode,
                self.checkpoint,
                &mut totals,
                self.log,
                self.shell,
            );
            let report = tokio::select! {
                r = run => r.with_context(|| format!("sample {}", sample.sample_id))?,
                _ = tokio::signal::ctrl_c() => bail!("interrupted; memories fully ingested so far stay cached (an enriching ingest resumes)"),
            };
            reports.push(report);
        }
        Ok((reports, totals))
    }
}

/// The configurations `--ablations` runs besides the full system: each A-Mem step off,
/// and no LLM at ingest. "No evolution" runs only where the full system evolves (A-Mem's
/// prompts with evolution; it then asks for links alone): for a profile without evolution
/// it is the full system and is not run again.
fn ablation_modes(full: &Mode) -> Vec<(&'static str, Mode)> {
    let evolves = full.profile.evolves();
    let with = |construction, links, evolution| {
        let steps = kasten_engine::Steps {
            construction,
            links,
            evolution,
        };
        Mode {
            llm: full.llm.clone(),
            profile: full.profile,
            prompt_version: full.profile.prompt_version(steps),
            compact_json: full.compact_json,
            steps,
            answer: full.answer,
            answer_with: full.answer_with,
            enrich: true,
            held_out: false,
            search_terms: full.search_terms,
        }
    };
    let mut out = vec![
        ("no-construction", with(false, true, true)),
        ("no-links", with(true, false, true)),
    ];
    if evolves {
        out.push(("no-evolution", with(true, true, false)));
    }
    // the memory without an LLM; when answering, the same model answers from it, so the
    // row shows what the organised memory adds to the model's answers
    out.push((
        "no-llm",
        Mode {
            llm: if full.answer { full.llm.clone() } else { None },
            profile: full.profile,
            prompt_version: full.prompt_version,
            compact_json: full.compact_json,
            steps: kasten_engine::Steps::default(),
            answer: full.answer,
            answer_with: full.answer_with,
            enrich: false,
            held_out: false,
            search_terms: false,
        },
    ));
    out
}
