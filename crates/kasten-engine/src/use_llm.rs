//! "Use this LLM" (`kasten llm use`, `kasten llm builtin`, Settings → Models): the four
//! settings that name the LLM (`llm.provider`, `llm.base_url`, `llm.model`,
//! `llm.model_path`) replaced together, so what the last pick did not name never lingers
//! and a refused value changes nothing.

use serde_json::json;

use crate::settings::validate_setting;
use crate::{Engine, EngineError};

/// The settings that name the LLM; a pick replaces all four.
const CHOICE_KEYS: [&str; 4] = ["provider", "base_url", "model", "model_path"];

/// The LLM to use from the next enrichment pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmPick {
    /// A server: `provider` (`openai`, `ollama`), its URL and the model's name on it.
    Server {
        provider: String,
        base_url: String,
        model: String,
    },
    /// The built-in model: the default one where it is installed (`None`) or this GGUF
    /// file.
    Builtin { model_path: Option<String> },
}

impl LlmPick {
    /// The `llm.` fields the pick sets (the others of [`CHOICE_KEYS`] are cleared).
    fn values(&self) -> Vec<(&'static str, String)> {
        match self {
            LlmPick::Server {
                provider,
                base_url,
                model,
            } => vec![
                ("provider", provider.clone()),
                ("base_url", base_url.clone()),
                ("model", model.trim().to_owned()),
            ],
            LlmPick::Builtin { model_path: None } => Vec::new(),
            LlmPick::Builtin {
                model_path: Some(p),
            } => vec![("model_path", p.trim().to_owned())],
        }
    }
}

impl Engine {
    /// Uses `pick` from the next enrichment pass: every value is checked first (as
    /// `kasten config set` checks it; a refused one changes nothing), then the four
    /// settings that name the LLM are replaced in one write — the pick's set, the rest
    /// cleared (a server pick clears `llm.model_path`, the built-in model the server's).
    /// The other `llm.` settings (API key, timeout, profile) stay.
    pub async fn use_llm(&self, pick: &LlmPick) -> Result<(), EngineError> {
        let mut checked = Vec::new();
        for (field, raw) in pick.values() {
            checked.push((field, validate_setting(&format!("llm.{field}"), &raw)?));
        }
        let mut obj = self.setting_group("llm").await?;
        if !obj.is_object() {
            obj = json!({});
        }
        if let Some(map) = obj.as_object_mut() {
            for k in CHOICE_KEYS {
                map.remove(k);
            }
            for (field, value) in checked {
                map.insert(field.to_owned(), value);
            }
        }
        self.store.set_setting("llm", &obj).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Endpoint;
    use crate::tests::HashEmbedder;

    /// A server pick after a GGUF file clears the file; the built-in pick clears the
    /// server; a refused value changes nothing; the other `llm.` settings stay through all of it.
    #[tokio::test]
    async fn a_pick_replaces_the_whole_choice_or_nothing() -> Result<(), EngineError> {
        let e = Engine::open(&Endpoint::Mem, HashEmbedder::arc("hash", 32, 1), &|_| {}).await?;
        e.set_setting_checked("llm.profile", "small").await?;
        e.set_setting_checked("llm.timeout", "120").await?;
        let dir = tempfile::tempdir().map_err(|err| EngineError::File(err.to_string()))?;
        let gguf = dir.path().join("m.gguf");
        // the smallest file `llm.model_path` accepts: the GGUF magic and a version
        std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00")
            .map_err(|err| EngineError::File(err.to_string()))?;
        let path = gguf.display().to_string();
        e.use_llm(&LlmPick::Builtin {
            model_path: Some(path.clone()),
        })
        .await?;
        let llm = e.setting_group("llm").await?;
        assert_eq!(llm["model_path"], path.as_str());
        assert_eq!(llm["profile"], "small");

        e.use_llm(&LlmPick::Server {
            provider: "ollama".into(),
            base_url: "http://127.0.0.1:11434".into(),
            model: " qwen3:4b ".into(),
        })
        .await?;
        let llm = e.setting_group("llm").await?;
        assert!(llm.get("model_path").is_none(), "{llm}");
        assert_eq!(llm["provider"], "ollama");
        assert_eq!(llm["base_url"], "http://127.0.0.1:11434");
        assert_eq!(llm["model"], "qwen3:4b");
        assert_eq!(llm["profile"], "small");

        // a bad URL: refused, and the server pick before it stands whole
        let bad = e
            .use_llm(&LlmPick::Server {
                provider: "openai".into(),
                base_url: "not a url".into(),
                model: "m".into(),
            })
            .await;
        assert!(matches!(bad, Err(EngineError::Setting(_))), "{bad:?}");
        assert_eq!(e.setting_group("llm").await?, llm);

        e.use_llm(&LlmPick::Builtin { model_path: None }).await?;
        let llm = e.setting_group("llm").await?;
        for k in CHOICE_KEYS {
            assert!(llm.get(k).is_none(), "{k}: {llm}");
        }
        assert_eq!(llm["profile"], "small");
        assert_eq!(llm["timeout"], 120);
        e.close().await;
        Ok(())
    }
}
