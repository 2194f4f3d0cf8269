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

/// Path of another binary of the workspace (e.g. `kasten-fakellm`), next to `kasten`.
pub fn sibling_bin(name: &str) -> PathBuf {
    let bin = kasten_bin().with_file_name(name);
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build --workspace --bins` first",
        bin.display()
    );
    bin
}

/// A private Kasten home with its own embedded database.
pub struct Home {
    pub dir: tempfile::TempDir,
    /// OpenAI-compatible base URL of the LLM, if the commands should use one.
    pub llm: Option<String>,
}

impl Home {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
            llm: None,
        }
    }

    /// A home whose commands use the LLM at `base_url` (OpenAI-compatible).
    pub fn with_llm(base_url: &str) -> Self {
        Self {
            llm: Some(base_url.to_owned()),
            ..Self::new()
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
            .env_remove("KASTEN_LLM_API_KEY")
            .stdin(Stdio::null());
        match &self.llm {
            Some(url) => c
                .env("KASTEN_LLM_PROVIDER", "openai")
                .env("KASTEN_LLM_BASE_URL", url)
                .env("KASTEN_LLM_MODEL", "fake-model"),
            None => c
                .env_remove("KASTEN_LLM_BASE_URL")
                .env_remove("KASTEN_LLM_MODEL"),
        };
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

/// A `kasten-fakellm` server process on loopback; killed on drop.
pub struct FakeServer {
    child: std::process::Child,
    pub port: u16,
}

impl FakeServer {
    /// Starts the server in `mode` (e.g. "normal", "slow:200", "http500").
    pub fn start(mode: &str) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(sibling_bin("kasten-fakellm"))
            .args(["--port", "0", "--mode", mode])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start kasten-fakellm: {e}"));
        let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut line = String::new();
        let _ = std::io::BufReader::new(out).read_line(&mut line);
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("kasten-fakellm did not say where it listens: {line:?}"));
        Self { child, port }
    }

    pub fn openai_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
