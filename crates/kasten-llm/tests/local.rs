//! A built-in model for real: SmolLM2-135M-Instruct through llama.cpp in this process.
//! Needs the model `scripts/setup` installs (the test fails and says so without it).
#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use kasten_llm::*;
use serde_json::json;

/// The quick built-in model (SmolLM2-135M): these tests are about llama.cpp in process,
/// not about what a model writes, and it answers several times as fast as the default.
fn quick_model() -> std::path::PathBuf {
    QUICK_BUILTIN
        .installed(|k| std::env::var(k).ok())
        .unwrap_or_else(|| panic!("{} is not installed: run scripts/setup", QUICK_BUILTIN.name))
}

fn client() -> LlmClient {
    let path = quick_model();
    let config = LlmConfig {
        provider: Provider::Local,
        base_url: path.display().to_string(),
        model: QUICK_BUILTIN.name.into(),
        api_key: None,
    };
    let opts = ClientOptions {
        timeout: Duration::from_secs(300),
        ..ClientOptions::default()
    };
    LlmClient::new(config, opts).unwrap()
}

#[tokio::test]
async fn structured_answers_follow_the_schema_grammar_and_chat_streams() {
    let c = client();
    // an enum the model would never pick by itself, and a length limit: the grammar holds
    let schema = json!({
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": ["N7", "N9"]},
            "colour": {"type": "string", "enum": ["zebra-striped", "plaid"]},
            "reason": {"type": "string", "maxLength": 12}
        },
        "required": ["target", "colour", "reason"],
        "additionalProperties": false
    });
    let req = StructuredRequest {
        messages: vec![
            Message::system("Answer with JSON."),
            Message::user("Which handle is about the dog? Say why."),
        ],
        schema_name: "pick".into(),
        schema,
        temperature: 0.0,
        max_tokens: Some(80),
    };
    let r = c.structured(&req, &|_| Ok(())).await.unwrap();
    assert!(!r.repaired && r.attempts == 1, "{r:?}");
    // it ran on one of ggml's CPU variants, the one this processor runs best
    assert!(cpu_variant().is_some_and(|v| !v.is_empty()));
    let t = r.value["target"].as_str().unwrap_or_default();
    assert!(["N7", "N9"].contains(&t), "{}", r.value);
    assert!(["zebra-striped", "plaid"].contains(&r.value["colour"].as_str().unwrap_or("")));
    assert!(r.value["reason"].as_str().unwrap_or("").chars().count() <= 12);
    assert!(!r.usage.estimated && r.usage.prompt_tokens > 10 && r.usage.completion_tokens > 3);
    let status = c.local().map(LocalModel::status).unwrap_or_default();
    assert!(
        status.loaded && status.model_bytes > 10_000_000,
        "{status:?}"
    );

    // streaming: pieces arrive one by one and add up to the answer
    let mut pieces: Vec<String> = Vec::new();
    let req = ChatRequest {
        messages: vec![Message::user("Name three fruits.")],
        temperature: 0.0,
        max_tokens: Some(24),
        grammar: None,
    };
    let resp = c
        .chat_stream(&req, &mut |p: &str| pieces.push(p.to_owned()))
        .await
        .unwrap();
    assert!(pieces.len() > 3, "{pieces:?}");
    assert_eq!(pieces.concat(), resp.text);
    assert!(resp.usage.completion_tokens <= 24);

    // a grammar on a chat answer is obeyed too
    let req = ChatRequest {
        messages: vec![Message::user("Is the sky green?")],
        temperature: 0.0,
        max_tokens: Some(8),
        grammar: Some("root ::= \"yes\" | \"no\"".into()),
    };
    let resp = c.chat(&req).await.unwrap();
    assert!(
        ["yes", "no"].contains(&resp.text.as_str()),
        "{:?}",
        resp.text
    );
}

#[tokio::test]
async fn a_prompt_that_starts_like_the_last_one_reuses_its_cache_and_answers_the_same() {
    let system = "You label notes. Example: note 'Ada walks her dog Pixel on the beach' \
                  gives 'About Ada's dog: a beach walk.' Answer with one short sentence.";
    let ask = |note: &str| ChatRequest {
        messages: vec![Message::system(system), Message::user(note)],
        temperature: 0.0,
        max_tokens: Some(20),
        grammar: None,
    };
    let warm = client();
    let a = warm
        .chat(&ask("Sam paid 40 euros for concert tickets."))
        .await
        .unwrap();
    let b = warm
        .chat(&ask("Maria repotted the basil on the balcony."))
        .await
        .unwrap();
    let s = warm.local().map(LocalModel::status).unwrap_or_default();
    // the second prompt shares the system part with the first: it is not read again
    assert!(s.prompt_tokens_reused >= 20, "{s:?}");
    assert!(s.prompt_tokens_reused < s.prompt_tokens, "{s:?}");
    // and the answer is what a fresh model gives for it
    let cold = client();
    let b_cold = cold
        .chat(&ask("Maria repotted the basil on the balcony."))
        .await
        .unwrap();
    assert_eq!(b.text, b_cold.text);
    assert_eq!(b.usage.prompt_tokens, b_cold.usage.prompt_tokens);
    // the same prompt again (all but its last token reused) gives the same answer as well
    let a2 = warm
        .chat(&ask("Sam paid 40 euros for concert tickets."))
        .await
        .unwrap();
    assert_eq!(a.text, a2.text);
}

/// A client for the built-in model answering at most `batch` requests together.
fn client_with_batch(batch: usize) -> LlmClient {
    let path = quick_model();
    let config = LlmConfig {
        provider: Provider::Local,
        base_url: path.display().to_string(),
        model: QUICK_BUILTIN.name.into(),
        api_key: None,
    };
    let opts = ClientOptions {
        timeout: Duration::from_secs(300),
        ..ClientOptions::default()
    };
    let local = LocalModel::new(LocalOptions {
        batch,
        ..LocalOptions::new(&path)
    })
    .unwrap();
    LlmClient::with_local(config, opts, local).unwrap()
}

fn annotate(note: &str, grammar: Option<String>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(
                "You annotate notes: keywords, tags and a one-sentence context. Answer with JSON.",
            ),
            Message::user(format!("Note: {note}")),
        ],
        temperature: 0.0,
        max_tokens: Some(max_tokens),
        grammar,
    }
}

const NOTES: [&str; 4] = [
    "Maria repotted the basil on the balcony after the first frost of November.",
    "The deploy script for the billing service needs the staging key since Tuesday.",
    "Ada walks her dog Pixel on the beach every morning before work.",
    "Our rent goes up to 1,300 euros a month from September.",
];

/// Keywords as JSON, each lower-case words (a grammar the model follows only when made to).
fn annotation_grammar() -> String {
    r#"root ::= "{\"keywords\": [" word ("," " " word)* "]}"
word ::= "\"" [a-z] [a-z ]* "\""
"#
    .to_owned()
}

#[tokio::test]
async fn answers_written_together_are_those_written_one_at_a_time() {
    let grammar = annotation_grammar();
    // two free answers and two under a grammar, of different lengths
    let requests: Vec<ChatRequest> = NOTES
        .iter()
        .enumerate()
        .map(|(i, n)| annotate(n, (i % 2 == 1).then(|| grammar.clone()), 24 + 16 * i as u32))
        .collect();
    let one = client_with_batch(1);
    let mut alone = Vec::new();
    for r in &requests {
        alone.push(one.chat(r).await.unwrap());
    }
    let s1 = one.local().map(LocalModel::status).unwrap_or_default();
    assert_eq!(s1.batch_peak, 1, "{s1:?}");

    let four = client_with_batch(4);
    let together = futures_util::future::join_all(requests.iter().map(|r| four.chat(r))).await;
    for (a, b) in alone.iter().zip(together) {
        let b = b.unwrap();
        assert_eq!(a.text, b.text);
        assert_eq!(a.usage.prompt_tokens, b.usage.prompt_tokens);
        assert_eq!(a.usage.completion_tokens, b.usage.completion_tokens);
    }
    let s4 = four.local().map(LocalModel::status).unwrap_or_default();
    // they were written together: fewer decodes than tokens
    assert!(s4.batch_peak >= 2, "{s4:?}");
    assert!(s4.generation_steps < s4.generated_tokens, "{s4:?}");
    assert_eq!(s4.generated_tokens, s1.generated_tokens, "{s4:?} {s1:?}");
    // the shared instructions were read once, then shared between the sequences
    assert!(s4.prompt_tokens_reused > 0, "{s4:?}");
}

#[tokio::test]
async fn a_cancelled_answer_leaves_the_others_written_together_intact() {
    let one = client_with_batch(1);
    let mut alone = Vec::new();
    for n in NOTES {
        alone.push(one.chat(&annotate(n, None, 48)).await.unwrap().text);
    }

    let four = client_with_batch(4);
    let pieces = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let notify = std::sync::Arc::new(tokio::sync::Notify::new());
    let (p, n) = (pieces.clone(), notify.clone());
    let mut on_piece = move |_: &str| {
        p.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        n.notify_one();
    };
    let cancelled_req = annotate(NOTES[1], None, 48);
    // the second request is dropped once it has written two pieces: its sequence stops,
    // the other three go on
    let cancelled = async {
        tokio::select! {
            r = four.chat_stream(&cancelled_req, &mut on_piece) => Some(r),
            () = async {
                while pieces.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                    notify.notified().await;
                }
            } => None,
        }
    };
    let (q0, q2, q3) = (
        annotate(NOTES[0], None, 48),
        annotate(NOTES[2], None, 48),
        annotate(NOTES[3], None, 48),
    );
    let (r0, c, r2, r3) = tokio::join!(four.chat(&q0), cancelled, four.chat(&q2), four.chat(&q3));
    assert!(c.is_none(), "the request ran to its end: {c:?}");
    assert_eq!(r0.unwrap().text, alone[0]);
    assert_eq!(r2.unwrap().text, alone[2]);
    assert_eq!(r3.unwrap().text, alone[3]);
    let s = four.local().map(LocalModel::status).unwrap_or_default();
    assert!(s.batch_peak >= 2, "{s:?}");
    // what the cancelled sequence left in its cache serves the same prompt again
    let again = four.chat(&cancelled_req).await.unwrap();
    assert_eq!(again.text, alone[1]);
}
