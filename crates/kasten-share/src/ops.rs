//! The operations a memory offers to every shell, defined once: [`MemoryOps`], implemented
//! by the engine in this process and by a [`Client`](crate::Client) of the process that has
//! the memory open. The owner's RPC handler delegates to the engine's implementation, so the
//! limits below apply the same way here and through a connection.
//!
//! Adding an operation: a method here, its implementation for [`Engine`] (below) and for
//! the client (`client.rs`), and its line in the service and the handler (`wire.rs`,
//! `owner.rs`). A shell then calls it on a [`Memory`](crate::Memory) without knowing
//! where the engine runs.

use async_trait::async_trait;
use kasten_core::validity::NaiveDate;
use kasten_core::{NewNote, Note, NoteId};
use kasten_engine::{
    AddedBatch, Answer, AskOptions, ConsolidateOptions, ConsolidateProgress, ConsolidateSummary,
    Engine, HistoryEntry, ListCounts, NoteDetail, ReviewItem, ReviewOutcome, ReviewStatus,
    SearchOutput,
};

use crate::ReviewChange;
use crate::error::ShareError;

/// Largest batch of notes, `k` or `limit` one call takes (the CLI and MCP ask for far less;
/// a client's mistake cannot make the owner build an answer of any size).
pub const MAX_RESULTS: usize = 10_000;

/// Who links made through [`MemoryOps::link`] are attributed to.
pub const AGENT: &str = kasten_core::Actor::Agent.as_str();

/// What sees an answer's text as it is written.
pub type OnToken<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// What is told where a consolidation run is.
pub type OnProgress<'a> = dyn Fn(&ConsolidateProgress) + Send + Sync + 'a;

/// What every shell (the CLI, `kasten mcp`, the app) can do with a memory, wherever its
/// engine runs.
#[async_trait]
pub trait MemoryOps: Send + Sync {
    /// Saves notes, merging near-duplicates (`Engine::add_batch_merging`).
    async fn add(&self, notes: Vec<NewNote>) -> Result<AddedBatch, ShareError>;

    /// Links two notes as an agent (`created_by: agent`, accepted, in both notes'
    /// history; the user removes it with a rollback). Returns the link's id.
    async fn link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
    ) -> Result<String, ShareError>;

    /// Links two notes as the agent `actor` (`agent:<name>`): accepted, or a proposal
    /// waiting in Review when `propose` is set or the memory reviews links
    /// (`Engine::agent_link`).
    #[allow(clippy::too_many_arguments)] // the link, its maker and whether it is a proposal
    async fn agent_link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
        actor: &str,
        propose: bool,
    ) -> Result<ReviewOutcome, ShareError>;

    /// Hybrid search as of a day: what was current then (`Engine::search_as_of`); `None`
    /// is today.
    async fn search_as_of(
        &self,
        query: &str,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, ShareError>;

    /// Hybrid search of what is current today.
    async fn search(&self, query: &str, k: usize) -> Result<SearchOutput, ShareError> {
        self.search_as_of(query, k, None).await
    }

    /// A note with its links, opened (reinforced, `Engine::open_note`).
    async fn get(&self, id: &NoteId) -> Result<NoteDetail, ShareError>;

    /// Notes, newest first.
    async fn list(&self, limit: usize, offset: usize) -> Result<Vec<Note>, ShareError>;

    /// How many notes `list` can show, and how many were merged away.
    async fn list_counts(&self) -> Result<ListCounts, ShareError>;

    /// The notes `list` shows that had taken effect by the end of `day`
    /// (`Engine::list_as_of`): how many, and a page of them, newest first.
    async fn list_as_of(
        &self,
        limit: usize,
        offset: usize,
        day: NaiveDate,
    ) -> Result<(u64, Vec<Note>), ShareError>;

    /// An answer with citations, from the LLM of the process that has the memory open.
    /// In that process `on_token` sees the answer as it is written; through a connection
    /// it sees the whole answer at once.
    async fn ask(
        &self,
        question: &str,
        options: &AskOptions,
        on_token: &OnToken<'_>,
    ) -> Result<Answer, ShareError>;

    /// The review queue, of one maker or all (`Engine::proposals_by`).
    async fn proposals(
        &self,
        statuses: &[ReviewStatus],
        by: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ReviewItem>, ShareError>;

    /// Reviews a proposal or changes a note by hand, as `actor`.
    async fn review(&self, change: ReviewChange, actor: &str) -> Result<ReviewOutcome, ShareError>;

    /// A note's history, newest first.
    async fn history(&self, id: &NoteId) -> Result<Vec<HistoryEntry>, ShareError>;

    /// Deletes a note (and its links).
    async fn delete(&self, id: &NoteId) -> Result<(), ShareError>;

    /// Files the supersessions among notes never compared on write as proposals, resuming
    /// an unfinished run (`Engine::consolidate`); `progress` is told as it goes.
    async fn consolidate(
        &self,
        options: &ConsolidateOptions,
        progress: &OnProgress<'_>,
    ) -> Result<ConsolidateSummary, ShareError>;
}

/// Refuses a count above [`MAX_RESULTS`].
fn at_most(what: &'static str, n: usize) -> Result<(), ShareError> {
    if n > MAX_RESULTS {
        return Err(ShareError::Invalid(format!(
            "at most {MAX_RESULTS} {what} per request (not {n})"
        )));
    }
    Ok(())
}

/// The memory in this process: the engine itself, with the limits every shell gets.
#[async_trait]
impl MemoryOps for Engine {
    async fn add(&self, notes: Vec<NewNote>) -> Result<AddedBatch, ShareError> {
        at_most("notes", notes.len())?;
        Ok(self.add_batch_merging(notes).await?)
    }

    async fn link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
    ) -> Result<String, ShareError> {
        Ok(Engine::link(self, from, to, kind, reason, AGENT)
            .await?
            .target)
    }

    async fn agent_link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
        actor: &str,
        propose: bool,
    ) -> Result<ReviewOutcome, ShareError> {
        Ok(Engine::agent_link(self, from, to, kind, reason, actor, propose).await?)
    }

    async fn search_as_of(
        &self,
        query: &str,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, ShareError> {
        at_most("results", k)?;
        Ok(Engine::search_as_of(self, query, k.max(1), as_of).await?)
    }

    async fn get(&self, id: &NoteId) -> Result<NoteDetail, ShareError> {
        Ok(self.open_note(id).await?)
    }

    async fn list(&self, limit: usize, offset: usize) -> Result<Vec<Note>, ShareError> {
        at_most("notes", limit)?;
        Ok(Engine::list(self, limit, offset).await?)
    }

    async fn list_counts(&self) -> Result<ListCounts, ShareError> {
        Ok(Engine::list_counts(self).await?)
    }

    async fn list_as_of(
        &self,
        limit: usize,
        offset: usize,
        day: NaiveDate,
    ) -> Result<(u64, Vec<Note>), ShareError> {
        at_most("notes", limit)?;
        Ok(Engine::list_as_of(self, limit, offset, day).await?)
    }

    async fn ask(
        &self,
        question: &str,
        options: &AskOptions,
        on_token: &OnToken<'_>,
    ) -> Result<Answer, ShareError> {
        at_most("notes", options.k)?;
        Ok(self.ask_with(question, &[], options, on_token).await?)
    }

    async fn proposals(
        &self,
        statuses: &[ReviewStatus],
        by: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ReviewItem>, ShareError> {
        at_most("proposals", limit)?;
        Ok(self.proposals_by(statuses, by, limit).await?)
    }

    async fn review(&self, change: ReviewChange, actor: &str) -> Result<ReviewOutcome, ShareError> {
        Ok(change.apply(self, actor).await?)
    }

    async fn history(&self, id: &NoteId) -> Result<Vec<HistoryEntry>, ShareError> {
        Ok(Engine::history(self, id).await?)
    }

    async fn delete(&self, id: &NoteId) -> Result<(), ShareError> {
        Ok(Engine::delete(self, id).await?)
    }

    async fn consolidate(
        &self,
        options: &ConsolidateOptions,
        progress: &OnProgress<'_>,
    ) -> Result<ConsolidateSummary, ShareError> {
        Ok(Engine::consolidate(self, options, progress).await?)
    }
}
