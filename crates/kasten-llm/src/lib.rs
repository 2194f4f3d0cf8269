//! LLM clients for Kasten's enrichment pipeline and chat.
//!
//! The clients themselves (OpenAI-compatible chat completions, Ollama's `/api/chat`,
//! structured output, retries, streaming) arrive with the pipeline issue. What exists now
//! is the configuration, so that every surface reads it the same way and the CLI can say
//! why enrichment is waiting.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Which wire protocol the configured server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// OpenAI-compatible chat completions (OpenAI, llama-server, vLLM, LM Studio).
    Openai,
    /// Ollama's native `/api/chat`.
    Ollama,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LlmConfigError {
    #[error("KASTEN_LLM_PROVIDER must be 'openai' or 'ollama', not '{0}'")]
    UnknownProvider(String),
}

/// Connection settings for the LLM server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmConfig {
    pub provider: Provider,
    pub base_url: String,
    pub model: String,
    /// Never logged or printed.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
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
        let provider = match non_empty("KASTEN_LLM_PROVIDER")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("openai") => Provider::Openai,
            Some("ollama") => Provider::Ollama,
            Some(other) => return Err(LlmConfigError::UnknownProvider(other.to_owned())),
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
