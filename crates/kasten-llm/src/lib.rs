//! LLM clients for Kasten's enrichment pipeline and chat.
//!
//! - [`LlmConfig`]: which server (`KASTEN_LLM_*`), read the same way by every surface.
//! - [`LlmClient`]: OpenAI-compatible chat completions (`{base}/chat/completions`, base
//!   URL including `/v1`) or Ollama's native `{base}/api/chat`. Structured calls send the
//!   JSON schema (`response_format` / `format`), parse the answer leniently
//!   ([`parse_json_lenient`]), validate it, ask once for a repair, and otherwise fail with
//!   [`LlmError::BadOutput`]. Transient failures (429, 5xx, connection errors, timeouts)
//!   are retried with exponential backoff. Streaming chat, plain chat, and `ping`.
//! - [`Usage`]: token counts from the server, or estimated (ceil(chars / 4)) and marked.
//! - [`catalog`]: the built-in models Kasten can install, pinned; [`install`] downloads
//!   one (resumable, every part and the joined file checked against its sha256).

pub mod catalog;
mod client;
mod discover;
mod error;
pub mod install;
mod local;
mod parse;

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use client::{
    ChatRequest, ChatResponse, ClientOptions, LlmClient, Message, Role, StructuredRequest,
    StructuredResponse, Usage, Validator,
};
pub use discover::{
    BuiltinModel, DEFAULT_BUILTIN, DISCOVER_VAR, Discovered, KNOWN_PORTS, QUICK_BUILTIN,
    builtin_model, discover, discover_at, discovery_targets,
};
pub use error::LlmError;
pub use local::{LocalModel, LocalOptions, LocalStatus, check_gguf, cpu_variant, set_foreground};
pub use parse::{ParseError, parse_json_lenient};

/// Which wire protocol the configured server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// OpenAI-compatible chat completions (OpenAI, llama-server, vLLM, LM Studio).
    Openai,
    /// Ollama's native `/api/chat`.
    Ollama,
    /// The built-in model: a GGUF file run in process by llama.cpp (`base_url` holds the
    /// file's path).
    Local,
}

impl Provider {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Some(Self::Openai),
            "ollama" => Some(Self::Ollama),
            "local" => Some(Self::Local),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Ollama => "ollama",
            Self::Local => "local",
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LlmConfigError {
    #[error("KASTEN_LLM_PROVIDER must be 'openai', 'ollama' or 'local', not '{0}'")]
    UnknownProvider(String),
}

/// Connection settings for the LLM server. `Debug` redacts the API key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmConfig {
    pub provider: Provider,
    pub base_url: String,
    pub model: String,
    /// Never logged or printed.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl LlmConfig {
    /// Reads `KASTEN_LLM_PROVIDER`, `KASTEN_LLM_BASE_URL`, `KASTEN_LLM_MODEL`,
    /// `KASTEN_LLM_API_KEY` through `get` (the process environment in production).
    /// `Ok(None)` means no LLM is configured: notes are still saved, embedded and
    /// searchable; enrichment waits.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, LlmConfigError> {
        let non_empty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let (Some(base_url), Some(model)) = (
            non_empty("KASTEN_LLM_BASE_URL"),
            non_empty("KASTEN_LLM_MODEL"),
        ) else {
            return Ok(None);
        };
        let provider = match non_empty("KASTEN_LLM_PROVIDER") {
            None => Provider::Openai,
            Some(p) => Provider::parse(&p).ok_or(LlmConfigError::UnknownProvider(p))?,
        };
        Ok(Some(Self {
            provider,
            base_url,
            model,
            api_key: non_empty("KASTEN_LLM_API_KEY"),
        }))
    }

    /// Why enrichment is not running, in words for the user.
    pub fn missing_reason() -> &'static str {
        "no LLM configured: set KASTEN_LLM_BASE_URL and KASTEN_LLM_MODEL to enrich notes"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
    }

    #[test]
    fn absent_or_partial_config_means_no_llm() {
        assert_eq!(LlmConfig::from_lookup(env(&[])), Ok(None));
        assert_eq!(
            LlmConfig::from_lookup(env(&[("KASTEN_LLM_MODEL", "m")])),
            Ok(None)
        );
    }

    #[test]
    fn full_config_parses_and_hides_the_key() {
        let c = LlmConfig::from_lookup(env(&[
            ("KASTEN_LLM_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("KASTEN_LLM_MODEL", "smol"),
            ("KASTEN_LLM_PROVIDER", "Ollama"),
            ("KASTEN_LLM_API_KEY", "sk-secret"),
        ]));
        let c = c.ok().flatten();
        assert_eq!(c.as_ref().map(|c| c.provider), Some(Provider::Ollama));
        let json = serde_json::to_string(&c).unwrap_or_default();
        assert!(!json.contains("sk-secret"));
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("sk-secret") && debug.contains("<redacted>"),
            "{debug}"
        );
    }

    #[test]
    fn unknown_provider_is_an_error() {
        let r = LlmConfig::from_lookup(env(&[
            ("KASTEN_LLM_BASE_URL", "x"),
            ("KASTEN_LLM_MODEL", "m"),
            ("KASTEN_LLM_PROVIDER", "gpt"),
        ]));
        assert_eq!(r, Err(LlmConfigError::UnknownProvider("gpt".into())));
    }
}
