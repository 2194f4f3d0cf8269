//! Opening a memory in a process, for every shell (the CLI, `kasten mcp`, the app): connect
//! to the process that serves it, or open it here — and wait through a handover instead of
//! failing while another process is starting or stopping with it.
//!
//! SurrealKV lets one process open an embedded memory. Between two owners it is held
//! without being served: the first is still opening (before its [`crate::Owner`] starts) or
//! is closing (its owner stopped, its store not yet released). A process that finds it so
//! tries again, connecting and opening in turn, for up to [`HANDOVER_WAIT`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kasten_engine::{Endpoint, Engine, EngineError, ErrorKind};

use crate::Client;

/// How long an opener waits for a memory that another process holds (it is opening, or it
/// is closing and the next owner has not started).
pub const HANDOVER_WAIT: Duration = Duration::from_secs(20);
/// Time between two tries during a handover.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// The folder whose memory can be shared: an embedded memory on disk. A SurrealDB server is
/// shared by the server itself, and `mem://` by nobody.
pub fn shared_dir(ep: &Endpoint) -> Option<PathBuf> {
    match ep {
        Endpoint::SurrealKv(d) => Some(d.clone()),
        Endpoint::Mem | Endpoint::Remote(_) => None,
    }
}

/// Whether opening failed because another process has the memory open: the test an
/// opener's `is_locked` makes of the engine's own error.
pub fn is_locked(e: &EngineError) -> bool {
    e.kind() == ErrorKind::Locked
}

/// What a process does when another one has the memory open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Become the owner's client when one serves the memory, else open it here; a memory
    /// held but not served is waited for (an owner starting, or one stopping: then this
    /// process opens it). The `kasten` commands an owner carries out, and `kasten mcp`.
    Client,
    /// Open it here, waiting while another process holds it, served or not: a command or
    /// `kasten mcp` that has it hands it over when it ends. The app, whose commands work on
    /// the engine itself.
    Owner,
    /// Open it here or fail at once: the commands that need the memory to themselves
    /// (import, backup, restore, enrich, config) say "open in another process" without
    /// waiting.
    Alone,
}

/// The memory opened here, or the process that has it open.
pub enum Opened {
    Local(Box<Engine>),
    Remote(Client),
}

/// Opens the memory at `ep` as `sharing` says, within [`HANDOVER_WAIT`]. `open` opens it
/// here (each shell loads its embedder and shows its progress there; it is called again
/// after a refusal that `is_locked` recognises), so a process that ends up a client never
/// opens anything.
pub async fn open_or_connect<E, F, Fut>(
    ep: &Endpoint,
    sharing: Sharing,
    open: F,
    is_locked: impl Fn(&E) -> bool,
) -> Result<Opened, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Engine, E>>,
{
    open_within(ep, sharing, HANDOVER_WAIT, open, is_locked).await
}

/// [`open_or_connect`] with [`Sharing::Owner`]: the engine, opened here.
pub async fn open_here<E, F, Fut>(
    ep: &Endpoint,
    open: F,
    is_locked: impl Fn(&E) -> bool,
) -> Result<Engine, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Engine, E>>,
{
    open_here_within(ep, HANDOVER_WAIT, open, is_locked).await
}

pub(crate) async fn open_here_within<E, F, Fut>(
    ep: &Endpoint,
    wait: Duration,
    mut open: F,
    is_locked: impl Fn(&E) -> bool,
) -> Result<Engine, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Engine, E>>,
{
    let waits = shared_dir(ep).is_some();
    let deadline = Instant::now() + wait;
    loop {
        match open().await {
            Ok(engine) => return Ok(engine),
            Err(e) if waits && is_locked(&e) && Instant::now() < deadline => {
                tokio::time::sleep(RETRY_EVERY).await;
            }
            Err(e) => return Err(e),
        }
    }
}

pub(crate) async fn open_within<E, F, Fut>(
    ep: &Endpoint,
    sharing: Sharing,
    wait: Duration,
    mut open: F,
    is_locked: impl Fn(&E) -> bool,
) -> Result<Opened, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Engine, E>>,
{
    match sharing {
        Sharing::Owner => {
            return open_here_within(ep, wait, open, is_locked)
                .await
                .map(|e| Opened::Local(Box::new(e)));
        }
        Sharing::Alone => return open().await.map(|e| Opened::Local(Box::new(e))),
        Sharing::Client => {}
    }
    let dir = shared_dir(ep);
    let deadline = Instant::now() + wait;
    loop {
        if let Some(d) = &dir
            && let Some(c) = connect(d).await
        {
            return Ok(Opened::Remote(c));
        }
        match open().await {
            Ok(engine) => return Ok(Opened::Local(Box::new(engine))),
            Err(e) if dir.is_some() && is_locked(&e) && Instant::now() < deadline => {
                tokio::time::sleep(RETRY_EVERY).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The owner serving the memory in `dir`, if one answers; a listener that cannot be used
/// (another user's, say) is logged and the memory opened here instead.
async fn connect(dir: &Path) -> Option<Client> {
    match Client::connect(dir).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("{e}; opening the memory here instead");
            None
        }
    }
}
