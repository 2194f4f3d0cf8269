//! Sending a request: one attempt, what a failure means (try again, and when), and the
//! whole request with its retries within the client's timeout.

use super::wire::error_message;
use super::*;

/// What one attempt produced.
pub(super) enum Sent {
    Text(String),
    Stream(Response),
}

/// A failed attempt and whether (and when) to try again.
pub(super) struct Failure {
    pub(super) error: LlmError,
    pub(super) retry: bool,
    pub(super) wait: Option<Duration>,
}

impl LlmClient {
    pub(super) async fn send_text(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(String, u32), LlmError> {
        match self.request(method, path, body, false).await? {
            (Sent::Text(text), n) => Ok((text, n)),
            (Sent::Stream(_), _) => Err(LlmError::Protocol("unexpected stream".into())),
        }
    }

    /// Sends with retries; returns what the last attempt produced and the number of attempts.
    pub(super) async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        streaming: bool,
    ) -> Result<(Sent, u32), LlmError> {
        let url = format!("{}{path}", self.base);
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            tracing::debug!(%url, attempt, model = %self.config.model, "LLM request");
            let failure = match self.attempt(&method, &url, body, streaming).await {
                Ok(sent) => return Ok((sent, attempt)),
                Err(f) => f,
            };
            if !failure.retry || attempt > self.opts.max_retries {
                return Err(failure.error);
            }
            let backoff = self.opts.backoff.saturating_mul(1 << (attempt - 1).min(16));
            let wait = failure
                .wait
                .map_or(backoff, |w| w.min(self.opts.max_retry_after));
            tracing::warn!(%url, attempt, error = %failure.error, ?wait, "LLM request failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    pub(super) async fn attempt(
        &self,
        method: &Method,
        url: &str,
        body: Option<&Value>,
        streaming: bool,
    ) -> Result<Sent, Failure> {
        let retry = |error| Failure {
            error,
            retry: true,
            wait: None,
        };
        let timed_out = || {
            retry(LlmError::Timeout {
                after: self.opts.timeout,
            })
        };
        let deadline = Instant::now() + self.opts.timeout;
        let mut rb = self.http.request(method.clone(), url);
        if let Some(key) = &self.config.api_key {
            rb = rb.bearer_auth(key);
        }
        if let Some(body) = body {
            rb = rb.json(body);
        }
        let resp = match timeout_at(deadline, rb.send()).await {
            Err(_) => return Err(timed_out()),
            Ok(Err(e)) => return Err(retry(self.transport_error(&e))),
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            let wait = resp
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|h| h.to_str().ok())
                .and_then(|s| s.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            return Err(Failure {
                error: LlmError::RateLimited,
                retry: true,
                wait,
            });
        }
        if !status.is_success() {
            let text = timeout_at(deadline, resp.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let error = LlmError::Http {
                status: status.as_u16(),
                body: serde_json::from_str(&text)
                    .ok()
                    .and_then(|v| error_message(&v))
                    .unwrap_or_else(|| clip(text.trim(), 500)),
            };
            return Err(Failure {
                error,
                retry: status.is_server_error(),
                wait: None,
            });
        }
        if streaming {
            return Ok(Sent::Stream(resp));
        }
        match timeout_at(deadline, resp.text()).await {
            Err(_) => Err(timed_out()),
            Ok(Err(e)) => Err(retry(self.transport_error(&e))),
            Ok(Ok(text)) => Ok(Sent::Text(text)),
        }
    }

    pub(super) fn transport_error(&self, e: &reqwest::Error) -> LlmError {
        let mut cause: &dyn std::error::Error = e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        if e.is_timeout() && !e.is_connect() {
            LlmError::Timeout {
                after: self.opts.timeout,
            }
        } else if e.is_connect() || e.is_request() {
            LlmError::Unreachable {
                url: self.base.clone(),
                message: cause.to_string(),
            }
        } else {
            LlmError::Protocol(format!(
                "the connection broke while reading the answer: {cause}"
            ))
        }
    }
}
