//! What the tools take and return: their arguments and answers as JSON schemas, and
//! notes and links converted to them.

use chrono::{DateTime, Utc};
use kasten_core::{Link, Note};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddMemoryArgs {
    /// The memory, as one self-contained note (a fact, an event, a decision).
    pub content: String,
    /// When it happened, RFC 3339 (e.g. 2024-05-01T14:30:00Z) or YYYY-MM-DD; default now.
    #[serde(default)]
    pub time: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Added {
    pub id: String,
    pub created_at: String,
    /// Who the note is attributed to (`mcp:<client name>:<n>`).
    pub source: Option<String>,
    /// `pending`: saved and searchable; the LLM will annotate and link it.
    pub enrich_state: String,
    /// The note repeats one already in the memory and was merged into it (not listed or
    /// found as a note of its own; the user can undo the merge in Review).
    pub merged: bool,
    /// The note it was merged into (null when not merged).
    pub merged_into: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchMemoryArgs {
    /// What to look for, in words.
    pub query: String,
    /// How many notes to return (default 10, at most 100).
    #[serde(default)]
    pub k: Option<usize>,
    /// What was current on this day (YYYY-MM-DD): notes whose value took effect later are
    /// left out, and a note counts as replaced only by a newer note valid by then. Default:
    /// today.
    #[serde(default)]
    pub as_of: Option<String>,
}

/// The newer note that replaced a note (an accepted `supersedes` link).
#[derive(Debug, Serialize, JsonSchema)]
pub struct SupersededOut {
    /// The newer note's id.
    pub id: String,
    /// When the newer value took effect (the newer note's valid_from), RFC 3339.
    pub since: String,
    /// What changed, e.g. "rent: 1,200 euros → 1,300 euros".
    pub reason: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Hit {
    pub id: String,
    pub content: String,
    pub score: f32,
    /// How it was found: vector, keyword, `link from <id>`, `context of <id>`, date.
    pub via: Vec<String>,
    pub created_at: String,
    /// Where the note came from (an agent, an import file, …).
    pub source: Option<String>,
    pub tags: Vec<String>,
    /// When the note's fact became true: a date its text states, else its source's date,
    /// else its time (RFC 3339).
    pub valid_from: String,
    /// Set when a newer note replaced this one: the note is no longer current (it ranks
    /// right below the note that is); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<SupersededOut>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResult {
    pub hits: Vec<Hit>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadNoteArgs {
    /// A note id, as search_memory or list_recent return them.
    pub id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NoteOut {
    pub id: String,
    pub content: String,
    pub created_at: String,
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
    pub source: Option<String>,
    /// pending, done or failed.
    pub enrich_state: String,
    pub status: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LinkOut {
    pub from: String,
    pub to: String,
    /// relates, supports, contradicts, elaborates, causes, follows, same-entity, …
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    /// llm, user, import or agent.
    pub created_by: String,
    /// accepted or proposed (waiting for review).
    pub status: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NoteWithLinks {
    pub note: NoteOut,
    /// Links of the note in either direction (rejected and rolled-back ones left out).
    pub links: Vec<LinkOut>,
    /// When the note's fact became true: a date its text states, else its source's date,
    /// else its time (RFC 3339).
    pub valid_from: String,
    /// Until when it was true: when the newer note that replaced it took effect; null while
    /// it is current.
    pub valid_until: Option<String>,
    /// The newer note that replaced it; absent while it is current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<SupersededOut>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LinkNotesArgs {
    /// The note the link starts from (an id from search_memory, list_recent or add_memory).
    pub from: String,
    /// The note it points to.
    pub to: String,
    /// relates (default), supports, contradicts, elaborates, causes, follows or same-entity.
    #[serde(default)]
    pub kind: Option<String>,
    /// Why the two notes belong together, in a few words.
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Linked {
    /// The link's id (the user removes it with `kasten rollback <id>`, or accepts or
    /// rejects it in Review when it is proposed).
    pub link: String,
    pub from: String,
    pub to: String,
    /// `accepted`, or `proposed`: waiting for the user's review (the memory reviews links,
    /// or this server proposes only), not followed by searches until accepted.
    pub status: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListRecentArgs {
    /// How many notes (default 20, at most 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Recent {
    /// Newest first (by the memory's own time).
    pub notes: Vec<NoteOut>,
    pub total: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskMemoryArgs {
    /// A question to answer from the memory.
    pub question: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Cited {
    /// The `[n]` the answer uses for this note.
    pub n: usize,
    pub id: String,
    pub content: String,
    pub created_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AnswerOut {
    /// The answer, citing notes as `[n]`.
    pub answer: String,
    /// Ids of the cited notes, in order of first citation.
    pub citations: Vec<String>,
    /// The model cited no note: `citations` are the notes the answer's words come from,
    /// and the answer has no `[n]`.
    pub citations_inferred: bool,
    /// The cited notes.
    pub notes: Vec<Cited>,
    /// True when the memory does not hold the answer.
    pub not_in_memory: bool,
}

pub(crate) fn time_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(crate) fn note_out(n: &Note) -> NoteOut {
    NoteOut {
        id: n.id.to_string(),
        content: n.content.clone(),
        created_at: time_text(n.created_at),
        keywords: n.keywords.clone(),
        tags: n.tags.clone(),
        context: n.context.clone(),
        source: n.source.clone(),
        enrich_state: n.enrich_state.label().to_owned(),
        status: n.status.as_str().to_owned(),
    }
}

pub(crate) fn link_out(l: &Link) -> LinkOut {
    LinkOut {
        from: l.from.to_string(),
        to: l.to.to_string(),
        kind: l.kind.to_string(),
        reason: l.reason.clone(),
        confidence: l.confidence,
        created_by: l.created_by.to_string(),
        status: l.status.to_string(),
    }
}
