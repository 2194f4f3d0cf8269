//! One memory, many processes.
//!
//! An embedded memory (`surrealkv://DIR`) can be opened by one process at a time (SurrealKV
//! holds a lock on the folder). The process that opens it — the app, `kasten mcp`, a
//! `kasten` command — is its *owner* and serves it to the user's other Kasten processes
//! over a local socket in the memory's folder ([`Owner`]); they become its *clients*
//! ([`Client`]) instead of failing with "open in another process". Every read and write of a
//! client runs in the owner's engine: one index, one job queue, enrichment in the owner's
//! workers.
//!
//! - **Transport.** A Unix domain socket `DIR/kasten.sock` (mode 0600); on Windows the
//!   same protocol is meant to run over a named pipe (see [`owner`]; not built yet, so
//!   there an owner does not serve and other processes are told the memory is open
//!   elsewhere, as before). There is no TCP listener.
//! - **Who may connect.** The owner writes a random 32-byte token to `DIR/kasten.token`
//!   (mode 0600, so only the user reads it). A client sends it first; the owner compares
//!   it in constant time and also checks the peer's uid (`SO_PEERCRED`) against its own.
//!   Anything else is closed without an answer. The client checks the listener the same
//!   way before it sends the token: a socket served by another uid is refused.
//! - **Protocol.** [tarpc](https://docs.rs/tarpc) over the socket: length-delimited
//!   frames (at most [`MAX_FRAME`]) of JSON. The wire types are the engine's own serde
//!   types (`NewNote`, `AddedBatch`, `SearchOutput`, `NoteDetail`, `Answer`, …); errors
//!   travel as [`RemoteError`]: the engine's sentence, word for word, and its kind.
//! - **Robustness.** Every connection is its own task; a request's engine work is spawned
//!   apart from the connection, so a client that disconnects mid-call, sends garbage or
//!   reads slowly cannot cut a write in half or hold up anyone else.
//!
//! [`Memory`] is what the CLI and the MCP server program against: the engine in this
//! process, or a connection to the owner; both offer the operations of [`MemoryOps`],
//! defined once. [`open_or_connect`] and [`open_here`] are how
//! every shell (the CLI, `kasten mcp`, the app) gets one, waiting through a handover
//! between two owners instead of failing.

mod client;
mod error;
mod handshake;
mod open;
mod ops;
pub mod owner;
mod wire;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kasten_core::NoteId;
use kasten_engine::{Engine, EngineError, FieldEdit, ReviewOutcome};
use serde::{Deserialize, Serialize};

pub use client::Client;
pub use error::{ErrorKind, RemoteError, ShareError};
pub use handshake::OwnerInfo;
pub use open::{HANDOVER_WAIT, Opened, Sharing, is_locked, open_here, open_or_connect, shared_dir};
pub use ops::{AGENT, MAX_RESULTS, MemoryOps, OnProgress, OnToken};
pub use owner::{OnWrite, Owner};
pub use wire::MemoryServiceRequest;

/// The socket's file name in the memory's folder.
pub const SOCKET_FILE: &str = "kasten.sock";
/// The token's file name in the memory's folder.
pub const TOKEN_FILE: &str = "kasten.token";
/// Largest frame either side accepts (a batch of long notes fits; garbage does not grow
/// buffers without bound).
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
/// Bytes of the token.
const TOKEN_BYTES: usize = 32;

/// Where the socket of the memory in `dir` lives.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_FILE)
}

/// Where the token of the memory in `dir` lives.
pub fn token_path(dir: &Path) -> PathBuf {
    dir.join(TOKEN_FILE)
}

/// A review of what the LLM proposed, or a change a person makes by hand: what the
/// `kasten` review and editing commands do, here or in the owner's engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ReviewChange {
    /// Accept a proposal (optionally adjusting a proposed edit first).
    Accept {
        id: String,
        edit: FieldEdit,
    },
    Reject {
        id: String,
    },
    /// Settle a supersession proposal as "both stay true": rejected, the pair remembered.
    BothTrue {
        id: String,
    },
    Rollback {
        id: String,
    },
    Reapply {
        id: String,
    },
    /// Change a note's annotations.
    Edit {
        id: NoteId,
        edit: FieldEdit,
        reason: String,
    },
    Link {
        from: NoteId,
        to: NoteId,
        kind: Option<String>,
        reason: String,
    },
    Unlink {
        from: NoteId,
        to: NoteId,
        kind: Option<String>,
    },
    /// Replace a note's text (versioned, re-embedded, re-enriched).
    Content {
        id: NoteId,
        text: String,
    },
}

impl ReviewChange {
    /// Carries the change out in `engine`, attributed to `actor`.
    pub async fn apply(self, engine: &Engine, actor: &str) -> Result<ReviewOutcome, EngineError> {
        match self {
            Self::Accept { id, edit } => engine.accept(&id, &edit, actor).await,
            Self::Reject { id } => engine.reject(&id, actor).await,
            Self::BothTrue { id } => engine.keep_both(&id, actor).await,
            Self::Rollback { id } => engine.rollback(&id, actor).await,
            Self::Reapply { id } => engine.reapply(&id, actor).await,
            Self::Edit { id, edit, reason } => engine.edit_note(&id, &edit, actor, &reason).await,
            Self::Link {
                from,
                to,
                kind,
                reason,
            } => {
                engine
                    .link(&from, &to, kind.as_deref(), &reason, actor)
                    .await
            }
            Self::Unlink { from, to, kind } => {
                engine.unlink(&from, &to, kind.as_deref(), actor).await
            }
            Self::Content { id, text } => engine.edit_content(&id, &text, actor).await,
        }
    }
}

/// The memory as a command, the MCP server or the app uses it: the engine in this process
/// (this process is the owner, or the memory is not shareable), or the owner's engine
/// through a connection. Its operations are [`MemoryOps`]'s, reached through `Deref`.
#[derive(Clone)]
pub enum Memory {
    Local(Arc<Engine>),
    Remote(Client),
}

impl std::ops::Deref for Memory {
    type Target = dyn MemoryOps;

    fn deref(&self) -> &Self::Target {
        match self {
            Self::Local(e) => e.as_ref(),
            Self::Remote(c) => c,
        }
    }
}

impl Memory {
    /// Whether the memory is served by another process.
    pub fn is_remote(&self) -> bool {
        matches!(self, Self::Remote(_))
    }
}
