//! Supersession: a newer note that states another value for the same subject and relation
//! as an older note ("goaltender is associated with the sport of ice hockey" → "… of
//! pesäpallo"; "Our rent is 1,200 euros a month." → "From September the rent is 1,300
//! euros."). Found without an LLM, sentence by sentence, by two rules:
//!
//! 1. **Aligned statements.** The two sentences share a prefix and a suffix (word for word,
//!    ignoring case and surrounding punctuation) and differ in one span between them: the
//!    value. It counts only if the span sits where a value goes, not where the subject
//!    does: the shared prefix holds the subject (a content word) and the predicate (a
//!    copula such as "is"/"was", or a verb form such as "plays", "died"), the shared suffix
//!    holds no predicate, and neither span holds a predicate or opens another relation
//!    ("a citizen of …" against "located in …"), and the spans do not change twice around a
//!    shared preposition ("Finnish at home" / "English at work"). So "Vijay Mallya is a
//!    citizen of India" / "Narendra Modi is a citizen of India" (other subject) and "The
//!    capital of Germany is Berlin" / "The capital of India is Berlin" (the span is
//!    followed by "is") are not supersessions.
//! 2. **The same quantity, another number.** Sentences worded differently that give one
//!    quantity — the same word before the number ("rent") and the same unit, if any — a
//!    different number, and otherwise speak of the same things: their content words, less
//!    numbers, units and words of time ("From September", "a month"), mostly shared
//!    (Jaccard ≥ [`MIN_CONTEXT_JACCARD`]), and that do not name different months or days
//!    as *which* one they speak of ("the bill for January" / "… for February": two bills).
//!
//! What changed is said in the words of the notes: the attribute (the last lowercase
//! content word before the value: "sport", "city", "rent") with the old and the new value,
//! "sport: ice hockey → pesäpallo". The rules never panic and are bounded on any input:
//! at most [`MAX_SENTENCES`] sentences of at most [`MAX_WORDS`] words are compared.

use crate::facts::{CHANGE_WORDS, NEGATIONS, UNITS};
use crate::text::{STOP_WORDS, Tokenizer};

/// Sentences of each note compared (the first ones).
pub const MAX_SENTENCES: usize = 16;
/// Longer sentences are not compared.
pub const MAX_WORDS: usize = 64;
/// The longest value span of an aligned statement, in words.
pub const MAX_VALUE_WORDS: usize = 12;
/// Rule 2: how much of the rest of two sentences must be shared.
pub const MIN_CONTEXT_JACCARD: f64 = 0.6;

/// A newer statement of another value for what an older one stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supersession {
    /// What the value is of, in the notes' words: "sport", "rent" ("value" if no word says).
    pub attribute: String,
    /// The older note's statement with the value left out: "goaltender is associated with
    /// the sport of …".
    pub frame: String,
    /// The value as the older note states it.
    pub old_value: String,
    /// The value as the newer note states it.
    pub new_value: String,
}

impl Supersession {
    /// "sport: ice hockey → pesäpallo".
    pub fn reason(&self) -> String {
        format!(
            "{}: {} → {}",
            self.attribute, self.old_value, self.new_value
        )
    }
}

/// Copulas and auxiliaries: the predicate of "X is Y", "X has Y", "X will be Y".
const COPULAS: &[&str] = &[
    "is", "are", "was", "were", "am", "be", "been", "being", "has", "have", "had", "will", "would",
    "shall", "should", "can", "could", "may", "might", "must", "does", "do", "did", "become",
    "becomes", "became", "remain", "remains", "remained", "cost", "costs", "equals",
];

/// Words that open a relation ("located in", "citizen of", "founded by").
const PREPOSITIONS: &[&str] = &[
    "of", "in", "at", "by", "to", "for", "with", "from", "on", "into", "about", "as", "since",
    "until", "under", "over", "via", "per",
];

/// Days of the week: words of time, and what [`instance_times`] reads as naming which one.
const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Words of time besides month names and [`WEEKDAYS`] (see [`is_time_word`]), left out
/// when comparing what two sentences speak of (rule 2).
const TIME_WORDS: &[&str] = &[
    "today",
    "tomorrow",
    "yesterday",
    "currently",
    "starting",
    "next",
    "last",
    "monthly",
    "yearly",
    "weekly",
    "daily",
    "annually",
    "per",
    "each",
    "every",
];

/// A month (name or abbreviation, as periods read them) or another word of time.
fn is_time_word(w: &str) -> bool {
    crate::period::month_of(w).is_some() || WEEKDAYS.contains(&w) || TIME_WORDS.contains(&w)
}

/// One word of a sentence: as written, and as compared.
#[derive(Debug, Clone)]
struct Word<'a> {
    raw: &'a str,
    norm: String,
}

impl Word<'_> {
    fn lowercase(&self) -> bool {
        self.raw
            .chars()
            .find(|c| c.is_alphanumeric())
            .is_some_and(|c| !c.is_uppercase())
    }
}

/// Lowercase, surrounding punctuation dropped; in a number, thousands separators dropped
/// ("1,200" = "1200") and a currency sign or "%" kept.
fn normalise(raw: &str) -> String {
    if raw.chars().any(|c| c.is_ascii_digit()) {
        let kept: String = raw
            .chars()
            .filter(|c| c.is_alphanumeric() || ".%€$£¥-:/".contains(*c))
            .collect();
        return kept
            .trim_matches(|c: char| ".-:/".contains(c))
            .to_lowercase();
    }
    raw.trim_matches(|c: char| !c.is_alphanumeric())
        .replace('’', "'")
        .to_lowercase()
}

/// The sentences of `text` (at most [`MAX_SENTENCES`]), as words. A sentence ends at a
/// line break, or after a word ending in `.`, `!` or `?` that is followed by a capitalised
/// word, unless the word is an initial or a short abbreviation ("K.", "Dr.").
fn sentences(text: &str) -> Vec<Vec<Word<'_>>> {
    let mut out: Vec<Vec<Word<'_>>> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut current: Vec<Word<'_>> = Vec::new();
        for (i, raw) in words.iter().enumerate() {
            let norm = normalise(raw);
            if !norm.is_empty() {
                current.push(Word { raw, norm });
            }
            let ends = raw.ends_with(['.', '!', '?'])
                && raw
                    .trim_end_matches(['.', '!', '?', '"', '\'', ')'])
                    .chars()
                    .count()
                    > 2
                && words
                    .get(i + 1)
                    .and_then(|w| w.chars().find(|c| c.is_alphanumeric()))
                    .is_some_and(char::is_uppercase);
            if ends && !current.is_empty() {
                out.push(std::mem::take(&mut current));
                if out.len() >= MAX_SENTENCES {
                    return out;
                }
            }
        }
        if !current.is_empty() {
            out.push(current);
            if out.len() >= MAX_SENTENCES {
                return out;
            }
        }
    }
    out
}

fn is_copula(norm: &str) -> bool {
    COPULAS.contains(&norm) || norm.ends_with("'s") && is_pronoun(norm.trim_end_matches("'s"))
}

/// A copula as written in lowercase: "May" in "Louisa May Alcott" is a name.
fn is_copula_word(w: &Word<'_>) -> bool {
    w.lowercase() && is_copula(&w.norm)
}

fn is_pronoun(w: &str) -> bool {
    matches!(w, "it" | "he" | "she" | "that" | "what" | "who" | "there")
}

/// A predicate: a copula, or a lowercase verb form ("plays", "died", "works").
fn is_predicate(w: &Word<'_>) -> bool {
    let n = w.norm.as_str();
    if is_copula_word(w) {
        return true;
    }
    if !w.lowercase() || !n.chars().all(char::is_alphabetic) || n.chars().count() < 4 {
        return false;
    }
    if STOP_WORDS.contains(&n) || UNITS.contains(&n) || is_time_word(n) {
        return false;
    }
    n.ends_with("ed") || (n.ends_with('s') && !n.ends_with("ss") && !n.ends_with("us"))
}

fn is_content(norm: &str) -> bool {
    !norm.is_empty()
        && !STOP_WORDS.contains(&norm)
        && !COPULAS.contains(&norm)
        && !PREPOSITIONS.contains(&norm)
        && norm.chars().any(char::is_alphanumeric)
}

/// A value as written: its words joined, the sentence's closing mark and a trailing comma
/// dropped ("Washington, D.C.." → "Washington, D.C.").
fn shown(words: &[Word<'_>]) -> String {
    let mut s = words.iter().map(|w| w.raw).collect::<Vec<_>>().join(" ");
    if let Some(stripped) = s.strip_suffix(['.', '!', '?', ',', ';', ':']) {
        s = stripped.to_owned();
    }
    s.trim_matches(|c: char| "\"'()[]".contains(c)).to_owned()
}

/// The attribute a value is of: the last lowercase content word before it that is not a
/// copula, else the last content word, else "value".
fn attribute(prefix: &[Word<'_>]) -> String {
    let content = |w: &&Word<'_>| is_content(&w.norm) && !is_copula(&w.norm);
    prefix
        .iter()
        .rev()
        .filter(content)
        .find(|w| w.lowercase() && !w.norm.chars().any(|c| c.is_ascii_digit()))
        .or_else(|| prefix.iter().rev().find(content))
        .map_or_else(|| "value".to_owned(), |w| w.norm.clone())
}

/// A value span of an aligned statement: short, no predicate, not opening a relation, and
/// no relation inside it (a lowercase content word followed by a preposition, "citizen
/// of"; "University of Pisa" is a name and fine).
fn value_shaped(span: &[Word<'_>]) -> bool {
    if span.is_empty() || span.len() > MAX_VALUE_WORDS {
        return false;
    }
    if span
        .first()
        .is_some_and(|w| PREPOSITIONS.contains(&w.norm.as_str()))
    {
        return false;
    }
    if span.iter().any(is_copula_word) {
        return false;
    }
    if span
        .iter()
        .any(|w| NEGATIONS.contains(&w.norm.as_str()) || CHANGE_WORDS.contains(&w.norm.as_str()))
    {
        return false;
    }
    !span.windows(2).any(|p| match p {
        [a, b] => {
            a.lowercase()
                && is_content(&a.norm)
                && !a.norm.chars().any(|c| c.is_ascii_digit())
                && PREPOSITIONS.contains(&b.norm.as_str())
        }
        _ => false,
    })
}

/// A span without the words at its ends that say a change happened ("… Munich now").
fn trim_change_words<'s, 'a>(mut span: &'s [Word<'a>]) -> &'s [Word<'a>] {
    let change = |w: &Word<'_>| CHANGE_WORDS.contains(&w.norm.as_str());
    while let [first, rest @ ..] = span {
        if !change(first) {
            break;
        }
        span = rest;
    }
    while let [rest @ .., last] = span {
        if !change(last) {
            break;
        }
        span = rest;
    }
    span
}

/// Rule 1 on two sentences.
fn aligned(new: &[Word<'_>], old: &[Word<'_>]) -> Option<Supersession> {
    if new.len() > MAX_WORDS || old.len() > MAX_WORDS {
        return None;
    }
    let prefix = new
        .iter()
        .zip(old)
        .take_while(|(a, b)| a.norm == b.norm)
        .count();
    let room = new.len().min(old.len()) - prefix;
    let suffix = new
        .iter()
        .rev()
        .zip(old.iter().rev())
        .take(room)
        .take_while(|(a, b)| a.norm == b.norm)
        .count();
    let (mut prefix, mut suffix) = (prefix, suffix);
    // one value longer than the other by a modifier ("association football" / "football",
    // "rugby" / "rugby union"): the shared word next to the extra words belongs to both
    // values. Extra words that open a phrase ("Berlin" / "Berlin with Tom") or say "not"
    // are no value.
    let (new_len, old_len) = (new.len() - prefix - suffix, old.len() - prefix - suffix);
    if (new_len == 0) != (old_len == 0) {
        let extra = if new_len == 0 {
            old.get(prefix..old.len() - suffix)?
        } else {
            new.get(prefix..new.len() - suffix)?
        };
        if !value_shaped(extra) {
            return None;
        }
        if suffix > 0 {
            suffix -= 1;
        } else {
            prefix = prefix.saturating_sub(1);
        }
    }
    let (head, tail) = (old.get(..prefix)?, old.get(old.len() - suffix..)?);
    let new_mid = trim_change_words(new.get(prefix..new.len() - suffix)?);
    let old_mid = trim_change_words(old.get(prefix..old.len() - suffix)?);
    if !value_shaped(new_mid) || !value_shaped(old_mid) {
        return None;
    }
    // a value and a qualifier that both changed, around a shared preposition, are another
    // fact beside the first, not a new value: "Sara speaks Finnish at home" / "… English
    // at work" (a lowercase phrase after it; "Duke of York" / "Earl of Essex" is a name)
    if new_mid.len() == old_mid.len()
        && (1..new_mid.len().saturating_sub(1)).any(|i| {
            let (n, o) = (&new_mid[i], &old_mid[i]);
            n.norm == o.norm
                && PREPOSITIONS.contains(&n.norm.as_str())
                && new_mid[i + 1..]
                    .iter()
                    .chain(&old_mid[i + 1..])
                    .all(|w| w.lowercase())
        })
    {
        return None;
    }
    // the subject and the predicate before the value, no predicate after it
    if !head.iter().any(is_predicate) || tail.iter().any(is_predicate) {
        return None;
    }
    // a subject: a content word besides the predicate ("It is 5pm" has none)
    if !head.iter().any(|w| is_content(&w.norm)) {
        return None;
    }
    let mut frame = head.iter().map(|w| w.raw).collect::<Vec<_>>().join(" ");
    frame.push_str(" …");
    if !tail.is_empty() {
        frame.push(' ');
        frame.push_str(&shown(tail));
    }
    Some(Supersession {
        attribute: attribute(head),
        frame,
        old_value: shown(old_mid),
        new_value: shown(new_mid),
    })
}

/// A number of a sentence for rule 2: the word before it that says what it counts, its
/// value and unit, and where it is.
struct Quantity {
    anchor: String,
    value: String,
    unit: Option<String>,
    at: usize,
    len: usize,
}

fn stem(tokenizer: &Tokenizer, norm: &str) -> Option<String> {
    tokenizer.tokenize(norm).into_iter().next()
}

fn quantities(tokenizer: &Tokenizer, words: &[Word<'_>]) -> Vec<Quantity> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if !w.norm.chars().any(|c| c.is_ascii_digit()) {
            continue;
        }
        let anchor = words
            .get(i.saturating_sub(4)..i)
            .unwrap_or_default()
            .iter()
            .rev()
            .find(|a| {
                is_content(&a.norm)
                    && !is_time_word(&a.norm)
                    && !UNITS.contains(&a.norm.as_str())
                    && !a.norm.chars().any(|c| c.is_ascii_digit())
            })
            .and_then(|a| stem(tokenizer, &a.norm));
        let Some(anchor) = anchor else { continue };
        // a number followed by the predicate is part of the subject ("iOS 7 was developed
        // by …", "Il-18 is …"), not a value
        if words
            .get(i + 1..)
            .unwrap_or_default()
            .iter()
            .any(is_copula_word)
        {
            continue;
        }
        let unit = words
            .get(i + 1)
            .map(|u| u.norm.clone())
            .filter(|u| UNITS.contains(&u.as_str()));
        let len = 1 + usize::from(unit.is_some());
        out.push(Quantity {
            anchor,
            value: w.norm.trim_start_matches(['€', '$', '£', '¥']).to_owned(),
            unit: unit.or_else(|| {
                w.norm
                    .chars()
                    .find(|c| "€$£¥%".contains(*c))
                    .map(|c| c.to_string())
            }),
            at: i,
            len,
        });
    }
    out
}

/// What a sentence speaks of besides its numbers, units and words of time (rule 2).
fn context(tokenizer: &Tokenizer, words: &[Word<'_>]) -> std::collections::BTreeSet<String> {
    words
        .iter()
        .filter(|w| {
            let n = w.norm.as_str();
            is_content(n)
                && !n.chars().any(|c| c.is_ascii_digit())
                && !UNITS.contains(&n)
                && !is_time_word(n)
                && !CHANGE_WORDS.contains(&n)
                && !n.ends_with("ly")
        })
        .filter_map(|w| stem(tokenizer, &w.norm))
        .collect()
}

/// Words before a time that makes it part of what is named ("the bill for January", "the
/// meeting of Monday", "the January bill"), not when a change took effect ("from
/// September", "since May").
const NAMING_BEFORE_TIME: &[&str] = &["for", "of"];
const DETERMINERS: &[&str] = &[
    "the", "a", "an", "our", "my", "your", "his", "her", "their", "its", "this", "that",
];

/// The months and days of the week that name which one of a kind a sentence speaks of:
/// after "for"/"of" ("the bill for January"), or between a determiner and a content word
/// ("the January bill"). Two sentences naming different ones speak of two things (January's
/// bill and February's), not of a value that changed.
fn instance_times(words: &[Word<'_>]) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        let key = match crate::period::month_of(&w.norm) {
            Some(m) => format!("month {m}"),
            None if WEEKDAYS.contains(&w.norm.as_str()) => w.norm.clone(),
            None => continue,
        };
        let before = i
            .checked_sub(1)
            .and_then(|b| words.get(b))
            .map(|b| b.norm.as_str());
        let after = words.get(i + 1).map(|a| a.norm.as_str());
        let named_after = before.is_some_and(|b| NAMING_BEFORE_TIME.contains(&b));
        let modifier = before.is_some_and(|b| DETERMINERS.contains(&b))
            && after.is_some_and(|a| is_content(a) && !is_time_word(a));
        if named_after || modifier {
            out.insert(key);
        }
    }
    out
}

/// Rule 2 on two sentences.
fn requantified(tokenizer: &Tokenizer, new: &[Word<'_>], old: &[Word<'_>]) -> Option<Supersession> {
    if new.len() > MAX_WORDS || old.len() > MAX_WORDS {
        return None;
    }
    let (qn, qo) = (quantities(tokenizer, new), quantities(tokenizer, old));
    if qn.is_empty() || qo.is_empty() {
        return None;
    }
    let (cn, co) = (context(tokenizer, new), context(tokenizer, old));
    let union = cn.union(&co).count();
    if union == 0 || (cn.intersection(&co).count() as f64) < MIN_CONTEXT_JACCARD * union as f64 {
        return None;
    }
    // January's bill and February's are two bills, not one whose amount changed
    let (tn, to) = (instance_times(new), instance_times(old));
    if !tn.is_empty() && !to.is_empty() && tn.is_disjoint(&to) {
        return None;
    }
    // the same quantities stated with the same values are not a change
    let values = |q: &[Quantity]| q.iter().map(|x| x.value.clone()).collect::<Vec<_>>();
    if values(&qn) == values(&qo) {
        return None;
    }
    // every number of the newer sentence has one of the older one counting the same
    // thing (word before it and unit), and exactly one of them changed: "round 3 note 4" /
    // "round 4 note 3" changes two, the rent one
    let mut changed = None;
    for a in &qn {
        let b = qo.iter().find(|b| {
            let same_unit = match (&a.unit, &b.unit) {
                (Some(x), Some(y)) => x == y,
                _ => true,
            };
            a.anchor == b.anchor && same_unit
        })?;
        if a.value != b.value {
            if changed.is_some() {
                return None;
            }
            changed = Some((a, b));
        }
    }
    if let Some((a, b)) = changed {
        let span =
            |w: &[Word<'_>], q: &Quantity| w.get(q.at..q.at + q.len).map(shown).unwrap_or_default();
        let head = old.get(..b.at).unwrap_or_default();
        return Some(Supersession {
            attribute: attribute(head),
            frame: format!(
                "{} …",
                head.iter().map(|w| w.raw).collect::<Vec<_>>().join(" ")
            ),
            old_value: span(old, b),
            new_value: span(new, a),
        });
    }
    None
}

/// Whether `newer` states another value for the subject and relation of `older` (see the
/// module docs); the first pair of sentences that does, older note's sentences first.
pub fn supersedes(newer: &str, older: &str) -> Option<Supersession> {
    supersedes_with(&Tokenizer::default(), newer, older)
}

/// [`supersedes`] with a tokenizer the caller keeps (it holds the stemmer).
pub fn supersedes_with(tokenizer: &Tokenizer, newer: &str, older: &str) -> Option<Supersession> {
    let (new, old) = (sentences(newer), sentences(older));
    for o in &old {
        for n in &new {
            if let Some(s) = aligned(n, o) {
                return Some(s);
            }
        }
    }
    for o in &old {
        for n in &new {
            if let Some(s) = requantified(tokenizer, n, o) {
                return Some(s);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;

/// Measures the rules on the FactConsolidation dev file (path in
/// `KASTEN_FACTCONSOLIDATION`): every pair of facts of each item (older, newer), against a
/// ground truth read off the data by its sentence templates — two facts are about the same
/// subject and relation when they fill one template with the same subject, and the newer
/// supersedes the older when its value differs. All pairs must be found, and no pair of
/// facts about different subjects or relations may be taken for a supersession. Items whose
/// name holds `KASTEN_FC_ITEMS` (default `_sh_6k`) are measured.
/// `cargo test --workspace --lib -- factconsolidation_pairs --ignored --nocapture`
#[cfg(test)]
mod dev_measure;
