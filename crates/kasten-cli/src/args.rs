//! What the command line accepts: every command with its arguments (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kasten_engine::FieldEdit;

#[derive(Parser, Debug)]
#[command(
    name = "kasten",
    version,
    about = "Kasten: an agentic Zettelkasten memory you can see, audit and undo."
)]
pub(crate) struct Cli {
    /// Where the memory lives: surrealkv://DIR (default: $KASTEN_HOME/db), mem://, or ws://HOST:PORT
    #[arg(long, global = true, env = "KASTEN_DB")]
    pub(crate) db: Option<String>,
    /// Machine-readable output on stdout.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
        /// Only the notes whose value had taken effect by the end of this day (YYYY-MM-DD).
        #[arg(long, value_name = "DATE")]
        as_of: Option<String>,
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
        action: crate::memory::ProjectAction,
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
pub(crate) struct FieldArgs {
    /// Comma-separated tags.
    #[arg(long, value_delimiter = ',')]
    pub(crate) tags: Option<Vec<String>>,
    /// Comma-separated keywords.
    #[arg(long, value_delimiter = ',')]
    pub(crate) keywords: Option<Vec<String>>,
    #[arg(long)]
    pub(crate) context: Option<String>,
}

impl FieldArgs {
    pub(crate) fn edit(&self) -> FieldEdit {
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
pub(crate) enum LlmAction {
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
pub(crate) enum ConfigAction {
    /// Set a setting.
    Set { key: String, value: String },
    /// Remove a setting (back to its default).
    Unset { key: String },
}

#[derive(Args, Debug)]
pub(crate) struct ImportArgs {
    /// The file (jsonl, chat) or folder / Markdown file (markdown).
    pub(crate) file: PathBuf,
    #[arg(long, value_enum)]
    pub(crate) format: ImportFormat,
    /// Import the good lines and report the bad ones, instead of stopping before any write.
    #[arg(long)]
    pub(crate) skip_invalid: bool,
    /// Notes per transaction.
    #[arg(long, default_value_t = 256)]
    pub(crate) batch: usize,
    /// Print each note's id on stdout as soon as its batch is committed.
    #[arg(long)]
    pub(crate) print_ids: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum ImportFormat {
    Jsonl,
    /// A Markdown folder or Obsidian vault.
    Markdown,
    /// A chat transcript: a JSON list of {role, content, time}.
    Chat,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum ExportFormat {
    Markdown,
}
