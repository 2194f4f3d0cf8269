//! A client: another process's engine behind the socket.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kasten_core::validity::NaiveDate;
use kasten_core::{NewNote, Note, NoteId};
use kasten_engine::{
    AddedBatch, Answer, AskOptions, ConsolidateOptions, ConsolidateProgress, ConsolidateSummary,
    HistoryEntry, ListCounts, NoteDetail, ReviewItem, ReviewOutcome, ReviewStatus, SearchOutput,
};
use tarpc::client::RpcError;

use crate::ReviewChange;
use crate::error::{RemoteError, ShareError};
use crate::handshake::OwnerInfo;
use crate::ops::{MemoryOps, OnProgress, OnToken};
use crate::wire::MemoryServiceClient;

/// How long a read may take in the owner.
const READ: Duration = Duration::from_secs(60);
/// How long a write may take (embedding a batch on a busy machine).
const WRITE: Duration = Duration::from_secs(600);
/// How long an answer may take (a local model on the CPU).
const ASK: Duration = Duration::from_secs(1800);

/// Notes one consolidation call walks at most: a part of the run that ends well within a
/// write's deadline, so a client sees progress and a whole memory takes as long as it
/// needs.
const CONSOLIDATE_PART: u64 = 1_000;

/// What a lost connection means for a read and for a write.
const READ_LOST: &str = "nothing was changed; try again";
const WRITE_LOST: &str =
    "the change may or may not have been saved; `kasten list` shows what the memory holds";

/// A connection to the process that has the memory open. Cloning shares the connection.
/// When the owner goes away, the next call connects to whichever process has the memory
/// open then (a read is tried again at once on it; a write is not, since the first
/// attempt may have been saved).
#[derive(Clone)]
pub struct Client {
    dir: PathBuf,
    conn: Arc<RwLock<Conn>>,
}

#[derive(Clone)]
struct Conn {
    inner: MemoryServiceClient,
    owner: OwnerInfo,
}

impl Conn {
    async fn open(dir: &Path) -> Result<Option<Self>, ShareError> {
        let Some(stream) = platform::connect(dir).await? else {
            return Ok(None);
        };
        use tarpc::tokio_serde::formats::Json;
        use tarpc::tokio_util::codec::LengthDelimitedCodec;
        let framed = LengthDelimitedCodec::builder()
            .max_frame_length(crate::MAX_FRAME)
            .new_framed(stream);
        let transport = tarpc::serde_transport::new(framed, Json::default());
        let inner = MemoryServiceClient::new(tarpc::client::Config::default(), transport).spawn();
        match inner.hello(deadline(READ)).await {
            Ok(owner) => Ok(Some(Self { inner, owner })),
            Err(e) => {
                tracing::debug!("the memory's owner did not say hello: {e}");
                Ok(None)
            }
        }
    }
}

/// A call's reply as tarpc hands it over.
type Reply<T> = Result<Result<T, RemoteError>, RpcError>;

impl Client {
    /// Connects to the owner of the memory in `dir`. `Ok(None)` when nobody serves it:
    /// no socket, a socket nobody listens on (its owner was killed; the next owner
    /// replaces it), or an owner that is just stopping. The caller then opens the memory
    /// itself (and waits and tries again if that finds it locked).
    pub async fn connect(dir: &Path) -> Result<Option<Self>, ShareError> {
        Ok(Conn::open(dir).await?.map(|c| Self {
            dir: dir.to_path_buf(),
            conn: Arc::new(RwLock::new(c)),
        }))
    }

    /// Who serves the memory.
    pub fn owner(&self) -> OwnerInfo {
        self.conn().owner
    }

    fn conn(&self) -> Conn {
        match self.conn.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Connects again after the owner went away; `None` when nobody serves the memory.
    async fn reconnect(&self) -> Option<Conn> {
        let fresh = Conn::open(&self.dir).await.ok().flatten()?;
        match self.conn.write() {
            Ok(mut c) => *c = fresh.clone(),
            Err(poisoned) => *poisoned.into_inner() = fresh.clone(),
        }
        Some(fresh)
    }

    /// Runs one call; see the type's notes for what happens when the owner is gone.
    async fn call<T, F, Fut>(&self, write: bool, limit: Duration, f: F) -> Result<T, ShareError>
    where
        F: Fn(MemoryServiceClient, tarpc::context::Context) -> Fut,
        Fut: std::future::Future<Output = Reply<T>>,
    {
        let conn = self.conn();
        let consequence = if write { WRITE_LOST } else { READ_LOST };
        match f(conn.inner.clone(), deadline(limit)).await {
            Err(RpcError::Shutdown | RpcError::Send(_) | RpcError::Channel(_)) => {
                match self.reconnect().await {
                    Some(fresh) if !write => {
                        let r = f(fresh.inner.clone(), deadline(limit)).await;
                        answer(&fresh.owner, r, limit, consequence)
                    }
                    _ => Err(ShareError::Lost {
                        owner: conn.owner.to_string(),
                        consequence,
                    }),
                }
            }
            r => answer(&conn.owner, r, limit, consequence),
        }
    }

    /// Asks the owner who it is; a round trip with no work in the engine.
    pub async fn ping(&self) -> Result<OwnerInfo, ShareError> {
        self.call(
            false,
            READ,
            |c, ctx| async move { c.hello(ctx).await.map(Ok) },
        )
        .await
    }
}

/// The memory through the process that has it open: each operation is one call, with
/// the deadline of a read, a write or an answer.
#[async_trait]
impl MemoryOps for Client {
    async fn add(&self, notes: Vec<NewNote>) -> Result<AddedBatch, ShareError> {
        self.call(true, WRITE, |c, ctx| {
            let notes = notes.clone();
            async move { c.add(ctx, notes).await }
        })
        .await
    }

    async fn link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
    ) -> Result<String, ShareError> {
        self.call(true, WRITE, |c, ctx| {
            let (from, to) = (from.clone(), to.clone());
            let (kind, reason) = (kind.map(str::to_owned), reason.to_owned());
            async move { c.link(ctx, from, to, kind, reason).await }
        })
        .await
    }

    async fn agent_link(
        &self,
        from: &NoteId,
        to: &NoteId,
        kind: Option<&str>,
        reason: &str,
        actor: &str,
        propose: bool,
    ) -> Result<ReviewOutcome, ShareError> {
        self.call(true, WRITE, |c, ctx| {
            let (from, to) = (from.clone(), to.clone());
            let (kind, reason) = (kind.map(str::to_owned), reason.to_owned());
            let actor = actor.to_owned();
            async move {
                c.agent_link(ctx, from, to, kind, reason, actor, propose)
                    .await
            }
        })
        .await
    }

    async fn proposals(
        &self,
        statuses: &[ReviewStatus],
        by: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ReviewItem>, ShareError> {
        self.call(false, READ, |c, ctx| {
            let statuses = statuses.to_vec();
            let by = by.map(str::to_owned);
            async move { c.proposals(ctx, statuses, by, limit).await }
        })
        .await
    }

    async fn review(&self, change: ReviewChange, actor: &str) -> Result<ReviewOutcome, ShareError> {
        self.call(true, WRITE, |c, ctx| {
            let (change, actor) = (change.clone(), actor.to_owned());
            async move { c.review(ctx, change, actor).await }
        })
        .await
    }

    async fn history(&self, id: &NoteId) -> Result<Vec<HistoryEntry>, ShareError> {
        self.call(false, READ, |c, ctx| {
            let id = id.clone();
            async move { c.history(ctx, id).await }
        })
        .await
    }

    async fn delete(&self, id: &NoteId) -> Result<(), ShareError> {
        self.call(true, WRITE, |c, ctx| {
            let id = id.clone();
            async move { c.delete(ctx, id).await }
        })
        .await
    }

    async fn search_as_of(
        &self,
        query: &str,
        k: usize,
        as_of: Option<NaiveDate>,
    ) -> Result<SearchOutput, ShareError> {
        self.call(false, READ, |c, ctx| {
            let query = query.to_owned();
            async move { c.search_as_of(ctx, query, k, as_of).await }
        })
        .await
    }

    async fn get(&self, id: &NoteId) -> Result<NoteDetail, ShareError> {
        self.call(false, READ, |c, ctx| {
            let id = id.clone();
            async move { c.get(ctx, id).await }
        })
        .await
    }

    async fn list(&self, limit: usize, offset: usize) -> Result<Vec<Note>, ShareError> {
        self.call(false, READ, |c, ctx| async move {
            c.list(ctx, limit, offset).await
        })
        .await
    }

    async fn list_counts(&self) -> Result<ListCounts, ShareError> {
        self.call(
            false,
            READ,
            |c, ctx| async move { c.list_counts(ctx).await },
        )
        .await
    }

    async fn list_as_of(
        &self,
        limit: usize,
        offset: usize,
        day: NaiveDate,
    ) -> Result<(u64, Vec<Note>), ShareError> {
        self.call(false, READ, |c, ctx| async move {
            c.list_as_of(ctx, limit, offset, day).await
        })
        .await
    }

    async fn ask(
        &self,
        question: &str,
        options: &AskOptions,
        on_token: &OnToken<'_>,
    ) -> Result<Answer, ShareError> {
        let a = self
            .call(false, ASK, |c, ctx| {
                let (question, options) = (question.to_owned(), options.clone());
                async move { c.ask(ctx, question, options).await }
            })
            .await?;
        on_token(&a.answer);
        Ok(a)
    }

    /// A run in parts of [`CONSOLIDATE_PART`] notes, each resuming where the last stopped
    /// (the owner keeps the cursor), told to `progress` after each part and summed.
    async fn consolidate(
        &self,
        options: &ConsolidateOptions,
        progress: &OnProgress<'_>,
    ) -> Result<ConsolidateSummary, ShareError> {
        let mut sum: Option<ConsolidateSummary> = None;
        loop {
            let done = sum.as_ref().map_or(0, |s| s.scanned);
            let part = match options.limit {
                Some(l) if sum.is_some() && l <= done => break,
                Some(l) => l.saturating_sub(done).min(CONSOLIDATE_PART),
                None => CONSOLIDATE_PART,
            };
            let ask = ConsolidateOptions {
                limit: Some(part),
                ..options.clone()
            };
            let s = self
                .call(true, WRITE, |c, ctx| {
                    let ask = ask.clone();
                    async move { c.consolidate(ctx, ask).await }
                })
                .await?;
            let merged = match sum.take() {
                None => s,
                Some(m) => ConsolidateSummary {
                    scanned: m.scanned + s.scanned,
                    proposed: m.proposed + s.proposed,
                    already_known: m.already_known + s.already_known,
                    seconds: m.seconds + s.seconds,
                    finished: s.finished,
                    ..m
                },
            };
            progress(&ConsolidateProgress {
                scanned: merged.scanned,
                total: merged.total,
                done_before: merged.done_before,
                proposed: merged.proposed,
            });
            let stop = merged.finished || merged.scanned == done;
            sum = Some(merged);
            if stop {
                break;
            }
        }
        sum.ok_or_else(|| ShareError::Protocol("no consolidation part was run".to_owned()))
    }
}

fn answer<T>(
    owner: &OwnerInfo,
    r: Reply<T>,
    limit: Duration,
    consequence: &'static str,
) -> Result<T, ShareError> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(ShareError::Remote(e)),
        Err(RpcError::DeadlineExceeded) => Err(ShareError::Timeout {
            owner: owner.to_string(),
            secs: limit.as_secs(),
        }),
        Err(RpcError::Server(e)) => Err(ShareError::Protocol(e.to_string())),
        Err(RpcError::Shutdown | RpcError::Send(_) | RpcError::Channel(_)) => {
            Err(ShareError::Lost {
                owner: owner.to_string(),
                consequence,
            })
        }
    }
}

fn deadline(d: Duration) -> tarpc::context::Context {
    let mut ctx = tarpc::context::current();
    ctx.deadline = Instant::now() + d;
    ctx
}

#[cfg(unix)]
pub(crate) mod platform {
    use std::io::ErrorKind;
    use std::path::Path;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixStream;

    use crate::error::ShareError;
    use crate::owner::{ACCEPTED, HANDSHAKE, TOKEN_LEN};

    /// A stream past the token check, or `None` when nobody serves the memory.
    pub(super) async fn connect(dir: &Path) -> Result<Option<UnixStream>, ShareError> {
        connect_expecting(dir, own_uid()?).await
    }

    /// The uid this process runs as: the credentials one end of a socket pair sees for
    /// the other, so no system call of our own is needed.
    fn own_uid() -> Result<u32, ShareError> {
        let (a, _b) = UnixStream::pair()
            .map_err(|e| ShareError::Connect(format!("cannot tell who this process is: {e}")))?;
        a.peer_cred()
            .map(|c| c.uid())
            .map_err(|e| ShareError::Connect(format!("cannot tell who this process is: {e}")))
    }

    /// Refuses a listener that does not run as `uid` (`SO_PEERCRED`), before anything is
    /// sent to it: the token, and the notes and questions that would follow, are for the
    /// memory's owner, a process of this user; someone else listening on the socket (in a
    /// folder others can write to) gets nothing.
    fn check_listener(stream: &UnixStream, uid: u32, socket: &Path) -> Result<(), ShareError> {
        let cred = stream.peer_cred().map_err(|e| {
            ShareError::Connect(format!(
                "cannot tell who listens on {}: {e}",
                socket.display()
            ))
        })?;
        if cred.uid() != uid {
            return Err(ShareError::Connect(format!(
                "{} is served by another user (uid {}), not by you (uid {uid}); nothing was \
                 sent to it. Remove that file if no Kasten process of yours has the memory open",
                socket.display(),
                cred.uid()
            )));
        }
        Ok(())
    }

    /// [`connect`] to an owner that must run as `uid`.
    pub(crate) async fn connect_expecting(
        dir: &Path,
        uid: u32,
    ) -> Result<Option<UnixStream>, ShareError> {
        let socket = crate::socket_path(dir);
        let mut stream = match UnixStream::connect(&socket).await {
            Ok(s) => s,
            // no socket, or one whose owner died: nobody serves
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
                return Ok(None);
            }
            Err(e) => {
                return Err(ShareError::Connect(format!("{}: {e}", socket.display())));
            }
        };
        check_listener(&stream, uid, &socket)?;
        let token_path = crate::token_path(dir);
        let token = match std::fs::read(&token_path) {
            Ok(t) => t,
            // the owner is starting or stopping
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ShareError::Connect(format!(
                    "{}: {e}",
                    token_path.display()
                )));
            }
        };
        if token.len() != TOKEN_LEN {
            return Ok(None);
        }
        if stream.write_all(&token).await.is_err() {
            return Ok(None);
        }
        let mut answer = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE, stream.read_exact(&mut answer)).await {
            Ok(Ok(_)) if answer[0] == ACCEPTED => Ok(Some(stream)),
            // refused (the token changed under us: a new owner) or stopping
            _ => Ok(None),
        }
    }
}

#[cfg(not(unix))]
mod platform {
    use std::path::Path;

    use crate::error::ShareError;

    /// Nobody serves a memory here yet (see the owner's notes on named pipes).
    pub(super) async fn connect(
        _dir: &Path,
    ) -> Result<Option<tokio::io::DuplexStream>, ShareError> {
        Ok(None)
    }
}
