//! The settings form the app shows and saves: the values in effect, checked by the
//! rules `kasten config set` applies, saved together.

use std::time::Duration;

use kasten_llm::{ClientOptions, LlmClient, LlmConfig, Provider};
use serde::Serialize;
use serde_json::{Value, json};

use super::registry::{
    API_KEY_VAR, DEFAULT_TIMEOUT_SECS, SettingError, TIMEOUT_SECS, clamp_k, parse_timeout, takes,
    validate_setting,
};
use crate::{Engine, EngineError};

/// Where the API key is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyStorage {
    None,
    /// The OS keyring (Secret Service).
    Keyring,
    /// In the memory's settings, readable by anyone who can read the data directory.
    Settings,
    /// `KASTEN_LLM_API_KEY` in the environment.
    Environment,
}

/// The settings form the app shows (a server by hand, k, the review policy): the values
/// in effect, env > settings > defaults, as [`Engine::effective_settings`] has them.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsForm {
    /// `openai` (any OpenAI-compatible server), `ollama`, `local` or `none`; `openai` when unset.
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u32,
    pub api_key: KeyStorage,
    pub k: u32,
    pub policy: crate::Policy,
    /// The environment variables that fix settings (they win over what is saved).
    pub env_overrides: Vec<String>,
}

/// What the settings form saves.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsUpdate {
    pub provider: String,
    /// Empty: no server (the built-in model is used).
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u32,
    /// `None` keeps the stored key, `""` removes it, anything else replaces it.
    pub api_key: Option<String>,
    pub k: u32,
    pub links: String,
    pub edits: String,
    pub auto_accept_confidence: Option<f64>,
}

/// The checked values of a [`SettingsUpdate`], ready to store.
struct CheckedUpdate {
    provider: Value,
    base_url: Option<Value>,
    model: Option<Value>,
    timeout: Value,
    k: Value,
    policy: crate::Policy,
}

impl SettingsUpdate {
    /// Checks every field by the rule `kasten config set` applies; the error names the
    /// setting.
    pub fn validate(&self) -> Result<(), SettingError> {
        self.checked().map(|_| ())
    }

    fn checked(&self) -> Result<CheckedUpdate, SettingError> {
        let optional = |key: &str, v: &str| {
            let v = v.trim();
            (!v.is_empty())
                .then(|| validate_setting(key, v))
                .transpose()
        };
        let mode = |key: &str, v: &str| -> Result<crate::PolicyMode, SettingError> {
            let v = validate_setting(key, v)?;
            serde_json::from_value(v.clone()).map_err(|_| SettingError::Invalid {
                key: key.to_owned(),
                value: v.to_string(),
                takes: takes(key).to_owned(),
            })
        };
        let confidence = match self.auto_accept_confidence {
            None => None,
            Some(c) => validate_setting("policy.auto_accept_confidence", &c.to_string())?.as_f64(),
        };
        Ok(CheckedUpdate {
            provider: validate_setting("llm.provider", &self.provider)?,
            base_url: optional("llm.base_url", &self.base_url)?,
            model: optional("llm.model", &self.model)?,
            timeout: validate_setting("llm.timeout", &self.timeout_secs.to_string())?,
            k: validate_setting("pipeline.k", &self.k.to_string())?,
            policy: crate::Policy {
                links: mode("policy.links", &self.links)?,
                edits: mode("policy.edits", &self.edits)?,
                auto_accept_confidence: confidence,
            },
        })
    }

    /// A client for the server this form names, with `api_key` (for "test connection"
    /// before saving); `None` when no base URL and model are given.
    pub fn server_client(&self, api_key: Option<String>) -> Result<Option<LlmClient>, EngineError> {
        self.validate()?;
        let (url, model) = (self.base_url.trim(), self.model.trim());
        if url.is_empty() || model.is_empty() {
            return Ok(None);
        }
        let provider = match Provider::parse(&self.provider) {
            Some(Provider::Local) | None => return Ok(None),
            Some(p) => p,
        };
        let config = LlmConfig {
            provider,
            base_url: url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: api_key.filter(|k| !k.trim().is_empty()),
        };
        let opts = ClientOptions {
            timeout: Duration::from_secs(
                u64::from(self.timeout_secs).clamp(*TIMEOUT_SECS.start(), *TIMEOUT_SECS.end()),
            ),
            ..ClientOptions::default()
        };
        LlmClient::new(config, opts)
            .map(Some)
            .map_err(|e| EngineError::Internal(format!("cannot set up the LLM client: {e}")))
    }
}

impl Engine {
    /// The API key in use: the environment's, else the keyring's, else the settings'.
    pub async fn api_key_in_use(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<Option<String>, EngineError> {
        match get(API_KEY_VAR).filter(|k| !k.trim().is_empty()) {
            Some(k) => Ok(Some(k)),
            None => self.stored_api_key().await,
        }
    }

    /// The settings form, with the values in effect.
    pub async fn settings_form(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<SettingsForm, EngineError> {
        let eff = self.effective_settings(get).await?;
        let stored = self.setting_group("llm").await?;
        let api_key = if get(API_KEY_VAR).is_some_and(|k| !k.trim().is_empty()) {
            KeyStorage::Environment
        } else if stored
            .get("api_key")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.trim().is_empty())
        {
            KeyStorage::Settings
        } else if self.api_key_from_keyring().await.is_some() {
            KeyStorage::Keyring
        } else {
            KeyStorage::None
        };
        let mut env_overrides = eff.from_environment();
        env_overrides.retain(|v| v != "KASTEN_LLM_MODEL_PATH" && v != "KASTEN_LLM_PROFILE");
        if api_key == KeyStorage::Environment {
            env_overrides.push(API_KEY_VAR.into());
        }
        let secs = eff
            .text("llm.timeout")
            .and_then(|t| parse_timeout(&t))
            .map_or(DEFAULT_TIMEOUT_SECS, |d| d.as_secs());
        Ok(SettingsForm {
            provider: eff.text("llm.provider").unwrap_or_else(|| "openai".into()),
            base_url: eff.text("llm.base_url").unwrap_or_default(),
            model: eff.text("llm.model").unwrap_or_default(),
            timeout_secs: u32::try_from(secs).unwrap_or(u32::MAX),
            api_key,
            k: eff
                .value("pipeline.k")
                .as_u64()
                .map_or(crate::PipelineOptions::default().k, clamp_k) as u32,
            policy: self.policy().await?,
            env_overrides,
        })
    }

    /// Saves the settings form: every field is checked first (nothing is written when one
    /// is wrong; the error names it), then the key goes by the one rule (`secrets.rs`).
    /// Returns a warning to show when the key had to be stored unencrypted.
    pub async fn save_settings(&self, u: &SettingsUpdate) -> Result<Option<String>, EngineError> {
        let c = u.checked()?;
        // the key first (the keyring, else the settings with a warning): it rewrites `llm`
        let mut warning = None;
        if let Some(key) = u.api_key.as_deref()
            && self.store_api_key(key).await? == Some(crate::secrets::KeyPlace::Settings)
        {
            warning = Some(crate::secrets::UNENCRYPTED_WARNING.to_owned());
        }
        let mut llm = self.setting_group("llm").await?;
        if !llm.is_object() {
            llm = json!({});
        }
        if let Some(obj) = llm.as_object_mut() {
            obj.insert("provider".into(), c.provider);
            for (field, v) in [("base_url", c.base_url), ("model", c.model)] {
                match v {
                    Some(v) => obj.insert(field.into(), v),
                    None => obj.remove(field),
                };
            }
            obj.insert("timeout".into(), c.timeout);
        }
        self.store.set_setting("llm", &llm).await?;
        let mut pipeline = self.setting_group("pipeline").await?;
        if !pipeline.is_object() {
            pipeline = json!({});
        }
        pipeline["k"] = c.k;
        self.store.set_setting("pipeline", &pipeline).await?;
        self.set_policy(&c.policy).await?;
        Ok(warning)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::LlmSource;
    use crate::settings::test_util::*;

    /// The form is saved only when every field keeps its rule, and the error names the
    /// setting; a saved form is what the CLI and the MCP server then use.
    #[tokio::test]
    async fn the_settings_form_is_checked_by_the_same_rules_and_read_by_every_surface() {
        let e = engine().await;
        let good = SettingsUpdate {
            provider: "ollama".into(),
            base_url: "http://127.0.0.1:9/".into(),
            model: "qwen".into(),
            timeout_secs: 90,
            api_key: None,
            k: 12,
            links: "review".into(),
            edits: "auto".into(),
            auto_accept_confidence: Some(0.9),
        };
        for (bad, key) in [
            (
                SettingsUpdate {
                    provider: "gpt".into(),
                    ..good.clone()
                },
                "llm.provider",
            ),
            (
                SettingsUpdate {
                    base_url: "localhost:8080".into(),
                    ..good.clone()
                },
                "llm.base_url",
            ),
            (
                SettingsUpdate {
                    k: 0,
                    ..good.clone()
                },
                "pipeline.k",
            ),
            (
                SettingsUpdate {
                    timeout_secs: 0,
                    ..good.clone()
                },
                "llm.timeout",
            ),
            (
                SettingsUpdate {
                    links: "sometimes".into(),
                    ..good.clone()
                },
                "policy.links",
            ),
            (
                SettingsUpdate {
                    auto_accept_confidence: Some(1.5),
                    ..good.clone()
                },
                "policy.auto_accept_confidence",
            ),
        ] {
            let err = e
                .save_settings(&bad)
                .await
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(key), "{key}: {err}");
        }
        // nothing was written by the refused saves
        assert_eq!(e.setting_group("llm").await.unwrap(), json!({}));
        assert_eq!(e.save_settings(&good).await.unwrap(), None);
        let none = env_sync(&[]);
        let form = e.settings_form(&none).await.unwrap();
        assert_eq!(
            (
                form.provider.as_str(),
                form.base_url.as_str(),
                form.model.as_str(),
                form.timeout_secs,
                form.k
            ),
            ("ollama", "http://127.0.0.1:9", "qwen", 90, 12)
        );
        assert_eq!(form.policy.links, crate::PolicyMode::Review);
        // the same values reach the LLM and pipeline every surface configures
        let (choice, pipeline) = e.llm_and_pipeline(&none).await.unwrap();
        assert_eq!(
            (choice.label.as_str(), choice.source),
            ("Ollama qwen", LlmSource::Settings)
        );
        assert_eq!(choice.timeout, Duration::from_secs(90));
        assert_eq!(pipeline.k, 12);
        // an empty URL and model mean no server: removed, and the built-in model is next
        let local = SettingsUpdate {
            base_url: String::new(),
            model: String::new(),
            ..good.clone()
        };
        e.save_settings(&local).await.unwrap();
        let llm = e.setting_group("llm").await.unwrap();
        assert!(
            llm.get("base_url").is_none() && llm.get("model").is_none(),
            "{llm}"
        );
        assert!(local.server_client(None).unwrap().is_none());
        assert!(good.server_client(Some("k".into())).unwrap().is_some());
        e.close().await;
    }
}
