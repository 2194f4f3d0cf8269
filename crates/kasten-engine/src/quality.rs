//! The quality check ([`kasten_core::quality::check`]) over the notes of this memory that
//! an LLM enriched, with the links the LLM made from them.

use kasten_core::note::EnrichState;
use kasten_core::quality::{CheckedNote, QualityReport, check};

use crate::{Engine, EngineError};

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
            })
            .collect();
        Ok(check(&checked))
    }
}
