//! Which LLM annotates the memory: the one in use, the servers found on this machine, and
//! the one-click choice between them, the built-in model and a GGUF file on disk. The
//! values are the same stored settings `kasten llm use` / `kasten llm builtin` / `kasten
//! config set llm.model_path` write, so the CLI and the app agree.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use specta::Type;
use tauri::{AppHandle, State};

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// How long one discovery probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(400);

/// An LLM server that answered on this machine.
#[derive(Debug, Clone, Serialize, Type)]
pub struct DiscoveredDto {
    /// "Ollama", "LM Studio", "llama-server", "vLLM" or "server at host:port".
    pub server: String,
    /// "openai" or "ollama".
    pub provider: String,
    pub base_url: String,
    pub models: Vec<String>,
}

/// The LLM in use, in words.
#[derive(Debug, Clone, Serialize, Type)]
pub struct LlmInUseDto {
    /// "built-in SmolLM2-135M", "Ollama qwen2.5:7b", "none", …
    pub label: String,
    /// "environment", "settings", "built_in" or "none".
    pub source: String,
    pub ready: bool,
    /// Why it is not ready, with the fix.
    pub problem: Option<String>,
    /// What it is trusted to do ("construction (guided) and links; no evolution …").
    pub steps: String,
    /// The GGUF file, for a model that runs in the app.
    pub model_path: Option<String>,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct LlmOverviewDto {
    pub in_use: LlmInUseDto,
    pub discovered: Vec<DiscoveredDto>,
    /// True when `KASTEN_LLM_*` variables choose the LLM (a pick here is then stored but
    /// the environment still wins).
    pub env_chooses: bool,
}

/// What the user picked.
#[derive(Debug, Clone, Deserialize, Type)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LlmPick {
    /// A server (usually one that discovery found).
    Server {
        provider: String,
        base_url: String,
        model: String,
    },
    /// The built-in model `scripts/setup` installs.
    Builtin,
    /// Any GGUF instruct model on disk, run in the app like the built-in one.
    Gguf { path: String },
}

async fn in_use(state: &AppState) -> AppResult<LlmInUseDto> {
    let engine = state.engine().await?;
    let (choice, _) = crate::settings::llm_choice(&engine).await?;
    let source = serde_json::to_value(choice.source)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    Ok(LlmInUseDto {
        label: choice.label.clone(),
        source,
        ready: choice.client.is_some(),
        problem: choice.problem.clone(),
        steps: choice.profile.steps().to_owned(),
        model_path: choice
            .client
            .as_ref()
            .and_then(|c| c.local())
            .map(|l| l.options().path.display().to_string()),
    })
}

/// The LLM in use and the servers found on loopback (probed in parallel, 400 ms each).
#[tauri::command]
#[specta::specta]
pub async fn llm_overview(state: State<'_, AppState>) -> AppResult<LlmOverviewDto> {
    let (found, in_use) = tokio::join!(kasten_llm::discover(PROBE_TIMEOUT), in_use(&state));
    Ok(LlmOverviewDto {
        in_use: in_use?,
        discovered: found
            .into_iter()
            .map(|d| DiscoveredDto {
                server: d.server,
                provider: d.provider.as_str().to_owned(),
                base_url: d.base_url,
                models: d.models,
            })
            .collect(),
        env_chooses: [
            "KASTEN_LLM_PROVIDER",
            "KASTEN_LLM_BASE_URL",
            "KASTEN_LLM_MODEL_PATH",
        ]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty())),
    })
}

/// Stores the pick (checked first: a bad URL or a file that is not a GGUF model is refused
/// with the reason, and nothing changes); enrichment uses it from its next pass.
#[tauri::command]
#[specta::specta]
pub async fn use_llm(
    app: AppHandle,
    state: State<'_, AppState>,
    pick: LlmPick,
) -> AppResult<LlmInUseDto> {
    let engine = state.engine().await?;
    let invalid = |e: kasten_engine::EngineError| AppError::Invalid(e.to_string());
    // check every value before anything is written
    let values: Vec<(&str, String)> = match &pick {
        LlmPick::Server {
            provider,
            base_url,
            model,
        } => {
            if model.trim().is_empty() {
                return Err(AppError::Invalid("pick a model of this server".into()));
            }
            vec![
                ("llm.provider", provider.clone()),
                ("llm.base_url", base_url.clone()),
                ("llm.model", model.trim().to_owned()),
            ]
        }
        LlmPick::Builtin => Vec::new(),
        LlmPick::Gguf { path } => vec![("llm.model_path", path.trim().to_owned())],
    };
    for (k, v) in &values {
        kasten_engine::validate_setting(k, v).map_err(|e| AppError::Invalid(e.to_string()))?;
    }
    for k in [
        "llm.provider",
        "llm.base_url",
        "llm.model",
        "llm.model_path",
    ] {
        engine.unset_setting(k).await.map_err(invalid)?;
    }
    for (k, v) in &values {
        engine.set_setting_checked(k, v).await.map_err(invalid)?;
    }
    drop(engine);
    crate::worker::llm_settings_changed(&app, &state).await;
    in_use(&state).await
}
