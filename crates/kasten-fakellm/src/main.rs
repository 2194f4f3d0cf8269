//! `kasten-fakellm`: the fake LLM server as a process, for whole-system tests.
//! Prints `listening on http://127.0.0.1:PORT` once ready; stops on Ctrl-C or SIGTERM.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};

use clap::Parser;
use kasten_fakellm::{FakeLlm, Mode};

#[derive(Parser)]
#[command(
    version,
    about = "A deterministic LLM server on 127.0.0.1 (OpenAI-compatible and Ollama APIs)."
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one; the line printed says which).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Fault mode: normal, http500, slow[:MS], malformed, truncated, wrong_shape,
    /// unknown_handles, fenced, flaky, fail_first[:N], rate_limited, injection, or its JSON form.
    #[arg(long, default_value = "normal")]
    mode: Mode,
    /// Model name listed by /v1/models and /api/tags.
    #[arg(long, default_value = "fake-model")]
    model: String,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let fake = FakeLlm::start_with(addr, args.mode, args.model).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{}", fake.addr())?;
        out.flush()?;
    }
    shutdown_signal().await;
    fake.stop().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
