//! The report: the JSON `--json` prints (built as `serde_json::Value`s) and the table printed
//! for a person.

use std::path::Path;
use std::time::Duration;

use crate::locomo::{Category, MeanByCategory};
use kasten_engine::SearchOptions;
use serde_json::{Value, json};

use super::model::*;

pub(crate) fn means_json(m: &MeanByCategory, field: &str) -> Value {
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
pub(crate) fn mean_1_to_4(m: &MeanByCategory) -> Option<f64> {
    let (s, n) = Category::ALL[..4]
        .iter()
        .filter_map(|c| m.category(*c))
        .fold((0.0, 0usize), |(s, n), (mean, k)| {
            (s + mean * k as f64, n + k)
        });
    (n > 0).then(|| s / n as f64)
}

pub(crate) fn stats_ms(v: &[Duration]) -> Value {
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

pub(crate) struct Header<'a> {
    pub(crate) file: &'a Path,
    pub(crate) hash: u64,
    pub(crate) cache: &'a Path,
    pub(crate) k: usize,
    pub(crate) options: &'a SearchOptions,
    pub(crate) mode: &'a Mode,
}

pub(crate) fn build_report(
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
            "enriched": h.mode.enrich,
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
pub(crate) fn held_out_json(grid: &[(String, Vec<Vec<f64>>)]) -> Option<Value> {
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

pub(crate) fn print_report(r: &Value) {
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
