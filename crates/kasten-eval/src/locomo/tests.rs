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
    let dup = r#"[{"sample_id": "s", "conversation": {}}, {"sample_id": "s", "conversation": {}}]"#;
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
        (locomo_f1("painting, hiking", "hiking, swimming", Category::MultiHop) - 0.5).abs() < 1e-9
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
