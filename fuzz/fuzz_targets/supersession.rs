#![no_main]
//! See `fuzz/checks.rs`: `supersession`.

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::supersession(data));
