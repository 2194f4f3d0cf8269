//! The client against `kasten-fakellm` (both protocols, every fault mode) and, for what the
//! fake cannot do (no usage, deltas split mid-line and mid-character), a raw socket server.
#![allow(clippy::unwrap_used)] // helpers outside #[test] functions

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kasten_fakellm::{FakeLlm, Mode, RecordedRequest};
use kasten_llm::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BOTH: [Provider; 2] = [Provider::Openai, Provider::Ollama];

fn opts() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        max_retries: 2,
        backoff: Duration::from_millis(10),
        max_retry_after: Duration::from_millis(100),
    }
}

fn client_for(provider: Provider, base_url: String, opts: ClientOptions) -> LlmClient {
    let config = LlmConfig {
        provider,
        base_url,
        model: "test-model".into(),
        api_key: Some("sk-test".into()),
    };
    LlmClient::new(config, opts).unwrap()
}

async fn setup(provider: Provider, mode: Mode) -> (FakeLlm, LlmClient) {
    let fake = FakeLlm::start(mode).await.unwrap();
    let base = match provider {
        Provider::Openai | Provider::Local => fake.openai_base_url(),
        Provider::Ollama => fake.ollama_base_url(),
    };
    let client = client_for(provider, base, opts());
    (fake, client)
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "keywords": {"type": "array", "items": {"type": "string"}},
            "context": {"type": "string"}
        },
        "required": ["keywords", "context"]
    })
}

fn request() -> StructuredRequest {
    StructuredRequest {
        messages: vec![
            Message::system("Annotate the note."),
            Message::user("The Rust borrow checker prevents data races"),
        ],
        schema_name: "note_annotation".into(),
        schema: schema(),
        temperature: 0.0,
        max_tokens: Some(256),
    }
}

fn validate(v: &Value) -> Result<(), String> {
    match (
        v.get("keywords").and_then(Value::as_array),
        v.get("context"),
    ) {
        (Some(_), Some(Value::String(_))) => Ok(()),
        _ => Err("expected an object with 'keywords' (array) and 'context' (string)".into()),
    }
}

fn chat_requests(fake: &FakeLlm) -> Vec<RecordedRequest> {
    let r = fake.requests().into_iter();
    r.filter(|r| r.path.ends_with("/chat/completions") || r.path == "/api/chat")
        .collect()
}

#[tokio::test]
async fn structured_happy_path_sends_the_schema_and_reports_server_usage() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Normal).await;
        let r = client.structured(&request(), &validate).await.unwrap();
        assert_eq!(r.value["keywords"], json!(["rust", "borrow", "checker"]));
        assert_eq!((r.attempts, r.repaired), (1, false));
        assert_eq!(r.model, "test-model");
        assert!(!r.usage.estimated && r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
        let reqs = chat_requests(&fake);
        assert_eq!(reqs.len(), 1);
        let body = &reqs[0].body;
        assert_eq!(body["stream"], json!(false));
        assert_eq!(body["model"], json!("test-model"));
        match provider {
            Provider::Openai => {
                assert_eq!(reqs[0].path, "/v1/chat/completions");
                let rf = &body["response_format"];
                assert_eq!(rf["type"], json!("json_schema"));
                assert_eq!(rf["json_schema"]["name"], json!("note_annotation"));
                assert_eq!(rf["json_schema"]["schema"], schema());
                assert_eq!(rf["json_schema"]["strict"], json!(true));
                assert_eq!(body["max_tokens"], json!(256));
            }
            Provider::Ollama => {
                assert_eq!(reqs[0].path, "/api/chat");
                assert_eq!(body["format"], schema());
                assert_eq!(body["options"]["num_predict"], json!(256));
            }
            Provider::Local => unreachable!("the fake server speaks HTTP"),
        }
    }
}

#[tokio::test]
async fn fenced_output_is_accepted_without_repair() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Fenced).await;
        let r = client.structured(&request(), &validate).await.unwrap();
        assert_eq!((r.attempts, r.repaired), (1, false));
        assert_eq!(
            r.value["context"],
            json!("Rust borrow checker prevents data races.")
        );
        assert_eq!(fake.request_count(), 1);
    }
}

#[tokio::test]
async fn malformed_wrong_shape_and_truncated_get_one_repair_then_bad_output() {
    let cases = [
        (Mode::Malformed, "malformed", "Sure! Here you go"),
        (
            Mode::WrongShape,
            "does not fit the schema",
            "{\"answer\":42}",
        ),
        (Mode::Truncated, "cut off", "{"),
    ];
    for provider in BOTH {
        for (mode, reason, raw) in &cases {
            let (fake, client) = setup(provider, mode.clone()).await;
            let e = client.structured(&request(), &validate).await.unwrap_err();
            let LlmError::BadOutput {
                reason: why,
                raw: got,
            } = &e
            else {
                panic!("{mode:?}: expected BadOutput, got {e:?}");
            };
            assert!(why.contains(reason), "{mode:?}: {why}");
            assert!(got.contains(raw), "{mode:?}: {got}");
            assert!(e.to_string().contains("repair"), "{e}");
            let reqs = chat_requests(&fake);
            assert_eq!(reqs.len(), 2, "{mode:?}: exactly one repair request");
            // the repair request carries the bad answer and what was wrong with it
            let msgs = reqs[1].body["messages"].as_array().unwrap().clone();
            assert_eq!(msgs.len(), 4);
            assert_eq!(msgs[2]["role"], json!("assistant"));
            assert!(msgs[2]["content"].as_str().unwrap().contains(raw));
            let ask = msgs[3]["content"].as_str().unwrap();
            assert!(
                ask.contains(reason) && ask.contains("only one JSON value"),
                "{ask}"
            );
        }
    }
}

#[tokio::test]
async fn a_successful_repair_sums_usage() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Normal).await;
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        fake.set_responder(move |_| {
            Some(match seen.fetch_add(1, Ordering::SeqCst) {
                0 => "I think {\"keywords\": [\"a\"], \"context\": \"b\",}".into(),
                _ => "{\"keywords\": [\"a\"], \"context\": \"b\"}".into(),
            })
        });
        let r = client.structured(&request(), &validate).await.unwrap();
        assert_eq!((r.attempts, r.repaired), (2, true));
        assert_eq!(r.value, json!({"keywords": ["a"], "context": "b"}));
        let first_prompt = Usage::estimate_tokens("Annotate the note.")
            + Usage::estimate_tokens("The Rust borrow checker prevents data races");
        assert!(r.usage.prompt_tokens > 2 * first_prompt, "{:?}", r.usage);
        assert!(!r.usage.estimated);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    for provider in BOTH {
        // HTTP 500 every time: max_retries + 1 requests, then a readable Http error
        let (fake, client) = setup(provider, Mode::Http500).await;
        let e = client.structured(&request(), &validate).await.unwrap_err();
        assert!(matches!(e, LlmError::Http { status: 500, .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with("the LLM server answered HTTP 500: "),
            "{text}"
        );
        assert!(
            !text.contains('{'),
            "the server's message, not its JSON: {text}"
        );
        assert_eq!(fake.request_count(), 3);

        fake.set_mode(Mode::Flaky);
        let r = client.structured(&request(), &validate).await.unwrap();
        assert_eq!(r.attempts, 2);

        fake.set_mode(Mode::FailFirst { n: 2 });
        let r = client.structured(&request(), &validate).await.unwrap();
        assert_eq!(r.attempts, 3);

        fake.set_mode(Mode::FailFirst { n: 3 });
        let before = fake.request_count();
        let e = client.chat(&chat_request()).await.unwrap_err();
        assert!(matches!(e, LlmError::Http { status: 500, .. }), "{e:?}");
        assert_eq!(fake.request_count() - before, 3);
    }
}

#[tokio::test]
async fn rate_limits_are_retried_and_reported() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::RateLimited).await;
        let r = client.structured(&request(), &validate).await.unwrap();
        assert_eq!(r.attempts, 2);

        fake.set_mode(Mode::RateLimited);
        let no_retry = ClientOptions {
            max_retries: 0,
            ..opts()
        };
        let client = client_for(provider, client.config().base_url.clone(), no_retry);
        let e = client.structured(&request(), &validate).await.unwrap_err();
        assert_eq!(e, LlmError::RateLimited);
        assert!(e.is_transient());
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Normal).await;
        let url = format!("{}/nope", client.config().base_url);
        let client = client_for(provider, url, opts());
        let e = client.chat(&chat_request()).await.unwrap_err();
        assert!(matches!(e, LlmError::Http { status: 404, .. }), "{e:?}");
        assert!(!e.is_transient());
        assert_eq!(fake.request_count(), 1);
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_quickly() {
    let port = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    for provider in BOTH {
        let base = format!("http://127.0.0.1:{port}/v1");
        let client = client_for(provider, base.clone(), opts());
        let started = Instant::now();
        let e = client.structured(&request(), &validate).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        let LlmError::Unreachable { url, message } = &e else {
            panic!("expected Unreachable, got {e:?}");
        };
        assert_eq!(url, &base);
        assert!(message.to_lowercase().contains("refused"), "{message}");
        let text = e.to_string();
        assert!(text.starts_with(&format!("the LLM server at {base} is not reachable")));
        assert!(matches!(
            client.ping().await,
            Err(LlmError::Unreachable { .. })
        ));
    }
}

#[tokio::test]
async fn a_slow_server_times_out() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Slow { delay_ms: 3000 }).await;
        let fast = ClientOptions {
            timeout: Duration::from_millis(200),
            max_retries: 1,
            ..opts()
        };
        let client = client_for(provider, client.config().base_url.clone(), fast);
        let started = Instant::now();
        let e = client.structured(&request(), &validate).await.unwrap_err();
        assert_eq!(
            e,
            LlmError::Timeout {
                after: Duration::from_millis(200)
            }
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(fake.request_count(), 2);
        let mut sink = |_: &str| {};
        let e = client
            .chat_stream(&chat_request(), &mut sink)
            .await
            .unwrap_err();
        assert!(matches!(e, LlmError::Timeout { .. }), "{e:?}");
    }
}

fn chat_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(
                "Answer from these notes:\n[1] My cat is called Miso.\n[2] Miso likes fish.",
            ),
            Message::user("What is my cat called?"),
        ],
        temperature: 0.2,
        max_tokens: None,
        grammar: None,
    }
}

#[tokio::test]
async fn streaming_assembles_the_text_in_both_protocols() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Normal).await;
        let plain = client.chat(&chat_request()).await.unwrap();
        assert!(
            plain.text.starts_with("According to my notes"),
            "{}",
            plain.text
        );
        let mut pieces = Vec::new();
        let mut on_token = |t: &str| pieces.push(t.to_owned());
        let streamed = client
            .chat_stream(&chat_request(), &mut on_token)
            .await
            .unwrap();
        assert_eq!(streamed.text, plain.text);
        assert!(pieces.len() >= 3, "{pieces:?}");
        assert_eq!(pieces.concat(), plain.text);
        assert_eq!(streamed.usage, plain.usage);
        assert_eq!(streamed.model, "test-model");
        let reqs = chat_requests(&fake);
        assert_eq!(reqs[1].body["stream"], json!(true));
        if provider == Provider::Openai {
            assert_eq!(
                reqs[1].body["stream_options"],
                json!({"include_usage": true})
            );
            assert_eq!(reqs[1].body["temperature"], json!(0.2));
        }
    }
}

#[tokio::test]
async fn ping_lists_models() {
    for provider in BOTH {
        let (fake, client) = setup(provider, Mode::Normal).await;
        assert_eq!(client.ping().await.unwrap(), vec!["fake-model".to_owned()]);
        let path = &fake.requests()[0].path;
        assert_eq!(
            path,
            if provider == Provider::Openai {
                "/v1/models"
            } else {
                "/api/tags"
            }
        );
    }
}

/// A one-route HTTP/1.1 server that answers every request with `body`, written in 5-byte
/// pieces (so lines and UTF-8 characters are split across reads), then closes.
async fn raw_server(content_type: &'static str, body: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
                while !request_complete(&got) {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n"
                );
                let _ = sock.write_all(head.as_bytes()).await;
                for piece in body.as_bytes().chunks(5) {
                    let _ = sock.write_all(piece).await;
                    let _ = sock.flush().await;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

fn request_complete(b: &[u8]) -> bool {
    let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&b[..end]).to_lowercase();
    let len = head.lines().find_map(|l| l.strip_prefix("content-length:"));
    b.len() >= end + 4 + len.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn split_stream_chunks_and_missing_usage() {
    let text = "Grüße, 数据库 — done";
    let mut sse = String::from(": keep-alive\n\n");
    for piece in ["Grüße, ", "数据库", " — done"] {
        let chunk = json!({"model": "m1", "choices": [{"delta": {"content": piece}, "finish_reason": null}]});
        sse.push_str(&format!("data: {chunk}\r\n\r\n"));
    }
    sse.push_str(
        "data: {\"choices\": [{\"delta\": {}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n",
    );
    let base = raw_server("text/event-stream", sse).await;
    let client = client_for(Provider::Openai, format!("{base}/v1"), opts());
    let mut pieces = Vec::new();
    let mut on_token = |t: &str| pieces.push(t.to_owned());
    let r = client
        .chat_stream(&chat_request(), &mut on_token)
        .await
        .unwrap();
    assert_eq!(
        (r.text.as_str(), pieces.len(), r.model.as_str()),
        (text, 3, "m1")
    );
    // no usage from the server: ceil(chars / 4) of the messages and of the answer
    let prompt: u32 = chat_request()
        .messages
        .iter()
        .map(|m| Usage::estimate_tokens(&m.content))
        .sum();
    let expected = Usage {
        prompt_tokens: prompt,
        completion_tokens: 5,
        estimated: true,
    };
    assert_eq!(r.usage, expected);

    let ndjson = [
        json!({"model": "m2", "message": {"role": "assistant", "content": "数据"}, "done": false}),
        json!({"model": "m2", "message": {"role": "assistant", "content": "库"}, "done": false}),
        json!({"model": "m2", "message": {"role": "assistant", "content": ""}, "done": true, "eval_count": 2}),
    ];
    let body = ndjson.iter().map(|l| format!("{l}\n")).collect();
    let base = raw_server("application/x-ndjson", body).await;
    let client = client_for(Provider::Ollama, base, opts());
    let mut n = 0;
    let mut on_token = |_: &str| n += 1;
    let r = client
        .chat_stream(&chat_request(), &mut on_token)
        .await
        .unwrap();
    assert_eq!(
        (
            r.text.as_str(),
            r.usage.completion_tokens,
            r.usage.estimated
        ),
        ("数据库", 2, true)
    );
    assert_eq!(n, 2);

    // a stream that stops early is an error, not a shorter answer
    let cut = "data: {\"choices\": [{\"delta\": {\"content\": \"Hal\"}}]}\n\n".to_owned();
    let base = raw_server("text/event-stream", cut).await;
    let client = client_for(Provider::Openai, base, opts());
    let e = client
        .chat_stream(&chat_request(), &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Protocol(_)), "{e:?}");

    // a non-streaming answer without usage is estimated
    let plain = json!({"model": "m3", "choices": [{"message": {"role": "assistant", "content": "abcdefgh"}}]});
    let base = raw_server("application/json", plain.to_string()).await;
    let client = client_for(Provider::Openai, base, opts());
    let r = client.chat(&chat_request()).await.unwrap();
    assert_eq!(
        (
            r.usage.completion_tokens,
            r.usage.estimated,
            r.model.as_str()
        ),
        (2, true, "m3")
    );
}
