//! The settings form over IPC: a thin adapter over the engine's one settings model
//! (`kasten_engine::settings`: the environment, then the stored settings, then the
//! defaults; the same rules `kasten config set` applies; the API key by the one rule of
//! `kasten_engine::secrets`). The CLI and `kasten mcp` read the same model.

use kasten_engine::settings::{SettingsForm, SettingsUpdate};
use kasten_engine::{Engine, LlmClient, PipelineOptions, PolicyMode};
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

/// What the provider setting is in the app's TypeScript: a protocol
/// ([`kasten_llm::Provider`]) or `none` (the LLM switched off). A word the environment
/// gives that is none of these is shown as it came (the engine says what is wrong with it).
pub struct ProviderSetting;

impl Type for ProviderSetting {
    fn definition(types: &mut specta::Types) -> specta::datatype::DataType {
        // registers Provider, which the definition names
        let _ = kasten_llm::Provider::definition(types);
        specta_typescript::define("Provider | \"none\"").into()
    }
}

/// Whether the LLM's new links (or edits) apply at once or wait for review.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Type, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PolicyWord {
    /// Apply at once, keep for review.
    Auto,
    /// Hold until accepted.
    Review,
}

impl From<PolicyMode> for PolicyWord {
    fn from(m: PolicyMode) -> Self {
        match m {
            PolicyMode::Auto => PolicyWord::Auto,
            PolicyMode::Review => PolicyWord::Review,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Type, PartialEq)]
pub struct SettingsDto {
    /// `openai` (any OpenAI-compatible server), `ollama`, `local` or `none`.
    #[specta(type = ProviderSetting)]
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u32,
    pub api_key_storage: KeyStorage,
    /// Neighbours shown to the LLM per note (A-Mem's k).
    pub k: u32,
    pub links_policy: PolicyWord,
    pub edits_policy: PolicyWord,
    pub auto_accept_confidence: Option<f64>,
    /// Settings fixed by environment variables (they win over what is saved here).
    pub env_overrides: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Type)]
pub struct SettingsInput {
    #[specta(type = ProviderSetting)]
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u32,
    /// `null` keeps the stored key, `""` removes it, anything else replaces it.
    pub api_key: Option<String>,
    pub k: u32,
    /// Checked by the engine's settings rules, which name the words they take.
    #[specta(type = PolicyWord)]
    pub links_policy: String,
    #[specta(type = PolicyWord)]
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

impl From<kasten_engine::settings::KeyStorage> for KeyStorage {
    fn from(k: kasten_engine::settings::KeyStorage) -> Self {
        use kasten_engine::settings::KeyStorage as K;
        match k {
            K::None => Self::None,
            K::Keyring => Self::Keyring,
            K::Settings => Self::Settings,
            K::Environment => Self::Environment,
        }
    }
}

impl From<SettingsForm> for SettingsDto {
    fn from(f: SettingsForm) -> Self {
        Self {
            provider: f.provider,
            base_url: f.base_url,
            model: f.model,
            timeout_secs: f.timeout_secs,
            api_key_storage: f.api_key.into(),
            k: f.k,
            links_policy: f.policy.links.into(),
            edits_policy: f.policy.edits.into(),
            auto_accept_confidence: f.policy.auto_accept_confidence,
            env_overrides: f.env_overrides,
        }
    }
}

impl From<&SettingsInput> for SettingsUpdate {
    fn from(i: &SettingsInput) -> Self {
        Self {
            provider: i.provider.clone(),
            base_url: i.base_url.clone(),
            model: i.model.clone(),
            timeout_secs: i.timeout_secs,
            api_key: i.api_key.clone(),
            k: i.k,
            links: i.links_policy.clone(),
            edits: i.edits_policy.clone(),
            auto_accept_confidence: i.auto_accept_confidence,
        }
    }
}

pub async fn load(engine: &Engine) -> AppResult<SettingsDto> {
    Ok(engine.settings_form(&env).await?.into())
}

/// Checks input before anything is written (the error names the setting).
pub fn validate(input: &SettingsInput) -> AppResult<()> {
    SettingsUpdate::from(input)
        .validate()
        .map_err(|e| AppError::Invalid(e.to_string()))
}

/// Saves the form; returns a warning to show (the key had to be stored unencrypted).
pub async fn save(engine: &Engine, input: &SettingsInput) -> AppResult<Option<String>> {
    Ok(engine.save_settings(&SettingsUpdate::from(input)).await?)
}

/// The LLM the app uses and the pipeline options: what the CLI and `kasten mcp` use too.
pub async fn llm_choice(engine: &Engine) -> AppResult<(kasten_engine::LlmChoice, PipelineOptions)> {
    Ok(engine.llm_and_pipeline(&env).await?)
}

/// A client for the server the (unsaved) form names, for "test connection".
pub fn client_for(input: &SettingsInput, key: Option<String>) -> AppResult<Option<LlmClient>> {
    Ok(SettingsUpdate::from(input).server_client(key)?)
}

/// The key to use for a connection test: the one typed in, else the one in use.
pub async fn key_for_test(engine: &Engine, typed: Option<String>) -> AppResult<Option<String>> {
    if let Some(k) = typed.filter(|k| !k.trim().is_empty()) {
        return Ok(Some(k));
    }
    Ok(engine.api_key_in_use(&env).await?)
}

#[cfg(test)]
mod tests {
    use kasten_engine::secrets::KeyStore as _;

    use super::*;

    fn str_of(v: &serde_json::Value, k: &str) -> Option<String> {
        v.get(k).and_then(|x| x.as_str()).map(str::to_owned)
    }

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
        assert!(matches!(validate(&i), Err(AppError::Invalid(m)) if m.contains("llm.base_url")));
        let mut i = input();
        i.k = 0;
        assert!(matches!(validate(&i), Err(AppError::Invalid(m)) if m.contains("pipeline.k")));
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
                &kasten_engine::Endpoint::Mem,
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
            let llm = engine.setting_group("llm").await.unwrap();
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
        let mut i = input();
        i.base_url = String::new();
        assert!(matches!(client_for(&i, None), Ok(None)));
        assert!(matches!(client_for(&input(), None), Ok(Some(_))));
    }
}
