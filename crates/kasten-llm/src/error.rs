//! The client's error type: one variant per thing a user (or the pipeline) can act on.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LlmError {
    /// Connection refused, DNS failure, TLS failure, connect timeout.
    #[error("the LLM server at {url} is not reachable: {message}")]
    Unreachable { url: String, message: String },
    /// The server accepted the connection but did not answer in time.
    #[error("the LLM server did not answer within {after:?}")]
    Timeout { after: Duration },
    /// A non-success status other than 429 (5xx only after the retries ran out).
    #[error("the LLM server answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// HTTP 429 on every attempt.
    #[error(
        "the LLM server is rate-limiting requests (HTTP 429), also after retrying; try again later"
    )]
    RateLimited,
    /// The model's answer was not valid JSON (or was rejected by the validator) twice:
    /// once as asked and once after the repair request. `raw` is the last answer, clipped
    /// to about 2 KB.
    #[error("the model's answer was not usable, also after one repair request: {reason}")]
    BadOutput { reason: String, raw: String },
    /// The server answered with something that is not the protocol we speak
    /// (not JSON, no `choices`, an `error` object, a stream that stops early).
    #[error("the LLM server's response was not understood: {0}")]
    Protocol(String),
    /// The configuration cannot work (bad base URL, empty model name).
    #[error("the LLM configuration is not usable: {0}")]
    Config(String),
}

impl LlmError {
    /// Whether trying again later may succeed without changing anything (server down,
    /// slow, overloaded or rate-limiting). The client has already retried these.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Timeout { .. } | Self::RateLimited => true,
            Self::Http { status, .. } => *status >= 500,
            Self::BadOutput { .. } | Self::Protocol(_) | Self::Config(_) => false,
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with "…" when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
