//! The owner: serves its open engine to the user's other Kasten processes.
//!
//! On Unix the listener is a Unix domain socket in the memory's folder. On Windows the
//! same tarpc service is meant to run over a named pipe (`\\.\pipe\kasten-<hash of the
//! folder>`, created with a security descriptor that admits only the user, plus the same
//! token): the connection handling below is generic over the stream and only the
//! listener, the peer check and the file modes are per platform. Until that is built an
//! owner on Windows does not serve, and [`Owner::start`] says so.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kasten_core::validity::NaiveDate;
use kasten_core::{NewNote, Note, NoteId};
use kasten_engine::{
    AddedBatch, Answer, AskOptions, ConsolidateOptions, ConsolidateSummary, Engine, HistoryEntry,
    ListCounts, NoteDetail, ReviewItem, ReviewOutcome, ReviewStatus, SearchOutput,
};
use tarpc::context::Context;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::ReviewChange;
use crate::error::{RemoteError, ShareError};
use crate::handshake::OwnerInfo;
use crate::ops::MemoryOps;
use crate::wire::MemoryService;

/// How long a new connection may take to present the token.
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
pub(crate) const HANDSHAKE: Duration = Duration::from_secs(2);
/// The byte the owner answers a good token with.
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
pub(crate) const ACCEPTED: u8 = 0x4b;
/// Connections served at once; more are closed at once.
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
const MAX_CLIENTS: usize = 64;
/// Requests of one connection in progress at once; more are refused.
const MAX_REQUESTS_PER_CLIENT: usize = 16;
/// How long [`Owner::stop`] waits for requests in progress.
const DRAIN: Duration = Duration::from_secs(30);

/// What the owner does after a client's write.
pub type OnWrite = Arc<dyn Fn() + Send + Sync>;

struct Shared {
    engine: Arc<Engine>,
    info: OwnerInfo,
    /// Called after a write, so the owner's enrichment worker picks the note up (and an
    /// app can show it).
    on_write: Option<OnWrite>,
    in_flight: AtomicUsize,
    clients: AtomicUsize,
}

/// Counts one unit of `counter` while alive.
struct Count(Arc<Shared>, fn(&Shared) -> &AtomicUsize);

impl Count {
    fn enter(shared: &Arc<Shared>, which: fn(&Shared) -> &AtomicUsize) -> Self {
        which(shared).fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(shared), which)
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::SeqCst);
    }
}

/// A memory served to other processes. Stop it with [`Owner::stop`] before the engine is
/// closed.
pub struct Owner {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<JoinSet<()>>,
    files: Vec<PathBuf>,
}

impl Owner {
    /// Starts serving `engine`, whose embedded store lives in `dir`. The caller holds the
    /// store open, so a socket or token left in `dir` belongs to a process that died
    /// (`kill -9`) and is replaced.
    pub async fn start(
        engine: Arc<Engine>,
        dir: &Path,
        info: OwnerInfo,
        on_write: Option<OnWrite>,
    ) -> Result<Self, ShareError> {
        let shared = Arc::new(Shared {
            engine,
            info,
            on_write,
            in_flight: AtomicUsize::new(0),
            clients: AtomicUsize::new(0),
        });
        platform::start(shared, dir).await
    }

    /// Other processes connected right now.
    pub fn clients(&self) -> usize {
        self.shared.clients.load(Ordering::SeqCst)
    }

    /// Stops serving: no new connections (the socket and token are removed, so the next
    /// process waits for the memory and then opens it), requests in progress finish (up
    /// to 30 s), then every connection is closed. Afterwards the engine is this
    /// process's alone again.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        let mut conns = match self.accept.await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("the socket server ended badly: {e}");
                JoinSet::new()
            }
        };
        let deadline = tokio::time::Instant::now() + DRAIN;
        while self.shared.in_flight.load(Ordering::SeqCst) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        conns.abort_all();
        while conns.join_next().await.is_some() {}
        // a request that arrived while the connections closed still runs to its end
        while self.shared.in_flight.load(Ordering::SeqCst) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Serves one connection that presented the token.
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
async fn serve_connection<S>(stream: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    use futures_util::StreamExt;
    use tarpc::server::{BaseChannel, Channel};
    use tarpc::tokio_serde::formats::Json;
    use tarpc::tokio_util::codec::LengthDelimitedCodec;

    let _client = Count::enter(&shared, |s| &s.clients);
    let framed = LengthDelimitedCodec::builder()
        .max_frame_length(crate::MAX_FRAME)
        .new_framed(stream);
    let transport = tarpc::serde_transport::new(framed, Json::default());
    BaseChannel::with_defaults(transport)
        .max_concurrent_requests(MAX_REQUESTS_PER_CLIENT)
        .execute(Handler(shared).serve())
        .for_each(|response| async {
            tokio::spawn(response);
        })
        .await;
}

/// Constant-time comparison of the token a client sent with ours.
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh token, as the hex text the file holds and clients send.
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
fn new_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; crate::TOKEN_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Length of the token as sent (hex).
#[cfg_attr(not(unix), allow(dead_code))] // no listener there yet
pub(crate) const TOKEN_LEN: usize = crate::TOKEN_BYTES * 2;

#[derive(Clone)]
struct Handler(Arc<Shared>);

impl Handler {
    /// Passes a write's result on, first telling the owner (`on_write`: wake the worker,
    /// refresh the app) when it succeeded.
    fn wrote<T>(&self, r: Result<T, RemoteError>) -> Result<T, RemoteError> {
        if r.is_ok()
            && let Some(f) = &self.0.on_write
        {
            f();
        }
        r
    }

    /// Runs `f` on the engine in a task of its own: a client that disconnects or whose
    /// request is cancelled cannot cut the engine's work in half (a write committed is
    /// also indexed), and the owner knows what is still running when it stops.
    async fn run<T, Fut>(&self, f: impl FnOnce(Arc<dyn MemoryOps>) -> Fut) -> Result<T, RemoteError>
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = Result<T, ShareError>> + Send + 'static,
    {
        let guard = Count::enter(&self.0, |s| &s.in_flight);
        let ops: Arc<dyn MemoryOps> = Arc::clone(&self.0.engine) as Arc<dyn MemoryOps>;
        let work = f(ops);
        let task = tokio::spawn(async move {
            let r = work.await;
            drop(guard);
            r
        });
        match task.await {
            Ok(r) => r.map_err(|e| RemoteError::from(&e)),
            Err(e) => Err(RemoteError::other(format!(
                "internal error: the request failed in the Kasten process that has the memory open: {e}"
            ))),
        }
    }
}

/// Every call runs the operation of the engine's [`MemoryOps`] implementation: the same
/// code and limits as in the owner's own process.
impl MemoryService for Handler {
    async fn hello(self, _: tarpc::context::Context) -> OwnerInfo {
        self.0.info.clone()
    }

    async fn add(self, _: Context, notes: Vec<NewNote>) -> Result<AddedBatch, RemoteError> {
        let r = self.run(|e| async move { e.add(notes).await }).await;
        self.wrote(r)
    }

    async fn link(
        self,
        _: Context,
        from: NoteId,
        to: NoteId,
        kind: Option<String>,
        reason: String,
    ) -> Result<String, RemoteError> {
        let r = self
            .run(|e| async move { e.link(&from, &to, kind.as_deref(), &reason).await })
            .await;
        self.wrote(r)
    }

    async fn agent_link(
        self,
        _: Context,
        from: NoteId,
        to: NoteId,
        kind: Option<String>,
        reason: String,
        actor: String,
        propose: bool,
    ) -> Result<ReviewOutcome, RemoteError> {
        let r = self
            .run(|e| async move {
                e.agent_link(&from, &to, kind.as_deref(), &reason, &actor, propose)
                    .await
            })
            .await;
        self.wrote(r)
    }

    async fn proposals(
        self,
        _: Context,
        statuses: Vec<ReviewStatus>,
        by: Option<String>,
        limit: usize,
    ) -> Result<Vec<ReviewItem>, RemoteError> {
        self.run(|e| async move { e.proposals(&statuses, by.as_deref(), limit).await })
            .await
    }

    async fn review(
        self,
        _: Context,
        change: ReviewChange,
        actor: String,
    ) -> Result<ReviewOutcome, RemoteError> {
        let r = self
            .run(|e| async move { e.review(change, &actor).await })
            .await;
        self.wrote(r)
    }

    async fn history(self, _: Context, id: NoteId) -> Result<Vec<HistoryEntry>, RemoteError> {
        self.run(|e| async move { e.history(&id).await }).await
    }

    async fn delete(self, _: Context, id: NoteId) -> Result<(), RemoteError> {
        let r = self.run(|e| async move { e.delete(&id).await }).await;
        self.wrote(r)
    }

    async fn search_as_of(
        self,
        _: Context,
        query: String,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, RemoteError> {
        self.run(|e| async move { e.search_as_of(&query, k, as_of).await })
            .await
    }

    async fn get(self, _: Context, id: NoteId) -> Result<NoteDetail, RemoteError> {
        self.run(|e| async move { e.get(&id).await }).await
    }

    async fn list(self, _: Context, limit: usize, offset: usize) -> Result<Vec<Note>, RemoteError> {
        self.run(|e| async move { e.list(limit, offset).await })
            .await
    }

    async fn list_counts(self, _: Context) -> Result<ListCounts, RemoteError> {
        self.run(|e| async move { e.list_counts().await }).await
    }

    async fn list_as_of(
        self,
        _: Context,
        limit: usize,
        offset: usize,
        day: NaiveDate,
    ) -> Result<(u64, Vec<Note>), RemoteError> {
        self.run(|e| async move { e.list_as_of(limit, offset, day).await })
            .await
    }

    async fn ask(
        self,
        _: Context,
        question: String,
        options: AskOptions,
    ) -> Result<Answer, RemoteError> {
        self.run(|e| async move { e.ask(&question, &options, &|_| {}).await })
            .await
    }

    async fn consolidate(
        self,
        _: Context,
        options: ConsolidateOptions,
    ) -> Result<ConsolidateSummary, RemoteError> {
        let r = self
            .run(|e| async move { e.consolidate(&options, &|_| {}).await })
            .await;
        self.wrote(r)
    }
}

#[cfg(unix)]
mod platform {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    use std::path::Path;
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{UnixListener, UnixStream};
    use tokio::sync::watch;
    use tokio::task::JoinSet;

    use super::{
        ACCEPTED, HANDSHAKE, MAX_CLIENTS, Owner, Shared, TOKEN_LEN, new_token, same_token,
        serve_connection,
    };
    use crate::error::ShareError;

    fn serve_err(what: &str, path: &Path, e: std::io::Error) -> ShareError {
        ShareError::Serve(format!("{what} {}: {e}", path.display()))
    }

    pub(super) async fn start(shared: Arc<Shared>, dir: &Path) -> Result<Owner, ShareError> {
        let token_path = crate::token_path(dir);
        let socket_path = crate::socket_path(dir);
        // Left behind by an owner that was killed: we hold the store now.
        for p in [&token_path, &socket_path] {
            match std::fs::remove_file(p) {
                Ok(()) => tracing::info!("removed {} left by a process that died", p.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(serve_err("cannot remove", p, e)),
            }
        }
        let token = new_token();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&token_path)
            .map_err(|e| serve_err("cannot create", &token_path, e))?;
        f.write_all(token.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| serve_err("cannot write", &token_path, e))?;
        let uid = f
            .metadata()
            .map_err(|e| serve_err("cannot read", &token_path, e))?
            .uid();
        drop(f);
        let listener = match UnixListener::bind(&socket_path) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_file(&token_path);
                return Err(serve_err("cannot listen on", &socket_path, e));
            }
        };
        if let Err(e) =
            std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o600))
        {
            let _ = std::fs::remove_file(&token_path);
            let _ = std::fs::remove_file(&socket_path);
            return Err(serve_err("cannot restrict", &socket_path, e));
        }
        let (stop, stopped) = watch::channel(false);
        let token: Arc<[u8]> = Arc::from(token.into_bytes());
        let accept = tokio::spawn(accept_loop(
            listener,
            Arc::clone(&shared),
            token,
            uid,
            stopped,
        ));
        tracing::debug!("serving the memory on {}", socket_path.display());
        Ok(Owner {
            shared,
            stop,
            accept,
            files: vec![socket_path, token_path],
        })
    }

    async fn accept_loop(
        listener: UnixListener,
        shared: Arc<Shared>,
        token: Arc<[u8]>,
        uid: u32,
        mut stopped: watch::Receiver<bool>,
    ) -> JoinSet<()> {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
                r = listener.accept() => match r {
                    Ok((stream, _)) if conns.len() < MAX_CLIENTS => {
                        conns.spawn(connection(stream, Arc::clone(&shared), Arc::clone(&token), uid));
                    }
                    Ok(_) => tracing::warn!("too many Kasten processes connected; one was turned away"),
                    Err(e) => {
                        // out of file descriptors and the like: try again shortly
                        tracing::warn!("cannot accept a connection: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
        }
        conns
    }

    /// Checks who connected and the token, then serves.
    async fn connection(mut stream: UnixStream, shared: Arc<Shared>, token: Arc<[u8]>, uid: u32) {
        match stream.peer_cred() {
            Ok(c) if c.uid() == uid => {}
            Ok(c) => {
                tracing::warn!(uid = c.uid(), "refused a connection from another user");
                return;
            }
            Err(e) => {
                tracing::warn!("refused a connection whose user is unknown: {e}");
                return;
            }
        }
        let mut got = [0u8; TOKEN_LEN];
        match tokio::time::timeout(HANDSHAKE, stream.read_exact(&mut got)).await {
            Ok(Ok(_)) if same_token(&got, &token) => {}
            Ok(Ok(_)) => {
                tracing::warn!("refused a connection with a wrong token");
                return;
            }
            _ => return,
        }
        if stream.write_all(&[ACCEPTED]).await.is_err() {
            return;
        }
        serve_connection(stream, shared).await;
    }
}

#[cfg(not(unix))]
mod platform {
    use std::path::Path;
    use std::sync::Arc;

    use super::{Owner, Shared};
    use crate::error::ShareError;

    pub(super) async fn start(_shared: Arc<Shared>, _dir: &Path) -> Result<Owner, ShareError> {
        Err(ShareError::Serve(
            "sharing a memory between processes is not built for this system yet (named pipes)"
                .into(),
        ))
    }
}
