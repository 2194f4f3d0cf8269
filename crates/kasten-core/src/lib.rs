//! Kasten's domain types and pure logic. No IO lives here (see ARCHITECTURE.md).
//!
//! - [`id`]: newtype ids.
//! - [`note`]: notes, links and their states.
//! - [`text`]: the tokenizer shared by full-text indexing and queries (CJK-aware).
//! - [`vector`]: the in-process vector index (int8 scan + f32 rescoring).
//! - [`boxes`]: Boxes — Louvain communities with overlap, stable ids, labels.
//! - [`chat`]: answering from memory: small talk, relevance, prompt, citations.
//! - [`bm25`]: the in-process BM25 full-text index.
//! - [`fusion`]: reciprocal-rank fusion of ranked lists, keeping provenance.
//! - [`timeline`]: notes by time and by position in their source stream.
//! - [`period`]: calendar periods named in a query, for date-aware ranking.
//! - [`relative`]: relative dates in a note ("last week") read against its day, for the
//!   answer prompt.
//! - [`search_terms`]: a question turned into search terms by the LLM (A-Mem's retrieval):
//!   the prompt, its schema, the parser.
//! - [`facts`]: the numbers and names of a text, so notes stating different facts are never
//!   merged.
//! - [`supersession`]: a newer note stating another value for the same subject and
//!   relation as an older one, found without an LLM.
//! - [`validity`]: when a note's fact became true (`valid_from`), as-of days.
//! - [`lifecycle`]: strength, decay, reinforcement, archive candidates.
//! - [`quality`]: what a usable annotation is: keyword candidates, tag choices, the
//!   sanitiser and the quality check over real model output.
//! - [`ranking`]: the default ranking: score fusion, date bonus, context.
//! - [`snapshot`]: the byte format the indexes are saved in, so a memory opens without
//!   rebuilding them.
//! - [`transfer`], [`markdown`]: import formats (chat transcripts, Markdown / Obsidian
//!   vaults) and the Markdown export.

pub mod bm25;
pub mod boxes;
pub mod chain;
pub mod chat;
pub mod error;
pub mod facts;
pub mod fusion;
pub mod id;
pub mod import;
pub mod lifecycle;
pub mod markdown;
pub mod note;
pub mod period;
pub mod prompts;
pub mod provenance;
pub mod quality;
pub mod ranking;
pub mod relative;
pub mod search_terms;
pub mod snapshot;
pub mod states;
pub mod supersession;
pub mod text;
pub mod timeline;
pub mod transfer;
pub mod validity;
pub mod vector;

pub use error::CoreError;
pub use fusion::{FusedHit, Via, ViaKind};
pub use id::{BoxId, JobId, NoteId};
pub use note::{EnrichState, Link, NewNote, Note, NoteStatus};
pub use states::{
    Action, ActionWord, Actor, Enrich, EventKind, JobKind, JobState, LinkKind, LinkKindWord,
    LinkStatus, ReviewKind, ReviewStatus, RevisionStatus,
};
