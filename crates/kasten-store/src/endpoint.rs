//! Where the memory lives: `surrealkv://<dir>` (embedded, the default), `mem://` (tests),
//! `ws://host:port` / `wss://` (a SurrealDB server).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// Embedded, on disk in this directory.
    SurrealKv(PathBuf),
    /// Embedded, in memory; gone when the process ends.
    Mem,
    /// A SurrealDB server (`ws://` or `wss://` URL).
    Remote(String),
}

impl Endpoint {
    /// Parses `surrealkv://DIR`, `mem://`, `ws://…`, `wss://…`. A bare path means
    /// `surrealkv://` at that path.
    pub fn parse(s: &str) -> Result<Self, StoreError> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("surrealkv://") {
            if rest.is_empty() {
                return Err(StoreError::BadEndpoint(
                    s.to_owned(),
                    "the directory is missing",
                ));
            }
            return Ok(Endpoint::SurrealKv(PathBuf::from(rest)));
        }
        if s == "mem://" || s == "memory" {
            return Ok(Endpoint::Mem);
        }
        if s.starts_with("ws://") || s.starts_with("wss://") {
            return Ok(Endpoint::Remote(s.to_owned()));
        }
        if s.contains("://") {
            return Err(StoreError::BadEndpoint(
                s.to_owned(),
                "use surrealkv://DIR, mem:// or ws://HOST:PORT",
            ));
        }
        if s.is_empty() {
            return Err(StoreError::BadEndpoint(s.to_owned(), "it is empty"));
        }
        Ok(Endpoint::SurrealKv(PathBuf::from(s)))
    }

    /// The default embedded store under a Kasten home directory.
    pub fn in_home(home: &Path) -> Self {
        Endpoint::SurrealKv(home.join("db"))
    }

    /// `$KASTEN_HOME/db`, else `<platform data dir>/kasten/db`.
    pub fn default_from_env() -> Result<Self, StoreError> {
        let home = match std::env::var_os("KASTEN_HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => dirs::data_dir().ok_or(StoreError::NoHome)?.join("kasten"),
        };
        Ok(Self::in_home(&home))
    }

    /// What `connect` is given.
    pub(crate) fn url(&self) -> String {
        match self {
            Endpoint::SurrealKv(p) => format!("surrealkv://{}", p.display()),
            Endpoint::Mem => "mem://".to_owned(),
            Endpoint::Remote(u) => u.clone(),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_kinds() {
        assert_eq!(
            Endpoint::parse("surrealkv:///tmp/x").ok(),
            Some(Endpoint::SurrealKv("/tmp/x".into()))
        );
        assert_eq!(Endpoint::parse("mem://").ok(), Some(Endpoint::Mem));
        assert_eq!(
            Endpoint::parse("ws://127.0.0.1:8000").ok(),
            Some(Endpoint::Remote("ws://127.0.0.1:8000".into()))
        );
        assert_eq!(
            Endpoint::parse("./data").ok(),
            Some(Endpoint::SurrealKv("./data".into()))
        );
        assert!(Endpoint::parse("rocksdb://x").is_err());
        assert!(Endpoint::parse("surrealkv://").is_err());
        assert!(Endpoint::parse("").is_err());
    }
}
