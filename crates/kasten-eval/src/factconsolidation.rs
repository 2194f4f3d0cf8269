//! The MemoryAgentBench "FactConsolidation" format and its metrics (`kasten eval
//! factconsolidation`): items of facts in the order they were learned, where a later fact
//! about the same subject and relation replaces an earlier one, and questions about the
//! current value, single-hop (one fact) or multi-hop (a chain of facts).
//!
//! **Scoring** (the benchmark's rule): an answer is correct when, lower-cased and without
//! punctuation and articles, it equals or contains one of the accepted answers.
//!
//! **Which facts a question asks about** is not in the data; it is read off the facts. A
//! fact is a statement with its value at the end ("… is associated with the sport of
//! pesäpallo"): the value is what follows the last copula or relation word ("is", "of",
//! "by", "to", …) that is not part of a name ("University *of* Pisa"); the rest is its
//! frame (subject and relation). The *current* fact of a frame is its latest one. A
//! single-hop question's target is the current fact whose value is an accepted answer and
//! whose frame shares the most words with the question. A multi-hop question's targets are
//! a chain of two or three current facts, each one's value named in the next one's frame,
//! the last one's value an accepted answer, the first one's frame sharing the most words
//! with the question. A question for which no such fact or chain exists is *unresolved*
//! and counted apart.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;

use kasten_core::text::Tokenizer;

/// A FactConsolidation file: `{"items": [{"source", "facts", "questions"}]}`.
#[derive(Debug, Clone, Deserialize)]
pub struct File {
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Item {
    pub source: String,
    pub facts: Vec<String>,
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    pub answers: Vec<String>,
}

impl Item {
    /// Multi-hop items are named `…_mh_…` by the benchmark.
    pub fn multi_hop(&self) -> bool {
        self.source.contains("_mh_")
    }
}

/// Reads a file; a clear message when it is not one.
pub fn parse(bytes: &[u8]) -> Result<File, String> {
    let f: File = serde_json::from_slice(bytes).map_err(|e| {
        format!("not a FactConsolidation file ({{\"items\": [{{\"source\", \"facts\", \"questions\"}}]}}): {e}")
    })?;
    if f.items.is_empty() {
        return Err("the file holds no items".into());
    }
    Ok(f)
}

/// The benchmark's normalisation: lower case, punctuation and the articles a/an/the
/// removed, whitespace collapsed.
pub fn normalise(s: &str) -> String {
    let lower: String = s
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    lower
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The benchmark's rule: the normalised prediction equals or contains an accepted answer.
pub fn correct(prediction: &str, answers: &[String]) -> bool {
    let p = normalise(prediction);
    answers.iter().any(|a| {
        let a = normalise(a);
        !a.is_empty() && (p == a || contains_words(&p, &a))
    })
}

/// Whether `hay` holds `needle` as whole words (both normalised).
fn contains_words(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    format!(" {hay} ").contains(&format!(" {needle} "))
}

const MARKERS: &[&str] = &[
    "is", "was", "are", "were", "of", "by", "to", "for", "in", "with", "at", "from",
];

/// A fact split into its frame (subject and relation, normalised) and its value (as
/// written, normalised); `None` when no relation word is found.
pub fn split_fact(fact: &str) -> Option<(String, String)> {
    let text = fact.trim();
    let text = text.strip_suffix('.').unwrap_or(text);
    let words: Vec<&str> = text.split_whitespace().collect();
    for i in (1..words.len()).rev() {
        let w = words[i];
        if !MARKERS.contains(&w) {
            continue;
        }
        // "University of Pisa": a relation word after a capitalised word is in a name
        let copula = matches!(w, "is" | "was" | "are" | "were");
        let after_name = words[i - 1].chars().next().is_some_and(char::is_uppercase);
        if !copula && after_name {
            continue;
        }
        let value = words.get(i + 1..).unwrap_or_default().join(" ");
        if value.is_empty() {
            continue;
        }
        let frame = words.get(..=i).unwrap_or_default().join(" ");
        return Some((normalise(&frame), normalise(&value)));
    }
    None
}

/// The facts of an item read for the metrics: each fact's frame and value, and which are
/// current (the latest of their frame).
pub struct Facts {
    split: Vec<Option<(String, String)>>,
    current: Vec<bool>,
    terms: Vec<BTreeSet<String>>,
    tokenizer: Tokenizer,
}

impl Facts {
    pub fn new(facts: &[String]) -> Self {
        let tokenizer = Tokenizer::default();
        let split: Vec<Option<(String, String)>> = facts.iter().map(|f| split_fact(f)).collect();
        let mut latest: HashMap<&str, usize> = HashMap::new();
        for (i, s) in split.iter().enumerate() {
            if let Some((frame, _)) = s {
                latest.insert(frame.as_str(), i);
            }
        }
        let current = split
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Some((frame, _)) => latest.get(frame.as_str()) == Some(&i),
                None => true,
            })
            .collect();
        let terms = split
            .iter()
            .map(|s| match s {
                Some((frame, _)) => tokenizer.tokenize(frame).into_iter().collect(),
                None => BTreeSet::new(),
            })
            .collect();
        Self {
            split,
            current,
            terms,
            tokenizer,
        }
    }

    /// Facts replaced by a later fact of the same frame.
    pub fn superseded(&self) -> usize {
        self.current.iter().filter(|c| !**c).count()
    }

    /// Whether fact `i` is the latest of its frame.
    pub fn is_current(&self, i: usize) -> bool {
        self.current.get(i).copied().unwrap_or(false)
    }

    fn value(&self, i: usize) -> Option<&str> {
        self.split.get(i)?.as_ref().map(|(_, v)| v.as_str())
    }

    fn frame(&self, i: usize) -> Option<&str> {
        self.split.get(i)?.as_ref().map(|(f, _)| f.as_str())
    }

    /// The facts a question asks about, in chain order (see the module docs); empty when
    /// unresolved.
    pub fn targets(&self, question: &str, answers: &[String], multi_hop: bool) -> Vec<usize> {
        let q: BTreeSet<String> = self.tokenizer.tokenize(question).into_iter().collect();
        let overlap = |i: usize| self.terms.get(i).map_or(0, |t| t.intersection(&q).count());
        let n = self.split.len();
        if !multi_hop {
            // the fact asked about, current or not: if the accepted answer is a value that
            // was replaced (the data has a few), the question is unresolved
            return (0..n)
                .filter(|&i| self.value(i).is_some_and(|v| correct(v, answers)))
                .filter(|&i| overlap(i) > 0)
                .max_by_key(|&i| (overlap(i), i))
                .filter(|&i| self.is_current(i))
                .map(|i| vec![i])
                .unwrap_or_default();
        }
        let answered: Vec<usize> = (0..n)
            .filter(|&i| self.is_current(i))
            .filter(|&i| self.value(i).is_some_and(|v| correct(v, answers)))
            .collect();
        // chains ending in an answered fact, built backwards: the fact before names, as
        // its value, something in this fact's frame
        let before = |i: usize| -> Vec<usize> {
            let Some(frame) = self.frame(i) else {
                return Vec::new();
            };
            (0..n)
                .filter(|&j| j != i && self.is_current(j))
                .filter(|&j| self.value(j).is_some_and(|v| contains_words(frame, v)))
                .collect()
        };
        let mut best: Option<(usize, Vec<usize>)> = None;
        let mut consider = |chain: Vec<usize>| {
            let score = chain.first().map_or(0, |&f| overlap(f));
            if score > 0 && best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, chain));
            }
        };
        for &last in &answered {
            for mid in before(last) {
                consider(vec![mid, last]);
                for first in before(mid) {
                    if first != last {
                        consider(vec![first, mid, last]);
                    }
                }
            }
        }
        best.map(|(_, c)| c).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_benchmarks_scoring_rule() {
        assert!(correct("Pesäpallo.", &s(&["pesäpallo"])));
        assert!(correct(
            "The answer is the University of Pisa",
            &s(&["University of Pisa"])
        ));
        assert!(!correct("Pisa", &s(&["University of Pisa"])));
        assert!(!correct("", &s(&["x"])));
        assert!(!correct("anything", &s(&[""])));
    }

    #[test]
    fn a_fact_is_a_frame_and_a_value() {
        let f = |t: &str| split_fact(t).unwrap();
        assert_eq!(
            f("goaltender is associated with the sport of ice hockey."),
            (
                "goaltender is associated with sport of".into(),
                "ice hockey".into()
            )
        );
        assert_eq!(
            f("The univeristy where Galileo Galilei was educated is University of Pisa."),
            (
                "univeristy where galileo galilei was educated is".into(),
                "university of pisa".into()
            )
        );
        assert_eq!(
            f("Victoria Beckham is married to David Beckham.").1,
            "david beckham"
        );
        assert_eq!(
            f("Pedro Pierluisi worked in the city of Washington, D.C..").1,
            "washington d c"
        );
        assert_eq!(split_fact("hello"), None);
        assert_eq!(split_fact(""), None);
    }

    #[test]
    fn targets_are_the_current_facts_asked_about() {
        let facts = s(&[
            "goaltender is associated with the sport of ice hockey.",
            "pesäpallo was created in the country of Finland.",
            "The author of Our Mutual Friend is Charles Dickens.",
            "Charles Dickens is married to Catherine Dickens.",
            "goaltender is associated with the sport of pesäpallo.",
            "Catherine Dickens is a citizen of United Kingdom.",
            "Charles Dickens is married to Anna Bell.",
            "Anna Bell is a citizen of Belgium.",
        ]);
        let f = Facts::new(&facts);
        assert_eq!(f.superseded(), 2);
        assert!(!f.is_current(0) && f.is_current(4));
        assert_eq!(
            f.targets(
                "Which sport is goaltender associated with?",
                &s(&["pesäpallo"]),
                false
            ),
            vec![4]
        );
        assert_eq!(
            f.targets(
                "What is the country of citizenship of the spouse of the author of Our Mutual Friend?",
                &s(&["Belgium"]),
                true
            ),
            vec![2, 6, 7]
        );
        // an accepted answer that was replaced leaves the question unresolved, rather
        // than pointing at another fact with that value
        let g = Facts::new(&s(&[
            "Anna worked in the city of London.",
            "Bo worked in the city of London.",
            "Anna worked in the city of Paris.",
        ]));
        assert!(
            g.targets("Which city did Anna work in?", &s(&["London"]), false)
                .is_empty()
        );
        assert_eq!(
            g.targets("Which city did Anna work in?", &s(&["Paris"]), false),
            vec![2]
        );
        // the old value is no answer to anything
        assert!(
            f.targets(
                "Which sport is goaltender associated with?",
                &s(&["ice hockey"]),
                false
            )
            .is_empty()
        );
    }
}
