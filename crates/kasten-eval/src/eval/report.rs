//! The report: built as the types of `schema` (what `--json` prints) and the table printed
//! for a person from the same fields.

use std::path::Path;
use std::time::Duration;

use crate::locomo::{Category, MeanByCategory};
use kasten_engine::SearchOptions;

use super::model::*;
use super::schema::*;

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

pub(crate) fn stats_ms(v: &[Duration]) -> LatencyMs {
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
    LatencyMs {
        p50: pct(0.5),
        p95: pct(0.95),
        mean,
        n: v.len(),
    }
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
) -> Report {
    let mean_context_tokens = totals
        .context_chars
        .iter()
        .map(|c| c.div_ceil(4))
        .sum::<usize>() as f64
        / totals.context_chars.len().max(1) as f64;
    let empty = MeanByCategory::default();
    let recall_of = |s: System| Means::of(totals.recall.get(&s).unwrap_or(&empty), Metric::Recall);
    let systems = System::ALL
        .iter()
        .filter(|s| !s.needs_terms() || h.mode.search_terms)
        .map(|&s| {
            (
                s.name().to_owned(),
                SystemReport {
                    description: s.describe().to_owned(),
                    baseline: s.is_baseline(),
                    recall_at_k: recall_of(s),
                },
            )
        })
        .collect();
    let answered = totals.f1.count();
    let notes_total: usize = samples.iter().map(|s| s.notes).sum();
    Report {
        benchmark: "locomo".to_owned(),
        file: h.file.display().to_string(),
        file_hash: format!("{:016x}", h.hash),
        cache: h.cache.display().to_string(),
        k: h.k,
        llm: h.mode.llm.as_ref().map(|c| LlmReport {
            provider: c.provider,
            model: c.model.clone(),
            prompt_version: h.mode.prompt_version.to_owned(),
            compact_json: h.mode.compact_json,
            steps: h.mode.steps.label(),
            enriched: h.mode.enrich,
        }),
        // SearchOptions serialise to a map (plain fields), so this never falls back
        search_options: serde_json::to_value(h.options).unwrap_or_default(),
        search_follows_links: totals.follows_links,
        samples: samples
            .iter()
            .map(|s| SampleSummary {
                sample_id: s.sample_id.clone(),
                sessions: s.sessions,
                notes: s.notes,
                questions: s.questions,
                ingest: s.ingest.clone(),
            })
            .collect(),
        questions: QuestionCounts {
            scored: totals
                .recall
                .get(&System::Kasten)
                .map_or(0, MeanByCategory::count),
            adversarial_not_scored: totals.adversarial,
            without_known_evidence: totals.skipped_no_evidence,
            unknown_evidence_ids_dropped: totals.unknown_evidence,
            answered,
        },
        recall_at_k: recall_of(System::Kasten),
        systems,
        answers: h.mode.answer.then(|| Answers {
            questions: answered,
            f1: Means::of(&totals.f1, Metric::F1),
            f1_categories_1_to_4: mean_1_to_4(&totals.f1),
            bleu1: Means::of(&totals.bleu1, Metric::Bleu1),
            bleu1_categories_1_to_4: mean_1_to_4(&totals.bleu1),
            locomo_f1: Means::of(&totals.locomo_f1, Metric::LocomoF1),
            locomo_f1_categories_1_to_4: mean_1_to_4(&totals.locomo_f1),
            by: h.mode.answer_with.name().to_owned(),
            ask: (h.mode.answer_with == AnswerWith::Ask).then(|| ask_answers(&totals.ask)),
        }),
        latency_ms: Latencies {
            search: stats_ms(&totals.search_latency),
            answer: stats_ms(&totals.answer_latency),
        },
        tokens: Tokens {
            ingest_llm: IngestTokens {
                tokens_in: totals.ingest_tokens.0,
                tokens_out: totals.ingest_tokens.1,
                per_note: (totals.ingest_tokens.0 + totals.ingest_tokens.1) as f64
                    / notes_total.max(1) as f64,
                notes_enriched: totals.enriched,
                notes_not_enriched: totals.enrich_failed,
            },
            query_llm: QueryTokens {
                tokens_in: totals.query_tokens.0,
                tokens_out: totals.query_tokens.1,
                per_question: (totals.query_tokens.0 + totals.query_tokens.1) as f64
                    / answered.max(1) as f64,
                estimated: totals.query_tokens_estimated,
                reused: totals.answers_reused,
            },
            retrieved_context_per_query_est: mean_context_tokens,
            search_terms: h.mode.search_terms.then(|| {
                let t = &totals.terms;
                SearchTermsCalls {
                    questions: t.questions,
                    failed: t.failed,
                    tokens_in: t.tokens.0,
                    tokens_out: t.tokens.1,
                    per_question: (t.tokens.0 + t.tokens.1) as f64 / t.questions.max(1) as f64,
                    latency_ms: stats_ms(&t.latency),
                }
            }),
        },
        ingest: IngestTotals {
            notes: totals.ingested_notes,
            seconds: totals.ingest_seconds,
        },
        runtime_seconds: elapsed.as_secs_f64(),
        per_question: per_question.then(|| totals.results.iter().map(question_report).collect()),
        held_out: held_out(&totals.grid),
        ablations: None,
    }
}

fn ask_answers(t: &AskTally) -> AskAnswers {
    let share = |n: usize, of: usize| (of > 0).then(|| n as f64 / of as f64);
    AskAnswers {
        citing: share(t.answerable_citing, t.answerable),
        citing_inferred: share(t.answerable_inferred, t.answerable),
        inferred_precision: share(t.inferred_evidence, t.inferred),
        citation_precision: share(t.cited_evidence, t.cited),
        evidence_cited: share(t.evidence_cited, t.with_evidence),
        declined_answerable: share(t.answerable_declined, t.answerable),
        declined_adversarial: share(t.adversarial_declined, t.adversarial),
        notes_shown_per_answer: share(t.shown, t.answerable + t.adversarial),
        invalid_citations: t.invalid_citations,
    }
}

fn question_report(r: &QuestionResult) -> QuestionReport {
    let systems = System::ALL
        .iter()
        .filter_map(|s| {
            r.retrieved.get(s).map(|got| {
                (
                    s.name().to_owned(),
                    QuestionSystem {
                        recall: r.recall.get(s).copied(),
                        retrieved: got.clone(),
                    },
                )
            })
        })
        .collect();
    QuestionReport {
        sample: r.sample.clone(),
        question: r.question.clone(),
        category: r.category.id(),
        evidence: r.evidence.clone(),
        systems,
        answer: r.answer.as_ref().map(|a| AnswerReport {
            prediction: a.prediction.clone(),
            f1: a.f1,
            bleu1: a.bleu1,
            locomo_f1: a.locomo_f1,
            cited: a.cited.clone(),
        }),
        search_terms: r.search_terms.clone(),
    }
}

/// Leave one conversation out: the grid setting with the best recall on the others (all
/// their questions pooled), scored on the one left out. `None` with fewer than two.
pub(crate) fn held_out(grid: &[(String, Vec<Vec<f64>>)]) -> Option<HeldOut> {
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
        let questions = per[best].len();
        chosen_sum += per[best].iter().sum::<f64>();
        default_sum += per[0].iter().sum::<f64>();
        n += questions;
        rows.push(HeldOutRow {
            held_out: held.clone(),
            tuned_on: grid
                .iter()
                .filter(|(id, _)| id != held)
                .map(|(id, _)| id.clone())
                .collect(),
            chosen: GRID[best].into(),
            recall_tuned_on_others: tuned(best),
            recall_held_out: mean(&per[best]),
            recall_default_held_out: mean(&per[0]),
            questions,
        });
    }
    Some(HeldOut {
        grid: GRID.len(),
        default: GRID[0].into(),
        note: "recall_held_out is out of sample; the default was tuned on all dev conversations in an earlier round, so its figures are in-sample".to_owned(),
        conversations: rows,
        recall_held_out: chosen_sum / n.max(1) as f64,
        recall_default: default_sum / n.max(1) as f64,
    })
}

/// One row of the side-by-side table: recall, answer scores, tokens and time per note.
pub(crate) fn ablation_row(label: &str, r: &Report) -> AblationRow {
    let notes: f64 = r.samples.iter().map(|s| s.notes as f64).sum();
    let seconds: f64 = r.samples.iter().map(|s| s.ingest.ingest.seconds).sum();
    AblationRow {
        configuration: label.to_owned(),
        steps: r.llm.as_ref().map(|l| l.steps.clone()),
        recall_at_k: r.recall_at_k.clone(),
        answers: r.answers.clone(),
        tokens_per_note: r.tokens.ingest_llm.per_note,
        ingest_seconds_per_note: seconds / notes.max(1.0),
    }
}

pub(crate) fn print_report(r: &Report) {
    let f = |v: Option<f64>| v.map_or("-".to_owned(), |x| format!("{x:.3}"));
    let cats = &Category::ALL[..4];
    println!(
        "LoCoMo evidence recall@{} ({} questions of categories 1-4; {})",
        r.k, r.questions.scored, r.file
    );
    print!("{:<24}{:>9}", "system", "overall");
    for c in cats {
        print!("{:>15}", format!("{} {}", c.id(), c.name()));
    }
    println!();
    for s in System::ALL {
        // a variant not measured in this run (`--search-terms`) has no row
        let Some(rec) = r.systems.get(s.name()).map(|s| &s.recall_at_k) else {
            continue;
        };
        print!("{:<24}{:>9}", s.name(), f(rec.overall));
        for c in cats {
            print!("{:>15}", f(rec.category(*c)));
        }
        println!();
    }
    if let Some(a) = &r.answers {
        println!("\nanswers ({} questions, by {})", a.questions, a.by);
        print!("{:<24}{:>9}", "metric", "1-4");
        for c in &Category::ALL {
            print!("{:>15}", format!("{} {}", c.id(), c.name()));
        }
        println!();
        for (label, means, headline) in [
            ("F1 (A-Mem)", &a.f1, a.f1_categories_1_to_4),
            ("BLEU-1 (A-Mem)", &a.bleu1, a.bleu1_categories_1_to_4),
            ("F1 (LoCoMo)", &a.locomo_f1, a.locomo_f1_categories_1_to_4),
        ] {
            print!("{label:<24}{:>9}", f(headline));
            for c in &Category::ALL {
                print!("{:>15}", f(means.category(*c)));
            }
            println!();
        }
        if let Some(k) = &a.ask {
            println!(
                "ask: {} of answers cite a note, {} of the notes cited are evidence, {} of the questions with evidence cite it; \"Not in memory.\" to {} of the answerable and {} of the adversarial questions; {} notes shown per answer",
                f(k.citing),
                f(k.citation_precision),
                f(k.evidence_cited),
                f(k.declined_answerable),
                f(k.declined_adversarial),
                f(k.notes_shown_per_answer),
            );
        }
    }
    let l = &r.latency_ms.search;
    println!(
        "\nsearch latency: p50 {:.1} ms, p95 {:.1} ms over {} queries",
        l.p50, l.p95, l.n
    );
    let t = &r.tokens;
    println!(
        "LLM tokens: ingest {} in / {} out ({:.0} per note), queries {} in / {} out; retrieved context ≈ {:.0} tokens per query",
        t.ingest_llm.tokens_in,
        t.ingest_llm.tokens_out,
        t.ingest_llm.per_note,
        t.query_llm.tokens_in,
        t.query_llm.tokens_out,
        t.retrieved_context_per_query_est
    );
    println!(
        "ingest: {} notes in {:.1} s (cached memories are not ingested again); run {:.1} s",
        r.ingest.notes, r.ingest.seconds, r.runtime_seconds
    );
    if let Some(rows) = &r.ablations {
        println!(
            "side by side (recall@k overall; F1 overall when answered; tokens and seconds per note at ingest):"
        );
        for row in rows {
            println!(
                "  {:<16} recall {}  F1 {}  {:>6.0} tokens  {:>6.1} s",
                row.configuration,
                f(row.recall_at_k.overall),
                f(row.answers.as_ref().and_then(|a| a.f1.overall)),
                row.tokens_per_note,
                row.ingest_seconds_per_note
            );
        }
    }
    if let Some(h) = &r.held_out {
        println!(
            "held out (out of sample; the default is in-sample): {} over {} settings, default {}",
            f(Some(h.recall_held_out)),
            h.grid,
            f(Some(h.recall_default))
        );
        for c in &h.conversations {
            let ch = &c.chosen;
            // `{:?}` as the JSON writes them (0.0, not 0)
            println!(
                "  {}: tuned on the others ({}) → vector {:?} context {:?} date {:?}: {} (default {})",
                c.held_out,
                f(Some(c.recall_tuned_on_others)),
                ch.vector_weight,
                ch.context_weight,
                ch.date_weight,
                f(Some(c.recall_held_out)),
                f(Some(c.recall_default_held_out))
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
        let v = Means::of(&m, Metric::F1);
        assert_eq!(v.by_category.get("temporal").map(|c| c.category), Some(2));
        assert_eq!(v.category(Category::Temporal), Some(0.0));
        assert_eq!(v.category(Category::OpenDomain), None);
        assert_eq!(v.questions, 3);
    }

    #[test]
    fn stats_of_nothing_are_zero() {
        let s = stats_ms(&[]);
        assert_eq!(s.n, 0);
        assert_eq!(s.mean, 0.0);
        let s = stats_ms(&[Duration::from_millis(2), Duration::from_millis(4)]);
        assert_eq!(s.p95, 4.0);
    }
}
