//! Opening and closing a store: the data directory checked, the datastore's memory
//! limits, the migrations; the store's size on disk.

use super::*;

impl Store {
    /// Opens (creating if needed) the database at `endpoint` and runs pending migrations.
    /// An embedded datastore gets [`StorageLimits::from_env`].
    pub async fn open(endpoint: &Endpoint) -> Result<Self, StoreError> {
        Self::open_with_limits(endpoint, &StorageLimits::from_env()).await
    }

    /// [`Store::open`] with the embedded datastore's memory limits given.
    pub async fn open_with_limits(
        endpoint: &Endpoint,
        limits: &StorageLimits,
    ) -> Result<Self, StoreError> {
        if let Endpoint::SurrealKv(dir) = endpoint {
            prepare_dir(dir)?;
        }
        let db = match endpoint {
            Endpoint::SurrealKv(_) | Endpoint::Mem => open_embedded(&endpoint.url(), limits).await,
            _ => any::connect(endpoint.url())
                .await
                .map(notecache::Conn::Any)
                .map_err(|e| e.to_string()),
        }
        .map_err(|msg| match endpoint {
            Endpoint::SurrealKv(dir) if msg.contains("already locked") => Self::locked(dir),
            Endpoint::SurrealKv(dir) => StoreError::DataDir {
                path: dir.display().to_string(),
                message: msg,
            },
            _ => StoreError::Db(msg),
        })?;
        // a server may be written by other processes: no note cache
        let db = notecache::Db::new(db, !matches!(endpoint, Endpoint::Remote(_)));
        if matches!(endpoint, Endpoint::Remote(_)) {
            db.query(format!("DEFINE NAMESPACE IF NOT EXISTS {NAMESPACE}; USE NS {NAMESPACE}; DEFINE DATABASE IF NOT EXISTS {DATABASE};"))
                .await
                .map_err(StoreError::from_db)?
                .check()
                .map_err(StoreError::from_db)?;
        }
        db.use_ns_db(NAMESPACE, DATABASE)
            .await
            .map_err(StoreError::from_db)?;
        let mut store = Store {
            db,
            endpoint: endpoint.clone(),
            snapshot: SnapshotBook::default(),
        };
        if let Err(e) = store.migrate().await {
            store.close().await;
            return Err(e);
        }
        if matches!(endpoint, Endpoint::SurrealKv(_)) {
            match store.get_setting(SNAPSHOT_SETTING).await {
                Ok(v) => store.snapshot.sealed = v.and_then(|v| v.as_str().map(str::to_owned)),
                Err(e) => {
                    store.close().await;
                    return Err(e);
                }
            }
        }
        Ok(store)
    }

    pub(crate) fn locked(dir: &Path) -> StoreError {
        StoreError::Locked(dir.display().to_string())
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Closes the database and waits until its files are released. Every exit path must
    /// call this (see the crate docs).
    pub async fn close(self) {
        let Store { db, endpoint, .. } = self;
        drop(db);
        if let Endpoint::SurrealKv(dir) = endpoint {
            wait_for_unlock(&dir).await;
        }
    }

    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        let current = self.schema_version().await?;
        let known = schema::MIGRATIONS.last().map_or(0, |m| m.0);
        if current > known {
            return Err(StoreError::TooNew {
                found: current,
                known,
            });
        }
        for (version, sql) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            let q = format!(
                "BEGIN TRANSACTION;\n{sql}\nUPSERT schema_version:current SET version = $v, applied_at = time::now();\nCOMMIT TRANSACTION;"
            );
            let mut tries = 1;
            loop {
                let applied = async {
                    let mut resp = self
                        .db
                        .query(q.as_str())
                        .bind(("v", *version as i64))
                        .await
                        .map_err(StoreError::from_db)?;
                    first_real_error(&mut resp)
                }
                .await;
                let Err(e) = applied else {
                    tracing::info!(version, "applied schema migration");
                    break;
                };
                // Processes opening a new memory on a server together all try this: the
                // losers' transactions conflict, or find the tables already defined. The
                // migration is then applied, which is all that matters.
                if self.schema_version().await? >= *version {
                    break;
                }
                if matches!(e, StoreError::Conflict) && tries < u64::from(CONFLICT_TRIES) {
                    tokio::time::sleep(Duration::from_millis(30 * tries)).await;
                    tries += 1;
                    continue;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// The last migration applied (0 for a new database).
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        self.schema_version_in(None).await
    }

    /// [`Store::schema_version`] read inside a read transaction, or outside any.
    pub(crate) async fn schema_version_in(
        &self,
        tx: Option<&notecache::ReadTx>,
    ) -> Result<u32, StoreError> {
        let mut resp = self
            .db
            .query_in(tx, "SELECT VALUE version FROM ONLY schema_version:current")
            .await
            .map_err(StoreError::from_db)?;
        // On a new database the table does not exist yet: that is version 0.
        match resp.take::<Option<i64>>(0) {
            Ok(v) => Ok(v.unwrap_or(0).max(0) as u32),
            Err(_) => Ok(0),
        }
    }

    /// Bytes the embedded database occupies on disk, without the index snapshot (0 for
    /// other endpoints).
    pub fn disk_bytes(&self) -> u64 {
        match &self.endpoint {
            Endpoint::SurrealKv(dir) => {
                let snapshot = std::fs::metadata(dir.join(SNAPSHOT_FILE)).map_or(0, |m| m.len());
                dir_size(dir).saturating_sub(snapshot)
            }
            _ => 0,
        }
    }
}

pub(crate) fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// About the most a bulk write (a restore's transaction, an import's batch of notes)
/// puts in one transaction: a transaction must fit in SurrealKV's memtable, which may be
/// as small as 16 MiB (`KASTEN_DB_MEMTABLE_MB`), and 500 long notes would not.
pub const BULK_WRITE_BYTES: usize = 4 << 20;

/// The size of SurrealKV's data blocks, the unit it reads from disk: a note read by id
/// reads (and checksums, and copies) the whole block that holds it. SurrealKV's default
/// is 64 KiB; at 4 KiB a search's 10 notes of a 20k memory read in 0.28-0.29 ms instead
/// of 0.61-0.65 (0.99 instead of 1.47 through a query; measure build, the memory built
/// each way). Tables written before take it on as compaction rewrites them.
pub(crate) const DATA_BLOCK_BYTES: usize = 4 << 10;

/// How much memory the embedded datastore may hold, besides Kasten's own indexes.
///
/// SurrealKV sizes both from the machine by default: a block cache of half the RAM less
/// 1 GiB, a memtable of up to 1 GiB (4 GiB on large machines). A personal memory needs
/// far less: the indexes that rank live in Kasten (kasten-index), and what the store
/// reads after ranking is a few notes, kept in the note cache. Override with
/// `KASTEN_DB_CACHE_MB` and `KASTEN_DB_MEMTABLE_MB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageLimits {
    /// SurrealKV's block cache (bytes).
    pub block_cache: u64,
    /// SurrealKV's memtable (bytes); also the largest single transaction it accepts.
    pub memtable: u64,
}

impl Default for StorageLimits {
    fn default() -> Self {
        StorageLimits {
            block_cache: 16 << 20,
            memtable: 128 << 20,
        }
    }
}

impl StorageLimits {
    /// The defaults, with `KASTEN_DB_CACHE_MB` / `KASTEN_DB_MEMTABLE_MB` when set to a
    /// whole number of MiB (anything else is ignored with a warning).
    pub fn from_env() -> Self {
        Self::from_vars(StorageLimits::default(), &|k| std::env::var(k).ok())
    }

    /// The limits for a bulk write of a whole memory (a restore, a vault import), whose
    /// transactions end at about [`BULK_WRITE_BYTES`]: a 32 MiB memtable (SurrealKV holds
    /// up to two while one is flushed; restoring 100k notes peaked ~110 MiB higher with
    /// the default, in the same time), or what `KASTEN_DB_CACHE_MB` /
    /// `KASTEN_DB_MEMTABLE_MB` say.
    pub fn for_bulk_writes_from_env() -> Self {
        let base = StorageLimits {
            memtable: 32 << 20,
            ..StorageLimits::default()
        };
        Self::from_vars(base, &|k| std::env::var(k).ok())
    }

    pub(crate) fn from_vars(base: StorageLimits, var: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut limits = base;
        let read = |name: &str, min_mb: u64, into: &mut u64| {
            if let Some(v) = var(name) {
                match v.trim().parse::<u64>() {
                    Ok(mb) if mb >= min_mb => *into = mb << 20,
                    _ => tracing::warn!(
                        "ignoring {name}={v}: expected a whole number of MiB, at least {min_mb}"
                    ),
                }
            }
        };
        read("KASTEN_DB_CACHE_MB", 1, &mut limits.block_cache);
        read("KASTEN_DB_MEMTABLE_MB", 16, &mut limits.memtable);
        limits
    }
}

/// Opens an embedded datastore as the SDK's `connect` does, with SurrealKV's cache and
/// memtable capped by `limits` (the SDK passes no storage settings to an embedded
/// datastore, so it is built here and handed to the SDK).
async fn open_embedded(url: &str, limits: &StorageLimits) -> Result<notecache::Conn, String> {
    use surrealdb_cnf::ConfigMap;
    use surrealdb_core::kvs::Datastore;
    let config = ConfigMap::empty()
        .with_key_value(
            "surrealkv_block_cache_capacity",
            limits.block_cache.to_string(),
        )
        .with_key_value("surrealkv_max_memtable_size", limits.memtable.to_string())
        .with_key_value("surrealkv_block_size", DATA_BLOCK_BYTES.to_string());
    // the maintenance tasks start only once the version key is settled (as the SDK does:
    // a task's write before it would make a new datastore look like an old one)
    let ds = Datastore::builder()
        .with_config(config)
        .without_maintenance_tasks()
        .build_with_path(url)
        .await
        .map_err(|e| e.to_string())?;
    ds.check_version().await.map_err(|e| e.to_string())?;
    ds.bootstrap().await.map_err(|e| e.to_string())?;
    ds.start_maintenance_tasks();
    let db = surrealdb::Surreal::<surrealdb::engine::local::Db>::unstable_from_datastore(
        ds.clone(),
        None,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(notecache::Conn::Local(db, ds))
}

/// Creates the data directory and checks it is writable, so that a read-only or full
/// disk is reported in plain words before the database engine sees it.
pub(crate) fn prepare_dir(dir: &Path) -> Result<(), StoreError> {
    let err = |message: String| StoreError::DataDir {
        path: dir.display().to_string(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    let probe: PathBuf = dir.join(".kasten-write-check");
    std::fs::write(&probe, b"ok").map_err(|e| err(format!("it is not writable ({e})")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Waits (up to 30 s) until SurrealKV's LOCK file can be locked, i.e. its shutdown after
/// the last handle was dropped has finished.
pub(crate) async fn wait_for_unlock(dir: &Path) {
    let lock = dir.join("LOCK");
    let start = std::time::Instant::now();
    let deadline = start + Duration::from_secs(30);
    loop {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock)
        {
            Ok(f) => {
                if f.try_lock().is_ok() {
                    let _ = f.unlock();
                    tracing::debug!(
                        waited_ms = start.elapsed().as_millis() as u64,
                        "store closed"
                    );
                    return;
                }
            }
            // no LOCK file: nothing holds the directory
            Err(_) => return,
        }
        if std::time::Instant::now() > deadline {
            tracing::warn!(path = %lock.display(), "database did not release its lock within 30 s");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
