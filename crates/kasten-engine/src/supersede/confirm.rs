//! The LLM's word on the pairs the rule leaves open. When a note is enriched, each older
//! note it has a live `contradicts` link with (either way; made by merge on write: the notes
//! read alike but state other facts) or that the LLM's link step just linked as
//! `contradicts` is shown to the LLM in use with the note, and asked whether the newer one
//! replaces the older ([`kasten_core::prompts::replaces`]). A yes whose two values come from the notes becomes
//! a `supersedes` link created by `llm`, a proposal in Review whatever the links policy (the
//! models measured say "updated" of pairs that both stay true: the user decides; accepting
//! it raises its "may be outdated" flags as any accepted supersession does), never again
//! for a pair kept as "both stay true" or already linked by a supersession of any status.
//!
//! The questions are asked before the enrichment's transaction (their tokens and calls are
//! the enrichment event's), the proposals written after it in their own, under the engine's
//! filing lock: a crash in between loses the proposals, not a write, and an enrichment
//! retried asks again. The setting `merge.supersede_llm` (with `merge.supersede`, and the
//! link step on) turns it on; an answer the LLM cannot give is logged and the enrichment
//! stands.

use chrono::Utc;
use kasten_core::prompts::{self, Replacement};
use kasten_core::text::Tokenizer;
use kasten_core::{Actor, LinkKind, Note, NoteId, NoteStatus};
use kasten_llm::{LlmClient, Usage};
use kasten_store::{DifferWrite, SUPERSEDES};

use super::same_pair;
use crate::{Engine, EngineError};

/// Pairs asked about per enriched note (each is one LLM call).
const MAX_ASKED: usize = 2;
/// Confidence of a supersession the LLM confirmed (the rule's are 1.0).
const LLM_CONFIDENCE: f64 = 0.8;

/// What the questions about one note's pairs found, and what they cost.
#[derive(Default)]
pub(crate) struct Asked {
    /// Supersessions to file once the enrichment is committed.
    pub(crate) found: Vec<DifferWrite>,
    pub(crate) usage: Usage,
    pub(crate) calls: u32,
}

impl Engine {
    /// Asks the LLM about the older notes `note` contradicts: those it has a live
    /// `contradicts` link with, and `proposed` (the link step's `contradicts` targets, not
    /// written yet); see the module docs. Asked before the enrichment's commit, so the
    /// questions' tokens and calls are the enrichment's; filed after it
    /// ([`Engine::file_replacements`]).
    pub(crate) async fn ask_about_replacements(
        &self,
        note: &Note,
        proposed: &[NoteId],
        llm: &LlmClient,
    ) -> Result<Asked, EngineError> {
        let mut asked = Asked::default();
        let opts = self.merge_options().await?;
        if !(opts.supersede && opts.supersede_llm && self.pipeline.steps.links) {
            return Ok(asked);
        }
        let mut others: Vec<NoteId> = Vec::new();
        for l in self.store.links_of(&note.id).await? {
            if l.kind != LinkKind::Contradicts || !l.status.is_live() {
                continue;
            }
            let other = if l.from == note.id { l.to } else { l.from };
            others.push(other);
        }
        others.extend(proposed.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        others.retain(|o| *o != note.id && seen.insert(o.clone()));
        if others.is_empty() {
            return Ok(asked);
        }
        // a pair a supersession of any status already joins (the rule's, or one the user
        // rejected) is not asked about
        let linked = self.supersedes_between(&note.id, &others).await?;
        others.retain(|o| !linked.contains(o));
        let olders: Vec<Note> = self
            .store
            .get_notes(&others)
            .await?
            .into_iter()
            .filter(|n| n.status == NoteStatus::Active)
            .collect();
        let tokenizer = Tokenizer::default();
        // asked when the newer note is enriched: the older one's enrichment would ask the
        // same question again
        let pairs = olders
            .iter()
            .filter(|o| newer_and_older(note, o).is_some_and(|(n, _)| n.id == note.id))
            .take(MAX_ASKED);
        for older in pairs {
            let Some(r) = self
                .ask_replaces(llm, note, older, &mut asked)
                .await?
                .filter(|r| r.grounded_in(&tokenizer, &older.content, &note.content))
            else {
                continue;
            };
            asked.found.push(DifferWrite {
                from: note.id.clone(),
                to: older.id.clone(),
                kind: SUPERSEDES.into(),
                reason: r.reason(),
                confidence: LLM_CONFIDENCE,
                // the LLM's judgement, always for the user to confirm
                accepted: false,
                at: Utc::now(),
                by: Actor::Llm,
            });
        }
        Ok(asked)
    }

    /// Files what [`Engine::ask_about_replacements`] found, as proposals, less the pairs
    /// kept as "both stay true" or filed meanwhile; returns how many.
    pub(crate) async fn file_replacements(
        &self,
        found: Vec<DifferWrite>,
    ) -> Result<usize, EngineError> {
        let found = self.without_kept_both(found).await?;
        if found.is_empty() {
            return Ok(0);
        }
        // a consolidation may have filed a pair while the LLM answered
        let _filing = self.filing.lock().await;
        let ends: Vec<NoteId> = found
            .iter()
            .flat_map(|d| [d.from.clone(), d.to.clone()])
            .collect();
        let linked = self.store.supersedes_pairs_of(&ends).await?;
        let kept: Vec<DifferWrite> = found
            .into_iter()
            .filter(|d| {
                !linked
                    .iter()
                    .any(|(a, b, _)| same_pair(a, b, &d.from, &d.to))
            })
            .collect();
        if !kept.is_empty() {
            // proposals only: no flag and no link of the indexes until one is accepted
            self.store.insert_notes_with(&[], &[], &kept).await?;
        }
        Ok(kept.len())
    }

    /// Those of `others` that a `supersedes` link of any status joins to `note`, either way.
    async fn supersedes_between(
        &self,
        note: &NoteId,
        others: &[NoteId],
    ) -> Result<Vec<NoteId>, EngineError> {
        let mut ends = others.to_vec();
        ends.push(note.clone());
        let linked = self.store.supersedes_pairs_of(&ends).await?;
        Ok(others
            .iter()
            .filter(|o| linked.iter().any(|(a, b, _)| same_pair(a, b, note, o)))
            .cloned()
            .collect())
    }

    /// One question to the LLM, its cost added to `asked`; `None` for "both stay true"
    /// (or an update that names no change), or when the LLM could not answer.
    async fn ask_replaces(
        &self,
        llm: &LlmClient,
        newer: &Note,
        older: &Note,
        asked: &mut Asked,
    ) -> Result<Option<Replacement>, EngineError> {
        let day = |n: &Note| super::valid_from(n).format("%Y-%m-%d").to_string();
        let p = prompts::replaces(&older.content, &day(older), &newer.content, &day(newer));
        let validate = |v: &serde_json::Value| prompts::parse_replacement(v).map(|_| ());
        let answer = self
            .unless_closing(llm.structured(&crate::pipeline::request(&p), &validate))
            .await?;
        let resp = match answer {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(newer = %newer.id, older = %older.id, "the LLM could not say whether one note replaces the other: {e}");
                return Ok(None);
            }
        };
        asked.usage.add(&resp.usage);
        asked.calls += resp.attempts;
        tracing::debug!(newer = %newer.id, older = %older.id, answer = %resp.value, "replaces");
        Ok(prompts::parse_replacement(&resp.value).unwrap_or(None))
    }

    /// Both steps for a note already enriched (tests).
    #[cfg(test)]
    pub(crate) async fn confirm_replacements(
        &self,
        note: &NoteId,
        llm: &LlmClient,
    ) -> Result<usize, EngineError> {
        let Some(n) = self.store.get_note(note).await? else {
            return Ok(0);
        };
        let asked = self.ask_about_replacements(&n, &[], llm).await?;
        self.file_replacements(asked.found).await
    }
}

/// The newer and the older of two notes by when their facts took effect (`valid_from`),
/// then by time; `None` when both took effect at once (neither can replace the other).
fn newer_and_older<'a>(a: &'a Note, b: &'a Note) -> Option<(&'a Note, &'a Note)> {
    let key = |n: &Note| (super::valid_from(n), n.created_at);
    match key(a).cmp(&key(b)) {
        std::cmp::Ordering::Greater => Some((a, b)),
        std::cmp::Ordering::Less => Some((b, a)),
        std::cmp::Ordering::Equal => None,
    }
}

#[cfg(test)]
mod tests {
    use kasten_core::{Actor, LinkStatus, NewNote};
    use kasten_fakellm::{FakeLlm, Mode};
    use serde_json::json;

    use super::*;
    use crate::{MergeOptions, Policy, PolicyMode};

    const OLD: &str = "The team captain is Anna Virtanen.";
    const NEW: &str = "Mikko Laine took over from Anna as the one who leads the team.";

    /// The fake answers the question with `answer` (other requests by its rules).
    fn answering(fake: &FakeLlm, answer: serde_json::Value) {
        let text = answer.to_string();
        fake.set_responder(move |view| {
            (view.schema_name.as_deref() == Some("replaces")).then(|| text.clone())
        });
    }

    fn yes() -> serde_json::Value {
        json!({"answer": "updated", "attribute": "team captain",
               "value_before": "Anna Virtanen", "value_now": "Mikko Laine"})
    }

    fn asked(fake: &FakeLlm) -> Vec<String> {
        fake.requests()
            .iter()
            .map(|r| r.body.to_string())
            .filter(|b| b.contains("\"replaces\""))
            .collect()
    }

    /// Two enriched-then-linked notes: the older enriched, the newer written, a
    /// `contradicts` link from the newer to the older (as merge on write or the link step
    /// makes one), then the newer enriched.
    async fn pair(e: &Engine, mode: PolicyMode) -> (NoteId, NoteId) {
        e.set_policy(&Policy {
            links: mode,
            edits: PolicyMode::Auto,
            auto_accept_confidence: None,
        })
        .await
        .unwrap();
        let day = |d: &str| Some(format!("{d}T09:00:00Z").parse().unwrap());
        let old = e
            .add(NewNote::new(OLD).unwrap().at(day("2026-03-01")))
            .await
            .unwrap()
            .id;
        e.enrich_note(&old).await.unwrap();
        let new = e
            .add(NewNote::new(NEW).unwrap().at(day("2026-09-01")))
            .await
            .unwrap()
            .id;
        e.link(&new, &old, Some("contradicts"), "another captain", "user")
            .await
            .unwrap();
        e.enrich_note(&new).await.unwrap();
        (old, new)
    }

    fn supersedes(e: &[kasten_core::Link]) -> Vec<&kasten_core::Link> {
        e.iter()
            .filter(|l| l.kind == LinkKind::Supersedes)
            .collect()
    }

    #[tokio::test]
    async fn the_llm_s_yes_is_a_supersession_proposed_in_review_with_what_changed() {
        let fake = FakeLlm::start(Mode::Normal).await.unwrap();
        answering(&fake, yes());
        let e = crate::tests::engine_with_fake(&fake, 1).await;
        let (old, new) = pair(&e, PolicyMode::Review).await;
        let q = asked(&fake);
        assert_eq!(q.len(), 1, "one question for the one pair");
        let (o, n) = (
            q[0].find("Anna Virtanen").unwrap(),
            q[0].find("Mikko").unwrap(),
        );
        assert!(o < n, "the older note is shown first: {}", q[0]);
        assert!(q[0].contains("2026-03-01") && q[0].contains("2026-09-01"));
        let links = e.get(&new).await.unwrap().links;
        let s = supersedes(&links);
        assert_eq!(s.len(), 1, "{links:?}");
        assert_eq!((&s[0].from, &s[0].to), (&new, &old));
        assert_eq!(s[0].status, LinkStatus::Proposed);
        assert_eq!(s[0].created_by, Actor::Llm);
        assert_eq!(s[0].reason, "team captain: Anna Virtanen → Mikko Laine");
        // a proposal replaces nothing yet
        assert!(e.get(&old).await.unwrap().valid_until.is_none());
        // asked again, the pair is not asked about: it has its supersession
        let llm = e.llm.clone().unwrap();
        assert_eq!(e.confirm_replacements(&new, &llm).await.unwrap(), 0);
        assert_eq!(asked(&fake).len(), 1);
        e.close().await;
    }

    #[tokio::test]
    async fn under_auto_too_it_is_a_proposal_and_accepting_it_replaces_the_older_note() {
        let fake = FakeLlm::start(Mode::Normal).await.unwrap();
        answering(&fake, yes());
        let e = crate::tests::engine_with_fake(&fake, 1).await;
        let (old, new) = pair(&e, PolicyMode::Auto).await;
        assert!(e.get(&old).await.unwrap().valid_until.is_none());
        let item = e
            .proposals(&[crate::ReviewStatus::Proposed], 100)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.label == "supersedes")
            .expect("a supersession proposal");
        assert_eq!(
            (item.note.as_str(), item.target.as_deref()),
            (new.as_str(), Some(old.as_str()))
        );
        e.accept(&item.id, &Default::default(), "user")
            .await
            .unwrap();
        let d = e.get(&old).await.unwrap();
        assert_eq!(d.superseded_by.as_ref().map(|s| &s.id), Some(&new), "{d:?}");
        assert_eq!(
            d.valid_until.map(|t| t.to_rfc3339()),
            Some("2026-09-01T09:00:00+00:00".to_owned())
        );
        e.close().await;
    }

    #[tokio::test]
    async fn a_no_made_up_values_a_failed_answer_or_the_setting_off_files_nothing() {
        for case in ["no", "made up", "wrong way round", "malformed", "off"] {
            let fake = FakeLlm::start(Mode::Normal).await.unwrap();
            match case {
                "made up" => answering(
                    &fake,
                    json!({"answer": "updated", "attribute": "price",
                           "value_before": "1,200 euros", "value_now": "1,300 euros"}),
                ),
                "wrong way round" => answering(
                    &fake,
                    json!({"answer": "updated", "attribute": "team captain",
                           "value_before": "Mikko Laine", "value_now": "Anna Virtanen"}),
                ),
                "no" => answering(
                    &fake,
                    json!({"answer": "both_true", "attribute": "", "value_before": "", "value_now": ""}),
                ),
                "malformed" => answering(&fake, json!({"answer": "perhaps"})),
                _ => answering(&fake, yes()),
            }
            let e = crate::tests::engine_with_fake(&fake, 1).await;
            if case == "off" {
                e.set_merge_options(&MergeOptions {
                    supersede_llm: false,
                    ..MergeOptions::default()
                })
                .await
                .unwrap();
            }
            let (old, new) = pair(&e, PolicyMode::Auto).await;
            assert!(
                supersedes(&e.get(&new).await.unwrap().links).is_empty(),
                "{case}"
            );
            assert!(e.get(&old).await.unwrap().valid_until.is_none(), "{case}");
            // the enrichment itself stands
            assert_eq!(
                e.get(&new).await.unwrap().note.enrich_state,
                kasten_core::EnrichState::Done,
                "{case}"
            );
            assert_eq!(asked(&fake).is_empty(), case == "off", "{case}");
            e.close().await;
        }
    }
}
