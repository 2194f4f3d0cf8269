//! The production embedder: fastembed with a user-defined model over ONNX Runtime loaded
//! from an explicit path (`ort::init_from`), which returns errors where the implicit
//! `ORT_DYLIB_PATH` route would panic.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use fastembed::{
    AutoDevicePolicy, InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles,
    UserDefinedEmbeddingModel,
};
use ort::environment::Environment;

use crate::{EmbedError, Embedder, ModelPaths};

/// ONNX Runtime allows one environment per process; it is built once and shared.
static ORT_ENV: OnceLock<Environment> = OnceLock::new();
static ORT_INIT: Mutex<()> = Mutex::new(());

fn ort_env(lib: &Path) -> Result<Environment, EmbedError> {
    if let Some(env) = ORT_ENV.get() {
        return Ok(env.clone());
    }
    let _guard = ORT_INIT.lock().map_err(|_| EmbedError::Runtime {
        path: lib.display().to_string(),
        message: "an earlier attempt to load it crashed".into(),
    })?;
    if let Some(env) = ORT_ENV.get() {
        return Ok(env.clone());
    }
    let err = |message: String| EmbedError::Runtime {
        path: lib.display().to_string(),
        message,
    };
    let abs = lib.canonicalize().map_err(|e| err(e.to_string()))?;
    let env = ort::init_from(&abs)
        .map_err(|e| err(e.to_string()))?
        .with_name("kasten")
        .with_telemetry(false)
        .build()
        .map_err(|e| err(e.to_string()))?;
    Ok(ORT_ENV.get_or_init(|| env).clone())
}

/// Max tokens per text, as sentence-transformers uses for all-MiniLM-L6-v2.
const MAX_TOKENS: usize = 256;
/// Texts per ONNX run at most.
const BATCH: usize = 64;
/// Padded tokens per ONNX run at most: every text of a run is padded to its longest, and
/// the attention of a run grows with texts × tokens², and ONNX Runtime keeps its memory
/// arena at the largest run. 64 texts of 256 tokens peaked at 2.9 GB RSS importing long
/// notes; 4,096 tokens at 0.95 GB, 1,024 at 0.48 GB (short notes 0.36 GB against 0.59)
/// with the same embedding throughput (docs/BENCHMARKS.md, "Memory: what holds the RSS"):
/// long texts go 4 to a run, short ones ~15.
const TOKEN_BUDGET: usize = 1024;

/// A cautious guess at a text's tokens (at most [`MAX_TOKENS`]): a token per 3 bytes of
/// UTF-8 is one per CJK character and more than English averages (~4 characters).
fn token_guess(text: &str) -> usize {
    (text.len() / 3 + 2).min(MAX_TOKENS)
}

/// Consecutive runs of `texts` (in order) within [`BATCH`] texts and [`TOKEN_BUDGET`]
/// padded tokens each, as index ranges.
fn runs(texts: &[&str]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut longest) = (0, 0);
    for (i, t) in texts.iter().enumerate() {
        let tokens = token_guess(t);
        let n = i - start;
        if n > 0 && (n == BATCH || (n + 1) * longest.max(tokens) > TOKEN_BUDGET) {
            out.push(start..i);
            start = i;
            longest = 0;
        }
        longest = longest.max(tokens);
    }
    if start < texts.len() {
        out.push(start..texts.len());
    }
    out
}

/// fastembed-backed [`Embedder`].
pub struct FastEmbedder {
    model_id: String,
    dim: usize,
    inner: Mutex<TextEmbedding>,
}

impl FastEmbedder {
    /// Loads the model at `paths` using `threads` intra-op threads (0 = all cores).
    pub fn load(paths: &ModelPaths, threads: usize) -> Result<Self, EmbedError> {
        paths.check()?;
        let env = ort_env(&paths.runtime)?;
        let read = |f: &str| {
            let p = paths.model_dir.join(f);
            std::fs::read(&p).map_err(|source| EmbedError::Read {
                path: p.display().to_string(),
                source,
            })
        };
        let model = UserDefinedEmbeddingModel::new(
            read("model.onnx")?,
            TokenizerFiles {
                tokenizer_file: read("tokenizer.json")?,
                config_file: read("config.json")?,
                special_tokens_map_file: read("special_tokens_map.json")?,
                tokenizer_config_file: read("tokenizer_config.json")?,
            },
        )
        .with_pooling(Pooling::Mean);
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let opts = InitOptionsUserDefined::new()
            .with_environment(env)
            .with_max_length(MAX_TOKENS)
            .with_intra_threads(threads)
            .with_session_config("session.intra_op.allow_spinning", "0")
            .with_auto_device(AutoDevicePolicy::PreferCPU)
            // Without ONNX Runtime's CPU arena: the arena keeps every block it ever grew to
            // for the life of the session, on top of what the allocator keeps. Without
            // it, in a process of its own on jemalloc, embedding 4,096 short texts ends at
            // 167 MB RSS instead of 244 (docs/BENCHMARKS.md, "The embedder's memory").
            .with_execution_providers(vec![
                ort::ep::CPU::default().with_arena_allocator(false).build(),
            ]);
        let mut te = TextEmbedding::try_new_from_user_defined(model, opts)
            .map_err(|e| EmbedError::Model(e.to_string()))?;
        // One probe tells the dimension (and proves the model runs) before anything is stored.
        let probe = te
            .embed(["dimension probe"], Some(1))
            .map_err(|e| EmbedError::Model(e.to_string()))?;
        let dim = probe.first().map_or(0, Vec::len);
        if dim == 0 {
            return Err(EmbedError::Model(
                "the model produced an empty vector".into(),
            ));
        }
        Ok(Self {
            model_id: paths.model_id.clone(),
            dim,
            inner: Mutex::new(te),
        })
    }

    /// Loads the default model from the standard locations.
    pub fn load_default() -> Result<Self, EmbedError> {
        Self::load(&ModelPaths::from_env(crate::DEFAULT_MODEL_ID), 0)
    }
}

impl Embedder for FastEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut te = self
            .inner
            .lock()
            .map_err(|_| EmbedError::Inference("the embedder crashed earlier".into()))?;
        let mut out = Vec::with_capacity(texts.len());
        for run in runs(texts) {
            let n = run.len();
            out.extend(
                te.embed(&texts[run], Some(n))
                    .map_err(|e| EmbedError::Inference(e.to_string()))?,
            );
        }
        if out.len() != texts.len() {
            return Err(EmbedError::Count {
                expected: texts.len(),
                got: out.len(),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn runs_keep_the_order_and_put_long_texts_in_smaller_runs() {
        let short = "a short note";
        let long = "word ".repeat(400);
        let texts: Vec<&str> = std::iter::repeat_n(short, 100)
            .chain(std::iter::repeat_n(long.as_str(), 40))
            .chain(std::iter::once(short))
            .collect();
        let r = runs(&texts);
        // contiguous, in order, covering every text once
        assert_eq!(r.first().map(|x| x.start), Some(0));
        assert_eq!(r.last().map(|x| x.end), Some(texts.len()));
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        for x in &r {
            let longest = texts[x.clone()].iter().map(|t| token_guess(t)).max();
            assert!(x.len() <= BATCH);
            assert!(x.len() * longest.unwrap_or(0) <= TOKEN_BUDGET || x.len() == 1);
        }
        // short texts still go 64 to a run, long ones 4
        assert_eq!(r[0], 0..64);
        assert!(r.iter().any(|x| x.len() == 4 && x.start >= 100));
        assert!(runs(&[]).is_empty());
        // CJK: a character is about a token
        assert_eq!(token_guess(&"茶".repeat(100)), 102);
    }

    /// Runs against the real model installed by `scripts/setup`.
    #[test]
    fn real_model_embeds_normalised_vectors_that_capture_meaning() {
        let e = match FastEmbedder::load_default() {
            Ok(e) => e,
            Err(err) => {
                panic!("the embedding model must be installed for tests (scripts/setup): {err}")
            }
        };
        assert_eq!(e.dim(), 384);
        let v = e
            .embed(&[
                "The cat sat on the mat.",
                "A kitten was resting on the rug.",
                "Quarterly tax filing deadline",
            ])
            .unwrap_or_default();
        assert_eq!(v.len(), 3);
        for x in &v {
            let n: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((n - 1.0).abs() < 1e-3, "norm {n}");
        }
        assert!(cos(&v[0], &v[1]) > cos(&v[0], &v[2]) + 0.2);
        // deterministic
        let again = e.embed(&["The cat sat on the mat."]).unwrap_or_default();
        assert!(cos(&v[0], &again[0]) > 0.9999);
    }

    #[test]
    fn a_missing_library_is_an_error_not_a_panic() {
        let dir = std::env::temp_dir();
        let paths = ModelPaths {
            model_id: "x".into(),
            runtime: dir.join("no-such-libonnxruntime.so"),
            model_dir: dir,
        };
        let err = FastEmbedder::load(&paths, 1)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("scripts/setup"), "{err}");
    }
}
