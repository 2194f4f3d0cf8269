//! Local text embeddings for Kasten.
//!
//! [`Embedder`] is the trait the engine talks to; [`FastEmbedder`] is the production
//! implementation (fastembed over a dynamically loaded ONNX Runtime, all-MiniLM-L6-v2 int8,
//! 384-d, L2-normalised); [`LazyEmbedder`] loads it on the first embedding. Files are found through [`ModelPaths`]; when anything is
//! missing the error names the set-up command instead of letting ONNX Runtime panic.

mod fast;
mod lazy;
mod paths;

pub use fast::FastEmbedder;
pub use lazy::LazyEmbedder;
pub use paths::{DEFAULT_MODEL_ID, ModelPaths};

use thiserror::Error;

/// What went wrong while loading a model or embedding.
#[derive(Debug, Error)]
pub enum EmbedError {
    #[error("{what} not found at {path}: run `scripts/setup` to install it (or set {var})")]
    Missing {
        what: &'static str,
        path: String,
        var: &'static str,
    },
    #[error("could not read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("could not load ONNX Runtime from {path}: {message}")]
    Runtime { path: String, message: String },
    #[error("could not load the embedding model: {0}")]
    Model(String),
    #[error("embedding failed: {0}")]
    Inference(String),
    #[error("the embedding model returned {got} vectors for {expected} texts")]
    Count { expected: usize, got: usize },
}

/// Turns texts into vectors. Implementations must be deterministic for a given model and
/// return L2-normalised vectors of length [`Embedder::dim`].
pub trait Embedder: Send + Sync {
    /// A stable identifier of the model; the store records it so vectors of different
    /// models are never mixed.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}
