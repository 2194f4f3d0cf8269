//! Where evaluation memories are cached and how their keys are made.

use std::path::{Path, PathBuf};

use anyhow::Result;
use kasten_engine::Endpoint;

/// `$KASTEN_HOME/eval` (next to the default database).
pub(crate) fn default_cache_dir() -> Result<PathBuf> {
    Ok(match Endpoint::default_from_env()? {
        Endpoint::SurrealKv(p) => p.parent().map(Path::to_path_buf).unwrap_or(p).join("eval"),
        _ => PathBuf::from("kasten-eval"),
    })
}

/// A sample id or model name as part of a directory name.
pub(crate) fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a: a stable content hash for cache keys (not for security).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_are_stable_and_safe() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(safe_name("conv-26"), "conv-26");
        assert_eq!(safe_name("../x y"), "___x_y");
    }
}
