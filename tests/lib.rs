//! Helpers for Kasten's whole-system tests: run the real `kasten` binary against a
//! private memory in a temporary directory.
//!
//! The binary is `$KASTEN_BIN` if set, else `kasten` in the cargo target directory of this
//! test executable (`cargo build --workspace --bins` builds it; `scripts/test` does).
//! This is test-support code: failing loudly with a panic is its job.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Path of the `kasten` binary under test.
pub fn kasten_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("KASTEN_BIN") {
        return PathBuf::from(p);
    }
    // <target>/<profile>/deps/<test-exe> → <target>/<profile>/kasten
    let exe = std::env::current_exe().unwrap_or_default();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("kasten"))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "kasten binary not found at {}: run `cargo build --workspace --bins` first (scripts/test does), or set KASTEN_BIN",
        bin.display()
    );
    bin
}

/// A private Kasten home with its own embedded database.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
        }
    }

    pub fn db(&self) -> String {
        format!("surrealkv://{}", self.dir.path().join("db").display())
    }

    /// A `kasten` command bound to this home's database.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(kasten_bin());
        c.args(args)
            .env("KASTEN_DB", self.db())
            .env_remove("KASTEN_LLM_BASE_URL")
            .env_remove("KASTEN_LLM_MODEL")
            .stdin(Stdio::null());
        c
    }

    /// Runs to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run kasten {args:?}: {e}"))
    }

    /// Runs, asserts success, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kasten {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs with `--json`, asserts success, parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let s = self.ok(&a);
        serde_json::from_str(&s)
            .unwrap_or_else(|e| panic!("kasten {args:?} printed invalid JSON ({e}): {s}"))
    }

    /// Every note id in the memory.
    pub fn all_ids(&self) -> Vec<String> {
        let v = self.json(&["list", "--limit", "1000000"]);
        v["notes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|n| n["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Writes a file inside the home and returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        p
    }
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

/// JSON Lines with `n` distinct short notes.
pub fn jsonl(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"content\": \"imported note number {i} about topic {}\"}}\n",
                i % 97
            )
        })
        .collect()
}
