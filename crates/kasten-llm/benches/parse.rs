//! Micro-benchmarks of parsing LLM output: clean JSON, JSON in a Markdown fence, JSON after
//! prose, and JSON with trailing commas (repaired leniently). Run: `cargo bench -p kasten-llm`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kasten_llm::parse_json_lenient;

const CLEAN: &str = r#"{"links":[{"to":"N1","kind":"related","reason":"both about the adoption plans","confidence":0.82},{"to":"N3","kind":"supports","reason":"same support group","confidence":0.7}],"updates":[{"handle":"N1","context":"Caroline is preparing to adopt and has joined a support group","tags":["family","adoption"]}]}"#;

fn inputs() -> Vec<(&'static str, String)> {
    vec![
        ("clean", CLEAN.to_owned()),
        ("fenced", format!("```json\n{CLEAN}\n```")),
        (
            "after prose",
            format!(
                "Sure! Here is the JSON you asked for:\n\n{CLEAN}\n\nLet me know if you need more."
            ),
        ),
        (
            "trailing commas",
            CLEAN
                .replace("0.7}", "0.7},")
                .replace("\"adoption\"]", "\"adoption\",]"),
        ),
    ]
}

fn parse(c: &mut Criterion) {
    for (name, text) in inputs() {
        c.bench_function(&format!("parse_json_lenient {name}"), |b| {
            b.iter(|| parse_json_lenient(black_box(&text)))
        });
    }
}

criterion_group!(benches, parse);
criterion_main!(benches);
