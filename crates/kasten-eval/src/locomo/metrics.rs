//! LoCoMo's metrics: evidence recall@k, A-Mem's token F1 and BLEU-1, the official F1.

use std::collections::{HashMap, HashSet};

use super::Category;

/// The share of `evidence` found among the first `k` of `retrieved` (ids compared as
/// given; duplicate evidence counts once). `None` when there is no evidence to find.
pub fn recall_at_k(evidence: &[String], retrieved: &[String], k: usize) -> Option<f64> {
    let gold: HashSet<&str> = evidence.iter().map(String::as_str).collect();
    if gold.is_empty() {
        return None;
    }
    let found: HashSet<&str> = retrieved
        .iter()
        .take(k)
        .map(String::as_str)
        .filter(|r| gold.contains(r))
        .collect();
    Some(found.len() as f64 / gold.len() as f64)
}

/// Running mean of a metric, overall and per category.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeanByCategory {
    sum: HashMap<Category, (f64, usize)>,
}

impl MeanByCategory {
    pub fn add(&mut self, category: Category, value: f64) {
        let e = self.sum.entry(category).or_insert((0.0, 0));
        e.0 += value;
        e.1 += 1;
    }

    /// The mean over every value added (each question weighs the same).
    pub fn overall(&self) -> Option<f64> {
        let (s, n) = self
            .sum
            .values()
            .fold((0.0, 0), |(s, n), (a, b)| (s + a, n + b));
        (n > 0).then(|| s / n as f64)
    }

    pub fn count(&self) -> usize {
        self.sum.values().map(|v| v.1).sum()
    }

    pub fn category(&self, c: Category) -> Option<(f64, usize)> {
        self.sum
            .get(&c)
            .filter(|v| v.1 > 0)
            .map(|(s, n)| (s / *n as f64, *n))
    }
}

// ---- answer metrics ----

/// A-Mem's tokenisation for its metrics: lowercase, `.,!?` as spaces, split on whitespace.
fn simple_tokens(s: &str) -> Vec<String> {
    s.to_lowercase()
        .replace(['.', ',', '!', '?'], " ")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// A-Mem's token F1: overlap of the *sets* of tokens of the prediction and the answer.
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p: HashSet<String> = simple_tokens(prediction).into_iter().collect();
    let g: HashSet<String> = simple_tokens(gold).into_iter().collect();
    if p.is_empty() || g.is_empty() {
        return 0.0;
    }
    let common = p.intersection(&g).count() as f64;
    if common == 0.0 {
        return 0.0;
    }
    let precision = common / p.len() as f64;
    let recall = common / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Word tokens with punctuation as separate tokens (close to NLTK's `word_tokenize`).
fn word_tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in s.to_lowercase().chars() {
        if c.is_alphanumeric() || c == '\'' {
            word.push(c);
        } else {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// BLEU-1 as A-Mem computes it (NLTK `sentence_bleu`, unigram weights, smoothing
/// method 1): clipped unigram precision times the brevity penalty.
pub fn bleu1(prediction: &str, gold: &str) -> f64 {
    let p = word_tokens(prediction);
    let g = word_tokens(gold);
    if p.is_empty() || g.is_empty() {
        return 0.0;
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &g {
        *counts.entry(t.as_str()).or_default() += 1;
    }
    let mut matched = 0usize;
    for t in &p {
        if let Some(c) = counts.get_mut(t.as_str())
            && *c > 0
        {
            *c -= 1;
            matched += 1;
        }
    }
    let (c, r) = (p.len() as f64, g.len() as f64);
    let precision = if matched == 0 {
        0.1 / c // method 1: epsilon for a zero count
    } else {
        matched as f64 / c
    };
    let bp = if c > r { 1.0 } else { (1.0 - r / c).exp() };
    bp * precision
}

/// The official LoCoMo answer normalisation: lowercase, no punctuation, no articles
/// (`a`, `an`, `the`, `and`), single spaces; then each word stemmed.
fn official_tokens(s: &str, stemmer: &rust_stemmers::Stemmer) -> Vec<String> {
    let lower = s.to_lowercase().replace(',', "");
    let cleaned: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    cleaned
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the" | "and"))
        .map(|w| stemmer.stem(w).into_owned())
        .collect()
}

fn counted_f1(p: &[String], g: &[String]) -> f64 {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in g {
        *counts.entry(t.as_str()).or_default() += 1;
    }
    let mut same = 0usize;
    for t in p {
        if let Some(c) = counts.get_mut(t.as_str())
            && *c > 0
        {
            *c -= 1;
            same += 1;
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The official LoCoMo F1 (its `evaluation.py`): multi-hop answers are split on commas
/// and each gold part takes its best-matching predicted part; open-domain gold answers
/// keep their first `;` alternative; adversarial questions score 1 when the prediction
/// says the information is not available; otherwise the stemmed token F1.
pub fn locomo_f1(prediction: &str, gold: &str, category: Category) -> f64 {
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    let tok = |s: &str| official_tokens(s, &stemmer);
    match category {
        Category::Adversarial => {
            let p = prediction.to_lowercase();
            if p.contains("no information available") || p.contains("not mentioned") {
                1.0
            } else {
                0.0
            }
        }
        Category::MultiHop => {
            let preds: Vec<Vec<String>> = prediction.split(',').map(tok).collect();
            let golds: Vec<Vec<String>> = gold.split(',').map(tok).collect();
            if golds.is_empty() {
                return 0.0;
            }
            let sum: f64 = golds
                .iter()
                .map(|g| preds.iter().map(|p| counted_f1(p, g)).fold(0.0, f64::max))
                .sum();
            sum / golds.len() as f64
        }
        Category::OpenDomain => {
            let g = gold.split(';').next().unwrap_or(gold);
            counted_f1(&tok(prediction), &tok(g))
        }
        Category::Temporal | Category::SingleHop => counted_f1(&tok(prediction), &tok(gold)),
    }
}
