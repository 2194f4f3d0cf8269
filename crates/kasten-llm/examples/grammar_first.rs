//! What checking the grammar on the model's pick saves: the same JSON-constrained requests
//! to two built-in models in this process, one checking the pick first (the default), one
//! constraining the whole vocabulary at every step, alternated, with the generation speed of
//! each (the answers' equality is checked by the unit test of the same name in `local.rs`).
//!
//!   cargo run --locked --example grammar_first -- MODEL.gguf [ROUNDS] [THREADS]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use kasten_llm::{ClientOptions, LlmClient, LlmConfig, LocalModel, LocalOptions, Provider};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a GGUF file");
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let threads: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let make = |grammar_first| {
        let opts = LocalOptions {
            grammar_first,
            threads,
            ..LocalOptions::new(&path)
        };
        LlmClient::with_local(
            LlmConfig {
                provider: Provider::Local,
                base_url: path.clone(),
                model: "bench".into(),
                api_key: None,
            },
            ClientOptions::default(),
            LocalModel::new(opts).unwrap(),
        )
        .unwrap()
    };
    let (first, whole) = (make(true), make(false));
    let notes = [
        "Maria repotted the basil on the balcony after the first frost of November.",
        "The deploy script for the billing service needs the staging key since Tuesday.",
        "Ada walks her dog Pixel on the beach every morning before work.",
        "Our rent goes up to 1,300 euros a month from September.",
    ];
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            "context": {"type": "string", "maxLength": 160}
        },
        "required": ["keywords", "tags", "context"],
        "additionalProperties": false
    });
    let req = |note: &str| kasten_llm::StructuredRequest {
        messages: vec![
            kasten_llm::Message::system(
                "You annotate notes: keywords from the note, tags, and a one-sentence context. Answer with JSON.",
            ),
            kasten_llm::Message::user(format!("Note: {note}")),
        ],
        schema_name: "annotation".into(),
        schema: schema.clone(),
        temperature: 0.0,
        max_tokens: Some(160),
    };
    for round in 0..rounds {
        for (label, c) in [("grammar first", &first), ("whole vocabulary", &whole)] {
            let before = c.local().map(LocalModel::status).unwrap_or_default();
            for n in notes {
                // a small model may run out of tokens: the speed counts all the same
                let _ = rt.block_on(c.structured(&req(n), &|_| Ok(())));
            }
            let after = c.local().map(LocalModel::status).unwrap_or_default();
            let toks = after.generated_tokens - before.generated_tokens;
            let ms = after.generation_ms - before.generation_ms;
            println!(
                "round {round} {label:<17} generation {:.1} tokens/s ({toks} tokens, {ms} ms), full-vocabulary steps {}",
                toks as f64 * 1000.0 / ms.max(1) as f64,
                after.grammar_full_steps - before.grammar_full_steps
            );
        }
    }
}
