#![allow(clippy::panic)] // test code fails loudly

use std::sync::Mutex;
use std::time::Instant;

use kasten_core::NewNote;

use super::*;
use crate::state::tests::Words;
use kasten_engine::replace::beside;

fn fail<T>(what: &str) -> impl FnOnce(String) -> T + '_ {
    move |e| panic!("{what}: {e}")
}

async fn open_at(dir: &Path) -> Engine {
    Engine::open(
        &Endpoint::SurrealKv(dir.to_owned()),
        Arc::new(Words),
        &|_| {},
    )
    .await
    .map_err(|e| e.to_string())
    .unwrap_or_else(fail("open"))
}

async fn add(engine: &Engine, texts: &[&str]) {
    let notes: Vec<NewNote> = texts
        .iter()
        .map(|t| NewNote::new(t).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    engine
        .add_batch(notes)
        .await
        .map_err(|e| e.to_string())
        .unwrap_or_else(fail("add"));
}

async fn contents(engine: &Engine) -> Vec<String> {
    let mut v: Vec<String> = engine
        .list(100, 0)
        .await
        .map_err(|e| e.to_string())
        .unwrap_or_else(fail("list"))
        .into_iter()
        .map(|n| n.content)
        .collect();
    v.sort();
    v
}

/// A backup file of a memory holding `texts`.
async fn backup_of(dir: &Path, file: &Path, texts: &[&str]) {
    let e = open_at(dir).await;
    add(&e, texts).await;
    e.backup_to_file(file, &|_| {})
        .await
        .map_err(|e| e.to_string())
        .unwrap_or_else(fail("backup"));
    e.close().await;
}

/// The app's state with the memory at `dir` open, holding `texts`.
async fn app_with(dir: &Path, texts: &[&str]) -> AppState {
    let state = AppState::new(Instant::now());
    let e = open_at(dir).await;
    add(&e, texts).await;
    state.set_opened(Slot::Ready(Arc::new(e))).await;
    state
}

async fn reopen(dir: PathBuf, embedder: Arc<dyn Embedder>) -> Result<Engine, String> {
    Engine::open(&Endpoint::SurrealKv(dir), embedder, &|_| {})
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_replaces_the_memory_and_keeps_the_one_before_it() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = tmp.path().join("memory.kbak");
    backup_of(
        &tmp.path().join("other"),
        &file,
        &["from the backup", "also backed up"],
    )
    .await;
    let dir = tmp.path().join("home/db");
    let state = app_with(&dir, &["written before the restore"]).await;
    let seen = Mutex::new(Vec::<TransferProgressDto>::new());
    let done = restore_replacing(
        &state,
        &dir,
        &file,
        &|p| seen.lock().map(|mut s| s.push(p)).unwrap_or(()),
        reopen,
    )
    .await
    .unwrap_or_else(|e| panic!("restore: {e}"));
    let engine = state.engine().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        contents(&engine).await,
        vec!["also backed up", "from the backup"]
    );
    assert!(
        done.tables.iter().any(|t| t.table == "note" && t.rows == 2),
        "{:?}",
        done.tables
    );
    assert!(
        seen.lock()
            .map(|s| s
                .iter()
                .any(|p| p.phase == TransferPhase::Rows && p.table.as_deref() == Some("note")))
            .unwrap_or(false),
        "no progress for the notes"
    );
    assert!(
        !beside(&dir, "restoring").exists(),
        "the work folder is left"
    );
    // the memory as it was is kept, whole
    let previous = PathBuf::from(&done.previous);
    assert!(
        previous.starts_with(tmp.path().join("home")),
        "{previous:?}"
    );
    drop(engine);
    if let Slot::Ready(e) = std::mem::replace(&mut *state.slot.write().await, Slot::Closed) {
        Engine::close_shared(e).await;
    }
    let before = open_at(&previous).await;
    assert_eq!(contents(&before).await, vec!["written before the restore"]);
    before.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_backup_is_refused_and_the_memory_stays_as_it_was() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = tmp.path().join("memory.kbak");
    backup_of(&tmp.path().join("other"), &file, &["from the backup"]).await;
    // cut off in the middle, as a copy interrupted would be
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
    let cut = tmp.path().join("cut.kbak");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path().join("home/db");
    let state = app_with(&dir, &["the memory the user has"]).await;
    for bad in [cut, tmp.path().join("missing.kbak")] {
        let e = restore_replacing(&state, &dir, &bad, &|_| {}, reopen)
            .await
            .err()
            .unwrap_or_else(|| panic!("{} was restored", bad.display()));
        assert!(matches!(e, AppError::Invalid(_)), "{e:?}");
        assert!(e.to_string().contains("your memory is as it was"), "{e}");
        let engine = state.engine().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(contents(&engine).await, vec!["the memory the user has"]);
    }
    let home: Vec<String> = std::fs::read_dir(tmp.path().join("home"))
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    assert_eq!(home, vec!["db"], "nothing moved or left beside the memory");
    if let Slot::Ready(e) = std::mem::replace(&mut *state.slot.write().await, Slot::Closed) {
        Engine::close_shared(e).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_goes_into_the_folder_picked_or_a_new_one_inside_it() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = Engine::open(&Endpoint::Mem, Arc::new(Words), &|_| {})
        .await
        .map_err(|e| e.to_string())
        .unwrap_or_else(fail("open"));
    add(&engine, &["first exported note", "second exported note"]).await;
    let empty = tmp.path().join("vault");
    std::fs::create_dir_all(&empty).unwrap_or_else(|e| panic!("{e}"));
    let last = Mutex::new(None::<TransferProgressDto>);
    let r = export_to(&engine, &empty, &|p| {
        if let Ok(mut l) = last.lock() {
            *l = Some(p);
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((PathBuf::from(&r.dir), r.files), (empty.clone(), 2));
    assert_eq!(
        last.lock().ok().and_then(|l| l.clone()),
        Some(TransferProgressDto::of(TransferPhase::Notes, 2, 2))
    );
    let md = std::fs::read_dir(&empty)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "md"))
        })
        .count();
    assert_eq!(md, 2);
    // the same folder again: it holds files now, so a new folder inside it
    let again = export_to(&engine, &empty, &|_| {})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let inner = PathBuf::from(&again.dir);
    assert_eq!(inner.parent(), Some(empty.as_path()));
    assert!(inner.starts_with(&empty) && inner != empty, "{inner:?}");
    assert_eq!(std::fs::read_dir(&inner).map(|d| d.count()).unwrap_or(0), 2);
    // a file is not a folder
    let a_file = tmp.path().join("notes.txt");
    std::fs::write(&a_file, "x").unwrap_or_else(|e| panic!("{e}"));
    let e = export_to(&engine, &a_file, &|_| {})
        .await
        .err()
        .unwrap_or_else(|| panic!("exported into a file"));
    assert!(e.to_string().contains("not a folder"), "{e}");
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_in_a_row_keep_every_memory_before_them_and_never_overlap() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = tmp.path().join("memory.kbak");
    backup_of(&tmp.path().join("other"), &file, &["from the backup"]).await;
    let dir = tmp.path().join("home/db");
    let state = app_with(&dir, &["the first memory"]).await;
    // a restore in progress: a second one is refused and changes nothing
    let busy = state.restoring.lock().await;
    let e = Box::pin(restore_replacing(&state, &dir, &file, &|_| {}, reopen))
        .await
        .err()
        .unwrap_or_else(|| panic!("two restores at once"));
    assert!(matches!(e, AppError::Conflict(_)), "{e:?}");
    drop(busy);
    // a folder of that name is there already (an earlier restore within the same second):
    // taken for each second the restores may run in
    let now = chrono::Local::now();
    for k in 0..30 {
        let t = now + chrono::Duration::seconds(k);
        let name = format!("before-restore-{}", t.format("%Y%m%d-%H%M%S"));
        std::fs::create_dir_all(beside(&dir, &name).join("kept")).unwrap_or_else(|e| panic!("{e}"));
    }
    let first = Box::pin(restore_replacing(&state, &dir, &file, &|_| {}, reopen))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let second = Box::pin(restore_replacing(&state, &dir, &file, &|_| {}, reopen))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(first.previous, second.previous);
    assert!(
        first.previous.ends_with("-2")
            && (second.previous.ends_with("-2") || second.previous.ends_with("-3")),
        "{} {}",
        first.previous,
        second.previous
    );
    if let Slot::Ready(e) = std::mem::replace(&mut *state.slot.write().await, Slot::Closed) {
        Engine::close_shared(e).await;
    }
    let kept = open_at(Path::new(&first.previous)).await;
    assert_eq!(contents(&kept).await, vec!["the first memory"]);
    kept.close().await;
    let kept = open_at(Path::new(&second.previous)).await;
    assert_eq!(contents(&kept).await, vec!["from the backup"]);
    kept.close().await;
}
