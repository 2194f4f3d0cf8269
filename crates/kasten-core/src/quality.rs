//! What makes an annotation worth keeping, checked on real model output.
//!
//! A small model asked for "keywords (up to 8 specific terms)" writes `up to 8 specific
//! terms` into the keywords, a timestamp into the context and links every note to every
//! other. This module holds
//! - the material for prompts that cannot produce that: [`candidate_terms`] (keywords may
//!   only be chosen from the note's own words) and [`tag_choices`] (tags from the memory's
//!   tags and a short general list);
//! - [`sanitize`]: what is dropped from any model's construction before it is stored
//!   (prompt text, a context that is a date or an instruction);
//! - [`check`]: the quality check over a whole memory that tests, `kasten quality` and the
//!   benchmarks run: no annotation contains prompt text, at least two thirds of the
//!   keywords occur in the note, the context is a sentence about the note, at most five
//!   links per note and not all reasons the same; each evolution's reason names something
//!   the evolved note and the new note share, and makes at most [`MAX_EVOLUTION_OPS`]
//!   operations.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::lifecycle::Tier;
use crate::text::{STOP_WORDS, Tokenizer};

/// Words of the prompts' instructions and field names. An annotation that uses one of these
/// while the note does not has copied the prompt.
pub const PROMPT_WORDS: &[&str] = &[
    "keyword",
    "keywords",
    "tag",
    "tags",
    "context",
    "tier",
    Tier::LongTerm.as_str(),
    Tier::ShortTerm.as_str(),
    "return",
    "specific terms",
    "broad categories",
    "one sentence",
    "up to",
    "most important first",
    "json",
    "schema",
    "handle",
    "handles",
    "confidence",
    "new note",
    "related notes",
    "annotate",
    "strengths of the new note",
    "topic, people, purpose",
    // the system prompt's "You maintain a Zettelkasten memory"
    "zettelkasten",
    // the link-and-evolve answer's field names and operations (`note_tags` is "note tags"
    // once normalised); its everyday words ("target", "kind", "reason", "links",
    // "updates", "shared") are left out: honest sentences use them
    "operations",
    "ops",
    "op",
    "note_tags",
    "add_tag",
    "remove_tag",
    "add_keyword",
    "remove_keyword",
    "set_context",
];

/// Distinctive words of the guided prompts' few-shot examples: a small model that runs out of
/// things to say copies them ("About work: a database problem …" on a note about running).
pub const EXAMPLE_WORDS: &[&str] = &[
    "piano",
    "piano lessons",
    "otto",
    "maria",
    "maria s",
    "teacher",
    "database",
    "database problem",
    "staging",
    "staging database",
    "server migration",
    "disk space",
];

/// Broad tags any memory may use (with the tags it already has).
pub const GENERAL_TAGS: &[&str] = &[
    "work", "family", "friends", "health", "money", "home", "travel", "food", "pets", "learning",
    "hobby", "music", "sports", "books", "tech", "plans", "events", "shopping", "ideas",
    "feelings",
];

/// What each general tag covers, in the words notes use: the text a tag is embedded as
/// when the tags nearest a note are shortlisted for a small model (a bare word such as
/// "health" lies no nearer a note about a dentist than "shopping" does for the embedder).
const GENERAL_TAG_MEANINGS: &[(&str, &str)] = &[
    (
        "work",
        "work: job, office, colleagues, meetings, projects, team, manager, deadlines",
    ),
    (
        "family",
        "family: parents, children, partner, relatives, grandparents, family life",
    ),
    (
        "friends",
        "friends: a friend, meeting up, social life, catching up",
    ),
    (
        "health",
        "health: doctor, dentist, illness, pain, injury, medicine, sleep, the body",
    ),
    (
        "money",
        "money: bills, costs, prices, insurance, bank, savings, salary, payments",
    ),
    (
        "home",
        "home: house, flat, apartment, landlord, repairs, cleaning, moving house",
    ),
    (
        "travel",
        "travel: a trip, holiday, flights, trains, hotels, passport, another country",
    ),
    (
        "food",
        "food: cooking, recipes, baking, meals, restaurants, groceries",
    ),
    ("pets", "pets: a dog, a cat, animals kept at home, the vet"),
    (
        "learning",
        "learning: studying, courses, lessons, school, new skills",
    ),
    (
        "hobby",
        "hobby: gardening, plants, crafts, games, climbing, painting, pastimes",
    ),
    (
        "music",
        "music: songs, instruments, concerts, playing or listening to music",
    ),
    (
        "sports",
        "sports: running, football, gym, training, matches, cycling, swimming",
    ),
    ("books", "books: reading, novels, authors, a book"),
    (
        "tech",
        "tech: computers, software, phones, servers, apps, the internet",
    ),
    (
        "plans",
        "plans: schedules, appointments, things to do later, reminders",
    ),
    (
        "events",
        "events: birthdays, weddings, parties, celebrations, festivals",
    ),
    (
        "shopping",
        "shopping: buying things, shops, orders, purchases",
    ),
    (
        "ideas",
        "ideas: thoughts, inspiration, something new to make or try",
    ),
    (
        "feelings",
        "feelings: emotions, mood, stress, happiness, worries",
    ),
];

/// The text `tag` is compared with a note as: what a general tag covers, else the tag.
pub fn tag_meaning(tag: &str) -> &str {
    GENERAL_TAG_MEANINGS
        .iter()
        .find(|(t, _)| *t == tag)
        .map_or(tag, |(_, m)| m)
}

/// The most links a note may keep from one enrichment.
pub const MAX_LINKS_PER_NOTE: usize = 5;

/// Extra words never offered as keywords (besides the tokenizer's stop words).
const WEAK_WORDS: &[&str] = &[
    "not",
    "no",
    "yes",
    "very",
    "really",
    "got",
    "get",
    "gets",
    "going",
    "went",
    "made",
    "make",
    "one",
    "two",
    "new",
    "next",
    "last",
    "today",
    "tomorrow",
    "yesterday",
    "said",
    "says",
    "thing",
    "things",
    "lot",
    "lots",
    "much",
    "many",
    "more",
    "most",
    "still",
    "now",
    "only",
    "even",
    "back",
    "well",
    "like",
    "need",
    "needs",
    "want",
    "wants",
    "let",
    "know",
    "think",
    "them",
    "its",
    "it's",
    "i'm",
    "i've",
    "don't",
    "didn't",
    "can't",
    "won't",
    "should",
    "might",
    "must",
    "shall",
    "other",
    "each",
    "every",
    "own",
    "same",
    "out",
    "up",
    "down",
    "off",
    "over",
    "under",
    "again",
    "once",
    "because",
    "until",
    "through",
    "during",
    // what people say in a chat, not what it is about
    "thanks",
    "thank",
    "yeah",
    "yep",
    "hey",
    "hi",
    "hello",
    "wow",
    "cool",
    "awesome",
    "great",
    "amazing",
    "nice",
    "glad",
    "sure",
    "okay",
    "ok",
    "oh",
    "haha",
    "lol",
    "gonna",
    "wanna",
];

fn is_weak(lower: &str) -> bool {
    STOP_WORDS.contains(&lower) || WEAK_WORDS.contains(&lower)
}

/// Words of `text` as written (letters, digits, inner hyphens and apostrophes).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut w = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || ((c == '-' || c == '\'' || c == '’') && !w.is_empty()) {
            w.push(c);
        } else if !w.is_empty() {
            out.push(std::mem::take(&mut w));
        }
    }
    if !w.is_empty() {
        out.push(w);
    }
    out.into_iter()
        .map(|w| w.trim_end_matches(['-', '\'', '’']).to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Terms a keyword may be chosen from: the note's content words (no stop words, no bare
/// numbers shorter than a year) and pairs of adjacent content words ("cracked molar"), in
/// order of first appearance, at most `max`.
pub fn candidate_terms(content: &str, max: usize) -> Vec<String> {
    let ws = words(content);
    let keep = |w: &str| {
        let lower = w.to_lowercase();
        let digits = w.chars().all(|c| c.is_ascii_digit());
        !is_weak(&lower) && w.chars().count() >= 3 && (!digits || w.len() == 4)
            || w.chars().any(|c| c as u32 >= 0x3040)
    };
    let mut seen = HashSet::new();
    let mut singles = Vec::new();
    let mut pairs = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        if !keep(w) {
            continue;
        }
        let lower = w.to_lowercase();
        if seen.insert(lower.clone()) {
            singles.push(lower.clone());
        }
        if let Some(next) = ws.get(i + 1).filter(|n| keep(n)) {
            let pair = format!("{lower} {}", next.to_lowercase());
            if seen.insert(pair.clone()) {
                pairs.push(pair);
            }
        }
    }
    // single words first (every one of them), then pairs while there is room
    let mut out = singles;
    out.truncate(max);
    for p in pairs {
        if out.len() >= max {
            break;
        }
        out.push(p);
    }
    out
}

/// Tags a construction may choose from: the memory's own tags (most used first, at most
/// `max_existing`) and the general list.
pub fn tag_choices(existing: &[String], max_existing: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for t in existing.iter().take(max_existing) {
        let t = t.trim().to_lowercase();
        if !t.is_empty() && !contains_prompt_text(&t, "") && seen.insert(t.clone()) {
            out.push(t);
        }
    }
    for t in GENERAL_TAGS {
        if seen.insert((*t).to_owned()) {
            out.push((*t).to_owned());
        }
    }
    out
}

/// Whether `annotation` uses instruction words, field names or note handles (`N1`, `N2`,
/// …) of the prompts that `note` itself does not use.
pub fn contains_prompt_text(annotation: &str, note: &str) -> bool {
    let a = format!(" {} ", normalise(annotation));
    let n = format!(" {} ", normalise(note));
    PROMPT_WORDS.iter().chain(EXAMPLE_WORDS).any(|p| {
        let p = format!(" {} ", normalise(p));
        a.contains(&p) && !n.contains(&p)
    }) || a
        .split(' ')
        .any(|w| is_handle(w) && !n.contains(&format!(" {w} ")))
}

/// A prompt's handle for a note shown to the model (`N1`, `N2`, …), as [`normalise`]
/// leaves it: the model's words about "N2" mean nothing once stored.
pub(crate) fn is_handle(word: &str) -> bool {
    word.strip_prefix('n')
        .is_some_and(|d| (1..=3).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()))
}

fn normalise(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `s` is mostly a date or time (digits and separators) rather than words.
fn looks_like_a_date(s: &str) -> bool {
    let letters = s.chars().filter(|c| c.is_alphabetic()).count();
    let digits = s.chars().filter(|c| c.is_ascii_digit()).count();
    digits >= 4 && letters <= digits
}

/// Why a context is not a sentence about the note, or `None` if it is.
pub fn context_problem(context: &str, note: &str) -> Option<&'static str> {
    let c = context.trim();
    if c.is_empty() {
        return Some("empty");
    }
    if looks_like_a_date(c) {
        return Some("a date, not a sentence");
    }
    if contains_prompt_text(c, note) {
        return Some("repeats the instructions");
    }
    let ws = words(c);
    if ws.len() < 3 {
        return Some("fewer than three words");
    }
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for w in ws.iter().filter(|w| w.chars().count() >= 4) {
        *counts.entry(w.to_lowercase()).or_default() += 1;
    }
    if counts.values().any(|&n| n >= 3) {
        return Some("repeats itself");
    }
    // grounded: past an "About <topic>:" label, it shares a content word with the note
    // (a small model otherwise invents: "About pets: a cat is attacked by a snake." for a
    // note about aphids on tomatoes)
    let body = c
        .strip_prefix("About ")
        .and_then(|rest| rest.split_once(':').map(|(_, b)| b))
        .unwrap_or(c);
    let tok = Tokenizer::default();
    let note_stems: HashSet<String> = tok.tokenize(note).into_iter().collect();
    let grounded = candidate_terms(body, 60)
        .iter()
        .filter(|t| !t.contains(' '))
        .any(|t| tok.tokenize(t).iter().any(|s| note_stems.contains(s)));
    if !grounded {
        return Some("not about the note");
    }
    None
}

/// Whether `keyword` occurs in `note` (as words, or as the same stems).
pub fn keyword_in_note(tok: &Tokenizer, keyword: &str, note: &str) -> bool {
    let k = normalise(keyword);
    if k.is_empty() {
        return false;
    }
    if format!(" {} ", normalise(note)).contains(&format!(" {k} ")) {
        return true;
    }
    let note_stems: HashSet<String> = tok.tokenize(note).into_iter().collect();
    let kstems = tok.tokenize(keyword);
    !kstems.is_empty() && kstems.iter().all(|s| note_stems.contains(s))
}

/// Drops from a construction what must never be stored: keywords and tags with prompt
/// text or that are dates, and a context that is not a sentence about the note (it becomes
/// empty). Returns how many items were dropped.
pub fn sanitize(
    content: &str,
    keywords: &mut Vec<String>,
    tags: &mut Vec<String>,
    context: &mut String,
) -> usize {
    let before = keywords.len() + tags.len();
    keywords.retain(|k| !contains_prompt_text(k, content) && !looks_like_a_date(k));
    tags.retain(|t| !contains_prompt_text(t, content) && !looks_like_a_date(t));
    let mut dropped = before - keywords.len() - tags.len();
    if !context.trim().is_empty() && context_problem(context, content).is_some() {
        context.clear();
        dropped += 1;
    }
    dropped
}

/// One note as the quality check sees it.
#[derive(Debug, Clone)]
pub struct CheckedNote<'a> {
    pub id: &'a str,
    pub content: &'a str,
    pub keywords: &'a [String],
    pub tags: &'a [String],
    pub context: &'a str,
    /// Reasons of the links the LLM made from this note.
    pub link_reasons: Vec<&'a str>,
    /// Reasons the LLM gave for evolving this note (each change's and the edit's).
    pub edit_reasons: Vec<&'a str>,
    /// The LLM's evolutions of this note, with the new note that led to each.
    pub evolutions: Vec<CheckedEvolution<'a>>,
}

/// Operations one evolution of a note may make: A-Mem's evolution updates a neighbour's
/// context and tags in the light of a new note; more than this is a rewrite.
pub const MAX_EVOLUTION_OPS: usize = 3;

/// One evolution of a note as the check sees it.
#[derive(Debug, Clone)]
pub struct CheckedEvolution<'a> {
    /// The model's reason for the evolution as a whole.
    pub reason: &'a str,
    /// How many operations it made.
    pub ops: usize,
    /// The new note that led to it (content, keywords and context), when known.
    pub by: Option<&'a str>,
}

/// Whether `reason` names something the two notes share: one of its content words (or
/// its stem) occurs in both `a` and `b`. "Both mention the Lisbon move" does; "The new
/// note adds a new tag" does not — it says what the operation did, not why.
pub fn names_something_shared(tok: &Tokenizer, reason: &str, a: &str, b: &str) -> bool {
    candidate_terms(reason, 64)
        .iter()
        .filter(|t| !t.contains(' '))
        .any(|t| keyword_in_note(tok, t, a) && keyword_in_note(tok, t, b))
}

/// A failed rule, with the note and the offending text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub note: String,
    pub rule: &'static str,
    pub detail: String,
}

/// The quality check's result over a set of enriched notes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QualityReport {
    pub notes: usize,
    pub keywords: usize,
    /// Keywords that occur in their note (word or stem).
    pub keywords_in_note: usize,
    pub keyword_share_in_note: f64,
    pub notes_with_context: usize,
    pub links: usize,
    pub max_links_per_note: usize,
    pub distinct_reasons: usize,
    /// Evolutions checked (each note's, every status).
    pub evolutions: usize,
    /// Evolutions whose reason names something the evolved note and the new note share
    /// (of those whose new note is known).
    pub evolutions_naming_shared: usize,
    /// Evolutions whose new note is known (the share rule is checked on these).
    pub evolutions_with_source: usize,
    pub findings: Vec<Finding>,
    pub passed: bool,
}

/// Runs every rule over `notes` (only enriched notes should be passed).
pub fn check(notes: &[CheckedNote<'_>]) -> QualityReport {
    let tok = Tokenizer::default();
    let mut r = QualityReport {
        notes: notes.len(),
        ..QualityReport::default()
    };
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let find = |note: &str, rule: &'static str, detail: String| Finding {
        note: note.to_owned(),
        rule,
        detail,
    };
    let mut findings = Vec::new();
    for n in notes {
        for k in n.keywords {
            r.keywords += 1;
            if keyword_in_note(&tok, k, n.content) {
                r.keywords_in_note += 1;
            }
            if contains_prompt_text(k, n.content) {
                findings.push(find(n.id, "prompt text", format!("keyword {k:?}")));
            }
        }
        for t in n.tags {
            if contains_prompt_text(t, n.content) || looks_like_a_date(t) {
                findings.push(find(n.id, "prompt text", format!("tag {t:?}")));
            }
        }
        match context_problem(n.context, n.content) {
            None => r.notes_with_context += 1,
            // an empty context is "nothing", which is allowed; junk is not
            Some("empty") => {}
            Some(why) => findings.push(find(n.id, "context", format!("{:?}: {why}", n.context))),
        }
        r.links += n.link_reasons.len();
        r.max_links_per_note = r.max_links_per_note.max(n.link_reasons.len());
        if n.link_reasons.len() > MAX_LINKS_PER_NOTE {
            findings.push(find(
                n.id,
                "links",
                format!(
                    "{} links (at most {MAX_LINKS_PER_NOTE})",
                    n.link_reasons.len()
                ),
            ));
        }
        for reason in &n.link_reasons {
            if contains_prompt_text(reason, n.content) {
                findings.push(find(n.id, "prompt text", format!("link reason {reason:?}")));
            }
            *reasons.entry(normalise(reason)).or_default() += 1;
        }
        for reason in &n.edit_reasons {
            if contains_prompt_text(reason, n.content) {
                findings.push(find(
                    n.id,
                    "prompt text",
                    format!("evolution reason {reason:?}"),
                ));
            }
        }
        let own = format!("{} {} {}", n.content, n.context, n.keywords.join(" "));
        for e in &n.evolutions {
            r.evolutions += 1;
            if e.ops > MAX_EVOLUTION_OPS {
                findings.push(find(
                    n.id,
                    "evolution",
                    format!(
                        "{} operations in one evolution (at most {MAX_EVOLUTION_OPS})",
                        e.ops
                    ),
                ));
            }
            let Some(by) = e.by else { continue };
            r.evolutions_with_source += 1;
            if names_something_shared(&tok, e.reason, &own, by) {
                r.evolutions_naming_shared += 1;
            } else {
                findings.push(find(
                    n.id,
                    "evolution",
                    format!(
                        "reason {:?} names nothing the note and the new note share",
                        e.reason
                    ),
                ));
            }
        }
    }
    r.distinct_reasons = reasons.len();
    r.keyword_share_in_note = if r.keywords == 0 {
        1.0
    } else {
        r.keywords_in_note as f64 / r.keywords as f64
    };
    if r.keyword_share_in_note < 2.0 / 3.0 {
        findings.push(find(
            "",
            "keywords",
            format!(
                "{} of {} keywords occur in their note (at least two thirds must)",
                r.keywords_in_note, r.keywords
            ),
        ));
    }
    if r.links >= 3 && r.distinct_reasons == 1 {
        findings.push(find(
            "",
            "links",
            format!("all {} link reasons are the same", r.links),
        ));
    }
    if notes.is_empty() {
        // a check of nothing is not a pass (a mistyped --db opens an empty memory)
        findings.push(find(
            "",
            "nothing checked",
            "this memory has no enriched notes, so there is nothing to check \
             (is it the memory you meant, and has `kasten enrich` run?)"
                .to_owned(),
        ));
    }
    r.passed = findings.is_empty();
    r.findings = findings;
    r
}

#[cfg(test)]
mod tests;
