//! `kasten mcp`: the MCP server over stdio (kasten-mcp). stdout is the protocol, so this
//! command prints nothing itself; logs and errors go to stderr.

use std::sync::Arc;

use anyhow::{Result, anyhow};

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
    // The server's tasks hold clones of the engine for a moment after the connection ends.
    let mut engine = engine;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let engine = loop {
        match Arc::try_unwrap(engine) {
            Ok(e) => break Some(e),
            Err(still_shared) if std::time::Instant::now() < deadline => {
                engine = still_shared;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(_) => break None,
        }
    };
    match engine {
        Some(e) => e.close().await,
        None => {
            return Err(anyhow!(
                "the MCP server did not release the memory within 10 s; everything committed is saved"
            ));
        }
    }
    served
}
