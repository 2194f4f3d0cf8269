//! The LoCoMo benchmark (Maharana et al. 2024, the format of the public `locomo10.json`):
//! parsing, how a dialogue turn becomes a note, and the metrics. Pure: the caller reads
//! the file and runs the memory.
//!
//! A file is a list of samples; each has a `conversation` (two speakers, numbered sessions
//! with a date and a list of turns) and `qa` (questions with their answer, the ids of the
//! turns that hold the evidence, and a category). The category ids are the official ones:
//! 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use thiserror::Error;

use kasten_core::chat::ShownNote;

/// Why a LoCoMo file could not be read.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LocomoError {
    #[error("not a LoCoMo file: {0}")]
    Format(String),
    #[error("sample {sample}: {message}")]
    Sample { sample: String, message: String },
}

/// A question category, by its official id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    MultiHop,
    Temporal,
    OpenDomain,
    SingleHop,
    Adversarial,
}

impl Category {
    pub const ALL: [Category; 5] = [
        Category::MultiHop,
        Category::Temporal,
        Category::OpenDomain,
        Category::SingleHop,
        Category::Adversarial,
    ];

    pub fn from_id(id: u64) -> Option<Self> {
        Some(match id {
            1 => Category::MultiHop,
            2 => Category::Temporal,
            3 => Category::OpenDomain,
            4 => Category::SingleHop,
            5 => Category::Adversarial,
            _ => return None,
        })
    }

    pub fn id(self) -> u8 {
        match self {
            Category::MultiHop => 1,
            Category::Temporal => 2,
            Category::OpenDomain => 3,
            Category::SingleHop => 4,
            Category::Adversarial => 5,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Category::MultiHop => "multi-hop",
            Category::Temporal => "temporal",
            Category::OpenDomain => "open-domain",
            Category::SingleHop => "single-hop",
            Category::Adversarial => "adversarial",
        }
    }
}

/// One dialogue turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub speaker: String,
    /// The turn's id in the conversation, e.g. `D1:3` (session 1, turn 3).
    pub dia_id: String,
    pub text: String,
    /// The caption of an image the speaker shared, if any.
    pub image_caption: Option<String>,
    /// Whether the turn shared an image (even one without a caption).
    pub has_image: bool,
}

impl Turn {
    /// The note a turn becomes: `Speaker: text`, an image turn with its caption first
    /// (`Caroline: [shares a photo of a sunset] Look at this!`).
    pub fn note_content(&self) -> String {
        let image = match (&self.image_caption, self.has_image) {
            (Some(c), _) => {
                let c = c.trim();
                let article = c.starts_with("a ") || c.starts_with("an ");
                if article {
                    format!("[shares {c}] ")
                } else {
                    format!("[shares an image: {c}] ")
                }
            }
            (None, true) => "[shares an image] ".to_owned(),
            (None, false) => String::new(),
        };
        format!("{}: {image}{}", self.speaker, self.text.trim())
            .trim_end()
            .to_owned()
    }
}

/// One session: a dated list of turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub number: u32,
    /// The date as written in the file (`1:56 pm on 8 May, 2023`).
    pub date_text: String,
    /// The same, parsed (taken as UTC); `None` when the text is not a date.
    pub date: Option<DateTime<Utc>>,
    pub turns: Vec<Turn>,
}

/// A question with its gold answer and evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub question: String,
    /// The gold answer as text (numbers are written out); `None` for adversarial questions.
    pub answer: Option<String>,
    /// For adversarial questions, the wrong answer the question baits.
    pub adversarial_answer: Option<String>,
    /// Ids of the turns holding the evidence (`D1:3`), as listed.
    pub evidence: Vec<String>,
    pub category: Category,
}

/// One conversation with its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub sample_id: String,
    pub speaker_a: String,
    pub speaker_b: String,
    /// In session order.
    pub sessions: Vec<Session>,
    pub questions: Vec<Question>,
}

impl Sample {
    /// Every turn with its session, in conversation order.
    pub fn turns(&self) -> impl Iterator<Item = (&Session, &Turn)> {
        self.sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(move |t| (s, t)))
    }

    /// The note source of a turn of this sample: `<sample_id>:<dia_id>` (`conv-26:D1:3`),
    /// so the turns of one session form one source stream (`conv-26:D1`).
    pub fn source_of(&self, dia_id: &str) -> String {
        format!("{}:{dia_id}", self.sample_id)
    }

    /// The turn id back from a note source made by [`Sample::source_of`].
    pub fn dia_id_of<'a>(&self, source: &'a str) -> Option<&'a str> {
        source
            .strip_prefix(self.sample_id.as_str())
            .and_then(|s| s.strip_prefix(':'))
    }
}

// ---- parsing ----

#[derive(Deserialize)]
struct RawSample {
    sample_id: serde_json::Value,
    conversation: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    qa: Vec<RawQa>,
}

#[derive(Deserialize)]
struct RawQa {
    question: String,
    #[serde(default)]
    answer: Option<serde_json::Value>,
    #[serde(default)]
    adversarial_answer: Option<serde_json::Value>,
    #[serde(default)]
    evidence: Vec<serde_json::Value>,
    category: u64,
}

#[derive(Deserialize)]
struct RawTurn {
    speaker: String,
    dia_id: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    img_url: Option<serde_json::Value>,
    #[serde(default)]
    blip_caption: Option<String>,
}

fn value_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Parses a LoCoMo file (the whole JSON document).
pub fn parse(bytes: &[u8]) -> Result<Vec<Sample>, LocomoError> {
    let raw: Vec<RawSample> = serde_json::from_slice(bytes).map_err(|e| {
        LocomoError::Format(format!(
            "{e}; expected a JSON list of samples with sample_id, conversation and qa"
        ))
    })?;
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, r) in raw.into_iter().enumerate() {
        let sample = parse_sample(r, i)?;
        if !seen.insert(sample.sample_id.clone()) {
            return Err(LocomoError::Format(format!(
                "sample id '{}' appears twice",
                sample.sample_id
            )));
        }
        out.push(sample);
    }
    Ok(out)
}

fn parse_sample(r: RawSample, index: usize) -> Result<Sample, LocomoError> {
    let sample_id = value_text(&r.sample_id).unwrap_or_else(|| format!("sample-{index}"));
    let err = |message: String| LocomoError::Sample {
        sample: sample_id.clone(),
        message,
    };
    let text_field = |k: &str| {
        r.conversation
            .get(k)
            .and_then(value_text)
            .unwrap_or_default()
    };
    let speaker_a = text_field("speaker_a");
    let speaker_b = text_field("speaker_b");
    let mut sessions: BTreeMap<u32, Session> = BTreeMap::new();
    for (key, value) in &r.conversation {
        let Some(rest) = key.strip_prefix("session_") else {
            continue;
        };
        let Ok(number) = rest.parse::<u32>() else {
            continue; // session_N_date_time and the like
        };
        let turns: Vec<RawTurn> = serde_json::from_value(value.clone())
            .map_err(|e| err(format!("{key} is not a list of turns: {e}")))?;
        let date_text = text_field(&format!("session_{number}_date_time"));
        let date = parse_session_date(&date_text);
        let turns = turns
            .into_iter()
            .map(|t| Turn {
                has_image: t.img_url.as_ref().is_some_and(|u| !u.is_null())
                    || t.blip_caption.is_some(),
                image_caption: t.blip_caption.filter(|c| !c.trim().is_empty()),
                speaker: t.speaker,
                dia_id: t.dia_id.trim().to_owned(),
                text: t.text,
            })
            .collect();
        sessions.insert(
            number,
            Session {
                number,
                date_text,
                date,
                turns,
            },
        );
    }
    let questions =
        r.qa.into_iter()
            .map(|q| {
                let category = Category::from_id(q.category).ok_or_else(|| {
                    err(format!(
                        "question '{}' has category {}, not 1-5",
                        q.question, q.category
                    ))
                })?;
                Ok(Question {
                    answer: q.answer.as_ref().and_then(value_text),
                    adversarial_answer: q.adversarial_answer.as_ref().and_then(value_text),
                    evidence: q
                        .evidence
                        .iter()
                        .filter_map(value_text)
                        .flat_map(|e| split_evidence(&e))
                        .collect(),
                    question: q.question,
                    category,
                })
            })
            .collect::<Result<Vec<_>, LocomoError>>()?;
    Ok(Sample {
        sample_id,
        speaker_a,
        speaker_b,
        sessions: sessions.into_values().collect(),
        questions,
    })
}

/// Evidence entries sometimes hold several ids (`"D8:6; D9:17"`).
fn split_evidence(e: &str) -> Vec<String> {
    e.split([';', ',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn month_number(name: &str) -> Option<u32> {
    kasten_core::period::month_of(name.to_ascii_lowercase().trim_end_matches('.'))
}

/// Parses a session date as LoCoMo writes it: `1:56 pm on 8 May, 2023` (UTC).
pub fn parse_session_date(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    let (time, date) = match s.split_once(" on ") {
        Some((t, d)) => (Some(t.trim()), d),
        None => (None, s),
    };
    let parts: Vec<&str> = date.split([' ', ',']).filter(|p| !p.is_empty()).collect();
    let [day, month, year] = parts.as_slice() else {
        return None;
    };
    let d = NaiveDate::from_ymd_opt(year.parse().ok()?, month_number(month)?, day.parse().ok()?)?;
    let (mut h, mut m) = (0u32, 0u32);
    if let Some(t) = time {
        let lower = t.to_ascii_lowercase();
        let (clock, pm) = if let Some(c) = lower.strip_suffix("pm") {
            (c.trim(), Some(true))
        } else if let Some(c) = lower.strip_suffix("am") {
            (c.trim(), Some(false))
        } else {
            (lower.trim(), None)
        };
        let (hh, mm) = clock.split_once(':')?;
        h = hh.trim().parse().ok()?;
        m = mm.trim().parse().ok()?;
        match pm {
            Some(true) if h < 12 => h += 12,
            Some(false) if h == 12 => h = 0,
            _ => {}
        }
    }
    Some(d.and_hms_opt(h, m, 0)?.and_utc())
}

// ---- answering ----

/// The gold answer of an adversarial question: the conversation does not say.
pub const NOT_MENTIONED: &str = "Not mentioned in the conversation";

/// The messages that ask an LLM to answer a question from retrieved notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerPrompt {
    pub system: String,
    pub user: String,
}

/// A-Mem's answering protocol for LoCoMo: the retrieved notes (each with its date, and
/// the context and keywords the LLM wrote for it, when it has them) as context, a
/// short-phrase answer in the notes' own words, temporal questions answered
/// with a date, adversarial questions as a choice between "not mentioned" and the baited
/// answer (in an order fixed by `index`, where A-Mem draws it at random).
pub fn answer_prompt(q: &Question, index: usize, notes: &[ShownNote]) -> AnswerPrompt {
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut context = String::new();
    for (i, n) in notes.iter().enumerate() {
        context.push_str(&format!(
            "[{}] {}: {}\n",
            i + 1,
            n.time,
            one_line(&n.content)
        ));
        let ctx = one_line(&n.context);
        if !ctx.is_empty() {
            let ctx: String = ctx.chars().take(200).collect();
            context.push_str(&format!("    context: {ctx}\n"));
        }
        if !n.keywords.is_empty() {
            let kw: Vec<&str> = n.keywords.iter().take(8).map(String::as_str).collect();
            context.push_str(&format!("    keywords: {}\n", kw.join(", ")));
        }
    }
    if context.is_empty() {
        context.push_str("(no notes)\n");
    }
    let question = q.question.trim();
    let ask = match q.category {
        Category::Temporal => format!(
            "Use the dates of the notes to answer with an approximate date. Give the shortest possible answer, in words from the notes where possible.\n\nQuestion: {question}\nShort answer:"
        ),
        Category::Adversarial => {
            let bait = q.adversarial_answer.as_deref().unwrap_or("yes");
            let (a, b) = if index.is_multiple_of(2) {
                (NOT_MENTIONED, bait)
            } else {
                (bait, NOT_MENTIONED)
            };
            format!("Question: {question}\nSelect the correct answer: {a} or {b}.\nShort answer:")
        }
        _ => format!(
            "Write an answer in the form of a short phrase. Answer with exact words from the notes whenever possible.\n\nQuestion: {question}\nShort answer:"
        ),
    };
    AnswerPrompt {
        system: "You answer questions about a long conversation between two people, using only the memory notes given. Each note has the date it was said.".to_owned(),
        user: format!("Memory notes:\n{context}\n{ask}"),
    }
}

// ---- retrieval metrics ----

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

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"[{
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "Back from the lake."}
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Look at this.",
                 "img_url": ["http://x/y.jpg"], "blip_caption": "a photo of a red kayak"}
            ]
        },
        "qa": [
            {"question": "What did Bo show?", "answer": "a kayak", "evidence": ["D1:2"], "category": 4},
            {"question": "When?", "answer": 2023, "evidence": ["D1:2; D2:1"], "category": 2},
            {"question": "Bait?", "adversarial_answer": "a canoe", "evidence": [], "category": 5}
        ]
    }]"#;

    #[test]
    fn parses_sessions_in_order_with_dates_and_image_captions() {
        let samples = parse(FILE.as_bytes()).expect("valid file");
        let s = &samples[0];
        assert_eq!(s.sample_id, "conv-1");
        assert_eq!((s.speaker_a.as_str(), s.speaker_b.as_str()), ("Ann", "Bo"));
        assert_eq!(
            s.sessions.iter().map(|x| x.number).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(
            s.sessions[0].date.map(|d| d.to_rfc3339()),
            Some("2023-05-08T13:56:00+00:00".to_owned())
        );
        let contents: Vec<String> = s.turns().map(|(_, t)| t.note_content()).collect();
        assert_eq!(
            contents,
            [
                "Ann: Hi Bo!",
                "Bo: [shares a photo of a red kayak] Look at this.",
                "Bo: Back from the lake."
            ]
        );
        assert_eq!(s.questions[1].answer.as_deref(), Some("2023"));
        assert_eq!(s.questions[1].evidence, ["D1:2", "D2:1"]);
        assert_eq!(s.questions[2].category, Category::Adversarial);
        assert_eq!(
            s.questions[2].adversarial_answer.as_deref(),
            Some("a canoe")
        );
        assert_eq!(s.source_of("D1:2"), "conv-1:D1:2");
        assert_eq!(s.dia_id_of("conv-1:D1:2"), Some("D1:2"));
        assert_eq!(s.dia_id_of("conv-10:D1:2"), None);
    }

    #[test]
    fn bad_files_are_reported_not_panicked_on() {
        assert!(matches!(parse(b"{}"), Err(LocomoError::Format(_))));
        assert!(matches!(parse(b"not json"), Err(LocomoError::Format(_))));
        let bad_cat = r#"[{"sample_id": "s", "conversation": {}, "qa": [
            {"question": "q", "evidence": [], "category": 9}]}]"#;
        assert!(matches!(
            parse(bad_cat.as_bytes()),
            Err(LocomoError::Sample { .. })
        ));
        let dup =
            r#"[{"sample_id": "s", "conversation": {}}, {"sample_id": "s", "conversation": {}}]"#;
        assert!(matches!(parse(dup.as_bytes()), Err(LocomoError::Format(_))));
    }

    #[test]
    fn session_dates() {
        let d = |s: &str| parse_session_date(s).map(|d| d.format("%Y-%m-%d %H:%M").to_string());
        assert_eq!(
            d("12:09 am on 13 September, 2023").as_deref(),
            Some("2023-09-13 00:09")
        );
        assert_eq!(
            d("12:30 pm on 1 Jan, 2024").as_deref(),
            Some("2024-01-01 12:30")
        );
        assert_eq!(d("8 May, 2023").as_deref(), Some("2023-05-08 00:00"));
        assert_eq!(d("sometime"), None);
        assert_eq!(d("1:00 pm on 31 February, 2023"), None);
    }

    #[test]
    fn recall_counts_distinct_evidence_in_the_first_k() {
        let ev = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let got = ev(&["D1:1", "D1:2", "D3:4", "D2:2"]);
        assert_eq!(recall_at_k(&ev(&["D1:2"]), &got, 10), Some(1.0));
        assert_eq!(recall_at_k(&ev(&["D1:2", "D2:2"]), &got, 3), Some(0.5));
        assert_eq!(recall_at_k(&ev(&["D1:2", "D1:2"]), &got, 3), Some(1.0));
        assert_eq!(recall_at_k(&ev(&["D9:9"]), &got, 10), Some(0.0));
        assert_eq!(recall_at_k(&[], &got, 10), None);
    }

    #[test]
    fn means_by_category() {
        let mut m = MeanByCategory::default();
        assert_eq!(m.overall(), None);
        m.add(Category::Temporal, 1.0);
        m.add(Category::Temporal, 0.0);
        m.add(Category::SingleHop, 1.0);
        assert_eq!(m.category(Category::Temporal), Some((0.5, 2)));
        assert_eq!(m.category(Category::MultiHop), None);
        assert!((m.overall().unwrap_or(0.0) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(m.count(), 3);
    }

    #[test]
    fn answer_prompts_follow_the_category() {
        let samples = parse(FILE.as_bytes()).expect("valid file");
        let qs = &samples[0].questions;
        let mut notes = vec![ShownNote {
            time: "8 May 2023".to_owned(),
            content: "Bo: Look\n at this.".to_owned(),
            ..ShownNote::default()
        }];
        let p = answer_prompt(&qs[0], 0, &notes);
        assert!(
            p.user.contains("[1] 8 May 2023: Bo: Look at this.\n"),
            "{}",
            p.user
        );
        assert!(!p.user.contains("context:") && !p.user.contains("keywords:"));
        notes[0].context = "About Bo's canoe:\n a photo.".to_owned();
        notes[0].keywords = vec!["canoe".to_owned(), "photo".to_owned()];
        let p = answer_prompt(&qs[0], 0, &notes);
        assert!(
            p.user.contains(
                "[1] 8 May 2023: Bo: Look at this.\n    context: About Bo's canoe: a photo.\n    keywords: canoe, photo\n"
            ),
            "{}",
            p.user
        );
        assert!(p.user.contains("Question: What did Bo show?"));
        assert!(p.user.contains("exact words"));
        assert!(
            answer_prompt(&qs[1], 1, &notes)
                .user
                .contains("approximate date")
        );
        let even = answer_prompt(&qs[2], 0, &notes).user;
        assert!(
            even.contains("Not mentioned in the conversation or a canoe"),
            "{even}"
        );
        let odd = answer_prompt(&qs[2], 1, &notes).user;
        assert!(odd.contains("a canoe or Not mentioned in the conversation"));
        assert!(answer_prompt(&qs[0], 0, &[]).user.contains("(no notes)"));
    }

    #[test]
    fn answer_metrics() {
        assert!((token_f1("The kayak.", "the red kayak") - 0.8).abs() < 1e-9);
        assert_eq!(token_f1("", "x"), 0.0);
        assert_eq!(token_f1("boat", "kayak"), 0.0);
        // exact match
        assert!((bleu1("a red kayak", "a red kayak") - 1.0).abs() < 1e-9);
        // shorter than the reference: brevity penalty exp(1 - 3/1)
        assert!((bleu1("kayak", "a red kayak") - (-2.0f64).exp()).abs() < 1e-9);
        assert!(bleu1("boat", "kayak") > 0.0 && bleu1("boat", "kayak") < 0.2);
        // official F1 stems and drops articles
        assert!((locomo_f1("The kayaks", "kayak", Category::SingleHop) - 1.0).abs() < 1e-9);
        assert!(
            (locomo_f1("painting, hiking", "hiking, swimming", Category::MultiHop) - 0.5).abs()
                < 1e-9
        );
        assert!(
            (locomo_f1("Psychology", "psychology; counseling", Category::OpenDomain) - 1.0).abs()
                < 1e-9
        );
        assert_eq!(
            locomo_f1("No information available", "", Category::Adversarial),
            1.0
        );
        assert_eq!(locomo_f1("a canoe", "", Category::Adversarial), 0.0);
    }
}
