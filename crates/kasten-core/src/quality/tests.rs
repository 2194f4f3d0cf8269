use std::collections::BTreeSet;

use super::*;

#[test]
fn candidates_are_the_notes_own_content_words_then_pairs() {
    let c = candidate_terms(
        "Dentist appointment on Friday: the cracked molar needs a crown, 450 euros.",
        40,
    );
    assert_eq!(c[..4], ["dentist", "appointment", "friday", "cracked"]);
    assert!(c.contains(&"cracked molar".to_owned()), "{c:?}");
    assert!(!c.contains(&"the".to_owned()) && !c.contains(&"needs".to_owned()));
    assert!(
        !c.contains(&"450".to_owned()),
        "short numbers are not keywords"
    );
    assert!(candidate_terms("", 10).is_empty());
    assert_eq!(candidate_terms("alpha beta gamma delta", 2).len(), 2);
    assert!(!candidate_terms("向量数据库 很快", 10).is_empty());
}

#[test]
fn field_names_of_the_prompts_json_are_prompt_text() {
    let note = "Ana moved to Lisbon for the new job";
    for leaked in [
        "keywords: Lisbon, job",
        "the context of the move",
        "tags",
        "operations on the move",
        "op add_tag Lisbon",
        "note_tags for the move",
        "set_context: moved to Lisbon",
        "remove_keyword job",
    ] {
        assert!(contains_prompt_text(leaked, note), "{leaked:?}");
    }
    // a note that uses the word itself may have it back
    assert!(!contains_prompt_text(
        "operations team",
        "The operations team meets on Monday"
    ));
    // everyday words that are also field names stay allowed
    assert!(!contains_prompt_text("both about the target date", note));

    // the check reports each kind of text that carries one
    let (kw, tags) = (
        vec!["Lisbon".to_owned(), "keywords".to_owned()],
        vec!["travel".to_owned()],
    );
    let n = CheckedNote {
        id: "note:1",
        content: note,
        keywords: &kw,
        tags: &tags,
        context: "About work: note_tags for Ana moving to Lisbon.",
        link_reasons: vec!["N2 supports it", "ops add_tag", "both about Lisbon"],
        edit_reasons: vec!["set_context as N3 says", "the move is to Lisbon"],
        evolutions: Vec::new(),
    };
    let r = check(&[n]);
    let details: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.rule == "prompt text" || f.rule == "context")
        .map(|f| f.detail.as_str())
        .collect();
    assert!(
        details.iter().any(|d| d.contains("keyword \"keywords\"")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.contains("note_tags")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.contains("N2 supports it")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.contains("ops add_tag")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.contains("evolution reason \"set_context as N3 says\"")),
        "{details:?}"
    );
    assert!(
        !details.iter().any(|d| d.contains("the move is to Lisbon")),
        "{details:?}"
    );
    assert!(
        !details.iter().any(|d| d.contains("both about Lisbon")),
        "{details:?}"
    );
    assert!(!r.passed);
}

#[test]
fn prompt_handles_are_prompt_text_unless_the_note_names_them() {
    let note = "Ana moved to Lisbon for the new job";
    assert!(contains_prompt_text("N2 supports the move", note));
    assert!(contains_prompt_text("same city as n1", note));
    assert!(!contains_prompt_text("both about the move to Lisbon", note));
    assert!(!contains_prompt_text(
        "wears an N95 mask",
        "I bought N95 masks"
    ));
    assert!(
        !contains_prompt_text("N1000 series", note),
        "not a handle's shape"
    );
    let (mut k, mut t, mut c) = (
        vec!["Lisbon".to_owned(), "N3".to_owned()],
        vec!["n1".to_owned()],
        "Moving, as N2 says".to_owned(),
    );
    assert_eq!(sanitize(note, &mut k, &mut t, &mut c), 3);
    assert_eq!((k, t, c.as_str()), (vec!["Lisbon".to_owned()], vec![], ""));
}

#[test]
fn chat_fillers_are_not_candidates() {
    let c = candidate_terms("Gina: Thanks! Yeah, wow, the dance studio is great.", 40);
    for w in ["thanks", "yeah", "wow", "great"] {
        assert!(
            !c.iter().any(|t| t.split(' ').any(|x| x == w)),
            "{w} in {c:?}"
        );
    }
    assert!(c.contains(&"dance studio".to_owned()), "{c:?}");
}

#[test]
fn prompt_echo_is_found_unless_the_note_says_it_too() {
    assert!(contains_prompt_text("up to 8 specific terms", "dentist"));
    assert!(contains_prompt_text("return", "I booked the dentist"));
    assert!(contains_prompt_text(
        "Return: keywords (up to 8 specific terms…",
        "dentist"
    ));
    assert!(!contains_prompt_text(
        "return flight",
        "the return flight is at 9"
    ));
    assert!(!contains_prompt_text("dentist", "dentist"));
    assert!(!contains_prompt_text("contextual", "x"), "whole words only");
}

#[test]
fn a_context_must_be_a_sentence_about_the_note() {
    let note = "Booked the dentist for the cracked molar";
    assert_eq!(
        context_problem("2025-05-02T08:10:00+00:00", note),
        Some("a date, not a sentence")
    );
    assert_eq!(
        context_problem("Return: keywords (up to 8 specific terms", note),
        Some("repeats the instructions")
    );
    assert_eq!(
        context_problem("dentist", note),
        Some("fewer than three words")
    );
    assert_eq!(
        context_problem("A dental appointment for a cracked tooth.", note),
        None
    );
}

#[test]
fn sanitize_drops_junk_and_keeps_the_rest() {
    let note = "Booked the dentist for the cracked molar";
    let mut k = vec![
        "dentist".into(),
        "up to 8 specific terms".into(),
        "return".into(),
    ];
    let mut t = vec!["health".into(), "return_date_2025_2025".into()];
    let mut c = "2025-05-02T08:10:00+00:00".to_owned();
    assert_eq!(sanitize(note, &mut k, &mut t, &mut c), 4);
    assert_eq!(k, vec!["dentist".to_owned()]);
    assert_eq!(t, vec!["health".to_owned()]);
    assert!(c.is_empty());
}

#[test]
fn the_check_reports_each_rule() {
    let kw_good = vec!["dentist".to_owned(), "molars".to_owned()];
    let kw_bad = vec!["up to 8 specific terms".to_owned(), "return".to_owned()];
    let tags = vec!["health".to_owned()];
    let good = CheckedNote {
        id: "a",
        content: "Booked the dentist for the cracked molar",
        keywords: &kw_good,
        tags: &tags,
        context: "A dental appointment for a cracked tooth.",
        link_reasons: vec!["both about the dentist"],
        edit_reasons: vec!["the tooth needs a crown"],
        evolutions: vec![CheckedEvolution {
            reason: "the cracked molar needs a crown",
            ops: 1,
            by: Some("The dentist says the molar needs a crown"),
        }],
    };
    let r = check(std::slice::from_ref(&good));
    assert!(r.passed, "{r:?}");
    assert_eq!(
        r.keywords_in_note, 2,
        "'molars' stems to the note's 'molar'"
    );
    let bad = CheckedNote {
        id: "b",
        content: "Booked the dentist for the cracked molar",
        keywords: &kw_bad,
        tags: &tags,
        context: "2025-05-02T08:10:00+00:00",
        link_reasons: vec!["strengths of the new note"; 7],
        edit_reasons: Vec::new(),
        evolutions: vec![
            CheckedEvolution {
                reason: "The new note adds a new tag 'health' to the existing tags.",
                ops: 1,
                by: Some("The dentist says the molar needs a crown"),
            },
            CheckedEvolution {
                reason: "the molar needs a crown",
                ops: 4,
                by: Some("The dentist says the molar needs a crown"),
            },
        ],
    };
    let r = check(&[good, bad]);
    assert!(!r.passed);
    assert_eq!(
        (
            r.evolutions,
            r.evolutions_with_source,
            r.evolutions_naming_shared
        ),
        (3, 3, 2)
    );
    let evolution: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.rule == "evolution")
        .map(|f| f.detail.as_str())
        .collect();
    assert_eq!(evolution.len(), 2, "{evolution:?}");
    assert!(evolution.iter().any(|d| d.contains("adds a new tag")));
    assert!(evolution.iter().any(|d| d.contains("4 operations")));
    let rules: BTreeSet<&str> = r.findings.iter().map(|f| f.rule).collect();
    assert_eq!(
        rules,
        ["context", "evolution", "keywords", "links", "prompt text"]
            .into_iter()
            .collect()
    );
}

#[test]
fn tag_choices_put_the_memorys_tags_first_without_junk() {
    let t = tag_choices(&["Garden".into(), "return".into(), "work".into()], 10);
    assert_eq!(t[0], "garden");
    assert!(!t.contains(&"return".to_owned()));
    assert_eq!(t.iter().filter(|x| *x == "work").count(), 1);
}

#[test]
fn every_general_tag_is_compared_as_what_it_covers() {
    for t in GENERAL_TAGS {
        let m = tag_meaning(t);
        assert!(m.starts_with(&format!("{t}: ")), "{t} → {m}");
        assert!(m.split(", ").count() >= 3, "{t} says too little: {m}");
    }
    // a memory's own tag is compared as itself
    assert_eq!(tag_meaning("garden"), "garden");
}

#[test]
fn a_memory_with_nothing_enriched_does_not_pass() {
    let r = check(&[]);
    assert!(!r.passed);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].rule, "nothing checked");
    assert!(r.findings[0].detail.contains("no enriched notes"), "{r:?}");
}
