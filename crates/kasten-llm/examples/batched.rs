//! What answering requests together saves: the same JSON-constrained requests, sent all at
//! once, to two built-in models in this process, one answering up to `BATCH` of them
//! together (one decode per step for all), one answering them one at a time, alternated
//! round by round, with each round's wall time and generation speed (the answers' equality
//! is checked by `tests/local.rs`, `answers_written_together_are_those_written_one_at_a_time`).
//!
//!   cargo run --locked --example batched -- MODEL.gguf [ROUNDS] [THREADS] [BATCH] [REQUESTS]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use kasten_llm::{ClientOptions, LlmClient, LlmConfig, LocalModel, LocalOptions, Provider};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a GGUF file");
    let mut num = |default: usize| args.next().and_then(|r| r.parse().ok()).unwrap_or(default);
    let rounds = num(3);
    let threads = num(1);
    let batch = num(4);
    let requests = num(8);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let make = |batch| {
        let opts = LocalOptions {
            threads,
            batch,
            ..LocalOptions::new(&path)
        };
        LlmClient::with_local(
            LlmConfig {
                provider: Provider::Local,
                base_url: path.clone(),
                model: "bench".into(),
                api_key: None,
            },
            // requests wait their turn: no timeout cuts them off on a busy machine
            ClientOptions {
                timeout: std::time::Duration::from_secs(3600),
                ..ClientOptions::default()
            },
            LocalModel::new(opts).unwrap(),
        )
        .unwrap()
    };
    let (together, alone) = (make(batch), make(1));
    let notes = [
        "Maria repotted the basil on the balcony after the first frost of November.",
        "The deploy script for the billing service needs the staging key since Tuesday.",
        "Ada walks her dog Pixel on the beach every morning before work.",
        "Our rent goes up to 1,300 euros a month from September.",
        "Sam paid 40 euros for two concert tickets; Lea owes him half.",
        "The dentist moved my appointment to Thursday at 9.",
        "Reading notes: chapter 3 of the Rust book explains ownership and borrowing.",
        "Grandma's apple cake: 4 apples, 200 g flour, 3 eggs, 45 minutes at 180 °C.",
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
    let reqs: Vec<_> = notes
        .iter()
        .cycle()
        .take(requests)
        .map(|n| req(n))
        .collect();
    let mut secs = [0.0f64; 2];
    let mut texts: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for (k, (label, c)) in [("together", &together), ("one at a time", &alone)]
            .into_iter()
            .enumerate()
        {
            let before = c.local().map(LocalModel::status).unwrap_or_default();
            let t = Instant::now();
            // a small model may run out of tokens: the speed counts all the same
            let answers: Vec<String> = rt
                .block_on(futures_util::future::join_all(
                    reqs.iter().map(|r| c.structured(r, &|_| Ok(()))),
                ))
                .into_iter()
                .map(|r| match r {
                    Ok(r) => format!("{} ({} tokens)", r.value, r.usage.completion_tokens),
                    Err(e) => e.to_string(),
                })
                .collect();
            texts[k] = answers;
            let wall = t.elapsed().as_secs_f64();
            let after = c.local().map(LocalModel::status).unwrap_or_default();
            let toks = after.generated_tokens - before.generated_tokens;
            let ms = after.generation_ms - before.generation_ms;
            let steps = after.generation_steps - before.generation_steps;
            // the first round loads the model: not counted in the ratio
            if round > 0 || rounds == 1 {
                secs[k] += wall;
            }
            println!(
                "round {round} {label:<13} {requests} requests in {wall:.1} s; generation {:.1} tokens/s ({toks} tokens in {steps} decodes, {ms} ms); prompt {:.0} tokens/s",
                toks as f64 * 1000.0 / ms.max(1) as f64,
                after.prompt_per_sec(),
            );
        }
        let same = texts[0]
            .iter()
            .zip(&texts[1])
            .filter(|(a, b)| a == b)
            .count();
        println!("round {round} answers equal: {same} of {requests}");
        if std::env::var_os("BATCHED_SHOW").is_some() {
            for (a, b) in texts[0].iter().zip(&texts[1]).filter(|(a, b)| a != b) {
                println!("  together:      {a}\n  one at a time: {b}");
            }
        }
    }
    println!(
        "wall time, together / one at a time: {:.1} / {:.1} s = {:.2}x as fast (batch {batch}, {threads} thread(s))",
        secs[0],
        secs[1],
        secs[1] / secs[0].max(1e-9)
    );
}
