//! `kasten mcp`: the MCP server over stdio (kasten-mcp). stdout is the protocol, so this
//! command prints nothing itself; logs and errors go to stderr.

use std::sync::Arc;

use anyhow::Result;

use crate::{configure, open_engine};

pub async fn run(db: Option<&str>) -> Result<()> {
    let mut engine = open_engine(db).await?;
    if let Err(e) = configure(&mut engine, None, true).await {
        engine.close().await;
        return Err(e);
    }
    let engine = Arc::new(engine);
    let served = tokio::select! {
        r = kasten_mcp::serve_stdio(Arc::clone(&engine)) => r.map_err(anyhow::Error::from),
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    // The server's tool calls may still hold the engine after the connection ends (an
    // `ask_memory` waiting for the LLM): they are stopped before they write, and the
    // store is closed on every path.
    kasten_engine::Engine::close_shared(engine).await;
    served
}
