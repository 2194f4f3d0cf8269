//! Kasten's MCP server: the memory as tools for LLM agents, over stdio.
//!
//! Tools: `add_memory` (saved through the engine's pipeline, queued for enrichment, with
//! the agent's name as its source), `search_memory` (hybrid search with provenance),
//! `read_note` (a note with its links), `list_recent`, `ask_memory` (an answer with
//! citations, when an LLM is configured), `link_notes`. Nothing destructive: an agent cannot
//! delete or rewrite notes; what the LLM does with what agents write goes through the review
//! queue like everything else, and so does an agent's link when the memory reviews links.
//! Every tool carries the MCP annotations (`readOnlyHint`, `destructiveHint`,
//! `idempotentHint`, `openWorldHint`).
//!
//! [`Access`] is what the user lets the agent do: everything, read only (`kasten mcp
//! --read-only`: `add_memory` and `link_notes` are refused), or propose only (`kasten mcp
//! --propose-only`: a link is a proposal in Review; a new note cannot wait for review, so
//! `add_memory` is refused). What an agent did is recorded under its name from
//! `initialize` (`agent:<name>` in the history; `mcp:<name>:<n>` as a note's source).
//!
//! stdout carries the protocol and nothing else; logs go to stderr (the caller sets up
//! tracing). Errors are MCP errors whose messages are the engine's sentences.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kasten_core::import::parse_time;
use kasten_core::{NewNote, NoteId};
use kasten_engine::{AskOptions, Engine};
use kasten_share::{ErrorKind, Memory, ShareError};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, Json, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router,
};
use thiserror::Error;
use tokio::sync::Notify;

mod shapes;

pub use shapes::{
    AddMemoryArgs, Added, AnswerOut, AskMemoryArgs, Cited, Hit, LinkNotesArgs, LinkOut, Linked,
    ListRecentArgs, NoteOut, NoteWithLinks, ReadNoteArgs, Recent, SearchMemoryArgs, SearchResult,
    SupersededOut,
};
use shapes::{link_out, note_out, time_text};

/// Largest `k` / `limit` a tool accepts.
const MAX_RESULTS: usize = 100;

/// What can stop the server.
#[derive(Debug, Error)]
pub enum McpError {
    #[error("the MCP connection could not start: {0}")]
    Start(String),
    #[error("the MCP connection failed: {0}")]
    Run(String),
}

/// What the user lets an agent do through this server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Access {
    /// Read, add notes, link notes (a link is a proposal when the memory reviews links).
    #[default]
    Full,
    /// Only the tools that read; every write is refused with an error that says why.
    ReadOnly,
    /// Every write is a proposal a person accepts or rejects in Review; a write that cannot
    /// be one (`add_memory`: a new note is searchable at once) is refused.
    ProposeOnly,
}

/// The server: the memory (open here, or through the process that has it open) and the
/// tools over it.
#[derive(Clone)]
pub struct KastenMcp {
    memory: Memory,
    access: Access,
    /// Wakes the background enrichment worker after a write.
    wake: Arc<Notify>,
    /// Position of the next note in this session's source stream.
    seq: Arc<AtomicU64>,
    tool_router: ToolRouter<Self>,
}

/// An engine error as an MCP error: the user's mistakes are invalid parameters, the
/// rest internal errors; the message is the engine's sentence either way (also when the
/// engine runs in the process that has the memory open).
fn mcp_error(e: ShareError) -> ErrorData {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::EmptyQuery | ErrorKind::Invalid => {
            ErrorData::invalid_params(msg, None)
        }
        ErrorKind::NoLlm => ErrorData::invalid_request(msg, None),
        ErrorKind::Conflict
        | ErrorKind::Refused
        | ErrorKind::Locked
        | ErrorKind::Llm
        | ErrorKind::Other => ErrorData::internal_error(msg, None),
    }
}

/// Runs `f` again when the store reports a write conflict (the engine's one retry, with
/// its limit): the background enrichment may commit at the same moment, and the attempt
/// that lost wrote nothing.
async fn retrying<T, F, Fut>(f: F) -> Result<T, ShareError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, ShareError>>,
{
    kasten_engine::retry_on_conflict("an agent's call", f).await
}

fn bad(msg: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(msg.into(), None)
}

/// The error for a write this server's [`Access`] does not allow.
fn refused(tool: &str, access: Access) -> ErrorData {
    let msg = match access {
        Access::ReadOnly => format!(
            "{tool} is refused: this Kasten MCP server is read-only (`kasten mcp --read-only`); \
             the agent can search and read the memory but not change it"
        ),
        _ => format!(
            "{tool} is refused: this Kasten MCP server only proposes changes (`kasten mcp \
             --propose-only`), and a new note cannot wait for review; link_notes proposes \
             links for the user to accept"
        ),
    };
    ErrorData::invalid_request(msg, None)
}

/// The client's name from `initialize`, made safe for a source (`mcp:<name>:<n>`).
fn client_name(ctx: &RequestContext<RoleServer>) -> String {
    let raw = ctx
        .peer
        .peer_info()
        .map(|i| i.client_info.name.clone())
        .unwrap_or_default();
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ' ') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let clean = clean.trim().to_owned();
    if clean.is_empty() {
        kasten_core::Actor::Agent.as_str().into()
    } else {
        clean
    }
}

#[tool_router]
impl KastenMcp {
    pub fn new(memory: Memory) -> Self {
        Self::with_access(memory, Access::Full)
    }

    /// A server that lets the agent do only what `access` allows.
    pub fn with_access(memory: Memory, access: Access) -> Self {
        Self {
            memory,
            access,
            wake: Arc::new(Notify::new()),
            seq: Arc::new(AtomicU64::new(1)),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Save a memory (one self-contained note) in the user's Kasten memory. It is searchable at once; the memory's LLM then annotates it (keywords, tags, context) and links it to related notes. Attributed to this agent. Optional time: when it happened (RFC 3339 or YYYY-MM-DD).",
        annotations(
            title = "Add a memory",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn add_memory(
        &self,
        Parameters(args): Parameters<AddMemoryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Added>, ErrorData> {
        if self.access != Access::Full {
            return Err(refused("add_memory", self.access));
        }
        let at = match args.time.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(t) => Some(parse_time(t).map_err(bad)?),
        };
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let source = format!("mcp:{}:{n}", client_name(&ctx));
        let new = NewNote::new(&args.content)
            .map_err(|e| bad(e.to_string()))?
            .at(at)
            .with_source(Some(source));
        let mut added = retrying(|| self.memory.add(vec![new.clone()]))
            .await
            .map_err(mcp_error)?;
        let note = added.notes.pop().ok_or_else(|| {
            ErrorData::internal_error("internal error: a saved note went missing", None)
        })?;
        self.wake.notify_one();
        let merged_into = added
            .merges
            .iter()
            .find(|m| m.note == note.id)
            .map(|m| m.duplicate_of.to_string());
        Ok(Json(Added {
            id: note.id.to_string(),
            created_at: time_text(note.created_at),
            source: note.source.clone(),
            enrich_state: note.enrich_state.label().to_owned(),
            merged: merged_into.is_some(),
            merged_into,
        }))
    }

    #[tool(
        description = "Search the user's Kasten memory (vector + keyword, following links between notes). Returns notes with their id, content, score, how each was found (via), when it was written and where it came from, and when its fact became true (valid_from). A note that a newer note replaced carries superseded_by (the newer note, since when, what changed) and ranks right below the current one. Optional as_of (YYYY-MM-DD): what was current on that day.",
        annotations(
            title = "Search the memory",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn search_memory(
        &self,
        Parameters(args): Parameters<SearchMemoryArgs>,
    ) -> Result<Json<SearchResult>, ErrorData> {
        if args.query.trim().is_empty() {
            return Err(bad("the search query is empty"));
        }
        let k = args.k.unwrap_or(10).clamp(1, MAX_RESULTS);
        let as_of = args
            .as_of
            .as_deref()
            .map(kasten_core::validity::parse_day)
            .transpose()
            .map_err(|e| bad(format!("as_of: {e}")))?;
        let out = retrying(|| self.memory.search_as_of(&args.query, k, as_of))
            .await
            .map_err(mcp_error)?;
        Ok(Json(SearchResult {
            hits: out
                .hits
                .iter()
                .map(|h| Hit {
                    id: h.note.id.to_string(),
                    content: h.note.content.clone(),
                    score: h.score,
                    via: h.via.iter().map(|v| v.label()).collect(),
                    created_at: time_text(h.note.created_at),
                    source: h.note.source.clone(),
                    tags: h.note.tags.clone(),
                    valid_from: time_text(
                        kasten_core::validity::valid_from(
                            &h.note.content,
                            h.note.source.as_deref(),
                            h.note.created_at,
                        )
                        .at,
                    ),
                    superseded_by: h.superseded_by.as_ref().map(|s| SupersededOut {
                        id: s.id.to_string(),
                        since: time_text(s.since),
                        reason: s.reason.clone(),
                    }),
                })
                .collect(),
        }))
    }

    #[tool(
        description = "Read one note of the memory by id: content, time, keywords, tags, context, where it came from, and its links to other notes (kind, reason, confidence, status).",
        annotations(
            title = "Read a note",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn read_note(
        &self,
        Parameters(args): Parameters<ReadNoteArgs>,
    ) -> Result<Json<NoteWithLinks>, ErrorData> {
        let id = NoteId::parse(&args.id).map_err(|e| bad(e.to_string()))?;
        let d = self.memory.get(&id).await.map_err(mcp_error)?;
        Ok(Json(NoteWithLinks {
            note: note_out(&d.note),
            links: d
                .links
                .iter()
                .filter(|l| {
                    matches!(
                        l.status,
                        kasten_core::LinkStatus::Accepted | kasten_core::LinkStatus::Proposed
                    )
                })
                .map(link_out)
                .collect(),
            valid_from: time_text(d.valid_from),
            valid_until: d.valid_until.map(time_text),
            superseded_by: d.superseded_by.as_ref().map(|s| SupersededOut {
                id: s.id.to_string(),
                since: time_text(s.since),
                reason: s.reason.clone(),
            }),
        }))
    }

    #[tool(
        description = "Answer a question from the memory with the memory's LLM: the answer cites the notes it used as [n] (listed with ids), or says the memory does not hold the answer. Needs an LLM configured for Kasten.",
        annotations(
            title = "Ask the memory",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn ask_memory(
        &self,
        Parameters(args): Parameters<AskMemoryArgs>,
    ) -> Result<Json<AnswerOut>, ErrorData> {
        if args.question.trim().is_empty() {
            return Err(bad("the question is empty"));
        }
        if let Memory::Local(engine) = &self.memory
            && engine.llm_client().is_none()
        {
            return Err(mcp_error(kasten_engine::EngineError::NoLlm.into()));
        }
        let options = AskOptions::default();
        let a = retrying(|| self.memory.ask(&args.question, &options, &|_| {}))
            .await
            .map_err(mcp_error)?;
        Ok(Json(AnswerOut {
            notes: a
                .notes
                .iter()
                .filter(|n| a.citations.contains(&n.id))
                .map(|n| Cited {
                    n: n.n,
                    id: n.id.to_string(),
                    content: n.content.clone(),
                    created_at: time_text(n.created_at),
                })
                .collect(),
            citations: a.citations.iter().map(|c| c.to_string()).collect(),
            citations_inferred: a.citations_inferred,
            answer: a.answer,
            not_in_memory: a.not_in_memory,
        }))
    }

    #[tool(
        description = "Link two notes of the user's Kasten memory that belong together (kind: relates by default, or supports, contradicts, elaborates, causes, follows, same-entity; an optional reason). The link is attributed to this agent and shown in both notes' history; the user can remove it. When the user reviews links (or this server only proposes), the link is a proposal (status proposed) the user accepts or rejects. Nothing is deleted or changed.",
        annotations(
            title = "Link two notes",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn link_notes(
        &self,
        Parameters(args): Parameters<LinkNotesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Linked>, ErrorData> {
        if self.access == Access::ReadOnly {
            return Err(refused("link_notes", self.access));
        }
        let from = NoteId::parse(&args.from).map_err(|e| bad(e.to_string()))?;
        let to = NoteId::parse(&args.to).map_err(|e| bad(e.to_string()))?;
        let reason = args.reason.unwrap_or_default();
        let actor = kasten_engine::agent_actor(&client_name(&ctx));
        let propose = self.access == Access::ProposeOnly;
        let out = retrying(|| {
            self.memory
                .agent_link(&from, &to, args.kind.as_deref(), &reason, &actor, propose)
        })
        .await
        .map_err(mcp_error)?;
        Ok(Json(Linked {
            link: out.target,
            from: from.to_string(),
            to: to.to_string(),
            status: if out.action == kasten_core::Action::ProposeLink {
                kasten_core::LinkStatus::Proposed
            } else {
                kasten_core::LinkStatus::Accepted
            }
            .to_string(),
        }))
    }

    #[tool(
        description = "The most recent notes of the memory, newest first.",
        annotations(
            title = "Recent notes",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_recent(
        &self,
        Parameters(args): Parameters<ListRecentArgs>,
    ) -> Result<Json<Recent>, ErrorData> {
        let limit = args.limit.unwrap_or(20).clamp(1, MAX_RESULTS);
        let notes = self.memory.list(limit, 0).await.map_err(mcp_error)?;
        let total = self.memory.list_counts().await.map_err(mcp_error)?.total;
        Ok(Json(Recent {
            notes: notes.iter().map(note_out).collect(),
            total,
        }))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KastenMcp {
    fn get_info(&self) -> ServerConfig {
        let mut instructions = String::from(
            "Kasten is the user's long-term memory. Use search_memory before answering \
             questions about the user's past, people, projects or decisions; read_note \
             for a note's details and links; add_memory to remember something new (one \
             fact or event per note, self-contained); ask_memory for an answer with \
             citations. Notes are never deleted or rewritten through this server.",
        );
        match self.access {
            Access::Full => {}
            Access::ReadOnly => instructions.push_str(
                " The user started this server read-only: add_memory and link_notes are refused.",
            ),
            Access::ProposeOnly => instructions.push_str(
                " The user started this server to propose only: link_notes proposes links \
                 for the user to review, and add_memory is refused.",
            ),
        }
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kasten", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }
}

/// Serves the tools over stdin/stdout until the client disconnects. While it runs,
/// notes added by agents are enriched in the background when an LLM is configured.
pub async fn serve_stdio(engine: Arc<Engine>) -> Result<(), McpError> {
    serve_stdio_memory(Memory::Local(engine), Arc::new(Notify::new())).await
}

/// [`serve_stdio`] over a memory open here or in another process. `wake` is notified
/// after every write of this server; the enrichment worker that runs here when the
/// memory is open here (with an LLM) waits on it, so whoever else writes to this
/// engine (other processes through kasten-share) should notify it too. Through another
/// process, that process enriches.
pub async fn serve_stdio_memory(memory: Memory, wake: Arc<Notify>) -> Result<(), McpError> {
    serve_stdio_with(memory, wake, Access::Full).await
}

/// [`serve_stdio_memory`] letting the agent do only what `access` allows.
pub async fn serve_stdio_with(
    memory: Memory,
    wake: Arc<Notify>,
    access: Access,
) -> Result<(), McpError> {
    let mut server = KastenMcp::with_access(memory.clone(), access);
    server.wake = Arc::clone(&wake);
    let serve = async {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpError::Start(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| McpError::Run(e.to_string()))?;
        Ok(())
    };
    let engine = match memory {
        Memory::Local(e) if e.llm_client().is_some() => e,
        _ => return serve.await,
    };
    // The worker runs beside the server in this task and stops with it; a job cut off
    // there is requeued when the memory is next opened (see the pipeline).
    tokio::select! {
        r = serve => r,
        () = enrich_worker(&engine, &wake) => Ok(()),
    }
}

/// The engine's enrichment loop ([`kasten_engine::run_worker`]) for this server: a pass
/// after each write (and every minute, for jobs waiting to be retried), until the engine
/// closes.
struct McpWorker(Arc<Engine>);

impl kasten_engine::Worker for McpWorker {
    async fn next_pass(&mut self) -> kasten_engine::Pass {
        kasten_engine::Pass::Run(Arc::clone(&self.0))
    }
    fn on_job(&self, _: &kasten_engine::JobOutcome) {}
    async fn pass_done(
        &mut self,
        _: &Engine,
        result: Result<kasten_engine::RunSummary, kasten_engine::EngineError>,
    ) {
        match result {
            Ok(s) if s.failed > 0 || s.retrying > 0 => {
                tracing::warn!(errors = ?s.errors, "some notes could not be enriched yet")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("enrichment failed: {e}"),
        }
    }
}

async fn enrich_worker(engine: &Arc<Engine>, wake: &Notify) {
    let mut w = McpWorker(Arc::clone(engine));
    kasten_engine::run_worker(&mut w, wake, std::time::Duration::from_secs(60)).await;
    drop(w);
    // the loop ends only when the engine closes: the server goes on until then
    std::future::pending::<()>().await;
}
