#![no_main]
//! See `fuzz/checks.rs`: `llm_answers`.

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::llm_answers(data));
