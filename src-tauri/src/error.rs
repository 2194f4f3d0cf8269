//! The one error type that crosses IPC: tagged, typed, in words for the user. Internal
//! details (database messages, file paths of the code) go to the log, not to the screen.

use kasten_engine::{EngineError, ErrorKind};
use serde::Serialize;
use specta::Type;

/// What went wrong, as the UI shows it. `kind` lets the UI react (e.g. open Settings for
/// `no_llm`); `message` is a sentence a person can act on.
#[derive(Debug, Clone, Serialize, Type, PartialEq, Eq, thiserror::Error)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum AppError {
    /// The memory is still opening (reading the notes into the search indexes).
    #[error("the memory is still opening")]
    NotReady(String),
    /// The memory could not be opened (locked by another process, unreadable, model missing).
    #[error("{0}")]
    Unavailable(String),
    /// The thing asked for does not exist (any more).
    #[error("{0}")]
    NotFound(String),
    /// The input was not acceptable (empty note, bad setting).
    #[error("{0}")]
    Invalid(String),
    /// A review action would undo a later change first, or a concurrent change won.
    #[error("{0}")]
    Conflict(String),
    /// No LLM is configured: enrichment and chat wait for one.
    #[error("{0}")]
    NoLlm(String),
    /// The LLM server failed or could not be reached.
    #[error("{0}")]
    Llm(String),
    /// Something inside Kasten failed; the log has the details.
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    pub fn internal(context: &str, e: impl std::fmt::Display) -> Self {
        tracing::error!("{context}: {e}");
        AppError::Internal(format!(
            "{context}; Kasten's log (stderr, KASTEN_LOG) has the details"
        ))
    }
}

/// The engine's classification ([`EngineError::kind`]) picks the variant; the words are
/// the app's where it has its own, else the engine's sentence.
impl From<EngineError> for AppError {
    fn from(e: EngineError) -> Self {
        match e.kind() {
            ErrorKind::NotFound => AppError::NotFound(match &e {
                EngineError::NotFound(id) => format!("there is no note {id}"),
                EngineError::UnknownItem(s) => {
                    format!("nothing with id {s}: it is not a link, an edit or an event")
                }
                other => other.to_string(),
            }),
            ErrorKind::EmptyQuery => AppError::Invalid("type something to search for".into()),
            ErrorKind::Invalid => AppError::Invalid(e.to_string()),
            ErrorKind::NoLlm => AppError::NoLlm(
                "no LLM is configured: open Settings and enter a server to enrich notes and chat"
                    .into(),
            ),
            ErrorKind::Refused => AppError::Conflict(e.to_string()),
            ErrorKind::Conflict => AppError::Conflict(
                "another change to the same notes happened at the same time; try again".into(),
            ),
            ErrorKind::Locked => AppError::Unavailable(e.to_string()),
            // already a sentence about the LLM server ("the language model failed: the LLM
            // server at … is not reachable: …"), which the user can act on
            ErrorKind::Llm => AppError::Llm(e.to_string()),
            ErrorKind::Other => match e {
                EngineError::Embed(e) => AppError::internal("the embedding model failed", e),
                other => AppError::internal("the memory could not do that", other),
            },
        }
    }
}

pub type AppResult<T> = Result<T, AppError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_tagged_and_do_not_leak_internals() {
        let e: AppError = EngineError::Internal("SELECT * FROM secret".into()).into();
        let json = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(json["kind"], "internal");
        let msg = json["message"].as_str().unwrap_or_default();
        assert!(!msg.contains("SELECT"), "{msg}");
        let e: AppError = EngineError::NoLlm.into();
        assert_eq!(
            serde_json::to_value(&e).unwrap_or_default()["kind"],
            "no_llm"
        );
    }

    /// Every LLM failure the engine reports reaches the app as `llm` with the reason in
    /// words, not as an internal error that hides it in the log.
    #[test]
    fn llm_failures_are_llm_errors_in_words() {
        use kasten_llm::LlmError;
        use std::time::Duration;
        let faults = [
            (
                LlmError::Unreachable {
                    url: "http://127.0.0.1:9/v1".into(),
                    message: "connection refused".into(),
                },
                "not reachable",
            ),
            (
                LlmError::Timeout {
                    after: Duration::from_secs(1),
                },
                "did not answer within 1s",
            ),
            (
                LlmError::Http {
                    status: 500,
                    body: "injected server error".into(),
                },
                "HTTP 500",
            ),
            (
                LlmError::BadOutput {
                    reason: "the JSON is cut off".into(),
                    raw: "{\"keywords\": [".into(),
                },
                "not usable",
            ),
            (LlmError::Protocol("no choices".into()), "not understood"),
            (LlmError::RateLimited, "rate-limiting"),
        ];
        for (fault, words) in faults {
            // how the engine wraps them (chat.rs: `EngineError::Llm(e.to_string())`)
            let e: AppError = EngineError::Llm(fault.to_string()).into();
            let json = serde_json::to_value(&e).unwrap_or_default();
            assert_eq!(json["kind"], "llm", "{fault:?}");
            let msg = json["message"].as_str().unwrap_or_default();
            assert!(msg.contains(words), "{msg}");
            for internal in ["LlmError", "EngineError", "Unreachable {", "Http {", "src/"] {
                assert!(!msg.contains(internal), "{msg}");
            }
        }
    }
}
