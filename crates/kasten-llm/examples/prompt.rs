//! Tries chat prompts on a built-in model: each file holds a request as the dumped
//! `/v1/chat/completions` body (`{"messages": [{"role", "content"}], "grammar"?,
//! "max_tokens"?}`); the answer of each is printed under its file name, with the tokens it
//! took. The model loads once, so prompt variants can be compared quickly.
//!
//!   cargo run --locked --example prompt -- MODEL.gguf REQUEST.json [REQUEST.json …]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use kasten_llm::{
    ChatRequest, ClientOptions, LlmClient, LlmConfig, LocalModel, LocalOptions, Message, Provider,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a GGUF file");
    let files: Vec<String> = args.collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = LlmClient::with_local(
        LlmConfig {
            provider: Provider::Local,
            base_url: path.clone(),
            model: "prompt".into(),
            api_key: None,
        },
        ClientOptions {
            timeout: std::time::Duration::from_secs(3600),
            ..ClientOptions::default()
        },
        LocalModel::new(LocalOptions::new(&path)).unwrap(),
    )
    .unwrap();
    for file in files {
        let body: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let messages = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let content = m["content"].as_str().unwrap_or_default();
                match m["role"].as_str() {
                    Some("system") => Message::system(content),
                    Some("assistant") => Message::assistant(content),
                    _ => Message::user(content),
                }
            })
            .collect();
        let req = ChatRequest {
            messages,
            temperature: 0.0,
            max_tokens: Some(body["max_tokens"].as_u64().unwrap_or(120) as u32),
            grammar: body["grammar"].as_str().map(str::to_owned),
        };
        let resp = rt.block_on(client.chat(&req)).unwrap();
        println!(
            "== {file} ({} in, {} out)\n{}",
            resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.text
        );
    }
}
