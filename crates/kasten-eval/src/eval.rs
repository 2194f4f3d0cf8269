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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Shell;
use crate::locomo::{self, Category, MeanByCategory, Question, Sample};
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use kasten_core::NewNote;
use kasten_engine::Endpoint;
use kasten_engine::{Engine, JobOutcome, LlmClient, LlmConfig, SearchOptions};
use kasten_llm::{ChatRequest, Message};
use serde_json::{Value, json};

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

/// The ranking settings `--held-out` chooses from: (vector, context, date) weights, the
/// default first (ties keep it).
const GRID: &[(f64, f64, f64)] = &{
    const V: [f64; 3] = [0.5, 0.3, 0.7];
    const C: [f64; 4] = [0.5, 0.0, 0.25, 0.75];
    const D: [f64; 3] = [0.2, 0.0, 0.4];
    let mut out = [(0.0, 0.0, 0.0); 36];
    let mut i = 0;
    while i < 36 {
        out[i] = (V[i / 12], C[(i / 3) % 4], D[i % 3]);
        i += 1;
    }
    out
};

/// The Box-signal variant: a note in the Box of one of the top 3 hits scores this much more.
const BOX_BOOST: f32 = 0.1;

/// Bumped whenever the notes made from a file change, so old caches are not reused.
const NOTE_FORMAT: u32 = 1;
const COMPLETE: &str = "kasten-eval-complete.json";
/// Progress of an enriching ingest that has not finished: a run with a real model takes
/// hours, so an interrupted one (Ctrl-C, a crash, the end of a work day) resumes where it
/// stopped instead of starting over.
const PARTIAL: &str = "kasten-eval-partial.json";
const BATCH: usize = 256;
/// Enrichment failures in a row, at the start, after which the LLM is taken to be broken.
const EARLY_FAILURES: usize = 3;

/// The retrieval systems compared in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum System {
    Kasten,
    Dense,
    Bm25,
    Rrf,
    FusionOnly,
    NoContext,
    NoDates,
    NoLinks,
    WithLinks,
    TwoHops,
    BoxBoost,
    Chain,
}

impl System {
    const ALL: [System; 12] = [
        System::Kasten,
        System::Dense,
        System::Bm25,
        System::Rrf,
        System::FusionOnly,
        System::NoContext,
        System::NoDates,
        System::NoLinks,
        System::WithLinks,
        System::TwoHops,
        System::BoxBoost,
        System::Chain,
    ];

    fn name(self) -> &'static str {
        match self {
            System::Kasten => "kasten",
            System::Dense => "dense",
            System::Bm25 => "bm25",
            System::Rrf => "rrf",
            System::FusionOnly => "score_fusion",
            System::NoContext => "kasten_without_context",
            System::NoDates => "kasten_without_dates",
            System::NoLinks => "kasten_without_links",
            System::WithLinks => "kasten_with_links",
            System::TwoHops => "kasten_two_hops",
            System::BoxBoost => "kasten_box_boost",
            System::Chain => "kasten_chain",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            System::Kasten => "Kasten's default search (kasten search)",
            System::Dense => "baseline: dense top-k (MiniLM cosine)",
            System::Bm25 => "baseline: BM25 top-k",
            System::Rrf => "baseline: reciprocal-rank fusion of dense and BM25 (k = 60)",
            System::FusionOnly => "ablation: Kasten's score fusion alone (no context, no dates)",
            System::NoContext => "ablation: Kasten without context from the source stream",
            System::NoDates => "ablation: Kasten without date-aware ranking",
            System::NoLinks => "ablation: Kasten without link expansion (links not followed)",
            System::WithLinks => "variant: Kasten following links one hop (whatever the setting)",
            System::TwoHops => "variant: Kasten following links two hops",
            System::BoxBoost => {
                "variant: Kasten with Box membership as a signal (notes in the Box of a top-3 hit score more)"
            }
            System::Chain => {
                "variant: Kasten following the question through a chain of notes (what ask retrieves)"
            }
        }
    }

    fn is_baseline(self) -> bool {
        matches!(self, System::Dense | System::Bm25 | System::Rrf)
    }
}

/// An LLM answer and its scores.
struct Answered {
    prediction: String,
    f1: f64,
    bleu1: f64,
    locomo_f1: f64,
}

/// One question's results.
struct QuestionResult {
    sample: String,
    question: String,
    category: Category,
    evidence: Vec<String>,
    retrieved: HashMap<System, Vec<String>>,
    recall: HashMap<System, f64>,
    answer: Option<Answered>,
}

struct SampleReport {
    sample_id: String,
    notes: usize,
    sessions: usize,
    questions: usize,
    ingest: Value,
}

/// Everything measured over the samples.
#[derive(Default)]
struct Totals {
    recall: HashMap<System, MeanByCategory>,
    f1: MeanByCategory,
    bleu1: MeanByCategory,
    locomo_f1: MeanByCategory,
    results: Vec<QuestionResult>,
    search_latency: Vec<Duration>,
    answer_latency: Vec<Duration>,
    context_chars: Vec<usize>,
    skipped_no_evidence: usize,
    unknown_evidence: usize,
    adversarial: usize,
    ingest_seconds: f64,
    ingested_notes: usize,
    ingest_tokens: (u64, u64),
    enriched: u64,
    enrich_failed: u64,
    query_tokens: (u64, u64),
    query_tokens_estimated: bool,
    /// Whether Kasten's default search followed links (`retrieval.follow_links` resolved
    /// for the LLM; the last sample's).
    follows_links: Option<bool>,
    /// `--held-out`: per sample, per grid setting, the recall of each scored question.
    grid: Vec<(String, Vec<Vec<f64>>)>,
}

/// What the run does besides retrieval.
struct Mode {
    /// The LLM that enriches notes at ingest (and answers with --answer).
    llm: Option<LlmConfig>,
    /// The enrichment prompts' version (part of the cache key, with the model).
    prompt_version: &'static str,
    /// The A-Mem steps that run (the ablations switch them off).
    steps: kasten_engine::Steps,
    answer: bool,
    held_out: bool,
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
        no_construction,
        no_links,
        no_evolution,
        cache,
        fresh,
        per_question,
        held_out,
        ablations,
    } = cmd
    else {
        bail!("no such benchmark")
    };
    let k = (*k).max(1);
    // the LLM every other command would use: the environment, else the built-in model
    // (each sample is a memory of its own, with no stored settings)
    let mut prompt_version = kasten_core::prompts::PROMPT_VERSION;
    let llm = if *no_llm {
        None
    } else {
        let env = |k: &str| std::env::var(k).ok();
        let choice = kasten_engine::LlmSettings::combine(&env, &json!({})).choose(&env);
        match (&choice.client, &choice.problem) {
            (Some(c), _) => {
                if choice.profile == kasten_engine::ModelProfile::Small {
                    prompt_version = kasten_core::prompts::GUIDED_PROMPT_VERSION;
                }
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
        prompt_version,
        steps: kasten_engine::Steps {
            construction: !no_construction,
            links: !no_links,
            evolution: !no_evolution,
        },
        answer: *answer,
        held_out: *held_out,
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
    let cache_dir = match cache {
        Some(d) => d.clone(),
        None => default_cache_dir()?,
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
        report["ablations"] = json!(rows);
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
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
    log: &'a dyn Fn(String),
    shell: &'a dyn Shell,
}

impl Sink<'_> {
    /// Ingests (or reuses) and scores every conversation under `mode`, each in a cached
    /// memory keyed by the file, the conversation, the model, the prompt version and steps.
    async fn run(&self, mode: &Mode) -> Result<(Vec<SampleReport>, Totals)> {
        let variant = match &mode.llm {
            None => "plain".to_owned(),
            Some(c) => format!(
                "llm-{}-{}-{}",
                safe_name(&c.model),
                safe_name(mode.prompt_version),
                mode.steps.label()
            ),
        };
        let mut totals = Totals::default();
        let mut reports = Vec::new();
        for sample in self.samples {
            let dir = self.cache.join(format!(
                "{:016x}-{}-{variant}-v{NOTE_FORMAT}",
                self.hash,
                safe_name(&sample.sample_id)
            ));
            let run = eval_sample(
                sample,
                &dir,
                self.fresh,
                self.k,
                self.options,
                mode,
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
/// and no LLM at all. A small model's guided prompts make no evolution, so for it
/// "no evolution" is the full system and is not run again.
fn ablation_modes(full: &Mode) -> Vec<(&'static str, Mode)> {
    let with = |construction, links, evolution| Mode {
        llm: full.llm.clone(),
        prompt_version: full.prompt_version,
        steps: kasten_engine::Steps {
            construction,
            links,
            evolution,
        },
        answer: full.answer,
        held_out: false,
    };
    let mut out = vec![
        ("no-construction", with(false, true, true)),
        ("no-links", with(true, false, true)),
    ];
    if full.prompt_version != kasten_core::prompts::GUIDED_PROMPT_VERSION {
        out.push(("no-evolution", with(true, true, false)));
    }
    out.push((
        "no-llm",
        Mode {
            llm: None,
            prompt_version: full.prompt_version,
            steps: kasten_engine::Steps::default(),
            answer: false,
            held_out: false,
        },
    ));
    out
}

/// One row of the side-by-side table: recall, answer scores, tokens and time per note.
fn ablation_row(label: &str, r: &Value) -> Value {
    let notes: f64 = r["samples"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["notes"].as_f64()).sum())
        .unwrap_or(0.0);
    let seconds: f64 = r["samples"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["ingest"]["seconds"].as_f64())
                .sum()
        })
        .unwrap_or(0.0);
    json!({
        "configuration": label,
        "steps": r["llm"]["steps"],
        "recall_at_k": r["recall_at_k"],
        "answers": r["answers"],
        "tokens_per_note": r["tokens"]["ingest_llm"]["per_note"],
        "ingest_seconds_per_note": seconds / notes.max(1.0),
    })
}

/// `$KASTEN_HOME/eval` (next to the default database).
pub(crate) fn default_cache_dir() -> Result<PathBuf> {
    Ok(match Endpoint::default_from_env()? {
        Endpoint::SurrealKv(p) => p.parent().map(Path::to_path_buf).unwrap_or(p).join("eval"),
        _ => PathBuf::from("kasten-eval"),
    })
}

/// A sample id or model name as part of a directory name.
pub(crate) fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a: a stable content hash for cache keys (not for security).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The notes a sample becomes, in conversation order.
fn sample_notes(sample: &Sample) -> Vec<NewNote> {
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
async fn eval_sample(
    sample: &Sample,
    dir: &Path,
    fresh: bool,
    k: usize,
    options: &SearchOptions,
    mode: &Mode,
    totals: &mut Totals,
    log: &dyn Fn(String),
    shell: &dyn Shell,
) -> Result<SampleReport> {
    let marker = dir.join(COMPLETE);
    let partial = dir.join(PARTIAL);
    let cached = !fresh && marker.is_file();
    let resume = !fresh && !cached && mode.llm.is_some() && partial.is_file();
    if !cached && !resume && dir.exists() {
        // a partial ingest without an LLM (quick to redo) or --fresh: start over
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot clear the cached memory {}", dir.display()))?;
    }
    let notes = sample_notes(sample);
    let endpoint = format!("surrealkv://{}", dir.display());
    let mut engine = shell.open_engine(Some(endpoint)).await?;
    if mode.llm.is_some() {
        if let Err(e) = crate::configure_llm(&mut engine).await {
            engine.close().await;
            return Err(e);
        }
        engine.set_steps(mode.steps);
    }
    let result = async {
        let ingest = if cached {
            log(format!(
                "{}: cached memory at {}",
                sample.sample_id,
                dir.display()
            ));
            let info = std::fs::read_to_string(&marker).unwrap_or_default();
            let mut v: Value = serde_json::from_str(&info).unwrap_or(json!({}));
            v["cached"] = json!(true);
            v
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
                log,
                shell,
            };
            let mut v = ingest(&engine, &notes, mode.llm.is_some(), &progress).await?;
            totals.ingest_seconds += v["seconds"].as_f64().unwrap_or(0.0);
            totals.ingested_notes += notes.len();
            std::fs::write(&marker, serde_json::to_string_pretty(&v)?)
                .with_context(|| format!("cannot write {}", marker.display()))?;
            // the complete marker supersedes it; a leftover one is harmless
            let _ = std::fs::remove_file(&partial);
            v["cached"] = json!(false);
            v
        };
        totals.ingest_tokens.0 += ingest["llm_tokens_in"].as_u64().unwrap_or(0);
        totals.ingest_tokens.1 += ingest["llm_tokens_out"].as_u64().unwrap_or(0);
        totals.enriched += ingest["enriched"].as_u64().unwrap_or(0);
        totals.enrich_failed += ingest["enrichment_failed"].as_u64().unwrap_or(0);
        let count = engine.count().await? as usize;
        if count != notes.len() {
            bail!(
                "the cached memory at {} holds {count} notes, expected {}; run again with --fresh",
                dir.display(),
                notes.len()
            );
        }
        score_questions(&engine, sample, k, options, mode, totals, log).await?;
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
struct Progress<'a> {
    path: &'a Path,
    resume: bool,
    log: &'a dyn Fn(String),
    shell: &'a dyn Shell,
}

impl Progress<'_> {
    /// (notes enriched, failed, seconds spent) by the runs before this one.
    fn before(&self) -> (u64, u64, f64) {
        if !self.resume {
            return (0, 0, 0.0);
        }
        let v: Value = std::fs::read_to_string(self.path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(json!({}));
        (
            v["enriched"].as_u64().unwrap_or(0),
            v["enrichment_failed"].as_u64().unwrap_or(0),
            v["seconds"].as_f64().unwrap_or(0.0),
        )
    }

    fn save(&self, added: usize, enriched: u64, failed: u64, seconds: f64) -> Result<()> {
        let v = json!({"added": added, "enriched": enriched, "enrichment_failed": failed, "seconds": seconds});
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, v.to_string())
            .and_then(|()| std::fs::rename(&tmp, self.path))
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// Writes the notes into the (empty) memory. With an LLM each note is enriched before
/// the next is added, so its links and evolution only see the conversation so far; the
/// progress is saved as it goes, and a run that finds it resumes after the last note added
/// (finishing that note's enrichment first).
async fn ingest(
    engine: &Engine,
    notes: &[NewNote],
    enrich: bool,
    progress: &Progress<'_>,
) -> Result<Value> {
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
    Ok(json!({
        "notes": notes.len(),
        "seconds": secs,
        "notes_per_s": notes.len() as f64 / secs.max(1e-9),
        "enriched": enriched,
        "enrichment_failed": failed,
        "llm_tokens_in": tin.max(0),
        "llm_tokens_out": tout.max(0),
    }))
}

async fn score_questions(
    engine: &Engine,
    sample: &Sample,
    k: usize,
    options: &SearchOptions,
    mode: &Mode,
    totals: &mut Totals,
    log: &dyn Fn(String),
) -> Result<()> {
    // Kasten's default search follows links or not as the memory's setting and LLM say
    let options = &SearchOptions {
        links: engine.follows_links(),
        ..options.clone()
    };
    totals.follows_links = Some(engine.follows_links());
    // note id → turn id, for the rankings that return ids without reading notes
    let count = engine.count().await? as usize;
    let all = engine.list(count, 0).await?;
    let dia_of: HashMap<String, String> = all
        .iter()
        .filter_map(|n| {
            let src = n.source.as_deref()?;
            Some((n.id.to_string(), sample.dia_id_of(src)?.to_owned()))
        })
        .collect();
    let to_dia = |ids: Vec<String>| -> Vec<String> {
        ids.into_iter()
            .map(|id| dia_of.get(&id).cloned().unwrap_or(id))
            .collect()
    };
    let turns: HashSet<&str> = sample.turns().map(|(_, t)| t.dia_id.as_str()).collect();
    // the Boxes, for the Box-signal variant (computed once if the memory has none)
    if engine.boxes().await?.is_empty() {
        engine.recompute_boxes().await?;
    }
    let box_of: HashMap<kasten_core::NoteId, usize> = engine
        .boxes()
        .await?
        .into_iter()
        .enumerate()
        .flat_map(|(i, b)| b.members.into_iter().map(move |m| (m, i)))
        .collect();
    let client = if mode.answer {
        match engine.llm_client() {
            Some(c) => Some(c.clone()),
            None => bail!("{}", LlmConfig::missing_reason()),
        }
    } else {
        None
    };
    let mut scored = 0usize;
    for (index, q) in sample.questions.iter().enumerate() {
        let known: Vec<String> = q
            .evidence
            .iter()
            .filter(|e| turns.contains(e.as_str()))
            .cloned()
            .collect();
        totals.unknown_evidence += q.evidence.len() - known.len();
        let adversarial = q.category == Category::Adversarial;
        if adversarial {
            totals.adversarial += 1;
        } else if known.is_empty() {
            totals.skipped_no_evidence += 1;
        }
        let score_retrieval = !adversarial && !known.is_empty();
        if !score_retrieval && client.is_none() {
            continue;
        }

        let t0 = Instant::now();
        let out = engine.search_with(&q.question, k, options).await?;
        totals.search_latency.push(t0.elapsed());
        totals.context_chars.push(
            out.hits
                .iter()
                .map(|h| h.note.content.chars().count())
                .sum(),
        );
        let answer = match &client {
            Some(c) => {
                let t = Instant::now();
                let a = answer_question(c, q, index, &out.hits, totals).await?;
                totals.answer_latency.push(t.elapsed());
                Some(a)
            }
            None => None,
        };
        let mut retrieved: HashMap<System, Vec<String>> = HashMap::new();
        retrieved.insert(
            System::Kasten,
            to_dia(out.hits.iter().map(|h| h.note.id.to_string()).collect()),
        );
        let mut recall = HashMap::new();
        if score_retrieval {
            let qv = engine.embed_query(&q.question).await?;
            let ids = |v: Vec<(kasten_core::NoteId, f32)>| -> Vec<String> {
                v.into_iter().map(|(id, _)| id.to_string()).collect()
            };
            retrieved.insert(System::Dense, to_dia(ids(engine.rank_vector(&qv, k)?)));
            retrieved.insert(
                System::Bm25,
                to_dia(ids(engine.rank_keyword(&q.question, k)?)),
            );
            let rrf = engine.rank_hybrid(&q.question, &qv, k)?;
            retrieved.insert(
                System::Rrf,
                to_dia(rrf.into_iter().map(|h| h.id.to_string()).collect()),
            );
            let ablations = [
                (System::FusionOnly, SearchOptions::fusion_only()),
                (
                    System::NoContext,
                    SearchOptions {
                        context_weight: 0.0,
                        ..options.clone()
                    },
                ),
                (
                    System::NoDates,
                    SearchOptions {
                        date_weight: 0.0,
                        ..options.clone()
                    },
                ),
                (
                    System::NoLinks,
                    SearchOptions {
                        links: false,
                        ..options.clone()
                    },
                ),
                (
                    System::WithLinks,
                    SearchOptions {
                        links: true,
                        ..options.clone()
                    },
                ),
                (
                    System::TwoHops,
                    SearchOptions {
                        links: true,
                        link_hops: 2,
                        ..options.clone()
                    },
                ),
            ];
            {
                let mut pool = engine.rank_expanded(&q.question, &qv, 3 * k, options)?;
                let top: HashSet<usize> = pool
                    .iter()
                    .take(3)
                    .filter_map(|h| box_of.get(&h.id).copied())
                    .collect();
                for h in &mut pool {
                    if box_of.get(&h.id).is_some_and(|b| top.contains(b)) {
                        h.score *= 1.0 + BOX_BOOST;
                    }
                }
                pool.sort_by(|a, b| b.score.total_cmp(&a.score));
                pool.truncate(k);
                retrieved.insert(
                    System::BoxBoost,
                    to_dia(pool.into_iter().map(|h| h.id.to_string()).collect()),
                );
            }
            for (sys, opts) in ablations {
                let hits = engine.rank_expanded(&q.question, &qv, k, &opts)?;
                retrieved.insert(
                    sys,
                    to_dia(hits.into_iter().map(|h| h.id.to_string()).collect()),
                );
            }
            let chained = SearchOptions {
                chain: true,
                ..options.clone()
            };
            let hits = engine.search_with(&q.question, k, &chained).await?.hits;
            retrieved.insert(
                System::Chain,
                to_dia(hits.into_iter().map(|h| h.note.id.to_string()).collect()),
            );
            if mode.held_out {
                if totals
                    .grid
                    .last()
                    .is_none_or(|(id, _)| *id != sample.sample_id)
                {
                    totals
                        .grid
                        .push((sample.sample_id.clone(), vec![Vec::new(); GRID.len()]));
                }
                for (i, &(v, c, d)) in GRID.iter().enumerate() {
                    let opts = SearchOptions {
                        vector_weight: v,
                        context_weight: c,
                        date_weight: d,
                        ..options.clone()
                    };
                    let hits = engine.rank_expanded(&q.question, &qv, k, &opts)?;
                    let got = to_dia(hits.into_iter().map(|h| h.id.to_string()).collect());
                    let r = locomo::recall_at_k(&known, &got, k).unwrap_or(0.0);
                    if let Some((_, per)) = totals.grid.last_mut() {
                        per[i].push(r);
                    }
                }
            }
            for (sys, got) in &retrieved {
                let r = locomo::recall_at_k(&known, got, k).unwrap_or(0.0);
                totals.recall.entry(*sys).or_default().add(q.category, r);
                recall.insert(*sys, r);
            }
            scored += 1;
        }
        if let Some(a) = &answer {
            totals.f1.add(q.category, a.f1);
            totals.bleu1.add(q.category, a.bleu1);
            totals.locomo_f1.add(q.category, a.locomo_f1);
        }
        totals.results.push(QuestionResult {
            sample: sample.sample_id.clone(),
            question: q.question.clone(),
            category: q.category,
            evidence: known,
            retrieved,
            recall,
            answer,
        });
    }
    log(format!(
        "{}: {scored} questions scored for retrieval{}",
        sample.sample_id,
        if client.is_some() {
            ", every question answered"
        } else {
            ""
        }
    ));
    Ok(())
}

/// Asks the LLM and scores its answer against the gold one.
async fn answer_question(
    client: &LlmClient,
    q: &Question,
    index: usize,
    hits: &[kasten_engine::SearchHit],
    totals: &mut Totals,
) -> Result<Answered> {
    let notes: Vec<kasten_core::chat::ShownNote> = hits
        .iter()
        .map(|h| kasten_core::chat::ShownNote {
            time: h.note.created_at.format("%-d %B %Y").to_string(),
            content: h.note.content.clone(),
            context: h.note.context.clone(),
            keywords: h.note.keywords.clone(),
        })
        .collect();
    let prompt = locomo::answer_prompt(q, index, &notes);
    let req = ChatRequest {
        messages: vec![Message::system(prompt.system), Message::user(prompt.user)],
        temperature: 0.0,
        max_tokens: Some(64),
        grammar: None,
    };
    let resp = client
        .chat(&req)
        .await
        .context("the LLM could not answer")?;
    totals.query_tokens.0 += u64::from(resp.usage.prompt_tokens);
    totals.query_tokens.1 += u64::from(resp.usage.completion_tokens);
    totals.query_tokens_estimated |= resp.usage.estimated;
    let prediction = resp.text.trim().to_owned();
    let gold = match q.category {
        Category::Adversarial => locomo::NOT_MENTIONED.to_owned(),
        _ => q.answer.clone().unwrap_or_default(),
    };
    Ok(Answered {
        f1: locomo::token_f1(&prediction, &gold),
        bleu1: locomo::bleu1(&prediction, &gold),
        locomo_f1: locomo::locomo_f1(&prediction, &gold, q.category),
        prediction,
    })
}

fn means_json(m: &MeanByCategory, field: &str) -> Value {
    let mut by = serde_json::Map::new();
    for c in Category::ALL {
        if let Some((mean, n)) = m.category(c) {
            by.insert(
                c.name().to_owned(),
                json!({ "category": c.id(), field: mean, "questions": n }),
            );
        }
    }
    json!({ "overall": m.overall(), "questions": m.count(), "by_category": by })
}

/// The mean over categories 1-4 (the usual headline; adversarial questions are scored
/// by a different rule).
fn mean_1_to_4(m: &MeanByCategory) -> Option<f64> {
    let (s, n) = Category::ALL[..4]
        .iter()
        .filter_map(|c| m.category(*c))
        .fold((0.0, 0usize), |(s, n), (mean, k)| {
            (s + mean * k as f64, n + k)
        });
    (n > 0).then(|| s / n as f64)
}

fn stats_ms(v: &[Duration]) -> Value {
    let mut v = v.to_vec();
    v.sort();
    let pct = |p: f64| {
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[i.min(v.len() - 1)].as_secs_f64() * 1e3
    };
    let total: f64 = v.iter().map(Duration::as_secs_f64).fold(0.0, |a, b| a + b);
    let mean = total / v.len().max(1) as f64 * 1e3;
    json!({ "p50": pct(0.5), "p95": pct(0.95), "mean": mean, "n": v.len() })
}

struct Header<'a> {
    file: &'a Path,
    hash: u64,
    cache: &'a Path,
    k: usize,
    options: &'a SearchOptions,
    mode: &'a Mode,
}

fn build_report(
    h: &Header<'_>,
    samples: &[SampleReport],
    totals: &Totals,
    per_question: bool,
    elapsed: Duration,
) -> Value {
    let mean_context_tokens = totals
        .context_chars
        .iter()
        .map(|c| c.div_ceil(4))
        .sum::<usize>() as f64
        / totals.context_chars.len().max(1) as f64;
    let empty = MeanByCategory::default();
    let mut systems = serde_json::Map::new();
    for s in System::ALL {
        systems.insert(
            s.name().to_owned(),
            json!({
                "description": s.describe(),
                "baseline": s.is_baseline(),
                "recall_at_k": means_json(totals.recall.get(&s).unwrap_or(&empty), "recall"),
            }),
        );
    }
    let answered = totals.f1.count();
    let notes_total: usize = samples.iter().map(|s| s.notes).sum();
    let mut report = json!({
        "benchmark": "locomo",
        "file": h.file.display().to_string(),
        "file_hash": format!("{:016x}", h.hash),
        "cache": h.cache.display().to_string(),
        "k": h.k,
        "llm": h.mode.llm.as_ref().map(|c| json!({
            "provider": c.provider,
            "model": c.model,
            "prompt_version": h.mode.prompt_version,
            "steps": h.mode.steps.label(),
        })),
        "search_options": h.options,
        // the default search's link expansion as the memory's setting and LLM resolved it
        "search_follows_links": totals.follows_links,
        "samples": samples.iter().map(|s| json!({
            "sample_id": s.sample_id,
            "sessions": s.sessions,
            "notes": s.notes,
            "questions": s.questions,
            "ingest": s.ingest,
        })).collect::<Vec<_>>(),
        "questions": {
            "scored": totals.recall.get(&System::Kasten).map_or(0, MeanByCategory::count),
            "adversarial_not_scored": totals.adversarial,
            "without_known_evidence": totals.skipped_no_evidence,
            "unknown_evidence_ids_dropped": totals.unknown_evidence,
            "answered": answered,
        },
        "recall_at_k": means_json(totals.recall.get(&System::Kasten).unwrap_or(&empty), "recall"),
        "systems": systems,
        "answers": if h.mode.answer {
            json!({
                "questions": answered,
                "f1": means_json(&totals.f1, "f1"),
                "f1_categories_1_to_4": mean_1_to_4(&totals.f1),
                "bleu1": means_json(&totals.bleu1, "bleu1"),
                "bleu1_categories_1_to_4": mean_1_to_4(&totals.bleu1),
                "locomo_f1": means_json(&totals.locomo_f1, "locomo_f1"),
                "locomo_f1_categories_1_to_4": mean_1_to_4(&totals.locomo_f1),
            })
        } else {
            json!(null)
        },
        "latency_ms": {
            "search": stats_ms(&totals.search_latency),
            "answer": stats_ms(&totals.answer_latency),
        },
        "tokens": {
            "ingest_llm": {
                "in": totals.ingest_tokens.0,
                "out": totals.ingest_tokens.1,
                "per_note": (totals.ingest_tokens.0 + totals.ingest_tokens.1) as f64
                    / notes_total.max(1) as f64,
                "notes_enriched": totals.enriched,
                "notes_not_enriched": totals.enrich_failed,
            },
            "query_llm": {
                "in": totals.query_tokens.0,
                "out": totals.query_tokens.1,
                "per_question": (totals.query_tokens.0 + totals.query_tokens.1) as f64
                    / answered.max(1) as f64,
                "estimated": totals.query_tokens_estimated,
            },
            "retrieved_context_per_query_est": mean_context_tokens,
        },
        "ingest": {
            "notes": totals.ingested_notes,
            "seconds": totals.ingest_seconds,
        },
        "runtime_seconds": elapsed.as_secs_f64(),
    });
    if per_question {
        report["per_question"] = totals
            .results
            .iter()
            .map(|r| {
                let mut sys = serde_json::Map::new();
                for s in System::ALL {
                    if let Some(got) = r.retrieved.get(&s) {
                        sys.insert(
                            s.name().to_owned(),
                            json!({ "recall": r.recall.get(&s), "retrieved": got }),
                        );
                    }
                }
                json!({
                    "sample": r.sample,
                    "question": r.question,
                    "category": r.category.id(),
                    "evidence": r.evidence,
                    "systems": sys,
                    "answer": r.answer.as_ref().map(|a| json!({
                        "prediction": a.prediction,
                        "f1": a.f1,
                        "bleu1": a.bleu1,
                        "locomo_f1": a.locomo_f1,
                    })),
                })
            })
            .collect();
    }
    if let Some(h) = held_out_json(&totals.grid) {
        report["held_out"] = h;
    }
    report
}

/// Leave one conversation out: the grid setting with the best recall on the others (all
/// their questions pooled), scored on the one left out. `None` with fewer than two.
fn held_out_json(grid: &[(String, Vec<Vec<f64>>)]) -> Option<Value> {
    if grid.len() < 2 {
        return None;
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    let mut rows = Vec::new();
    let (mut chosen_sum, mut default_sum, mut n) = (0.0, 0.0, 0usize);
    for (held, per) in grid {
        let others: Vec<&Vec<Vec<f64>>> = grid
            .iter()
            .filter(|(id, _)| id != held)
            .map(|(_, p)| p)
            .collect();
        let tuned = |i: usize| -> f64 {
            let pooled: Vec<f64> = others.iter().flat_map(|p| p[i].iter().copied()).collect();
            mean(&pooled)
        };
        let mut best = 0;
        for i in 1..GRID.len() {
            if tuned(i) > tuned(best) + 1e-12 {
                best = i;
            }
        }
        let (v, c, d) = GRID[best];
        let questions = per[best].len();
        chosen_sum += per[best].iter().sum::<f64>();
        default_sum += per[0].iter().sum::<f64>();
        n += questions;
        rows.push(json!({
            "held_out": held,
            "tuned_on": grid.iter().filter(|(id, _)| id != held).map(|(id, _)| id.clone()).collect::<Vec<_>>(),
            "chosen": {"vector_weight": v, "context_weight": c, "date_weight": d},
            "recall_tuned_on_others": tuned(best),
            "recall_held_out": mean(&per[best]),
            "recall_default_held_out": mean(&per[0]),
            "questions": questions,
        }));
    }
    Some(json!({
        "grid": GRID.len(),
        "default": {"vector_weight": GRID[0].0, "context_weight": GRID[0].1, "date_weight": GRID[0].2},
        "note": "recall_held_out is out of sample; the default was tuned on all dev conversations in an earlier round, so its figures are in-sample",
        "conversations": rows,
        "recall_held_out": chosen_sum / n.max(1) as f64,
        "recall_default": default_sum / n.max(1) as f64,
    }))
}

fn print_report(r: &Value) {
    let f = |v: &Value| v.as_f64().map_or("-".to_owned(), |x| format!("{x:.3}"));
    let cats = &Category::ALL[..4];
    println!(
        "LoCoMo evidence recall@{} ({} questions of categories 1-4; {})",
        r["k"],
        r["questions"]["scored"],
        r["file"].as_str().unwrap_or("")
    );
    print!("{:<24}{:>9}", "system", "overall");
    for c in cats {
        print!("{:>15}", format!("{} {}", c.id(), c.name()));
    }
    println!();
    for s in System::ALL {
        let rec = &r["systems"][s.name()]["recall_at_k"];
        print!("{:<24}{:>9}", s.name(), f(&rec["overall"]));
        for c in cats {
            print!("{:>15}", f(&rec["by_category"][c.name()]["recall"]));
        }
        println!();
    }
    if !r["answers"].is_null() {
        let a = &r["answers"];
        println!("\nanswers ({} questions)", a["questions"]);
        print!("{:<24}{:>9}", "metric", "1-4");
        for c in &Category::ALL {
            print!("{:>15}", format!("{} {}", c.id(), c.name()));
        }
        println!();
        for (label, key, field) in [
            ("F1 (A-Mem)", "f1", "f1"),
            ("BLEU-1 (A-Mem)", "bleu1", "bleu1"),
            ("F1 (LoCoMo)", "locomo_f1", "locomo_f1"),
        ] {
            print!(
                "{label:<24}{:>9}",
                f(&a[format!("{key}_categories_1_to_4")])
            );
            for c in &Category::ALL {
                print!("{:>15}", f(&a[key]["by_category"][c.name()][field]));
            }
            println!();
        }
    }
    let l = &r["latency_ms"]["search"];
    println!(
        "\nsearch latency: p50 {:.1} ms, p95 {:.1} ms over {} queries",
        l["p50"].as_f64().unwrap_or(0.0),
        l["p95"].as_f64().unwrap_or(0.0),
        l["n"]
    );
    let t = &r["tokens"];
    println!(
        "LLM tokens: ingest {} in / {} out ({:.0} per note), queries {} in / {} out; retrieved context ≈ {:.0} tokens per query",
        t["ingest_llm"]["in"],
        t["ingest_llm"]["out"],
        t["ingest_llm"]["per_note"].as_f64().unwrap_or(0.0),
        t["query_llm"]["in"],
        t["query_llm"]["out"],
        t["retrieved_context_per_query_est"].as_f64().unwrap_or(0.0)
    );
    println!(
        "ingest: {} notes in {:.1} s (cached memories are not ingested again); run {:.1} s",
        r["ingest"]["notes"],
        r["ingest"]["seconds"].as_f64().unwrap_or(0.0),
        r["runtime_seconds"].as_f64().unwrap_or(0.0)
    );
    if let Some(rows) = r["ablations"].as_array() {
        println!(
            "side by side (recall@k overall; F1 overall when answered; tokens and seconds per note at ingest):"
        );
        for row in rows {
            println!(
                "  {:<16} recall {}  F1 {}  {:>6.0} tokens  {:>6.1} s",
                row["configuration"].as_str().unwrap_or("?"),
                f(&row["recall_at_k"]["overall"]),
                f(&row["answers"]["f1"]["overall"]),
                row["tokens_per_note"].as_f64().unwrap_or(0.0),
                row["ingest_seconds_per_note"].as_f64().unwrap_or(0.0)
            );
        }
    }
    let h = &r["held_out"];
    if h.is_object() {
        println!(
            "held out (out of sample; the default is in-sample): {} over {} settings, default {}",
            f(&h["recall_held_out"]),
            h["grid"],
            f(&h["recall_default"])
        );
        for c in h["conversations"].as_array().into_iter().flatten() {
            let ch = &c["chosen"];
            println!(
                "  {}: tuned on the others ({}) → vector {} context {} date {}: {} (default {})",
                c["held_out"].as_str().unwrap_or("?"),
                f(&c["recall_tuned_on_others"]),
                ch["vector_weight"],
                ch["context_weight"],
                ch["date_weight"],
                f(&c["recall_held_out"]),
                f(&c["recall_default_held_out"])
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_are_stable_and_safe() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(safe_name("conv-26"), "conv-26");
        assert_eq!(safe_name("../x y"), "___x_y");
    }

    #[test]
    fn means_over_categories_one_to_four() {
        let mut m = MeanByCategory::default();
        m.add(Category::SingleHop, 1.0);
        m.add(Category::Temporal, 0.0);
        m.add(Category::Adversarial, 1.0);
        assert_eq!(mean_1_to_4(&m), Some(0.5));
        assert_eq!(mean_1_to_4(&MeanByCategory::default()), None);
        let v = means_json(&m, "f1");
        assert_eq!(v["by_category"]["temporal"]["category"], 2);
        assert_eq!(v["questions"], 3);
    }

    #[test]
    fn stats_of_nothing_are_zero() {
        let s = stats_ms(&[]);
        assert_eq!(s["n"], 0);
        assert_eq!(s["mean"].to_string(), "0.0");
        let s = stats_ms(&[Duration::from_millis(2), Duration::from_millis(4)]);
        assert_eq!(s["p95"], 4.0);
    }
}
