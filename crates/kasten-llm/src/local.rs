//! The built-in model: a GGUF instruct model run on the CPU inside the Kasten process
//! through llama.cpp (the `llama-cpp-2` crate, which builds llama.cpp from its vendored
//! sources).
//!
//! One background thread owns the model. It runs at the lowest CPU priority (nice 19), so
//! enrichment never takes the CPU from the UI or from searches; it loads the model on the
//! first request and drops it again after [`LocalOptions::idle_unload`] without requests.
//! Requests that wait together are answered together: each gets its own sequence in one
//! context, and every step of generation decodes one token for all of them in a single
//! pass over the weights, sharing the step's fixed costs (the weights read from memory,
//! llama.cpp's threads waiting for each other at every operation); see
//! [`LocalOptions::batch`] and docs/BENCHMARKS.md for what it saves.
//!
//! Structured calls are constrained by a GBNF grammar that llama.cpp derives from the same
//! JSON schema the HTTP providers send (`json_schema_to_grammar`): the sampler can only
//! pick tokens that keep the answer valid, so the answer always parses, names only the
//! handles of the schema's enum and keeps strings within their `maxLength`.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use serde::Serialize;
use tokio::sync::{mpsc as tmpsc, oneshot};

use crate::{LlmError, Message, Role};

#[cfg(feature = "cpu-variants")]
mod cpu;
mod prompt;
mod worker;

pub(crate) use prompt::grammar_for;
use worker::worker;

/// How the built-in model runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// The GGUF file.
    pub path: PathBuf,
    /// Drop the model from memory after this long without a request.
    pub idle_unload: Duration,
    /// CPU threads for prompt processing and generation (0: every core while a command
    /// runs the model in the foreground, see [`set_foreground`], else half the cores, at
    /// least one).
    pub threads: usize,
    /// The largest context (prompt + answer) a request may use, in tokens.
    pub max_context: u32,
    /// With a grammar, check the token the model picks against it and constrain the whole
    /// vocabulary only when the pick is refused (as llama.cpp's own sampler does); off,
    /// every step constrains the whole vocabulary first. Greedy answers are the same
    /// either way.
    pub grammar_first: bool,
    /// The most requests answered together (each its own sequence, one token for each
    /// per decode); 1 answers one at a time.
    pub batch: usize,
    /// JSON answers on one line: a schema's grammar allows no newline or indentation
    /// between tokens (`KASTEN_LLM_COMPACT_JSON=1`; off by default). Measured with the
    /// 1.5B, which pretty-prints: fewer tokens, but mostly because it links a tenth as
    /// often (docs/BENCHMARKS.md, "Compact JSON"), so no model uses it.
    pub compact_json: bool,
}

/// The most requests answered together.
pub const MAX_BATCH: usize = 16;
/// Requests answered together unless [`LocalOptions::batch`] or `KASTEN_LLM_BATCH` says
/// otherwise.
pub const DEFAULT_BATCH: usize = 4;

/// Whether the process runs the model in the foreground (`kasten enrich`, `kasten eval`):
/// the person waits for it, so it takes every core. The app and `kasten mcp` do not set
/// it: there the model is background work and leaves half the cores to the person.
static FOREGROUND: AtomicBool = AtomicBool::new(false);

/// Says that this process runs the built-in model in the foreground (every core); takes
/// effect for the model's next context.
pub fn set_foreground(on: bool) {
    FOREGROUND.store(on, Ordering::Relaxed);
}

/// The threads a new context gets: `threads` when set (or `KASTEN_LLM_THREADS`); else, in
/// the foreground, every core while the rest of the machine is idle and one fewer while
/// other programs keep a core busy (llama.cpp's threads wait for each other at every step:
/// one thread that shares its core with a build slows them all); in the background, half
/// the cores, at least one.
fn thread_count(threads: usize, load: &Mutex<OthersLoad>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let from_env = std::env::var("KASTEN_LLM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0);
    match (threads, from_env) {
        (n, _) if n > 0 => n,
        (_, Some(n)) => n,
        _ if FOREGROUND.load(Ordering::Relaxed) => {
            let busy = load.lock().is_ok_and(|mut l| l.others_busy());
            if busy { (cores - 1).max(1) } else { cores }
        }
        _ => (cores / 2).max(1),
    }
}

/// Whether programs other than this one keep a core busy, from the machine's and this
/// process's CPU time since the last look (Linux `/proc`; elsewhere: never busy), with
/// hysteresis so a context is not made again for every small change.
#[derive(Default)]
struct OthersLoad {
    last: Option<(u64, u64, u64)>,
    busy: bool,
}

impl OthersLoad {
    fn others_busy(&mut self) -> bool {
        if self.last.is_none() {
            // the first look: a short window to start from
            self.last = cpu_times();
            std::thread::sleep(Duration::from_millis(300));
        }
        let Some(now) = cpu_times() else {
            return false;
        };
        if let Some((total0, idle0, own0)) = self.last {
            let total = now.0.saturating_sub(total0);
            // at least 0.4 s of machine time (clock ticks, summed over the cores)
            if total >= 40 {
                let busy = total.saturating_sub(now.1.saturating_sub(idle0));
                let others = busy.saturating_sub(now.2.saturating_sub(own0));
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
                let others_cores = others as f64 / total as f64 * cores;
                self.busy = if self.busy {
                    others_cores > 0.3
                } else {
                    others_cores > 0.6
                };
                self.last = Some(now);
            }
        }
        self.busy
    }
}

/// (all CPU time, idle time) of the machine and this process's CPU time, in clock ticks.
fn cpu_times() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let total: u64 = cpu.iter().sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    // the fields after the command name, which is in parentheses and may hold spaces
    let fields: Vec<&str> = own.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((total, idle, utime + stime))
}

impl LocalOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            idle_unload: Duration::from_secs(300),
            threads: 0,
            max_context: 4096,
            // `KASTEN_LLM_GRAMMAR_FIRST=0` turns it off, to measure what it saves
            grammar_first: std::env::var("KASTEN_LLM_GRAMMAR_FIRST")
                .map_or(true, |v| v.trim() != "0"),
            // `KASTEN_LLM_BATCH=1` answers one request at a time
            batch: std::env::var("KASTEN_LLM_BATCH")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
                .map_or(DEFAULT_BATCH, |n| n.min(MAX_BATCH)),
            // `KASTEN_LLM_COMPACT_JSON=1` turns it on, to measure what it changes
            compact_json: std::env::var("KASTEN_LLM_COMPACT_JSON").is_ok_and(|v| v.trim() == "1"),
        }
    }
}

/// What the built-in model is doing, for the status bar and `kasten llm`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LocalStatus {
    pub path: String,
    /// Whether the model is in memory now.
    pub loaded: bool,
    /// Size of the weights in memory when loaded (bytes).
    pub model_bytes: u64,
    /// Parameters of the model (known once it was loaded).
    pub params: u64,
    /// How long the last load took (ms).
    pub load_ms: u64,
    /// Requests served since the process started.
    pub requests: u64,
    /// Tokens read from prompts and the time it took (ms), since the process started.
    pub prompt_tokens: u64,
    pub prompt_ms: u64,
    /// Of `prompt_tokens`, those not read again because the start of the prompt was the
    /// same as a recent one's (its attention cache kept).
    pub prompt_tokens_reused: u64,
    /// Tokens generated and the time it took (ms).
    pub generated_tokens: u64,
    pub generation_ms: u64,
    /// Decodes while generating: each reads one token of every answer being written, so
    /// `generated_tokens / generation_steps` is how many were written together on average.
    pub generation_steps: u64,
    /// The most answers written together.
    pub batch_peak: u64,
    /// Of `generated_tokens`, those a grammar constrained: the model's pick refused by
    /// the grammar, so the whole vocabulary was constrained for that step.
    pub grammar_full_steps: u64,
    /// Threads of the last context made.
    pub threads: u64,
}

impl LocalStatus {
    /// Prompt tokens read per second (0 before the first request); reused ones are not
    /// counted, as they took no time.
    pub fn prompt_per_sec(&self) -> f64 {
        per_sec(
            self.prompt_tokens.saturating_sub(self.prompt_tokens_reused),
            self.prompt_ms,
        )
    }

    /// Tokens generated per second.
    pub fn generation_per_sec(&self) -> f64 {
        per_sec(self.generated_tokens, self.generation_ms)
    }
}

fn per_sec(n: u64, ms: u64) -> f64 {
    if ms == 0 {
        0.0
    } else {
        n as f64 * 1000.0 / ms as f64
    }
}

/// One finished generation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Generated {
    pub text: String,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

struct Job {
    messages: Vec<Message>,
    grammar: Option<String>,
    max_tokens: u32,
    temperature: f32,
    pieces: Option<tmpsc::UnboundedSender<String>>,
    cancelled: Arc<AtomicBool>,
    reply: oneshot::Sender<Result<Generated, LlmError>>,
}

#[derive(Default)]
struct Shared {
    loaded: AtomicBool,
    model_bytes: AtomicU64,
    params: AtomicU64,
    load_ms: AtomicU64,
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    prompt_ms: AtomicU64,
    prompt_tokens_reused: AtomicU64,
    generated_tokens: AtomicU64,
    generation_ms: AtomicU64,
    generation_steps: AtomicU64,
    batch_peak: AtomicU64,
    grammar_full_steps: AtomicU64,
    threads: AtomicU64,
    others: Mutex<OthersLoad>,
}

/// The built-in model. Cheap to clone; the worker thread ends when the last clone is
/// dropped.
#[derive(Clone)]
pub struct LocalModel {
    opts: LocalOptions,
    tx: Arc<Mutex<Option<mpsc::Sender<Job>>>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("path", &self.opts.path)
            .finish_non_exhaustive()
    }
}

/// llama.cpp's backend may be initialised once per process.
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own log lines go to `tracing` (debug), not to the user's terminal
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            #[cfg(feature = "cpu-variants")]
            let dir = cpu::load_variants()?;
            let backend =
                LlamaBackend::init().map_err(|e| format!("cannot start llama.cpp: {e}"))?;
            #[cfg(feature = "cpu-variants")]
            {
                cpu::check_loaded(&dir)?;
                tracing::info!(
                    variant = cpu::loaded_variant().as_deref().unwrap_or("?"),
                    dir = %dir.display(),
                    "llama.cpp's CPU code loaded"
                );
            }
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| LlmError::Config(e.clone()))
}

/// The variant of ggml's CPU code this process runs the built-in model with (`zen4`,
/// `haswell`, `sse42`, …: the widest SIMD the processor has that Kasten carries), once the
/// model was first loaded; `None` before, or in a build with one static llama.cpp.
pub fn cpu_variant() -> Option<String> {
    #[cfg(feature = "cpu-variants")]
    {
        cpu::loaded_variant()
    }
    #[cfg(not(feature = "cpu-variants"))]
    {
        None
    }
}

/// Checks that `path` is a readable GGUF file (its first four bytes are `GGUF`).
pub fn check_gguf(path: &Path) -> Result<(), LlmError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| {
        LlmError::Config(format!(
            "the model file {} cannot be read ({e}); run scripts/setup to install the built-in model, \
             or point llm.model_path at a GGUF file",
            path.display()
        ))
    })?;
    let mut magic = [0u8; 4];
    f.read_exact(&mut magic).map_err(|_| corrupt(path))?;
    if &magic != b"GGUF" {
        return Err(corrupt(path));
    }
    Ok(())
}

fn corrupt(path: &Path) -> LlmError {
    LlmError::Config(format!(
        "{} is not a GGUF model file (damaged or incomplete?); run scripts/setup again to reinstall the built-in model",
        path.display()
    ))
}

impl LocalModel {
    /// Checks the file and prepares the worker; the model itself is loaded on first use.
    pub fn new(opts: LocalOptions) -> Result<Self, LlmError> {
        check_gguf(&opts.path)?;
        Ok(Self {
            opts,
            tx: Arc::new(Mutex::new(None)),
            shared: Arc::new(Shared::default()),
        })
    }

    pub fn options(&self) -> &LocalOptions {
        &self.opts
    }

    pub fn status(&self) -> LocalStatus {
        let s = &self.shared;
        LocalStatus {
            path: self.opts.path.display().to_string(),
            loaded: s.loaded.load(Ordering::Relaxed),
            model_bytes: s.model_bytes.load(Ordering::Relaxed),
            params: s.params.load(Ordering::Relaxed),
            load_ms: s.load_ms.load(Ordering::Relaxed),
            requests: s.requests.load(Ordering::Relaxed),
            prompt_tokens: s.prompt_tokens.load(Ordering::Relaxed),
            prompt_ms: s.prompt_ms.load(Ordering::Relaxed),
            prompt_tokens_reused: s.prompt_tokens_reused.load(Ordering::Relaxed),
            generated_tokens: s.generated_tokens.load(Ordering::Relaxed),
            generation_ms: s.generation_ms.load(Ordering::Relaxed),
            generation_steps: s.generation_steps.load(Ordering::Relaxed),
            batch_peak: s.batch_peak.load(Ordering::Relaxed),
            grammar_full_steps: s.grammar_full_steps.load(Ordering::Relaxed),
            threads: s.threads.load(Ordering::Relaxed),
        }
    }

    fn sender(&self) -> Result<mpsc::Sender<Job>, LlmError> {
        let mut guard = self
            .tx
            .lock()
            .map_err(|_| LlmError::Protocol("the built-in model's worker failed".into()))?;
        if let Some(tx) = guard.as_ref() {
            return Ok(tx.clone());
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let opts = self.opts.clone();
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("kasten-local-llm".into())
            .spawn(move || worker(opts, shared, rx))
            .map_err(|e| LlmError::Config(format!("cannot start the built-in model: {e}")))?;
        *guard = Some(tx.clone());
        Ok(tx)
    }

    /// Generates an answer to `messages`; with `grammar`, constrained to it. Pieces of text
    /// go to `on_piece` as they are generated.
    pub(crate) async fn generate(
        &self,
        messages: &[Message],
        grammar: Option<String>,
        max_tokens: u32,
        temperature: f32,
        mut on_piece: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> Result<Generated, LlmError> {
        let (reply, answer) = oneshot::channel();
        let (pieces_tx, mut pieces_rx) = tmpsc::unbounded_channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        // Dropping this future (a timeout, a closed window) stops the generation.
        struct CancelOnDrop(Arc<AtomicBool>);
        impl Drop for CancelOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _guard = CancelOnDrop(cancelled.clone());
        let job = Job {
            messages: messages.to_vec(),
            grammar,
            max_tokens,
            temperature,
            pieces: on_piece.is_some().then_some(pieces_tx),
            cancelled,
            reply,
        };
        let sent = self.sender()?.send(job);
        if sent.is_err() {
            // the worker ended (it panicked inside llama.cpp): start a fresh one next time
            if let Ok(mut g) = self.tx.lock() {
                *g = None;
            }
            return Err(LlmError::Protocol(
                "the built-in model stopped unexpectedly; try again".into(),
            ));
        }
        if let Some(cb) = on_piece.as_mut() {
            while let Some(p) = pieces_rx.recv().await {
                cb(&p);
            }
        }
        answer.await.map_err(|_| {
            LlmError::Protocol("the built-in model stopped before it answered".into())
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machines_and_this_processs_cpu_time_are_read() {
        let times = cpu_times();
        if cfg!(target_os = "linux") {
            assert!(times.is_some(), "/proc is readable on Linux");
        }
        let Some((total, idle, own)) = times else {
            return;
        };
        assert!(
            total > 0 && idle <= total && own <= total,
            "{total} {idle} {own}"
        );
        let mut load = OthersLoad::default();
        // whatever the machine does, a look answers (and a second one compares)
        let _ = load.others_busy();
        let _ = load.others_busy();
        assert!(load.last.is_some());
    }

    #[test]
    fn a_missing_or_foreign_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("kasten-gguf-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let missing = dir.join("nope.gguf");
        let e = LocalModel::new(LocalOptions::new(&missing)).err();
        assert!(
            matches!(&e, Some(LlmError::Config(m)) if m.contains("scripts/setup")),
            "{e:?}"
        );
        let fake = dir.join("fake.gguf");
        let _ = std::fs::write(&fake, b"<html>not a model</html>");
        let e = LocalModel::new(LocalOptions::new(&fake)).err();
        assert!(
            matches!(&e, Some(LlmError::Config(m)) if m.contains("not a GGUF")),
            "{e:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
