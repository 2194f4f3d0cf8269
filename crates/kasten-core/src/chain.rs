//! Following a question through a chain of notes: "the country of citizenship of the
//! spouse of the author of *Our Mutual Friend*" is answered by three notes, each naming
//! what the next one is about ("The author of Our Mutual Friend is Charles Darwin.",
//! "Charles Darwin is married to Amala Paul.", "Amala Paul is a citizen of Belgium.").
//! One search for the question finds the first; the others share little with it.
//!
//! The rule, without an LLM: the best current note found for the question adds something
//! the question did not say — its *value*, the last run of words in it that the question
//! does not hold, cut to the name it ends with ("citizen of Israel" → "Israel") or, with
//! no capitalised word, to the words after its last stop word ("the sport of association
//! football" → "association football"). The next search asks for the value together with
//! what the question asked that the note did not answer ("country citizenship spouse" +
//! "Charles Darwin"), and the next link of the chain is the best current note that *is
//! about* the value: it holds the value's words in order, and not only as its own value
//! ("The capital of United Kingdom is London" does not continue a chain that reached
//! "London"). Pure: the searching is the engine's.

use std::collections::HashSet;

use crate::text::STOP_WORDS;

/// At most this many notes in a chain (the question's note included).
pub const MAX_HOPS: usize = 3;

/// One step of a chain: what the note added and what to search for next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// The value the note added to the question, as written in the note.
    pub value: String,
    /// The next search: the value and the words of the question the note did not use.
    pub next_query: String,
}

/// A word as written, without surrounding punctuation.
fn words(text: &str) -> Vec<&str> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect()
}

fn is_stop(word: &str) -> bool {
    STOP_WORDS.contains(&word.to_lowercase().as_str())
}

/// A word compared without case or a plural "s" ("Citizens" → "citizen"). Not a stemmer:
/// "association" must stay apart from "associated", "citizenship" from "citizen".
fn norm(word: &str) -> String {
    let w = word.to_lowercase();
    match w.strip_suffix('s') {
        Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_owned(),
        _ => w,
    }
}

/// The step from `question` (or the previous step's query) through `note`: `None` when
/// the note adds nothing the question did not hold.
pub fn hop(query: &str, note: &str) -> Option<Hop> {
    let asked: HashSet<String> = words(query).iter().map(|w| norm(w)).collect();
    let value = value_in(&asked, note)?;
    let used: HashSet<String> = words(note).iter().map(|w| norm(w)).collect();
    let rest: Vec<&str> = words(query)
        .into_iter()
        .filter(|w| !is_stop(w) && !used.contains(&norm(w)))
        .collect();
    let next_query = if rest.is_empty() {
        value.clone()
    } else {
        format!("{value} {}", rest.join(" "))
    };
    Some(Hop { value, next_query })
}

/// The last run of `note`'s words that `asked` does not hold (stop words may sit inside
/// a run), cut to its name or to the words after its last stop word.
fn value_in(asked: &HashSet<String>, note: &str) -> Option<String> {
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for w in words(note) {
        if is_stop(w) {
            if !run.is_empty() {
                run.push(w);
            }
        } else if asked.contains(&norm(w)) {
            if !run.is_empty() {
                runs.push(std::mem::take(&mut run));
            }
        } else {
            run.push(w);
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    let mut last = runs
        .into_iter()
        .map(|mut r| {
            while r.last().is_some_and(|w| is_stop(w)) {
                r.pop();
            }
            r
        })
        .rfind(|r| !r.is_empty())?;
    let named = last
        .iter()
        .position(|w| w.chars().next().is_some_and(char::is_uppercase));
    match named {
        Some(i) => last.drain(..i).for_each(drop),
        None => {
            if let Some(i) = last.iter().rposition(|w| is_stop(w)) {
                last.drain(..=i).for_each(drop);
            }
        }
    }
    (!last.is_empty()).then(|| last.join(" "))
}

/// Whether `note` is about `value` (holds its words in order) rather than only stating it
/// as its own value (ending with it).
pub fn continues(value: &str, note: &str) -> bool {
    let v: Vec<String> = words(value).iter().map(|w| w.to_lowercase()).collect();
    let n: Vec<String> = words(note).iter().map(|w| w.to_lowercase()).collect();
    if v.is_empty() || n.len() < v.len() {
        return false;
    }
    let found = n.windows(v.len()).position(|w| w == v.as_slice());
    match found {
        // the value closing the note is the note's own value, not its subject
        Some(i) => i + v.len() < n.len(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_adds_its_value_and_the_question_keeps_what_it_did_not_use() {
        let q =
            "What is the country of citizenship of the spouse of the author of Our Mutual Friend?";
        let h = hop(q, "The author of Our Mutual Friend is Charles Darwin.");
        assert_eq!(
            h,
            Some(Hop {
                value: "Charles Darwin".into(),
                next_query: "Charles Darwin country citizenship spouse".into(),
            })
        );
    }

    #[test]
    fn a_value_is_cut_to_its_name_or_after_its_last_stop_word() {
        let q = "To which continent does the country of citizenship of Colin Irwin pertain?";
        let h = hop(q, "Colin Irwin is a citizen of Israel.");
        assert_eq!(h.map(|h| h.value), Some("Israel".into()));
        let q = "Which country is the birthplace of the sport associated with Steve Sax?";
        let h = hop(
            q,
            "Steve Sax is associated with the sport of association football.",
        );
        assert_eq!(h.map(|h| h.value), Some("association football".into()));
        // a name with "of" inside stays whole
        let q = "Which faith is the partner of Laura Bush associated with?";
        let h = hop(
            q,
            "Laura Bush is married to Princess Alice, Duchess of Gloucester.",
        );
        assert_eq!(
            h.map(|h| h.value),
            Some("Princess Alice Duchess of Gloucester".into())
        );
    }

    #[test]
    fn a_note_that_adds_nothing_is_no_step() {
        assert_eq!(
            hop("Where does Anna live?", "Anna lives in Lisbon."),
            Some(Hop {
                value: "Lisbon".into(),
                next_query: "Lisbon".into(),
            })
        );
        assert_eq!(hop("Anna lives in Lisbon", "Anna lives in Lisbon."), None);
        assert_eq!(hop("anything", ""), None);
    }

    #[test]
    fn the_next_note_is_about_the_value_not_ending_with_it() {
        assert!(continues(
            "Charles Darwin",
            "Charles Darwin is married to Amala Paul."
        ));
        assert!(!continues(
            "London",
            "The capital of United Kingdom is London."
        ));
        assert!(!continues("Israel", "Anna Paul is a citizen of Belgium."));
        assert!(continues(
            "association football",
            "association football was created in the country of Italy."
        ));
        assert!(!continues("football", "football"));
        assert!(!continues("", "anything at all"));
    }
}
