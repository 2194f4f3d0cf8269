//! "Both stay true": the user's answer to a supersession proposal whose two notes do not
//! conflict (two flats, two rents). The `supersedes` link is rejected — it leaves the queue
//! and changes nothing in force — and the audit entry that records the decision
//! ([`Action::BothTrue`], naming both notes) is what remembers the pair: detection
//! never proposes it again. Like a rejection, the decision is final (a rejected link is
//! never accepted again); the history of both notes shows it.

use std::collections::HashSet;

use kasten_core::{Action, NoteId};
use kasten_store::{DifferWrite, ReviewBatch, SUPERSEDES};

use crate::review::audit;
use crate::{Engine, EngineError, ReviewOutcome, ReviewStatus};

impl Engine {
    /// Settles a waiting `supersedes` link (proposed, or applied and not yet reviewed) as
    /// "both stay true": the link is rejected and the pair remembered, in one transaction.
    pub async fn keep_both(&self, id: &str, actor: &str) -> Result<ReviewOutcome, EngineError> {
        let Some(l) = self.store.link(id).await? else {
            return Err(EngineError::UnknownItem(id.to_owned()));
        };
        if l.kind != SUPERSEDES {
            return Err(invalid(format!(
                "link {id} is a '{}' link; only a supersession can be kept as both true (reject it instead)",
                l.kind
            )));
        }
        let status = ReviewStatus::of_link(l.status, l.reviewed);
        if !matches!(status, ReviewStatus::Proposed | ReviewStatus::Applied) {
            return Err(invalid(format!(
                "link {id} is {status:?}; only a waiting supersession can be kept as both true"
            )));
        }
        let (newer, older) = (NoteId::parse(&l.from)?, NoteId::parse(&l.to)?);
        self.commit_review(&ReviewBatch {
            link_status: vec![(l.id.clone(), kasten_core::LinkStatus::Rejected, true)],
            audit: vec![audit(
                Action::BothTrue,
                &l.id,
                &[&newer, &older],
                actor,
                &format!("both stay true, no conflict: {}", l.reason),
            )],
            ..ReviewBatch::default()
        })
        .await?;
        Ok(ReviewOutcome {
            action: Action::BothTrue,
            target: l.id.clone(),
            notes: vec![l.from, l.to],
            revisions: 0,
            links: 1,
        })
    }

    /// `found` less the pairs the user kept as "both stay true" (asked only when something
    /// was found, so a write without a supersession costs nothing more).
    pub(crate) async fn without_kept_both(
        &self,
        mut found: Vec<DifferWrite>,
    ) -> Result<Vec<DifferWrite>, EngineError> {
        if found.is_empty() {
            return Ok(found);
        }
        let ids: Vec<NoteId> = found
            .iter()
            .flat_map(|d| [d.from.clone(), d.to.clone()])
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let kept = self.kept_both(&ids).await?;
        if !kept.is_empty() {
            found.retain(|d| !kept.contains(&(d.from.clone(), d.to.clone())));
        }
        Ok(found)
    }

    /// The pairs among those touching `ids` that the user kept as "both stay true", each
    /// in both orders, so `contains(&(a, b))` answers for either direction.
    pub async fn kept_both(
        &self,
        ids: &[NoteId],
    ) -> Result<HashSet<(NoteId, NoteId)>, EngineError> {
        Ok(self
            .store
            .kept_both(ids)
            .await?
            .into_iter()
            .flat_map(|(a, b)| [(a.clone(), b.clone()), (b, a)])
            .collect())
    }
}

fn invalid(msg: String) -> EngineError {
    EngineError::Invalid(kasten_core::CoreError::Invalid(msg))
}
