//! The LoCoMo benchmark (Maharana et al. 2024, the format of the public `locomo10.json`):
//! parsing, how a dialogue turn becomes a note, and the metrics. Pure: the caller reads
//! the file and runs the memory.
//!
//! A file is a list of samples; each has a `conversation` (two speakers, numbered sessions
//! with a date and a list of turns) and `qa` (questions with their answer, the ids of the
//! turns that hold the evidence, and a category). The category ids are the official ones:
//! 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use thiserror::Error;

use kasten_core::chat::ShownNote;

mod metrics;
#[cfg(test)]
mod tests;

pub use metrics::{MeanByCategory, bleu1, locomo_f1, recall_at_k, token_f1};

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
