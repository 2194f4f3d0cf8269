//! Boxes (clusters of linked notes) as the UI shows them: the engine's Boxes as last
//! computed; the enrichment worker recomputes them after a pass that changed links.

use std::collections::HashMap;

use kasten_core::NoteId;
use kasten_engine::Engine;

use crate::dto::{BoxDto, Membership, clamp_u32};
use crate::error::{AppError, AppResult};

pub async fn membership(engine: &Engine) -> AppResult<Membership> {
    let mut m: Membership = HashMap::new();
    for b in engine.boxes().await? {
        let id = b.id.to_string();
        for n in b.members {
            m.entry(n.to_string()).or_default().push(id.clone());
        }
    }
    Ok(m)
}

/// Boxes largest first, with their sizes (members travel with the graph's nodes).
pub async fn list(engine: &Engine, limit: usize) -> AppResult<Vec<BoxDto>> {
    Ok(engine
        .boxes()
        .await?
        .into_iter()
        .take(limit)
        .map(|b| BoxDto {
            id: b.id.to_string(),
            label: b.label,
            size: clamp_u32(b.members.len() as u64),
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
