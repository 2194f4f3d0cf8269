//! LLM and pipeline settings: stored in the memory (`setting:llm`, `setting:pipeline`,
//! `setting:policy`, the same keys `kasten config` uses), with the environment
//! (`KASTEN_LLM_*`) winning, and the API key kept by the engine's one rule for every
//! surface (`kasten_engine::secrets`: the OS keyring first, the settings with a warning).

use kasten_engine::{Engine, LlmClient, LlmConfig, PipelineOptions, Policy, PolicyMode};
use serde::{Deserialize, Serialize};
use specta::Type;

use crate::error::{AppError, AppResult};

/// Where the API key is kept.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Type, PartialEq, Eq)]
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

#[derive(Debug, Clone, Serialize, Deserialize, Type, PartialEq)]
pub struct SettingsDto {
    /// `openai` (any OpenAI-compatible server) or `ollama`.
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u32,
    pub api_key_storage: KeyStorage,
    /// Neighbours shown to the LLM per note (A-Mem's k).
    pub k: u32,
    /// `auto` (apply at once, keep for review) or `review` (hold until accepted).
    pub links_policy: String,
    pub edits_policy: String,
    pub auto_accept_confidence: Option<f64>,
    /// Settings fixed by environment variables (they win over what is saved here).
    pub env_overrides: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Type)]
pub struct SettingsInput {
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u32,
    /// `null` keeps the stored key, `""` removes it, anything else replaces it.
    pub api_key: Option<String>,
    pub k: u32,
    pub links_policy: String,
    pub edits_policy: String,
    pub auto_accept_confidence: Option<f64>,
}

/// What saving did with the key, for the UI to say plainly.
#[derive(Debug, Clone, Serialize, Type)]
pub struct SaveOutcome {
    pub settings: SettingsDto,
    /// A warning to show (e.g. the key had to be stored unencrypted).
    pub warning: Option<String>,
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn mode_str(m: PolicyMode) -> String {
    match m {
        PolicyMode::Auto => "auto".into(),
        PolicyMode::Review => "review".into(),
    }
}

fn parse_mode(s: &str) -> AppResult<PolicyMode> {
    match s {
        "auto" => Ok(PolicyMode::Auto),
        "review" => Ok(PolicyMode::Review),
        other => Err(AppError::Invalid(format!(
            "the review policy is 'auto' or 'review', not '{other}'"
        ))),
    }
}

async fn setting(engine: &Engine, key: &str) -> AppResult<serde_json::Value> {
    Ok(engine
        .store()
        .get_setting(key)
        .await
        .map_err(|e| AppError::from(kasten_engine::EngineError::from(e)))?
        .unwrap_or_default())
}

fn str_of(v: &serde_json::Value, k: &str) -> Option<String> {
    v.get(k).and_then(|x| x.as_str()).map(str::to_owned)
}

pub async fn load(engine: &Engine) -> AppResult<SettingsDto> {
    let llm = setting(engine, "llm").await?;
    let pipeline = setting(engine, "pipeline").await?;
    let policy = engine.policy().await?;
    let env_overrides: Vec<String> = [
        "KASTEN_LLM_PROVIDER",
        "KASTEN_LLM_BASE_URL",
        "KASTEN_LLM_MODEL",
        "KASTEN_LLM_API_KEY",
        "KASTEN_LLM_TIMEOUT",
    ]
    .iter()
    .filter(|k| env(k).is_some())
    .map(|k| (*k).to_owned())
    .collect();
    let api_key_storage = if env("KASTEN_LLM_API_KEY").is_some() {
        KeyStorage::Environment
    } else if str_of(&llm, "api_key").is_some() {
        KeyStorage::Settings
    } else if engine.api_key_from_keyring().await.is_some() {
        KeyStorage::Keyring
    } else {
        KeyStorage::None
    };
    let pick = |var: &str, k: &str| env(var).or_else(|| str_of(&llm, k)).unwrap_or_default();
    let timeout = env("KASTEN_LLM_TIMEOUT")
        .or_else(|| {
            llm.get("timeout")
                .map(|v| v.to_string().trim_matches('"').to_owned())
        })
        .and_then(|t| t.parse::<u32>().ok())
        .unwrap_or(60);
    Ok(SettingsDto {
        provider: {
            let p = pick("KASTEN_LLM_PROVIDER", "provider");
            if p.is_empty() {
                "openai".into()
            } else {
                p.to_ascii_lowercase()
            }
        },
        base_url: pick("KASTEN_LLM_BASE_URL", "base_url"),
        model: pick("KASTEN_LLM_MODEL", "model"),
        timeout_secs: timeout,
        api_key_storage,
        k: pipeline
            .get("k")
            .and_then(|v| v.as_u64())
            .map(|k| k.clamp(1, 50) as u32)
            .unwrap_or(PipelineOptions::default().k as u32),
        links_policy: mode_str(policy.links),
        edits_policy: mode_str(policy.edits),
        auto_accept_confidence: policy.auto_accept_confidence,
        env_overrides,
    })
}

/// Checks input before anything is written.
pub fn validate(input: &SettingsInput) -> AppResult<()> {
    if !matches!(input.provider.as_str(), "openai" | "ollama") {
        return Err(AppError::Invalid(
            "the provider is 'openai' (any OpenAI-compatible server) or 'ollama'".into(),
        ));
    }
    let url = input.base_url.trim();
    if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
        return Err(AppError::Invalid(
            "the base URL starts with http:// or https:// (e.g. http://127.0.0.1:8080/v1)".into(),
        ));
    }
    if !(1..=50).contains(&input.k) {
        return Err(AppError::Invalid("k is between 1 and 50".into()));
    }
    if !(1..=3600).contains(&input.timeout_secs) {
        return Err(AppError::Invalid(
            "the timeout is between 1 and 3600 seconds".into(),
        ));
    }
    if let Some(c) = input.auto_accept_confidence
        && !(0.0..=1.0).contains(&c)
    {
        return Err(AppError::Invalid(
            "the auto-accept confidence is between 0 and 1".into(),
        ));
    }
    parse_mode(&input.links_policy)?;
    parse_mode(&input.edits_policy)?;
    Ok(())
}

pub async fn save(engine: &Engine, input: &SettingsInput) -> AppResult<Option<String>> {
    validate(input)?;
    // the key first (the keyring, else the settings with a warning): it rewrites `llm`
    let mut warning = None;
    if let Some(key) = input.api_key.as_deref()
        && engine.store_api_key(key).await? == Some(kasten_engine::secrets::KeyPlace::Settings)
    {
        warning = Some(kasten_engine::secrets::UNENCRYPTED_WARNING.to_owned());
    }
    let mut llm = setting(engine, "llm").await?;
    if !llm.is_object() {
        llm = serde_json::json!({});
    }
    if let Some(obj) = llm.as_object_mut() {
        obj.insert("provider".into(), input.provider.clone().into());
        obj.insert("base_url".into(), input.base_url.trim().to_owned().into());
        obj.insert("model".into(), input.model.trim().to_owned().into());
        obj.insert("timeout".into(), input.timeout_secs.into());
    }
    let store_err = |e| AppError::from(kasten_engine::EngineError::from(e));
    engine
        .store()
        .set_setting("llm", &llm)
        .await
        .map_err(store_err)?;
    let mut pipeline = setting(engine, "pipeline").await?;
    if !pipeline.is_object() {
        pipeline = serde_json::json!({});
    }
    if let Some(obj) = pipeline.as_object_mut() {
        obj.insert("k".into(), input.k.into());
    }
    engine
        .store()
        .set_setting("pipeline", &pipeline)
        .await
        .map_err(store_err)?;
    engine
        .set_policy(&Policy {
            links: parse_mode(&input.links_policy)?,
            edits: parse_mode(&input.edits_policy)?,
            auto_accept_confidence: input.auto_accept_confidence,
        })
        .await?;
    Ok(warning)
}

/// The LLM the app uses: the server the settings (or the environment) name, else the
/// built-in model (unless the provider is `none`), with the pipeline options.
pub async fn llm_choice(engine: &Engine) -> AppResult<(kasten_engine::LlmChoice, PipelineOptions)> {
    let (client, pipeline) = client_and_pipeline(engine).await?;
    let choice = match client {
        Some(c) => {
            let label = match c.config().provider {
                kasten_llm::Provider::Ollama => format!("Ollama {}", c.config().model),
                _ => format!("{} at {}", c.config().model, c.config().base_url),
            };
            kasten_engine::LlmChoice {
                label,
                source: if env("KASTEN_LLM_BASE_URL").is_some() {
                    kasten_engine::LlmSource::Environment
                } else {
                    kasten_engine::LlmSource::Settings
                },
                problem: None,
                profile: kasten_engine::ModelProfile::Auto.resolve(&c),
                timeout: c.options().timeout,
                client: Some(c),
            }
        }
        None => engine.choose_llm(&|k: &str| std::env::var(k).ok()).await?,
    };
    Ok((choice, pipeline))
}

/// The LLM client and pipeline options the stored settings and the environment describe
/// (the environment wins, as in the CLI).
pub async fn client_and_pipeline(
    engine: &Engine,
) -> AppResult<(Option<LlmClient>, PipelineOptions)> {
    let s = load(engine).await?;
    let key = match env("KASTEN_LLM_API_KEY") {
        Some(k) => Some(k),
        None => engine.stored_api_key().await?,
    };
    let client = client_for(&s.provider, &s.base_url, &s.model, s.timeout_secs, key)?;
    let pipeline = PipelineOptions {
        k: s.k as usize,
        ..PipelineOptions::default()
    };
    Ok((client, pipeline))
}

pub fn client_for(
    provider: &str,
    base_url: &str,
    model: &str,
    timeout_secs: u32,
    key: Option<String>,
) -> AppResult<Option<LlmClient>> {
    let lookup = |k: &str| -> Option<String> {
        let v = match k {
            "KASTEN_LLM_PROVIDER" => provider.to_owned(),
            "KASTEN_LLM_BASE_URL" => base_url.trim().to_owned(),
            "KASTEN_LLM_MODEL" => model.trim().to_owned(),
            "KASTEN_LLM_API_KEY" => key.clone().unwrap_or_default(),
            _ => String::new(),
        };
        (!v.is_empty()).then_some(v)
    };
    let config = LlmConfig::from_lookup(lookup).map_err(|e| AppError::Invalid(e.to_string()))?;
    let Some(config) = config else {
        return Ok(None);
    };
    let opts = kasten_llm::ClientOptions {
        timeout: std::time::Duration::from_secs(u64::from(timeout_secs.clamp(1, 3600))),
        ..Default::default()
    };
    LlmClient::new(config, opts)
        .map(Some)
        .map_err(|e| AppError::Invalid(format!("cannot set up the LLM client: {e}")))
}

/// The key to use for a connection test: the one typed in, else the stored one.
pub async fn key_for_test(engine: &Engine, typed: Option<String>) -> AppResult<Option<String>> {
    if let Some(k) = typed.filter(|k| !k.trim().is_empty()) {
        return Ok(Some(k));
    }
    if let Some(k) = env("KASTEN_LLM_API_KEY") {
        return Ok(Some(k));
    }
    Ok(engine.stored_api_key().await?)
}

#[cfg(test)]
mod tests {
    use kasten_engine::secrets::KeyStore as _;

    use super::*;

    fn input() -> SettingsInput {
        SettingsInput {
            provider: "openai".into(),
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "m".into(),
            timeout_secs: 60,
            api_key: None,
            k: 10,
            links_policy: "auto".into(),
            edits_policy: "review".into(),
            auto_accept_confidence: Some(0.9),
        }
    }

    #[test]
    fn validation_names_the_bad_field() {
        assert!(validate(&input()).is_ok());
        let mut i = input();
        i.provider = "gpt".into();
        assert!(matches!(validate(&i), Err(AppError::Invalid(m)) if m.contains("provider")));
        let mut i = input();
        i.base_url = "localhost:8080".into();
        assert!(matches!(validate(&i), Err(AppError::Invalid(m)) if m.contains("http://")));
        let mut i = input();
        i.k = 0;
        assert!(matches!(validate(&i), Err(AppError::Invalid(m)) if m.contains("k is")));
        let mut i = input();
        i.links_policy = "sometimes".into();
        assert!(validate(&i).is_err());
    }

    /// A constant embedder: the settings code never embeds, but an engine needs one.
    struct Flat;
    impl kasten_embed::Embedder for Flat {
        fn model_id(&self) -> &str {
            "flat"
        }
        fn dim(&self) -> usize {
            4
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, kasten_embed::EmbedError> {
            Ok(texts.iter().map(|_| vec![1.0, 0.0, 0.0, 0.0]).collect())
        }
    }

    /// A keyring in memory (tests never touch the real one); `works: false` is a machine
    /// without one.
    struct TestKeys {
        works: bool,
        key: std::sync::Mutex<Option<String>>,
    }
    impl kasten_engine::secrets::KeyStore for TestKeys {
        fn get(&self) -> Option<String> {
            self.key.lock().ok()?.clone()
        }
        fn set(&self, key: &str) -> bool {
            self.works && self.key.lock().map(|mut k| *k = Some(key.into())).is_ok()
        }
        fn delete(&self) {
            if let Ok(mut k) = self.key.lock() {
                *k = None;
            }
        }
    }

    /// Whichever way the key goes (the OS keyring where there is one, else the settings
    /// with a warning), it is used afterwards (by the app and by the CLI and MCP server's
    /// path, `Engine::choose_llm`), the UI is told where it is, and removing it removes it
    /// from both places.
    #[tokio::test]
    async fn the_api_key_goes_to_the_keyring_or_to_the_settings_with_a_warning() {
        if env("KASTEN_LLM_API_KEY").is_some() {
            return; // the environment would win over both places; nothing to observe here
        }
        for works in [true, false] {
            let mut engine = Engine::open(
                &kasten_store::Endpoint::Mem,
                std::sync::Arc::new(Flat),
                &|_| {},
            )
            .await
            .unwrap();
            let keys = std::sync::Arc::new(TestKeys {
                works,
                key: std::sync::Mutex::new(None),
            });
            engine.set_key_store(keys.clone());
            let key = "sk-test-0123456789";
            let mut i = input();
            i.api_key = Some(key.into());
            let warning = save(&engine, &i).await.unwrap();
            let llm = setting(&engine, "llm").await.unwrap();
            let stored = load(&engine).await.unwrap().api_key_storage;
            if works {
                // a keyring took it: the settings hold no copy
                assert_eq!(warning, None);
                assert_eq!(str_of(&llm, "api_key"), None);
                assert_eq!(keys.get().as_deref(), Some(key));
                assert_eq!(stored, KeyStorage::Keyring);
            } else {
                // no keyring (a headless machine, CI): kept in the settings, said plainly
                let w = warning.unwrap_or_default();
                assert!(w.contains("unencrypted"), "{w}");
                assert_eq!(str_of(&llm, "api_key").as_deref(), Some(key));
                assert_eq!(stored, KeyStorage::Settings);
            }
            // the stored key is the one a connection test uses
            assert_eq!(
                key_for_test(&engine, None).await.unwrap().as_deref(),
                Some(key)
            );
            // and the one the CLI and `kasten mcp` use: they choose the LLM through the
            // engine with the environment as lookup
            let choice = engine.choose_llm(&|_: &str| None).await.unwrap();
            let client = choice
                .client
                .unwrap_or_else(|| panic!("no client: {:?}", choice.problem));
            assert_eq!(
                client.config().api_key.as_deref(),
                Some(key),
                "keyring works: {works}"
            );
            // saving without a key keeps it; an empty key removes it everywhere
            i.api_key = None;
            assert!(save(&engine, &i).await.unwrap().is_none());
            assert_eq!(
                key_for_test(&engine, None).await.unwrap().as_deref(),
                Some(key)
            );
            i.api_key = Some(String::new());
            save(&engine, &i).await.unwrap();
            assert_eq!(key_for_test(&engine, None).await.unwrap(), None);
            assert_eq!(keys.get(), None);
            assert_eq!(
                load(&engine).await.unwrap().api_key_storage,
                KeyStorage::None
            );
            engine.close().await;
        }
    }

    #[test]
    fn a_client_needs_url_and_model() {
        assert!(matches!(client_for("openai", "", "m", 60, None), Ok(None)));
        assert!(matches!(
            client_for("openai", "http://127.0.0.1:1/v1", "m", 60, None),
            Ok(Some(_))
        ));
    }
}
