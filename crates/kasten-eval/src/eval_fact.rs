//! `kasten eval factconsolidation`: Kasten on MemoryAgentBench's FactConsolidation task —
//! facts that change, and questions about their current value.
//!
//! One fresh memory per item (a normal embedded memory under the cache directory), one
//! note per fact, written in order through the write path people and agents use (merge on
//! write and supersession), the links policy `auto` so that supersessions are in force;
//! fact i is given the time `2000-01-01 + i minutes` (the order it was learned) and the
//! source `<item>:<i>`. With an LLM each note is enriched as it arrives. Memories are
//! cached on disk keyed by the file's content hash, the item and the LLM (or none); an
//! enriching ingest that stops resumes where it stopped, as `eval locomo` does.
//!
//! For every question: `current_fact_at_1` / `current_fact_at_5` — the current fact the
//! question asks about (for multi-hop, every fact of the chain) is in the top 1 / 5 of
//! the retrieval `ask` uses for the question: Kasten's default search following the chain
//! the question leads through (`kasten_core::chain`). For multi-hop, "top 1" means each
//! hop's fact first for its hop: the chain's facts are the first hits, in order.
//! (`crate::factconsolidation` says how the facts asked about are read off the data;
//! questions for which none are found are counted as `unresolved` and left out of these
//! two figures.) With `--answer`, `accuracy`:
//! the answer of `kasten ask` (retrieval, answer prompt, the LLM in use) scored by the
//! benchmark's rule, over all questions.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use crate::factconsolidation::{self, Facts, Item};
use anyhow::{Context, Result, bail};
use chrono::{DateTime, Duration as Minutes, Utc};
use kasten_core::{NewNote, NoteId};
use kasten_engine::{Engine, JobOutcome, MergeOptions, Policy, PolicyMode, SearchOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::Shell;
use crate::cache::{default_cache_dir, fnv1a64, safe_name};

/// Bumped whenever the notes made from a file change, so old caches are not reused.
const NOTE_FORMAT: u32 = 1;
const COMPLETE: &str = "kasten-eval-complete.json";
const PARTIAL: &str = "kasten-eval-partial.json";
/// Notes written per batch without an LLM.
const BATCH: usize = 64;
/// Hits per question searched (the figures need 5).
const K: usize = 10;

/// What `eval factconsolidation` was asked.
pub struct Args<'a> {
    pub file: &'a Path,
    pub samples: &'a [String],
    pub no_llm: bool,
    pub answer: bool,
    pub cache: Option<&'a Path>,
    pub fresh: bool,
    pub per_question: bool,
    /// Facts written without the LLM (the `--no-llm` memory); the LLM only answers.
    pub no_enrich: bool,
    /// Only the first N questions of each item.
    pub questions: Option<usize>,
}

/// The time fact `i` was learned.
fn fact_time(i: usize) -> DateTime<Utc> {
    let base = DateTime::<Utc>::from_timestamp(946_684_800, 0).unwrap_or_default();
    base + Minutes::minutes(i64::try_from(i).unwrap_or(i64::MAX / 120))
}

/// The fact a note was made of, by its source `<item>:<i>`.
fn fact_of(source: Option<&str>, item: &str) -> Option<usize> {
    source?.strip_prefix(item)?.strip_prefix(':')?.parse().ok()
}

#[derive(Default, Clone)]
struct Tally {
    questions: usize,
    resolved: usize,
    at_1: usize,
    at_5: usize,
    answered: usize,
    correct: usize,
    facts: usize,
    seconds: f64,
    tokens: u64,
    answer_tokens: u64,
    superseded_notes: usize,
    superseded_true: usize,
    superseded_found_true: usize,
    merged: usize,
    /// The same facts embedded alone (no LLM: in the run that wrote them), else 0.
    embed_alone_seconds: f64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.questions += o.questions;
        self.resolved += o.resolved;
        self.at_1 += o.at_1;
        self.at_5 += o.at_5;
        self.answered += o.answered;
        self.correct += o.correct;
        self.facts += o.facts;
        self.embed_alone_seconds += o.embed_alone_seconds;
        self.seconds += o.seconds;
        self.tokens += o.tokens;
        self.answer_tokens += o.answer_tokens;
        self.superseded_notes += o.superseded_notes;
        self.superseded_true += o.superseded_true;
        self.superseded_found_true += o.superseded_found_true;
        self.merged += o.merged;
    }

    fn figures(&self, llm: bool) -> Figures {
        let ratio =
            |a: usize, b: usize| (b > 0).then(|| ((a as f64 / b as f64) * 1e4).round() / 1e4);
        let per = |x: f64, n: usize| (n > 0).then(|| x / n as f64);
        Figures {
            questions: self.questions,
            resolved: self.resolved,
            unresolved: self.questions - self.resolved,
            current_fact_at_1: ratio(self.at_1, self.resolved),
            current_fact_at_5: ratio(self.at_5, self.resolved),
            accuracy: ratio(self.correct, self.answered),
            facts: self.facts,
            notes_superseded: self.superseded_notes,
            facts_replaced_in_data: self.superseded_true,
            replaced_facts_found_superseded: self.superseded_found_true,
            notes_merged: self.merged,
            tokens_per_fact: per(if llm { self.tokens as f64 } else { 0.0 }, self.facts),
            answer_tokens_per_question: per(self.answer_tokens as f64, self.answered),
            seconds_per_fact: per(self.seconds, self.facts),
            share_of_embedder: (self.embed_alone_seconds > 0.0 && self.seconds > 0.0)
                .then(|| ((self.embed_alone_seconds / self.seconds) * 1e3).round() / 1e3),
        }
    }
}

/// The figures of one item, or of all items of a kind (the `--json` report's fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Figures {
    questions: usize,
    resolved: usize,
    unresolved: usize,
    current_fact_at_1: Option<f64>,
    current_fact_at_5: Option<f64>,
    /// With `--answer`: the share of answers the benchmark's rule accepts.
    accuracy: Option<f64>,
    facts: usize,
    notes_superseded: usize,
    facts_replaced_in_data: usize,
    replaced_facts_found_superseded: usize,
    notes_merged: usize,
    tokens_per_fact: Option<f64>,
    answer_tokens_per_question: Option<f64>,
    seconds_per_fact: Option<f64>,
    /// Ingest (merge on write, supersession) against the embedder alone on the same facts
    /// in the same run: 1.0 is the embedder's pace.
    share_of_embedder: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ItemReport {
    source: String,
    /// `single_hop` or `multi_hop`.
    kind: String,
    cached: bool,
    #[serde(flatten)]
    figures: Figures,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Overall {
    single_hop: Figures,
    multi_hop: Figures,
    all: Figures,
}

/// What `kasten --json eval factconsolidation` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Report {
    benchmark: String,
    file: String,
    file_hash: String,
    cache: String,
    llm: Option<String>,
    enriched: bool,
    k: usize,
    items: Vec<ItemReport>,
    overall: Overall,
    seconds: f64,
    /// With `--per-question`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    questions: Option<Vec<QuestionReport>>,
}

/// With `--per-question`: one question's result (the fields in the order the report has
/// always printed them, alphabetical).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct QuestionReport {
    answers: Vec<String>,
    /// With `--answer`: whether the benchmark's rule accepts the answer (else null).
    correct: Option<bool>,
    current_fact_at_1: bool,
    current_fact_at_5: bool,
    id: String,
    /// With `--answer`: the answer of `ask` (else null).
    prediction: Option<String>,
    question: String,
    /// The fact each hit was made of, best first (null: a note of no fact).
    ranked: Vec<Option<usize>>,
    /// The facts asked about (none: unresolved).
    targets: Vec<usize>,
}

/// What an item's ingest did: the complete marker's content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Ingest {
    facts: usize,
    seconds: f64,
    llm_tokens: u64,
    embedder_alone_seconds: f64,
}

/// The progress of an enriching ingest that has not finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Partial {
    added: usize,
    seconds: f64,
}

pub async fn run(args: &Args<'_>, json_out: bool, shell: &dyn Shell) -> Result<()> {
    let llm = if args.no_llm {
        None
    } else {
        let env = |k: &str| std::env::var(k).ok();
        let choice = kasten_engine::LlmSettings::combine(&env, &json!({})).choose(&env);
        match (&choice.client, &choice.problem) {
            (Some(c), _) => Some(c.config().clone()),
            (None, problem) => bail!(
                "{}; or pass --no-llm to measure retrieval of the current facts",
                problem
                    .clone()
                    .unwrap_or_else(|| kasten_engine::LlmConfig::missing_reason().to_owned())
            ),
        }
    };
    let t_run = Instant::now();
    let bytes =
        std::fs::read(args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    let hash = fnv1a64(&bytes);
    let mut file = factconsolidation::parse(&bytes)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    if !args.samples.is_empty() {
        let missing: Vec<&str> = args
            .samples
            .iter()
            .filter(|s| !file.items.iter().any(|i| &i.source == *s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let known: Vec<&str> = file.items.iter().map(|i| i.source.as_str()).collect();
            bail!(
                "no item {} in {}; it has {}",
                missing.join(", "),
                args.file.display(),
                known.join(", ")
            );
        }
        file.items.retain(|i| args.samples.contains(&i.source));
    }
    let cache = match args.cache {
        Some(d) => d.to_path_buf(),
        None => default_cache_dir()?,
    };
    let log = |s: String| {
        if !json_out {
            eprintln!("{s}");
        }
    };
    let variant = match &llm {
        Some(c) if !args.no_enrich => format!("llm-{}", safe_name(&c.model)),
        _ => "plain".to_owned(),
    };
    let mut items = Vec::new();
    let mut questions = Vec::new();
    let (mut single, mut multi) = (Tally::default(), Tally::default());
    for item in &file.items {
        let dir = cache.join(format!(
            "fc-{hash:016x}-{}-{variant}-v{NOTE_FORMAT}",
            safe_name(&item.source)
        ));
        let run = eval_item(item, &dir, args, llm.is_some(), &log, shell);
        let (tally, cached, qs) = tokio::select! {
            r = run => r.with_context(|| format!("item {}", item.source))?,
            _ = tokio::signal::ctrl_c() => bail!("interrupted; memories fully ingested so far stay cached (an enriching ingest resumes)"),
        };
        items.push(ItemReport {
            source: item.source.clone(),
            kind: if item.multi_hop() {
                "multi_hop"
            } else {
                "single_hop"
            }
            .to_owned(),
            cached,
            figures: tally.figures(llm.is_some()),
        });
        questions.extend(qs);
        if item.multi_hop() {
            multi.add(&tally);
        } else {
            single.add(&tally);
        }
    }
    let mut all = single.clone();
    all.add(&multi);
    let report = Report {
        benchmark: "factconsolidation".to_owned(),
        file: args.file.display().to_string(),
        file_hash: format!("{hash:016x}"),
        cache: cache.display().to_string(),
        llm: llm.as_ref().map(|c| c.model.clone()),
        enriched: llm.is_some() && !args.no_enrich,
        k: K,
        items,
        overall: Overall {
            single_hop: single.figures(llm.is_some()),
            multi_hop: multi.figures(llm.is_some()),
            all: all.figures(llm.is_some()),
        },
        seconds: t_run.elapsed().as_secs_f64(),
        questions: args.per_question.then_some(questions),
    };
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

fn print_report(r: &Report) {
    let f = |v: Option<f64>| v.map_or("-".to_owned(), |x| format!("{x:.3}"));
    let row = |name: &str, o: &Figures| {
        println!(
            "{:<34} {:>6} {:>9} {:>9} {:>8} {:>11} {:>10}",
            name,
            o.facts,
            f(o.current_fact_at_1),
            f(o.current_fact_at_5),
            f(o.accuracy),
            o.notes_superseded,
            f(o.seconds_per_fact),
        );
    };
    println!(
        "{:<34} {:>6} {:>9} {:>9} {:>8} {:>11} {:>10}",
        "item", "facts", "fact@1", "fact@5", "accuracy", "superseded", "s/fact"
    );
    for i in &r.items {
        row(&i.source, &i.figures);
    }
    row("single_hop", &r.overall.single_hop);
    row("multi_hop", &r.overall.multi_hop);
    row("all", &r.overall.all);
}

/// Ingests (or reuses) one item's memory and asks its questions.
async fn eval_item(
    item: &Item,
    dir: &Path,
    args: &Args<'_>,
    llm: bool,
    log: &dyn Fn(String),
    shell: &dyn Shell,
) -> Result<(Tally, bool, Vec<QuestionReport>)> {
    let marker = dir.join(COMPLETE);
    let partial = dir.join(PARTIAL);
    let cached = !args.fresh && marker.is_file();
    let enrich = llm && !args.no_enrich;
    let resume = !args.fresh && !cached && enrich && partial.is_file();
    if !cached && !resume && dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot clear the cached memory {}", dir.display()))?;
    }
    let endpoint = format!("surrealkv://{}", dir.display());
    let mut engine = shell.open_engine(Some(endpoint)).await?;
    if llm && let Err(e) = crate::configure_llm(&mut engine).await {
        engine.close().await;
        return Err(e);
    }
    let result = async {
        let ingest = if cached {
            log(format!(
                "{}: cached memory at {}",
                item.source,
                dir.display()
            ));
            let info = std::fs::read_to_string(&marker).unwrap_or_default();
            // a marker that cannot be read counts as an ingest of nothing
            serde_json::from_str::<Ingest>(&info).unwrap_or_default()
        } else {
            log(format!(
                "{}: ingesting {} facts into {}",
                item.source,
                item.facts.len(),
                dir.display()
            ));
            let v = ingest(&engine, item, enrich, resume, &partial, log, shell).await?;
            std::fs::write(&marker, serde_json::to_string_pretty(&v)?)
                .with_context(|| format!("cannot write {}", marker.display()))?;
            let _ = std::fs::remove_file(&partial);
            v
        };
        let (tally, qs) = score(&engine, item, args, &ingest).await?;
        Ok((tally, cached, qs))
    }
    .await;
    engine.close().await;
    result
}

/// Writes the facts, one note each, in order; with an LLM each note is enriched before
/// the next is written and the progress saved, so a stopped run resumes.
async fn ingest(
    engine: &Engine,
    item: &Item,
    llm: bool,
    resume: bool,
    partial: &Path,
    log: &dyn Fn(String),
    shell: &dyn Shell,
) -> Result<Ingest> {
    engine
        .set_policy(&Policy {
            links: PolicyMode::Auto,
            edits: PolicyMode::Auto,
            auto_accept_confidence: None,
        })
        .await?;
    engine.set_merge_options(&MergeOptions::default()).await?;
    let notes: Vec<NewNote> = item
        .facts
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            NewNote::new(f).ok().map(|n| {
                n.at(Some(fact_time(i)))
                    .with_source(Some(format!("{}:{i}", item.source)))
            })
        })
        .collect();
    let before: Partial = if resume {
        std::fs::read_to_string(partial)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    } else {
        Partial::default()
    };
    let secs_before = before.seconds;
    if !llm && let Some(first) = notes.chunks(BATCH).next() {
        // the embedder loads on its first call and sizes its buffers on its first batch:
        // both happen here, untimed, so the ingest and the embedder alone below are timed
        // on the same warm model
        let texts: Vec<&str> = first.iter().map(|n| n.content.as_str()).collect();
        engine.shared_embedder().embed(&texts)?;
    }
    let t0 = Instant::now();
    if llm {
        let start = if resume {
            let added = (engine.count().await? as usize).min(notes.len());
            log(format!("resuming after fact {added} of {}", notes.len()));
            engine.run_pending(&|_| {}).await?;
            added
        } else {
            0
        };
        let pb = shell.progress_bar();
        pb.set_message("enriching");
        pb.set_length(notes.len() as u64);
        pb.set_position(start as u64);
        for (i, n) in notes.iter().enumerate().skip(start) {
            let note = engine.add(n.clone()).await?;
            if let Some(JobOutcome::Failed { error, .. }) = engine.enrich_note(&note.id).await? {
                log(format!("fact {i}: enrichment failed: {error}"));
            }
            pb.inc(1);
            let p = Partial {
                added: i + 1,
                seconds: secs_before + t0.elapsed().as_secs_f64(),
            };
            let tmp = partial.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_string(&p)?)
                .and_then(|()| std::fs::rename(&tmp, partial))
                .with_context(|| format!("cannot write {}", partial.display()))?;
        }
        pb.finish_and_clear();
    } else {
        // the next batch embedded while one is compared and written
        engine
            .add_batches_merging(notes.chunks(BATCH).map(<[NewNote]>::to_vec), |_| {})
            .await?;
    }
    let seconds = secs_before + t0.elapsed().as_secs_f64();
    // the embedder alone on the same facts, in the same batches, nothing stored (the
    // model was loaded and warmed before the ingest)
    let embed_alone = if llm {
        0.0
    } else {
        let embedder = engine.shared_embedder();
        let te = Instant::now();
        for chunk in notes.chunks(BATCH) {
            let texts: Vec<&str> = chunk.iter().map(|n| n.content.as_str()).collect();
            embedder.embed(&texts)?;
        }
        te.elapsed().as_secs_f64()
    };
    let mut tokens = 0u64;
    if llm {
        for u in engine.usage_by_model().await? {
            tokens += u64::try_from(u.tokens_in + u.tokens_out).unwrap_or(0);
        }
    }
    Ok(Ingest {
        facts: notes.len(),
        seconds,
        llm_tokens: tokens,
        embedder_alone_seconds: embed_alone,
    })
}

/// Asks every question of an item and tallies the figures.
async fn score(
    engine: &Engine,
    item: &Item,
    args: &Args<'_>,
    ingest: &Ingest,
) -> Result<(Tally, Vec<QuestionReport>)> {
    let answer = args.answer;
    let count = engine.count().await? as usize;
    let all = engine.list(count, 0).await?;
    let mut note_of: HashMap<usize, NoteId> = HashMap::new();
    for n in &all {
        if let Some(i) = fact_of(n.source.as_deref(), &item.source) {
            note_of.insert(i, n.id.clone());
        }
    }
    let merged = engine.list_counts().await?.merged as usize;
    let ids: Vec<NoteId> = note_of.values().cloned().collect();
    let superseded: HashSet<NoteId> = engine
        .successors_of(&ids)
        .await?
        .into_iter()
        .map(|s| s.note)
        .collect();
    let facts = Facts::new(&item.facts);
    let replaced: Vec<usize> = (0..item.facts.len())
        .filter(|&i| !facts.is_current(i))
        .collect();
    let found_replaced = replaced
        .iter()
        .filter(|i| note_of.get(i).is_some_and(|id| superseded.contains(id)))
        .count();
    let mut t = Tally {
        facts: item.facts.len(),
        seconds: ingest.seconds,
        tokens: ingest.llm_tokens,
        embed_alone_seconds: ingest.embedder_alone_seconds,
        superseded_notes: superseded.len(),
        superseded_true: replaced.len(),
        superseded_found_true: found_replaced,
        merged,
        ..Tally::default()
    };
    // the retrieval `ask` uses: the chain a question leads through first
    let options = SearchOptions {
        chain: true,
        ..engine.search_options()
    };
    let mut per_question = Vec::new();
    let asked = args.questions.unwrap_or(usize::MAX);
    for q in item.questions.iter().take(asked) {
        t.questions += 1;
        let targets = facts.targets(&q.question, &q.answers, item.multi_hop());
        let out = engine.search_with(&q.question, K, &options).await?;
        let ranked: Vec<Option<usize>> = out
            .hits
            .iter()
            .map(|h| fact_of(h.note.source.as_deref(), &item.source))
            .collect();
        let within = |k: usize| {
            !targets.is_empty()
                && targets
                    .iter()
                    .all(|f| ranked.iter().take(k).any(|r| *r == Some(*f)))
        };
        // at 1, each hop's fact first for its hop: the chain in order at the top
        let at_1 = !targets.is_empty()
            && ranked.len() >= targets.len()
            && targets.iter().zip(&ranked).all(|(f, r)| *r == Some(*f));
        let at_5 = within(5);
        if !targets.is_empty() {
            t.resolved += 1;
            t.at_1 += usize::from(at_1);
            t.at_5 += usize::from(at_5);
        }
        let (mut prediction, mut right) = (None, None);
        if answer {
            let a = engine.ask(&q.question, &[], &|_| {}).await?;
            let ok = factconsolidation::correct(&a.answer, &q.answers);
            t.answered += 1;
            t.correct += usize::from(ok);
            if let Some(u) = &a.usage {
                t.answer_tokens += u64::from(u.total());
            }
            prediction = Some(a.answer);
            right = Some(ok);
        }
        per_question.push(QuestionReport {
            answers: q.answers.clone(),
            correct: right,
            current_fact_at_1: at_1,
            current_fact_at_5: at_5,
            id: q.id.clone(),
            prediction,
            question: q.question.clone(),
            ranked,
            targets,
        });
    }
    Ok((t, per_question))
}

#[cfg(test)]
#[path = "eval_fact_tests.rs"]
mod tests;
