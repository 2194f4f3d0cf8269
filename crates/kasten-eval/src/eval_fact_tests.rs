//! `eval factconsolidation`'s own tests: fact times and sources, and the `--json`
//! report against what it printed before its questions and cache files were typed.

use super::*;
use serde_json::Value;

#[test]
fn facts_keep_their_order_and_their_source() {
    assert!(fact_time(0) < fact_time(1));
    assert_eq!(fact_of(Some("fc_sh_6k:12"), "fc_sh_6k"), Some(12));
    assert_eq!(fact_of(Some("fc_sh_6k:x"), "fc_sh_6k"), None);
    assert_eq!(fact_of(Some("other:1"), "fc_sh_6k"), None);
    assert_eq!(fact_of(None, "fc_sh_6k"), None);
}

/// What `kasten --json eval factconsolidation --no-llm --per-question` printed on the
/// end-to-end test's file before its questions were typed reads into the types and
/// prints back unchanged, line for line (fields in the same order).
#[test]
fn a_report_of_a_real_run_reads_back_unchanged() {
    let text = include_str!("testdata/factconsolidation-no-llm-run.json");
    let r: Report = serde_json::from_str(text).unwrap_or_else(|e| panic!("does not read: {e}"));
    let again = serde_json::to_string_pretty(&r).unwrap_or_default();
    let (a, b): (Vec<&str>, Vec<&str>) = (again.lines().collect(), text.lines().collect());
    assert_eq!(a.len(), b.len(), "{again}");
    for (a, b) in a.iter().zip(&b) {
        if a != b {
            // a float read back may differ in its last digit (serde_json parses floats
            // fast, not exactly): same key, a float both, the same to 12 digits
            let float = |l: &str| {
                let (k, v) = l.rsplit_once(": ")?;
                let v = v.trim_end_matches(',');
                (v.contains('.') || v.contains('e'))
                    .then(|| v.parse::<f64>().ok().map(|x| (k.to_owned(), x)))?
            };
            match (float(a), float(b)) {
                (Some((ka, x)), Some((kb, y))) => {
                    assert_eq!(ka, kb);
                    assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{a} / {b}");
                }
                _ => panic!("{a} / {b}"),
            }
        }
    }
}

/// An answered question's result as the untyped builder wrote it (`json!`, keys
/// sorted); unanswered, `prediction` and `correct` are null, not absent.
#[test]
fn a_question_is_the_json_it_was() {
    let q = QuestionReport {
        answers: vec!["Leeds".to_owned()],
        correct: Some(true),
        current_fact_at_1: false,
        current_fact_at_5: true,
        id: "mh0".to_owned(),
        prediction: Some("Leeds.".to_owned()),
        question: "Where?".to_owned(),
        ranked: vec![Some(7), None],
        targets: vec![4, 7],
    };
    let old = json!({
        "answers": ["Leeds"], "correct": true, "current_fact_at_1": false,
        "current_fact_at_5": true, "id": "mh0", "prediction": "Leeds.",
        "question": "Where?", "ranked": [7, null], "targets": [4, 7],
    });
    assert_eq!(serde_json::to_value(&q).ok(), Some(old.clone()));
    assert_eq!(
        serde_json::to_string_pretty(&q).ok(),
        serde_json::to_string_pretty(&old).ok()
    );
    let unanswered = QuestionReport {
        correct: None,
        prediction: None,
        ..q
    };
    let v = serde_json::to_value(&unanswered).unwrap_or_default();
    assert!(v.get("correct").is_some_and(Value::is_null));
    assert!(v.get("prediction").is_some_and(Value::is_null));
}

/// The cached memory's files: an older one without a field reads with it zero.
#[test]
fn cache_files_read_back_with_missing_fields_zero() {
    let i: Ingest = serde_json::from_str(r#"{"facts": 9, "seconds": 2.0, "llm_tokens": 5}"#)
        .unwrap_or_else(|e| panic!("an older marker does not read: {e}"));
    assert_eq!(
        (i.facts, i.llm_tokens, i.embedder_alone_seconds),
        (9, 5, 0.0)
    );
    let p: Partial = serde_json::from_str(r#"{"added": 3}"#)
        .unwrap_or_else(|e| panic!("an older progress file does not read: {e}"));
    assert_eq!((p.added, p.seconds), (3, 0.0));
}
