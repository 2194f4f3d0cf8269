//! Invariants of a memory read from a full backup: what "nothing lost, nothing
//! half-applied" means table by table.

use std::collections::{HashMap, HashSet};

use kasten_tests::record_key;
use serde_json::Value;

/// What a check looked at.
#[derive(Debug, Default, Clone, Copy)]
pub struct Checked {
    pub notes: usize,
    pub events: usize,
    pub links: usize,
    pub revisions: usize,
}

fn rows<'a>(tables: &'a Value, name: &str) -> &'a [Value] {
    tables[name].as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn key(row: &Value, field: &str) -> String {
    record_key(&row[field]).unwrap_or_else(|| panic!("{field} is not a record id: {row}"))
}

/// `created_at` with its fraction padded to nanoseconds, so strings compare as times.
fn time(row: &Value) -> String {
    let t = row["created_at"]["$datetime"].as_str().unwrap_or_default();
    let t = t.trim_end_matches('Z');
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    format!("{secs}.{frac:0<9}")
}

/// Checks that every enrichment was applied whole or not at all, that every note has
/// exactly one job, and that each note's annotations are those of its last applied
/// revision (the update and its revision are one transaction).
pub fn check(tables: &Value, when: &str) -> Checked {
    let notes = rows(tables, "note");
    let note_ids: HashSet<String> = notes.iter().map(|n| key(n, "id")).collect();
    assert_eq!(note_ids.len(), notes.len(), "{when}: duplicate note ids");

    // one job per note, pointing at a note that exists
    let mut job_of: HashMap<String, &Value> = HashMap::new();
    let mut job_ids = HashSet::new();
    for j in rows(tables, "job") {
        let note = key(j, "note");
        assert!(
            note_ids.contains(&note),
            "{when}: job for a missing note: {j}"
        );
        assert!(
            job_of.insert(note.clone(), j).is_none(),
            "{when}: note {note} has two jobs"
        );
        job_ids.insert(key(j, "id"));
    }
    for n in &note_ids {
        assert!(job_of.contains_key(n), "{when}: note {n} has no job");
    }

    // events: the id is the job's; the job is done and the note enriched
    let mut events = HashSet::new();
    for e in rows(tables, "event") {
        let id = key(e, "id");
        let note = key(e, "note");
        let job = job_of
            .get(&note)
            .unwrap_or_else(|| panic!("{when}: event {id} for a note without a job"));
        assert_eq!(
            key(job, "id"),
            id,
            "{when}: event {id} is not the job of its note"
        );
        assert_eq!(
            job["state"].as_str(),
            Some("done"),
            "{when}: event {id} exists but its job is {}",
            job["state"]
        );
        events.insert(id);
    }
    for (note, j) in &job_of {
        let done = j["state"].as_str() == Some("done");
        assert_eq!(
            done,
            events.contains(&key(j, "id")),
            "{when}: job of {note} is {} but its event {}",
            j["state"],
            if done { "is missing" } else { "exists" }
        );
    }

    // revisions and links name events that exist; one construction revision per event
    let mut construction: HashMap<String, usize> = HashMap::new();
    let revisions = rows(tables, "revision");
    for r in revisions {
        if let Some(ev) = record_key(&r["event"]) {
            assert!(
                events.contains(&ev),
                "{when}: revision of a missing event: {r}"
            );
            if r["reason"].as_str() == Some("construction") {
                *construction.entry(ev).or_default() += 1;
            }
        }
        assert!(
            note_ids.contains(&key(r, "note")),
            "{when}: revision of a missing note"
        );
    }
    for ev in &events {
        assert_eq!(
            construction.get(ev).copied().unwrap_or(0),
            1,
            "{when}: event {ev} has no (or two) construction revisions"
        );
    }
    let links = rows(tables, "link");
    let mut seen = HashSet::new();
    for l in links {
        for end in ["in", "out"] {
            assert!(
                note_ids.contains(&key(l, end)),
                "{when}: link to a missing note: {l}"
            );
        }
        if l["created_by"].as_str() == Some("llm") {
            let ev = record_key(&l["event"])
                .unwrap_or_else(|| panic!("{when}: LLM link without an event: {l}"));
            assert!(events.contains(&ev), "{when}: link of a missing event: {l}");
        }
        let k = (key(l, "in"), key(l, "out"), l["kind"].to_string());
        assert!(seen.insert(k), "{when}: duplicate link {l}");
    }

    // each note's annotations and embedding are those of its latest applied revision
    let mut latest: HashMap<String, &Value> = HashMap::new();
    for r in revisions
        .iter()
        .filter(|r| r["status"].as_str() == Some("applied"))
    {
        let note = key(r, "note");
        let newer = latest.get(&note).is_none_or(|l| time(r) >= time(l));
        if newer {
            latest.insert(note, r);
        }
    }
    for n in notes {
        let id = key(n, "id");
        let state = n["enrich_state"].as_str().unwrap_or_default();
        let done = job_of[&id]["state"].as_str() == Some("done");
        assert_eq!(
            state == "done",
            done,
            "{when}: note {id} is {state} but its job is {}",
            job_of[&id]["state"]
        );
        match latest.get(&id) {
            Some(r) => {
                for f in ["keywords", "tags", "context"] {
                    assert_eq!(
                        n[f], r["after"][f],
                        "{when}: note {id}'s {f} is not its last revision's"
                    );
                }
                assert_eq!(
                    n["embedding"], r["embedding_after"],
                    "{when}: note {id}'s embedding is not its last revision's"
                );
            }
            None => {
                assert_eq!(n["keywords"], serde_json::json!([]), "{when}: {id}");
                assert_eq!(n["context"].as_str().unwrap_or(""), "", "{when}: {id}");
            }
        }
    }
    Checked {
        notes: notes.len(),
        events: events.len(),
        links: links.len(),
        revisions: revisions.len(),
    }
}
