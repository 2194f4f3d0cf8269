//! The embedding model loaded when it is first asked to embed.

use std::sync::OnceLock;

use crate::{EmbedError, Embedder, FastEmbedder, ModelPaths};

/// [`FastEmbedder`], loaded on the first call to [`Embedder::embed`]. The files are checked
/// and the dimension read from the model's `config.json` (`hidden_size`: the output of
/// mean pooling) when it is made, so opening a memory does not need the model: commands
/// that never embed (backup, restore, list, history, export) neither wait for ONNX
/// Runtime to load nor hold its memory (~100-200 MB). The load checks that the model
/// produces vectors of the declared dimension.
pub struct LazyEmbedder {
    paths: ModelPaths,
    threads: usize,
    dim: usize,
    /// The loaded model, or why it could not be loaded (not retried: the files do not change
    /// while the process runs).
    loaded: OnceLock<Result<FastEmbedder, String>>,
}

impl LazyEmbedder {
    /// Checks the files at `paths` and reads the dimension; `threads` as in
    /// [`FastEmbedder::load`].
    pub fn new(paths: ModelPaths, threads: usize) -> Result<Self, EmbedError> {
        paths.check()?;
        let config = paths.model_dir.join("config.json");
        let text = std::fs::read_to_string(&config).map_err(|source| EmbedError::Read {
            path: config.display().to_string(),
            source,
        })?;
        let dim = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("hidden_size").and_then(serde_json::Value::as_u64))
            .and_then(|d| usize::try_from(d).ok())
            .filter(|&d| d > 0)
            .ok_or_else(|| {
                EmbedError::Model(format!(
                    "{} does not give the model's dimension (hidden_size)",
                    config.display()
                ))
            })?;
        Ok(Self {
            paths,
            threads,
            dim,
            loaded: OnceLock::new(),
        })
    }

    /// The default model from the standard locations.
    pub fn new_default() -> Result<Self, EmbedError> {
        Self::new(ModelPaths::from_env(crate::DEFAULT_MODEL_ID), 0)
    }

    /// Whether the model has been loaded (it is once something was embedded).
    pub fn is_loaded(&self) -> bool {
        matches!(self.loaded.get(), Some(Ok(_)))
    }

    fn model(&self) -> Result<&FastEmbedder, EmbedError> {
        let loaded = self.loaded.get_or_init(|| {
            let model = FastEmbedder::load(&self.paths, self.threads).map_err(|e| e.to_string())?;
            if model.dim() != self.dim {
                return Err(format!(
                    "the embedding model produces {}-dimensional vectors, its config.json says {}",
                    model.dim(),
                    self.dim
                ));
            }
            Ok(model)
        });
        loaded.as_ref().map_err(|m| EmbedError::Model(m.clone()))
    }
}

impl Embedder for LazyEmbedder {
    fn model_id(&self) -> &str {
        &self.paths.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.model()?.embed(texts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs against the real model installed by `scripts/setup`.
    #[test]
    fn loads_on_the_first_embedding_and_embeds_as_the_model_does() {
        let lazy = LazyEmbedder::new_default()
            .unwrap_or_else(|e| panic!("the embedding model must be installed for tests: {e}"));
        assert_eq!(lazy.dim(), 384);
        assert!(!lazy.is_loaded());
        assert!(lazy.embed(&[]).is_ok_and(|v| v.is_empty()));
        assert!(!lazy.is_loaded(), "nothing to embed loads nothing");
        let eager = FastEmbedder::load_default().unwrap_or_else(|e| panic!("{e}"));
        let text = ["A heron stood still in the shallow water."];
        let a = lazy.embed(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(lazy.is_loaded());
        let b = eager.embed(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b);
        assert_eq!(lazy.model_id(), eager.model_id());
    }

    /// The installed model copied into a temporary folder, with `config` as its config.json.
    fn model_with_config(config: &str) -> (tempfile::TempDir, ModelPaths) {
        let from = ModelPaths::from_env(crate::DEFAULT_MODEL_ID);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for f in crate::paths::MODEL_FILES {
            std::fs::copy(from.model_dir.join(f), dir.path().join(f))
                .unwrap_or_else(|e| panic!("{f}: {e}"));
        }
        std::fs::write(dir.path().join("config.json"), config).unwrap_or_else(|e| panic!("{e}"));
        let paths = ModelPaths {
            model_dir: dir.path().to_path_buf(),
            ..from
        };
        (dir, paths)
    }

    #[test]
    fn a_config_without_the_dimension_is_refused_when_made() {
        let (_dir, paths) = model_with_config("{\"model_type\": \"bert\"}");
        let err = LazyEmbedder::new(paths, 1)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("hidden_size"), "{err}");
    }

    #[test]
    fn a_dimension_the_model_does_not_produce_fails_the_embedding_with_a_clear_error() {
        let (_dir, paths) = model_with_config("{\"hidden_size\": 128}");
        let lazy = LazyEmbedder::new(paths, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lazy.dim(), 128);
        let err = lazy
            .embed(&["text"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("384") && err.contains("128"), "{err}");
        // asked again: the same error, not a second load
        let again = lazy
            .embed(&["text"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(err, again);
    }
}
