//! A deterministic LLM server on loopback for Kasten's tests.
//!
//! [`FakeLlm`] serves both wire protocols Kasten speaks, on one port:
//!
//! | route | protocol |
//! |---|---|
//! | `POST /v1/chat/completions`, `GET /v1/models` | OpenAI-compatible (`stream` defaults to `false`; SSE when `true`) |
//! | `POST /api/chat`, `GET /api/tags` | Ollama (`stream` defaults to **`true`**; NDJSON) |
//! | `POST /_fake/mode` `{"mode": ...}`, `GET /_fake/mode` | change / read the [`Mode`] at run time |
//! | `GET /_fake/requests` | the recorded requests, as JSON (for tests that run the binary) |
//!
//! Every request except `/_fake/*` is recorded ([`FakeLlm::requests`]), failed ones included.
//! Answers never depend on time or randomness: `created` is `1700000000`, `created_at` is
//! `2023-11-14T22:13:20Z`, the completion id is `chatcmpl-fake-<n>` (n = request number).
//! The reported `model` is the request's, or the configured one (`fake-model`) if absent.
//!
//! # Generation rules
//!
//! A request is **structured** if it asks for JSON: OpenAI `response_format` of type
//! `json_schema` (schema at `json_schema.schema`) or `json_object`; Ollama `format` that is a
//! schema object or `"json"`. Without a schema, structured content is `{"answer": <plain answer>}`.
//!
//! **Content words** are taken from the last `user` message (the last message if there is
//! none), from the note inside its first `<<<` … `>>>` fence when it has one: split at every non-alphanumeric character, lowercased; dropped if shorter than 3
//! characters, all digits, a handle (`n`/`N` + digits), an English stop word, or a repeat.
//! Order is first occurrence. `"The Rust borrow-checker (N12) prevents data races"` gives
//! `rust, borrow, checker, prevents, data, races`.
//!
//! **Schema values** (subset of JSON Schema); `name` is the nearest property name (for array
//! items, the array's), `i` the index in the nearest enclosing array (0 outside arrays):
//! - `$ref` to `#/...` in the same schema is followed; `const` → the constant.
//! - `enum` (any type) → `enum[i % len]`: the first value outside arrays, and first, second, …
//!   for array items. Kasten's handle fields (`enum: ["N1",…,"Nk"]`) thus get `N1`, `N2`, `N3`.
//! - `anyOf`/`oneOf`/`allOf` → the first alternative that is not `{"type":"null"}`;
//!   `type: [T, "null"]` → T. No `type`: `properties` → object, `items` → array, else string.
//! - object → every property in `properties`, plus any `required` name missing from them
//!   (generated as a string). `additionalProperties` is ignored.
//! - array → `min(maxItems or 3, 3)` items, capped by the length of the item `enum` (or the
//!   smallest `enum` among the item object's direct properties, so handles never repeat), and
//!   for keyword-ish string items by the number of content words; then raised to `minItems`
//!   (enum values and words then cycle / run out, see below).
//! - string, when `name` contains `keyword` or `tag` (case-insensitive) → content word `i`, or
//!   `word<i+1>` when there are too few; so `keywords` = the first three content words.
//! - other strings → the first 6 content words joined by spaces, first letter upper-cased,
//!   ending in `.` (`"Rust borrow checker prevents data races."`); `"No content."` if there
//!   are none. `maxLength` truncates, `minLength` pads with `.`; `pattern`/`format` are ignored.
//! - number → 0.8 (so `confidence` is 0.8), integer → 1, each clamped to
//!   `minimum`/`maximum` (`exclusiveMinimum`/`exclusiveMaximum` ± 0.1, or ± 1 for integers).
//! - boolean → `true`; null → `null`.
//!
//! **Plain chat** (not structured): lines starting (after spaces) with `[n]` are numbered
//! notes. If there are any, the answer is `According to my notes, <first 12 words of the first
//! note (a leading `(…)` and `<<<`/`>>>` fences left out), trailing .,;:!? removed> [a] [b].` citing the first two distinct note numbers found
//! (only `[a]` if there is one), e.g. `According to my notes, My cat is called Miso [1] [2].`.
//! A note's `context: …` line and the reasons of link lines (`[a] kind [b]: <<<reason>>>`)
//! are read too: when one of them shares more content words with the question (the text after
//! the last `Question:` of the last user message, up to the line end) than the first note's
//! content, its first 12 words are quoted instead and its note is cited first (`[a]` for a
//! link), then the first other note: the model "reads" the annotations a prompt shows.
//! Otherwise the answer is exactly `Not in memory.`, except when a system message mentions
//! `small talk`: then it is `Hello! Ask me anything about your notes.`.
//!
//! **Streams** send the content in pieces: split after each space, and pieces longer than 16
//! characters cut into 16-character parts; the pieces concatenate to the full content.
//! **Usage**: tokens are `ceil(chars / 4)`, prompt = all message contents, completion = content.
//!
//! A responder set with [`FakeLlm::set_responder`] that returns `Some(content)` replaces the
//! generated content verbatim (content faults do not apply to it; status faults and `slow` do).
//!
//! # Fault modes
//!
//! See [`Mode`]. Status faults (`http500`, `flaky`, `fail_first`, `rate_limited`) apply to the
//! chat routes only and count chat requests from the moment the mode was set. Content faults
//! (`malformed`, `truncated`, `wrong_shape`, `unknown_handles`, `fenced`, `injection`) apply to
//! structured requests only; plain chat is answered as in `normal`.

mod generate;
mod server;

use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use generate::{content_words, plain_answer};

/// How the server misbehaves. JSON form: `{"mode": "slow", "delay_ms": 200}`; CLI form:
/// `slow:200`, `fail_first:2` (see [`FromStr`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Answer by the generation rules.
    #[default]
    Normal,
    /// Every chat request gets HTTP 500 with a JSON error body.
    Http500,
    /// Sleep `delay_ms` before answering (then answer normally).
    Slow { delay_ms: u64 },
    /// Content is not JSON at all: `Sure! Here you go: {keywords: [oops`.
    Malformed,
    /// The normal JSON cut to its first half (in characters).
    Truncated,
    /// Valid JSON of another shape: `{"answer":42}`.
    WrongShape,
    /// Normal, but handle enums (all values `N<digits>`) get values outside the enum:
    /// `N<max(98, largest handle) + 1 + i>`, i.e. `N99`, `N100`, … for item i.
    UnknownHandles,
    /// The normal JSON as "Here is the JSON you asked for:\n```json\n{json}\n```".
    Fenced,
    /// Every other chat request fails with 500, starting with the first.
    Flaky,
    /// The first `n` chat requests fail with 500, then normal.
    FailFirst { n: usize },
    /// Every other chat request gets 429 with `Retry-After: 0`, starting with the first.
    RateLimited,
    /// A model that obeys prompt injection: when any message contains
    /// [`INJECTION_MARKER`] (case-insensitive), a structured answer is the normal one plus
    /// everything a hostile note asks for — `content` rewrites, `delete` flags and `ops`
    /// (`delete`, `rewrite`, `drop_table`) on every handle shown and on handles never shown
    /// (`N999`), at the top level and in every link and update. Otherwise normal.
    Injection,
}

/// The text that makes [`Mode::Injection`] misbehave.
pub const INJECTION_MARKER: &str = "ignore previous instructions";

/// A `--mode` value that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ModeError {
    #[error(
        "unknown fault mode `{0}`; expected normal, http500, slow[:MS], malformed, truncated, \
         wrong_shape, unknown_handles, fenced, flaky, fail_first[:N], rate_limited or injection"
    )]
    Unknown(String),
    #[error("`{0}` is not a whole number")]
    Number(String),
    #[error("invalid mode JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl FromStr for Mode {
    type Err = ModeError;

    /// `name`, `name:N` (`slow:MS`, `fail_first:N`; defaults 500 ms and 1) or the JSON form.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.starts_with('{') {
            return Ok(serde_json::from_str(s)?);
        }
        let (name, arg) = s.split_once(':').map_or((s, None), |(n, a)| (n, Some(a)));
        let number = |default: u64| match arg {
            None => Ok(default),
            Some(a) => a
                .trim()
                .parse::<u64>()
                .map_err(|_| ModeError::Number(a.to_string())),
        };
        Ok(match name.replace('-', "_").as_str() {
            "slow" => Mode::Slow {
                delay_ms: number(500)?,
            },
            "fail_first" => Mode::FailFirst {
                n: usize::try_from(number(1)?).map_err(|_| ModeError::Number(s.to_string()))?,
            },
            other => serde_json::from_value(serde_json::json!({ "mode": other }))
                .map_err(|_| ModeError::Unknown(s.to_string()))?,
        })
    }
}

/// Which wire protocol a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    OpenAi,
    Ollama,
}

/// One chat message (multi-part OpenAI content is joined text parts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// What a responder sees of a chat request.
#[derive(Debug, Clone)]
pub struct RequestView {
    pub protocol: Protocol,
    pub model: String,
    pub messages: Vec<Message>,
    /// The JSON schema the output must follow, if one was sent.
    pub schema: Option<Value>,
    /// OpenAI `response_format.json_schema.name`; for Ollama the schema's `title`, if any.
    pub schema_name: Option<String>,
    /// Structured output was requested (a schema, `json_object` or Ollama `"json"`).
    pub json: bool,
    pub stream: bool,
}

impl RequestView {
    pub fn schema_name(&self) -> Option<&str> {
        self.schema_name.as_deref()
    }

    /// The last `user` message's content (the last message's if there is none).
    pub fn last_user(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .or(self.messages.last())
            .map_or("", |m| m.content.as_str())
    }
}

/// A request as received. `body` is the parsed JSON, `Null` without a body, or the raw text
/// as a JSON string if it was not JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub body: Value,
    /// The `Authorization` header, if one was sent (tests check that an API key is sent
    /// to the server and nowhere else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
}

type Responder = Arc<dyn Fn(&RequestView) -> Option<String> + Send + Sync>;

/// A running fake LLM server. Stops on [`FakeLlm::stop`] or when dropped.
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl FakeLlm {
    /// Start on `127.0.0.1` at a free port.
    pub async fn start(mode: Mode) -> std::io::Result<FakeLlm> {
        Self::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), mode).await
    }

    pub async fn start_on(addr: SocketAddr, mode: Mode) -> std::io::Result<FakeLlm> {
        Self::start_with(addr, mode, "fake-model").await
    }

    /// Start with another model name (listed by `/v1/models` and `/api/tags`).
    pub async fn start_with(
        addr: SocketAddr,
        mode: Mode,
        model: impl Into<String>,
    ) -> std::io::Result<FakeLlm> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(server::Shared::new(mode, model.into()));
        let app = server::router(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!("fake LLM server stopped with an error: {e}");
            }
        });
        Ok(FakeLlm {
            addr,
            shared,
            shutdown: Some(shutdown),
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT`
    pub fn ollama_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Switch mode; request sequences of `flaky`, `fail_first` and `rate_limited` restart.
    pub fn set_mode(&self, mode: Mode) {
        self.shared.set_mode(mode);
    }

    pub fn mode(&self) -> Mode {
        self.shared.mode()
    }

    /// Script the assistant content: `Some(content)` replaces the generated content.
    pub fn set_responder(
        &self,
        f: impl Fn(&RequestView) -> Option<String> + Send + Sync + 'static,
    ) {
        self.shared.set_responder(Some(Arc::new(f)));
    }

    pub fn clear_responder(&self) {
        self.shared.set_responder(None);
    }

    /// Every request received so far (except `/_fake/*`), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests()
    }

    pub fn request_count(&self) -> usize {
        self.shared.request_count()
    }

    /// Graceful shutdown: stop accepting, let open requests finish (at most 5 s).
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests;
