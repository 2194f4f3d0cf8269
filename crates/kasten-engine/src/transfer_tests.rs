//! `import_notes`, `export_vault` and backup/restore on an in-memory store.
#![allow(clippy::panic)]

use kasten_core::LinkStatus;
use kasten_core::markdown::{VaultFile, plan_vault};
use kasten_core::transfer::{ImportLink, ImportNote};

use super::*;
use crate::tests::HashEmbedder;

async fn open_mem() -> Engine {
    match Engine::open(&Endpoint::Mem, HashEmbedder::arc("h", 64, 1), &|_| {}).await {
        Ok(e) => e,
        Err(err) => panic!("open: {err}"),
    }
}

fn item(content: &str, source: Option<&str>, id: Option<&NoteId>) -> ImportNote {
    let n = NewNote::new(content)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_source(source.map(str::to_owned));
    ImportNote {
        id: id.cloned(),
        ..ImportNote::plain(n, content)
    }
}

fn link(from: usize, to: usize) -> ImportLink {
    ImportLink {
        from,
        to,
        kind: "wikilink".into(),
        reason: "test".into(),
        confidence: 1.0,
        status: LinkStatus::Accepted,
    }
}

#[tokio::test]
async fn an_import_skips_what_is_there_and_never_reuses_a_taken_id() -> Result<(), EngineError> {
    let e = open_mem().await;
    let items = vec![
        item("alpha note", Some("v/a.md"), None),
        item("beta note", Some("v/b.md"), None),
        // the same source and content twice in one import: saved once
        item("alpha note", Some("v/a.md"), None),
        // the same content from another file: a note of its own
        item("alpha note", Some("v/c.md"), None),
    ];
    let s = e
        .import_notes(items.clone(), &[link(0, 1), link(1, 0)], 1, &|_| {})
        .await?;
    assert_eq!((s.created, s.existing, s.links_created), (3, 1, 2));
    assert_eq!(s.ids[0], s.ids[2]);
    assert_ne!(s.ids[0], s.ids[3]);
    assert_eq!(s.queued, 3);

    // again: nothing new, the links are recognised
    let again = e
        .import_notes(items.clone(), &[link(0, 1), link(1, 0)], 10, &|_| {})
        .await?;
    assert_eq!((again.created, again.existing), (0, 4));
    assert_eq!((again.links_created, again.links_existing), (0, 2));
    assert_eq!(again.ids, s.ids);

    // an id that is free is kept; one taken by a different note is not
    let free = NoteId::generate();
    let taken = s.ids[1].clone();
    let third = e
        .import_notes(
            vec![
                item("gamma note", None, Some(&free)),
                item("not the beta note", None, Some(&taken)),
                item("beta note", Some("elsewhere"), Some(&taken)),
            ],
            &[],
            10,
            &|_| {},
        )
        .await?;
    assert_eq!(third.ids[0], free);
    assert_ne!(third.ids[1], taken);
    assert_eq!(third.ids[2], taken, "same id and content: the same note");
    assert_eq!((third.created, third.existing), (2, 1));
    assert_eq!(e.count().await?, 5);
    // imported links take part in link expansion (room for every note, so the linked
    // note displaces no nearer direct hit)
    let hits = e.search("alpha", 10).await?;
    assert!(
        hits.hits.iter().any(|h| h.note.id == s.ids[1]
            && h.via
                .iter()
                .any(|v| matches!(v, kasten_core::Via::Link { from } if from == &s.ids[0]))),
        "{hits:?}"
    );
    e.close().await;
    Ok(())
}

#[tokio::test]
async fn an_export_imports_into_a_new_memory_as_the_same_notes() -> Result<(), EngineError> {
    let a = open_mem().await;
    let items = vec![
        item(
            "# Rust\n\nA language. See [[Tokio]].",
            Some("v/Rust.md"),
            None,
        ),
        item("# Tokio\n\nA runtime.", Some("v/Tokio.md"), None),
        item("archived thought", None, None),
    ];
    let mut items = items;
    items[2].archived = true;
    let s = a
        .import_notes(items.clone(), &[link(0, 1)], 10, &|_| {})
        .await?;
    let files = a.export_vault(&[]).await?;
    assert_eq!(files.len(), 3);
    assert!(
        files
            .iter()
            .any(|f| f.name == "Rust.md" && f.text.contains("[[Tokio]]"))
    );

    let vault: Vec<VaultFile> = files
        .iter()
        .map(|f| VaultFile {
            path: f.name.clone(),
            bytes: Some(f.text.clone().into_bytes()),
            modified: None,
        })
        .collect();
    let plan = plan_vault("export", &vault);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let b = open_mem().await;
    let t = b
        .import_notes(plan.notes.clone(), &plan.links, 10, &|_| {})
        .await?;
    assert_eq!((t.created, t.links_created), (3, 1));
    for id in &s.ids {
        let (x, y) = (a.get(id).await?, b.get(id).await?);
        assert_eq!(x.note.content, y.note.content);
        assert_eq!(x.note.created_at, y.note.created_at);
        assert_eq!(x.note.source, y.note.source);
        assert_eq!(x.note.status, y.note.status);
        let ends = |d: &NoteDetail| {
            d.links
                .iter()
                .map(|l| (l.from.clone(), l.to.clone(), l.kind.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ends(&x), ends(&y));
    }
    // the archived note stays out of search
    let hits = b.search("archived thought", 3).await?;
    assert!(hits.hits.iter().all(|h| h.note.id != s.ids[2]));
    a.close().await;
    b.close().await;
    Ok(())
}

#[tokio::test]
async fn restore_needs_an_empty_memory_and_rebuilds_the_indexes() -> Result<(), EngineError> {
    let a = open_mem().await;
    let s = a
        .import_notes(
            vec![
                item("backup me", Some("x:1"), None),
                item("and me", Some("x:2"), None),
            ],
            &[link(0, 1)],
            10,
            &|_| {},
        )
        .await?;
    let doc = a.backup().await?;
    let refused = a.restore_backup(&doc, &|_| {}).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("only into an empty memory")),
        "{refused:?}"
    );
    let b = open_mem().await;
    let r = b.restore_backup(&doc, &|_| {}).await?;
    assert_eq!(r.tables.get("note"), Some(&2));
    // compared before searching: a search reinforces what it finds
    assert_eq!(b.backup().await?["tables"]["note"], doc["tables"]["note"]);
    let hits = b.search("backup me", 1).await?;
    assert_eq!(hits.hits.first().map(|h| &h.note.id), Some(&s.ids[0]));
    a.close().await;
    b.close().await;
    Ok(())
}

/// A backup written to a file a page at a time restores (read back a batch at a time)
/// into an equal memory whose indexes find the notes; a memory that is not empty is
/// refused before anything is written.
#[tokio::test]
async fn a_backup_file_restores_into_an_equal_searchable_memory() -> Result<(), EngineError> {
    let a = open_mem().await;
    let items: Vec<ImportNote> = (0..30)
        .map(|i| {
            item(
                &format!("file backup note {i} about herons"),
                Some(&format!("f:{i}")),
                None,
            )
        })
        .collect();
    let s = a
        .import_notes(items.clone(), &[link(0, 1)], 7, &|_| {})
        .await?;
    let dir = tempfile::tempdir().map_err(|e| EngineError::File(e.to_string()))?;
    let path = dir.path().join("b.json");
    let counts = a.backup_to_file(&path, &|_| {}).await?;
    assert_eq!(counts.get("note"), Some(&30));
    assert!(!path.with_extension("partial").exists());
    let file = crate::BackupFile::scan(&path)?;
    let refused = a.restore_backup_file(&file, &|_| {}, &|_| {}).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("only into an empty memory")),
        "{refused:?}"
    );
    let b = open_mem().await;
    let r = b.restore_backup_file(&file, &|_| {}, &|_| {}).await?;
    assert_eq!(r.tables.get("note"), Some(&30));
    let (da, db) = (a.backup().await?, b.backup().await?);
    for t in ["note", "link", "job", "setting"] {
        assert_eq!(db["tables"][t], da["tables"][t], "table {t}");
    }
    let hits = b.search("file backup note 17 about herons", 1).await?;
    assert_eq!(hits.hits.first().map(|h| &h.note.id), Some(&s.ids[17]));
    // the export of the restored memory names the same files
    let (fa, fb) = (a.export_vault(&[]).await?, b.export_vault(&[]).await?);
    assert_eq!(fa, fb);
    assert_eq!(fa.len(), 30);
    a.close().await;
    b.close().await;
    Ok(())
}

/// A backup to `report.json` writes through a temporary file of its own: a file the user
/// keeps beside it (`report.partial`, the name a temporary file derived by extension would
/// take) is left as it was, and nothing but the backup is left in the folder.
#[tokio::test]
async fn a_backup_leaves_a_file_beside_it_alone() -> Result<(), EngineError> {
    let e = open_mem().await;
    e.import_notes(vec![item("heron note", Some("f:1"), None)], &[], 1, &|_| {})
        .await?;
    let dir = tempfile::tempdir().map_err(|err| EngineError::File(err.to_string()))?;
    let mine = dir.path().join("report.partial");
    std::fs::write(&mine, "the user's own file")
        .map_err(|err| EngineError::File(err.to_string()))?;
    let path = dir.path().join("report.json");
    e.backup_to_file(&path, &|_| {}).await?;
    let kept = std::fs::read_to_string(&mine).map_err(|err| EngineError::File(err.to_string()))?;
    assert_eq!(kept, "the user's own file");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .map_err(|err| EngineError::File(err.to_string()))?
        .filter_map(|d| d.ok().map(|d| d.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    assert_eq!(names, ["report.json", "report.partial"]);
    let file = crate::BackupFile::scan(&path)?;
    let b = open_mem().await;
    let r = b.restore_backup_file(&file, &|_| {}, &|_| {}).await?;
    assert_eq!(r.tables.get("note"), Some(&1));
    e.close().await;
    b.close().await;
    Ok(())
}

/// An import of long notes writes transactions that fit a small memtable (a transaction
/// must fit in SurrealKV's memtable): 100 notes of 300 KB, asked for in batches of 64,
/// into a memory opened with the smallest memtable allowed (16 MiB).
#[tokio::test]
async fn long_notes_import_into_the_smallest_memtable() -> Result<(), EngineError> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let options = crate::EngineOptions {
        storage: Some(kasten_store::StorageLimits {
            block_cache: 1 << 20,
            memtable: 16 << 20,
        }),
        ..Default::default()
    };
    let e = Engine::open_with(
        &Endpoint::SurrealKv(dir.path().join("db")),
        HashEmbedder::arc("h", 64, 1),
        options,
        &|_| {},
    )
    .await?;
    let long = "word ".repeat(60_000);
    let items: Vec<ImportNote> = (0..100)
        .map(|i| {
            item(
                &format!("page {i} {long}"),
                Some(&format!("v/{i}.md")),
                None,
            )
        })
        .collect();
    let s = e.import_notes(items.clone(), &[], 64, &|_| {}).await?;
    assert_eq!(s.created, 100);
    assert_eq!(e.count().await?, 100);
    e.close().await;
    Ok(())
}

/// A vault where one exported note was copied (and the copy edited): both files carry one
/// `kasten_id`. The first file keeps it, the edited copy becomes a note of its own with a
/// new id (reported), an identical copy is the same note; importing again adds nothing.
#[tokio::test]
async fn two_files_with_one_kasten_id_import_once_and_again() -> Result<(), EngineError> {
    let a = open_mem().await;
    let s = a
        .import_notes(
            vec![item("The deploy script requires sudo", None, None)],
            &[],
            10,
            &|_| {},
        )
        .await?;
    let files = a.export_vault(&[]).await?;
    let original = files[0].text.clone();
    let edited = original.replace("requires sudo", "requires sudo on the build host");
    assert_ne!(original, edited);
    let vault = [
        ("A.md", original.clone()),
        ("B.md", edited),
        ("C.md", original),
    ]
    .map(|(path, text)| VaultFile {
        path: path.into(),
        bytes: Some(text.into_bytes()),
        modified: None,
    });
    let plan = plan_vault("V", &vault);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert!(plan.notes.iter().all(|n| n.id.as_ref() == Some(&s.ids[0])));
    let carried = s.ids[0].clone();
    // into a new memory, and into the one the export came from
    for (memory, created, existing) in [(open_mem().await, 2, 1), (a, 1, 2)] {
        let t = memory
            .import_notes(plan.notes.clone(), &plan.links, 10, &|_| {})
            .await?;
        assert_eq!((t.created, t.existing), (created, existing));
        assert_eq!(t.ids[0], carried);
        assert_ne!(t.ids[1], carried);
        assert_eq!(t.ids[2], carried, "an identical copy is the same note");
        assert_eq!(t.new_ids.len(), 1, "{:?}", t.new_ids);
        assert_eq!(t.new_ids[0].origin, "B.md");
        assert_eq!(t.new_ids[0].carried, carried);
        assert_eq!(t.new_ids[0].id, t.ids[1]);
        let copy = memory.get(&t.ids[1]).await?;
        assert!(copy.note.content.contains("build host"));
        assert_eq!(copy.note.source.as_deref(), Some("V/B.md"));
        // again: nothing new, the same notes, the same report
        let again = memory
            .import_notes(plan.notes.clone(), &plan.links, 10, &|_| {})
            .await?;
        assert_eq!((again.created, again.existing), (0, 3));
        assert_eq!(again.ids, t.ids);
        assert_eq!(again.new_ids.len(), 1);
        assert_eq!(memory.count().await?, 2);
        memory.close().await;
    }
    Ok(())
}
