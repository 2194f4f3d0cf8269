//! What crosses IPC: plain, typed (specta) shapes, converted from the engine's types.
//! Times are RFC 3339 strings; counts are `u32`/`f64` so that TypeScript gets `number`.

use kasten_core::LinkKindWord;
use kasten_core::prompts::OpKind;
use kasten_core::{Action, ActionWord, ReviewKind};
use kasten_core::{Actor, Enrich, EnrichState, Link, LinkKind, LinkStatus, Note, NoteStatus};
use kasten_core::{Via, ViaKind};
use kasten_engine::{FieldEdit, Fields};
use kasten_engine::{GraphLink, GraphNode};
use kasten_engine::{HistoryEntry, ReviewItem, ReviewOutcome, ReviewStatus, SearchHit};
use serde::{Deserialize, Serialize};
use specta::Type;

/// Characters of content a graph node or list preview carries.
pub const PREVIEW_CHARS: usize = 120;

/// Note id → the ids of the Boxes it is in, largest Box first.
pub type Membership = std::collections::HashMap<String, Vec<String>>;

pub fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn preview(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}

/// The actors with a fixed word, as a union for the UI. Actor fields (`created_by`, `by`,
/// `actor`) are [`ActorType`]: one of these or an agent's word with its name.
#[derive(Debug, Clone, Copy, Serialize, Type, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ActorWord {
    User,
    Llm,
    Import,
    Merge,
    Agent,
}

impl ActorWord {
    /// The actor this word names.
    pub fn actor(self) -> Actor {
        match self {
            ActorWord::User => Actor::User,
            ActorWord::Llm => Actor::Llm,
            ActorWord::Import => Actor::Import,
            ActorWord::Merge => Actor::Merge,
            ActorWord::Agent => Actor::Agent,
        }
    }
}

/// What an actor field is in the app's TypeScript: a fixed actor's word ([`ActorWord`]) or
/// an agent's with the name it gave (`agent:<name>`). A word an older or newer version
/// wrote is shown as it came.
pub struct ActorType;

impl Type for ActorType {
    fn definition(types: &mut specta::Types) -> specta::datatype::DataType {
        // registers ActorWord, which the definition names
        let _ = ActorWord::definition(types);
        specta_typescript::define("ActorWord | `agent:${string}`").into()
    }
}

/// What a review item's label is in the app's TypeScript: a link's kind or an edit's
/// action (an older or newer version's word is shown as it came).
pub struct ReviewLabel;

impl Type for ReviewLabel {
    fn definition(types: &mut specta::Types) -> specta::datatype::DataType {
        // registers the two unions the definition names
        let _ = LinkKindWord::definition(types);
        let _ = ActionWord::definition(types);
        specta_typescript::define("LinkKindWord | ActionWord").into()
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct NoteDto {
    pub id: String,
    pub content: String,
    pub created_at: String,
    pub updated_at: String,
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
    pub enrich: Enrich,
    /// Why a note is still pending or failed, in words.
    pub enrich_error: Option<String>,
    pub source: Option<String>,
    pub status: NoteStatus,
}

impl From<Note> for NoteDto {
    fn from(n: Note) -> Self {
        let (enrich, enrich_error) = match n.enrich_state {
            EnrichState::Pending { reason } => (Enrich::Pending, reason),
            EnrichState::Done => (Enrich::Done, None),
            EnrichState::Failed { error } => (Enrich::Failed, Some(error)),
        };
        NoteDto {
            id: n.id.to_string(),
            content: n.content,
            created_at: time(n.created_at),
            updated_at: time(n.updated_at),
            keywords: n.keywords,
            tags: n.tags,
            context: n.context,
            enrich,
            enrich_error,
            source: n.source,
            status: n.status,
        }
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct LinkDto {
    pub from: String,
    pub to: String,
    /// A kind Kasten writes, or any word an import or a person brought.
    #[specta(type = LinkKindWord)]
    pub kind: LinkKind,
    pub reason: String,
    pub confidence: f64,
    /// `user`, `llm`, `import`, `merge`, `agent` or `agent:<name>`.
    #[specta(type = ActorType)]
    pub created_by: Actor,
    pub status: LinkStatus,
    pub created_at: String,
    /// A preview of the note at the other end.
    pub other_preview: String,
}

pub fn link_dto(l: Link, other_preview: String) -> LinkDto {
    LinkDto {
        from: l.from.to_string(),
        to: l.to.to_string(),
        kind: l.kind,
        reason: l.reason,
        confidence: l.confidence,
        created_by: l.created_by,
        status: l.status,
        created_at: time(l.created_at),
        other_preview,
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct NoteDetailDto {
    pub note: NoteDto,
    pub links: Vec<LinkDto>,
    pub history: Vec<HistoryDto>,
    /// When the note's fact was true, and what replaced it or what it replaced.
    pub validity: ValidityDto,
}

/// A newer note that replaced one (an accepted `supersedes` link): since when (the newer
/// note's `valid_from`) and what changed.
#[derive(Debug, Clone, Serialize, Type)]
pub struct SupersededByDto {
    pub id: String,
    pub since: String,
    /// What changed, e.g. `rent: 1,200 euros → 1,300 euros`.
    pub reason: String,
    pub preview: String,
}

pub fn superseded_by_dto(s: kasten_engine::SupersededBy, preview: String) -> SupersededByDto {
    SupersededByDto {
        id: s.id.to_string(),
        since: time(s.since),
        reason: s.reason,
        preview,
    }
}

/// An older note this one replaced (an accepted `supersedes` link from this note).
#[derive(Debug, Clone, Serialize, Type)]
pub struct ReplacedDto {
    pub id: String,
    pub reason: String,
    pub preview: String,
}

/// A note's validity: from when its fact was true (a date in its text, its source's,
/// else its time), until when (the successor's `valid_from`; none while current), the
/// note that replaced it and the notes it replaced.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ValidityDto {
    pub valid_from: String,
    pub valid_until: Option<String>,
    pub superseded_by: Option<SupersededByDto>,
    pub replaces: Vec<ReplacedDto>,
}

impl ValidityDto {
    pub fn new(
        valid_from: chrono::DateTime<chrono::Utc>,
        valid_until: Option<chrono::DateTime<chrono::Utc>>,
        superseded_by: Option<SupersededByDto>,
        replaces: Vec<ReplacedDto>,
    ) -> Self {
        ValidityDto {
            valid_from: time(valid_from),
            valid_until: valid_until.map(time),
            superseded_by,
            replaces,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Type, Default, PartialEq)]
pub struct FieldsDto {
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
}

impl From<Fields> for FieldsDto {
    fn from(f: Fields) -> Self {
        FieldsDto {
            keywords: f.keywords,
            tags: f.tags,
            context: f.context,
        }
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct HistoryDto {
    pub at: String,
    /// `user`, `llm`, `import`, `merge`, `agent` or `agent:<name>`.
    #[specta(type = ActorType)]
    pub actor: Actor,
    /// What was done: a word of [`ActionWord`], or one an older or newer version wrote,
    /// as it came.
    #[specta(type = ActionWord)]
    pub action: Action,
    /// The revision, link or event the entry is about (what "roll back" acts on).
    pub id: Option<String>,
    pub status: Option<ReviewStatus>,
    pub reason: String,
    pub before: Option<FieldsDto>,
    pub after: Option<FieldsDto>,
    /// Each change of an LLM revision with its own reason.
    pub changes: Vec<ChangeDto>,
    /// The note's text before and after, when the entry rewrote it.
    pub content_before: Option<String>,
    pub content_after: Option<String>,
}

/// One change of a revision with the tag, keyword or context it names and why.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ChangeDto {
    pub op: OpKind,
    pub value: String,
    pub reason: String,
}

/// The changes as the app shows them; a change whose operation this build does not know
/// (a damaged record, a newer version's) is left out.
fn changes(c: Vec<kasten_engine::Change>) -> Vec<ChangeDto> {
    c.into_iter()
        .filter_map(|c| match OpKind::parse(&c.op) {
            Some(op) => Some(ChangeDto {
                op,
                value: c.value,
                reason: c.reason,
            }),
            None => {
                tracing::warn!(op = %c.op, "a change with an unknown operation is not shown");
                None
            }
        })
        .collect()
}

impl From<HistoryEntry> for HistoryDto {
    fn from(h: HistoryEntry) -> Self {
        HistoryDto {
            at: time(h.at),
            actor: h.actor,
            action: h.action,
            id: h.id,
            status: h.status,
            reason: h.reason,
            before: h.before.map(Into::into),
            after: h.after.map(Into::into),
            changes: changes(h.changes),
            content_before: h.content_before,
            content_after: h.content_after,
        }
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct ReviewItemDto {
    pub kind: ReviewKind,
    pub id: String,
    pub note: String,
    pub note_preview: String,
    pub target: Option<String>,
    pub target_preview: Option<String>,
    pub event: Option<String>,
    /// A link's kind, or what an edit is (`construction`, `evolution`, `edit`).
    #[specta(type = ReviewLabel)]
    pub label: String,
    pub reason: String,
    pub confidence: Option<f64>,
    pub before: Option<FieldsDto>,
    pub after: Option<FieldsDto>,
    pub status: ReviewStatus,
    pub created_at: String,
    pub changes: Vec<ChangeDto>,
    /// Who made it: `llm`, `merge`, `agent:<name>` or `agent`.
    #[specta(type = ActorType)]
    pub by: Actor,
    /// For a supersession (`label` `supersedes`: the note is the newer, the target the
    /// older): when each note's fact became true (`valid_from`); none for other items.
    pub note_valid_from: Option<String>,
    pub target_valid_from: Option<String>,
}

pub fn review_dto(
    r: ReviewItem,
    note_preview: String,
    target_preview: Option<String>,
) -> ReviewItemDto {
    ReviewItemDto {
        kind: r.kind,
        id: r.id,
        note: r.note,
        note_preview,
        target: r.target,
        target_preview,
        event: r.event,
        label: r.label,
        reason: r.reason,
        confidence: r.confidence,
        before: r.before.map(Into::into),
        after: r.after.map(Into::into),
        status: r.status,
        created_at: time(r.created_at),
        changes: changes(r.changes),
        by: r.by,
        note_valid_from: None,
        target_valid_from: None,
    }
}

/// [`review_dto`] of a supersession, with when each of its notes became true.
pub fn with_validity(
    mut d: ReviewItemDto,
    note_valid_from: Option<chrono::DateTime<chrono::Utc>>,
    target_valid_from: Option<chrono::DateTime<chrono::Utc>>,
) -> ReviewItemDto {
    d.note_valid_from = note_valid_from.map(time);
    d.target_valid_from = target_valid_from.map(time);
    d
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct ReviewPage {
    pub items: Vec<ReviewItemDto>,
    /// Whether more items follow this page.
    pub more: bool,
    /// The agents whose links are in the queue (`agent:<name>`, `agent`), for the filter.
    pub agents: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct OutcomeDto {
    /// What the action did (see [`HistoryDto::action`]).
    #[specta(type = ActionWord)]
    pub action: Action,
    pub target: String,
    pub notes: Vec<String>,
    pub revisions: u32,
    pub links: u32,
}

impl From<ReviewOutcome> for OutcomeDto {
    fn from(o: ReviewOutcome) -> Self {
        OutcomeDto {
            action: o.action,
            target: o.target,
            notes: o.notes,
            revisions: clamp_u32(o.revisions as u64),
            links: clamp_u32(o.links as u64),
        }
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct BulkOutcome {
    pub accepted: u32,
    pub failed: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct NotesPage {
    pub total: u32,
    pub offset: u32,
    pub notes: Vec<NoteDto>,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct HitDto {
    pub note: NoteDto,
    pub score: f64,
    /// How the hit was found.
    pub via: Vec<ViaKind>,
    /// The newer note that replaced this one (such a hit ranks below it).
    pub superseded_by: Option<SupersededByDto>,
}

impl HitDto {
    /// The hit, with the preview of the note that replaced it (when one did).
    pub fn new(h: SearchHit, successor_preview: Option<String>) -> Self {
        let superseded_by = h
            .superseded_by
            .clone()
            .map(|s| superseded_by_dto(s, successor_preview.unwrap_or_default()));
        HitDto {
            superseded_by,
            ..HitDto::from(h)
        }
    }
}

impl From<SearchHit> for HitDto {
    fn from(h: SearchHit) -> Self {
        let via = h.via.iter().map(Via::kind).collect();
        HitDto {
            superseded_by: h.superseded_by.map(|s| superseded_by_dto(s, String::new())),
            note: h.note.into(),
            score: f64::from(h.score),
            via,
        }
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct GraphNodeDto {
    pub id: String,
    pub label: String,
    pub tags: Vec<String>,
    pub enrich: Enrich,
    /// The Boxes the note is in, largest first (the graph colours by the first).
    pub boxes: Vec<String>,
    /// Strength now (0–1, the lifecycle's decay): the graph draws fading notes faint.
    pub strength: f64,
}

pub fn graph_node(
    r: GraphNode,
    boxes: &Membership,
    strength: &std::collections::HashMap<kasten_core::NoteId, f64>,
) -> GraphNodeDto {
    let strength = kasten_core::NoteId::parse(&r.id)
        .ok()
        .and_then(|id| strength.get(&id).copied())
        .unwrap_or(1.0);
    GraphNodeDto {
        strength,
        boxes: boxes.get(&r.id).cloned().unwrap_or_default(),
        id: r.id,
        label: preview(&r.content, 48),
        tags: r.tags,
        enrich: r.enrich_state,
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct GraphLinkDto {
    pub id: String,
    pub from: String,
    pub to: String,
    /// A kind Kasten writes, or any word an import or a person brought.
    #[specta(type = LinkKindWord)]
    pub kind: LinkKind,
    pub status: LinkStatus,
    pub confidence: f64,
}

impl From<GraphLink> for GraphLinkDto {
    fn from(r: GraphLink) -> Self {
        GraphLinkDto {
            id: r.id,
            from: r.from,
            to: r.to,
            kind: r.kind,
            status: r.status,
            confidence: r.confidence,
        }
    }
}

/// One page of the whole graph: nodes after a cursor, or links after a cursor.
#[derive(Debug, Clone, Serialize, Type)]
pub struct GraphPage {
    pub nodes: Vec<GraphNodeDto>,
    pub links: Vec<GraphLinkDto>,
    /// Pass back to get the next page; `null` when this was the last.
    pub next: Option<String>,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct LocalGraphDto {
    pub nodes: Vec<GraphNodeDto>,
    pub links: Vec<GraphLinkDto>,
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct BoxDto {
    pub id: String,
    pub label: String,
    pub size: u32,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct DayDto {
    pub day: String,
    pub n: u32,
    pub tokens: u32,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct InsightsDto {
    pub notes_per_day: Vec<DayDto>,
    pub links_per_day: Vec<DayDto>,
    pub tokens_per_day: Vec<DayDto>,
    pub top_tags: Vec<TagCount>,
    pub boxes: Vec<BoxDto>,
    pub total_notes: u32,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct TagCount {
    pub tag: String,
    pub n: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub struct NoteFilterInput {
    pub tag: Option<String>,
    pub enrich: Option<Enrich>,
    /// Only the members of this Box.
    pub box_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub struct FieldsInput {
    pub keywords: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub context: Option<String>,
}

impl From<FieldsInput> for FieldEdit {
    fn from(f: FieldsInput) -> Self {
        let clean = |v: Option<Vec<String>>| {
            v.map(|v| {
                v.into_iter()
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
        };
        FieldEdit {
            keywords: clean(f.keywords),
            tags: clean(f.tags),
            context: f.context,
        }
    }
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct EventDto {
    pub id: String,
    pub note: String,
    pub note_preview: String,
    pub model: Option<String>,
    pub tokens: u32,
    pub links: u32,
    pub revisions: u32,
    pub dropped: u32,
    pub created_at: String,
}

/// What an import is doing.
#[derive(Debug, Clone, Copy, Serialize, Type, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ImportPhase {
    /// Saving notes.
    Notes,
    /// Creating links.
    Links,
}

/// Progress of an import, sent over its channel.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ImportProgressDto {
    pub phase: ImportPhase,
    pub done: u32,
    pub total: u32,
}

/// What an import did.
#[derive(Debug, Clone, Serialize, Type)]
pub struct ImportResultDto {
    pub created: u32,
    pub existing: u32,
    pub links_created: u32,
    pub attachments_skipped: u32,
    /// Files or records not imported, each with why (`file: message`).
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ui_actor_words_are_the_actors_words() {
        let all = [
            ActorWord::User,
            ActorWord::Llm,
            ActorWord::Import,
            ActorWord::Merge,
            ActorWord::Agent,
        ];
        assert_eq!(all.len(), Actor::KNOWN.len());
        for w in all {
            let json = serde_json::to_value(w).unwrap_or_default();
            assert_eq!(json.as_str(), Some(w.actor().as_str()));
            assert!(Actor::KNOWN.contains(&w.actor()));
        }
    }

    #[test]
    fn actions_and_operations_cross_as_their_words() {
        let h = HistoryDto::from(HistoryEntry {
            action: Action::BothTrue,
            changes: vec![
                kasten_engine::Change {
                    op: OpKind::RemoveTag.as_str().to_owned(),
                    value: "t".into(),
                    reason: "r".into(),
                },
                kasten_engine::Change {
                    op: "rename_tag".into(),
                    value: "u".into(),
                    reason: String::new(),
                },
            ],
            ..HistoryEntry::default()
        });
        let json = serde_json::to_value(&h).unwrap_or_default();
        assert_eq!(json["action"], "both_true");
        assert_eq!(json["changes"][0]["op"], "remove_tag");
        assert_eq!(json["changes"].as_array().map(Vec::len), Some(1));
        // a word an older version wrote crosses as it came
        let o = OutcomeDto::from(ReviewOutcome {
            action: Action::parse("split"),
            ..ReviewOutcome::default()
        });
        let json = serde_json::to_value(&o).unwrap_or_default();
        assert_eq!(json["action"], "split");
    }
}
