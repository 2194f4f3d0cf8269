//! Ids are newtypes over strings so they cannot be mixed up.
//!
//! An id's text is shared, not copied, by its clones (`Arc<str>`): the indexes hold a
//! note's id in several maps (vector, text and time indexes, links), and a 100k-note
//! memory held ~390 bytes of id copies per note as `String`s (seven of 24 + 32 bytes),
//! ~160 as shared text (seven pointers of 16 bytes and one 48-byte allocation).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::CoreError;

fn valid_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(Arc<str>);

        impl $name {
            /// A new, time-ordered id (ULID).
            pub fn generate() -> Self {
                Self(Arc::from(ulid::Ulid::new().to_string()))
            }

            /// Parses an id given by a user or read back from storage.
            pub fn parse(s: &str) -> Result<Self, CoreError> {
                let s = s.trim();
                if valid_key(s) {
                    Ok(Self(Arc::from(s)))
                } else {
                    Err(CoreError::InvalidId(s.chars().take(80).collect()))
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = CoreError;
            fn try_from(s: String) -> Result<Self, CoreError> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0.as_ref().to_owned()
            }
        }
    };
}

id_type!(
    /// The id of a note: a ULID, so ids sort by creation.
    NoteId
);
id_type!(
    /// The id of an enrichment job in the durable queue.
    JobId
);
id_type!(
    /// The id of a Box (a cluster of notes); kept across recomputations while the Box's
    /// membership mostly persists.
    BoxId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_back_and_sort_by_time() {
        let a = NoteId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = NoteId::generate();
        assert_eq!(NoteId::parse(a.as_str()), Ok(a.clone()));
        assert!(a < b);
    }

    #[test]
    fn rejects_ids_that_could_inject_query_text() {
        for bad in [
            "",
            "note:1",
            "a b",
            "x'; DELETE note; --",
            "ü",
            &"a".repeat(65),
        ] {
            assert!(NoteId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn serde_validates() {
        let ok: Result<NoteId, _> = serde_json::from_str("\"01ABC\"");
        assert!(ok.is_ok());
        let bad: Result<NoteId, _> = serde_json::from_str("\"a;b\"");
        assert!(bad.is_err());
    }
}
