//! Boxes (clusters of linked notes) as the UI shows them: the engine's Boxes as last
//! computed; the enrichment worker recomputes them after a pass that changed links.

use kasten_core::NoteId;
use kasten_engine::Engine;

use crate::dto::{BoxDto, clamp_u32};
use crate::error::{AppError, AppResult};

/// Boxes largest first, `members` capped at `max_members` per Box.
pub async fn list(engine: &Engine, limit: usize, max_members: usize) -> AppResult<Vec<BoxDto>> {
    Ok(engine
        .boxes()
        .await?
        .into_iter()
        .take(limit)
        .map(|b| BoxDto {
            id: b.id.to_string(),
            label: b.label,
            size: clamp_u32(b.members.len() as u64),
            members: b
                .members
                .iter()
                .take(max_members)
                .map(ToString::to_string)
                .collect(),
        })
        .collect())
}

/// The members of one Box.
pub async fn members(engine: &Engine, id: &str) -> AppResult<Vec<NoteId>> {
    engine
        .boxes()
        .await?
        .into_iter()
        .find(|b| b.id.to_string() == id)
        .map(|b| b.members)
        .ok_or_else(|| AppError::NotFound(format!("there is no Box {id}")))
}
