//! Crash safety of the embedded store: `kill -9` in the middle of an import loses no note
//! whose id was printed (= committed), leaves no partial batch, and the store opens
//! cleanly afterwards. Also: a second process goes through the first (`list`) or, for a
//! command that needs the memory to itself, gets a clear "open in another process".
#![allow(clippy::panic)] // test helpers fail loudly

use std::collections::HashSet;
use std::io::BufRead;
use std::time::{Duration, Instant};

use kasten_tests::Home;

#[test]
fn kill_9_during_import_loses_no_acknowledged_note() {
    let h = Home::new();
    let batch = 40;
    let mut acknowledged: HashSet<String> = HashSet::new();
    // Three crashes at different points, each resuming into the same memory.
    for (round, stop_after) in [(0, batch), (1, 3 * batch + 1), (2, 2 * batch)].into_iter() {
        let (mut child, mut reader) = h.spawn_import(2000, Some(batch));
        let mut line = String::new();
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while seen < stop_after && Instant::now() < deadline {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {
                    acknowledged.insert(line.trim().to_owned());
                    seen += 1;
                }
                Err(e) => panic!("reading ids: {e}"),
            }
        }
        assert!(
            seen >= stop_after,
            "round {round}: import printed only {seen} ids"
        );
        // SIGKILL: no destructor, no shutdown, nothing flushed by us
        let _ = child.kill();
        let _ = child.wait();
        // drain whatever else was printed before the kill landed: those were committed too
        let mut rest = String::new();
        while reader.read_line(&mut rest).map(|n| n > 0).unwrap_or(false) {
            acknowledged.insert(rest.trim().to_owned());
            rest.clear();
        }

        // the store opens cleanly, and holds every acknowledged note exactly once
        let ids = h.all_ids();
        let unique: HashSet<String> = ids.iter().cloned().collect();
        assert_eq!(unique.len(), ids.len(), "round {round}: duplicate notes");
        let missing: Vec<&String> = acknowledged
            .iter()
            .filter(|id| !unique.contains(*id))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} acknowledged notes lost, e.g. {:?}",
            missing.len(),
            missing.first()
        );
        // whole batches only: a batch is one transaction
        assert_eq!(
            ids.len() % batch,
            0,
            "round {round}: {} notes is not a whole number of batches",
            ids.len()
        );
    }
    // and the memory still works for search after three crashes
    let r = h.json(&["search", "imported note number 7 about topic 7", "-k", "3"]);
    assert!(r["hits"].as_array().is_some_and(|a| !a.is_empty()));
}

#[test]
fn a_second_process_goes_through_the_first_or_is_told_the_memory_is_open_elsewhere() {
    let h = Home::new();
    h.ok(&["add", "first"]);
    let (mut child, mut reader) = h.spawn_import(2000, Some(20));
    // wait until the importer has the store open and is writing
    let mut line = String::new();
    let _ = reader.read_line(&mut line);
    // `list` goes through the importer, which serves the memory while it runs
    let listed = h.run(&["list"]);
    // a backup needs the memory to itself
    let f = h.dir.path().join("b.json");
    let out = h.run(&["backup", f.to_str().unwrap_or_default()]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(String::from_utf8_lossy(&listed.stdout).lines().count() >= 2);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("open in another process"), "{err}");
    // nothing was damaged
    assert!(h.all_ids().len() > 1);
}
