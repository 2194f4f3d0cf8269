//! `kasten mcp`: the MCP server over stdio (kasten-mcp). stdout is the protocol, so this
//! command prints nothing itself; logs and errors go to stderr.
//!
//! When another Kasten process has the memory open (the app, another `kasten mcp`), the
//! tools go through it (kasten-share); otherwise this process opens the memory and
//! serves it to the others while the agent's session lasts.

use std::sync::Arc;

use anyhow::Result;
use kasten_share::Memory;
use tokio::sync::Notify;

use crate::open::configure;
use crate::share::{self, Opened};

pub async fn run(db: Option<&str>, access: kasten_mcp::Access) -> Result<()> {
    let mut engine = match share::open_or_connect(db, true, None).await? {
        Opened::Remote(client) => {
            tracing::info!(
                "the memory is open in {}; serving through it",
                client.owner()
            );
            let memory = Memory::Remote(client);
            return tokio::select! {
                r = kasten_mcp::serve_stdio_with(memory, Arc::new(Notify::new()), access) => r.map_err(anyhow::Error::from),
                _ = kasten_engine::shutdown_signal() => Ok(()),
            };
        }
        Opened::Local(e) => *e,
    };
    if let Err(e) = configure(&mut engine, None, true).await {
        engine.close().await;
        return Err(e);
    }
    let engine = Arc::new(engine);
    let wake = Arc::new(Notify::new());
    let owner = share::serve(&engine, db, "`kasten mcp`", Some(Arc::clone(&wake))).await;
    let served = tokio::select! {
        r = kasten_mcp::serve_stdio_with(Memory::Local(Arc::clone(&engine)), wake, access) => r.map_err(anyhow::Error::from),
        _ = kasten_engine::shutdown_signal() => Ok(()),
    };
    // The server's tool calls may still hold the engine after the connection ends (an
    // `ask_memory` waiting for the LLM): serving stops, they are stopped before they
    // write, and the store is closed on every path.
    share::close(owner, engine).await?;
    served
}
