//! Numbered migrations, run in order at open. A migration is never edited once released:
//! changes go in a new one. `schema_version:current` records the last one applied.

/// (version, SurrealQL). Each runs in its own transaction together with the version bump.
pub(crate) const MIGRATIONS: &[(u32, &str)] = &[(1, V1), (2, V2), (3, V3), (4, V4), (5, V5)];

/// The schema, migration by migration. Embeddings are stored as little-endian f32 bytes (4 bytes per dimension,
/// 1.5 KB for 384-d) rather than `array<float>`: a quarter of the size on disk, and the
/// in-process index loads them without a per-number conversion. The database is still
/// the only source of truth; no SurrealDB vector index is defined (see ARCHITECTURE.md).
const V1: &str = r#"
DEFINE TABLE note SCHEMAFULL;
DEFINE FIELD content ON note TYPE string ASSERT string::len(string::trim($value)) > 0;
DEFINE FIELD created_at ON note TYPE datetime;
DEFINE FIELD updated_at ON note TYPE datetime;
DEFINE FIELD keywords ON note TYPE array<string> DEFAULT [];
DEFINE FIELD tags ON note TYPE array<string> DEFAULT [];
DEFINE FIELD context ON note TYPE string DEFAULT '';
DEFINE FIELD embedding ON note TYPE option<bytes>;
DEFINE FIELD embed_model ON note TYPE option<string>;
DEFINE FIELD strength ON note TYPE float DEFAULT 1.0;
DEFINE FIELD last_accessed ON note TYPE option<datetime>;
DEFINE FIELD access_count ON note TYPE int DEFAULT 0;
DEFINE FIELD status ON note TYPE string DEFAULT 'active' ASSERT $value IN ['active', 'archived'];
DEFINE FIELD enrich_state ON note TYPE string DEFAULT 'pending' ASSERT $value IN ['pending', 'done', 'failed'];
DEFINE FIELD enrich_error ON note TYPE option<string>;
DEFINE FIELD source ON note TYPE option<string>;
DEFINE FIELD version ON note TYPE int DEFAULT 1;
DEFINE INDEX note_created ON note FIELDS created_at;
DEFINE INDEX note_source ON note FIELDS source;

DEFINE TABLE link TYPE RELATION IN note OUT note SCHEMAFULL;
DEFINE FIELD kind ON link TYPE string;
DEFINE FIELD reason ON link TYPE string DEFAULT '';
DEFINE FIELD confidence ON link TYPE float DEFAULT 1.0;
DEFINE FIELD created_by ON link TYPE string ASSERT $value IN ['llm', 'user', 'import', 'agent'];
DEFINE FIELD status ON link TYPE string ASSERT $value IN ['proposed', 'accepted', 'rejected', 'rolled_back'];
DEFINE FIELD reviewed ON link TYPE bool DEFAULT false;
DEFINE FIELD event ON link TYPE option<record<event>>;
DEFINE FIELD created_at ON link TYPE datetime;
DEFINE INDEX link_unique ON link FIELDS in, out, kind UNIQUE;
DEFINE INDEX link_event ON link FIELDS event;

DEFINE TABLE event SCHEMAFULL;
DEFINE FIELD note ON event TYPE record<note>;
DEFINE FIELD kind ON event TYPE string DEFAULT 'enrich';
DEFINE FIELD model ON event TYPE option<string>;
DEFINE FIELD prompt_version ON event TYPE option<string>;
DEFINE FIELD tokens_in ON event TYPE int DEFAULT 0;
DEFINE FIELD tokens_out ON event TYPE int DEFAULT 0;
DEFINE FIELD tokens_estimated ON event TYPE bool DEFAULT false;
DEFINE FIELD llm_calls ON event TYPE int DEFAULT 0;
DEFINE FIELD unknown_handles ON event TYPE int DEFAULT 0;
DEFINE FIELD dropped ON event TYPE int DEFAULT 0;
DEFINE FIELD timings ON event TYPE object FLEXIBLE DEFAULT {};
DEFINE FIELD created_at ON event TYPE datetime;
DEFINE INDEX event_note ON event FIELDS note;

DEFINE TABLE revision SCHEMAFULL;
DEFINE FIELD note ON revision TYPE record<note>;
DEFINE FIELD event ON revision TYPE option<record<event>>;
DEFINE FIELD actor ON revision TYPE string;
DEFINE FIELD reason ON revision TYPE string DEFAULT '';
DEFINE FIELD before ON revision TYPE object FLEXIBLE;
DEFINE FIELD after ON revision TYPE object FLEXIBLE;
DEFINE FIELD embedding_before ON revision TYPE option<bytes>;
DEFINE FIELD embedding_after ON revision TYPE option<bytes>;
DEFINE FIELD status ON revision TYPE string ASSERT $value IN ['applied', 'proposed', 'rejected', 'rolled_back'];
DEFINE FIELD reviewed ON revision TYPE bool DEFAULT false;
DEFINE FIELD created_at ON revision TYPE datetime;
DEFINE INDEX revision_event ON revision FIELDS event;
DEFINE INDEX revision_note ON revision FIELDS note;

DEFINE TABLE job SCHEMAFULL;
DEFINE FIELD note ON job TYPE record<note>;
DEFINE FIELD kind ON job TYPE string;
DEFINE FIELD state ON job TYPE string ASSERT $value IN ['queued', 'running', 'done', 'failed'];
DEFINE FIELD attempts ON job TYPE int DEFAULT 0;
DEFINE FIELD last_error ON job TYPE option<string>;
DEFINE FIELD lease_until ON job TYPE option<datetime>;
DEFINE FIELD worker ON job TYPE option<string>;
DEFINE FIELD created_at ON job TYPE datetime;
DEFINE FIELD updated_at ON job TYPE datetime;
DEFINE INDEX job_state ON job FIELDS state;
DEFINE INDEX job_note ON job FIELDS note;

DEFINE TABLE audit SCHEMAFULL;
DEFINE FIELD action ON audit TYPE string;
DEFINE FIELD target ON audit TYPE string;
DEFINE FIELD notes ON audit TYPE array<record<note>> DEFAULT [];
DEFINE FIELD actor ON audit TYPE string;
DEFINE FIELD reason ON audit TYPE string DEFAULT '';
DEFINE FIELD at ON audit TYPE datetime;
DEFINE INDEX audit_notes ON audit FIELDS notes;

DEFINE TABLE setting SCHEMAFULL;
DEFINE FIELD value ON setting TYPE string;

DEFINE TABLE schema_version SCHEMAFULL;
DEFINE FIELD version ON schema_version TYPE int;
DEFINE FIELD applied_at ON schema_version TYPE datetime;
"#;

/// The memory lifecycle and Boxes: a note's tier (and project), when it entered
/// the memory (decay is counted from there), the `merged` status of a near-duplicate held
/// under a `same-entity` link, links created by a merge, project states, Boxes, and chat
/// sessions.
const V2: &str = r#"
DEFINE FIELD tier ON note TYPE string DEFAULT 'long_term' ASSERT $value IN ['long_term', 'short_term', 'project'];
DEFINE FIELD tier_set_by ON note TYPE string DEFAULT 'default' ASSERT $value IN ['default', 'llm', 'user'];
DEFINE FIELD project ON note TYPE option<string>;
DEFINE FIELD added_at ON note TYPE option<datetime>;
DEFINE FIELD OVERWRITE status ON note TYPE string DEFAULT 'active' ASSERT $value IN ['active', 'archived', 'merged'];
DEFINE INDEX note_status ON note FIELDS status;
DEFINE FIELD OVERWRITE created_by ON link TYPE string ASSERT $value IN ['llm', 'user', 'import', 'agent', 'merge'];

DEFINE TABLE project SCHEMAFULL;
DEFINE FIELD active ON project TYPE bool DEFAULT true;
DEFINE FIELD changed_at ON project TYPE datetime;

DEFINE TABLE box SCHEMAFULL;
DEFINE FIELD label ON box TYPE string;
DEFINE FIELD members ON box TYPE array<string>;
DEFINE FIELD core ON box TYPE array<string> DEFAULT [];
DEFINE FIELD updated_at ON box TYPE datetime;

DEFINE TABLE chat SCHEMAFULL;
DEFINE FIELD session ON chat TYPE string;
DEFINE FIELD role ON chat TYPE string ASSERT $value IN ['user', 'assistant'];
DEFINE FIELD content ON chat TYPE string;
DEFINE FIELD citations ON chat TYPE array<string> DEFAULT [];
DEFINE FIELD at ON chat TYPE datetime;
DEFINE INDEX chat_session ON chat FIELDS session, at;
"#;

/// Each change of an LLM revision with its own reason (evolution operations, and the tag
/// operations on a new note); revisions written before have none.
const V3: &str = r#"
DEFINE FIELD changes ON revision TYPE array<object> DEFAULT [];
DEFINE FIELD changes[*].op ON revision TYPE string;
DEFINE FIELD changes[*].value ON revision TYPE string;
DEFINE FIELD changes[*].reason ON revision TYPE string;
"#;

/// Who set a note's annotations: the values a person (user, import, agent) set, each as
/// `{ field, value, by }`; the rest are the LLM's (see kasten-core's `provenance`).
const V4: &str = r#"
DEFINE FIELD set_by ON note TYPE array<object> DEFAULT [];
DEFINE FIELD set_by[*].field ON note TYPE string ASSERT $value IN ['keywords', 'tags', 'context'];
DEFINE FIELD set_by[*].value ON note TYPE string;
DEFINE FIELD set_by[*].by ON note TYPE string ASSERT $value IN ['user', 'import', 'agent'];
"#;

/// A link an agent made names the agent: `agent:<name>` (the MCP client's name), or plain
/// `agent` when it gave none.
const V5: &str = r#"
DEFINE FIELD OVERWRITE created_by ON link TYPE string ASSERT $value IN ['llm', 'user', 'import', 'agent', 'merge'] OR string::starts_with($value, 'agent:');
"#;
