//! What `kasten --json eval locomo` prints, as types: every field name, nesting, null and
//! number type is the contract scripts and docs read, so a field here is renamed only
//! with them. Also the files an ingest leaves in a cached memory (the complete marker and
//! the progress of an enriching ingest), read back on the next run.

use std::collections::BTreeMap;

use crate::locomo::{Category, MeanByCategory};
use kasten_llm::Provider;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A metric's value in one category, under the metric's own name (`"recall": 0.5`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) enum Metric {
    #[serde(rename = "recall")]
    Recall(f64),
    #[serde(rename = "f1")]
    F1(f64),
    #[serde(rename = "bleu1")]
    Bleu1(f64),
    #[serde(rename = "locomo_f1")]
    LocomoF1(f64),
}

impl Metric {
    pub(crate) fn value(self) -> f64 {
        match self {
            Metric::Recall(v) | Metric::F1(v) | Metric::Bleu1(v) | Metric::LocomoF1(v) => v,
        }
    }
}

/// One category's mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CategoryMean {
    pub(crate) category: u8,
    #[serde(flatten)]
    pub(crate) mean: Metric,
    pub(crate) questions: usize,
}

/// A metric's mean overall and per category (by the category's name; categories without
/// questions are absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Means {
    pub(crate) overall: Option<f64>,
    pub(crate) questions: usize,
    pub(crate) by_category: BTreeMap<String, CategoryMean>,
}

impl Means {
    /// `metric` names the value (`Metric::Recall`, …).
    pub(crate) fn of(m: &MeanByCategory, metric: fn(f64) -> Metric) -> Self {
        let by_category = Category::ALL
            .iter()
            .filter_map(|&c| {
                m.category(c).map(|(mean, n)| {
                    (
                        c.name().to_owned(),
                        CategoryMean {
                            category: c.id(),
                            mean: metric(mean),
                            questions: n,
                        },
                    )
                })
            })
            .collect();
        Means {
            overall: m.overall(),
            questions: m.count(),
            by_category,
        }
    }

    pub(crate) fn category(&self, c: Category) -> Option<f64> {
        self.by_category.get(c.name()).map(|m| m.mean.value())
    }
}

/// Latencies in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LatencyMs {
    pub(crate) p50: f64,
    pub(crate) p95: f64,
    pub(crate) mean: f64,
    pub(crate) n: usize,
}

/// The LLM of the run (null without one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LlmReport {
    pub(crate) provider: Provider,
    pub(crate) model: String,
    pub(crate) prompt_version: String,
    /// The built-in model's JSON answers on one line (`KASTEN_LLM_COMPACT_JSON`); only
    /// when on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) compact_json: bool,
    /// `full`, or the A-Mem steps left out.
    pub(crate) steps: String,
    pub(crate) enriched: bool,
}

/// What an ingest into a cached memory did: the complete marker's content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Ingest {
    pub(crate) notes: usize,
    pub(crate) seconds: f64,
    pub(crate) notes_per_s: f64,
    pub(crate) enriched: u64,
    pub(crate) enrichment_failed: u64,
    pub(crate) llm_tokens_in: u64,
    pub(crate) llm_tokens_out: u64,
}

/// The progress of an enriching ingest that has not finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Partial {
    pub(crate) added: usize,
    pub(crate) enriched: u64,
    pub(crate) enrichment_failed: u64,
    pub(crate) seconds: f64,
}

/// A sample's ingest in the report: the marker's figures and whether the memory was cached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SampleIngest {
    #[serde(flatten)]
    pub(crate) ingest: Ingest,
    pub(crate) cached: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SampleSummary {
    pub(crate) sample_id: String,
    pub(crate) sessions: usize,
    pub(crate) notes: usize,
    pub(crate) questions: usize,
    pub(crate) ingest: SampleIngest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QuestionCounts {
    pub(crate) scored: usize,
    pub(crate) adversarial_not_scored: usize,
    pub(crate) without_known_evidence: usize,
    pub(crate) unknown_evidence_ids_dropped: usize,
    pub(crate) answered: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SystemReport {
    pub(crate) description: String,
    pub(crate) baseline: bool,
    pub(crate) recall_at_k: Means,
}

/// With `--answer`: the answers' scores (the means over categories 1-4 are null without
/// questions in them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Answers {
    pub(crate) questions: usize,
    pub(crate) f1: Means,
    pub(crate) f1_categories_1_to_4: Option<f64>,
    pub(crate) bleu1: Means,
    pub(crate) bleu1_categories_1_to_4: Option<f64>,
    pub(crate) locomo_f1: Means,
    pub(crate) locomo_f1_categories_1_to_4: Option<f64>,
    /// `amem` (A-Mem's answer prompt over the top k) or `ask` (Kasten's `ask`).
    #[serde(default = "amem", skip_serializing_if = "is_amem")]
    pub(crate) by: String,
    /// With `ask`: what the answers cite and when they decline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ask: Option<AskAnswers>,
}

fn amem() -> String {
    "amem".to_owned()
}

fn is_amem(by: &str) -> bool {
    by == "amem"
}

/// `--answer-with ask`: the answers' citations and declines (shares are null without
/// answers they could be taken of).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AskAnswers {
    /// Answers to questions of categories 1-4 that cite at least one note.
    pub(crate) citing: Option<f64>,
    /// Of the answers to questions of categories 1-4, those whose model cited nothing and
    /// whose citations are the notes their words come from (part of `citing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) citing_inferred: Option<f64>,
    /// Of the notes so cited (questions with known evidence), those that are an evidence
    /// turn of their question (part of `citation_precision`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) inferred_precision: Option<f64>,
    /// Cited notes that are an evidence turn of their question (questions with known
    /// evidence).
    pub(crate) citation_precision: Option<f64>,
    /// Questions with known evidence whose answer cites one of its evidence turns.
    pub(crate) evidence_cited: Option<f64>,
    /// Answers "Not in memory." to questions of categories 1-4 (the memory holds them).
    pub(crate) declined_answerable: Option<f64>,
    /// Answers "Not in memory." to adversarial questions (it does not).
    pub(crate) declined_adversarial: Option<f64>,
    pub(crate) notes_shown_per_answer: Option<f64>,
    /// `[n]` naming no shown note (dropped from the citations).
    pub(crate) invalid_citations: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Latencies {
    pub(crate) search: LatencyMs,
    pub(crate) answer: LatencyMs,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IngestTokens {
    #[serde(rename = "in")]
    pub(crate) tokens_in: u64,
    #[serde(rename = "out")]
    pub(crate) tokens_out: u64,
    pub(crate) per_note: f64,
    pub(crate) notes_enriched: u64,
    pub(crate) notes_not_enriched: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QueryTokens {
    #[serde(rename = "in")]
    pub(crate) tokens_in: u64,
    #[serde(rename = "out")]
    pub(crate) tokens_out: u64,
    pub(crate) per_question: f64,
    pub(crate) estimated: bool,
    /// Answers a checkpointed run took from an earlier run (their tokens and time are
    /// the earlier run's); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) reused: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tokens {
    pub(crate) ingest_llm: IngestTokens,
    pub(crate) query_llm: QueryTokens,
    pub(crate) retrieved_context_per_query_est: f64,
    /// `--search-terms`: the calls that wrote the questions' search terms (absent without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) search_terms: Option<SearchTermsCalls>,
}

/// `--search-terms`: one call per question scored for retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SearchTermsCalls {
    pub(crate) questions: usize,
    /// Calls whose answer held no usable term: the question was searched alone.
    pub(crate) failed: usize,
    #[serde(rename = "in")]
    pub(crate) tokens_in: u64,
    #[serde(rename = "out")]
    pub(crate) tokens_out: u64,
    pub(crate) per_question: f64,
    pub(crate) latency_ms: LatencyMs,
}

/// The notes ingested in this run (cached memories are not ingested again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IngestTotals {
    pub(crate) notes: usize,
    pub(crate) seconds: f64,
}

/// One system's result for one question (`recall` null when it was not scored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QuestionSystem {
    pub(crate) recall: Option<f64>,
    pub(crate) retrieved: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AnswerReport {
    pub(crate) prediction: String,
    pub(crate) f1: f64,
    pub(crate) bleu1: f64,
    pub(crate) locomo_f1: f64,
    /// `--answer-with ask`: the turns the answer cites.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) cited: Vec<String>,
}

/// With `--per-question`: one question's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QuestionReport {
    pub(crate) sample: String,
    pub(crate) question: String,
    pub(crate) category: u8,
    pub(crate) evidence: Vec<String>,
    pub(crate) systems: BTreeMap<String, QuestionSystem>,
    pub(crate) answer: Option<AnswerReport>,
    /// `--search-terms`: the terms the LLM wrote (empty: none usable); absent without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) search_terms: Option<Vec<String>>,
}

/// A ranking setting of the `--held-out` grid.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Weights {
    pub(crate) vector_weight: f64,
    pub(crate) context_weight: f64,
    pub(crate) date_weight: f64,
}

impl From<(f64, f64, f64)> for Weights {
    fn from((v, c, d): (f64, f64, f64)) -> Self {
        Weights {
            vector_weight: v,
            context_weight: c,
            date_weight: d,
        }
    }
}

/// One conversation left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HeldOutRow {
    pub(crate) held_out: String,
    pub(crate) tuned_on: Vec<String>,
    pub(crate) chosen: Weights,
    pub(crate) recall_tuned_on_others: f64,
    pub(crate) recall_held_out: f64,
    pub(crate) recall_default_held_out: f64,
    pub(crate) questions: usize,
}

/// With `--held-out` and two or more conversations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HeldOut {
    /// The number of settings in the grid.
    pub(crate) grid: usize,
    pub(crate) default: Weights,
    pub(crate) note: String,
    pub(crate) conversations: Vec<HeldOutRow>,
    pub(crate) recall_held_out: f64,
    pub(crate) recall_default: f64,
}

/// With `--ablations`: one configuration of the side-by-side table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AblationRow {
    pub(crate) configuration: String,
    /// The LLM's steps (null without an LLM).
    pub(crate) steps: Option<String>,
    pub(crate) recall_at_k: Means,
    pub(crate) answers: Option<Answers>,
    pub(crate) tokens_per_note: f64,
    pub(crate) ingest_seconds_per_note: f64,
}

/// What `kasten --json eval locomo` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Report {
    pub(crate) benchmark: String,
    pub(crate) file: String,
    pub(crate) file_hash: String,
    pub(crate) cache: String,
    pub(crate) k: usize,
    pub(crate) llm: Option<LlmReport>,
    /// The engine's `SearchOptions` as it serialises them.
    pub(crate) search_options: Value,
    /// The default search's link expansion as the memory's setting and LLM resolved it.
    pub(crate) search_follows_links: Option<bool>,
    pub(crate) samples: Vec<SampleSummary>,
    pub(crate) questions: QuestionCounts,
    /// Kasten's default search (the `kasten` system's).
    pub(crate) recall_at_k: Means,
    pub(crate) systems: BTreeMap<String, SystemReport>,
    /// Null without `--answer`.
    pub(crate) answers: Option<Answers>,
    pub(crate) latency_ms: Latencies,
    pub(crate) tokens: Tokens,
    pub(crate) ingest: IngestTotals,
    pub(crate) runtime_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) per_question: Option<Vec<QuestionReport>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held_out: Option<HeldOut>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ablations: Option<Vec<AblationRow>>,
}
