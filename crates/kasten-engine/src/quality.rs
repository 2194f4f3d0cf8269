//! The quality check ([`kasten_core::quality::check`]) over the notes of this memory that
//! an LLM enriched, with the links the LLM made from them and the reasons of its
//! evolutions of them.

use std::collections::HashMap;

use kasten_core::note::EnrichState;
use kasten_core::quality::{CheckedEvolution, CheckedNote, QualityReport, check};
use kasten_core::{Action, Actor, ReviewKind};

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
        // each evolution (reason, operations, event) by the note it changes
        let mut evolutions: HashMap<String, Vec<(String, usize, Option<String>)>> = HashMap::new();
        let all = [
            ReviewStatus::Proposed,
            ReviewStatus::Applied,
            ReviewStatus::Accepted,
            ReviewStatus::Rejected,
            ReviewStatus::RolledBack,
        ];
        for e in self.proposals(&all, limit.saturating_mul(5)).await? {
            if e.kind != ReviewKind::Edit || e.label != Action::Evolution.as_str() {
                continue;
            }
            evolutions.entry(e.note.clone()).or_default().push((
                e.reason.clone(),
                e.changes.len().max(1),
                e.event.clone(),
            ));
            // each change's own reason; an older revision has only the edit's
            let reasons = edit_reasons.entry(e.note).or_default();
            if e.changes.is_empty() {
                reasons.push(e.reason);
            } else {
                reasons.extend(e.changes.into_iter().map(|c| c.reason));
            }
        }
        // the new note behind each evolution: its enrichment event's note
        let wanted: std::collections::HashSet<&str> = evolutions
            .values()
            .flatten()
            .filter_map(|(_, _, ev)| ev.as_deref())
            .collect();
        let mut source_of_event: HashMap<String, String> = HashMap::new();
        if !wanted.is_empty() {
            for ev in self.events(limit.saturating_mul(5)).await? {
                if wanted.contains(ev.id.as_str()) {
                    source_of_event.insert(ev.id, ev.note);
                }
            }
        }
        let mut text_of: HashMap<String, String> = HashMap::new();
        for note in source_of_event.values() {
            if text_of.contains_key(note) {
                continue;
            }
            let Ok(id) = kasten_core::NoteId::parse(note) else {
                continue;
            };
            if let Ok(d) = self.get(&id).await {
                let n = &d.note;
                text_of.insert(
                    note.clone(),
                    format!("{} {} {}", n.content, n.context, n.keywords.join(" ")),
                );
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
                    .filter(|l| l.created_by == Actor::Llm && l.from == d.note.id)
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
                evolutions: evolutions
                    .get(d.note.id.as_str())
                    .map(|es| {
                        es.iter()
                            .map(|(reason, ops, ev)| CheckedEvolution {
                                reason,
                                ops: *ops,
                                by: ev
                                    .as_ref()
                                    .and_then(|ev| source_of_event.get(ev))
                                    .and_then(|n| text_of.get(n))
                                    .map(String::as_str),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        Ok(check(&checked))
    }
}
