//! The lifecycle as a person sees it: a note's strength against the archive threshold, the
//! notes fading below it, and those archived (kept, out of retrieval, restorable).

use chrono::Utc;
use kasten_core::lifecycle::{Reinforce, Tier};
use kasten_core::{Note, NoteId, NoteStatus};
use serde::Serialize;

use crate::{Engine, EngineError};

/// Where a note stands in its lifecycle.
#[derive(Debug, Clone, Serialize)]
pub struct Lifecycle {
    /// Current strength, 0–1.
    pub strength: f64,
    pub tier: Tier,
    pub project: Option<String>,
    /// The archive threshold in force.
    pub threshold: f64,
    /// Below the threshold: an archive candidate.
    pub fading: bool,
    pub archived: bool,
}

impl Engine {
    /// A note's strength now, its tier and whether it is fading.
    pub async fn lifecycle_of(&self, id: &NoteId) -> Result<Lifecycle, EngineError> {
        let note = self.current(id).await?;
        let strength = self
            .strength_now(std::slice::from_ref(id))
            .await?
            .get(id)
            .copied()
            .unwrap_or(note.strength);
        let threshold = self.archive_threshold().await?;
        let archived = note.status == NoteStatus::Archived;
        Ok(Lifecycle {
            strength,
            tier: note.tier,
            project: note.project.clone(),
            threshold,
            fading: !archived && strength < threshold,
            archived,
        })
    }

    /// Keeps a fading note: reinforced as if it had been cited, so it moves back towards
    /// full strength and fades more slowly afterwards; its history records who kept it (a
    /// `keep` entry). Returns its new strength.
    pub async fn keep(&self, id: &NoteId, actor: &str) -> Result<f64, EngineError> {
        let note = self.current(id).await?;
        if note.status != NoteStatus::Active {
            return Err(EngineError::Invalid(kasten_core::CoreError::Invalid(
                format!("note {id} is {}; restore it instead", note.status.as_str()),
            )));
        }
        let now = Utc::now();
        let row = self
            .store
            .strength_of(std::slice::from_ref(id))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::NotFound(id.clone()))?;
        let kept = row.state.reinforced(Reinforce::Cited, now);
        self.store.keep(id, kept.strength, now, actor).await?;
        Ok(self.lifecycle_of(id).await?.strength)
    }

    /// One page of the archived notes, most recently archived first, with their number.
    pub async fn archived_notes(
        &self,
        limit: usize,
        offset: usize,
    ) -> Result<(u64, Vec<Note>), EngineError> {
        Ok(self.store.archived_notes(limit, offset).await?)
    }
}

#[cfg(test)]
mod tests {
    use kasten_core::{Action, Actor, NewNote};
    use kasten_store::Endpoint;

    use crate::tests::HashEmbedder;
    use crate::{Engine, EngineOptions};

    #[tokio::test]
    async fn a_fading_note_is_kept_or_archived_and_restored() {
        let e = Engine::open_with(
            &Endpoint::Mem,
            HashEmbedder::arc("h", 64, 7),
            EngineOptions::default(),
            &|_| {},
        )
        .await
        .unwrap();
        let n = e
            .add(NewNote::new("a passing thought").unwrap())
            .await
            .unwrap();
        let l = e.lifecycle_of(&n.id).await.unwrap();
        assert!(l.strength > 0.99 && !l.fading && !l.archived, "{l:?}");

        // every note is below a threshold of 1 the moment it starts to decay
        e.store
            .set_setting(
                "lifecycle",
                &serde_json::json!({ "archive_threshold": 1.0 }),
            )
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let l = e.lifecycle_of(&n.id).await.unwrap();
        assert!(l.fading && l.threshold == 1.0, "{l:?}");
        let before = e.store.get_note(&n.id).await.unwrap().unwrap().access_count;
        let kept = e.keep(&n.id, "user").await.unwrap();
        assert!(kept > 0.99, "{kept}");
        let after = e.store.get_note(&n.id).await.unwrap().unwrap().access_count;
        assert_eq!(after, before + 1, "reinforced");
        // the history says who kept it
        let history = e.history(&n.id).await.unwrap();
        assert!(
            history
                .iter()
                .any(|h| h.action == Action::Keep && h.actor == Actor::User),
            "{history:?}"
        );

        e.archive(&n.id, "user").await.unwrap();
        let (total, archived) = e.archived_notes(10, 0).await.unwrap();
        assert_eq!((total, archived[0].id.clone()), (1, n.id.clone()));
        let l = e.lifecycle_of(&n.id).await.unwrap();
        assert!(l.archived && !l.fading);
        assert!(
            e.keep(&n.id, "user")
                .await
                .unwrap_err()
                .to_string()
                .contains("restore")
        );
        e.restore_archived(&n.id, "user").await.unwrap();
        assert_eq!(e.archived_notes(10, 0).await.unwrap().0, 0);
        e.close().await;
    }
}
