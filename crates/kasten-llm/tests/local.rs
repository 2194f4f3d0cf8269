//! The built-in model for real: SmolLM2-135M-Instruct through llama.cpp in this process.
//! Needs the model `scripts/setup` installs (the test fails and says so without it).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kasten_llm::*;
use serde_json::json;

fn client() -> LlmClient {
    let path = builtin_model_path(|k| std::env::var(k).ok());
    assert!(
        path.is_file(),
        "the built-in model is not at {}: run scripts/setup",
        path.display()
    );
    let config = LlmConfig {
        provider: Provider::Local,
        base_url: path.display().to_string(),
        model: BUILTIN_MODEL_NAME.into(),
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
