//! Import support and full backups.
//!
//! **Backup** is generic: every table of the database (as `INFO FOR DB` lists them) is
//! read whole and written as JSON in which SurrealDB's own types are tagged —
//! `{"$datetime": RFC 3339 with nanoseconds}`, `{"$bytes": base64}`,
//! `{"$record": {"table", "key"}}`, `{"$decimal"}`, `{"$duration"}`, `{"$uuid"}`,
//! `{"$float": "NaN"}`, `{"$none": true}` — so a restore writes back exactly the values that
//! were read, including fields added by later migrations, without this module knowing them.
//! Restore refuses a memory that holds anything but settings, and a backup written by a
//! newer schema.

use std::collections::{BTreeMap, HashMap, HashSet};

use base64::Engine as _;
use chrono::{DateTime, Utc};
use kasten_core::{LinkStatus, NoteId};
use serde_json::{Value as Json, json};
use surrealdb::types::{
    Array, Bytes, Datetime, Number, Object, RecordId, RecordIdKey, SurrealValue, Table, Value,
};

use crate::notecache::{ReadTx, end_read};
use crate::{Store, StoreError, first_real_error, schema};

/// The `format` field of a backup file.
pub const BACKUP_FORMAT: &str = "kasten-backup";
/// The layout version of a backup file (not the schema version).
pub const BACKUP_VERSION: u64 = 1;
/// Tables whose rows are not restored: the target's migrations wrote them already.
pub(crate) const NOT_RESTORED: &[&str] = &["schema_version"];
/// Tables that may hold rows in a memory that is still "empty" for a restore.
pub(crate) const ALLOWED_IN_EMPTY: &[&str] = &["schema_version", "setting"];
/// Tables restored first (others referenced them), in this order; the rest follow by name.
const FIRST: &[&str] = &["note", "event", "revision", "job", "audit"];
/// Rows per restore transaction.
const RESTORE_BATCH: usize = 500;

/// A link created by an import.
#[derive(Debug, Clone)]
pub struct ImportLinkWrite {
    pub from: NoteId,
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    pub status: LinkStatus,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct LinkParam {
    from: String,
    to: String,
    kind: String,
    reason: String,
    confidence: f64,
    status: String,
    created_at: DateTime<Utc>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct SourceRow {
    id: String,
    source: Option<String>,
    content: String,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct EdgeRow {
    from: String,
    to: String,
    kind: String,
}

/// Rows restored per table, and the schema version the backup was written with.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RestoreSummary {
    pub tables: BTreeMap<String, u64>,
    pub schema_version: u32,
}

impl Store {
    /// The notes (id, source, content) whose source is one of `sources`.
    pub async fn notes_with_sources(
        &self,
        sources: &[String],
    ) -> Result<Vec<(NoteId, Option<String>, String)>, StoreError> {
        if sources.is_empty() {
            return Ok(Vec::new());
        }
        let mut resp = self
            .db
            // one indexed lookup per source (`note_source`), not a scan per batch
            .query("RETURN array::flatten(array::map($s, |$x| (SELECT record::id(id) AS id, source, content FROM note WHERE source = $x)))")
            .bind(("s", sources.to_vec()))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<SourceRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    NoteId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    r.source,
                    r.content,
                ))
            })
            .collect()
    }

    /// The content of each of these notes that exists.
    pub async fn contents_of(&self, ids: &[NoteId]) -> Result<HashMap<NoteId, String>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            // a missing record comes back as an empty row: keep only notes that exist
            .query("SELECT record::id(id) AS id, source, content FROM array::map($ids, |$k| type::record('note', $k)) WHERE content != NONE")
            .bind(("ids", keys))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<SourceRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    NoteId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    r.content,
                ))
            })
            .collect()
    }

    /// Creates the links that do not exist yet (same ends and kind) in one transaction.
    /// Returns how many were created; the others already existed.
    pub async fn insert_import_links(&self, links: &[ImportLinkWrite]) -> Result<u64, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.insert_import_links_unmarked(links).await)
    }

    /// [`Store::insert_import_links`] without the snapshot bookkeeping.
    async fn insert_import_links_unmarked(
        &self,
        links: &[ImportLinkWrite],
    ) -> Result<u64, StoreError> {
        if links.is_empty() {
            return Ok(0);
        }
        let froms: Vec<String> = links
            .iter()
            .map(|l| l.from.to_string())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let mut resp = self
            .db
            // the links leaving each note, through the graph edges (no scan of `link`)
            .query("RETURN array::flatten(array::map($f, |$k| (SELECT record::id(in) AS from, record::id(out) AS to, kind FROM type::record('note', $k)->link)))")
            .bind(("f", froms))
            .await
            .map_err(StoreError::from_db)?;
        let existing: Vec<EdgeRow> = resp.take(0).map_err(StoreError::from_db)?;
        let existing: HashSet<(String, String, String)> = existing
            .into_iter()
            .map(|e| (e.from, e.to, e.kind))
            .collect();
        let mut seen = HashSet::new();
        let params: Vec<LinkParam> = links
            .iter()
            .filter(|l| {
                let key = (l.from.to_string(), l.to.to_string(), l.kind.clone());
                !existing.contains(&key) && seen.insert(key)
            })
            .map(|l| LinkParam {
                from: l.from.to_string(),
                to: l.to.to_string(),
                kind: l.kind.clone(),
                reason: l.reason.clone(),
                confidence: l.confidence,
                // imported links are held or in force; nothing arrives rejected
                status: match l.status {
                    LinkStatus::Proposed => LinkStatus::Proposed,
                    _ => LinkStatus::Accepted,
                }
                .to_string(),
                created_at: l.created_at,
            })
            .collect();
        let n = params.len() as u64;
        if n == 0 {
            return Ok(0);
        }
        let q = "BEGIN TRANSACTION;
            FOR $l IN $links {
                LET $a = type::record('note', $l.from);
                LET $b = type::record('note', $l.to);
                IF (SELECT VALUE id FROM link WHERE in = $a AND out = $b AND kind = $l.kind LIMIT 1) == [] {
                    RELATE $a->link->$b CONTENT {
                        kind: $l.kind, reason: $l.reason, confidence: $l.confidence,
                        created_by: $by_import, status: $l.status, reviewed: false,
                        created_at: $l.created_at
                    };
                };
            };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("links", params))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)?;
        Ok(n)
    }

    /// The names of the database's tables, sorted.
    pub(crate) async fn table_names(&self, tx: Option<&ReadTx>) -> Result<Vec<String>, StoreError> {
        let mut resp = self
            .db
            .query_in(tx, "INFO FOR DB")
            .await
            .map_err(StoreError::from_db)?;
        let info: Value = resp.take(0).map_err(StoreError::from_db)?;
        let Value::Object(info) = info else {
            return Err(StoreError::Db("INFO FOR DB returned no object".into()));
        };
        let Some(Value::Object(tables)) = info.into_inner().remove("tables") else {
            return Err(StoreError::Db("INFO FOR DB listed no tables".into()));
        };
        let mut names: Vec<String> = tables
            .into_inner()
            .into_keys()
            .filter(|t| valid_table(t))
            .collect();
        names.sort();
        Ok(names)
    }

    async fn table_rows(&self, tx: &ReadTx, table: &str) -> Result<Vec<Value>, StoreError> {
        let mut resp = self
            .db
            .query_in(Some(tx), format!("SELECT * FROM {table} ORDER BY id"))
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    pub(crate) async fn table_count(
        &self,
        tx: Option<&ReadTx>,
        table: &str,
    ) -> Result<u64, StoreError> {
        let mut resp = self
            .db
            .query_in(tx, format!("SELECT count() AS n FROM {table} GROUP ALL"))
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// Everything in the memory, as a JSON document (see the module docs): one state of
    /// it, read in one transaction.
    pub async fn backup(&self) -> Result<Json, StoreError> {
        let tx = self.db.begin_read().await.map_err(StoreError::from_db)?;
        let doc = self.backup_in(&tx).await;
        end_read(tx).await;
        doc
    }

    async fn backup_in(&self, tx: &ReadTx) -> Result<Json, StoreError> {
        let mut tables = serde_json::Map::new();
        for t in self.table_names(Some(tx)).await? {
            let rows = self.table_rows(tx, &t).await?;
            let mut rows: Vec<Json> = rows.into_iter().map(to_json).collect::<Result<_, _>>()?;
            // the index snapshot's seal describes this memory's own snapshot file, not data
            rows.retain(|r| !is_snapshot_seal(&t, r));
            // secrets stay out of backups: the API key is the keyring's (or, where there is
            // none, this machine's settings), never a file's that is copied elsewhere
            if t == "setting" {
                rows.iter_mut().for_each(without_secrets);
            }
            tables.insert(t, Json::Array(rows));
        }
        Ok(json!({
            "format": BACKUP_FORMAT,
            "version": BACKUP_VERSION,
            "schema_version": self.schema_version_in(Some(tx)).await?,
            "created_at": Utc::now().to_rfc3339(),
            "tables": tables,
        }))
    }

    /// Tables other than settings that hold rows, with their counts: a restore needs an
    /// empty memory.
    pub async fn non_empty_tables(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut out = Vec::new();
        for t in self.table_names(None).await? {
            if ALLOWED_IN_EMPTY.contains(&t.as_str()) {
                continue;
            }
            let n = self.table_count(None, &t).await?;
            if n > 0 {
                out.push((t, n));
            }
        }
        Ok(out)
    }

    /// Writes a backup into this memory, which the caller has checked is empty
    /// ([`Store::non_empty_tables`]): every row exactly as it was read.
    /// Settings are replaced by the backup's. Each batch of rows is one transaction.
    pub async fn restore(&self, backup: &Json) -> Result<RestoreSummary, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.restore_unmarked(backup).await)
    }

    /// [`Store::restore`] without the snapshot bookkeeping.
    async fn restore_unmarked(&self, backup: &Json) -> Result<RestoreSummary, StoreError> {
        let bad = |m: &str| StoreError::Corrupt(format!("not a Kasten backup: {m}"));
        let found = check_header(
            backup.get("format").and_then(Json::as_str),
            backup.get("version").and_then(Json::as_u64),
            backup.get("schema_version").and_then(Json::as_u64),
        )?;
        let tables = backup
            .get("tables")
            .and_then(Json::as_object)
            .ok_or_else(|| bad("it has no \"tables\""))?;
        let mut order: Vec<&String> = tables.keys().collect();
        order.sort_by_key(|t| restore_rank(t));
        let mut summary = RestoreSummary {
            schema_version: found,
            ..Default::default()
        };
        let relations = self.relation_tables().await?;
        for t in order {
            if NOT_RESTORED.contains(&t.as_str()) {
                continue;
            }
            if !valid_table(t) {
                return Err(bad(&format!("table name '{t}'")));
            }
            let rows = tables
                .get(t)
                .and_then(Json::as_array)
                .ok_or_else(|| bad(&format!("table {t} is not a list")))?;
            // the snapshot seal vouches for this memory's own index snapshot, never for
            // the memory a backup came from
            let kept: Vec<Json>;
            let rows: &[Json] = if t == "setting" {
                kept = rows
                    .iter()
                    .filter(|r| !is_snapshot_seal(t, r))
                    .cloned()
                    .collect();
                &kept
            } else {
                rows
            };
            if t == "setting" {
                self.clear_settings().await?;
            }
            let relation = relations.contains(t);
            for chunk in rows.chunks(RESTORE_BATCH) {
                self.insert_backup_rows(t, chunk, relation).await?;
            }
            summary.tables.insert(t.clone(), rows.len() as u64);
        }
        Ok(summary)
    }

    /// Removes every setting (a restore replaces them with the backup's).
    pub(crate) async fn clear_settings(&self) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("DELETE setting")
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// Writes rows of a backup into `table` exactly as they were read, in one transaction.
    pub(crate) async fn insert_backup_rows(
        &self,
        table: &str,
        rows: &[Json],
        relation: bool,
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let values: Vec<Value> = rows.iter().map(from_json).collect::<Result<_, _>>()?;
        let verb = if relation {
            "INSERT RELATION INTO"
        } else {
            "INSERT INTO"
        };
        let mut resp = self
            .db
            .query(format!(
                "BEGIN TRANSACTION; {verb} {table} $rows RETURN NONE; COMMIT TRANSACTION;"
            ))
            .bind(("rows", Value::Array(Array::from(values))))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    pub(crate) async fn relation_tables(&self) -> Result<HashSet<String>, StoreError> {
        let mut resp = self
            .db
            .query("INFO FOR DB")
            .await
            .map_err(StoreError::from_db)?;
        let info: Value = resp.take(0).map_err(StoreError::from_db)?;
        let mut out = HashSet::new();
        if let Value::Object(info) = info
            && let Some(Value::Object(tables)) = info.into_inner().remove("tables")
        {
            for (name, def) in tables.into_inner() {
                if let Value::String(d) = def
                    && d.contains("TYPE RELATION")
                {
                    out.insert(name);
                }
            }
        }
        Ok(out)
    }
}

/// Checks a backup's header fields; returns the schema version it was written with.
pub(crate) fn check_header(
    format: Option<&str>,
    version: Option<u64>,
    schema_version: Option<u64>,
) -> Result<u32, StoreError> {
    let bad = |m: &str| StoreError::Corrupt(format!("not a Kasten backup: {m}"));
    if format != Some(BACKUP_FORMAT) {
        return Err(bad("its \"format\" is not \"kasten-backup\""));
    }
    match version {
        Some(v) if v <= BACKUP_VERSION => {}
        Some(v) => {
            return Err(StoreError::Corrupt(format!(
                "the backup has layout version {v}; this Kasten reads up to {BACKUP_VERSION}"
            )));
        }
        None => return Err(bad("it has no \"version\"")),
    }
    let found = schema_version.ok_or_else(|| bad("it has no \"schema_version\""))? as u32;
    let known = schema::MIGRATIONS.last().map_or(0, |m| m.0);
    if found > known {
        return Err(StoreError::TooNew { found, known });
    }
    Ok(found)
}

/// Where a table goes in a restore: the tables others refer to first, links last.
pub(crate) fn restore_rank(t: &str) -> (usize, bool, String) {
    (
        FIRST.iter().position(|f| *f == t).unwrap_or(FIRST.len()),
        t == "link",
        t.to_owned(),
    )
}

/// Whether a backup row is the index snapshot's seal (`setting:index_snapshot`).
/// Removes `api_key` from a backed-up `setting:llm` row (its value is JSON in a string).
pub(crate) fn without_secrets(row: &mut Json) {
    if row.pointer("/id/$record/key").and_then(Json::as_str) != Some("llm") {
        return;
    }
    let Some(value) = row.get_mut("value") else {
        return;
    };
    if let Some(mut v) = value
        .as_str()
        .and_then(|s| serde_json::from_str::<Json>(s).ok())
        && let Some(obj) = v.as_object_mut()
        && obj.remove("api_key").is_some()
    {
        *value = Json::String(v.to_string());
    }
}

pub(crate) fn is_snapshot_seal(table: &str, row: &Json) -> bool {
    table == "setting"
        && row.pointer("/id/$record/key").and_then(Json::as_str) == Some(crate::SNAPSHOT_SETTING)
}

pub(crate) fn valid_table(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 64
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn tagged(tag: &str, v: Json) -> Json {
    let mut m = serde_json::Map::new();
    m.insert(tag.to_owned(), v);
    Json::Object(m)
}

/// A SurrealDB value as tagged JSON.
pub fn to_json(v: Value) -> Result<Json, StoreError> {
    Ok(match v {
        Value::None => tagged("$none", Json::Bool(true)),
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(b),
        Value::Number(Number::Int(i)) => Json::from(i),
        Value::Number(Number::Float(f)) => match serde_json::Number::from_f64(f) {
            Some(n) => Json::Number(n),
            None => tagged("$float", Json::String(f.to_string())),
        },
        Value::Number(Number::Decimal(d)) => tagged("$decimal", Json::String(d.to_string())),
        Value::String(s) => Json::String(s),
        Value::Bytes(b) => tagged(
            "$bytes",
            Json::String(base64::engine::general_purpose::STANDARD.encode(b.into_inner())),
        ),
        Value::Datetime(d) => {
            let d: DateTime<Utc> = d.into();
            tagged(
                "$datetime",
                Json::String(d.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            )
        }
        Value::Duration(d) => tagged("$duration", Json::String(d.to_string())),
        Value::Uuid(u) => tagged("$uuid", Json::String(u.to_string())),
        Value::RecordId(r) => {
            let key = match r.key {
                RecordIdKey::Number(n) => Json::from(n),
                RecordIdKey::String(s) => Json::String(s),
                other => {
                    return Err(StoreError::Db(format!(
                        "cannot back up a record id with key {other:?}"
                    )));
                }
            };
            tagged(
                "$record",
                json!({ "table": r.table.into_string(), "key": key }),
            )
        }
        Value::Array(a) => Json::Array(
            a.into_vec()
                .into_iter()
                .map(to_json)
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => {
            let mut m = serde_json::Map::new();
            for (k, v) in o.into_inner() {
                if matches!(v, Value::None) {
                    continue;
                }
                m.insert(k, to_json(v)?);
            }
            Json::Object(m)
        }
        other => {
            return Err(StoreError::Db(format!(
                "cannot back up a value of this type: {other:?}"
            )));
        }
    })
}

/// Tagged JSON back to the SurrealDB value it was made from.
pub fn from_json(j: &Json) -> Result<Value, StoreError> {
    let bad = |m: String| StoreError::Corrupt(format!("backup value: {m}"));
    Ok(match j {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Number(Number::Int(i)),
            None => Value::Number(Number::Float(
                n.as_f64().ok_or_else(|| bad(format!("number {n}")))?,
            )),
        },
        Json::String(s) => Value::String(s.clone()),
        Json::Array(a) => Value::Array(Array::from(
            a.iter().map(from_json).collect::<Result<Vec<_>, _>>()?,
        )),
        Json::Object(m) => {
            if m.len() == 1
                && let Some((tag, v)) = m.iter().next()
                && tag.starts_with('$')
            {
                return tagged_value(tag, v);
            }
            let mut o = Object::new();
            for (k, v) in m {
                o.insert(k.clone(), from_json(v)?);
            }
            Value::Object(o)
        }
    })
}

fn tagged_value(tag: &str, v: &Json) -> Result<Value, StoreError> {
    let bad = |m: String| StoreError::Corrupt(format!("backup value {tag}: {m}"));
    let text = || v.as_str().ok_or_else(|| bad("not text".into()));
    Ok(match tag {
        "$none" => Value::None,
        "$float" => Value::Number(Number::Float(
            text()?.parse::<f64>().map_err(|e| bad(e.to_string()))?,
        )),
        "$decimal" => Value::Number(Number::Decimal(
            text()?.parse().map_err(|e| bad(format!("{e}")))?,
        )),
        "$bytes" => Value::Bytes(Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(text()?)
                .map_err(|e| bad(e.to_string()))?,
        )),
        "$datetime" => {
            let d = DateTime::parse_from_rfc3339(text()?).map_err(|e| bad(e.to_string()))?;
            Value::Datetime(Datetime::from(d.with_timezone(&Utc)))
        }
        "$duration" => Value::Duration(text()?.parse().map_err(|e| bad(format!("{e}")))?),
        "$uuid" => Value::Uuid(text()?.parse().map_err(|e| bad(format!("{e}")))?),
        "$record" => {
            let table = v
                .get("table")
                .and_then(Json::as_str)
                .ok_or_else(|| bad("no table".into()))?;
            let key = match v.get("key") {
                Some(Json::String(s)) => RecordIdKey::String(s.clone()),
                Some(Json::Number(n)) => {
                    RecordIdKey::Number(n.as_i64().ok_or_else(|| bad(format!("key {n}")))?)
                }
                _ => return Err(bad("no key".into())),
            };
            Value::RecordId(RecordId::new(Table::new(table), key))
        }
        other => return Err(bad(format!("unknown tag {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_json_round_trips_every_kind_of_value() {
        let mut o = Object::new();
        o.insert("s", "text".to_owned());
        o.insert("i", 3i64);
        o.insert("f", 1.0f64);
        o.insert("g", 0.1f64);
        let t = DateTime::parse_from_rfc3339("2024-01-02T03:04:05.123456789Z")
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_default();
        let mut m = o.into_inner();
        m.insert("t".into(), Value::Datetime(Datetime::from(t)));
        m.insert("b".into(), Value::Bytes(Bytes::from(vec![0u8, 1, 255])));
        m.insert(
            "r".into(),
            Value::RecordId(RecordId::new(
                Table::new("note"),
                RecordIdKey::from("01ABC"),
            )),
        );
        m.insert(
            "n".into(),
            Value::RecordId(RecordId::new(Table::new("x"), RecordIdKey::from(7i64))),
        );
        m.insert(
            "a".into(),
            Value::Array(Array::from(vec![
                Value::Null,
                Value::None,
                Value::Bool(true),
            ])),
        );
        let v = Value::Object(Object::from_iter(m));
        let j = to_json(v.clone()).expect("to json");
        let text = serde_json::to_string(&j).expect("serialise");
        let back: Json = serde_json::from_str(&text).expect("parse");
        assert_eq!(from_json(&back).expect("from json"), v);
    }
}
