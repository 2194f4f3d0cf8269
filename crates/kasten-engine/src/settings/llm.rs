//! Which LLM is used: the environment, then the stored `llm` settings, then the built-in
//! model; set up once, a problem reported in words rather than as an error.

use std::path::PathBuf;
use std::time::Duration;

use kasten_llm::{
    ClientOptions, LlmClient, LlmConfig, LocalModel, LocalOptions, Provider, builtin_model,
};
use serde::Serialize;
use serde_json::Value;

use super::registry::{
    API_KEY_VAR, LOCAL_TIMEOUT_SECS, TIMEOUT_SECS, clamp_workers, env_var_of, parse_timeout,
};
use crate::pipeline::ModelProfile;
use crate::{Engine, EngineError};

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
    /// The LLM in words: "built-in Qwen2.5-Coder-0.5B", "Ollama qwen2.5:7b", …
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
        // each field's variable is its setting's (`llm.<field>`); the key's is its own
        let mut pick = |k: &str| {
            let var = env_var_of(&format!("llm.{k}")).unwrap_or(API_KEY_VAR);
            match env(var) {
                Some(v) => {
                    from_env = true;
                    Some(v)
                }
                None => st(k),
            }
        };
        Self {
            provider: pick("provider"),
            base_url: pick("base_url"),
            model: pick("model"),
            model_path: pick("model_path"),
            api_key: pick("api_key"),
            timeout: pick("timeout"),
            profile: pick("profile"),
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
                            "llm.timeout / KASTEN_LLM_TIMEOUT must be whole seconds ({}-{}), not '{t}'; \
                             fix it with `kasten config set llm.timeout 120` (or unset it)",
                            TIMEOUT_SECS.start(),
                            TIMEOUT_SECS.end()
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
            None => {
                let (path, model) = builtin_model(get);
                (path, LlmSource::BuiltIn, format!("built-in {}", model.name))
            }
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
    /// The LLM these settings and `get` (the environment) name, set up.
    pub async fn choose_llm(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<LlmChoice, EngineError> {
        let stored = self.setting_group("llm").await?;
        let mut settings = LlmSettings::combine(get, &stored);
        // the environment's key wins; else the keyring's, else the settings' (secrets.rs)
        if get(API_KEY_VAR).is_none_or(|k| k.trim().is_empty()) {
            settings.api_key = self.api_key_without_env(&stored).await;
        }
        Ok(settings.choose(get))
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
            pipeline.workers = clamp_workers(w as u64);
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

/// Concurrent enrichment jobs when `pipeline.workers` is not set: for the built-in model,
/// as many as it answers together (it decodes the requests that wait in one batch, so more
/// notes in flight cost little more time each), else the default. Each note's own calls
/// stay in order; notes enriched together do not see each other as neighbours, as with
/// any count above one.
fn workers_for_llm(choice: &LlmChoice, pipeline: &mut crate::PipelineOptions) {
    if let Some(local) = choice.client.as_ref().and_then(LlmClient::local) {
        pipeline.workers = clamp_workers(pipeline.workers.max(local.options().batch) as u64);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::settings::test_util::*;

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
        // the default model, or the quick one where only it is installed
        let (_, model) = builtin_model(&e);
        assert_eq!(c.label, format!("built-in {}", model.name));
        if kasten_llm::DEFAULT_BUILTIN.installed(&e).is_some() {
            assert_eq!(c.label, "built-in Qwen2.5-Coder-0.5B");
        }
        // installed in the data dir (scripts/setup) or not: either a client or a problem
        // that names the setup command
        if c.client.is_none() {
            assert!(c.problem.unwrap_or_default().contains("scripts/setup"));
        } else {
            assert_eq!(c.profile, ModelProfile::Small);
        }
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
