//! A client: another process's engine behind the socket.

use std::path::Path;
use std::time::{Duration, Instant};

use kasten_core::{NewNote, Note, NoteId};
use kasten_engine::{AddedBatch, Answer, AskOptions, ListCounts, NoteDetail, SearchOutput};
use tarpc::client::RpcError;

use crate::error::{RemoteError, ShareError};
use crate::owner::OwnerInfo;
use crate::wire::MemoryServiceClient;

/// How long a read may take in the owner.
const READ: Duration = Duration::from_secs(60);
/// How long a write may take (embedding a batch on a busy machine).
const WRITE: Duration = Duration::from_secs(600);
/// How long an answer may take (a local model on the CPU).
const ASK: Duration = Duration::from_secs(1800);

/// What a lost connection means for a read and for a write.
const READ_LOST: &str = "nothing was changed; run the command again";
const WRITE_LOST: &str =
    "the change may or may not have been saved; `kasten list` shows what the memory holds";

/// A connection to the process that has the memory open. Cloning shares the connection.
#[derive(Clone)]
pub struct Client {
    inner: MemoryServiceClient,
    owner: OwnerInfo,
}

impl Client {
    /// Connects to the owner of the memory in `dir`. `Ok(None)` when nobody serves it:
    /// no socket, a socket nobody listens on (its owner was killed; the next owner
    /// replaces it), or an owner that is just stopping. The caller then opens the memory
    /// itself (and waits and tries again if that finds it locked).
    pub async fn connect(dir: &Path) -> Result<Option<Self>, ShareError> {
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
        let owner = match inner.hello(deadline(READ)).await {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!("the memory's owner did not say hello: {e}");
                return Ok(None);
            }
        };
        Ok(Some(Self { inner, owner }))
    }

    /// Who serves the memory.
    pub fn owner(&self) -> &OwnerInfo {
        &self.owner
    }

    fn fail(&self, e: RpcError, limit: Duration, consequence: &'static str) -> ShareError {
        match e {
            RpcError::DeadlineExceeded => ShareError::Timeout {
                owner: self.owner.to_string(),
                secs: limit.as_secs(),
            },
            RpcError::Server(e) => ShareError::Protocol(e.to_string()),
            RpcError::Shutdown | RpcError::Send(_) | RpcError::Channel(_) => ShareError::Lost {
                owner: self.owner.to_string(),
                consequence,
            },
        }
    }

    fn answer<T>(
        &self,
        r: Result<Result<T, RemoteError>, RpcError>,
        limit: Duration,
        consequence: &'static str,
    ) -> Result<T, ShareError> {
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(ShareError::Remote(e)),
            Err(e) => Err(self.fail(e, limit, consequence)),
        }
    }

    /// Asks the owner who it is; a round trip with no work in the engine.
    pub async fn ping(&self) -> Result<OwnerInfo, ShareError> {
        self.inner
            .hello(deadline(READ))
            .await
            .map_err(|e| self.fail(e, READ, READ_LOST))
    }

    pub async fn add(&self, notes: Vec<NewNote>) -> Result<AddedBatch, ShareError> {
        let r = self.inner.add(deadline(WRITE), notes).await;
        self.answer(r, WRITE, WRITE_LOST)
    }

    pub async fn search(&self, query: &str, k: usize) -> Result<SearchOutput, ShareError> {
        let r = self.inner.search(deadline(READ), query.to_owned(), k).await;
        self.answer(r, READ, READ_LOST)
    }

    pub async fn get(&self, id: &NoteId) -> Result<NoteDetail, ShareError> {
        let r = self.inner.get(deadline(READ), id.clone()).await;
        self.answer(r, READ, READ_LOST)
    }

    pub async fn list(&self, limit: usize, offset: usize) -> Result<Vec<Note>, ShareError> {
        let r = self.inner.list(deadline(READ), limit, offset).await;
        self.answer(r, READ, READ_LOST)
    }

    pub async fn list_counts(&self) -> Result<ListCounts, ShareError> {
        let r = self.inner.list_counts(deadline(READ)).await;
        self.answer(r, READ, READ_LOST)
    }

    pub async fn ask(&self, question: &str, options: &AskOptions) -> Result<Answer, ShareError> {
        let r = self
            .inner
            .ask(deadline(ASK), question.to_owned(), options.clone())
            .await;
        self.answer(r, ASK, READ_LOST)
    }
}

fn deadline(d: Duration) -> tarpc::context::Context {
    let mut ctx = tarpc::context::current();
    ctx.deadline = Instant::now() + d;
    ctx
}

#[cfg(unix)]
mod platform {
    use std::io::ErrorKind;
    use std::path::Path;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixStream;

    use crate::error::ShareError;
    use crate::owner::{ACCEPTED, HANDSHAKE, TOKEN_LEN};

    /// A stream past the token check, or `None` when nobody serves the memory.
    pub(super) async fn connect(dir: &Path) -> Result<Option<UnixStream>, ShareError> {
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
