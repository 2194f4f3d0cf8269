//! Replays the committed fuzz corpus through the parsers on stable Rust (issue 9).
