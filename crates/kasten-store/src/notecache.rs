//! The display fields of recently read notes, kept in step with every write.
//!
//! A search reads its hits back from the store ([`Store::get_notes`]); the same notes
//! come back again and again (a conversation's follow-up questions, the app re-running a
//! search, agents asking about the same topic). Those are answered from here without a
//! query.
//!
//! Keeping in step: every query this store sends goes through [`Db::query`]. One that may
//! write (its text holds a SurrealQL statement that writes: `CREATE`, `UPDATE`, `UPSERT`,
//! `DELETE`, `INSERT`, `RELATE`, `REMOVE`, `DEFINE`, `ALTER`, `REBUILD`) empties the cache
//! and advances its generation when it is sent and again when it returns. A read stores
//! what it fetched only if the generation did not move while it ran, so nothing read
//! before a write can be kept after it. New store methods are covered without knowing
//! about the cache. Only embedded stores keep one: a SurrealDB server may be written by
//! other processes.
//!
//! One write says which notes it changes ([`Db::query_touching`]): saving a batch of new
//! notes changes only those notes and the ones they are merged into (links and events are
//! other tables). It advances the generation the same way but forgets only those notes, so
//! the notes a bulk write compares each batch with stay cached from one batch to the next.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use kasten_core::{Note, NoteId};
use surrealdb::engine::any::Any;
use surrealdb::engine::local::Db as Local;
use surrealdb::method::{IntoVariables, Query, Transaction};
use surrealdb::{IndexedResults, Surreal};

/// Notes kept (display fields only, no embedding: ~1 KB each).
pub(crate) const NOTE_CACHE_CAPACITY: usize = 2048;

/// Statements that write, as whole words of a query's text.
const WRITE_WORDS: &[&str] = &[
    "create", "update", "upsert", "delete", "insert", "relate", "remove", "define", "alter",
    "rebuild",
];

/// Whether a query's text may write: it holds a writing statement's keyword as a whole
/// word (case ignored). Bound values are not part of the text; a false alarm only empties
/// the cache.
pub(crate) fn may_write(sql: &str) -> bool {
    sql.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| WRITE_WORDS.iter().any(|k| w.eq_ignore_ascii_case(k)))
}

#[derive(Default)]
struct Entries {
    notes: HashMap<NoteId, Note>,
    order: VecDeque<NoteId>,
}

/// The cache and its write generation.
pub(crate) struct NoteCache {
    enabled: bool,
    generation: AtomicU64,
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl NoteCache {
    pub(crate) fn new(enabled: bool) -> Self {
        NoteCache {
            enabled,
            generation: AtomicU64::new(0),
            entries: Mutex::new(Entries::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// A write is being sent or has returned: nothing read before it is kept.
    fn written(&self) {
        if !self.enabled {
            return;
        }
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, SeqCst);
        e.notes.clear();
        e.order.clear();
    }

    /// A write that changes only the notes of `ids` is being sent or has returned:
    /// [`NoteCache::written`] for those notes alone (reads still in flight keep nothing).
    fn written_only(&self, ids: &HashSet<NoteId>) {
        if !self.enabled {
            return;
        }
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, SeqCst);
        if e.notes.is_empty() {
            return;
        }
        e.notes.retain(|id, _| !ids.contains(id));
        e.order.retain(|id| !ids.contains(id));
    }

    /// The generation a read starts at.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(SeqCst)
    }

    /// The notes of `ids` the cache holds, and the ids it does not.
    pub(crate) fn lookup(&self, ids: &[NoteId]) -> (HashMap<NoteId, Note>, Vec<NoteId>) {
        if !self.enabled {
            return (HashMap::new(), ids.to_vec());
        }
        let e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = HashMap::new();
        let mut missing = Vec::new();
        for id in ids {
            match e.notes.get(id) {
                Some(n) => {
                    found.insert(id.clone(), n.clone());
                }
                None => missing.push(id.clone()),
            }
        }
        self.hits.fetch_add(found.len() as u64, SeqCst);
        self.misses.fetch_add(missing.len() as u64, SeqCst);
        (found, missing)
    }

    /// Keeps notes read by a query that started at `generation`, unless a write was sent
    /// since.
    pub(crate) fn keep(&self, generation: u64, notes: &[Note]) {
        if !self.enabled {
            return;
        }
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if self.generation.load(SeqCst) != generation {
            return;
        }
        for n in notes {
            if e.notes.insert(n.id.clone(), n.clone()).is_none() {
                e.order.push_back(n.id.clone());
            }
        }
        while e.notes.len() > NOTE_CACHE_CAPACITY {
            let Some(old) = e.order.pop_front() else {
                break;
            };
            e.notes.remove(&old);
        }
    }

    /// (hits, misses) since open.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.hits.load(SeqCst), self.misses.load(SeqCst))
    }
}

/// A connection: an embedded datastore the store opened itself (with its own storage
/// settings, see `crate::open_embedded`), or any endpoint the SDK connects to.
pub(crate) enum Conn {
    /// With the datastore itself, for reads past the query engine (`direct.rs`).
    Local(
        Surreal<Local>,
        std::sync::Arc<surrealdb_core::kvs::Datastore>,
    ),
    Any(Surreal<Any>),
}

/// The database handle every store query goes through (see the module docs).
pub(crate) struct Db {
    inner: Conn,
    pub(crate) cache: NoteCache,
}

impl Db {
    pub(crate) fn new(inner: Conn, cache: bool) -> Self {
        Db {
            inner,
            cache: NoteCache::new(cache),
        }
    }

    /// [`Surreal::query`], keeping the note cache in step when the query may write.
    pub(crate) fn query<'c>(&'c self, sql: impl Into<Cow<'c, str>>) -> Sent<'c> {
        let sql = sql.into();
        let writes = may_write(&sql);
        if writes {
            self.cache.written();
        }
        Sent {
            query: self.send(sql),
            cache: writes.then_some(Written::All(&self.cache)),
        }
    }

    /// [`Db::query`] for a write that changes no note but those of `touched` (it may
    /// create them, change them or delete them; it may write other tables freely): only
    /// those notes leave the note cache. The caller answers for the list — a note it
    /// changes and leaves out would be read stale.
    pub(crate) fn query_touching<'c>(
        &'c self,
        sql: impl Into<Cow<'c, str>>,
        touched: impl IntoIterator<Item = NoteId>,
    ) -> Sent<'c> {
        let touched: HashSet<NoteId> = touched.into_iter().collect();
        self.cache.written_only(&touched);
        Sent {
            query: self.send(sql.into()),
            cache: Some(Written::Only(&self.cache, touched)),
        }
    }

    fn send<'c>(&'c self, sql: Cow<'c, str>) -> Sending<'c> {
        match &self.inner {
            Conn::Local(db, _) => Sending::Local(db.query(sql)),
            Conn::Any(db) => Sending::Any(db.query(sql)),
        }
    }

    /// Begins a transaction that is only read from ([`ReadTx`]): every query sent through
    /// it sees the database as it was when it began, whatever commits meanwhile.
    pub(crate) async fn begin_read(&self) -> surrealdb::Result<ReadTx> {
        Ok(match &self.inner {
            Conn::Local(db, _) => ReadTx::Local(db.clone().begin().await?),
            Conn::Any(db) => ReadTx::Any(db.clone().begin().await?),
        })
    }

    /// [`Db::query`] inside `tx` (reads only: a read-only transaction keeps no note
    /// cache in step), or outside any transaction when `tx` is `None`.
    pub(crate) fn query_in<'c>(
        &'c self,
        tx: Option<&'c ReadTx>,
        sql: impl Into<Cow<'c, str>>,
    ) -> Sent<'c> {
        let Some(tx) = tx else {
            return self.query(sql);
        };
        let sql = sql.into();
        debug_assert!(!may_write(&sql), "a write in a read transaction: {sql}");
        Sent {
            query: match tx {
                ReadTx::Local(t) => Sending::Local(t.query(sql)),
                ReadTx::Any(t) => Sending::Any(t.query(sql)),
            },
            cache: None,
        }
    }

    /// The embedded datastore, when the store opened it itself.
    pub(crate) fn datastore(&self) -> Option<&std::sync::Arc<surrealdb_core::kvs::Datastore>> {
        match &self.inner {
            Conn::Local(_, ds) => Some(ds),
            Conn::Any(_) => None,
        }
    }

    /// Selects the namespace and database every later query runs in.
    pub(crate) async fn use_ns_db(&self, ns: &str, db: &str) -> surrealdb::Result<()> {
        match &self.inner {
            Conn::Local(c, _) => c.use_ns(ns).use_db(db).await.map(drop),
            Conn::Any(c) => c.use_ns(ns).use_db(db).await.map(drop),
        }
    }
}

/// A transaction of the datastore that is only read from and then cancelled: reads that
/// take several queries (a backup's pages) see one state of the database.
pub(crate) enum ReadTx {
    Local(Transaction<Local>),
    Any(Transaction<Any>),
}

/// Ends a read transaction: nothing was written, so it is cancelled, never committed (a
/// failure to cancel is only logged; the reads are done).
pub(crate) async fn end_read(tx: ReadTx) {
    let ended = match tx {
        ReadTx::Local(t) => t.cancel().await.map(drop),
        ReadTx::Any(t) => t.cancel().await.map(drop),
    };
    if let Err(err) = ended {
        tracing::warn!(%err, "could not end a read transaction");
    }
}

enum Sending<'c> {
    Local(Query<'c, Local>),
    Any(Query<'c, Any>),
}

/// What a write sent through [`Db`] does to the note cache when it returns.
pub(crate) enum Written<'c> {
    /// Empties it.
    All(&'c NoteCache),
    /// Forgets these notes.
    Only(&'c NoteCache, HashSet<NoteId>),
}

impl Written<'_> {
    fn apply(&self) {
        match self {
            Written::All(c) => c.written(),
            Written::Only(c, ids) => c.written_only(ids),
        }
    }
}

/// A query on its way: [`Query`] that, when it may write, empties the cache again (or
/// forgets the notes it changes) when it returns.
pub(crate) struct Sent<'c> {
    query: Sending<'c>,
    cache: Option<Written<'c>>,
}

impl<'c> Sent<'c> {
    pub(crate) fn bind(self, vars: impl IntoVariables) -> Self {
        Sent {
            query: match self.query {
                Sending::Local(q) => Sending::Local(q.bind(vars)),
                Sending::Any(q) => Sending::Any(q.bind(vars)),
            },
            cache: self.cache,
        }
    }
}

impl<'c> IntoFuture for Sent<'c> {
    type Output = surrealdb::Result<IndexedResults>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'c>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            // emptied again whether the write returned, failed or was cancelled
            struct Again<'a>(Option<Written<'a>>);
            impl Drop for Again<'_> {
                fn drop(&mut self) {
                    if let Some(w) = &self.0 {
                        w.apply();
                    }
                }
            }
            let _again = Again(self.cache);
            match self.query {
                Sending::Local(q) => q.await,
                Sending::Any(q) => q.await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Endpoint, NoteWrite, Store, StoreError};

    /// A note read twice is answered from the cache the second time; after any write
    /// (here one no store method knows, sent straight to the database) the next read
    /// sees the change.
    #[tokio::test]
    async fn a_cached_note_is_never_read_stale_after_a_write() -> Result<(), StoreError> {
        let s = Store::open(&Endpoint::Mem).await?;
        let n = crate::tests::note("a heron at the lake");
        s.insert_notes(&[NoteWrite {
            note: n.clone(),
            embedding: Some(vec![1.0, 0.0]),
            embed_model: Some("m".into()),
            job: None,
        }])
        .await?;
        let ids = [n.id.clone()];
        assert_eq!(s.get_notes(&ids).await?[0].tags, Vec::<String>::new());
        let (hits, _) = s.note_cache_counts();
        assert_eq!(s.get_notes(&ids).await?[0].content, n.content);
        assert_eq!(
            s.note_cache_counts().0,
            hits + 1,
            "the second read was not cached"
        );
        let mut resp =
            s.db.query("UPDATE type::record('note', $id) SET tags = ['birds'], context = 'seen'")
                .bind(("id", n.id.to_string()))
                .await
                .map_err(StoreError::from_db)?;
        crate::first_real_error(&mut resp)?;
        let after = s.get_notes(&ids).await?;
        assert_eq!(after[0].tags, vec!["birds".to_owned()]);
        assert_eq!(after[0].context, "seen");
        s.close().await;
        Ok(())
    }

    /// Saving a batch forgets only the notes it changes: an untouched note stays cached
    /// across it, the note a new one is merged into is read fresh.
    #[tokio::test]
    async fn a_batch_write_forgets_only_the_notes_it_changes() -> Result<(), StoreError> {
        let s = Store::open(&Endpoint::Mem).await?;
        let write = |n: &Note| NoteWrite {
            note: n.clone(),
            embedding: Some(vec![1.0, 0.0]),
            embed_model: Some("m".into()),
            job: None,
        };
        let (kept, target) = (
            crate::tests::note("a heron at the lake"),
            crate::tests::note("the boat is blue"),
        );
        s.insert_notes(&[write(&kept), write(&target)]).await?;
        let ids = [kept.id.clone(), target.id.clone()];
        assert_eq!(s.get_notes(&ids).await?.len(), 2);

        let mut repeat = crate::tests::note("the boat is blue!");
        repeat.status = kasten_core::NoteStatus::Merged;
        let fresh = crate::tests::note("a new note");
        let merge = crate::MergeWrite {
            note: repeat.id.clone(),
            duplicate_of: target.id.clone(),
            event: "merge1".into(),
            reason: "the same".into(),
            similarity: 0.99,
            accepted: true,
            strength: 2.5,
            at: chrono::Utc::now(),
        };
        s.insert_notes_flagged(&[write(&repeat), write(&fresh)], &[merge], &[], &[])
            .await?;
        let (hits, misses) = s.note_cache_counts();
        let after = s.get_notes(&ids).await?;
        assert_eq!(
            s.note_cache_counts(),
            (hits + 1, misses + 1),
            "the untouched note was not kept, or the merge target was"
        );
        assert_eq!(after[0].content, kept.content);
        assert!((after[1].strength - 2.5).abs() < 1e-9, "{:?}", after[1]);
        s.close().await;
        Ok(())
    }

    #[test]
    fn writing_statements_are_told_from_reads() {
        for sql in [
            "UPDATE note SET x = 1",
            "BEGIN TRANSACTION; upsert setting:a SET value = $v; COMMIT",
            "LET $a = (CREATE note); RETURN $a",
            "DELETE type::record('setting', $k)",
            "INSERT RELATION INTO link $rows",
            "RELATE $a->link->$b",
            "DEFINE FIELD x ON note",
        ] {
            assert!(may_write(sql), "{sql}");
        }
        for sql in [
            "SELECT record::id(id) AS id, updated_at, created_at FROM note",
            "SELECT count() AS n FROM note GROUP ALL",
            "RETURN array::flatten(array::map($s, |$x| (SELECT source FROM note)))",
            "INFO FOR DB",
        ] {
            assert!(!may_write(sql), "{sql}");
        }
    }
}
