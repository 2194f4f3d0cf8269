//! The HTTP client: OpenAI-compatible chat completions and Ollama's native API.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{Method, Response, StatusCode, header};
use serde::{Deserialize, Serialize};
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Token counts of one call (or the sum of several, see [`Usage::add`]).
///
/// Taken from the server (`usage` for OpenAI, `prompt_eval_count`/`eval_count` for
/// Ollama). A count the server does not report is estimated as ceil(characters / 4) of the
/// messages' contents (prompt) or of the answer (completion), and `estimated` is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub estimated: bool,
}

impl Usage {
    pub fn total(&self) -> u32 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Adds `other` to `self`; the sum is estimated if either part is.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.estimated |= other.estimated;
    }

    /// The estimate used when the server reports no count: ceil(chars / 4).
    pub fn estimate_tokens(text: &str) -> u32 {
        u32::try_from(text.chars().count().div_ceil(4)).unwrap_or(u32::MAX)
    }

    fn from_counts(
        prompt: Option<u64>,
        completion: Option<u64>,
        messages: &[Message],
        answer: &str,
    ) -> Self {
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Self {
            prompt_tokens: prompt.map(clamp).unwrap_or_else(|| {
                messages
                    .iter()
                    .map(|m| Self::estimate_tokens(&m.content))
                    .sum()
            }),
            completion_tokens: completion
                .map(clamp)
                .unwrap_or_else(|| Self::estimate_tokens(answer)),
            estimated: prompt.is_none() || completion.is_none(),
        }
    }
}

/// A call whose answer must be JSON matching `schema`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructuredRequest {
    pub messages: Vec<Message>,
    pub schema_name: String,
    /// A JSON schema; sent as `response_format` (OpenAI) or `format` (Ollama).
    pub schema: Value,
    pub temperature: f32,
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StructuredResponse {
    pub value: Value,
    /// Summed over the first answer and the repair, if there was one.
    pub usage: Usage,
    /// HTTP requests made, including retries and the repair request.
    pub attempts: u32,
    /// Whether the value came from the repair request.
    pub repaired: bool,
    pub model: String,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: Option<u32>,
    /// A GBNF grammar the built-in model's answer must follow (servers ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub usage: Usage,
    pub model: String,
}

/// A validator for structured answers: `Err` says, in words the model can act on, what is
/// wrong with the value.
pub type Validator<'a> = dyn Fn(&Value) -> Result<(), String> + Send + Sync + 'a;

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

/// What one attempt produced.
enum Sent {
    Text(String),
    Stream(Response),
}

/// A failed attempt and whether (and when) to try again.
struct Failure {
    error: LlmError,
    retry: bool,
    wait: Option<Duration>,
}

#[derive(Default)]
struct StreamState {
    text: String,
    model: Option<String>,
    prompt: Option<u64>,
    completion: Option<u64>,
    /// `[DONE]` (OpenAI) or `"done": true` (Ollama) was seen.
    done: bool,
    /// An OpenAI `finish_reason` was seen (enough if the server omits `[DONE]`).
    finished: bool,
}

const RAW_LIMIT: usize = 2048;

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
                Some((_, s)) => Some(grammar_for(s)?),
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

    /// Parses a whole streamed response body that arrived in `chunks`, exactly as
    /// [`LlmClient::chat_stream`] does while reading it. For the fuzz targets and tests:
    /// the result must not depend on where the chunks are cut.
    #[doc(hidden)]
    pub fn parse_stream_body(
        &self,
        chunks: &[&[u8]],
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let (mut buf, mut st) = (Vec::new(), StreamState::default());
        for chunk in chunks {
            if st.done {
                break;
            }
            self.stream_chunk(&mut buf, chunk, &mut st, on_token)?;
        }
        self.stream_end(&buf, st, &[], on_token)
    }

    /// Parses a non-streaming response body as [`LlmClient::chat`] does (for the fuzz
    /// targets and tests).
    #[doc(hidden)]
    pub fn parse_response_body(&self, body: &str) -> Result<ChatResponse, LlmError> {
        self.parse_completion(body, &[])
    }

    /// Adds one piece of a stream to `buf` and handles every complete line in it (up to
    /// the end of the answer).
    fn stream_chunk(
        &self,
        buf: &mut Vec<u8>,
        chunk: &[u8],
        st: &mut StreamState,
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), LlmError> {
        buf.extend_from_slice(chunk);
        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            self.stream_line(&String::from_utf8_lossy(&line), st, on_token)?;
            if st.done {
                break;
            }
        }
        Ok(())
    }

    /// The stream has ended: handles a last line without a newline and checks that the
    /// answer was complete.
    fn stream_end(
        &self,
        buf: &[u8],
        mut st: StreamState,
        messages: &[Message],
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, LlmError> {
        if !st.done && !buf.is_empty() {
            self.stream_line(&String::from_utf8_lossy(buf), &mut st, on_token)?;
        }
        if !(st.done || st.finished) {
            return Err(LlmError::Protocol(
                "the stream ended before the answer was complete".into(),
            ));
        }
        Ok(ChatResponse {
            usage: Usage::from_counts(st.prompt, st.completion, messages, &st.text),
            model: st.model.unwrap_or_else(|| self.config.model.clone()),
            text: st.text,
        })
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

    fn chat_path(&self) -> &'static str {
        match self.config.provider {
            Provider::Openai | Provider::Local => "/chat/completions",
            Provider::Ollama => "/api/chat",
        }
    }

    fn chat_body(
        &self,
        messages: &[Message],
        schema: Option<(&str, &Value)>,
        temperature: f32,
        max_tokens: Option<u32>,
        stream: bool,
    ) -> Value {
        // f32 → shortest decimal, so 0.2 is sent as 0.2 and not 0.20000000298023224
        let temperature: Value = temperature
            .to_string()
            .parse::<f64>()
            .map_or(Value::Null, Value::from);
        let mut b = Map::new();
        b.insert("model".into(), json!(self.config.model));
        b.insert("messages".into(), json!(messages));
        b.insert("stream".into(), json!(stream));
        match self.config.provider {
            Provider::Openai | Provider::Local => {
                b.insert("temperature".into(), temperature);
                if let Some(n) = max_tokens {
                    b.insert("max_tokens".into(), json!(n));
                }
                if let Some((name, schema)) = schema {
                    b.insert(
                        "response_format".into(),
                        json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": true}}),
                    );
                }
                if stream {
                    b.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
            Provider::Ollama => {
                let mut options = Map::new();
                options.insert("temperature".into(), temperature);
                if let Some(n) = max_tokens {
                    options.insert("num_predict".into(), json!(n));
                }
                b.insert("options".into(), Value::Object(options));
                if let Some((_, schema)) = schema {
                    b.insert("format".into(), schema.clone());
                }
            }
        }
        Value::Object(b)
    }

    fn parse_completion(&self, body: &str, messages: &[Message]) -> Result<ChatResponse, LlmError> {
        let v = parse_body(body)?;
        let (content, prompt, completion) = match self.config.provider {
            Provider::Openai | Provider::Local => (
                v.pointer("/choices/0/message/content"),
                v.pointer("/usage/prompt_tokens"),
                v.pointer("/usage/completion_tokens"),
            ),
            Provider::Ollama => (
                v.pointer("/message/content"),
                v.get("prompt_eval_count"),
                v.get("eval_count"),
            ),
        };
        let Some(text) = content.and_then(Value::as_str) else {
            let field = match self.config.provider {
                Provider::Openai | Provider::Local => "choices[0].message.content",
                Provider::Ollama => "message.content",
            };
            return Err(LlmError::Protocol(format!(
                "the response has no {field}: {}",
                clip(body, 300)
            )));
        };
        Ok(ChatResponse {
            usage: Usage::from_counts(
                prompt.and_then(Value::as_u64),
                completion.and_then(Value::as_u64),
                messages,
                text,
            ),
            text: text.to_owned(),
            model: self.model_of(&v),
        })
    }

    fn model_of(&self, v: &Value) -> String {
        v.get("model")
            .and_then(Value::as_str)
            .unwrap_or(&self.config.model)
            .to_owned()
    }

    fn stream_line(
        &self,
        line: &str,
        st: &mut StreamState,
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), LlmError> {
        let line = line.trim();
        let data = match self.config.provider {
            // SSE: only `data:` lines matter (not comments, `event:`, blank separators)
            Provider::Openai | Provider::Local => match line.strip_prefix("data:").map(str::trim) {
                Some("[DONE]") => {
                    st.done = true;
                    return Ok(());
                }
                Some(data) => data,
                None => return Ok(()),
            },
            Provider::Ollama if line.is_empty() => return Ok(()),
            Provider::Ollama => line,
        };
        let v = parse_body(data)?;
        if st.model.is_none() {
            st.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
        }
        let piece = match self.config.provider {
            Provider::Openai | Provider::Local => {
                if v.pointer("/choices/0/finish_reason")
                    .is_some_and(|f| !f.is_null())
                {
                    st.finished = true;
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    st.prompt = u.get("prompt_tokens").and_then(Value::as_u64);
                    st.completion = u.get("completion_tokens").and_then(Value::as_u64);
                }
                v.pointer("/choices/0/delta/content")
            }
            Provider::Ollama => {
                if v.get("done").and_then(Value::as_bool) == Some(true) {
                    st.done = true;
                    st.prompt = v.get("prompt_eval_count").and_then(Value::as_u64);
                    st.completion = v.get("eval_count").and_then(Value::as_u64);
                }
                v.pointer("/message/content")
            }
        };
        if let Some(piece) = piece.and_then(Value::as_str).filter(|p| !p.is_empty()) {
            st.text.push_str(piece);
            on_token(piece);
        }
        Ok(())
    }

    async fn send_text(
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
    async fn request(
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

    async fn attempt(
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

    fn transport_error(&self, e: &reqwest::Error) -> LlmError {
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

/// A response body as JSON; an `error` object or string in it becomes a readable error.
fn parse_body(text: &str) -> Result<Value, LlmError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        LlmError::Protocol(format!(
            "the response is not JSON ({e}): {}",
            clip(text, 300)
        ))
    })?;
    match error_message(&v) {
        Some(msg) => Err(LlmError::Protocol(format!(
            "the server reported an error: {msg}"
        ))),
        None => Ok(v),
    }
}

/// `error.message` (OpenAI) or `error` (Ollama) of an error body.
fn error_message(v: &Value) -> Option<String> {
    let err = v.get("error").filter(|e| !e.is_null())?;
    let msg = err.get("message").and_then(Value::as_str).or(err.as_str());
    Some(msg.map_or_else(|| err.to_string(), str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(provider: Provider) -> LlmClient {
        let config = LlmConfig {
            provider,
            base_url: "http://127.0.0.1:9/v1/".into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
        };
        LlmClient::new(config, ClientOptions::default()).unwrap()
    }

    #[test]
    fn request_bodies_per_provider() {
        let msgs = [Message::user("hi")];
        let schema = json!({"type": "object"});
        let b = client(Provider::Openai).chat_body(
            &msgs,
            Some(("note", &schema)),
            0.2,
            Some(64),
            false,
        );
        assert_eq!(
            b["response_format"]["json_schema"],
            json!({"name": "note", "schema": schema, "strict": true})
        );
        assert_eq!(b["temperature"], json!(0.2));
        assert_eq!(b["max_tokens"], json!(64));
        assert_eq!(b["stream"], json!(false));
        let b =
            client(Provider::Ollama).chat_body(&msgs, Some(("note", &schema)), 0.0, Some(64), true);
        assert_eq!(b["format"], schema);
        assert_eq!(b["options"], json!({"temperature": 0.0, "num_predict": 64}));
        assert_eq!(b["stream"], json!(true));
        assert_eq!(b["messages"], json!([{"role": "user", "content": "hi"}]));
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

    #[test]
    fn usage_estimates_and_sums() {
        let msgs = [Message::system("abcd"), Message::user("abcde")];
        let u = Usage::from_counts(None, Some(7), &msgs, "xyz");
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 1 + 2,
                completion_tokens: 7,
                estimated: true
            }
        );
        let mut s = Usage::from_counts(Some(10), Some(5), &msgs, "");
        assert!(!s.estimated);
        s.add(&u);
        assert_eq!(
            (s.prompt_tokens, s.completion_tokens, s.estimated, s.total()),
            (13, 12, true, 25)
        );
    }

    #[test]
    fn streams_parse_the_same_however_they_are_cut() {
        let c = client(Provider::Openai);
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Grüße\"}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\" [1]\"},\"finish_reason\":\"stop\"}]}\n\
                    data: [DONE]\n"
            .as_bytes();
        let whole = c.parse_stream_body(&[body], &mut |_| {}).unwrap();
        assert_eq!(whole.text, "Grüße [1]");
        for cut in 0..body.len() {
            let (a, b) = body.split_at(cut);
            let mut pieces = String::new();
            let r = c
                .parse_stream_body(&[a, b], &mut |p| pieces.push_str(p))
                .unwrap();
            assert_eq!(
                (r.text.as_str(), pieces.as_str()),
                ("Grüße [1]", "Grüße [1]")
            );
        }
        let cut_off = &body[..40];
        assert!(c.parse_stream_body(&[cut_off], &mut |_| {}).is_err());
    }

    #[test]
    fn server_errors_in_bodies_are_readable() {
        let e = parse_body(r#"{"error": {"message": "model not found"}}"#).unwrap_err();
        assert!(e.to_string().contains("model not found"), "{e}");
        let e = client(Provider::Openai)
            .parse_completion(r#"{"object": "x"}"#, &[])
            .unwrap_err();
        assert!(e.to_string().contains("choices[0].message.content"), "{e}");
    }
}
