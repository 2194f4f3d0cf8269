//! The `surreal` server binary, as SurrealDB's own `main` builds it, for the server-path
//! tests. Run as `kasten-surreal-server start --unauthenticated --bind 127.0.0.1:PORT memory`.

use std::process::ExitCode;

fn main() -> ExitCode {
    surrealdb_server::init(surrealdb_server::core::CommunityComposer())
}
