//! IPC for the lifecycle made visible: a note's strength and tier, the notes fading below
//! the archive threshold, and the archived ones (archive, restore, keep).

use kasten_core::Actor;
use kasten_core::lifecycle::Tier;
use serde::Serialize;
use specta::Type;
use tauri::State;

use crate::dto::{NoteDto, NotesPage, PREVIEW_CHARS, clamp_u32, preview};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Who the app acts as in the audit history.
const ACTOR: &str = Actor::User.as_str();

fn note_id(s: &str) -> AppResult<kasten_core::NoteId> {
    kasten_core::NoteId::parse(s).map_err(|_| AppError::NotFound(format!("there is no note {s}")))
}

/// Where a note stands: strength now (0–1) against the archive threshold, and its tier.
#[derive(Debug, Clone, Serialize, Type)]
pub struct LifecycleDto {
    pub strength: f64,
    pub tier: Tier,
    pub project: Option<String>,
    pub threshold: f64,
    /// Below the threshold: the Fading view lists it.
    pub fading: bool,
    pub archived: bool,
}

impl From<kasten_engine::Lifecycle> for LifecycleDto {
    fn from(l: kasten_engine::Lifecycle) -> Self {
        LifecycleDto {
            strength: l.strength,
            tier: l.tier,
            project: l.project,
            threshold: l.threshold,
            fading: l.fading,
            archived: l.archived,
        }
    }
}

/// A note fading below the archive threshold.
#[derive(Debug, Clone, Serialize, Type)]
pub struct FadingNoteDto {
    pub id: String,
    pub preview: String,
    pub strength: f64,
    pub tier: Tier,
    pub project: Option<String>,
    /// Days since it entered the memory or was last used.
    pub idle_days: f64,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct FadingDto {
    pub threshold: f64,
    /// Weakest first.
    pub notes: Vec<FadingNoteDto>,
}

/// A note's strength, tier and whether it is fading.
#[tauri::command]
#[specta::specta]
pub async fn note_lifecycle(state: State<'_, AppState>, id: String) -> AppResult<LifecycleDto> {
    let engine = state.engine().await?;
    Ok(engine.lifecycle_of(&note_id(&id)?).await?.into())
}

/// The archive candidates: active notes below the threshold, weakest first.
#[tauri::command]
#[specta::specta]
pub async fn fading_notes(state: State<'_, AppState>, limit: u32) -> AppResult<FadingDto> {
    let engine = state.engine().await?;
    let threshold = engine.archive_threshold().await?;
    let notes = engine
        .archive_candidates(Some(threshold), limit.clamp(1, 500) as usize)
        .await?
        .into_iter()
        .map(|c| FadingNoteDto {
            id: c.id.to_string(),
            preview: preview(&c.content, PREVIEW_CHARS),
            strength: c.strength,
            tier: c.tier,
            project: c.project,
            idle_days: c.idle_days,
        })
        .collect();
    Ok(FadingDto { threshold, notes })
}

/// A page of archived notes (kept, out of retrieval), most recently archived first.
#[tauri::command]
#[specta::specta]
pub async fn archived_notes(
    state: State<'_, AppState>,
    offset: u32,
    limit: u32,
) -> AppResult<NotesPage> {
    let engine = state.engine().await?;
    let (total, notes) = engine
        .archived_notes(limit.clamp(1, 500) as usize, offset as usize)
        .await?;
    Ok(NotesPage {
        total: clamp_u32(total),
        offset,
        notes: notes.into_iter().map(NoteDto::from).collect(),
    })
}

/// Archives a note: out of retrieval, kept with its links and history.
#[tauri::command]
#[specta::specta]
pub async fn archive_note(state: State<'_, AppState>, id: String) -> AppResult<NoteDto> {
    let engine = state.engine().await?;
    Ok(engine.archive(&note_id(&id)?, ACTOR).await?.into())
}

/// Brings an archived note back into the memory and its indexes.
#[tauri::command]
#[specta::specta]
pub async fn restore_note(state: State<'_, AppState>, id: String) -> AppResult<NoteDto> {
    let engine = state.engine().await?;
    Ok(engine.restore_archived(&note_id(&id)?, ACTOR).await?.into())
}

/// Keeps a fading note (reinforces it; its history records the keep); returns its new
/// strength.
#[tauri::command]
#[specta::specta]
pub async fn keep_note(state: State<'_, AppState>, id: String) -> AppResult<f64> {
    let engine = state.engine().await?;
    Ok(engine.keep(&note_id(&id)?, ACTOR).await?)
}

/// Sets how fast a note fades: `long_term`, `short_term`, or `project` with the project's
/// name (a new project starts open).
#[tauri::command]
#[specta::specta]
pub async fn set_note_tier(
    state: State<'_, AppState>,
    id: String,
    tier: Tier,
    project: Option<String>,
) -> AppResult<LifecycleDto> {
    let engine = state.engine().await?;
    let nid = note_id(&id)?;
    engine.set_tier(&nid, tier, project.as_deref()).await?;
    Ok(engine.lifecycle_of(&nid).await?.into())
}

/// A project: while it is open its notes do not fade.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ProjectDto {
    pub name: String,
    pub active: bool,
}

/// The projects notes belong to, open or closed.
#[tauri::command]
#[specta::specta]
pub async fn list_projects(state: State<'_, AppState>) -> AppResult<Vec<ProjectDto>> {
    let engine = state.engine().await?;
    Ok(engine
        .projects()
        .await?
        .into_iter()
        .map(|p| ProjectDto {
            name: p.name,
            active: p.active,
        })
        .collect())
}

/// Opens or closes a project: the notes of a closed project start to fade.
#[tauri::command]
#[specta::specta]
pub async fn set_project_open(
    state: State<'_, AppState>,
    name: String,
    open: bool,
) -> AppResult<()> {
    Ok(state
        .engine()
        .await?
        .set_project_active(&name, open)
        .await?)
}
