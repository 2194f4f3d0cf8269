use super::*;

/// A pending note with `content`, as a new note is written (shared by the store tests).
pub(crate) fn note(content: &str) -> Note {
    let now = Utc::now();
    Note {
        id: NoteId::generate(),
        content: content.to_owned(),
        created_at: now,
        updated_at: now,
        keywords: vec![],
        tags: vec![],
        context: String::new(),
        status: NoteStatus::Active,
        enrich_state: EnrichState::Pending { reason: None },
        source: None,
        strength: 1.0,
        access_count: 0,
        last_accessed: None,
        version: 1,
        tier: Default::default(),
        project: None,
        added_at: now,
        set_by: Vec::new(),
    }
}

pub(crate) fn write(n: &Note, emb: Vec<f32>) -> NoteWrite {
    NoteWrite {
        note: n.clone(),
        embedding: Some(emb),
        embed_model: Some("m".into()),
        job: Some(JobId::generate()),
    }
}

pub(crate) async fn mem() -> Store {
    match Store::open(&Endpoint::Mem).await {
        Ok(s) => s,
        Err(e) => panic!("open mem store: {e}"),
    }
}

#[tokio::test]
async fn notes_round_trip_with_embeddings_and_jobs() -> Result<(), StoreError> {
    let s = mem().await;
    let latest = crate::schema::MIGRATIONS.last().map_or(0, |m| m.0);
    assert_eq!(s.schema_version().await?, latest);
    let a = note("first note");
    let b = note("second note");
    s.insert_notes(&[
        write(&a, vec![0.25, -1.5, 3.0]),
        write(&b, vec![1.0, 0.0, 0.0]),
    ])
    .await?;
    assert_eq!(s.count_notes().await?, 2);
    assert_eq!(s.queued_jobs().await?, 2);
    let got = s.get_note(&a.id).await?;
    assert_eq!(got.as_ref().map(|n| n.content.as_str()), Some("first note"));
    assert_eq!(
        got.map(|n| n.enrich_state),
        Some(EnrichState::Pending { reason: None })
    );
    let both = s.get_notes(&[b.id.clone(), a.id.clone()]).await?;
    assert_eq!(
        both.iter().map(|n| n.id.clone()).collect::<Vec<_>>(),
        vec![b.id.clone(), a.id.clone()]
    );
    let rows = s.index_rows(None, 10).await?;
    let ra = rows
        .iter()
        .find(|r| r.id == a.id)
        .and_then(|r| r.embedding.clone());
    assert_eq!(ra, Some(vec![0.25, -1.5, 3.0]));
    s.close().await;
    Ok(())
}

/// A batch is written whole or not at all: a note whose id is already stored (or an
/// invalid note) refuses the batch, and nothing of it (notes or jobs) is kept.
#[tokio::test]
async fn a_batch_with_a_stored_id_or_a_bad_note_writes_nothing() -> Result<(), StoreError> {
    let s = mem().await;
    let a = note("already here");
    s.insert_notes(&[write(&a, vec![1.0, 0.0])]).await?;
    let fresh = note("new in the refused batch");
    let again = Note {
        content: "the same id again".into(),
        ..a.clone()
    };
    let refused = s
        .insert_notes(&[write(&fresh, vec![0.0, 1.0]), write(&again, vec![0.5, 0.5])])
        .await;
    assert!(refused.is_err(), "a stored id must refuse the batch");
    let blank = note("   ");
    let refused = s
        .insert_notes(&[write(&fresh, vec![0.0, 1.0]), write(&blank, vec![0.5, 0.5])])
        .await;
    assert!(refused.is_err(), "a blank note must refuse the batch");
    assert_eq!(s.count_notes().await?, 1);
    assert_eq!(s.queued_jobs().await?, 1);
    assert!(s.get_note(&fresh.id).await?.is_none());
    assert_eq!(
        s.get_note(&a.id).await?.map(|n| n.content),
        Some("already here".to_owned())
    );
    // every field a bulk write sets comes back as written
    let mut full = note("every field set");
    full.keywords = vec!["k1".into(), "k2".into()];
    full.tags = vec!["t".into()];
    full.context = "a context".into();
    full.source = Some("vault/a.md".into());
    full.strength = 0.75;
    full.access_count = 3;
    full.version = 4;
    full.project = Some("p".into());
    full.enrich_state = EnrichState::Failed {
        error: "server down".into(),
    };
    s.insert_notes(&[NoteWrite {
        job: None,
        ..write(&full, vec![2.0])
    }])
    .await?;
    let got = s.get_note(&full.id).await?;
    assert_eq!(got.as_ref().map(|n| &n.keywords), Some(&full.keywords));
    assert_eq!(got.as_ref().map(|n| &n.tags), Some(&full.tags));
    assert_eq!(got.as_ref().map(|n| n.context.as_str()), Some("a context"));
    assert_eq!(got.as_ref().and_then(|n| n.source.clone()), full.source);
    assert_eq!(got.as_ref().map(|n| n.strength), Some(0.75));
    assert_eq!(got.as_ref().map(|n| n.access_count), Some(3));
    assert_eq!(got.as_ref().map(|n| n.version), Some(4));
    assert_eq!(got.as_ref().and_then(|n| n.project.clone()), full.project);
    assert_eq!(got.map(|n| n.enrich_state), Some(full.enrich_state));
    assert_eq!(s.queued_jobs().await?, 1);
    s.close().await;
    Ok(())
}

/// `get_notes` gives the notes that exist in the order asked (an id asked twice comes
/// twice, a missing one not at all), and a note stored before it had a tier or a time
/// added reads as long-term, added when it was last updated.
#[tokio::test]
async fn get_notes_skips_missing_ids_and_reads_older_notes() -> Result<(), StoreError> {
    let s = mem().await;
    let a = note("first");
    let b = note("second");
    s.insert_notes(&[write(&a, vec![1.0]), write(&b, vec![2.0])])
        .await?;
    s.db.query("UPDATE type::record('note', $id) SET tier = NONE, added_at = NONE")
        .bind(("id", b.id.to_string()))
        .await
        .map_err(StoreError::from_db)?;
    let missing = NoteId::generate();
    let got = s
        .get_notes(&[b.id.clone(), missing, a.id.clone(), b.id.clone()])
        .await?;
    let ids: Vec<&NoteId> = got.iter().map(|n| &n.id).collect();
    assert_eq!(ids, vec![&b.id, &a.id, &b.id]);
    assert_eq!(got[0].tier, Tier::LongTerm);
    assert_eq!(got[0].added_at, got[0].updated_at);
    assert_eq!(got[1].content, "first");
    assert!(s.get_notes(&[NoteId::generate()]).await?.is_empty());
    s.close().await;
    Ok(())
}

/// An audit entry's action is stored as its word and read back as the action; a word this
/// build does not write (an older or newer version's, a backup's) reads back as it came.
#[tokio::test]
async fn audit_actions_are_stored_as_their_words_and_other_words_read_back()
-> Result<(), StoreError> {
    use kasten_core::{Action, Actor};
    let s = mem().await;
    let a = note("a note with an audit log");
    s.insert_notes(&[write(&a, vec![1.0])]).await?;
    // a row an older version wrote, with a word this build does not know
    s.db.query(
        "CREATE audit CONTENT { action: 'split', target: $id, notes: [type::record('note', $id)],
            actor: 'user', reason: '', at: d'2020-01-01T00:00:00Z' }",
    )
    .bind(("id", a.id.to_string()))
    .await
    .map_err(StoreError::from_db)?;
    let entry = |action: Action| crate::AuditEntry {
        action,
        target: a.id.to_string(),
        notes: vec![a.id.to_string()],
        actor: Actor::User,
        reason: String::new(),
        at: Utc::now(),
    };
    s.apply_review(&crate::ReviewBatch {
        audit: vec![
            entry(Action::BothTrue),
            entry(Action::Other("merge_all".into())),
        ],
        ..crate::ReviewBatch::default()
    })
    .await?;
    s.keep(&a.id, 1.0, Utc::now(), Actor::User.as_str()).await?;
    let read: Vec<Action> = s
        .audit_of(&a.id)
        .await?
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(read.len(), 4, "{read:?}");
    assert_eq!(read[0], Action::Other("split".into()));
    for want in [
        Action::BothTrue,
        Action::Other("merge_all".into()),
        Action::Keep,
    ] {
        assert!(read.contains(&want), "{want:?} not in {read:?}");
    }
    // the words in the store are the plain words
    let mut resp =
        s.db.query("SELECT VALUE action FROM audit ORDER BY action")
            .await
            .map_err(StoreError::from_db)?;
    let words: Vec<String> = resp.take(0).map_err(StoreError::from_db)?;
    assert_eq!(words, ["both_true", "keep", "merge_all", "split"]);
    s.close().await;
    Ok(())
}

/// A note read from its record (`direct.rs`) is the note a query reads, whatever its
/// shape: optional fields set or absent, every status and enrichment state, a note
/// written before `tier` and `added_at` existed, text in any script, ids missing or given
/// twice; on disk and in memory.
#[tokio::test]
async fn direct_reads_equal_the_query() -> Result<(), StoreError> {
    // the direct read converts exactly the columns the queries select
    assert_eq!(NOTE_FIELDS.join(", "), NOTE_COLUMNS);
    let dir = tempfile::tempdir().map_err(|e| StoreError::Db(e.to_string()))?;
    for ep in [Endpoint::SurrealKv(dir.path().join("db")), Endpoint::Mem] {
        let s = Store::open(&ep).await?;
        assert!(s.db.datastore().is_some(), "{ep}: not read directly");
        let mut notes = vec![note("plain"), note("Zürich — 東京 🙂 \"quoted\"\n\ttabbed")];
        let mut full = note("every optional field set");
        full.keywords = vec!["lake".into(), "dawn".into()];
        full.tags = vec!["nature".into()];
        full.context = "a walk".into();
        full.source = Some("chat:S1:3".into());
        full.project = Some("kasten".into());
        full.tier = Tier::Project;
        full.strength = 0.25;
        full.access_count = 7;
        full.last_accessed = Some(Utc::now());
        full.version = 3;
        full.enrich_state = EnrichState::Done;
        notes.push(full);
        let mut failed = note("failed enrichment");
        failed.enrich_state = EnrichState::Failed {
            error: "the LLM timed out".into(),
        };
        notes.push(failed);
        let mut pending = note("pending with a reason");
        pending.enrich_state = EnrichState::Pending {
            reason: Some("no LLM".into()),
        };
        notes.push(pending);
        let mut archived = note("archived");
        archived.status = NoteStatus::Archived;
        notes.push(archived);
        let writes: Vec<NoteWrite> = notes.iter().map(|n| write(n, vec![0.5; 8])).collect();
        s.insert_notes(&writes).await?;
        s.db.query("UPDATE type::record('note', $id) SET tier = NONE, added_at = NONE")
            .bind(("id", notes[0].id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        s.db.query("UPDATE type::record('note', $id) SET last_accessed = time::now()")
            .bind(("id", notes[2].id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let mut ids: Vec<NoteId> = notes.iter().rev().map(|n| n.id.clone()).collect();
        ids.insert(2, NoteId::generate());
        let direct = s.read_notes(&ids).await?;
        assert_eq!(direct, s.query_notes(&ids).await?, "{ep}");
        assert_eq!(direct.len(), notes.len());
        assert_eq!(direct[0].status, NoteStatus::Archived);
        assert!(direct[3].last_accessed.is_some());
        // an id given twice comes back twice, where it was asked
        ids.push(notes[1].id.clone());
        let again = s.read_notes(&ids).await?;
        assert_eq!(again[..notes.len()], direct[..]);
        assert_eq!(again.last(), direct.iter().find(|n| n.id == notes[1].id));
        s.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn index_rows_page_through_everything_once() -> Result<(), StoreError> {
    let s = mem().await;
    let notes: Vec<Note> = (0..25).map(|i| note(&format!("n{i}"))).collect();
    let writes: Vec<NoteWrite> = notes.iter().map(|n| write(n, vec![1.0])).collect();
    s.insert_notes(&writes).await?;
    let mut seen = Vec::new();
    let mut after: Option<NoteId> = None;
    loop {
        let page = s.index_rows(after.as_ref(), 7).await?;
        if page.is_empty() {
            break;
        }
        after = page.last().map(|r| r.id.clone());
        seen.extend(page.into_iter().map(|r| r.id));
    }
    let mut expected: Vec<NoteId> = notes.iter().map(|n| n.id.clone()).collect();
    expected.sort();
    assert_eq!(seen, expected);
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn a_failing_batch_writes_nothing() -> Result<(), StoreError> {
    let s = mem().await;
    let a = note("ok");
    s.insert_notes(&[write(&a, vec![1.0])]).await?;
    // the same id again makes the CREATE fail: the new note in the batch must not land
    let fresh = note("fresh");
    let r = s
        .insert_notes(&[write(&fresh, vec![1.0]), write(&a, vec![1.0])])
        .await;
    assert!(r.is_err());
    assert_eq!(s.get_note(&fresh.id).await?, None);
    assert_eq!(s.count_notes().await?, 1);
    assert_eq!(s.queued_jobs().await?, 1);
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn delete_removes_note_and_jobs_and_reports_absence() -> Result<(), StoreError> {
    let s = mem().await;
    let a = note("to delete");
    s.insert_notes(&[write(&a, vec![1.0])]).await?;
    assert!(s.delete_note(&a.id).await?.is_some());
    assert_eq!(s.get_note(&a.id).await?, None);
    assert_eq!(s.queued_jobs().await?, 0);
    assert!(s.delete_note(&a.id).await?.is_none());
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn settings_round_trip() -> Result<(), StoreError> {
    let s = mem().await;
    assert_eq!(s.get_setting("embedding").await?, None);
    let v = serde_json::json!({"model": "m", "dim": 384});
    s.set_setting("embedding", &v).await?;
    assert_eq!(s.get_setting("embedding").await?, Some(v));
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn the_database_rejects_empty_content_itself() -> Result<(), StoreError> {
    let s = mem().await;
    let r = s.insert_notes(&[write(&note("   "), vec![1.0])]).await;
    assert!(r.is_err());
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn on_disk_store_survives_reopen_and_locks_out_a_second_opener() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().map_err(|e| StoreError::Db(e.to_string()))?;
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let a = note("persisted");
    {
        let s = Store::open(&ep).await?;
        s.insert_notes(&[write(&a, vec![0.5, 0.5])]).await?;
        // a second opener (same process, separate file description) is refused clearly
        match Store::open(&ep).await {
            Err(StoreError::Locked(_)) => {}
            Err(e) => panic!("expected Locked, got {e}"),
            Ok(_) => panic!("second open of a locked store succeeded"),
        }
        s.close().await;
    }
    let s = Store::open(&ep).await?;
    assert_eq!(
        s.get_note(&a.id).await?.map(|n| n.content),
        Some("persisted".into())
    );
    assert_eq!(
        s.schema_version().await?,
        crate::schema::MIGRATIONS.last().map_or(0, |m| m.0),
        "migrations are not re-run"
    );
    assert!(s.disk_bytes() > 0);
    s.close().await;
    Ok(())
}

#[test]
fn storage_limits_come_from_the_environment_in_mib() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(
        StorageLimits::from_vars(StorageLimits::default(), &vars(&[])),
        StorageLimits::default()
    );
    let set = StorageLimits::from_vars(
        StorageLimits::default(),
        &vars(&[
            ("KASTEN_DB_CACHE_MB", "16"),
            ("KASTEN_DB_MEMTABLE_MB", " 32 "),
        ]),
    );
    assert_eq!((set.block_cache, set.memtable), (16 << 20, 32 << 20));
    // nonsense and too-small values keep the defaults
    let bad = StorageLimits::from_vars(
        StorageLimits::default(),
        &vars(&[
            ("KASTEN_DB_CACHE_MB", "lots"),
            ("KASTEN_DB_MEMTABLE_MB", "1"),
        ]),
    );
    assert_eq!(bad, StorageLimits::default());
    // the base for bulk writes: a smaller memtable, still overridden by the variable
    let restore = StorageLimits {
        memtable: 32 << 20,
        ..StorageLimits::default()
    };
    let set = StorageLimits::from_vars(restore, &vars(&[("KASTEN_DB_MEMTABLE_MB", "64")]));
    assert_eq!((set.block_cache, set.memtable), (16 << 20, 64 << 20));
    assert_eq!(StorageLimits::from_vars(restore, &vars(&[])), restore);
}

/// The limits reach SurrealKV: a transaction larger than the memtable is refused (and
/// nothing of it is kept), the same transaction fits under the default limits.
#[tokio::test]
async fn the_embedded_datastore_takes_the_memtable_limit() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().map_err(|e| StoreError::Db(e.to_string()))?;
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    // 6 notes of 1 MiB each in one transaction
    let big: Vec<Note> = (0..6)
        .map(|i| note(&format!("{i} {}", "x".repeat(1 << 20))))
        .collect();
    let writes: Vec<_> = big.iter().map(|n| write(n, vec![0.5, 0.5])).collect();
    let small = StorageLimits {
        block_cache: 1 << 20,
        memtable: 4 << 20,
    };
    let s = Store::open_with_limits(&ep, &small).await?;
    let refused = s.insert_notes(&writes).await;
    assert!(refused.is_err(), "a 6 MiB transaction fit a 4 MiB memtable");
    assert_eq!(
        s.count_notes().await?,
        0,
        "part of a refused transaction was kept"
    );
    s.close().await;
    let s = Store::open(&ep).await?;
    s.insert_notes(&writes).await?;
    assert_eq!(s.count_notes().await?, 6);
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn an_unusable_data_directory_is_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // a path below a regular file can never be created, even by root
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    match Store::open(&Endpoint::SurrealKv(file.join("db"))).await {
        Err(StoreError::DataDir { path, .. }) => assert!(path.ends_with("plain-file/db"), "{path}"),
        Err(e) => panic!("expected DataDir error, got {e}"),
        Ok(_) => panic!("opened a store below a file"),
    }
    // a read-only directory (permission bits do not bind root, so only checked otherwise)
    let ro = dir.path().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::write(ro.join("probe"), b"x").is_err() {
        match Store::open(&Endpoint::SurrealKv(ro.clone())).await {
            Err(StoreError::DataDir { message, .. }) => {
                assert!(message.contains("not writable"), "{message}")
            }
            Err(e) => panic!("expected DataDir error, got {e}"),
            Ok(_) => panic!("opened a read-only directory"),
        }
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The links a note write carries are written with it, whole; a link to a note that is
/// gone (deleted while the batch was compared) is left out and the batch still lands.
#[tokio::test]
async fn the_links_of_a_note_write_land_with_it_and_none_to_a_missing_note()
-> Result<(), StoreError> {
    let s = mem().await;
    let old = note("The rent is 1,200 euros.");
    s.insert_notes(&[write(&old, vec![1.0, 0.0, 0.0])]).await?;
    let new = note("The rent is 1,300 euros.");
    let gone = note("never written");
    let at = chrono::Utc::now();
    let differ = |to: &Note, accepted: bool| crate::DifferWrite {
        from: new.id.clone(),
        to: to.id.clone(),
        kind: crate::SUPERSEDES.into(),
        reason: "rent: 1,200 euros → 1,300 euros".into(),
        confidence: 1.0,
        accepted,
        at,
        by: kasten_core::Actor::Merge,
    };
    s.insert_notes_flagged(
        &[write(&new, vec![0.0, 1.0, 0.0])],
        &[],
        &[differ(&old, true), differ(&gone, false)],
        &[],
    )
    .await?;
    assert_eq!(s.count_notes().await?, 2);
    let links = s.links_of(&new.id).await?;
    assert_eq!(links.len(), 1, "{links:?}");
    let l = &links[0];
    assert_eq!((&l.from, &l.to), (&new.id, &old.id));
    assert_eq!(l.kind.as_str(), crate::SUPERSEDES);
    assert_eq!(l.reason, "rent: 1,200 euros → 1,300 euros");
    assert_eq!(l.status, kasten_core::LinkStatus::Accepted);
    assert_eq!(l.created_by, kasten_core::Actor::Merge);
    s.close().await;
    Ok(())
}
