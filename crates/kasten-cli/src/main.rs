//! `kasten`: the command line over Kasten's engine.
//!
//! Every command opens the memory, does its work, and closes the store before the process
//! exits, on success, on error and on Ctrl-C alike (see kasten-store's durability notes).
//! Errors go to stderr in plain words with exit code 1; usage errors exit 2.

mod llm;
mod manual;
mod mcp;
mod memory;
mod oserror;
mod output;
mod share;
mod transfer;

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use chrono::NaiveDate;
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use kasten_core::import::{LineError, parse_time};
use kasten_core::{NewNote, NoteId};
use kasten_embed::{Embedder, LazyEmbedder};
use kasten_engine::{Engine, EngineOptions, FieldEdit, JobOutcome, Progress, ReviewStatus};
use kasten_share::{Memory, ReviewChange};

/// Who the CLI acts as in the audit history.
const ACTOR: &str = "user";
use kasten_engine::{Endpoint, StorageLimits};

#[derive(Parser, Debug)]
#[command(
    name = "kasten",
    version,
    about = "Kasten: an agentic Zettelkasten memory you can see, audit and undo."
)]
struct Cli {
    /// Where the memory lives: surrealkv://DIR (default: $KASTEN_HOME/db), mem://, or ws://HOST:PORT
    #[arg(long, global = true, env = "KASTEN_DB")]
    db: Option<String>,
    /// Machine-readable output on stdout.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Save a note (TEXT, or - to read it from stdin) and print its id.
    Add {
        text: String,
        /// When the memory happened (RFC 3339, e.g. 2024-05-01T14:30:00Z); default now.
        #[arg(long)]
        time: Option<String>,
        /// Return only after the LLM has enriched the note (keywords, tags, context, links).
        #[arg(long)]
        wait: bool,
    },
    /// Show every field of a note and its links.
    Show { id: String },
    /// List notes, newest first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Delete a note and its links.
    Delete { id: String },
    /// Hybrid (vector + keyword) search.
    Search {
        query: String,
        #[arg(short, default_value_t = 10)]
        k: usize,
        /// What was current on this day (YYYY-MM-DD): notes whose value took effect later
        /// are left out, a note counts as replaced only by a newer note valid by then.
        #[arg(long, value_name = "DATE")]
        as_of: Option<String>,
    },
    /// Import notes from a file (JSON Lines, a chat transcript) or a Markdown folder /
    /// Obsidian vault, in batches, with progress; importing the same source again adds
    /// nothing twice.
    Import(ImportArgs),
    /// Export every note as a Markdown vault Obsidian opens (one file per note).
    Export {
        /// A new or empty folder.
        dir: PathBuf,
        #[arg(long, value_enum, default_value = "markdown")]
        format: ExportFormat,
    },
    /// Write a full backup (every note, link, revision, event, job, audit entry, setting).
    Backup { file: PathBuf },
    /// Restore a backup FILE into an empty memory (or in place of this one with
    /// --replace), or an archived note by its ID.
    Restore {
        /// A backup file, or a note id.
        target: String,
        /// Replace this memory with the backup FILE: it is restored and checked beside the
        /// memory, which is then moved aside (kept, named in the output) and replaced.
        #[arg(long)]
        replace: bool,
    },
    /// Serve the memory to LLM agents over MCP (stdio); see docs/MCP.md.
    Mcp {
        /// The agent may only search and read: add_memory and link_notes are refused.
        #[arg(long, conflicts_with = "propose_only")]
        read_only: bool,
        /// The agent's links are proposals for you to review; add_memory (a note cannot
        /// wait for review) is refused.
        #[arg(long)]
        propose_only: bool,
    },
    /// Ask a question: the answer is streamed and cites the notes it used as [n].
    Ask {
        question: String,
        /// Keep a conversation: earlier turns of this session are sent as history.
        #[arg(long)]
        session: Option<String>,
        /// Start the session afresh.
        #[arg(long, requires = "session")]
        new: bool,
        /// Notes retrieved before the relevance check.
        #[arg(short = 'k', long, default_value_t = 8)]
        k: usize,
        /// Answer as of this day (YYYY-MM-DD): from what was current then.
        #[arg(long, value_name = "DATE")]
        as_of: Option<String>,
    },
    /// The Boxes (clusters of linked, related notes); computed on first use.
    Boxes {
        /// Recompute every Box now.
        #[arg(long)]
        recompute: bool,
    },
    /// Notes whose strength decayed below the archive threshold (for you to review).
    ArchiveCandidates {
        /// Strength below which a note is listed (default: setting, else 0.2).
        #[arg(long)]
        threshold: Option<f64>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Archive a note: it leaves retrieval but is kept (`restore ID` brings it back).
    Archive { id: String },
    /// Keep a fading note: it moves back towards full strength and fades more slowly; its
    /// history records the keep.
    Keep { id: String },
    /// Set how fast a note fades: long-term, short-term, or project (with --project).
    Tier {
        id: String,
        tier: String,
        #[arg(long)]
        project: Option<String>,
    },
    /// Projects: notes of an active project do not fade.
    Project {
        #[command(subcommand)]
        action: memory::ProjectAction,
    },
    /// Find supersessions among notes never compared on write (imports, older notes) and
    /// file them as proposals in Review; never changes a note. Resumes an unfinished run.
    Consolidate {
        /// Notes per page (one transaction of proposals each).
        #[arg(long, default_value_t = 200)]
        batch: usize,
        /// Stop after about this many notes; the next run continues from there.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Run pending enrichment jobs now (LLM construction, links, evolution), with progress.
    Enrich {
        /// Jobs processed at the same time.
        #[arg(long)]
        workers: Option<usize>,
        /// Queue failed jobs again first.
        #[arg(long)]
        retry_failed: bool,
    },
    /// LLM tokens spent, per model and per note.
    Usage {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Recent pipeline events (one per enriched note).
    Events {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// The review queue: links and edits the LLM proposed or applied.
    Proposals {
        /// proposed | applied | accepted | rejected | rolled_back (default: proposed and applied)
        #[arg(long)]
        status: Option<String>,
        /// Only what one maker made: llm, merge, agent (every agent) or agent:NAME (the
        /// agent's name from MCP).
        #[arg(long)]
        by: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Accept a proposed link or edit (optionally adjusting an edit first).
    Accept {
        id: String,
        #[command(flatten)]
        fields: FieldArgs,
    },
    /// Reject a link or edit (an applied edit is rolled back).
    Reject { id: String },
    /// Settle a supersession proposal as "both stay true": the two notes do not conflict;
    /// the proposal is removed and the pair is never proposed again.
    BothTrue { id: String },
    /// Roll back a revision, a link, or a whole event (everything one note's enrichment did).
    Rollback { id: String },
    /// Apply a rolled-back event again.
    Reapply { id: String },
    /// A note's complete history: creation, construction, evolution, edits, reviews.
    History { id: String },
    /// Change a note's text (--content) or its keywords, tags or context; versioned, and
    /// a new text is re-indexed at once and enriched again.
    Edit {
        id: String,
        #[command(flatten)]
        fields: FieldArgs,
        /// The note's new text (or - to read it from stdin).
        #[arg(long)]
        content: Option<String>,
    },
    /// Link two notes by hand (an accepted link of yours; `rollback LINK` removes it).
    Link {
        from: String,
        to: String,
        /// relates (default), supports, contradicts, elaborates, causes, follows, same-entity
        #[arg(long)]
        kind: Option<String>,
        /// Why they are linked.
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Remove the links between two notes (either direction; `reapply LINK` brings one back).
    Unlink {
        from: String,
        to: String,
        /// Only links of this kind.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Show or change settings stored in the memory (llm.provider, llm.base_url, llm.model,
    /// pipeline.k, policy.links, policy.edits).
    Config {
        #[command(subcommand)]
        action: Option<ConfigAction>,
    },
    /// The LLM in use (built-in, configured, or switched off), what it is trusted to do,
    /// and the LLM servers found on this machine; `use N` picks one of those.
    Llm {
        #[command(subcommand)]
        action: Option<LlmAction>,
    },
    /// Check the LLM's annotations and links in this memory: no prompt text, keywords from
    /// the note, a context that is a sentence, at most five links per note, varied reasons.
    /// Exits 1 when a rule fails.
    Quality,
    /// Measure performance.
    Bench {
        #[command(subcommand)]
        what: kasten_eval::BenchCommand,
    },
    /// Evaluate Kasten on a benchmark (LoCoMo).
    Eval {
        #[command(subcommand)]
        what: kasten_eval::EvalCommand,
    },
}

#[derive(Args, Debug, Clone, Default)]
struct FieldArgs {
    /// Comma-separated tags.
    #[arg(long, value_delimiter = ',')]
    tags: Option<Vec<String>>,
    /// Comma-separated keywords.
    #[arg(long, value_delimiter = ',')]
    keywords: Option<Vec<String>>,
    #[arg(long)]
    context: Option<String>,
}

impl FieldArgs {
    fn edit(&self) -> FieldEdit {
        let clean = |v: &Option<Vec<String>>| {
            v.as_ref().map(|v| {
                v.iter()
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
        };
        FieldEdit {
            keywords: clean(&self.keywords),
            tags: clean(&self.tags),
            context: self.context.clone(),
        }
    }
}

#[derive(Subcommand, Debug, Clone)]
enum LlmAction {
    /// Use the N-th server `kasten llm` lists (stored as llm.provider, llm.base_url, llm.model).
    Use {
        n: usize,
        /// Which of the server's models (default: its first).
        #[arg(long)]
        model: Option<String>,
    },
    /// Go back to the built-in model (removes llm.provider, llm.base_url, llm.model), or
    /// use the installed model NAME of `kasten llm models` (stored as llm.model_path).
    Builtin { name: Option<String> },
    /// The built-in models Kasten can install: size, languages, license, whether and where
    /// each is installed, and what was measured on this machine.
    Models,
    /// Download a model of `kasten llm models` into Kasten's data directory (resumable;
    /// every part and the joined file checked against their pinned sha256).
    Install { name: String },
    /// Delete an installed model of `kasten llm models` (and what an unfinished download
    /// of it left).
    Remove { name: String },
}

#[derive(Subcommand, Debug, Clone)]
enum ConfigAction {
    /// Set a setting.
    Set { key: String, value: String },
    /// Remove a setting (back to its default).
    Unset { key: String },
}

#[derive(Args, Debug)]
struct ImportArgs {
    /// The file (jsonl, chat) or folder / Markdown file (markdown).
    file: PathBuf,
    #[arg(long, value_enum)]
    format: ImportFormat,
    /// Import the good lines and report the bad ones, instead of stopping before any write.
    #[arg(long)]
    skip_invalid: bool,
    /// Notes per transaction.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Print each note's id on stdout as soon as its batch is committed.
    #[arg(long)]
    print_ids: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ImportFormat {
    Jsonl,
    /// A Markdown folder or Obsidian vault.
    Markdown,
    /// A chat transcript: a JSON list of {role, content, time}.
    Chat,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ExportFormat {
    Markdown,
}

/// jemalloc rather than the system allocator: glibc's malloc held ~30 % more of a
/// 100k-note restore (0.97–1.06 GB peak against 0.73 GB; "Memory: what holds the RSS" in
/// docs/BENCHMARKS.md). It also serves C and C++ `malloc` (ONNX Runtime's): see the
/// `tikv-jemallocator` features in the root Cargo.toml.
#[cfg(not(target_os = "windows"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    init_logging();
    output::quiet_closed_stdout();
    let cli = Cli::parse();
    let json = cli.json;
    let rt = match kasten_engine::runtime() {
        Ok(rt) => rt,
        Err(e) => return output::fail(json, &anyhow!("cannot start the async runtime: {e}")),
    };
    let result = rt.block_on(run(cli));
    // The store was closed inside `run`; let any background work wind down before exit.
    rt.shutdown_timeout(std::time::Duration::from_secs(10));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => output::fail(json, &e),
    }
}

fn init_logging() {
    // surrealkv warns "No runtime available for closing the store" when a clone of its
    // tree is dropped after `Store::close` already closed it; that is noise, not a problem.
    let filter = tracing_subscriber::EnvFilter::try_from_env("KASTEN_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,surrealkv=error,llama_cpp_2=error")
    });
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, filter::LevelFilter};
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_filter(filter);
    // The OS error behind a refused write is only logged by the storage engine (at ERROR,
    // also when KASTEN_LOG hides it): kept so the error message can name it.
    tracing_subscriber::registry()
        .with(fmt)
        .with(oserror::OsErrorLayer.with_filter(LevelFilter::ERROR))
        .init();
}

fn endpoint(db: Option<&str>) -> Result<Endpoint> {
    Ok(match db {
        Some(s) => Endpoint::parse(s)?,
        None => Endpoint::default_from_env()?,
    })
}

/// The embedding model, checked now (the error names `scripts/setup` when it is missing)
/// and loaded when something is first embedded: a command that embeds nothing (backup,
/// restore, list, history, export) does not load ONNX Runtime.
fn load_embedder() -> Result<Arc<dyn Embedder>> {
    let e = LazyEmbedder::new_default().context("cannot load the embedding model")?;
    Ok(Arc::new(e))
}

/// A progress bar on stderr for the engine's long work (hidden when not a terminal).
fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:32}] {pos}/{len} ({per_sec}, {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}

/// How `kasten eval` and `kasten bench` open memories and show progress: as every command.
struct CliShell;

impl kasten_eval::Shell for CliShell {
    fn open_engine(
        &self,
        db: Option<String>,
    ) -> futures_util::future::BoxFuture<'static, Result<Engine>> {
        Box::pin(async move { open_engine(db.as_deref()).await })
    }

    fn progress_bar(&self) -> ProgressBar {
        progress_bar()
    }
}

async fn open_engine(db: Option<&str>) -> Result<Engine> {
    let ep = endpoint(db)?;
    open_engine_with(&ep, load_embedder()?, None).await
}

/// Opens the memory at `ep` with `embedder`, and with `storage` limits where given
/// (otherwise the defaults and the environment's).
async fn open_engine_with(
    ep: &Endpoint,
    embedder: Arc<dyn Embedder>,
    storage: Option<StorageLimits>,
) -> Result<Engine> {
    let pb = progress_bar();
    let report = |p: Progress| {
        let (msg, done, total) = match p {
            Progress::Loading { done, total } => ("loading", done, total),
            Progress::Reembedding { done, total } => ("re-embedding", done, total),
        };
        // small memories open instantly; only show a bar for real work
        if total >= 5000 || matches!(p, Progress::Reembedding { .. }) {
            pb.set_message(msg);
            pb.set_length(total);
            pb.set_position(done);
        }
    };
    let options = EngineOptions {
        storage,
        ..EngineOptions::default()
    };
    let engine = Engine::open_with(ep, embedder, options, &report)
        .await
        .with_context(|| format!("cannot open the memory at {ep}"))?;
    pb.finish_and_clear();
    Ok(engine)
}

async fn run(cli: Cli) -> Result<()> {
    // The person waits for `enrich` and `eval`: the built-in model takes every core.
    if matches!(cli.command, Command::Enrich { .. } | Command::Eval { .. }) {
        kasten_llm::set_foreground(true);
    }
    // `bench` manages its own memories.
    if let Command::Bench { what } = &cli.command {
        return kasten_eval::bench::run(what, cli.db.as_deref(), cli.json, &CliShell).await;
    }
    // `eval` manages its own memories too.
    if let Command::Eval { what } = &cli.command {
        return kasten_eval::eval::run(what, cli.json, &CliShell).await;
    }
    // the model catalog works on files, not on a memory
    if let Command::Llm {
        action:
            Some(action @ (LlmAction::Models | LlmAction::Install { .. } | LlmAction::Remove { .. })),
    } = &cli.command
    {
        return llm::catalog(action, cli.json).await;
    }
    // `mcp` serves until the client disconnects.
    if let Command::Mcp {
        read_only,
        propose_only,
    } = &cli.command
    {
        let access = if *read_only {
            kasten_mcp::Access::ReadOnly
        } else if *propose_only {
            kasten_mcp::Access::ProposeOnly
        } else {
            kasten_mcp::Access::Full
        };
        return mcp::run(cli.db.as_deref(), access).await;
    }
    // Validate what can be validated before opening anything.
    let prepared = match prepare(&cli.command)? {
        // a restore by replacement opens, closes and swaps memories itself
        Prepared::Restore(transfer::RestoreTarget::Replace(path, file)) => {
            return transfer::replace(cli.db.as_deref(), &path, &file, cli.json).await;
        }
        p => p,
    };
    // A command the memory's owner can carry out goes through it when another process
    // has the memory open.
    let as_client = served_by_owner(&prepared);
    // a restore or a vault import writes a whole memory in transactions of at most
    // ~4 MiB: a smaller memtable keeps its peak memory down (not the JSONL import, whose
    // batches are counted in lines only)
    let bulk = matches!(
        prepared,
        Prepared::Restore(transfer::RestoreTarget::Backup(..)) | Prepared::ImportPlan(_)
    );
    let storage = bulk.then(StorageLimits::for_bulk_writes_from_env);
    let mut engine = match share::open_or_connect(cli.db.as_deref(), as_client, storage).await? {
        share::Opened::Remote(client) => {
            let memory = Memory::Remote(client);
            return tokio::select! {
                r = output::until_stdout_closed(execute_shared(&memory, prepared, cli.json)) => r,
                _ = kasten_engine::shutdown_signal() => Err(anyhow!("interrupted; everything committed so far is saved")),
            };
        }
        share::Opened::Local(e) => *e,
    };
    let workers = match &cli.command {
        Command::Enrich { workers, .. } => *workers,
        _ => None,
    };
    if let Err(e) = configure(&mut engine, workers, needs_llm(&cli.command)).await {
        engine.close().await;
        return Err(e);
    }
    let engine = Arc::new(engine);
    // While it runs, this command serves the memory to other Kasten processes; not a
    // restore, which fills an empty memory table by table and must be alone in it.
    let owner = if matches!(prepared, Prepared::Restore(_)) {
        None
    } else {
        share::serve(
            &engine,
            cli.db.as_deref(),
            &format!("`kasten {}`", command_name(&cli.command)),
            None,
        )
        .await
    };
    let result = tokio::select! {
        r = output::until_stdout_closed(execute(&engine, prepared, cli.json)) => r,
        _ = kasten_engine::shutdown_signal() => Err(anyhow!("interrupted; everything committed so far is saved")),
    };
    share::close(owner, engine).await?;
    result
}

/// The subcommand's name, as other processes see the owner.
fn command_name(cmd: &Command) -> String {
    let debug = format!("{cmd:?}");
    let word: String = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    // ArchiveCandidates → archive-candidates
    let mut name = String::new();
    for (i, c) in word.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// Commands another process that has the memory open can carry out for this one.
fn served_by_owner(p: &Prepared) -> bool {
    matches!(
        p,
        Prepared::Add(_, false)
            | Prepared::Show(_)
            | Prepared::List(_)
            | Prepared::Search(..)
            | Prepared::Memory(memory::MemoryCmd::Ask { session: None, .. })
            | Prepared::Proposals(..)
            | Prepared::Accept(..)
            | Prepared::Reject(_)
            | Prepared::BothTrue(_)
            | Prepared::Rollback(_)
            | Prepared::Reapply(_)
            | Prepared::History(_)
            | Prepared::Edit(..)
            | Prepared::Manual(_)
            | Prepared::Delete(_)
    )
}

/// The commands of [`served_by_owner`], over the engine here or the owner's.
async fn execute_shared(memory: &Memory, cmd: Prepared, json: bool) -> Result<()> {
    match cmd {
        Prepared::Add(new, false) => {
            let mut added = memory.add(vec![new]).await?;
            if let Some(m) = added.merges.first() {
                memory::merged(json, m);
                return Ok(());
            }
            let note = added
                .notes
                .pop()
                .ok_or_else(|| anyhow!("the saved note went missing"))?;
            output::added(json, &note, None);
        }
        Prepared::Show(id) => output::show(json, &memory.get(&id).await?),
        Prepared::List(limit) => output::list(
            json,
            &memory.list(limit, 0).await?,
            memory.list_counts().await?,
        ),
        Prepared::Search(q, k, as_of) => {
            output::search(json, &memory.search_as_of(&q, k, as_of).await?)
        }
        Prepared::Memory(memory::MemoryCmd::Ask {
            question,
            session: None,
            new,
            k,
            as_of,
        }) => memory::ask(memory, &question, None, new, k, as_of, json).await?,
        Prepared::Proposals(statuses, by, limit) => output::proposals(
            json,
            &memory.proposals(&statuses, by.as_deref(), limit).await?,
        ),
        Prepared::History(id) => output::history(json, &id, &memory.history(&id).await?),
        Prepared::Delete(id) => {
            memory.delete(&id).await?;
            output::deleted(json, &id);
        }
        Prepared::Accept(id, edit) => {
            review(memory, ReviewChange::Accept { id, edit }, json).await?
        }
        Prepared::Reject(id) => review(memory, ReviewChange::Reject { id }, json).await?,
        Prepared::BothTrue(id) => review(memory, ReviewChange::BothTrue { id }, json).await?,
        Prepared::Rollback(id) => review(memory, ReviewChange::Rollback { id }, json).await?,
        Prepared::Reapply(id) => review(memory, ReviewChange::Reapply { id }, json).await?,
        Prepared::Edit(id, edit) => {
            let reason = "edited by the user".to_owned();
            review(memory, ReviewChange::Edit { id, edit, reason }, json).await?
        }
        Prepared::Manual(c) => review(memory, c, json).await?,
        _ => bail!("internal error: this command cannot go through another process"),
    }
    Ok(())
}

/// A review or a change by hand, as the user, here or in the owner's engine.
async fn review(memory: &Memory, change: ReviewChange, json: bool) -> Result<()> {
    output::reviewed(json, &memory.review(change, ACTOR).await?);
    Ok(())
}

/// The LLM and pipeline settings: environment first, then what `kasten config` stored,
/// then the built-in model. With `need_llm` false the LLM is not set up at all, so a bad
/// LLM setting never stops a command that does not use the LLM.
async fn configure(engine: &mut Engine, workers: Option<usize>, need_llm: bool) -> Result<()> {
    let env = |k: &str| std::env::var(k).ok();
    Ok(engine
        .configure_from_settings(&env, workers, need_llm)
        .await?)
}

/// Whether a command uses the LLM.
fn needs_llm(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Add { wait: true, .. }
            | Command::Enrich { .. }
            | Command::Ask { .. }
            | Command::Llm { .. }
    )
}

/// A command with its input already read and checked.
enum Prepared {
    Add(NewNote, bool),
    Enrich(bool),
    Usage(usize),
    Events(usize),
    Config(Option<ConfigAction>),
    Llm(Option<LlmAction>),
    Quality,
    Proposals(Vec<ReviewStatus>, Option<String>, usize),
    Accept(String, FieldEdit),
    Reject(String),
    BothTrue(String),
    Rollback(String),
    Reapply(String),
    History(NoteId),
    Edit(NoteId, FieldEdit),
    Show(NoteId),
    List(usize),
    Delete(NoteId),
    Search(String, usize, Option<NaiveDate>),
    Import(ImportJob),
    ImportPlan(transfer::ImportPlan),
    Export(PathBuf),
    Backup(PathBuf),
    Restore(transfer::RestoreTarget),
    Memory(memory::MemoryCmd),
    /// `link`, `unlink`, `edit --content`: a change by hand, its input checked.
    Manual(ReviewChange),
}

struct ImportJob {
    file: PathBuf,
    /// Good lines found when the file was checked; they are read again, a batch at a time.
    good: usize,
    skipped: Vec<LineError>,
    batch: usize,
    print_ids: bool,
}

/// `--as-of DATE`, checked: a day as YYYY-MM-DD.
fn as_of_day(s: &Option<String>) -> Result<Option<NaiveDate>> {
    s.as_deref()
        .map(|d| kasten_core::validity::parse_day(d).map_err(|e| anyhow!("--as-of: {e}")))
        .transpose()
}

fn prepare(cmd: &Command) -> Result<Prepared> {
    Ok(match cmd {
        Command::Add { text, time, wait } => {
            let content = if text == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("cannot read the note from stdin")?;
                s
            } else {
                text.clone()
            };
            let at = time
                .as_deref()
                .map(parse_time)
                .transpose()
                .map_err(|e| anyhow!(e))?;
            Prepared::Add(NewNote::new(&content)?.at(at), *wait)
        }
        Command::Show { id } => Prepared::Show(NoteId::parse(id)?),
        Command::List { limit } => Prepared::List(*limit),
        Command::Delete { id } => Prepared::Delete(NoteId::parse(id)?),
        Command::Search { query, k, as_of } => {
            if query.trim().is_empty() {
                bail!("the search query is empty");
            }
            Prepared::Search(query.clone(), (*k).max(1), as_of_day(as_of)?)
        }
        Command::Import(a) if matches!(a.format, ImportFormat::Markdown) => {
            Prepared::ImportPlan(transfer::plan_markdown(&a.file, a.batch.clamp(1, 10_000))?)
        }
        Command::Import(a) if matches!(a.format, ImportFormat::Chat) => {
            Prepared::ImportPlan(transfer::plan_chat(&a.file, a.batch.clamp(1, 10_000))?)
        }
        Command::Export { dir, format } => {
            let ExportFormat::Markdown = format;
            Prepared::Export(dir.clone())
        }
        Command::Backup { file } => Prepared::Backup(file.clone()),
        Command::Restore { target, replace } => {
            Prepared::Restore(transfer::restore_target(target, *replace)?)
        }
        Command::Mcp { .. } => bail!("mcp is handled separately"),
        Command::Ask {
            question,
            session,
            new,
            k,
            as_of,
        } => {
            if question.trim().is_empty() {
                bail!("the question is empty");
            }
            Prepared::Memory(memory::MemoryCmd::Ask {
                question: question.clone(),
                session: session.clone(),
                new: *new,
                k: *k,
                as_of: as_of_day(as_of)?,
            })
        }
        Command::Boxes { recompute } => Prepared::Memory(memory::MemoryCmd::Boxes {
            recompute: *recompute,
        }),
        Command::ArchiveCandidates { threshold, limit } => {
            Prepared::Memory(memory::MemoryCmd::ArchiveCandidates {
                threshold: *threshold,
                limit: *limit,
            })
        }
        Command::Archive { id } => Prepared::Memory(memory::MemoryCmd::Archive(NoteId::parse(id)?)),
        Command::Keep { id } => Prepared::Memory(memory::MemoryCmd::Keep(NoteId::parse(id)?)),
        Command::Tier { id, tier, project } => Prepared::Memory(memory::MemoryCmd::Tier {
            id: NoteId::parse(id)?,
            tier: memory::parse_tier(tier)?,
            project: project.clone(),
        }),
        Command::Project { action } => Prepared::Memory(memory::MemoryCmd::Project(action.clone())),
        Command::Consolidate { batch, limit } => {
            if *batch == 0 {
                bail!("--batch is at least 1");
            }
            Prepared::Memory(memory::MemoryCmd::Consolidate(
                kasten_engine::ConsolidateOptions {
                    batch: (*batch).min(10_000),
                    limit: *limit,
                },
            ))
        }
        Command::Import(a) => {
            // read to the end once, holding only the bad lines: a file of any size
            let (good, bad) = transfer::scan_jsonl(&a.file)?;
            if !bad.is_empty() && !a.skip_invalid {
                let shown: Vec<String> = bad
                    .iter()
                    .take(20)
                    .map(|e| format!("  {}: {e}", a.file.display()))
                    .collect();
                let more = if bad.len() > 20 {
                    format!("\n  … and {} more", bad.len() - 20)
                } else {
                    String::new()
                };
                bail!(
                    "{} invalid line(s) in {}; nothing was imported. Fix them, or pass --skip-invalid to import the other {} line(s):\n{}{}",
                    bad.len(),
                    a.file.display(),
                    good,
                    shown.join("\n"),
                    more
                );
            }
            Prepared::Import(ImportJob {
                file: a.file.clone(),
                good,
                skipped: bad,
                batch: a.batch.clamp(1, 10_000),
                print_ids: a.print_ids,
            })
        }
        Command::Enrich { retry_failed, .. } => Prepared::Enrich(*retry_failed),
        Command::Usage { limit } => Prepared::Usage(*limit),
        Command::Events { limit } => Prepared::Events(*limit),
        Command::Config { action } => Prepared::Config(action.clone()),
        Command::Llm { action } => Prepared::Llm(action.clone()),
        Command::Quality => Prepared::Quality,
        Command::Proposals { status, by, limit } => {
            let statuses = match status.as_deref() {
                None => vec![],
                Some(s) => vec![ReviewStatus::parse(s).ok_or_else(|| {
                    anyhow!("--status is one of proposed, applied, accepted, rejected, rolled_back (not '{s}')")
                })?],
            };
            let by = by.as_deref().map(str::trim).filter(|b| !b.is_empty());
            if let Some(b) = by
                && !matches!(b, "llm" | "merge")
                && !kasten_engine::is_agent(b)
            {
                bail!("--by is llm, merge, agent (every agent) or agent:NAME (not '{b}')");
            }
            Prepared::Proposals(statuses, by.map(str::to_owned), *limit)
        }
        Command::Accept { id, fields } => Prepared::Accept(id.trim().to_owned(), fields.edit()),
        Command::Reject { id } => Prepared::Reject(id.trim().to_owned()),
        Command::BothTrue { id } => Prepared::BothTrue(id.trim().to_owned()),
        Command::Rollback { id } => Prepared::Rollback(id.trim().to_owned()),
        Command::Reapply { id } => Prepared::Reapply(id.trim().to_owned()),
        Command::History { id } => Prepared::History(NoteId::parse(id)?),
        Command::Edit {
            id,
            fields,
            content: Some(text),
        } => {
            if !fields.edit().is_empty() {
                bail!("change the text (--content) and the annotations in two separate edits");
            }
            Prepared::Manual(ReviewChange::Content {
                id: NoteId::parse(id)?,
                text: manual::read_content(text)?,
            })
        }
        Command::Edit { id, fields, .. } => {
            let edit = fields.edit();
            if edit.is_empty() {
                bail!("nothing to change: give --content, or --tags, --keywords and/or --context");
            }
            Prepared::Edit(NoteId::parse(id)?, edit)
        }
        Command::Link {
            from,
            to,
            kind,
            reason,
        } => Prepared::Manual(ReviewChange::Link {
            from: NoteId::parse(from)?,
            to: NoteId::parse(to)?,
            kind: kind.clone(),
            reason: reason.clone(),
        }),
        Command::Unlink { from, to, kind } => Prepared::Manual(ReviewChange::Unlink {
            from: NoteId::parse(from)?,
            to: NoteId::parse(to)?,
            kind: kind.clone(),
        }),
        Command::Bench { .. } => bail!("bench is handled separately"),
        Command::Eval { .. } => bail!("eval is handled separately"),
    })
}

async fn execute(engine: &Arc<Engine>, cmd: Prepared, json: bool) -> Result<()> {
    if served_by_owner(&cmd) {
        return execute_shared(&Memory::Local(Arc::clone(engine)), cmd, json).await;
    }
    match cmd {
        Prepared::Add(new, wait) => {
            let mut added = engine.add_batch_merging(vec![new]).await?;
            if let Some(m) = added.merges.first() {
                memory::merged(json, m);
                return Ok(());
            }
            let note = added
                .notes
                .pop()
                .ok_or_else(|| anyhow!("the saved note went missing"))?;
            if !wait {
                output::added(json, &note, None);
                return Ok(());
            }
            if engine.llm_client().is_none() {
                output::added(json, &note, None);
                bail!(
                    "the note was saved ({}) but cannot be enriched: {}",
                    note.id,
                    engine.llm_missing_reason()
                );
            }
            let outcome = engine.enrich_note(&note.id).await?;
            output::added(json, &note, outcome.as_ref());
            match outcome {
                Some(JobOutcome::Retrying { error, .. })
                | Some(JobOutcome::Failed { error, .. }) => {
                    bail!(
                        "the note was saved ({}) but enrichment failed: {error}",
                        note.id
                    )
                }
                _ => {}
            }
        }
        Prepared::Enrich(retry_failed) => enrich(engine, retry_failed, json).await?,
        Prepared::Usage(limit) => output::usage(
            json,
            &engine.usage_by_model().await?,
            &engine.usage_by_note(limit).await?,
        ),
        Prepared::Events(limit) => output::events(json, &engine.events(limit).await?),
        Prepared::Config(action) => config(engine, action, json).await?,
        Prepared::Llm(action) => llm::run(engine, action, json).await?,
        Prepared::Quality => llm::quality(engine, json).await?,
        Prepared::Import(job) => import(engine, job, json).await?,
        Prepared::ImportPlan(plan) => transfer::import(engine, plan, json).await?,
        Prepared::Export(dir) => transfer::export(engine, &dir, json).await?,
        Prepared::Backup(file) => transfer::backup(engine, &file, json).await?,
        Prepared::Restore(target) => transfer::restore(engine, target, json).await?,
        Prepared::Memory(c) => memory::execute(engine, c, json).await?,
        // the rest is what the owner also serves (returned above)
        cmd => execute_shared(&Memory::Local(Arc::clone(engine)), cmd, json).await?,
    }
    Ok(())
}

async fn enrich(engine: &Engine, retry_failed: bool, json: bool) -> Result<()> {
    if engine.llm_client().is_none() {
        bail!("{}", engine.llm_missing_reason());
    }
    if !json {
        eprintln!("enriching with {}", engine.llm_label());
    }
    if retry_failed {
        let n = engine.retry_failed().await?;
        if !json && n > 0 {
            eprintln!("queued {n} failed job(s) again");
        }
    }
    let counts = engine.job_counts().await?;
    let pb = progress_bar();
    pb.set_message("enriching");
    pb.set_length(counts.queued + counts.running);
    let on_job = |o: &JobOutcome| {
        pb.inc(1);
        match o {
            JobOutcome::Retrying { note, error } => {
                pb.println(format!("{note}: will retry: {error}"))
            }
            JobOutcome::Failed { note, error } => pb.println(format!("{note}: failed: {error}")),
            _ => {}
        }
    };
    let summary = engine.run_pending(&on_job).await?;
    pb.finish_and_clear();
    // the Boxes after what was enriched, as the app's and `kasten mcp`'s worker loop does
    if let Err(e) = engine.refresh_boxes(summary.done).await {
        eprintln!("warning: cannot compute the Boxes: {e}");
    }
    if let Some(local) = engine.llm_client().and_then(|c| c.local()) {
        let st = local.status();
        if st.requests > 0 {
            eprintln!(
                "{}: loaded in {:.1} s ({} MB), read {:.0} prompt tokens/s, wrote {:.1} tokens/s, \
                 {:.0} % of prompt tokens reused from the cache",
                engine.llm_label(),
                st.load_ms as f64 / 1000.0,
                st.model_bytes / 1_000_000,
                st.prompt_per_sec(),
                st.generation_per_sec(),
                100.0 * st.prompt_tokens_reused as f64 / st.prompt_tokens.max(1) as f64
            );
        }
    }
    output::enriched(json, &summary, &engine.job_counts().await?);
    if summary.done == 0 && (summary.failed > 0 || summary.retrying > 0) {
        bail!(
            "no note could be enriched: {}",
            summary
                .errors
                .first()
                .map(String::as_str)
                .unwrap_or("unknown error")
        );
    }
    Ok(())
}

async fn config(engine: &Engine, action: Option<ConfigAction>, json: bool) -> Result<()> {
    match action {
        None => {}
        Some(ConfigAction::Set { key, value }) => engine.set_setting_checked(&key, &value).await?,
        Some(ConfigAction::Unset { key }) => engine.unset_setting(&key).await?,
    }
    let env = |k: &str| std::env::var(k).ok();
    let effective = engine.effective_settings(&env).await?;
    output::settings(json, &engine.settings_view().await?, &effective);
    Ok(())
}

async fn import(engine: &Engine, job: ImportJob, json: bool) -> Result<()> {
    use std::io::Write;
    let pb = progress_bar();
    pb.set_message("importing");
    pb.set_length(job.good as u64);
    let mut imported = 0u64;
    let mut existing = 0u64;
    let mut stdout = std::io::stdout().lock();
    let mut batches = transfer::JsonlBatches::open(&job.file, job.batch)?;
    while let Some(chunk) = batches.next_batch()? {
        let first_line = chunk.first().map_or(0, |c| c.0);
        // lines already imported (same source and content) are skipped
        let notes = transfer::not_yet_imported(engine, &job.file, &chunk).await?;
        existing += (chunk.len() - notes.len()) as u64;
        if notes.is_empty() {
            pb.set_position(imported + existing);
            continue;
        }
        let saved = engine.add_batch(notes).await.with_context(|| {
            format!(
                "import stopped at line {first_line} of {}: {imported} note(s) before it were saved, this batch and the rest were not",
                job.file.display()
            )
        })?;
        imported += saved.notes.len() as u64;
        if job.print_ids {
            for n in &saved.notes {
                writeln!(stdout, "{}", n.id)?;
            }
            stdout.flush()?;
        }
        pb.set_position(imported + existing);
    }
    pb.finish_and_clear();
    if existing > 0 && !json {
        eprintln!("{existing} line(s) were already imported earlier and were skipped");
    }
    output::imported(json, &job.file, imported, &job.skipped);
    Ok(())
}
