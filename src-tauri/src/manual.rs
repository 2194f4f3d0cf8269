//! IPC for what a person does by hand: link two notes (the `[[` autocomplete and the
//! detail's "add link"), remove a link, rewrite a note's text.

use kasten_core::{LinkKind, LinkKindWord};
use tauri::State;

use crate::dto::OutcomeDto;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Who the app acts as in the audit history.
const ACTOR: &str = kasten_core::Actor::User.as_str();

fn note_id(s: &str) -> AppResult<kasten_core::NoteId> {
    kasten_core::NoteId::parse(s).map_err(|_| AppError::NotFound(format!("there is no note {s}")))
}

/// The kinds a link may have (`relates` is the default).
#[tauri::command]
#[specta::specta]
pub async fn link_kinds() -> AppResult<Vec<LinkKindWord>> {
    Ok(kasten_engine::link_kinds()
        .iter()
        .filter_map(LinkKind::word)
        .collect())
}

/// Links `from -> to` by hand: accepted at once, in both notes' history, undone by rolling
/// the link back.
#[tauri::command]
#[specta::specta]
pub async fn link_notes(
    state: State<'_, AppState>,
    from: String,
    to: String,
    kind: Option<String>,
    reason: String,
) -> AppResult<OutcomeDto> {
    let engine = state.engine().await?;
    Ok(engine
        .link(
            &note_id(&from)?,
            &note_id(&to)?,
            kind.as_deref(),
            &reason,
            ACTOR,
        )
        .await?
        .into())
}

/// Removes the accepted links between two notes (only `kind` if given); re-applying the
/// link brings it back.
#[tauri::command]
#[specta::specta]
pub async fn unlink_notes(
    state: State<'_, AppState>,
    from: String,
    to: String,
    kind: Option<String>,
) -> AppResult<OutcomeDto> {
    let engine = state.engine().await?;
    Ok(engine
        .unlink(&note_id(&from)?, &note_id(&to)?, kind.as_deref(), ACTOR)
        .await?
        .into())
}

/// Rewrites a note's text (a versioned edit), re-indexes it and wakes the worker to enrich
/// it again.
#[tauri::command]
#[specta::specta]
pub async fn edit_content(
    state: State<'_, AppState>,
    id: String,
    content: String,
) -> AppResult<OutcomeDto> {
    let engine = state.engine().await?;
    let out = engine.edit_content(&note_id(&id)?, &content, ACTOR).await?;
    state.kick.notify_one();
    Ok(out.into())
}
