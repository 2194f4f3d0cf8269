//! The quality check ([`kasten_core::quality::check`]) over the notes of this memory that
//! an LLM enriched, with the links the LLM made from them and the reasons of its
//! evolutions of them.

use std::collections::HashMap;

use kasten_core::note::EnrichState;
use kasten_core::quality::{CheckedNote, QualityReport, check};

use crate::{Engine, EngineError, ReviewStatus};

impl Engine {
    /// Checks every enriched note (newest first, at most `limit`).
    pub async fn quality_report(&self, limit: usize) -> Result<QualityReport, EngineError> {
        let mut details = Vec::new();
        let page = 200;
        let mut offset = 0;
        while details.len() < limit {
            let notes = self.list(page, offset).await?;
            if notes.is_empty() {
                break;
            }
            offset += notes.len();
            for n in notes {
                if n.enrich_state == EnrichState::Done && details.len() < limit {
                    details.push(self.get(&n.id).await?);
                }
            }
        }
        // the reasons of the LLM's evolutions, by the note they change (every status: a
        // rolled-back or rejected edit's reason was still the model's words)
        let mut edit_reasons: HashMap<String, Vec<String>> = HashMap::new();
        let all = [
            ReviewStatus::Proposed,
            ReviewStatus::Applied,
            ReviewStatus::Accepted,
            ReviewStatus::Rejected,
            ReviewStatus::RolledBack,
        ];
        for e in self.proposals(&all, limit.saturating_mul(5)).await? {
            if e.kind != "edit" || e.label != "evolution" {
                continue;
            }
            // each change's own reason; an older revision has only the edit's
            let reasons = edit_reasons.entry(e.note).or_default();
            if e.changes.is_empty() {
                reasons.push(e.reason);
            } else {
                reasons.extend(e.changes.into_iter().map(|c| c.reason));
            }
        }
        let checked: Vec<CheckedNote<'_>> = details
            .iter()
            .map(|d| CheckedNote {
                id: d.note.id.as_str(),
                content: &d.note.content,
                keywords: &d.note.keywords,
                tags: &d.note.tags,
                context: &d.note.context,
                link_reasons: d
                    .links
                    .iter()
                    .filter(|l| l.created_by == "llm" && l.from == d.note.id)
                    .map(|l| l.reason.as_str())
                    .collect(),
                edit_reasons: edit_reasons
                    .get(d.note.id.as_str())
                    .map(|r| {
                        r.iter()
                            .map(String::as_str)
                            .filter(|r| !r.is_empty())
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        Ok(check(&checked))
    }
}
