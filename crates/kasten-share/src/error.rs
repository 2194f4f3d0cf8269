//! What can go wrong when sharing a memory, and how the engine's errors cross the socket.

use kasten_engine::{ConflictError, EngineError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What kind of mistake an error is: the engine's one classification
/// ([`EngineError::kind`]), carried across the socket so that a client treats the
/// owner's error as the engine's own would be treated.
pub use kasten_engine::ErrorKind;

/// An engine error as it crosses the socket: its sentence, word for word (with its causes
/// joined by ": ", as the CLI prints an error chain), and its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
#[error("{message}")]
pub struct RemoteError {
    pub kind: ErrorKind,
    pub message: String,
}

impl RemoteError {
    pub fn other(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Other,
            message: message.into(),
        }
    }
}

impl From<&EngineError> for RemoteError {
    fn from(e: &EngineError) -> Self {
        let kind = e.kind();
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            message.push_str(": ");
            message.push_str(&c.to_string());
            cause = c.source();
        }
        Self { kind, message }
    }
}

/// A memory operation's error as the owner sends it back: the engine's own sentence and
/// kind, or this error's.
impl From<&ShareError> for RemoteError {
    fn from(e: &ShareError) -> Self {
        match e {
            ShareError::Engine(e) => Self::from(e),
            ShareError::Remote(r) => r.clone(),
            other => Self {
                kind: other.kind(),
                message: other.to_string(),
            },
        }
    }
}

/// Errors of sharing a memory; each reads as a sentence for the user.
#[derive(Debug, Error)]
pub enum ShareError {
    /// The engine in this process refused.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The owner's engine refused (its sentence, word for word).
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The owner could not be reached or went away during a call.
    #[error(
        "the Kasten process that has the memory open ({owner}) went away during the call; {consequence}"
    )]
    Lost {
        owner: String,
        consequence: &'static str,
    },
    /// The owner did not answer in time.
    #[error("the Kasten process that has the memory open ({owner}) did not answer within {secs} s")]
    Timeout { owner: String, secs: u64 },
    /// The owner answered with something that is not an answer.
    #[error("the Kasten process that has the memory open answered something unexpected: {0}")]
    Protocol(String),
    /// This process cannot serve its memory to others (the memory still works here).
    #[error("cannot serve the memory to other Kasten processes: {0}")]
    Serve(String),
    /// The socket or token could not be read.
    #[error("cannot connect to the Kasten process that has the memory open: {0}")]
    Connect(String),
    /// A request outside what a memory operation takes (more results than it serves).
    #[error("{0}")]
    Invalid(String),
}

impl ShareError {
    /// The kind of mistake, whichever side made it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Engine(e) => RemoteError::from(e).kind,
            Self::Remote(r) => r.kind,
            Self::Invalid(_) => ErrorKind::Invalid,
            _ => ErrorKind::Other,
        }
    }
}

/// A lost write conflict on either side: [`kasten_engine::retry_on_conflict`] runs the call
/// again.
impl ConflictError for ShareError {
    fn is_conflict(&self) -> bool {
        self.kind() == ErrorKind::Conflict
    }
}
