#![no_main]
//! See `fuzz/checks.rs`: `export_markdown`.

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::export_markdown(data));
