//! Notes and links as the rest of the system sees them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::lifecycle::Tier;
pub use crate::states::{Actor, Enrich, LinkKind, LinkStatus};
use crate::{CoreError, NoteId};

/// Whether a note is in the active memory or was archived by the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum NoteStatus {
    #[default]
    Active,
    Archived,
    /// A near-duplicate held under a `same-entity` link to the note it repeats: not a
    /// second note in lists and retrieval until the merge is rejected or rolled back.
    Merged,
}

impl NoteStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NoteStatus::Active => "active",
            NoteStatus::Archived => "archived",
            NoteStatus::Merged => "merged",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(NoteStatus::Active),
            "archived" => Some(NoteStatus::Archived),
            "merged" => Some(NoteStatus::Merged),
            _ => None,
        }
    }
}

/// Where the LLM enrichment (construction, links, evolution) of a note stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EnrichState {
    /// Saved, waiting for the LLM; `reason` says why it is still waiting when known.
    Pending {
        reason: Option<String>,
    },
    Done,
    Failed {
        error: String,
    },
}

impl EnrichState {
    /// The state without its reason: the word stored and shown.
    pub fn stage(&self) -> Enrich {
        match self {
            EnrichState::Pending { .. } => Enrich::Pending,
            EnrichState::Done => Enrich::Done,
            EnrichState::Failed { .. } => Enrich::Failed,
        }
    }

    pub fn label(&self) -> &'static str {
        self.stage().as_str()
    }
}

/// A note as stored. `content` is the user's (or agent's) text and is never rewritten by
/// the LLM; `keywords`, `tags` and `context` are annotations, the LLM's except the values
/// `set_by` names (see [`crate::provenance`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub id: NoteId,
    pub content: String,
    /// The memory's own time (when it happened / was said), not when it was typed in.
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
    pub status: NoteStatus,
    pub enrich_state: EnrichState,
    /// Where the note came from (e.g. an import file and line, a LoCoMo dialogue id).
    pub source: Option<String>,
    pub strength: f64,
    pub access_count: u64,
    pub last_accessed: Option<DateTime<Utc>>,
    /// How fast the note fades (see [`crate::lifecycle`]).
    pub tier: Tier,
    /// The project a project-tier note belongs to.
    pub project: Option<String>,
    /// When the note entered this memory (decay is counted from here, not from the
    /// memory's own time, so an imported old conversation does not start out faded).
    pub added_at: DateTime<Utc>,
    /// Incremented on every change; used for optimistic concurrency and history.
    pub version: u64,
    /// The annotation values a person (user, import, agent) set; the LLM adds to them and
    /// never removes or replaces them directly.
    #[serde(default)]
    pub set_by: Vec<crate::provenance::Origin>,
}

impl Note {
    /// The note's annotations, borrowed.
    pub fn annotations(&self) -> crate::provenance::Annotations<'_> {
        crate::provenance::Annotations {
            keywords: &self.keywords,
            tags: &self.tags,
            context: &self.context,
        }
    }

    /// The text that is embedded and full-text indexed: content plus the annotations.
    pub fn index_text(&self) -> String {
        index_text(&self.content, &self.keywords, &self.tags, &self.context)
    }
}

/// Content plus annotations: what is embedded and indexed.
pub fn index_text(content: &str, keywords: &[String], tags: &[String], context: &str) -> String {
    let mut s = String::with_capacity(content.len() + context.len() + 64);
    s.push_str(content);
    if !keywords.is_empty() {
        s.push_str("\nkeywords: ");
        s.push_str(&keywords.join(", "));
    }
    if !tags.is_empty() {
        s.push_str("\ntags: ");
        s.push_str(&tags.join(", "));
    }
    if !context.is_empty() {
        s.push_str("\ncontext: ");
        s.push_str(context);
    }
    s
}

/// What a caller supplies to create a note. Deserializing validates like [`NewNote::new`]
/// (a note that crosses a process boundary is input like any other).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NewNoteFields")]
pub struct NewNote {
    pub content: String,
    pub created_at: Option<DateTime<Utc>>,
    pub source: Option<String>,
}

/// The fields of a [`NewNote`] before validation.
#[derive(Deserialize)]
struct NewNoteFields {
    content: String,
    created_at: Option<DateTime<Utc>>,
    source: Option<String>,
}

impl TryFrom<NewNoteFields> for NewNote {
    type Error = CoreError;

    fn try_from(f: NewNoteFields) -> Result<Self, CoreError> {
        Ok(Self::new(&f.content)?
            .at(f.created_at)
            .with_source(f.source))
    }
}

impl NewNote {
    /// Validates and normalises user input: content is trimmed of surrounding whitespace
    /// and must not be empty.
    pub fn new(content: &str) -> Result<Self, CoreError> {
        let content = content.trim();
        if content.is_empty() {
            return Err(CoreError::EmptyContent);
        }
        Ok(Self {
            content: content.to_owned(),
            created_at: None,
            source: None,
        })
    }

    pub fn at(mut self, t: Option<DateTime<Utc>>) -> Self {
        self.created_at = t;
        self
    }

    pub fn with_source(mut self, source: Option<String>) -> Self {
        self.source = source;
        self
    }
}

/// A typed edge between two existing notes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub from: NoteId,
    pub to: NoteId,
    pub kind: LinkKind,
    pub reason: String,
    pub confidence: f64,
    pub created_by: Actor,
    pub status: LinkStatus,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_or_blank_content_is_rejected() {
        assert_eq!(NewNote::new(""), Err(CoreError::EmptyContent));
        assert_eq!(NewNote::new(" \n\t "), Err(CoreError::EmptyContent));
        assert_eq!(
            NewNote::new("  hi  ").map(|n| n.content),
            Ok("hi".to_owned())
        );
    }

    #[test]
    fn a_deserialized_new_note_is_validated_like_a_new_one() {
        let ok: NewNote =
            serde_json::from_str(r#"{"content":"  hi ","created_at":null,"source":"a"}"#)
                .expect("valid");
        assert_eq!(
            ok,
            NewNote::new("hi")
                .expect("ok")
                .with_source(Some("a".into()))
        );
        let round: NewNote =
            serde_json::from_str(&serde_json::to_string(&ok).expect("ser")).expect("de");
        assert_eq!(round, ok);
        let empty =
            serde_json::from_str::<NewNote>(r#"{"content":" ","created_at":null,"source":null}"#);
        assert!(empty.is_err());
    }

    #[test]
    fn index_text_includes_annotations_only_when_present() {
        assert_eq!(index_text("a", &[], &[], ""), "a");
        let t = index_text("a", &["k".into()], &["t1".into(), "t2".into()], "ctx");
        assert_eq!(t, "a\nkeywords: k\ntags: t1, t2\ncontext: ctx");
    }
}
