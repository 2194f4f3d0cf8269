//! The HTTP client: OpenAI-compatible chat completions and Ollama's native API.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{Method, Response, StatusCode, header};
use serde_json::{Map, Value, json};
use tokio::time::{Instant, timeout_at};

use crate::error::clip;
use crate::local::{LocalModel, LocalOptions, grammar_for};
use crate::{LlmConfig, LlmError, Provider, parse_json_lenient};

/// How the client talks to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Per HTTP request, until the whole body has arrived. For streams: until the headers
    /// arrive, and then the longest wait for the next piece of the stream.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Further attempts after a 429, a 5xx, a connection error or a timeout.
    pub max_retries: u32,
    /// Wait before retry n (1-based) is `backoff * 2^(n-1)`.
    pub backoff: Duration,
    /// A 429's `Retry-After` (seconds) replaces the backoff, but never beyond this.
    pub max_retry_after: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            max_retries: 2,
            backoff: Duration::from_millis(250),
            max_retry_after: Duration::from_secs(10),
        }
    }
}

mod send;
mod types;
mod wire;

use send::Sent;
pub use types::{
    ChatRequest, ChatResponse, Message, Role, StructuredRequest, StructuredResponse, Usage,
    Validator,
};
use wire::{RAW_LIMIT, StreamState, parse_body};

/// Client for one configured server. Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    config: LlmConfig,
    base: String,
    opts: ClientOptions,
    /// The built-in model, for [`Provider::Local`] (then `base` is the GGUF file's path).
    local: Option<LocalModel>,
}

impl LlmClient {
    pub fn new(config: LlmConfig, opts: ClientOptions) -> Result<Self, LlmError> {
        if config.provider == Provider::Local {
            let local = LocalModel::new(LocalOptions::new(config.base_url.trim()))?;
            return Self::with_local(config, opts, local);
        }
        let base = config.base_url.trim().trim_end_matches('/').to_owned();
        let url = reqwest::Url::parse(&base)
            .map_err(|e| LlmError::Config(format!("the base URL '{base}' is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LlmError::Config(format!(
                "the base URL '{base}' must start with http:// or https://"
            )));
        }
        if config.model.trim().is_empty() {
            return Err(LlmError::Config("the model name is empty".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .build()
            .map_err(|e| LlmError::Config(format!("cannot create the HTTP client: {e}")))?;
        Ok(Self {
            http,
            config,
            base,
            opts,
            local: None,
        })
    }

    /// A client for the built-in model (`config.provider` is [`Provider::Local`] and
    /// `config.base_url` names the GGUF file).
    pub fn with_local(
        config: LlmConfig,
        opts: ClientOptions,
        local: LocalModel,
    ) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| LlmError::Config(format!("cannot create the HTTP client: {e}")))?;
        Ok(Self {
            http,
            base: local.options().path.display().to_string(),
            config: LlmConfig {
                provider: Provider::Local,
                ..config
            },
            opts,
            local: Some(local),
        })
    }

    /// The built-in model, when this client runs one.
    pub fn local(&self) -> Option<&LocalModel> {
        self.local.as_ref()
    }

    /// One completion: over HTTP, or from the built-in model constrained by the schema's
    /// grammar. Returns the answer and the number of requests made.
    async fn complete(
        &self,
        messages: &[Message],
        schema: Option<(&str, &Value)>,
        grammar: Option<&str>,
        temperature: f32,
        max_tokens: Option<u32>,
    ) -> Result<(ChatResponse, u32), LlmError> {
        if let Some(local) = &self.local {
            let grammar = match schema {
                Some((_, s)) => Some(grammar_for(s, local.options().compact_json)?),
                None => grammar.map(str::to_owned),
            };
            let g = self
                .local_timeout(local.generate(
                    messages,
                    grammar,
                    max_tokens.unwrap_or(512),
                    temperature,
                    None,
                ))
                .await?;
            return Ok((self.local_response(g), 1));
        }
        let body = self.chat_body(messages, schema, temperature, max_tokens, false);
        let (text, n) = self
            .send_text(Method::POST, self.chat_path(), Some(&body))
            .await?;
        Ok((self.parse_completion(&text, messages)?, n))
    }

    async fn local_timeout<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, LlmError>>,
    ) -> Result<T, LlmError> {
        tokio::time::timeout(self.opts.timeout, fut)
            .await
            .map_err(|_| LlmError::Timeout {
                after: self.opts.timeout,
            })?
    }

    fn local_response(&self, g: crate::local::Generated) -> ChatResponse {
        ChatResponse {
            text: g.text,
            usage: Usage {
                prompt_tokens: g.prompt_tokens,
                completion_tokens: g.completion_tokens,
                estimated: false,
            },
            model: self.config.model.clone(),
        }
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    pub fn options(&self) -> &ClientOptions {
        &self.opts
    }

    /// One structured call: the answer is parsed leniently ([`parse_json_lenient`]) and
    /// checked by `validate`. If either fails, the bad answer and what was wrong with it are
    /// sent back once, asking for only valid JSON; if that fails too →
    /// [`LlmError::BadOutput`].
    pub async fn structured(
        &self,
        req: &StructuredRequest,
        validate: &Validator<'_>,
    ) -> Result<StructuredResponse, LlmError> {
        let started = Instant::now();
        let mut messages = req.messages.clone();
        let (mut usage, mut attempts) = (Usage::default(), 0);
        for round in 0..2 {
            let (answer, n) = self
                .complete(
                    &messages,
                    Some((&req.schema_name, &req.schema)),
                    None,
                    req.temperature,
                    req.max_tokens,
                )
                .await?;
            attempts += n;
            usage.add(&answer.usage);
            let checked = parse_json_lenient(&answer.text)
                .map_err(|e| e.to_string())
                .and_then(|v| match validate(&v) {
                    Ok(()) => Ok(v),
                    Err(why) => Err(format!("the JSON does not fit the schema: {why}")),
                });
            match checked {
                Ok(value) => {
                    return Ok(StructuredResponse {
                        value,
                        usage,
                        attempts,
                        repaired: round > 0,
                        model: answer.model,
                        elapsed: started.elapsed(),
                    });
                }
                Err(reason) if round == 0 => {
                    tracing::info!(schema = %req.schema_name, %reason, "LLM answer unusable; asking for a repair");
                    messages.push(Message::assistant(answer.text));
                    messages.push(Message::user(format!(
                        "Your previous answer could not be used: {reason}. Reply with only one JSON value that \
                         matches the schema '{}' below: no prose, no code fences.\n{}",
                        req.schema_name, req.schema
                    )));
                }
                Err(reason) => {
                    return Err(LlmError::BadOutput {
                        reason,
                        raw: clip(&answer.text, RAW_LIMIT),
                    });
                }
            }
        }
        Err(LlmError::Protocol(
            "the repair loop ended without an answer".into(),
        ))
    }

    /// A plain (non-streaming) chat call.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let (answer, _) = self
            .complete(
                &req.messages,
                None,
                req.grammar.as_deref(),
                req.temperature,
                req.max_tokens,
            )
            .await?;
        Ok(answer)
    }

    /// A streaming chat call: `on_token` gets each piece of text as it arrives; the result
    /// holds the whole text. Failures before the stream starts are retried like any request;
    /// a stream that breaks off is an error (never a silently shortened answer).
    pub async fn chat_stream(
        &self,
        req: &ChatRequest,
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, LlmError> {
        if let Some(local) = &self.local {
            let g = self
                .local_timeout(local.generate(
                    &req.messages,
                    req.grammar.clone(),
                    req.max_tokens.unwrap_or(512),
                    req.temperature,
                    Some(on_token),
                ))
                .await?;
            return Ok(self.local_response(g));
        }
        let body = self.chat_body(&req.messages, None, req.temperature, req.max_tokens, true);
        let (sent, _) = self
            .request(Method::POST, self.chat_path(), Some(&body), true)
            .await?;
        let Sent::Stream(resp) = sent else {
            return Err(LlmError::Protocol("expected a stream".into()));
        };
        let mut stream = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        let mut st = StreamState::default();
        while !st.done {
            let deadline = Instant::now() + self.opts.timeout;
            let next =
                timeout_at(deadline, stream.next())
                    .await
                    .map_err(|_| LlmError::Timeout {
                        after: self.opts.timeout,
                    })?;
            let Some(chunk) = next else { break };
            let chunk = chunk.map_err(|e| self.transport_error(&e))?;
            self.stream_chunk(&mut buf, &chunk, &mut st, on_token)?;
        }
        self.stream_end(&buf, st, &req.messages, on_token)
    }

    /// Lists the server's models (a "test connection" check).
    pub async fn ping(&self) -> Result<Vec<String>, LlmError> {
        if let Some(local) = &self.local {
            crate::local::check_gguf(&local.options().path)?;
            return Ok(vec![self.config.model.clone()]);
        }
        let (path, list, key) = match self.config.provider {
            Provider::Openai | Provider::Local => ("/models", "data", "id"),
            Provider::Ollama => ("/api/tags", "models", "name"),
        };
        let (text, _) = self.send_text(Method::GET, path, None).await?;
        let v = parse_body(&text)?;
        let items = v
            .get(list)
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::Protocol(format!("the model list has no '{list}' array")))?;
        Ok(items
            .iter()
            .filter_map(|m| m.get(key).and_then(Value::as_str))
            .map(str::to_owned)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn client(provider: Provider) -> LlmClient {
        let config = LlmConfig {
            provider,
            base_url: "http://127.0.0.1:9/v1/".into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
        };
        LlmClient::new(config, ClientOptions::default()).unwrap()
    }

    #[test]
    fn config_errors_and_redaction() {
        let c = client(Provider::Openai);
        assert!(!format!("{c:?}").contains("sk-secret"));
        let mut config = c.config().clone();
        config.base_url = "127.0.0.1:8080".into();
        let e = LlmClient::new(config.clone(), ClientOptions::default()).unwrap_err();
        assert!(matches!(e, LlmError::Config(_)), "{e}");
        config.base_url = "http://localhost:1".into();
        config.model = " ".into();
        assert!(matches!(
            LlmClient::new(config, ClientOptions::default()),
            Err(LlmError::Config(_))
        ));
    }
}
