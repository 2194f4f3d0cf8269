//! Replays the committed fuzz corpus through the parsers on stable Rust.
//!
//! `fuzz/checks.rs` holds what each cargo-fuzz target does with one input (parse, check
//! the invariants); this test runs the same functions over every file of
//! `fuzz/seeds/<target>/` (hand-written, realistic inputs), `fuzz/corpus/<target>/` (what
//! `scripts/fuzz` found, minimised) and `fuzz/regressions/<target>/` (inputs that once
//! broke an invariant), so `cargo test` checks them without nightly or libFuzzer. See
//! docs/FUZZING.md.
#![allow(clippy::panic)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

#[path = "../fuzz/checks.rs"]
mod checks;

fn fuzz_dir() -> PathBuf {
    kasten_tests::tests_dir().join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_committed_input_keeps_the_invariants() {
    let mut failures = Vec::new();
    for (name, check) in checks::TARGETS {
        let seeds = files(&fuzz_dir().join("seeds").join(name));
        let corpus = files(&fuzz_dir().join("corpus").join(name));
        assert!(!seeds.is_empty(), "fuzz/seeds/{name} is empty or missing");
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{name} is empty or missing: run scripts/fuzz {name}"
        );
        let regressions = files(&fuzz_dir().join("regressions").join(name));
        for f in seeds.iter().chain(&corpus).chain(&regressions) {
            let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if catch_unwind(AssertUnwindSafe(|| check(&bytes))).is_err() {
                failures.push(f.display().to_string());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "inputs that break an invariant (the panic messages are above):\n{}",
        failures.join("\n")
    );
}

/// Every cargo-fuzz target has a check here and every check a target, with the same name
/// in `fuzz/Cargo.toml` and in the list `scripts/fuzz` runs, so a target cannot silently
/// drop out of either side.
#[test]
fn targets_and_checks_are_the_same_set() {
    let mut on_disk: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = checks::TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap_or_default();
    let script = std::fs::read_to_string(fuzz_dir().join("../scripts/fuzz")).unwrap_or_default();
    let run: Vec<&str> = script
        .lines()
        .find_map(|l| l.strip_prefix("all=("))
        .and_then(|l| l.strip_suffix(')'))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let mut run_sorted = run.clone();
    run_sorted.sort_unstable();
    assert_eq!(
        run_sorted, listed,
        "scripts/fuzz runs other targets than fuzz/checks.rs has"
    );
    for name in &listed {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{name} is not a [[bin]] of fuzz/Cargo.toml"
        );
        let target = std::fs::read_to_string(fuzz_dir().join(format!("fuzz_targets/{name}.rs")))
            .unwrap_or_default();
        assert!(
            target.contains(&format!("checks::{name}(data)")),
            "fuzz_targets/{name}.rs does not call checks::{name}"
        );
    }
}
