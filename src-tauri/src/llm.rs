//! Which LLM annotates the memory: the one in use, the servers found on this machine, and
//! the one-click choice between them, the built-in model and a GGUF file on disk. The
//! values are the same stored settings `kasten llm use` / `kasten llm builtin [NAME]` /
//! `kasten config set llm.model_path` write, so the CLI and the app agree. Settings → Models:
//! the catalog's built-in models, downloaded with progress and cancel, used and removed as
//! `kasten llm install` / `builtin NAME` / `remove` do (into the same data directory).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kasten_engine::LlmSource;
use kasten_llm::Provider;
use kasten_llm::catalog::{
    CatalogModel, catalog, find_model, installed_path, measurements, models_dir,
};
use kasten_llm::install::{InstallError, InstallProgress, Installer};
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
    /// The protocol it speaks (`openai` or `ollama`).
    pub provider: Provider,
    pub base_url: String,
    pub models: Vec<String>,
}

/// The LLM in use, in words.
#[derive(Debug, Clone, Serialize, Type)]
pub struct LlmInUseDto {
    /// "built-in Qwen2.5-Coder-0.5B", "Ollama qwen2.5:7b", "none", …
    pub label: String,
    pub source: LlmSourceDto,
    pub ready: bool,
    /// Why it is not ready, with the fix.
    pub problem: Option<String>,
    /// What it is trusted to do ("construction (guided) and links; no evolution …").
    pub steps: String,
    /// The GGUF file, for a model that runs in the app.
    pub model_path: Option<String>,
}

/// Where the LLM in use comes from (the engine's [`LlmSource`], with its words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Type)]
#[serde(rename_all = "snake_case")]
pub enum LlmSourceDto {
    /// `KASTEN_LLM_*` variables.
    Environment,
    /// The stored settings.
    Settings,
    /// The built-in model.
    BuiltIn,
    /// No LLM.
    None,
}

impl From<LlmSource> for LlmSourceDto {
    fn from(s: LlmSource) -> Self {
        match s {
            LlmSource::Environment => Self::Environment,
            LlmSource::Settings => Self::Settings,
            LlmSource::BuiltIn => Self::BuiltIn,
            LlmSource::None => Self::None,
        }
    }
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
        provider: Provider,
        base_url: String,
        model: String,
    },
    /// The built-in model `scripts/setup` installs.
    Builtin,
    /// Any GGUF instruct model on disk, run in the app like the built-in one.
    Gguf { path: String },
    /// An installed model of the catalog (Settings → Models), as `kasten llm builtin NAME`.
    Installed { name: String },
}

async fn in_use(state: &AppState) -> AppResult<LlmInUseDto> {
    let engine = state.engine().await?;
    let (choice, _) = crate::settings::llm_choice(&engine).await?;
    Ok(LlmInUseDto {
        label: choice.label.clone(),
        source: choice.source.into(),
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
                provider: d.provider,
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
    let choice = match &pick {
        LlmPick::Server {
            provider,
            base_url,
            model,
        } => {
            if model.trim().is_empty() {
                return Err(AppError::Invalid("pick a model of this server".into()));
            }
            kasten_engine::LlmPick::Server {
                provider: provider.as_str().to_owned(),
                base_url: base_url.clone(),
                model: model.clone(),
            }
        }
        LlmPick::Builtin => kasten_engine::LlmPick::Builtin { model_path: None },
        LlmPick::Gguf { path } => kasten_engine::LlmPick::Builtin {
            model_path: Some(path.clone()),
        },
        LlmPick::Installed { name } => {
            let m = catalog_model(name)?;
            let path = installed_path(&m, env).ok_or_else(|| {
                AppError::Invalid(format!("{} is not installed: download it first", m.title))
            })?;
            // the default one is found where it is, as with no pick
            kasten_engine::LlmPick::Builtin {
                model_path: (!m.default).then(|| path.display().to_string()),
            }
        }
    };
    // every value checked before anything is written, then one write
    engine.use_llm(&choice).await.map_err(invalid)?;
    drop(engine);
    crate::worker::llm_settings_changed(&app, &state).await;
    in_use(&state).await
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

fn catalog_model(name: &str) -> AppResult<CatalogModel> {
    find_model(name)
        .ok_or_else(|| AppError::NotFound(format!("there is no built-in model '{name}'")))
}

fn installer() -> AppResult<Installer> {
    let dir = models_dir(env).ok_or_else(|| {
        AppError::Unavailable("cannot find Kasten's data directory: set KASTEN_HOME".into())
    })?;
    Installer::new(dir).map_err(|e| AppError::internal("model installer", e))
}

/// The downloads running in this app, by model name, with their cancel flags.
fn downloads() -> &'static Mutex<HashMap<String, Arc<AtomicBool>>> {
    static D: OnceLock<Mutex<HashMap<String, Arc<AtomicBool>>>> = OnceLock::new();
    D.get_or_init(Default::default)
}

fn downloading(name: &str) -> bool {
    downloads()
        .lock()
        .map(|d| d.contains_key(name))
        .unwrap_or(false)
}

/// A built-in model of the catalog, for Settings → Models.
#[derive(Debug, Clone, Serialize, Type)]
pub struct BuiltinModelDto {
    /// What `kasten llm install NAME` takes.
    pub name: String,
    pub title: String,
    /// Bytes on disk once installed, and to download.
    pub size_bytes: f64,
    pub download_bytes: f64,
    /// ISO 639-1 codes.
    pub languages: Vec<String>,
    pub license: String,
    pub about: String,
    /// Kasten's default built-in model.
    pub default: bool,
    pub installed: bool,
    pub path: Option<String>,
    /// Whether the LLM in use is this model's file.
    pub in_use: bool,
    /// Whether this app is downloading it now.
    pub downloading: bool,
    /// What `scripts/builtin-llm-bench` measured on this machine, if it did.
    pub notes_per_hour: Option<f64>,
    pub quality_passed: Option<bool>,
}

/// What a model's install is doing.
#[derive(Debug, Clone, Copy, Serialize, Type, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ModelStage {
    Checking,
    Downloading,
    Unpacking,
    Verifying,
}

/// How far a download is.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ModelProgressDto {
    pub stage: ModelStage,
    pub done_bytes: f64,
    pub total_bytes: f64,
    /// The part being downloaded (1-based) and how many there are.
    pub part: u32,
    pub parts: u32,
}

async fn model_list(state: &AppState) -> AppResult<Vec<BuiltinModelDto>> {
    // the model in use, when it runs in the app (none while the memory is opening)
    let in_use = match state.engine().await {
        Ok(engine) => crate::settings::llm_choice(&engine)
            .await
            .ok()
            .and_then(|(c, _)| {
                c.client
                    .as_ref()
                    .and_then(|c| c.local())
                    .map(|l| l.options().path.clone())
            }),
        Err(_) => None,
    };
    let measured = models_dir(env)
        .map(|d| measurements(&d))
        .unwrap_or_default();
    Ok(catalog()
        .into_iter()
        .map(|m| {
            let path = installed_path(&m, env);
            let me = measured.get(&m.file);
            BuiltinModelDto {
                size_bytes: m.size as f64,
                download_bytes: m.download_size() as f64,
                in_use: path.is_some() && path == in_use,
                installed: path.is_some(),
                path: path.map(|p| p.display().to_string()),
                downloading: downloading(&m.name),
                notes_per_hour: me.map(|x| x.notes_per_hour),
                quality_passed: me.map(|x| x.quality_passed),
                name: m.name,
                title: m.title,
                languages: m.languages,
                license: m.license,
                about: m.about,
                default: m.default,
            }
        })
        .collect())
}

/// The catalog's built-in models: installed or not, in use or not, measured or not.
#[tauri::command]
#[specta::specta]
pub async fn builtin_models(state: State<'_, AppState>) -> AppResult<Vec<BuiltinModelDto>> {
    model_list(&state).await
}

/// Downloads and installs a built-in model (as `kasten llm install NAME`), reporting
/// progress; ends when it is installed, failed or cancelled (`cancel_model_install`). A
/// cancelled download leaves nothing; a failed one continues where it stopped next time.
#[tauri::command]
#[specta::specta]
pub async fn install_model(
    state: State<'_, AppState>,
    name: String,
    on_progress: tauri::ipc::Channel<ModelProgressDto>,
) -> AppResult<Vec<BuiltinModelDto>> {
    let m = catalog_model(&name)?;
    let mut inst = installer()?;
    {
        let mut d = downloads()
            .lock()
            .map_err(|_| AppError::Internal("the download list is poisoned".into()))?;
        if d.contains_key(&m.name) {
            return Err(AppError::Conflict(format!(
                "{} is already downloading",
                m.title
            )));
        }
        d.insert(m.name.clone(), Arc::clone(&inst.cancel));
    }
    inst.cancel.store(false, Ordering::Relaxed);
    // at most a few messages a second
    let last = Mutex::new(Instant::now() - Duration::from_secs(1));
    let progress = |p: InstallProgress| {
        let (stage, done, total, part, parts) = match p {
            InstallProgress::Checking => (ModelStage::Checking, 0, 0, 0, 0),
            InstallProgress::Downloading {
                part,
                parts,
                done,
                total,
            } => (ModelStage::Downloading, done, total, part, parts),
            InstallProgress::Unpacking { part, parts } => {
                (ModelStage::Unpacking, 0, 0, part, parts)
            }
            InstallProgress::Verifying => (ModelStage::Verifying, 0, 0, 0, 0),
        };
        if stage == ModelStage::Downloading && done < total {
            let Ok(mut l) = last.lock() else { return };
            if l.elapsed() < Duration::from_millis(200) {
                return;
            }
            *l = Instant::now();
        }
        let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        let _ = on_progress.send(ModelProgressDto {
            stage,
            done_bytes: done as f64,
            total_bytes: total as f64,
            part: n(part),
            parts: n(parts),
        });
    };
    inst.attempts = 5;
    let result = inst.install(&m, &progress).await;
    if let Ok(mut d) = downloads().lock() {
        d.remove(&m.name);
    }
    match result {
        Ok(_) => model_list(&state).await,
        Err(e @ InstallError::Cancelled(_)) => Err(AppError::Conflict(e.to_string())),
        Err(e @ (InstallError::NoSpace { .. } | InstallError::Busy(_))) => {
            Err(AppError::Invalid(e.to_string()))
        }
        Err(e) => Err(AppError::Unavailable(e.to_string())),
    }
}

/// Stops a download this app is running; it deletes what it had downloaded.
#[tauri::command]
#[specta::specta]
pub async fn cancel_model_install(name: String) -> AppResult<bool> {
    let m = catalog_model(&name)?;
    Ok(match downloads().lock() {
        Ok(d) => d
            .get(&m.name)
            .map(|c| c.store(true, Ordering::Relaxed))
            .is_some(),
        Err(_) => false,
    })
}

/// Deletes an installed built-in model (as `kasten llm remove NAME`); not the one in use.
#[tauri::command]
#[specta::specta]
pub async fn remove_model(
    state: State<'_, AppState>,
    name: String,
) -> AppResult<Vec<BuiltinModelDto>> {
    let m = catalog_model(&name)?;
    if model_list(&state)
        .await?
        .iter()
        .any(|x| x.name == m.name && x.in_use)
    {
        return Err(AppError::Invalid(format!(
            "{} is the LLM in use: pick another one first",
            m.title
        )));
    }
    if downloading(&m.name) {
        return Err(AppError::Conflict(format!(
            "{} is downloading: cancel it first",
            m.title
        )));
    }
    installer()?
        .remove(&m)
        .map_err(|e| AppError::Unavailable(e.to_string()))?;
    model_list(&state).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_crosses_as_the_engines_word() {
        for s in [
            LlmSource::Environment,
            LlmSource::Settings,
            LlmSource::BuiltIn,
            LlmSource::None,
        ] {
            let ours = serde_json::to_value(LlmSourceDto::from(s)).unwrap_or_default();
            let engine = serde_json::to_value(s).unwrap_or_default();
            assert!(ours.is_string(), "{ours}");
            assert_eq!(ours, engine);
        }
    }
}
