//! The state words queries name, bound as parameters: a query says `status = $link_accepted`
//! and binds [`words`], so each word is written only in its enum's `as_str` (kasten-core's
//! `states.rs`, `NoteStatus`, `Tier`). The schema's `ASSERT $value IN [...]` lists are the
//! exception: a migration's text is fixed once it has run.

use kasten_core::lifecycle::Tier;
use kasten_core::{
    Action, Actor, Enrich, EventKind, JobKind, JobState, LinkKind, LinkStatus, NoteStatus,
    RevisionStatus,
};
use surrealdb::types::SurrealValue;

/// Every state word a query may name, one parameter each.
#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct Words {
    link_proposed: String,
    link_accepted: String,
    link_rolled_back: String,
    rev_applied: String,
    rev_proposed: String,
    note_active: String,
    note_archived: String,
    note_merged: String,
    enrich_pending: String,
    enrich_done: String,
    job_queued: String,
    job_running: String,
    job_done: String,
    job_failed: String,
    job_enrich: String,
    event_enrich: String,
    event_merge: String,
    event_outdated: String,
    tier_long_term: String,
    by_llm: String,
    by_user: String,
    by_merge: String,
    by_import: String,
    by_agent: String,
    /// What starts a named agent's word (`agent:`).
    agent_prefix: String,
    same_entity: String,
    may_be_outdated: String,
    act_accept: String,
    act_keep: String,
    act_tier: String,
    act_unmerge: String,
    act_project_open: String,
    act_project_close: String,
    act_both_true: String,
    /// The reasons of the LLM's revisions, which a note's history shows as their action.
    act_construction: String,
    act_evolution: String,
}

/// The words, to bind to a query that names any of them.
pub(crate) fn words() -> Words {
    fn s(w: &str) -> String {
        w.to_owned()
    }
    Words {
        link_proposed: s(LinkStatus::Proposed.as_str()),
        link_accepted: s(LinkStatus::Accepted.as_str()),
        link_rolled_back: s(LinkStatus::RolledBack.as_str()),
        rev_applied: s(RevisionStatus::Applied.as_str()),
        rev_proposed: s(RevisionStatus::Proposed.as_str()),
        note_active: s(NoteStatus::Active.as_str()),
        note_archived: s(NoteStatus::Archived.as_str()),
        note_merged: s(NoteStatus::Merged.as_str()),
        enrich_pending: s(Enrich::Pending.as_str()),
        enrich_done: s(Enrich::Done.as_str()),
        job_queued: s(JobState::Queued.as_str()),
        job_running: s(JobState::Running.as_str()),
        job_done: s(JobState::Done.as_str()),
        job_failed: s(JobState::Failed.as_str()),
        job_enrich: s(JobKind::Enrich.as_str()),
        event_enrich: s(EventKind::Enrich.as_str()),
        event_merge: s(EventKind::Merge.as_str()),
        event_outdated: s(EventKind::Outdated.as_str()),
        tier_long_term: s(Tier::LongTerm.as_str()),
        by_llm: s(Actor::Llm.as_str()),
        by_user: s(Actor::User.as_str()),
        by_merge: s(Actor::Merge.as_str()),
        by_import: s(Actor::Import.as_str()),
        by_agent: s(Actor::Agent.as_str()),
        agent_prefix: s(Actor::AGENT_PREFIX),
        same_entity: s(LinkKind::SameEntity.as_str()),
        may_be_outdated: s(LinkKind::MayBeOutdated.as_str()),
        act_accept: s(Action::Accept.as_str()),
        act_keep: s(Action::Keep.as_str()),
        act_tier: s(Action::Tier.as_str()),
        act_unmerge: s(Action::Unmerge.as_str()),
        act_project_open: s(Action::ProjectOpen.as_str()),
        act_project_close: s(Action::ProjectClose.as_str()),
        act_both_true: s(Action::BothTrue.as_str()),
        act_construction: s(Action::Construction.as_str()),
        act_evolution: s(Action::Evolution.as_str()),
    }
}
