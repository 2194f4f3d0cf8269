//! One memory, many processes (kasten-share): a command that finds the memory open in
//! another Kasten process goes through that process; a command that opens the memory
//! serves it to the others while it runs.

use std::sync::Arc;

use anyhow::Result;
use kasten_embed::Embedder;
use kasten_engine::{Engine, EngineError, StorageLimits};
use kasten_share::{Owner, OwnerInfo, Sharing};
use tokio::sync::Notify;

pub use kasten_share::Opened;

/// Whether the error says the memory is open in another process.
fn is_locked(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<EngineError>()
            .is_some_and(kasten_share::is_locked)
    })
}

/// Connects to the memory's owner when `as_client` and one serves it; otherwise opens the
/// memory here. The policy, with its wait through a handover, is kasten-share's
/// ([`kasten_share::open_or_connect`]); the embedder is loaded only to open here.
pub async fn open_or_connect(
    db: Option<&str>,
    as_client: bool,
    storage: Option<StorageLimits>,
) -> Result<Opened> {
    let ep = crate::open::endpoint(db)?;
    let sharing = if as_client {
        Sharing::Client
    } else {
        Sharing::Alone
    };
    let mut embedder: Option<Arc<dyn Embedder>> = None;
    let ep = &ep;
    let embedder = &mut embedder;
    kasten_share::open_or_connect(
        ep,
        sharing,
        || {
            let loaded = match embedder {
                Some(e) => Ok(Arc::clone(e)),
                None => crate::open::load_embedder().inspect(|e| *embedder = Some(Arc::clone(e))),
            };
            async move { crate::open::open_engine_with(ep, loaded?, storage).await }
        },
        is_locked,
    )
    .await
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
    let d = kasten_share::shared_dir(&crate::open::endpoint(db).ok()?)?;
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
