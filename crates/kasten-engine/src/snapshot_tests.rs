//! The index snapshot: what an open reads from it must be what a rebuild from the store
//! gives, and anything that makes it stale or damaged must make the open rebuild.

use std::collections::BTreeMap;
use std::path::Path;

use super::tests::HashEmbedder;
use super::*;

pub(super) fn quiet() -> ProgressFn<'static> {
    &|_| {}
}

pub(super) async fn open(ep: &Endpoint) -> Engine {
    match Engine::open(ep, HashEmbedder::arc("h", 48, 1), quiet()).await {
        Ok(x) => x,
        Err(err) => panic!("open: {err}"),
    }
}

pub(super) fn new(s: &str, source: Option<String>) -> NewNote {
    let mut n = NewNote::new(s).unwrap_or_else(|e| panic!("{e}"));
    n.source = source;
    n
}

const QUERIES: &[&str] = &[
    "pottery class weekend",
    "harbor sunset photo",
    "edited annotation alpha",
    "note 17",
    "guitar lesson lake",
    "nothing like this at all",
];

/// A note's time and the notes just before and after it in its stream.
type Place = (Option<i64>, Option<String>, Option<String>);

/// Everything the indexes say, in a form that does not depend on slot order or on the
/// order in which terms were first seen: vectors to the bit, each note's terms, timeline
/// places and neighbours, links as sets.
#[derive(Debug, PartialEq)]
pub(crate) struct Fingerprint {
    pub(crate) vectors: BTreeMap<String, Vec<u32>>,
    /// Each note's terms with frequencies.
    pub(crate) text: BTreeMap<String, Vec<String>>,
    pub(crate) timeline: BTreeMap<String, Place>,
    pub(crate) links: BTreeMap<String, Vec<String>>,
}

pub(crate) fn fingerprint(e: &Engine) -> Fingerprint {
    let ix = e.read_indexes().unwrap_or_else(|err| panic!("{err}"));
    let mut vectors = BTreeMap::new();
    let mut timeline = BTreeMap::new();
    let mut text = BTreeMap::new();
    ix.vector
        .for_each_vector(|id, v| {
            vectors.insert(id.to_string(), v.iter().map(|x| x.to_bits()).collect());
        })
        .unwrap_or_else(|err| panic!("{err}"));
    for id in ix.vector.ids() {
        let terms: Vec<String> = ix
            .text
            .terms_of(id)
            .unwrap_or_default()
            .into_iter()
            .map(|(t, f)| format!("{t}×{f}"))
            .collect();
        text.insert(id.to_string(), terms);
        let (before, after) = ix.timeline.adjacent(id, 2 * 3_600_000);
        timeline.insert(
            id.to_string(),
            (
                ix.timeline.time_ms(id),
                before.map(ToString::to_string),
                after.map(ToString::to_string),
            ),
        );
    }
    let links = ix
        .links
        .iter()
        .map(|(k, v)| {
            let mut v: Vec<String> = v.iter().map(ToString::to_string).collect();
            v.sort();
            (k.to_string(), v)
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    Fingerprint {
        vectors,
        text,
        timeline,
        links,
    }
}

/// What the queries rank, independent of slot order: every note's vector and keyword
/// score for each query, sorted by score then id (a rebuild assigns other slots, and
/// equal scores are ordered by slot).
async fn rankings(e: &Engine) -> Vec<String> {
    let n = e.index_sizes().map(|(v, t)| v.max(t)).unwrap_or(0);
    let mut out = Vec::new();
    for q in QUERIES {
        let v = e.embed_query(q).await.unwrap_or_else(|err| panic!("{err}"));
        let mut vec_hits: Vec<(f32, String)> = e
            .rank_vector(&v, n)
            .unwrap_or_else(|err| panic!("{err}"))
            .into_iter()
            .map(|(id, s)| (s, id.to_string()))
            .collect();
        vec_hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        out.push(format!("{q} vector {vec_hits:?}"));
        // BM25 sums in term id order, which a rebuild numbers differently: 4 decimals
        let mut kw: Vec<(String, String)> = e
            .rank_keyword(q, n)
            .unwrap_or_else(|err| panic!("{err}"))
            .into_iter()
            .map(|(id, s)| (format!("{s:010.4}"), id.to_string()))
            .collect();
        kw.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        out.push(format!("{q} keyword {kw:?}"));
    }
    out
}

/// The full search (fusion, context, dates, links) as a session answers it: ids and how
/// each was found, in order. Equal between two engines with the same slots.
async fn searches(e: &Engine) -> Vec<String> {
    let mut out = Vec::new();
    for q in QUERIES {
        let hits = e.search(q, 8).await.unwrap_or_else(|err| panic!("{err}"));
        let ids: Vec<(String, Vec<String>)> = hits
            .hits
            .iter()
            .map(|h| {
                let mut via: Vec<String> = h.via.iter().map(|v| format!("{v:?}")).collect();
                via.sort();
                (h.note.id.to_string(), via)
            })
            .collect();
        out.push(format!("{q} search {ids:?}"));
    }
    out
}

/// A memory with history: adds in batches, deletes, user edits, links, archive/restore.
async fn churned(ep: &Endpoint) -> Vec<NoteId> {
    let e = open(ep).await;
    let words = [
        "pottery", "harbor", "guitar", "lake", "sunset", "class", "weekend", "photo", "lesson",
        "garden", "chess", "novel",
    ];
    let batch: Vec<NewNote> = (0..60)
        .map(|i| {
            let text = format!(
                "note {i} {} {} {} {}",
                words[i % 12],
                words[(i * 5 + 1) % 12],
                words[(i * 7 + 3) % 12],
                i * 31
            );
            new(&text, Some(format!("conv-{}:D1:{}", i % 3, i)))
        })
        .collect();
    let ids: Vec<NoteId> = e
        .add_batch(batch)
        .await
        .unwrap_or_else(|err| panic!("{err}"))
        .notes
        .into_iter()
        .map(|n| n.id)
        .collect();
    for id in ids.iter().step_by(7) {
        e.delete(id).await.unwrap_or_else(|err| panic!("{err}"));
    }
    for id in ids.iter().skip(4).step_by(9).take(4) {
        let edit = FieldEdit {
            keywords: Some(vec!["edited".into(), "alpha".into()]),
            tags: Some(vec!["annotation".into()]),
            context: None,
        };
        e.edit_note(id, &edit, "user", "test")
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
    let link = |a: &NoteId, b: &NoteId| crate::ImportedLink {
        from: a.clone(),
        to: b.clone(),
        kind: "relates".into(),
        reason: "test".into(),
        confidence: 0.9,
        status: kasten_core::LinkStatus::Accepted,
        created_at: Utc::now(),
    };
    let links: Vec<_> = (1..30)
        .filter(|i| i % 7 != 0 && (i + 11) % 7 != 0)
        .map(|i| link(&ids[i], &ids[i + 11]))
        .collect();
    e.insert_links(&links)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.archive(&ids[2], "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.archive(&ids[3], "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.restore_archived(&ids[3], "user")
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.add(new("a late note about the harbor at sunset", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.close().await;
    ids
}

fn snapshot_file(ep: &Endpoint) -> std::path::PathBuf {
    snapshot::path_for(ep).unwrap_or_else(|| panic!("no snapshot path"))
}

/// Opens with the snapshot and again without it; both must say the same.
pub(super) async fn assert_snapshot_equals_rebuild(ep: &Endpoint) {
    let e = open(ep).await;
    assert!(e.opened_from_snapshot(), "the snapshot was not used");
    let (fp, ans, sizes) = (fingerprint(&e), rankings(&e).await, e.index_sizes().ok());
    e.close().await;
    // no snapshot: a rebuild from the store
    std::fs::remove_file(snapshot_file(ep)).unwrap_or_else(|err| panic!("{err}"));
    let e = open(ep).await;
    assert!(!e.opened_from_snapshot());
    assert_eq!(e.index_sizes().ok(), sizes);
    assert_eq!(fingerprint(&e), fp);
    assert_eq!(rankings(&e).await, ans);
    e.close().await;
}

#[tokio::test]
async fn an_open_from_the_snapshot_equals_a_rebuild_after_churn() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    assert!(snapshot_file(&ep).exists());
    assert_snapshot_equals_rebuild(&ep).await;
    // and the snapshot the rebuild's close wrote is used next time, with the same answers
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    e.close().await;
}

#[tokio::test]
async fn an_open_from_the_snapshot_answers_as_the_session_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    // the memory as the last session left it (read from its snapshot, already checked
    // against a rebuild above), changed once more, then compared across close/open
    let e = open(&ep).await;
    e.add(new("one more note about chess in the garden", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let (fp, ans, found) = (fingerprint(&e), rankings(&e).await, searches(&e).await);
    e.close().await;
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    assert_eq!(fingerprint(&e), fp);
    assert_eq!(rankings(&e).await, ans);
    // the same slots as the session that wrote it: even ties come out in the same order
    assert_eq!(searches(&e).await, found);
    e.close().await;
}

/// The vectors read from a snapshot stay in its file (the index holds only the quantised
/// forms in RAM); inserts, re-embeddings and removals on top of them answer as a rebuild.
#[tokio::test]
async fn writes_on_top_of_vectors_left_in_the_snapshot_answer_as_a_rebuild() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let ids = churned(&ep).await;
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    let (n, _) = e.index_sizes().unwrap_or_else(|err| panic!("{err}"));
    let f32_rows = n * 48 * 4;
    let held = e.vector_index_bytes().unwrap_or_else(|err| panic!("{err}"));
    assert!(held < f32_rows, "{held} bytes held for {n} notes");
    for i in 0..5 {
        e.add(new(
            &format!("fresh note {i} about a kayak on the fjord"),
            None,
        ))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    }
    for id in ids.iter().skip(1).step_by(11).take(3) {
        e.edit_content(id, "rewritten: a chess problem in the garden", "user")
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
    // notes the churn left active (it deleted every 7th)
    for i in [4, 9, 16, 25, 40, 59] {
        e.delete(&ids[i])
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
    let (fp, ans) = (fingerprint(&e), rankings(&e).await);
    e.close().await;
    std::fs::remove_file(snapshot_file(&ep)).unwrap_or_else(|err| panic!("{err}"));
    let e = open(&ep).await;
    assert!(!e.opened_from_snapshot());
    assert_eq!(fingerprint(&e), fp);
    assert_eq!(rankings(&e).await, ans);
    e.close().await;
}

#[tokio::test]
async fn a_write_after_the_snapshot_makes_the_next_open_rebuild() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    let old = std::fs::read(snapshot_file(&ep)).unwrap_or_else(|err| panic!("{err}"));
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    assert!(e.store().sealed_snapshot().is_some());
    let late = e
        .add(new(
            "written after the snapshot: a kayak on the fjord",
            None,
        ))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    // the seal is gone from the store as soon as indexed data changed
    assert!(e.store().sealed_snapshot().is_none());
    assert_eq!(
        e.store()
            .get_setting(kasten_store::SNAPSHOT_SETTING)
            .await
            .ok(),
        Some(None)
    );
    e.close().await;
    // as if the process had died before its close: the old snapshot is back on disk
    std::fs::write(snapshot_file(&ep), &old).unwrap_or_else(|err| panic!("{err}"));
    let e = open(&ep).await;
    assert!(!e.opened_from_snapshot());
    let hits = e
        .search("kayak fjord", 1)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(hits.hits.first().map(|h| h.note.id.clone()), Some(late.id));
    e.close().await;
}

#[tokio::test]
async fn a_read_only_session_keeps_the_snapshot_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    let before = std::fs::read(snapshot_file(&ep)).unwrap_or_else(|err| panic!("{err}"));
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    let _ = searches(&e).await;
    e.close().await;
    let after = std::fs::read(snapshot_file(&ep)).unwrap_or_else(|err| panic!("{err}"));
    assert!(
        before == after,
        "a session without writes rewrote the snapshot"
    );
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    e.close().await;
}

fn damage(path: &Path, how: &str) {
    let mut bytes = std::fs::read(path).unwrap_or_else(|err| panic!("{err}"));
    match how {
        "flip payload" => {
            let i = bytes.len() / 2;
            bytes[i] ^= 0x40;
        }
        "flip header" => bytes[12] ^= 0x01,
        "flip last byte" => {
            if let Some(b) = bytes.last_mut() {
                *b ^= 0xff;
            }
        }
        "truncate" => bytes.truncate(bytes.len() * 2 / 3),
        // the vectors are the end of the file
        "truncate last vector" => bytes.truncate(bytes.len() - 4),
        "flip a vector" => {
            let i = bytes.len() - 4 * 48 - 2;
            bytes[i] ^= 0x10;
        }
        "empty" => bytes.clear(),
        "garbage" => bytes = vec![0xab; 4096],
        _ => unreachable!(),
    }
    std::fs::write(path, bytes).unwrap_or_else(|err| panic!("{err}"));
}

#[tokio::test]
async fn a_damaged_snapshot_is_rebuilt_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    let (fp, ans) = (fingerprint(&e), rankings(&e).await);
    e.close().await;
    for how in [
        "flip payload",
        "flip header",
        "flip last byte",
        "truncate",
        "truncate last vector",
        "flip a vector",
        "empty",
        "garbage",
    ] {
        damage(&snapshot_file(&ep), how);
        let e = open(&ep).await;
        assert!(
            !e.opened_from_snapshot(),
            "{how}: a damaged snapshot was used"
        );
        assert_eq!(fingerprint(&e), fp, "{how}");
        assert_eq!(rankings(&e).await, ans, "{how}");
        e.close().await;
        // the close after the rebuild wrote a good one again
        let e = open(&ep).await;
        assert!(
            e.opened_from_snapshot(),
            "{how}: no fresh snapshot after the rebuild"
        );
        e.close().await;
    }
}

#[tokio::test]
async fn a_snapshot_of_another_model_is_not_used() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    let e = Engine::open(&ep, HashEmbedder::arc("other", 32, 9), quiet())
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(!e.opened_from_snapshot());
    let any = e.indexed_ids().unwrap_or_default();
    assert!(!any.is_empty());
    assert_eq!(
        e.vector_of(&any[0]).ok().flatten().map(|v| v.len()),
        Some(32)
    );
    e.close().await;
}

#[tokio::test]
async fn indexes_that_may_have_missed_a_write_are_not_saved() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    churned(&ep).await;
    let e = open(&ep).await;
    e.add(new(
        "a note whose index update we pretend was cut off",
        None,
    ))
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    // a guard dropped before `done`, as when an error or a cancel falls between a
    // committed write and the index update
    drop(e.index_sync());
    e.close().await;
    let e = open(&ep).await;
    assert!(!e.opened_from_snapshot());
    e.close().await;
}

#[tokio::test]
async fn memories_without_a_directory_have_no_snapshot() {
    assert!(snapshot::path_for(&Endpoint::Mem).is_none());
    assert!(snapshot::path_for(&Endpoint::Remote("ws://127.0.0.1:1".into())).is_none());
    assert_eq!(
        snapshot::path_for(&Endpoint::SurrealKv("/tmp/k/db".into())),
        Some(std::path::Path::new("/tmp/k/db").join(kasten_store::SNAPSHOT_FILE))
    );
    let e = Engine::open(&Endpoint::Mem, HashEmbedder::arc("h", 48, 1), quiet())
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    e.add(new("in memory only", None))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(e.store().sealed_snapshot().is_none());
    e.close().await;
}

#[tokio::test]
async fn a_memory_built_past_the_spill_keeps_its_vectors_in_a_file_and_answers_as_a_rebuild() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
    let ep = Endpoint::SurrealKv(dir.path().join("db"));
    let e = open(&ep).await;
    let n = 4_300;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let batch = chunk
            .iter()
            .map(|i| {
                new(
                    &format!("note {i} about harbor {} and guitar {}", i % 17, i % 29),
                    None,
                )
            })
            .collect();
        e.add_batch(batch)
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
    {
        let ix = e.read_indexes().unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(ix.vector.len(), n);
        // the rows spilled to the file are not held: what is in RAM is far less than
        // the 4,300 rows of 48 floats (int8 rows, scales, codes, and at most 4,096 rows)
        let rows = n * ix.vector.dim() * 4;
        let quantised = n * (ix.vector.dim() + 4 + 8);
        assert!(
            ix.vector.memory_bytes() < quantised + rows / 2,
            "{} bytes in RAM",
            ix.vector.memory_bytes()
        );
    }
    let (fp, ans) = (fingerprint(&e), rankings(&e).await);
    e.close().await;
    // the snapshot written from the spilled rows, and a rebuild, say what the session did
    let e = open(&ep).await;
    assert!(e.opened_from_snapshot());
    assert_eq!(fingerprint(&e), fp);
    assert_eq!(rankings(&e).await, ans);
    e.close().await;
    assert_snapshot_equals_rebuild(&ep).await;
}
