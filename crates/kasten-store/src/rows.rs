//! The records as SurrealDB reads and writes them: notes and their origins, the writes
//! of a batch (notes, merges, differences, jobs), index rows, links; embeddings as bytes.

use super::*;

pub(crate) fn emb_to_bytes(v: &[f32]) -> Bytes {
    let mut b = Vec::with_capacity(v.len() * 4);
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    Bytes::from(b)
}

pub(crate) fn bytes_to_emb(b: &[u8]) -> Result<Vec<f32>, StoreError> {
    if !b.len().is_multiple_of(4) {
        return Err(StoreError::Corrupt(format!(
            "an embedding of {} bytes is not a whole number of floats",
            b.len()
        )));
    }
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The fields of `note` a note is read back with ([`NoteRow`]), for a `SELECT` or a
/// destructuring `.{…}`.
pub(crate) const NOTE_COLUMNS: &str = "id, content, created_at, updated_at, keywords, tags, context, status, \
     enrich_state, enrich_error, source, strength, access_count, last_accessed, version, tier, \
     project, added_at, set_by";
/// [`NOTE_COLUMNS`] one by one.
pub(crate) const NOTE_FIELDS: &[&str] = &[
    "id",
    "content",
    "created_at",
    "updated_at",
    "keywords",
    "tags",
    "context",
    "status",
    "enrich_state",
    "enrich_error",
    "source",
    "strength",
    "access_count",
    "last_accessed",
    "version",
    "tier",
    "project",
    "added_at",
    "set_by",
];

/// A note's fields as stored ([`NOTE_COLUMNS`]); [`NoteRow::into_note`] gives notes
/// written before `tier` and `added_at` existed their defaults.
#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct NoteRow {
    pub(crate) id: RecordId,
    pub(crate) content: String,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) keywords: Vec<String>,
    pub(crate) tags: Vec<String>,
    pub(crate) context: String,
    pub(crate) status: String,
    pub(crate) enrich_state: String,
    pub(crate) enrich_error: Option<String>,
    pub(crate) source: Option<String>,
    pub(crate) strength: f64,
    pub(crate) access_count: i64,
    pub(crate) last_accessed: Option<DateTime<Utc>>,
    pub(crate) version: i64,
    pub(crate) tier: Option<String>,
    pub(crate) project: Option<String>,
    pub(crate) added_at: Option<DateTime<Utc>>,
    pub(crate) set_by: Option<Vec<OriginRow>>,
}

/// One [`Origin`] as stored: `{ field, value, by }`.
#[derive(Debug, Clone, PartialEq, Eq, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub struct OriginRow {
    pub field: String,
    pub value: String,
    pub by: String,
}

impl OriginRow {
    pub fn of(o: &Origin) -> Self {
        Self {
            field: o.field.as_str().to_owned(),
            value: o.value.clone(),
            by: o.by.as_str().to_owned(),
        }
    }

    /// Rows naming a field or setter this build does not know are left out (a newer
    /// version's); the value is then the LLM's to change, as before origins existed.
    pub(crate) fn into_origin(self) -> Option<Origin> {
        Some(Origin {
            field: provenance::Field::parse(&self.field)?,
            value: self.value,
            by: provenance::SetBy::parse(&self.by)?,
        })
    }
}

/// Origins as stored.
pub fn origin_rows(v: &[Origin]) -> Vec<OriginRow> {
    v.iter().map(OriginRow::of).collect()
}

impl NoteRow {
    pub(crate) fn into_note(self) -> Result<Note, StoreError> {
        let key = match &self.id.key {
            RecordIdKey::String(k) => k,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "a note has an id that is not text: {other:?}"
                )));
            }
        };
        let id = NoteId::parse(key).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let status = NoteStatus::parse(&self.status).ok_or_else(|| {
            StoreError::Corrupt(format!("note {id} has unknown status '{}'", self.status))
        })?;
        let enrich_state = match Enrich::parse(&self.enrich_state) {
            Ok(Enrich::Pending) => EnrichState::Pending {
                reason: self.enrich_error,
            },
            Ok(Enrich::Done) => EnrichState::Done,
            Ok(Enrich::Failed) => EnrichState::Failed {
                error: self.enrich_error.unwrap_or_default(),
            },
            Err(e) => return Err(StoreError::Corrupt(format!("note {id}: {e}"))),
        };
        let tier = match self.tier.as_deref() {
            None => Tier::LongTerm,
            Some(t) => Tier::parse(t)
                .ok_or_else(|| StoreError::Corrupt(format!("note {id} has unknown tier '{t}'")))?,
        };
        Ok(Note {
            id,
            content: self.content,
            created_at: self.created_at,
            updated_at: self.updated_at,
            keywords: self.keywords,
            tags: self.tags,
            context: self.context,
            status,
            enrich_state,
            source: self.source,
            strength: self.strength,
            access_count: self.access_count.max(0) as u64,
            last_accessed: self.last_accessed,
            version: self.version.max(0) as u64,
            tier,
            project: self.project,
            added_at: self.added_at.unwrap_or(self.updated_at),
            set_by: self
                .set_by
                .unwrap_or_default()
                .into_iter()
                .filter_map(OriginRow::into_origin)
                .collect(),
        })
    }
}

/// A new note as written: the note, its embedding and the model that made it.
#[derive(Debug, Clone)]
pub struct NoteWrite {
    pub note: Note,
    pub embedding: Option<Vec<f32>>,
    pub embed_model: Option<String>,
    /// The enrichment job to enqueue with it, if any.
    pub job: Option<JobId>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct NoteInsert {
    pub(crate) id: RecordId,
    pub(crate) content: String,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) keywords: Vec<String>,
    pub(crate) tags: Vec<String>,
    pub(crate) context: String,
    pub(crate) embedding: Option<Bytes>,
    pub(crate) embed_model: Option<String>,
    pub(crate) status: String,
    pub(crate) enrich_state: String,
    pub(crate) enrich_error: Option<String>,
    pub(crate) source: Option<String>,
    pub(crate) strength: f64,
    pub(crate) access_count: i64,
    pub(crate) version: i64,
    pub(crate) tier: String,
    pub(crate) project: Option<String>,
    pub(crate) added_at: DateTime<Utc>,
    pub(crate) set_by: Vec<OriginRow>,
}

/// A new note that repeats an existing one (see [`Store::insert_notes_with`]). The note
/// itself is in the same batch with status `merged` and no job.
#[derive(Debug, Clone)]
pub struct MergeWrite {
    pub note: NoteId,
    pub duplicate_of: NoteId,
    /// The merge event's id (a job-id-like key; rollback takes it like any event).
    pub event: String,
    pub reason: String,
    pub similarity: f64,
    /// Applied at once (the link is accepted) or held as a proposal.
    pub accepted: bool,
    /// The old note's strength after the reinforcement.
    pub strength: f64,
    pub at: DateTime<Utc>,
}

/// A link from a new note of a batch to a note it reads like but whose facts differ (see
/// [`Store::insert_notes_with`]): created by `merge`, for review.
#[derive(Debug, Clone)]
pub struct DifferWrite {
    pub from: NoteId,
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    /// Applied at once (the link is accepted) or held as a proposal.
    pub accepted: bool,
    pub at: DateTime<Utc>,
    /// Who made it: [`Actor::Merge`] (the rules of merge on write and supersession) or
    /// [`Actor::Llm`] (the LLM's word on a pair).
    pub by: Actor,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct DifferInsert {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) kind: String,
    pub(crate) reason: String,
    pub(crate) confidence: f64,
    pub(crate) status: String,
    pub(crate) at: DateTime<Utc>,
    pub(crate) by: String,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct MergeInsert {
    pub(crate) note: String,
    pub(crate) duplicate_of: String,
    pub(crate) event: String,
    pub(crate) reason: String,
    pub(crate) similarity: f64,
    pub(crate) status: String,
    pub(crate) strength: f64,
    pub(crate) at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct JobInsert {
    pub(crate) id: RecordId,
    pub(crate) note: RecordId,
    pub(crate) kind: String,
    pub(crate) state: String,
    pub(crate) attempts: i64,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

/// What the in-process indexes are rebuilt from.
#[derive(Debug, Clone)]
pub struct IndexRow {
    pub id: NoteId,
    pub text: String,
    pub embedding: Option<Vec<f32>>,
    pub embed_model: Option<String>,
    /// The note's time and source, for the timeline (context expansion, dates).
    pub created_at: DateTime<Utc>,
    pub source: Option<String>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct IndexRowRaw {
    pub(crate) id: String,
    pub(crate) content: String,
    pub(crate) keywords: Vec<String>,
    pub(crate) tags: Vec<String>,
    pub(crate) context: String,
    pub(crate) embedding: Option<Bytes>,
    pub(crate) embed_model: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) source: Option<String>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct LinkRow {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) kind: String,
    pub(crate) reason: String,
    pub(crate) confidence: f64,
    pub(crate) created_by: String,
    pub(crate) status: String,
    pub(crate) created_at: DateTime<Utc>,
}

/// A link with its record id.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LinkRecord {
    pub id: String,
    pub from: String,
    pub to: String,
    pub kind: LinkKind,
    pub reason: String,
    pub confidence: f64,
    pub created_by: Actor,
    pub status: LinkStatus,
    pub reviewed: bool,
    pub event: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A [`LinkRecord`] as read ([`LINK_COLUMNS`]), its status and kind still words.
#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
pub(crate) struct LinkRecordRow {
    pub(crate) id: String,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) kind: String,
    pub(crate) reason: String,
    pub(crate) confidence: f64,
    pub(crate) created_by: String,
    pub(crate) status: String,
    pub(crate) reviewed: bool,
    pub(crate) event: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
}

impl LinkRecordRow {
    pub(crate) fn into_record(self) -> Result<LinkRecord, StoreError> {
        Ok(LinkRecord {
            status: link_status(&self.id, &self.status)?,
            kind: LinkKind::parse(&self.kind),
            id: self.id,
            from: self.from,
            to: self.to,
            reason: self.reason,
            confidence: self.confidence,
            created_by: Actor::parse(&self.created_by),
            reviewed: self.reviewed,
            event: self.event,
            created_at: self.created_at,
        })
    }
}

/// The typed links of rows read with [`LINK_COLUMNS`].
pub(crate) fn link_records(rows: Vec<LinkRecordRow>) -> Result<Vec<LinkRecord>, StoreError> {
    rows.into_iter().map(LinkRecordRow::into_record).collect()
}

/// A stored link status; an unknown word is a damaged record.
pub(crate) fn link_status(link: &str, word: &str) -> Result<LinkStatus, StoreError> {
    LinkStatus::parse(word).map_err(|e| StoreError::Corrupt(format!("link {link}: {e}")))
}

pub(crate) const LINK_COLUMNS: &str = "record::id(id) AS id, record::id(in) AS from, record::id(out) AS to, kind, reason,
    confidence, created_by, status, reviewed, IF event != NONE { record::id(event) } ELSE { NONE } AS event, created_at";
