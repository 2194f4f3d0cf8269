use thiserror::Error;

/// Errors of the pure domain logic.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// An id that is not of the form Kasten gives out.
    #[error("'{0}' is not a valid note id (ids look like 01JD3Q8W5V2T6Y9K3M4N5P6Q7R)")]
    InvalidId(String),
    /// A note with nothing in it.
    #[error("a note cannot be empty")]
    EmptyContent,
    /// A vector of the wrong dimension for an index.
    #[error("vector has dimension {got}, the index expects {expected}")]
    DimensionMismatch { expected: usize, got: usize },
    /// A request that does not make sense in the current state, explained.
    #[error("{0}")]
    Invalid(String),
    /// A vector containing NaN or infinity.
    #[error("vector contains a value that is not a finite number")]
    NonFiniteVector,
    /// The vector rows left in the index snapshot file could not be read.
    #[error("could not read the vectors from the index snapshot file: {0}")]
    RowRead(String),
    /// A stored or typed word that names no state of its kind.
    #[error("'{word}' is not a {what} (one of {expected})")]
    UnknownState {
        what: &'static str,
        word: String,
        expected: String,
    },
}
