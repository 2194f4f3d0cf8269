//! What the two ends of a connection tell each other first: who owns the memory. Its own
//! module so that the wire (the service definition) and the owner (its implementation)
//! both use it without using each other.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Who has the memory open, as clients name it in messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerInfo {
    /// What the owner is: `kasten mcp`, `kasten add`, `the Kasten app`, …
    pub name: String,
    pub pid: u32,
    pub version: String,
}

impl OwnerInfo {
    /// This process, called `name`.
    pub fn this_process(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

impl fmt::Display for OwnerInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, process {}", self.name, self.pid)
    }
}
