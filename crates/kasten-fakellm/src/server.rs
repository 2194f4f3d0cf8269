//! HTTP routes: both chat protocols, model listings, fault injection and the control routes.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::{Message, Mode, Protocol, RecordedRequest, RequestView, Responder, generate};

const CREATED: u64 = 1_700_000_000;
const CREATED_AT: &str = "2023-11-14T22:13:20Z";

pub(crate) struct Shared {
    model: String,
    /// The mode and how many chat requests it has seen.
    mode: Mutex<(Mode, usize)>,
    requests: Mutex<Vec<RecordedRequest>>,
    responder: Mutex<Option<Responder>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(mode: Mode, model: String) -> Self {
        Shared {
            model,
            mode: Mutex::new((mode, 0)),
            requests: Mutex::new(Vec::new()),
            responder: Mutex::new(None),
        }
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        tracing::debug!(?mode, "fake LLM mode");
        *lock(&self.mode) = (mode, 0);
    }

    pub(crate) fn mode(&self) -> Mode {
        lock(&self.mode).0.clone()
    }

    pub(crate) fn set_responder(&self, responder: Option<Responder>) {
        *lock(&self.responder) = responder;
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    pub(crate) fn request_count(&self) -> usize {
        lock(&self.requests).len()
    }

    /// Records a request and returns its number (1-based).
    fn record(&self, method: &str, path: &str, body: Value) -> usize {
        self.record_with(method, path, body, None)
    }

    fn record_with(
        &self,
        method: &str,
        path: &str,
        body: Value,
        authorization: Option<String>,
    ) -> usize {
        let mut requests = lock(&self.requests);
        requests.push(RecordedRequest {
            method: method.into(),
            path: path.into(),
            body,
            authorization,
        });
        requests.len()
    }

    fn next_chat(&self) -> (Mode, usize) {
        let mut guard = lock(&self.mode);
        guard.1 += 1;
        (guard.0.clone(), guard.1 - 1)
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai_chat))
        .route("/api/chat", post(ollama_chat))
        .route("/v1/models", get(models))
        .route("/api/tags", get(tags))
        .route("/_fake/mode", post(post_mode).get(get_mode))
        .route("/_fake/requests", get(list_requests))
        .fallback(fallback)
        .with_state(shared)
}

fn body_value(body: &Bytes) -> Result<Value, Value> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|_| Value::String(String::from_utf8_lossy(body).into()))
}

async fn openai_chat(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    chat(&s, Protocol::OpenAi, &headers, body).await
}

async fn ollama_chat(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    chat(&s, Protocol::Ollama, &headers, body).await
}

async fn chat(s: &Shared, protocol: Protocol, headers: &HeaderMap, body: Bytes) -> Response {
    let path = match protocol {
        Protocol::OpenAi => "/v1/chat/completions",
        Protocol::Ollama => "/api/chat",
    };
    let parsed = body_value(&body);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let number = s.record_with(
        "POST",
        path,
        parsed.clone().unwrap_or_else(|raw| raw),
        authorization,
    );
    let req = match parsed {
        Ok(req) if req.is_object() => req,
        _ => {
            return error(
                protocol,
                StatusCode::BAD_REQUEST,
                "the request body is not a JSON object",
            );
        }
    };
    let (mode, seq) = s.next_chat();
    if let Some(response) = fault(protocol, &mode, seq) {
        return response;
    }
    if let Mode::Slow { delay_ms } = mode {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    let view = request_view(protocol, &req, &s.model);
    let responder = lock(&s.responder).clone();
    let content = responder
        .and_then(|f| f(&view))
        .unwrap_or_else(|| generate::content(&view, &mode));
    let answer = Answer {
        prompt_tokens: tokens(
            view.messages
                .iter()
                .map(|m| m.content.chars().count())
                .sum(),
        ),
        completion_tokens: tokens(content.chars().count()),
        model: view.model,
        content,
    };
    match protocol {
        Protocol::OpenAi => {
            let include_usage = req.pointer("/stream_options/include_usage") == Some(&json!(true));
            openai_response(&answer, number, view.stream, include_usage)
        }
        Protocol::Ollama => ollama_response(&answer, view.stream),
    }
}

struct Answer {
    model: String,
    content: String,
    prompt_tokens: usize,
    completion_tokens: usize,
}

fn openai_response(a: &Answer, number: usize, stream: bool, include_usage: bool) -> Response {
    let (id, model) = (format!("chatcmpl-fake-{number}"), &a.model);
    let usage = json!({"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
        "total_tokens": a.prompt_tokens + a.completion_tokens});
    if !stream {
        let message = json!({"role": "assistant", "content": a.content});
        let choice = json!({"index": 0, "message": message, "finish_reason": "stop"});
        return Json(
            json!({"id": id, "object": "chat.completion", "created": CREATED,
            "model": model, "choices": [choice], "usage": usage}),
        )
        .into_response();
    }
    let chunk = |choices: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "choices": choices})
    };
    let delta = |delta: Value, finish: Value| {
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": finish}]))
    };
    let mut events = vec![delta(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in pieces(&a.content) {
        events.push(delta(json!({ "content": piece }), Value::Null));
    }
    events.push(delta(json!({}), json!("stop")));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage;
        events.push(last);
    }
    let mut lines: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    lines.push("data: [DONE]\n\n".into());
    stream_response(lines, "text/event-stream")
}

fn ollama_response(a: &Answer, stream: bool) -> Response {
    let line = |content: &str, done: bool| {
        json!({"model": a.model, "created_at": CREATED_AT, "done": done,
            "message": {"role": "assistant", "content": content}})
    };
    let mut last = line(&a.content, true);
    last["done_reason"] = json!("stop");
    last["prompt_eval_count"] = json!(a.prompt_tokens);
    last["eval_count"] = json!(a.completion_tokens);
    if !stream {
        return Json(last).into_response();
    }
    last["message"]["content"] = json!("");
    let mut lines: Vec<String> = pieces(&a.content)
        .iter()
        .map(|p| line(p, false).to_string())
        .collect();
    lines.push(last.to_string());
    lines.iter_mut().for_each(|l| l.push('\n'));
    stream_response(lines, "application/x-ndjson")
}

fn request_view(protocol: Protocol, req: &Value, default_model: &str) -> RequestView {
    let text = |content: &Value| match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text")?.as_str())
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    };
    let messages = req
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| Message {
            role: m
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or("user")
                .to_string(),
            content: m.get("content").map(text).unwrap_or_default(),
        })
        .collect();
    let (schema, name, json, stream_default) = match protocol {
        Protocol::OpenAi => {
            let format = req.get("response_format");
            let kind = format.and_then(|f| f.get("type")).and_then(Value::as_str);
            let spec = format.and_then(|f| f.get("json_schema"));
            let name = spec.and_then(|s| s.get("name")).and_then(Value::as_str);
            let schema = spec.and_then(|s| s.get("schema")).cloned();
            let json = matches!(kind, Some("json_schema" | "json_object"));
            (schema, name, json, false)
        }
        Protocol::Ollama => match req.get("format") {
            Some(schema @ Value::Object(_)) => {
                let title = schema.get("title").and_then(Value::as_str);
                (Some(schema.clone()), title, true, true)
            }
            Some(Value::String(f)) if f == "json" => (None, None, true, true),
            _ => (None, None, false, true),
        },
    };
    RequestView {
        protocol,
        model: req
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(default_model)
            .to_string(),
        messages,
        json: json || schema.is_some(),
        schema,
        schema_name: name.map(str::to_string),
        stream: req
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(stream_default),
    }
}

fn tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}

/// Split after each space; pieces over 16 characters are cut into 16-character parts.
fn pieces(content: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in content.split_inclusive(' ') {
        let chars: Vec<char> = word.chars().collect();
        out.extend(chars.chunks(16).map(|c| c.iter().collect::<String>()));
    }
    out
}

fn stream_response(lines: Vec<String>, content_type: &'static str) -> Response {
    let stream = futures_util::stream::iter(lines.into_iter().map(Ok::<_, Infallible>));
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (headers, Body::from_stream(stream)).into_response()
}

fn fault(protocol: Protocol, mode: &Mode, seq: usize) -> Option<Response> {
    let fail = match mode {
        Mode::Http500 => true,
        Mode::Flaky => seq.is_multiple_of(2),
        Mode::FailFirst { n } => seq < *n,
        Mode::RateLimited if seq.is_multiple_of(2) => {
            let mut r = error(
                protocol,
                StatusCode::TOO_MANY_REQUESTS,
                "rate limited (fake LLM)",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("0"));
            return Some(r);
        }
        _ => false,
    };
    fail.then(|| {
        error(
            protocol,
            StatusCode::INTERNAL_SERVER_ERROR,
            "injected server error (fake LLM)",
        )
    })
}

fn error(protocol: Protocol, status: StatusCode, message: &str) -> Response {
    let kind = match status {
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND => "invalid_request_error",
        _ => "server_error",
    };
    let body = match protocol {
        Protocol::OpenAi => {
            json!({"error": {"message": message, "type": kind, "code": status.as_u16()}})
        }
        Protocol::Ollama => json!({"error": message}),
    };
    (status, Json(body)).into_response()
}

async fn models(State(s): State<Arc<Shared>>) -> Json<Value> {
    s.record("GET", "/v1/models", Value::Null);
    Json(
        json!({"object": "list", "data": [{"id": s.model, "object": "model", "created": CREATED,
        "owned_by": "kasten-fakellm"}]}),
    )
}

async fn tags(State(s): State<Arc<Shared>>) -> Json<Value> {
    s.record("GET", "/api/tags", Value::Null);
    Json(
        json!({"models": [{"name": s.model, "model": s.model, "modified_at": CREATED_AT, "size": 0}]}),
    )
}

async fn post_mode(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    match serde_json::from_slice::<Mode>(&body) {
        Ok(mode) => {
            s.set_mode(mode.clone());
            Json(mode).into_response()
        }
        Err(e) => {
            let message = format!("expected {{\"mode\": ...}}: {e}");
            error(Protocol::Ollama, StatusCode::BAD_REQUEST, &message)
        }
    }
}

async fn get_mode(State(s): State<Arc<Shared>>) -> Json<Mode> {
    Json(s.mode())
}

async fn list_requests(State(s): State<Arc<Shared>>) -> Json<Vec<RecordedRequest>> {
    Json(s.requests())
}

async fn fallback(State(s): State<Arc<Shared>>, method: Method, uri: Uri, body: Bytes) -> Response {
    s.record(
        method.as_str(),
        uri.path(),
        body_value(&body).unwrap_or_else(|raw| raw),
    );
    let message = format!("no route for {method} {}", uri.path());
    error(Protocol::OpenAi, StatusCode::NOT_FOUND, &message)
}
