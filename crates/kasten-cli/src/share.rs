//! One memory, many processes (kasten-share): a command that finds the memory open in
//! another Kasten process goes through that process; a command that opens the memory
//! serves it to the others while it runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use kasten_embed::Embedder;
use kasten_engine::{Endpoint, Engine, EngineError, ErrorKind, StorageLimits};
use kasten_share::{Client, Owner, OwnerInfo};
use tokio::sync::Notify;

/// How long a command waits for a memory that another process holds without serving it
/// yet (it is opening, or it is closing and the next owner has not started).
const HANDOVER_WAIT: Duration = Duration::from_secs(20);

/// The folder whose memory can be shared: embedded memories on disk. A SurrealDB server
/// is shared by the server itself, and `mem://` by nobody.
pub fn dir(ep: &Endpoint) -> Option<PathBuf> {
    match ep {
        Endpoint::SurrealKv(d) => Some(d.clone()),
        Endpoint::Mem | Endpoint::Remote(_) => None,
    }
}

/// The memory opened here, or the process that has it open.
pub enum Opened {
    Local(Box<Engine>),
    Remote(Client),
}

/// Whether the error says the memory is open in another process.
fn is_locked(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<EngineError>()
            .is_some_and(|e| e.kind() == ErrorKind::Locked)
    })
}

/// Connects to the memory's owner when `as_client` and one serves it; otherwise opens the
/// memory here. A memory that is locked but not (yet) served is waited for: its owner is
/// starting, or stopping and handing over (then this process opens it).
pub async fn open_or_connect(
    db: Option<&str>,
    as_client: bool,
    storage: Option<StorageLimits>,
) -> Result<Opened> {
    let ep = crate::endpoint(db)?;
    let dir = dir(&ep).filter(|_| as_client);
    let deadline = Instant::now() + HANDOVER_WAIT;
    let mut embedder: Option<Arc<dyn Embedder>> = None;
    loop {
        if let Some(d) = &dir {
            match Client::connect(d).await {
                Ok(Some(c)) => return Ok(Opened::Remote(c)),
                Ok(None) => {}
                Err(e) => tracing::warn!("{e}; opening the memory here instead"),
            }
        }
        let e = match &embedder {
            Some(e) => Arc::clone(e),
            None => {
                let e = crate::load_embedder()?;
                embedder = Some(Arc::clone(&e));
                e
            }
        };
        match crate::open_engine_with(&ep, e, storage).await {
            Ok(engine) => return Ok(Opened::Local(Box::new(engine))),
            Err(e) if dir.is_some() && is_locked(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Serves `engine` to other processes while this one has it open (`name` is how they
/// name this process). Without a shareable folder, or when serving fails, the memory
/// still works here and the others are told it is open elsewhere, as before.
pub async fn serve(
    engine: &Arc<Engine>,
    db: Option<&str>,
    name: &str,
    wake: Option<Arc<Notify>>,
) -> Option<Owner> {
    let on_write = wake.map(|w| -> kasten_share::OnWrite { Arc::new(move || w.notify_one()) });
    let d = dir(&crate::endpoint(db).ok()?)?;
    match Owner::start(
        Arc::clone(engine),
        &d,
        OwnerInfo::this_process(name),
        on_write,
    )
    .await
    {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    }
}

/// Stops serving, waits until nothing else holds the engine, and closes it.
pub async fn close(owner: Option<Owner>, engine: Arc<Engine>) -> Result<()> {
    if let Some(o) = owner {
        o.stop().await;
    }
    // work still holding the engine is asked to stop before it writes; the store is
    // closed whatever happens (never dropped unclosed)
    Engine::close_shared(engine).await;
    Ok(())
}
