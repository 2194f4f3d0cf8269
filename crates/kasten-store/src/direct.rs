//! Notes read by id straight from an embedded datastore's records, past the query engine.
//!
//! After ranking, a search reads its hits' fields back from the store. Through SurrealQL
//! each record costs ~0.08 ms on a 100k memory whatever the statement (`SELECT` over the
//! ids, or `RETURN` following them): the executor's per-record work, not the key-value
//! read. Here the records are fetched in one read transaction of the datastore the store
//! opened itself (`Datastore::transaction` + the catalog's `get_records`), and only the
//! fields a note shows are converted. Same data, same transaction isolation as a query;
//! nothing is written this way.
//!
//! This leans on SurrealDB's internal crates (`surrealdb-catalog`, `surrealdb-kvs`, at the
//! exact version of `surrealdb`): the test `direct_reads_equal_the_query` in `tests.rs`
//! compares it with the query on notes of every shape, so an upgrade that changes the
//! record layout fails there, not in a user's search.

use std::sync::Arc;

use surrealdb::types::Value as PublicValue;
use surrealdb_catalog::providers::{CachePolicy, DatabaseProvider, TableProvider};
use surrealdb_catalog::val::{RecordId, TableName, Value};
use surrealdb_core::kvs::Datastore;
use surrealdb_kvs::TransactionType;

use crate::{DATABASE, NAMESPACE, NOTE_FIELDS};

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Reads note records of the embedded datastore `ds` by key (the note ids' text), in the
/// order given: `None` where no note has that key. Each record holds only the fields of
/// [`NOTE_FIELDS`] that it has (as `SELECT` of them would give, absent ones left out).
pub(crate) async fn read_notes(
    ds: &Arc<Datastore>,
    keys: &[String],
) -> Result<Vec<Option<PublicValue>>, String> {
    let tx = ds.transaction(TransactionType::Read).await.map_err(text)?;
    let read = async {
        let Some(def) = tx
            .get_db_by_name(NAMESPACE, DATABASE, None)
            .await
            .map_err(text)?
        else {
            return Ok(vec![None; keys.len()]);
        };
        let table = TableName::from("note");
        let rids: Vec<RecordId> = keys
            .iter()
            .map(|k| RecordId::new(table.clone(), k.clone()))
            .collect();
        let records = tx
            .get_records(
                def.namespace_id,
                def.database_id,
                &rids,
                None,
                CachePolicy::ReadOnly,
            )
            .await
            .map_err(text)?;
        let mut out = Vec::with_capacity(records.len());
        for r in records {
            let Value::Object(fields) = &r.data else {
                // a key without a record reads as an empty one (NONE)
                out.push(None);
                continue;
            };
            let mut row = surrealdb::types::Object::new();
            for name in NOTE_FIELDS {
                if let Some(v) = fields.get(name) {
                    row.insert(*name, PublicValue::try_from(v.clone()).map_err(text)?);
                }
            }
            out.push(Some(PublicValue::Object(row)));
        }
        Ok::<_, String>(out)
    };
    let out = read.await;
    // a read transaction: nothing to keep, whatever happened
    let _ = tx.cancel().await;
    out
}
