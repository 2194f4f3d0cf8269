//! The run's settings and what it tallies: the systems compared, the modes, the reports.

use std::collections::HashMap;
use std::time::Duration;

use crate::locomo::{Category, MeanByCategory};
use kasten_engine::LlmConfig;

/// The ranking settings `--held-out` chooses from: (vector, context, date) weights, the
/// default first (ties keep it).
pub(crate) const GRID: &[(f64, f64, f64)] = &{
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
pub(crate) const BOX_BOOST: f32 = 0.1;

/// Bumped whenever the notes made from a file change, so old caches are not reused.
pub(crate) const NOTE_FORMAT: u32 = 1;
pub(crate) const COMPLETE: &str = "kasten-eval-complete.json";
/// Progress of an enriching ingest that has not finished: a run with a real model takes
/// hours, so an interrupted one (Ctrl-C, a crash, the end of a work day) resumes where it
/// stopped instead of starting over.
pub(crate) const PARTIAL: &str = "kasten-eval-partial.json";
pub(crate) const BATCH: usize = 256;
/// Enrichment failures in a row, at the start, after which the LLM is taken to be broken.
pub(crate) const EARLY_FAILURES: usize = 3;

/// The retrieval systems compared in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum System {
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
    WithTerms,
    TermsOnly,
    FusedTerms,
}

impl System {
    pub(crate) const ALL: [System; 15] = [
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
        System::WithTerms,
        System::TermsOnly,
        System::FusedTerms,
    ];

    pub(crate) fn name(self) -> &'static str {
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
            System::WithTerms => "kasten_with_terms",
            System::TermsOnly => "llm_terms",
            System::FusedTerms => "kasten_fused_terms",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
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
            System::WithTerms => {
                "variant: Kasten's search on the question with the LLM's search terms (--search-terms)"
            }
            System::TermsOnly => {
                "variant: Kasten's search on the LLM's search terms alone, as A-Mem retrieves (--search-terms)"
            }
            System::FusedTerms => {
                "variant: reciprocal-rank fusion of Kasten's search on the question and on the LLM's search terms alone (--search-terms)"
            }
        }
    }

    /// Measured only with `--search-terms` (absent from the report otherwise).
    pub(crate) fn needs_terms(self) -> bool {
        matches!(
            self,
            System::WithTerms | System::TermsOnly | System::FusedTerms
        )
    }

    pub(crate) fn is_baseline(self) -> bool {
        matches!(self, System::Dense | System::Bm25 | System::Rrf)
    }
}

/// An LLM answer and its scores.
pub(crate) struct Answered {
    pub(crate) prediction: String,
    pub(crate) f1: f64,
    pub(crate) bleu1: f64,
    pub(crate) locomo_f1: f64,
    /// `--answer-with ask`: the turns (dia ids) of the notes the answer cites.
    pub(crate) cited: Vec<String>,
}

/// How `--answer` answers: A-Mem's answer prompt over the top k (what the published
/// figures use), or Kasten's own `ask` (its retrieval and relevance gate, its prompt with
/// citations, quoting as the model's profile says) — what a person gets in chat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AnswerWith {
    #[default]
    Amem,
    Ask,
}

impl AnswerWith {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AnswerWith::Amem => "amem",
            AnswerWith::Ask => "ask",
        }
    }
}

/// `--answer-with ask`: what the answers cite and when they decline.
#[derive(Default)]
pub(crate) struct AskTally {
    /// Answers to questions of categories 1-4 (the memory holds the answer).
    pub(crate) answerable: usize,
    /// Of those, answers that say "Not in memory."
    pub(crate) answerable_declined: usize,
    /// Of those, answers that cite at least one note.
    pub(crate) answerable_citing: usize,
    /// Of those, answers whose citations were read back from their words (the model
    /// cited nothing), and the notes so cited (questions with known evidence) that are
    /// evidence.
    pub(crate) answerable_inferred: usize,
    pub(crate) inferred: usize,
    pub(crate) inferred_evidence: usize,
    /// Notes cited in answers to questions with known evidence, and how many of them are
    /// evidence turns of their question.
    pub(crate) cited: usize,
    pub(crate) cited_evidence: usize,
    /// Questions with known evidence, and those whose answer cites an evidence turn.
    pub(crate) with_evidence: usize,
    pub(crate) evidence_cited: usize,
    /// Adversarial questions answered, and those answered "Not in memory."
    pub(crate) adversarial: usize,
    pub(crate) adversarial_declined: usize,
    /// Notes shown to the model, over all answers.
    pub(crate) shown: usize,
    /// `[n]` that named no shown note.
    pub(crate) invalid_citations: usize,
}

/// One question's results.
pub(crate) struct QuestionResult {
    pub(crate) sample: String,
    pub(crate) question: String,
    pub(crate) category: Category,
    pub(crate) evidence: Vec<String>,
    pub(crate) retrieved: HashMap<System, Vec<String>>,
    pub(crate) recall: HashMap<System, f64>,
    pub(crate) answer: Option<Answered>,
    /// `--search-terms`: the terms the LLM wrote for the question (empty: none usable).
    pub(crate) search_terms: Option<Vec<String>>,
}

pub(crate) struct SampleReport {
    pub(crate) sample_id: String,
    pub(crate) notes: usize,
    pub(crate) sessions: usize,
    pub(crate) questions: usize,
    pub(crate) ingest: super::schema::SampleIngest,
}

/// Everything measured over the samples.
#[derive(Default)]
pub(crate) struct Totals {
    pub(crate) recall: HashMap<System, MeanByCategory>,
    pub(crate) f1: MeanByCategory,
    pub(crate) bleu1: MeanByCategory,
    pub(crate) locomo_f1: MeanByCategory,
    pub(crate) results: Vec<QuestionResult>,
    pub(crate) search_latency: Vec<Duration>,
    pub(crate) answer_latency: Vec<Duration>,
    pub(crate) context_chars: Vec<usize>,
    pub(crate) skipped_no_evidence: usize,
    pub(crate) unknown_evidence: usize,
    pub(crate) adversarial: usize,
    pub(crate) ingest_seconds: f64,
    pub(crate) ingested_notes: usize,
    pub(crate) ingest_tokens: (u64, u64),
    pub(crate) enriched: u64,
    pub(crate) enrich_failed: u64,
    pub(crate) query_tokens: (u64, u64),
    pub(crate) query_tokens_estimated: bool,
    /// Answers taken from an earlier run of a checkpointed memory instead of asked again.
    pub(crate) answers_reused: usize,
    /// Whether Kasten's default search followed links (`retrieval.follow_links` resolved
    /// for the LLM; the last sample's).
    pub(crate) follows_links: Option<bool>,
    /// `--held-out`: per sample, per grid setting, the recall of each scored question.
    pub(crate) grid: Vec<(String, Vec<Vec<f64>>)>,
    /// `--answer-with ask`: citations and declines.
    pub(crate) ask: AskTally,
    /// `--search-terms`: what writing the questions' search terms cost.
    pub(crate) terms: TermsTally,
}

/// `--search-terms`: the calls that wrote each question's search terms.
#[derive(Default)]
pub(crate) struct TermsTally {
    pub(crate) questions: usize,
    /// Calls whose answer held no usable term (the question alone was searched).
    pub(crate) failed: usize,
    pub(crate) tokens: (u64, u64),
    pub(crate) latency: Vec<Duration>,
}

/// What the run does besides retrieval.
pub(crate) struct Mode {
    /// The LLM that enriches notes at ingest (and answers with --answer).
    pub(crate) llm: Option<LlmConfig>,
    /// The profile the LLM runs (resolved), which says the prompts' version for the steps.
    pub(crate) profile: kasten_engine::ModelProfile,
    /// The enrichment prompts' version (part of the cache key, with the model).
    pub(crate) prompt_version: &'static str,
    /// Whether the built-in model writes its JSON on one line (part of the cache key: it
    /// changes what the model writes).
    pub(crate) compact_json: bool,
    /// The A-Mem steps that run (the ablations switch them off).
    pub(crate) steps: kasten_engine::Steps,
    pub(crate) answer: bool,
    pub(crate) answer_with: AnswerWith,
    /// Whether the LLM enriches the notes at ingest (false: it only answers, from the
    /// memory `--no-llm` builds).
    pub(crate) enrich: bool,
    pub(crate) held_out: bool,
    /// The LLM writes each question's search terms, and the searches with them are
    /// scored beside Kasten's own.
    pub(crate) search_terms: bool,
}
