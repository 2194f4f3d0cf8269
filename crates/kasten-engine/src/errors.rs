//! The one classification of [`EngineError`]: what kind of failure each is, which every
//! shell uses (the app's error, the share wire, the MCP server, the CLI's open) instead
//! of matching the variants itself; and which of them a retry may cure.

use kasten_store::{ConflictError, StoreError};
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// What kind of failure an error is, so that every shell treats it alike (an MCP
/// "invalid params", the app's `not_found`, a retry after a lost write conflict, …).
/// It crosses the share socket with the error's sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No note, link, edit or event with that id.
    NotFound,
    /// The input was refused (empty content, a bad id, an unreadable file, a bad setting).
    Invalid,
    /// The search query was empty.
    EmptyQuery,
    /// No LLM is configured in the process that has the memory open.
    NoLlm,
    /// A write lost a conflict with another one and wrote nothing; trying again is safe
    /// ([`crate::retry_on_conflict`]).
    Conflict,
    /// The change is refused because of another one (a review action that would undo a
    /// later change first, a note changed meanwhile); trying again the same way will not
    /// help.
    Refused,
    /// The memory is open in another process.
    Locked,
    /// The LLM server failed or could not be reached (the sentence says how).
    Llm,
    /// Anything else: an internal failure (the embedder, the database, closing).
    Other,
}

impl EngineError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::NotFound(_) | EngineError::UnknownItem(_) => ErrorKind::NotFound,
            EngineError::Invalid(_) | EngineError::File(_) | EngineError::Setting(_) => {
                ErrorKind::Invalid
            }
            EngineError::EmptyQuery => ErrorKind::EmptyQuery,
            EngineError::NoLlm => ErrorKind::NoLlm,
            EngineError::Store(StoreError::Conflict) => ErrorKind::Conflict,
            EngineError::Conflict(_) => ErrorKind::Refused,
            EngineError::Store(StoreError::Locked(_)) => ErrorKind::Locked,
            EngineError::Llm(_) => ErrorKind::Llm,
            EngineError::Store(_)
            | EngineError::Embed(_)
            | EngineError::Internal(_)
            | EngineError::Closing => ErrorKind::Other,
        }
    }
}

impl ConflictError for EngineError {
    fn is_conflict(&self) -> bool {
        self.kind() == ErrorKind::Conflict
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use kasten_core::{CoreError, NoteId};

    use super::*;
    use crate::{CONFLICT_TRIES, retry_on_conflict};

    /// Each variant a shell reacts to has the kind it reacts by; in particular a lost write
    /// conflict (retried) is not a refused change (not retried).
    #[test]
    fn every_variant_that_matters_has_its_kind() {
        let id = NoteId::generate();
        let cases = [
            (EngineError::NotFound(id), ErrorKind::NotFound),
            (EngineError::UnknownItem("x".into()), ErrorKind::NotFound),
            (
                EngineError::Invalid(CoreError::Invalid("empty".into())),
                ErrorKind::Invalid,
            ),
            (
                EngineError::File("cannot read a.md".into()),
                ErrorKind::Invalid,
            ),
            (EngineError::EmptyQuery, ErrorKind::EmptyQuery),
            (EngineError::NoLlm, ErrorKind::NoLlm),
            (
                EngineError::Store(StoreError::Conflict),
                ErrorKind::Conflict,
            ),
            (
                EngineError::Conflict("a later edit".into()),
                ErrorKind::Refused,
            ),
            (
                EngineError::Store(StoreError::Locked("/m".into())),
                ErrorKind::Locked,
            ),
            (EngineError::Llm("unreachable".into()), ErrorKind::Llm),
            (
                EngineError::Store(StoreError::Db("x".into())),
                ErrorKind::Other,
            ),
            (EngineError::Internal("x".into()), ErrorKind::Other),
            (EngineError::Closing, ErrorKind::Other),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e:?}");
            assert_eq!(e.is_conflict(), kind == ErrorKind::Conflict, "{e:?}");
        }
        // the wire names
        assert_eq!(
            serde_json::to_value(ErrorKind::EmptyQuery).unwrap_or_default(),
            "empty_query"
        );
    }

    /// A conflict is run again until the limit, then returned; a success after conflicts
    /// is returned; anything else is not run again.
    #[tokio::test]
    async fn the_retry_gives_up_after_its_limit() {
        let runs = AtomicU32::new(0);
        let r: Result<(), EngineError> = retry_on_conflict("test", || {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Err(EngineError::Store(StoreError::Conflict)) }
        })
        .await;
        assert!(matches!(r, Err(EngineError::Store(StoreError::Conflict))));
        assert_eq!(runs.load(Ordering::SeqCst), CONFLICT_TRIES);

        let runs = AtomicU32::new(0);
        let r: Result<u32, EngineError> = retry_on_conflict("test", || {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if n < 3 {
                    Err(EngineError::Store(StoreError::Conflict))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r.ok(), Some(3));

        let runs = AtomicU32::new(0);
        let r: Result<(), EngineError> = retry_on_conflict("test", || {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Err(EngineError::Conflict("a later edit".into())) }
        })
        .await;
        assert!(matches!(r, Err(EngineError::Conflict(_))));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
