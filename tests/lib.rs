//! Helpers for Kasten's whole-system tests: run the real `kasten` binary against a
//! private memory in a temporary directory.
//!
//! The binary is `$KASTEN_BIN` if set, else `kasten` in the cargo target directory of this
//! test executable (`cargo build --workspace --bins` builds it; `scripts/test` does).
//! This is test-support code: failing loudly with a panic is its job.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// This package's directory (`tests/`) in the checkout being tested: cargo sets
/// `CARGO_MANIFEST_DIR` for the test process too, and that value follows the checkout,
/// where the one compiled in can name another clone that shared the target directory
/// (cargo reuses the build then).
pub fn tests_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

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

/// Puts the `kasten` binary into `dir` (linked, else copied) with the shared libraries
/// beside it that it loads (llama.cpp's, found through its rpath `$ORIGIN`), for a test that
/// runs it from elsewhere, e.g. as another user. Returns the new binary's path.
pub fn kasten_bin_in(dir: &Path) -> PathBuf {
    let src = kasten_bin();
    let place = |from: &Path, to: &Path| {
        if std::fs::hard_link(from, to).is_err() {
            std::fs::copy(from, to)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
        }
    };
    let bin = dir.join("kasten");
    place(&src, &bin);
    let libs = src.parent().map(Path::to_path_buf).unwrap_or_default();
    for entry in std::fs::read_dir(&libs).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("lib") && name.contains(".so") && entry.path().is_file() {
            place(&entry.path(), &dir.join(&*name));
        }
    }
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

/// `Home::llm` for the built-in model.
const BUILTIN_LLM: &str = "builtin:";

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

    /// A home whose commands use what a user without any LLM setting gets: the built-in
    /// model (installed by scripts/setup), with no `KASTEN_LLM_*` variable set.
    pub fn with_builtin_llm() -> Self {
        Self {
            llm: Some(BUILTIN_LLM.to_owned()),
            ..Self::new()
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
            Some(b) if b == BUILTIN_LLM => c
                .env_remove("KASTEN_LLM_PROVIDER")
                .env_remove("KASTEN_LLM_BASE_URL")
                .env_remove("KASTEN_LLM_MODEL")
                .env_remove("KASTEN_LLM_MODEL_PATH")
                .env_remove("KASTEN_LLM_TIMEOUT")
                .env_remove("KASTEN_LLM_PROFILE"),
            Some(url) => c
                .env("KASTEN_LLM_PROVIDER", "openai")
                .env("KASTEN_LLM_BASE_URL", url)
                .env("KASTEN_LLM_MODEL", "fake-model"),
            // no LLM at all: not the built-in model either (tests that want it say so)
            None => c
                .env("KASTEN_LLM_PROVIDER", "none")
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

/// A small seeded random generator (splitmix64) for the crash and fault suites, so a
/// failing run can be repeated with the seed it printed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The seed in `$var` if set, else one from the clock; printed either way (`cargo test`
    /// shows it when the test fails).
    pub fn from_env(var: &str) -> Self {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("seed {seed} (repeat with {var}={seed})");
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The key of a backup's tagged record id (`{"$record": {"table", "key"}}`).
pub fn record_key(v: &serde_json::Value) -> Option<String> {
    let k = &v["$record"]["key"];
    k.as_str()
        .map(str::to_owned)
        .or_else(|| k.as_i64().map(|n| n.to_string()))
}

impl Home {
    /// Every table of the memory, as `kasten backup` writes them (`{table: [rows]}`).
    pub fn dump(&self) -> serde_json::Value {
        let f = self.dir.path().join("dump.json");
        let _ = std::fs::remove_file(&f);
        self.ok(&["backup", f.to_str().unwrap_or_default()]);
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("read backup: {e}"));
        let mut v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("backup is not JSON: {e}"));
        let _ = std::fs::remove_file(&f);
        v["tables"].take()
    }

    /// Starts `kasten import` of `n` JSONL notes with `--print-ids` (ids printed as batches
    /// commit), stderr discarded; returns the child and a reader over the printed ids.
    pub fn spawn_import(
        &self,
        n: usize,
        batch: Option<usize>,
    ) -> (
        std::process::Child,
        std::io::BufReader<std::process::ChildStdout>,
    ) {
        let f = self.file("big.jsonl", jsonl(n).as_bytes());
        let mut args = vec![
            "import".to_owned(),
            f.to_str().unwrap_or_default().to_owned(),
            "--format".into(),
            "jsonl".into(),
            "--print-ids".into(),
        ];
        if let Some(b) = batch {
            args.extend(["--batch".to_owned(), b.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = self
            .cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn import: {e}"));
        let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        (child, std::io::BufReader::new(out))
    }
}

/// `(id, content)` of every note in a [`Home::dump`], sorted.
pub fn note_contents(tables: &serde_json::Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = tables["note"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                record_key(&n["id"]).unwrap_or_default(),
                n["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

impl FakeServer {
    /// Switches the running server to another fault mode (`POST /_fake/mode`); `mode` is
    /// the JSON form, e.g. `{"mode": "normal"}`.
    pub fn set_mode(&self, mode_json: &str) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port))
            .unwrap_or_else(|e| panic!("connect to kasten-fakellm: {e}"));
        let req = format!(
            "POST /_fake/mode HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{mode_json}",
            mode_json.len()
        );
        s.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("set mode: {e}"));
        let mut resp = String::new();
        let _ = s.read_to_string(&mut resp);
        assert!(resp.starts_with("HTTP/1.1 200"), "set mode: {resp}");
    }

    /// How many requests the server has received (`GET /_fake/requests`).
    pub fn request_count(&self) -> usize {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return 0;
        };
        let _ = s.write_all(
            b"GET /_fake/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        );
        let mut resp = String::new();
        let _ = s.read_to_string(&mut resp);
        let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.as_array().map(Vec::len))
            .unwrap_or(0)
    }

    /// The id of the server process (to find its sockets, say).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}
