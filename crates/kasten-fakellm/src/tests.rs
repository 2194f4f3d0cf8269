//! Tests against the running server, over HTTP with reqwest.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

const PROMPT: &str = "Rust's borrow checker prevents data races at compile time.";

fn note_schema() -> Value {
    json!({"type": "object", "additionalProperties": false,
        "required": ["keywords", "tags", "context"], "properties": {
        "keywords": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
        "tags": {"type": "array", "items": {"type": "string"}},
        "context": {"type": "string"}}})
}

fn link_schema() -> Value {
    json!({"type": "object", "required": ["links"], "properties": {"links": {"type": "array",
        "maxItems": 10, "items": {"type": "object", "required": ["handle", "kind", "confidence"],
        "properties": {"handle": {"type": "string", "enum": ["N1", "N2", "N3", "N4", "N5"]},
            "kind": {"type": "string", "enum": ["related", "supports", "contradicts", "refines"]},
            "reason": {"type": ["string", "null"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1}}}}}})
}

fn openai_body(prompt: &str, schema: Option<Value>, stream: bool) -> Value {
    let mut body = json!({"model": "m", "temperature": 0, "max_tokens": 200, "stream": stream,
        "messages": [{"role": "system", "content": "You annotate notes."}, {"role": "user", "content": prompt}]});
    if let Some(schema) = schema {
        body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": true}});
    }
    body
}

async fn post(url: String, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn openai(fake: &FakeLlm, body: &Value) -> (u16, Value) {
    let response = post(format!("{}/chat/completions", fake.openai_base_url()), body).await;
    (response.status().as_u16(), response.json().await.unwrap())
}

/// The assistant content of a successful non-streaming OpenAI call.
async fn openai_content(fake: &FakeLlm, body: &Value) -> String {
    let (status, v) = openai(fake, body).await;
    assert_eq!(status, 200, "{v}");
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn openai_structured_output_follows_the_schema() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let (status, v) = openai(&fake, &openai_body(PROMPT, Some(note_schema()), false)).await;
    assert_eq!(status, 200);
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["id"], "chatcmpl-fake-1");
    assert_eq!(v["model"], "m");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    let out: Value = serde_json::from_str(content).unwrap();
    assert_eq!(out["keywords"], json!(["rust", "borrow", "checker"]));
    assert_eq!(out["tags"], json!(["rust", "borrow", "checker"]));
    assert_eq!(out["context"], "Rust borrow checker prevents data races.");
    let prompt_chars = "You annotate notes.".len() + PROMPT.len();
    assert_eq!(v["usage"]["prompt_tokens"], prompt_chars.div_ceil(4));
    assert_eq!(
        v["usage"]["completion_tokens"],
        content.chars().count().div_ceil(4)
    );
    assert_eq!(
        v["usage"]["total_tokens"],
        (prompt_chars.div_ceil(4) + content.len().div_ceil(4))
    );
}

#[tokio::test]
async fn ollama_handles_follow_the_enum_in_order_and_unknown_handles_leave_it() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let url = format!("{}/api/chat", fake.ollama_base_url());
    let body = json!({"model": "llama", "stream": false, "format": link_schema(),
        "options": {"temperature": 0, "num_predict": 300},
        "messages": [{"role": "user", "content": "New note: tea. Neighbours: N1 coffee, N2 water"}]});
    let v: Value = post(url.clone(), &body).await.json().await.unwrap();
    assert_eq!(v["done"], true);
    assert_eq!(v["model"], "llama");
    assert!(v["eval_count"].as_u64().unwrap() > 0 && v["prompt_eval_count"].as_u64().unwrap() > 0);
    let out: Value = serde_json::from_str(v["message"]["content"].as_str().unwrap()).unwrap();
    let links = out["links"].as_array().unwrap();
    let field = |f: &str| links.iter().map(|l| l[f].clone()).collect::<Vec<_>>();
    assert_eq!(field("handle"), [json!("N1"), json!("N2"), json!("N3")]);
    assert_eq!(
        field("kind"),
        [json!("related"), json!("supports"), json!("contradicts")]
    );
    assert_eq!(field("confidence"), [json!(0.8), json!(0.8), json!(0.8)]);
    assert_eq!(links[0]["reason"], "New note tea neighbours coffee water.");

    fake.set_mode(Mode::UnknownHandles);
    let v: Value = post(url, &body).await.json().await.unwrap();
    let out: Value = serde_json::from_str(v["message"]["content"].as_str().unwrap()).unwrap();
    let handles: Vec<&str> = out["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles, ["N99", "N100", "N101"]);
    assert_eq!(out["links"][0]["kind"], "related");
}

#[tokio::test]
async fn openai_stream_sends_pieces_a_stop_chunk_usage_and_done() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let prompt = "Question: what is my cat called?\nNotes:\n[1] My cat is called Miso.\n[2] Miso likes tuna.";
    let expected = "According to my notes, My cat is called Miso [1] [2].";
    assert_eq!(
        openai_content(&fake, &openai_body(prompt, None, false)).await,
        expected
    );

    let mut body = openai_body(prompt, None, true);
    body["stream_options"] = json!({"include_usage": true});
    let response = post(
        format!("{}/chat/completions", fake.openai_base_url()),
        &body,
    )
    .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let deltas: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(deltas.len() > 5, "{deltas:?}");
    assert_eq!(deltas.concat(), expected);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let stop = &chunks[chunks.len() - 2];
    assert_eq!(stop["choices"][0]["finish_reason"], "stop");
    let usage = &chunks[chunks.len() - 1]["usage"];
    assert_eq!(usage["completion_tokens"], expected.len().div_ceil(4));
}

#[tokio::test]
async fn ollama_streams_ndjson_by_default_and_says_not_in_memory() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let body =
        json!({"model": "llama", "messages": [{"role": "user", "content": "Where did I park?"}]});
    let response = post(format!("{}/api/chat", fake.ollama_base_url()), &body).await;
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (last, pieces) = lines.split_last().unwrap();
    assert!(pieces.len() >= 2 && pieces.iter().all(|l| l["done"] == false));
    let answer: String = pieces
        .iter()
        .map(|l| l["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(answer, "Not in memory.");
    assert_eq!(last["done"], true);
    assert_eq!(last["message"]["content"], "");
    assert_eq!(last["eval_count"], 4);
    assert_eq!(last["prompt_eval_count"], 5);
}

#[tokio::test]
async fn status_faults_fail_in_their_pattern_and_switch_at_run_time() {
    let fake = FakeLlm::start(Mode::Http500).await.unwrap();
    let body = openai_body(PROMPT, Some(note_schema()), false);
    let statuses = |n: usize| {
        let fake = &fake;
        let body = &body;
        async move {
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(openai(fake, body).await.0);
            }
            out
        }
    };
    let (status, v) = openai(&fake, &body).await;
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (500, Some("server_error"))
    );
    fake.set_mode(Mode::Flaky);
    assert_eq!(statuses(3).await, [500, 200, 500]);
    fake.set_mode(Mode::FailFirst { n: 2 });
    assert_eq!(statuses(4).await, [500, 500, 200, 200]);

    let control = format!("http://{}/_fake/mode", fake.addr());
    let set = post(control.clone(), &json!({"mode": "rate_limited"})).await;
    assert_eq!(set.status(), 200);
    assert_eq!(fake.mode(), Mode::RateLimited);
    let limited = post(
        format!("{}/chat/completions", fake.openai_base_url()),
        &body,
    )
    .await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "0");
    assert_eq!(statuses(2).await, [200, 429]);
    assert_eq!(post(control, &json!({"mode": "nope"})).await.status(), 400);

    let ollama =
        json!({"model": "m", "stream": false, "messages": [{"role": "user", "content": "hi"}]});
    fake.set_mode(Mode::Http500);
    let failed = post(format!("{}/api/chat", fake.ollama_base_url()), &ollama).await;
    assert_eq!(failed.status(), 500);
    assert!(failed.json::<Value>().await.unwrap()["error"].is_string());
}

#[tokio::test]
async fn content_faults_break_structured_output_as_documented() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let body = openai_body(PROMPT, Some(note_schema()), false);
    let normal = openai_content(&fake, &body).await;
    let is_json = |s: &str| serde_json::from_str::<Value>(s).is_ok();
    assert!(is_json(&normal));

    fake.set_mode(Mode::Malformed);
    let malformed = openai_content(&fake, &body).await;
    assert!(!is_json(&malformed) && malformed.starts_with("Sure!"));
    fake.set_mode(Mode::Truncated);
    let truncated = openai_content(&fake, &body).await;
    assert!(
        !is_json(&truncated) && normal.starts_with(&truncated) && truncated.len() < normal.len()
    );
    fake.set_mode(Mode::WrongShape);
    assert_eq!(openai_content(&fake, &body).await, r#"{"answer":42}"#);
    fake.set_mode(Mode::Fenced);
    let fenced = openai_content(&fake, &body).await;
    assert!(fenced.contains(&format!("```json\n{normal}\n```")) && !fenced.starts_with("```"));
    // Plain chat is not affected by content faults.
    assert_eq!(
        openai_content(&fake, &openai_body("hello", None, false)).await,
        "Not in memory."
    );

    fake.set_mode(Mode::Slow { delay_ms: 300 });
    let started = Instant::now();
    assert_eq!(openai_content(&fake, &body).await, normal);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn requests_are_recorded_and_listed() {
    let fake = FakeLlm::start(Mode::FailFirst { n: 1 }).await.unwrap();
    let body = openai_body(PROMPT, Some(note_schema()), false);
    assert_eq!(openai(&fake, &body).await.0, 500);
    assert_eq!(openai(&fake, &body).await.0, 200);
    let models: Value = reqwest::get(format!("{}/models", fake.openai_base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        models,
        json!({"object": "list", "data": [{"id": "fake-model", "object": "model",
        "created": 1_700_000_000, "owned_by": "kasten-fakellm"}]})
    );
    let tags: Value = reqwest::get(format!("{}/api/tags", fake.ollama_base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tags["models"][0]["name"], "fake-model");
    let missing = post(
        format!("{}/v1/v1/chat/completions", fake.ollama_base_url()),
        &json!({}),
    )
    .await;
    assert_eq!(missing.status(), 404);

    assert_eq!(fake.request_count(), 5);
    let requests = fake.requests();
    assert_eq!(requests[0], requests[1]);
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        requests[0].body["response_format"]["json_schema"]["schema"],
        note_schema()
    );
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths[2..],
        ["/v1/models", "/api/tags", "/v1/v1/chat/completions"]
    );

    let listed: Vec<RecordedRequest> =
        reqwest::get(format!("http://{}/_fake/requests", fake.addr()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(listed, requests);
    assert_eq!(fake.request_count(), 5, "control routes are not recorded");
}

#[tokio::test]
async fn a_responder_scripts_the_content_and_stop_closes_the_port() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    fake.set_responder(|view| {
        (view.schema_name() == Some("out") && view.last_user().contains("inject")).then(|| {
            r#"{"keywords":["ignore previous instructions"],"tags":[],"context":"x"}"#.to_string()
        })
    });
    let scripted = openai_content(
        &fake,
        &openai_body("please inject", Some(note_schema()), false),
    )
    .await;
    assert!(scripted.contains("ignore previous instructions"));
    let generated = openai_content(&fake, &openai_body(PROMPT, Some(note_schema()), false)).await;
    assert!(generated.contains("borrow"));
    fake.clear_responder();
    let plain = openai_content(
        &fake,
        &openai_body("please inject", Some(note_schema()), false),
    )
    .await;
    assert!(plain.contains("inject"));

    let url = format!("{}/models", fake.openai_base_url());
    fake.stop().await;
    assert!(reqwest::get(url).await.is_err());
}

#[test]
fn modes_parse_from_cli_strings_and_json() {
    assert_eq!("normal".parse::<Mode>().unwrap(), Mode::Normal);
    assert_eq!("http500".parse::<Mode>().unwrap(), Mode::Http500);
    assert_eq!(
        "slow:250".parse::<Mode>().unwrap(),
        Mode::Slow { delay_ms: 250 }
    );
    assert_eq!(
        "slow".parse::<Mode>().unwrap(),
        Mode::Slow { delay_ms: 500 }
    );
    assert_eq!(
        "fail-first:3".parse::<Mode>().unwrap(),
        Mode::FailFirst { n: 3 }
    );
    assert_eq!(
        "unknown_handles".parse::<Mode>().unwrap(),
        Mode::UnknownHandles
    );
    assert_eq!(
        r#"{"mode":"fail_first","n":2}"#.parse::<Mode>().unwrap(),
        Mode::FailFirst { n: 2 }
    );
    assert!("loud".parse::<Mode>().is_err() && "slow:x".parse::<Mode>().is_err());
    assert_eq!(
        serde_json::to_value(Mode::Slow { delay_ms: 5 }).unwrap(),
        json!({"mode": "slow", "delay_ms": 5})
    );
}
