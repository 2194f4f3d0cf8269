//! The checkable facts of a short text — numbers (with their unit or currency), number
//! words, and names (capitalised words that do not start a sentence) — so that two notes
//! that read alike but state different facts ("Anna paid 40 euros" / "Anna paid 90
//! euros") are never taken for one.
//!
//! Numbers are compared as a sequence (in the order written: "round 4 note 3" and "round 3
//! note 4" differ), names as a multiset. A negation ("not", "never", "no longer") or a
//! word that says something changed ("now", "stopped", "switched") is a fact too: "The
//! deploy script no longer requires sudo" corrects "The deploy script requires sudo", it
//! does not repeat it. Negations are compared by their number ("doesn't" and "does not",
//! "never" and "not" are one negation), change words as a set.

use std::collections::{BTreeMap, BTreeSet};

/// Words for numbers, counted like digits ("three tickets" / "four tickets").
pub(crate) const NUMBER_WORDS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
    "thousand",
    "million",
    "billion",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "half",
    "twice",
    "dozen",
];

/// Words that give a number its unit: "90 euros" and "90 dollars" differ.
pub(crate) const UNITS: &[&str] = &[
    "euro",
    "euros",
    "eur",
    "dollar",
    "dollars",
    "usd",
    "pound",
    "pounds",
    "gbp",
    "yen",
    "cents",
    "percent",
    "%",
    "km",
    "kilometres",
    "kilometers",
    "mile",
    "miles",
    "m",
    "metres",
    "meters",
    "kg",
    "kilos",
    "kilograms",
    "g",
    "grams",
    "lb",
    "lbs",
    "l",
    "litres",
    "liters",
    "am",
    "pm",
    "h",
    "hour",
    "hours",
    "minute",
    "minutes",
    "min",
    "mins",
    "second",
    "seconds",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "times",
];

/// Words that negate what a sentence says ("requires sudo" / "never requires sudo"), counted:
/// a note and its negation read alike but state opposite facts. A contraction ending in
/// `n't` and "cannot" count as "not".
pub(crate) const NEGATIONS: &[&str] = &[
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "without",
];

/// Words that say a fact changed ("now requires", "stopped running", "switched to"): a note
/// that says so corrects or updates the one it reads like, it does not repeat it. The
/// phrases "no longer", "any longer", "no more", "any more" and "anymore" are one change,
/// written "no longer"; "used to" is one too.
pub(crate) const CHANGE_WORDS: &[&str] = &[
    "now",
    "still",
    "again",
    "instead",
    "formerly",
    "previously",
    "stop",
    "stops",
    "stopped",
    "quit",
    "quits",
    "start",
    "starts",
    "started",
    "began",
    "begins",
    "became",
    "becomes",
    "changed",
    "switched",
    "moved",
    "replaced",
];

/// Capitalised words that are not names.
const NOT_NAMES: &[&str] = &["I", "I'm", "I've", "I'd", "I'll", "OK", "Ok"];

/// The facts of a text: its numbers in order, its names with their counts, its negations
/// (in order, as written after normalising: `n't` and "cannot" are "not") and the words
/// by which it says something changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    pub numbers: Vec<String>,
    pub names: BTreeMap<String, usize>,
    pub negations: Vec<String>,
    pub changes: BTreeSet<String>,
}

/// Reads the numbers and names of `text`.
pub fn facts(text: &str) -> Facts {
    let mut out = Facts::default();
    let mut sentence_start = true;
    let words: Vec<&str> = text.split_whitespace().collect();
    let bare = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    // the second word of a phrase already read ("no longer", "used to")
    let mut skip = false;
    for (i, raw) in words.iter().enumerate() {
        let word = raw.trim_matches(|c: char| !(c.is_alphanumeric() || "%€$£¥".contains(c)));
        let starts = sentence_start;
        // the next word starts a sentence after . ! ? : or a line's bullet
        sentence_start = raw.ends_with(['.', '!', '?', ':', ';'])
            || raw.ends_with(".\"")
            || raw.ends_with("!\"")
            || raw.ends_with("?\"")
            || matches!(*raw, "-" | "*" | "•" | "—" | "–");
        if word.is_empty() {
            // a line's bullet or a lone symbol keeps a sentence start
            sentence_start |= starts;
            continue;
        }
        if std::mem::take(&mut skip) {
            continue;
        }
        let lower = word.to_lowercase();
        let next = words.get(i + 1).map(|w| bare(w)).unwrap_or_default();
        match (lower.as_str(), next.as_str()) {
            ("no" | "any", "longer" | "more") | ("anymore", _) => {
                skip = lower != "anymore";
                out.changes.insert("no longer".into());
                continue;
            }
            ("used", "to") => {
                skip = true;
                out.changes.insert("used to".into());
                continue;
            }
            _ => {}
        }
        let unquoted = lower.replace('’', "'");
        if unquoted.ends_with("n't") || unquoted == "cannot" {
            out.negations.push("not".into());
            continue;
        }
        if NEGATIONS.contains(&lower.as_str()) {
            out.negations.push(lower);
            continue;
        }
        if CHANGE_WORDS.contains(&lower.as_str()) {
            out.changes.insert(lower);
            continue;
        }
        if word.chars().any(|c| c.is_ascii_digit()) {
            // 1,000 and 1000 are one number
            let mut n: String = word.chars().filter(|c| *c != ',').collect();
            if let Some(unit) = words
                .get(i + 1)
                .map(|w| w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '%')))
                .map(str::to_lowercase)
                .filter(|u| UNITS.contains(&u.as_str()))
            {
                n.push(' ');
                n.push_str(&unit);
            }
            out.numbers.push(n);
            continue;
        }
        if NUMBER_WORDS.contains(&lower.as_str()) {
            out.numbers.push(lower);
            continue;
        }
        let capitalised = word.chars().next().is_some_and(char::is_uppercase);
        // a sentence's first word is a name when a capitalised word follows it directly
        // ("Michael O'Neill is …" / "Martin O'Neill is …")
        let name_goes_on = !raw.ends_with(|c: char| !c.is_alphanumeric())
            && words
                .get(i + 1)
                .and_then(|w| w.chars().next())
                .is_some_and(char::is_uppercase);
        if capitalised && (!starts || name_goes_on) && !NOT_NAMES.contains(&word) {
            let name = word.strip_suffix("'s").unwrap_or(word).to_owned();
            *out.names.entry(name).or_default() += 1;
        }
    }
    out
}

/// What differs between the facts of `a` and of `b`, in words (`"40 euros" ≠ "90 euros"`);
/// empty when they state the same numbers in the same order and the same names.
pub fn differences(a: &str, b: &str) -> Vec<String> {
    let (fa, fb) = (facts(a), facts(b));
    let mut out = Vec::new();
    if fa.numbers != fb.numbers {
        let show = |v: &[String]| {
            if v.is_empty() {
                "no number".to_owned()
            } else {
                v.join(", ")
            }
        };
        out.push(format!(
            "numbers {} ≠ {}",
            show(&fa.numbers),
            show(&fb.numbers)
        ));
    }
    if fa.names != fb.names {
        let only = |x: &BTreeMap<String, usize>, y: &BTreeMap<String, usize>| -> Vec<String> {
            x.iter()
                .filter(|(k, n)| y.get(*k).copied().unwrap_or(0) < **n)
                .map(|(k, _)| k.clone())
                .collect()
        };
        let (a_only, b_only) = (only(&fa.names, &fb.names), only(&fb.names, &fa.names));
        let show = |v: &[String]| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(", ")
            }
        };
        out.push(format!("names {} ≠ {}", show(&a_only), show(&b_only)));
    }
    let words = |v: &mut dyn Iterator<Item = &String>| {
        let v: Vec<&str> = v.map(String::as_str).collect();
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(", ")
        }
    };
    // "never" and "not" are both a negation: what counts is how many
    if fa.negations.len() != fb.negations.len() {
        out.push(format!(
            "negation {} ≠ {}",
            words(&mut fa.negations.iter()),
            words(&mut fb.negations.iter())
        ));
    }
    if fa.changes != fb.changes {
        out.push(format!(
            "change {} ≠ {}",
            words(&mut fa.changes.iter()),
            words(&mut fb.changes.iter())
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn different_amounts_differ() {
        let d = differences(
            "Anna paid 90 euros for the concert tickets",
            "Anna paid 40 euros for the concert tickets",
        );
        assert_eq!(d, vec!["numbers 90 euros ≠ 40 euros"]);
    }

    #[test]
    fn swapped_numbers_differ() {
        let d = differences(
            "round 4 note 3 is about the budget",
            "round 3 note 4 is about the budget",
        );
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("numbers 4, 3 ≠ 3, 4"), "{d:?}");
    }

    #[test]
    fn number_words_units_and_names_count() {
        assert!(!differences("three tickets", "four tickets").is_empty());
        assert!(!differences("it took 5 hours", "it took 5 days").is_empty());
        let d = differences(
            "We met Anna in Berlin last week.",
            "We met Anna in Paris last week.",
        );
        assert_eq!(d, vec!["names Berlin ≠ Paris"]);
        // a full name at the start of a sentence is a name
        assert_eq!(
            differences(
                "Michael O'Neill is associated with the sport of association football.",
                "Martin O'Neill is associated with the sport of association football."
            ),
            vec!["names Michael ≠ Martin"]
        );
        // a name told twice is not the same as once
        assert!(!differences("met Anna and Anna", "met Anna and Bob").is_empty());
    }

    #[test]
    fn a_negation_or_a_change_is_a_difference() {
        let d = differences(
            "The deploy script no longer requires sudo",
            "The deploy script requires sudo",
        );
        assert!(!d.is_empty(), "{d:?}");
        assert!(d.iter().any(|x| x.contains("no longer")), "{d:?}");
        assert!(!differences("Anna does not eat meat", "Anna eats meat").is_empty());
        assert!(!differences("Anna doesn't eat meat", "Anna eats meat").is_empty());
        assert!(!differences("Anna never eats meat", "Anna eats meat").is_empty());
        assert!(!differences("Anna now works from home", "Anna works from home").is_empty());
        assert!(!differences("Anna stopped running", "Anna started running").is_empty());
        // the same negation in other words is the same fact
        assert!(differences("Anna doesn't eat meat", "Anna does not eat meat!").is_empty());
        assert!(differences("Anna can't swim", "Anna cannot swim").is_empty());
    }

    #[test]
    fn the_same_facts_in_other_words_do_not_differ() {
        assert!(
            differences(
                "Anna paid 40 euros for the concert tickets.",
                "Anna paid 40 euros for concert tickets!"
            )
            .is_empty()
        );
        // capitalised words that start a sentence are not names
        assert!(
            differences(
                "Caroline: Hey Mel! Great to see you.",
                "Caroline: Hey Mel! Good to see you."
            )
            .is_empty()
        );
        assert!(differences("I think so. Really.", "I think so. Truly.").is_empty());
        assert!(differences("paid 1,000 dollars", "paid 1000 dollars").is_empty());
        assert!(differences("", "").is_empty());
    }
}
