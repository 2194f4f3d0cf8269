//! An owner serving an in-memory engine (deterministic embedder) to clients in the same
//! test process, over a real socket in a temporary folder.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kasten_core::{NewNote, NoteId};
use kasten_embed::{EmbedError, Embedder};
use kasten_engine::Endpoint;
use kasten_engine::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::owner::TOKEN_LEN;
use crate::{Client, ErrorKind, MemoryOps, MemoryServiceRequest, Owner, OwnerInfo, ShareError};

/// Feature hashing of words: similar texts, similar vectors.
struct HashEmbedder;

impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "hash-test"
    }
    fn dim(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 64];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let mut h = 0xcbf29ce484222325u64;
                    for b in w.to_lowercase().bytes() {
                        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
                    }
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

async fn engine() -> Arc<Engine> {
    match Engine::open(&Endpoint::Mem, Arc::new(HashEmbedder), &|_| {}).await {
        Ok(e) => Arc::new(e),
        Err(e) => panic!("open: {e}"),
    }
}

async fn serve(dir: &Path) -> (Arc<Engine>, Owner) {
    let e = engine().await;
    let owner = Owner::start(Arc::clone(&e), dir, OwnerInfo::this_process("test"), None)
        .await
        .unwrap_or_else(|err| panic!("serve: {err}"));
    (e, owner)
}

async fn client(dir: &Path) -> Client {
    match Client::connect(dir).await {
        Ok(Some(c)) => c,
        Ok(None) => panic!("nobody serves {}", dir.display()),
        Err(e) => panic!("connect: {e}"),
    }
}

fn note(s: &str) -> NewNote {
    NewNote::new(s).unwrap_or_else(|e| panic!("{e}"))
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn token(dir: &Path) -> Vec<u8> {
    std::fs::read(crate::token_path(dir)).unwrap_or_else(|e| panic!("token: {e}"))
}

/// A raw connection that has presented `token`; returns what the owner answered.
async fn raw(dir: &Path, token: &[u8]) -> (UnixStream, Option<u8>) {
    let mut s = UnixStream::connect(crate::socket_path(dir))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    s.write_all(token).await.unwrap_or_else(|e| panic!("{e}"));
    let mut b = [0u8; 1];
    let got = match tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await {
        Ok(Ok(1)) => Some(b[0]),
        _ => None,
    };
    (s, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reads_and_writes_through_the_owners_engine() {
    let dir = tmp();
    let (engine, owner) = serve(dir.path()).await;
    let c = client(dir.path()).await;
    assert_eq!(c.owner().name, "test");
    assert_eq!(owner.clients(), 1);

    let added = c
        .add(vec![
            note("the heron nests by the old mill pond"),
            note("invoices are due on the first monday of the month"),
        ])
        .await
        .unwrap_or_else(|e| panic!("add: {e}"));
    assert_eq!(added.notes.len(), 2);
    // the owner's engine holds them: one memory, one index
    let local = engine.list(10, 0).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(local.len(), 2);
    let hits = c
        .search("heron pond", 5)
        .await
        .unwrap_or_else(|e| panic!("search: {e}"));
    assert_eq!(
        hits.hits.first().map(|h| &h.note.id),
        Some(&added.notes[0].id)
    );
    let shown = c
        .get(&added.notes[1].id)
        .await
        .unwrap_or_else(|e| panic!("get: {e}"));
    // the same note, reinforced once by the search that found it (through the owner)
    assert_eq!(shown.note.id, added.notes[1].id);
    assert_eq!(shown.note.content, added.notes[1].content);
    assert_eq!(shown.note.access_count, 1);
    let listed = c.list(10, 0).await.unwrap_or_else(|e| panic!("{e}"));
    let ids = |v: &[kasten_core::Note]| v.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&listed), ids(&local));
    assert_eq!(
        c.list_counts()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .total,
        2
    );
    // as of a day: today's list holds both, the day before none
    let today = chrono::Utc::now().date_naive();
    let (total, page) = c
        .list_as_of(1, 1, today)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((total, ids(&page)), (2, ids(&local[1..])));
    let (total, page) = c
        .list_as_of(10, 0, today - chrono::Days::new(1))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((total, page.len()), (0, 0));
    // a link made through the owner is the agent's, in the owner's memory
    let (a, b) = (&added.notes[0].id, &added.notes[1].id);
    let link = c
        .link(a, b, Some("supports"), "the mill keeps the books")
        .await
        .unwrap_or_else(|e| panic!("link: {e}"));
    let d = engine.get(a).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        d.links
            .iter()
            .map(|l| (l.kind.as_str(), l.created_by.as_str()))
            .collect::<Vec<_>>(),
        vec![("supports", "agent")]
    );
    let again = c.link(a, b, Some("supports"), "").await;
    assert!(
        matches!(&again, Err(e) if e.kind() == ErrorKind::Invalid && e.to_string().contains("already linked")),
        "{link}: {:?}",
        again.map(|_| ())
    );
    owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_cross_in_the_engines_words_and_kind() {
    let dir = tmp();
    let (engine, owner) = serve(dir.path()).await;
    let c = client(dir.path()).await;
    let missing = NoteId::generate();
    let local = match engine.get(&missing).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("found a note that does not exist"),
    };
    match c.get(&missing).await {
        Err(e @ ShareError::Remote(_)) => {
            assert_eq!(e.to_string(), local);
            assert_eq!(e.kind(), ErrorKind::NotFound);
        }
        other => panic!("expected the engine's error, got {:?}", other.map(|_| ())),
    }
    match c.search("   ", 5).await {
        Err(e) => {
            assert_eq!(e.to_string(), "the search query is empty");
            assert_eq!(e.kind(), ErrorKind::EmptyQuery);
        }
        Ok(_) => panic!("an empty query was answered"),
    }
    c.add(vec![note(
        "invoices are due on the first monday of the month",
    )])
    .await
    .unwrap_or_else(|e| panic!("add: {e}"));
    match c
        .ask(
            "when are invoices due in the month",
            &Default::default(),
            &|_| {},
        )
        .await
    {
        Err(e) => assert_eq!(e.kind(), ErrorKind::NoLlm, "{e}"),
        Ok(_) => panic!("answered without an LLM"),
    }
    owner.stop().await;
}

/// One definition of each operation: a request beyond the limits is refused with the same
/// sentence and kind in the owner's own process and through a connection, and an allowed
/// one gets the same answer on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_and_answers_are_the_same_here_and_through_the_owner() {
    let dir = tmp();
    let (engine, owner) = serve(dir.path()).await;
    let here = crate::Memory::Local(Arc::clone(&engine));
    let there = crate::Memory::Remote(client(dir.path()).await);
    here.add(vec![note("the heron fishes at the mill pond at dawn")])
        .await
        .unwrap_or_else(|e| panic!("add: {e}"));
    let too_many = crate::MAX_RESULTS + 1;
    for m in [&here, &there] {
        for r in [
            m.list(too_many, 0).await.map(|_| ()),
            m.list_as_of(too_many, 0, chrono::Utc::now().date_naive())
                .await
                .map(|_| ()),
            m.search("heron", too_many).await.map(|_| ()),
            m.proposals(&[], None, too_many).await.map(|_| ()),
        ] {
            match r {
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
                    assert!(e.to_string().starts_with("at most 10000 "), "{e}");
                }
                Ok(()) => panic!(
                    "a request beyond the limit was served (remote: {})",
                    m.is_remote()
                ),
            }
        }
    }
    // k = 0 means one result on both sides
    let a = here
        .search("heron", 0)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let b = there
        .search("heron", 0)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.hits.len(), 1);
    assert_eq!(
        a.hits.iter().map(|h| &h.note.id).collect::<Vec<_>>(),
        b.hits.iter().map(|h| &h.note.id).collect::<Vec<_>>()
    );
    owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_and_token_are_the_users_alone() {
    let dir = tmp();
    let (_engine, owner) = serve(dir.path()).await;
    for p in [
        crate::socket_path(dir.path()),
        crate::token_path(dir.path()),
    ] {
        let mode = std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", p.display());
    }
    assert_eq!(token(dir.path()).len(), TOKEN_LEN);
    owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_or_garbage_gets_nothing_and_disturbs_nobody() {
    let dir = tmp();
    let (engine, owner) = serve(dir.path()).await;
    let good = client(dir.path()).await;

    // a wrong token of the right length: closed without an answer
    let (_s, answer) = raw(dir.path(), &[b'0'; TOKEN_LEN]).await;
    assert_eq!(answer, None);
    // a short token, then silence: closed after the handshake timeout
    let (_s, answer) = raw(dir.path(), b"abc").await;
    assert_eq!(answer, None);
    // the right token, then garbage frames: a frame that claims 4 GB, and junk JSON
    for junk in [
        vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3],
        [&[0u8, 0, 0, 9][..], b"{not json"].concat(),
        [&[0u8, 0, 0, 13][..], br#"{"Request":7}"#].concat(),
    ] {
        let (mut s, answer) = raw(dir.path(), &token(dir.path())).await;
        assert_eq!(answer, Some(crate::owner::ACCEPTED));
        let _ = s.write_all(&junk).await;
        let mut rest = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
        assert!(
            matches!(r, Ok(Ok(_)) | Ok(Err(_))),
            "the owner kept a garbage connection open"
        );
    }
    // the good client and the engine carry on
    good.add(vec![note("still here after the garbage")])
        .await
        .unwrap_or_else(|e| panic!("add: {e}"));
    assert_eq!(engine.count().await.unwrap_or_else(|e| panic!("{e}")), 1);
    assert!(client(dir.path()).await.ping().await.is_ok());
    owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_slow_client_does_not_hold_up_the_others() {
    let dir = tmp();
    let (_engine, owner) = serve(dir.path()).await;
    // connects and says nothing
    let _silent = UnixStream::connect(crate::socket_path(dir.path()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // presents the token, sends requests and never reads the answers
    let (mut slow, _) = raw(dir.path(), &token(dir.path())).await;
    for i in 0..200u64 {
        let frame = request_frame(
            i,
            MemoryServiceRequest::List {
                limit: 100,
                offset: 0,
            },
        );
        if slow.write_all(&frame).await.is_err() {
            break;
        }
    }
    let started = std::time::Instant::now();
    let c = client(dir.path()).await;
    c.add(vec![note("a note while others dawdle")])
        .await
        .unwrap_or_else(|e| panic!("add: {e}"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    owner.stop().await;
}

/// One tarpc request frame, as the client library would send it.
fn request_frame(id: u64, message: MemoryServiceRequest) -> Vec<u8> {
    let mut context = tarpc::context::current();
    context.deadline = std::time::Instant::now() + Duration::from_secs(60);
    let msg = tarpc::ClientMessage::Request(tarpc::Request {
        context,
        id,
        message,
    });
    let body = serde_json::to_vec(&msg).unwrap_or_else(|e| panic!("{e}"));
    let len = u32::try_from(body.len()).unwrap_or_else(|e| panic!("{e}"));
    [&len.to_be_bytes()[..], &body].concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_call_does_not_cut_the_write_in_half() {
    let dir = tmp();
    let (engine, owner) = serve(dir.path()).await;
    let (mut s, _) = raw(dir.path(), &token(dir.path())).await;
    let frame = request_frame(
        1,
        MemoryServiceRequest::Add {
            notes: vec![note("written by a client that left at once")],
        },
    );
    s.write_all(&frame).await.unwrap_or_else(|e| panic!("{e}"));
    drop(s);
    // the write completes in the owner, once, and is searchable (indexed)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let hits = engine
            .search("client that left", 5)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if !hits.hits.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the note never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(engine.count().await.unwrap_or_else(|e| panic!("{e}")), 1);
    owner.stop().await;
    assert_eq!(engine.count().await.unwrap_or_else(|e| panic!("{e}")), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_owners_socket_is_not_an_owner_and_is_replaced() {
    let dir = tmp();
    // what kill -9 leaves: a socket nobody listens on, and its token
    let dead = std::os::unix::net::UnixListener::bind(crate::socket_path(dir.path()))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(dead);
    std::fs::write(crate::token_path(dir.path()), [b'1'; TOKEN_LEN])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(crate::socket_path(dir.path()).exists());
    assert!(matches!(Client::connect(dir.path()).await, Ok(None)));

    let (_engine, owner) = serve(dir.path()).await;
    assert_ne!(token(dir.path()), vec![b'1'; TOKEN_LEN]);
    assert!(client(dir.path()).await.ping().await.is_ok());
    owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_owner_leaves_no_files_and_its_clients_are_told() {
    let dir = tmp();
    let (_engine, owner) = serve(dir.path()).await;
    let c = client(dir.path()).await;
    owner.stop().await;
    assert!(!crate::socket_path(dir.path()).exists());
    assert!(!crate::token_path(dir.path()).exists());
    assert!(matches!(Client::connect(dir.path()).await, Ok(None)));
    match c.add(vec![note("too late")]).await {
        Err(e @ ShareError::Lost { .. }) => {
            assert!(
                e.to_string().contains("may or may not have been saved"),
                "{e}"
            )
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a stopped owner took a write"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_the_memory_to_its_next_owner() {
    let dir = tmp();
    let (_first, owner) = serve(dir.path()).await;
    let c = client(dir.path()).await;
    owner.stop().await;
    // the memory changes hands (here: another engine, so the handover is visible)
    let (second, owner) = serve(dir.path()).await;
    second
        .add(note("written in the second owner"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // a read goes to the new owner at once
    let listed = c.list(10, 0).await.unwrap_or_else(|e| panic!("list: {e}"));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].content, "written in the second owner");
    // and so do writes from then on
    c.add(vec![note("a client write after the handover")])
        .await
        .unwrap_or_else(|e| panic!("add: {e}"));
    assert_eq!(second.count().await.unwrap_or_else(|e| panic!("{e}")), 2);
    owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_goes_only_to_a_listener_of_the_expected_user() {
    // Someone else's listener on the memory's socket (here this process's own, with the
    // client told to expect another uid): it is refused before it is sent the token.
    let dir = tmp();
    let secret = vec![b'7'; TOKEN_LEN];
    std::fs::write(crate::token_path(dir.path()), &secret).unwrap_or_else(|e| panic!("{e}"));
    let listener = tokio::net::UnixListener::bind(crate::socket_path(dir.path()))
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut got = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut got)).await;
            let _ = got_tx.send(got);
        }
    });
    let (a, _b) = UnixStream::pair().unwrap_or_else(|e| panic!("{e}"));
    let me = a.peer_cred().unwrap_or_else(|e| panic!("{e}")).uid();

    let refused = crate::client::platform::connect_expecting(dir.path(), me.wrapping_add(1)).await;
    match refused {
        Err(ShareError::Connect(m)) => assert!(m.contains("another user"), "{m}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(s) => panic!("connected to another user's listener: {s:?}"),
    }
    let sent = got_rx.recv().await.unwrap_or_default();
    assert!(sent.is_empty(), "the listener was sent {sent:?}");

    // the same listener as this user's: it gets the token (and then no answer)
    let r = crate::client::platform::connect_expecting(dir.path(), me).await;
    assert!(matches!(r, Ok(None)), "{r:?}");
    assert_eq!(got_rx.recv().await.unwrap_or_default(), secret);
}

/// The memory at `dir` opened on disk, as a process that owns it would.
async fn open_on_disk(ep: &Endpoint) -> Result<Engine, kasten_engine::EngineError> {
    Engine::open(ep, Arc::new(HashEmbedder), &|_| {}).await
}

/// The handover the app used to fail on: another process (here another engine) has the
/// memory open and serves it, then hands it over. Opening at once is refused as "open in
/// another process"; the shells' opener waits and opens it when it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_opener_waits_through_a_handover_instead_of_failing() {
    let dir = tmp();
    let db = dir.path().join("db");
    let ep = Endpoint::SurrealKv(db.clone());
    let first = Arc::new(
        open_on_disk(&ep)
            .await
            .unwrap_or_else(|e| panic!("open: {e}")),
    );
    first
        .add(note("written by the first owner"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let owner = Owner::start(
        Arc::clone(&first),
        &db,
        OwnerInfo::this_process("first"),
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("serve: {e}"));

    // without the wait: refused, as the app was
    match open_on_disk(&ep).await {
        Err(e) => assert!(crate::is_locked(&e), "{e}"),
        Ok(_) => panic!("a locked memory opened twice"),
    }
    // a command that needs the memory to itself is refused at once, as before
    let t = std::time::Instant::now();
    match crate::open_or_connect(
        &ep,
        crate::Sharing::Alone,
        || open_on_disk(&ep),
        crate::is_locked,
    )
    .await
    {
        Err(e) => assert!(crate::is_locked(&e), "{e}"),
        Ok(_) => panic!("a locked memory opened twice"),
    }
    assert!(t.elapsed() < Duration::from_secs(5));

    // the first owner ends a little later: stops serving, closes, releases the folder
    let handover = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        owner.stop().await;
        Engine::close_shared(first).await;
    });
    let t = std::time::Instant::now();
    let second = crate::open_here(&ep, || open_on_disk(&ep), crate::is_locked)
        .await
        .unwrap_or_else(|e| panic!("the second opener failed during the handover: {e}"));
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "opened while the first owner still had it"
    );
    handover.await.unwrap_or_else(|e| panic!("{e}"));
    let notes = second.list(10, 0).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].content, "written by the first owner");
    second.close().await;
}

/// A client-mode opener (a `kasten` command, `kasten mcp`) that finds the memory held but
/// not served yet — its owner still opening — waits and becomes the owner's client; an
/// owner-mode opener gives up after its wait, in the engine's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_waits_for_an_owner_that_is_starting_and_every_wait_ends() {
    let dir = tmp();
    let db = dir.path().join("db");
    let ep = Endpoint::SurrealKv(db.clone());
    let engine = Arc::new(
        open_on_disk(&ep)
            .await
            .unwrap_or_else(|e| panic!("open: {e}")),
    );
    engine
        .add(note("held by an owner that is starting"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // held and never released: the wait ends, refused as "open in another process"
    let t = std::time::Instant::now();
    let r = crate::open::open_here_within(
        &ep,
        Duration::from_millis(400),
        || open_on_disk(&ep),
        crate::is_locked,
    )
    .await;
    match r {
        Err(e) => assert!(crate::is_locked(&e), "{e}"),
        Ok(_) => panic!("a locked memory opened twice"),
    }
    assert!(t.elapsed() >= Duration::from_millis(400));

    let starting = Arc::clone(&engine);
    let start = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        Owner::start(starting, &db, OwnerInfo::this_process("late"), None)
            .await
            .unwrap_or_else(|e| panic!("serve: {e}"))
    });
    let opened = crate::open_or_connect(
        &ep,
        crate::Sharing::Client,
        || open_on_disk(&ep),
        crate::is_locked,
    )
    .await
    .unwrap_or_else(|e| panic!("the client failed while the owner started: {e}"));
    let owner = start.await.unwrap_or_else(|e| panic!("{e}"));
    let c = match opened {
        crate::Opened::Remote(c) => c,
        crate::Opened::Local(_) => panic!("opened a memory another engine holds"),
    };
    assert_eq!(c.owner().name, "late");
    let listed = c.list(10, 0).await.unwrap_or_else(|e| panic!("list: {e}"));
    assert_eq!(listed.len(), 1);
    drop(c);
    owner.stop().await;
    Engine::close_shared(engine).await;
}
