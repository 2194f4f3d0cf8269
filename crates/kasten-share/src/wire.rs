//! The service a memory's owner offers, in tarpc's terms: one call per [`MemoryOps`]
//! operation (`crate::ops`), the same arguments owned. Results are the engine's own serde
//! types.
//!
//! [`MemoryOps`]: crate::MemoryOps
// `agent_link` carries the link, the agent and its access: tarpc's generated client function
// then has eight arguments.
#![allow(clippy::too_many_arguments)]

use kasten_core::validity::NaiveDate;
use kasten_core::{NewNote, Note, NoteId};
use kasten_engine::{
    AddedBatch, Answer, AskOptions, ConsolidateOptions, ConsolidateSummary, HistoryEntry,
    ListCounts, NoteDetail, ReviewItem, ReviewOutcome, ReviewStatus, SearchOutput,
};

use crate::ReviewChange;
use crate::error::RemoteError;
use crate::handshake::OwnerInfo;

#[tarpc::service]
pub trait MemoryService {
    /// Who serves (for messages), and that the service answers.
    async fn hello() -> OwnerInfo;
    /// `Engine::add_batch_merging`.
    async fn add(notes: Vec<NewNote>) -> Result<AddedBatch, RemoteError>;
    /// What was current on a day (`None`: today).
    async fn search_as_of(
        query: String,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, RemoteError>;
    /// `Engine::get`.
    async fn get(id: NoteId) -> Result<NoteDetail, RemoteError>;
    /// `Engine::list`.
    async fn list(limit: usize, offset: usize) -> Result<Vec<Note>, RemoteError>;
    /// `Engine::list_counts`.
    async fn list_counts() -> Result<ListCounts, RemoteError>;
    /// `Engine::list_as_of`.
    async fn list_as_of(
        limit: usize,
        offset: usize,
        day: NaiveDate,
    ) -> Result<(u64, Vec<Note>), RemoteError>;
    /// `Engine::ask_with`, without history.
    async fn ask(question: String, options: AskOptions) -> Result<Answer, RemoteError>;
    /// `Engine::link` as an agent; the link's id.
    async fn link(
        from: NoteId,
        to: NoteId,
        kind: Option<String>,
        reason: String,
    ) -> Result<String, RemoteError>;
    /// `Engine::agent_link`: a link by the agent `actor`, a proposal when `propose` is set
    /// or the memory reviews links.
    async fn agent_link(
        from: NoteId,
        to: NoteId,
        kind: Option<String>,
        reason: String,
        actor: String,
        propose: bool,
    ) -> Result<ReviewOutcome, RemoteError>;
    /// `Engine::proposals_by`.
    async fn proposals(
        statuses: Vec<ReviewStatus>,
        by: Option<String>,
        limit: usize,
    ) -> Result<Vec<ReviewItem>, RemoteError>;
    /// A review or a change by hand ([`ReviewChange::apply`]), made by `actor`.
    async fn review(change: ReviewChange, actor: String) -> Result<ReviewOutcome, RemoteError>;
    /// `Engine::history`.
    async fn history(id: NoteId) -> Result<Vec<HistoryEntry>, RemoteError>;
    /// `Engine::delete`.
    async fn delete(id: NoteId) -> Result<(), RemoteError>;
    /// `Engine::consolidate`, a part at a time (the client sets `limit`).
    async fn consolidate(options: ConsolidateOptions) -> Result<ConsolidateSummary, RemoteError>;
}
