//! `kasten eval locomo`: Kasten on the LoCoMo benchmark.
//!
//! One fresh memory per conversation (a normal embedded memory under the cache
//! directory), one note per dialogue turn (`Speaker: text`, the session date as the note's
//! time, `<sample>:<dia_id>` as its source). The memories are cached on disk, keyed by the
//! file's content hash and the sample id, so a sweep over `-k` ingests once.
//!
//! For every question of categories 1-4 it measures evidence recall@k of Kasten's default
//! search (expansions count toward k) and, in the same run, of the simple baselines:
//! dense top-k, BM25 top-k and their plain reciprocal-rank fusion.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use kasten_core::NewNote;
use kasten_core::locomo::{self, Category, MeanByCategory, Sample};
use kasten_engine::{Engine, SearchOptions};
use kasten_store::Endpoint;
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
        /// Evaluate retrieval without an LLM (no enrichment at ingest, no answers).
        #[arg(long)]
        no_llm: bool,
        /// Answer every question with the LLM and score the answers (F1, BLEU-1).
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
    },
}

/// The retrieval systems compared in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum System {
    Kasten,
    Dense,
    Bm25,
    Rrf,
}

impl System {
    const ALL: [System; 4] = [System::Kasten, System::Dense, System::Bm25, System::Rrf];

    fn name(self) -> &'static str {
        match self {
            System::Kasten => "kasten",
            System::Dense => "dense",
            System::Bm25 => "bm25",
            System::Rrf => "rrf",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            System::Kasten => "Kasten's default search",
            System::Dense => "dense top-k (MiniLM cosine)",
            System::Bm25 => "BM25 top-k",
            System::Rrf => "reciprocal-rank fusion of dense and BM25",
        }
    }
}

/// One scored question.
struct QuestionResult {
    sample: String,
    question: String,
    category: Category,
    evidence: Vec<String>,
    retrieved: HashMap<System, Vec<String>>,
    recall: HashMap<System, f64>,
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
    results: Vec<QuestionResult>,
    search_latency: Vec<Duration>,
    context_chars: Vec<usize>,
    skipped_no_evidence: usize,
    unknown_evidence: usize,
    adversarial: usize,
    ingest_seconds: f64,
    ingested_notes: usize,
}

pub async fn run(cmd: &EvalCommand, json_out: bool) -> Result<()> {
    let EvalCommand::Locomo {
        file,
        samples: only,
        k,
        no_llm,
        answer,
        cache,
        fresh,
        per_question,
    } = cmd;
    let k = (*k).max(1);
    if *answer {
        bail!(
            "--answer is not implemented yet: `kasten eval locomo` measures retrieval (evidence recall@k); run it with --no-llm"
        );
    }
    if !*no_llm {
        bail!(
            "evaluation with LLM enrichment is not implemented yet; pass --no-llm to measure retrieval on plain notes"
        );
    }
    let t_run = Instant::now();
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let hash = fnv1a64(&bytes);
    let mut samples =
        locomo::parse(&bytes).with_context(|| format!("cannot read {}", file.display()))?;
    if !only.is_empty() {
        let missing: Vec<&String> = only
            .iter()
            .filter(|id| !samples.iter().any(|s| &s.sample_id == *id))
            .collect();
        if !missing.is_empty() {
            let known: Vec<&str> = samples.iter().map(|s| s.sample_id.as_str()).collect();
            bail!(
                "no sample {} in {}; it has {}",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
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
    let mut totals = Totals::default();
    let mut reports = Vec::new();
    for sample in &samples {
        let dir = cache_dir.join(format!("{hash:016x}-{}", safe_name(&sample.sample_id)));
        let report = eval_sample(sample, &dir, *fresh, k, &options, &mut totals, &log)
            .await
            .with_context(|| format!("sample {}", sample.sample_id))?;
        reports.push(report);
    }
    let report = build_report(
        file,
        hash,
        &cache_dir,
        k,
        &options,
        &reports,
        &totals,
        *per_question,
        t_run.elapsed(),
    );
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// `$KASTEN_HOME/eval` (next to the default database).
fn default_cache_dir() -> Result<PathBuf> {
    Ok(match Endpoint::default_from_env()? {
        Endpoint::SurrealKv(p) => p.parent().map(Path::to_path_buf).unwrap_or(p).join("eval"),
        _ => PathBuf::from("kasten-eval"),
    })
}

/// A sample id as a directory name.
fn safe_name(s: &str) -> String {
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
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const COMPLETE: &str = "kasten-eval-complete.json";
const BATCH: usize = 256;

async fn eval_sample(
    sample: &Sample,
    dir: &Path,
    fresh: bool,
    k: usize,
    options: &SearchOptions,
    totals: &mut Totals,
    log: &dyn Fn(String),
) -> Result<SampleReport> {
    let marker = dir.join(COMPLETE);
    let cached = !fresh && marker.is_file();
    if !cached && dir.exists() {
        // a partial ingest (interrupted) or --fresh: start over
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot clear the cached memory {}", dir.display()))?;
    }
    let notes: Vec<NewNote> = sample
        .turns()
        .filter_map(|(session, turn)| {
            NewNote::new(&turn.note_content()).ok().map(|n| {
                n.at(session.date)
                    .with_source(Some(sample.source_of(&turn.dia_id)))
            })
        })
        .collect();
    let endpoint = format!("surrealkv://{}", dir.display());
    let engine = crate::open_engine(Some(&endpoint)).await?;
    let result = async {
        let ingest = if cached {
            let info = std::fs::read_to_string(&marker).unwrap_or_default();
            let mut v: Value = serde_json::from_str(&info).unwrap_or(json!({}));
            v["cached"] = json!(true);
            log(format!(
                "{}: cached memory at {}",
                sample.sample_id,
                dir.display()
            ));
            v
        } else {
            log(format!(
                "{}: ingesting {} turns into {}",
                sample.sample_id,
                notes.len(),
                dir.display()
            ));
            let t0 = Instant::now();
            for chunk in notes.chunks(BATCH) {
                engine.add_batch(chunk.to_vec()).await?;
            }
            let secs = t0.elapsed().as_secs_f64();
            totals.ingest_seconds += secs;
            totals.ingested_notes += notes.len();
            let v = json!({
                "notes": notes.len(),
                "seconds": secs,
                "notes_per_s": notes.len() as f64 / secs.max(1e-9),
                "llm_tokens_in": 0,
                "llm_tokens_out": 0,
            });
            std::fs::write(&marker, serde_json::to_string_pretty(&v)?)
                .with_context(|| format!("cannot write {}", marker.display()))?;
            let mut v = v;
            v["cached"] = json!(false);
            v
        };
        let count = engine.count().await? as usize;
        if count != notes.len() {
            bail!(
                "the cached memory at {} holds {count} notes, expected {}; run again with --fresh",
                dir.display(),
                notes.len()
            );
        }
        score_questions(&engine, sample, k, options, totals, log).await?;
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

async fn score_questions(
    engine: &Engine,
    sample: &Sample,
    k: usize,
    options: &SearchOptions,
    totals: &mut Totals,
    log: &dyn Fn(String),
) -> Result<()> {
    // note id → turn id, for the baselines (which rank ids without reading notes)
    let count = engine.count().await? as usize;
    let all = engine.list(count, 0).await?;
    let dia_of: HashMap<String, String> = all
        .iter()
        .filter_map(|n| {
            let src = n.source.as_deref()?;
            Some((n.id.to_string(), sample.dia_id_of(src)?.to_owned()))
        })
        .collect();
    let turns: std::collections::HashSet<&str> =
        sample.turns().map(|(_, t)| t.dia_id.as_str()).collect();
    let to_dia = |ids: &mut dyn Iterator<Item = String>| -> Vec<String> {
        ids.map(|id| dia_of.get(&id).cloned().unwrap_or(id))
            .collect()
    };
    let mut scored = 0usize;
    for q in &sample.questions {
        if q.category == Category::Adversarial {
            totals.adversarial += 1;
            continue;
        }
        let known: Vec<String> = q
            .evidence
            .iter()
            .filter(|e| turns.contains(e.as_str()))
            .cloned()
            .collect();
        totals.unknown_evidence += q.evidence.len() - known.len();
        if known.is_empty() {
            totals.skipped_no_evidence += 1;
            continue;
        }
        let mut retrieved: HashMap<System, Vec<String>> = HashMap::new();
        let t0 = Instant::now();
        let out = engine.search_with(&q.question, k, options).await?;
        totals.search_latency.push(t0.elapsed());
        totals.context_chars.push(
            out.hits
                .iter()
                .map(|h| h.note.content.chars().count())
                .sum(),
        );
        retrieved.insert(
            System::Kasten,
            out.hits
                .iter()
                .map(|h| {
                    h.note
                        .source
                        .as_deref()
                        .and_then(|s| sample.dia_id_of(s))
                        .map_or_else(|| h.note.id.to_string(), str::to_owned)
                })
                .collect(),
        );
        let qv = engine.embed_query(&q.question).await?;
        let dense = engine.rank_vector(&qv, k)?;
        retrieved.insert(
            System::Dense,
            to_dia(&mut dense.into_iter().map(|(id, _)| id.to_string())),
        );
        let bm25 = engine.rank_keyword(&q.question, k)?;
        retrieved.insert(
            System::Bm25,
            to_dia(&mut bm25.into_iter().map(|(id, _)| id.to_string())),
        );
        let rrf = engine.rank_hybrid(&q.question, &qv, k)?;
        retrieved.insert(
            System::Rrf,
            to_dia(&mut rrf.into_iter().map(|h| h.id.to_string())),
        );
        if let Ok(path) = std::env::var("KASTEN_EVAL_DUMP") {
            use std::io::Write;
            let all_d = engine.rank_vector_exact(&qv, count)?;
            let all_b = engine.rank_keyword(&q.question, count)?;
            let m = |v: Vec<(kasten_core::NoteId, f32)>| -> serde_json::Map<String, Value> {
                v.into_iter()
                    .filter_map(|(id, s)| Some((dia_of.get(id.as_str())?.clone(), json!(s))))
                    .collect()
            };
            let line = json!({"sample": sample.sample_id, "q": q.question, "cat": q.category.id(),
                "ev": known, "dense": m(all_d), "bm25": m(all_b)});
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            writeln!(f, "{line}")?;
        }
        let mut recall = HashMap::new();
        for (sys, got) in &retrieved {
            let r = locomo::recall_at_k(&known, got, k).unwrap_or(0.0);
            totals.recall.entry(*sys).or_default().add(q.category, r);
            recall.insert(*sys, r);
        }
        totals.results.push(QuestionResult {
            sample: sample.sample_id.clone(),
            question: q.question.clone(),
            category: q.category,
            evidence: known,
            retrieved,
            recall,
        });
        scored += 1;
    }
    log(format!("{}: {scored} questions scored", sample.sample_id));
    Ok(())
}

fn recall_json(m: Option<&MeanByCategory>) -> Value {
    let Some(m) = m else {
        return json!(null);
    };
    let mut by = serde_json::Map::new();
    for c in Category::ALL {
        if let Some((mean, n)) = m.category(c) {
            by.insert(
                c.name().to_owned(),
                json!({ "category": c.id(), "recall": mean, "questions": n }),
            );
        }
    }
    json!({ "overall": m.overall(), "questions": m.count(), "by_category": by })
}

fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    file: &Path,
    hash: u64,
    cache: &Path,
    k: usize,
    options: &SearchOptions,
    samples: &[SampleReport],
    totals: &Totals,
    per_question: bool,
    elapsed: Duration,
) -> Value {
    let mut lat = totals.search_latency.clone();
    lat.sort();
    let mean_ms =
        lat.iter().map(Duration::as_secs_f64).sum::<f64>() / lat.len().max(1) as f64 * 1e3;
    let mean_context_tokens = totals
        .context_chars
        .iter()
        .map(|c| c.div_ceil(4))
        .sum::<usize>() as f64
        / totals.context_chars.len().max(1) as f64;
    let mut systems = serde_json::Map::new();
    for s in System::ALL {
        systems.insert(
            s.name().to_owned(),
            json!({
                "description": s.describe(),
                "recall_at_k": recall_json(totals.recall.get(&s)),
            }),
        );
    }
    let mut report = json!({
        "benchmark": "locomo",
        "file": file.display().to_string(),
        "file_hash": format!("{hash:016x}"),
        "cache": cache.display().to_string(),
        "k": k,
        "llm": false,
        "search_options": options,
        "samples": samples.iter().map(|s| json!({
            "sample_id": s.sample_id,
            "sessions": s.sessions,
            "notes": s.notes,
            "questions": s.questions,
            "ingest": s.ingest,
        })).collect::<Vec<_>>(),
        "questions": {
            "scored": totals.results.len(),
            "adversarial_not_scored": totals.adversarial,
            "without_known_evidence": totals.skipped_no_evidence,
            "unknown_evidence_ids_dropped": totals.unknown_evidence,
        },
        "recall_at_k": recall_json(totals.recall.get(&System::Kasten)),
        "systems": systems,
        "latency_ms": {
            "search": {
                "p50": percentile_ms(&lat, 0.5),
                "p95": percentile_ms(&lat, 0.95),
                "mean": mean_ms,
                "n": lat.len(),
            },
        },
        "tokens": {
            "ingest_llm": { "in": 0, "out": 0 },
            "query_llm": { "in": 0, "out": 0 },
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
                    sys.insert(
                        s.name().to_owned(),
                        json!({
                            "recall": r.recall.get(&s),
                            "retrieved": r.retrieved.get(&s),
                        }),
                    );
                }
                json!({
                    "sample": r.sample,
                    "question": r.question,
                    "category": r.category.id(),
                    "evidence": r.evidence,
                    "systems": sys,
                })
            })
            .collect();
    }
    report
}

fn print_report(r: &Value) {
    let f = |v: &Value| v.as_f64().map_or("-".to_owned(), |x| format!("{x:.3}"));
    println!(
        "LoCoMo evidence recall@{} ({} questions, categories 1-4; {})",
        r["k"], r["questions"]["scored"], r["file"]
    );
    print!("{:<10}{:>9}", "system", "overall");
    for c in &Category::ALL[..4] {
        print!("{:>13}", format!("{} {}", c.id(), c.name()));
    }
    println!();
    for s in System::ALL {
        let rec = &r["systems"][s.name()]["recall_at_k"];
        print!("{:<10}{:>9}", s.name(), f(&rec["overall"]));
        for c in &Category::ALL[..4] {
            print!("{:>13}", f(&rec["by_category"][c.name()]["recall"]));
        }
        println!();
    }
    let l = &r["latency_ms"]["search"];
    println!(
        "search latency: p50 {:.1} ms, p95 {:.1} ms over {} queries",
        l["p50"].as_f64().unwrap_or(0.0),
        l["p95"].as_f64().unwrap_or(0.0),
        l["n"]
    );
    println!(
        "tokens: LLM 0 at ingest, 0 at query (no LLM); retrieved context ≈ {:.0} tokens per query",
        r["tokens"]["retrieved_context_per_query_est"]
            .as_f64()
            .unwrap_or(0.0)
    );
    println!(
        "ingest: {} notes in {:.1} s (cached memories are not re-ingested); run {:.1} s",
        r["ingest"]["notes"],
        r["ingest"]["seconds"].as_f64().unwrap_or(0.0),
        r["runtime_seconds"].as_f64().unwrap_or(0.0)
    );
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
}
