#![no_main]
//! See `fuzz/checks.rs`: `import_markdown`.

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::import_markdown(data));
