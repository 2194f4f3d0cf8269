//! `ask`, `boxes`, the lifecycle commands (`archive-candidates`, `archive`, `tier`,
//! `project`), `consolidate`, and how `add` reports a merge.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;
use kasten_core::NoteId;
use kasten_core::lifecycle::Tier;
use kasten_engine::{Answer, Engine, MergeInfo, Retrieval};
use kasten_share::Memory;
use serde_json::json;

use crate::output::{preview, print_json};

const ACTOR: &str = kasten_core::Actor::User.as_str();

#[derive(Subcommand, Debug, Clone)]
pub enum ProjectAction {
    /// List projects and whether they are active.
    List,
    /// Mark a project active again: its notes stop fading.
    Open { name: String },
    /// Close a project: its notes start to fade like short-term notes.
    Close { name: String },
}

/// A checked memory command.
pub enum MemoryCmd {
    Ask {
        question: String,
        session: Option<String>,
        new: bool,
        k: usize,
        as_of: Option<chrono::NaiveDate>,
    },
    Boxes {
        recompute: bool,
    },
    ArchiveCandidates {
        threshold: Option<f64>,
        limit: usize,
    },
    Archive(NoteId),
    Keep(NoteId),
    Tier {
        id: NoteId,
        tier: Tier,
        project: Option<String>,
    },
    Project(ProjectAction),
    Consolidate(kasten_engine::ConsolidateOptions),
}

pub fn parse_tier(s: &str) -> Result<Tier> {
    match Tier::parse(s) {
        Some(t) => Ok(t),
        None => bail!("unknown tier '{s}': use long-term, short-term or project"),
    }
}

pub async fn execute(engine: &Arc<Engine>, cmd: MemoryCmd, json: bool) -> Result<()> {
    match cmd {
        MemoryCmd::Ask {
            question,
            session,
            new,
            k,
            as_of,
        } => {
            let memory = Memory::Local(Arc::clone(engine));
            ask(&memory, &question, session.as_deref(), new, k, as_of, json).await
        }
        MemoryCmd::Boxes { recompute } => boxes(engine, recompute, json).await,
        MemoryCmd::ArchiveCandidates { threshold, limit } => {
            let c = engine.archive_candidates(threshold, limit).await?;
            if json {
                print_json(&serde_json::to_value(&c)?);
            } else if c.is_empty() {
                eprintln!("no archive candidates: every note is above the archive threshold");
            } else {
                for a in &c {
                    println!(
                        "{}  strength {:.2}  {:>4.0} days idle  {}  {}",
                        a.id,
                        a.strength,
                        a.idle_days,
                        a.tier.as_str(),
                        preview(&a.content, 60)
                    );
                }
                eprintln!("archive one with `kasten archive ID`; nothing is archived without you");
            }
            Ok(())
        }
        MemoryCmd::Archive(id) => {
            let n = engine.archive(&id, ACTOR).await?;
            if json {
                print_json(&json!({ "id": n.id, "status": n.status.as_str() }));
            } else {
                eprintln!("archived {id}; `kasten restore {id}` brings it back");
            }
            Ok(())
        }
        MemoryCmd::Keep(id) => {
            let strength = engine.keep(&id, ACTOR).await?;
            if json {
                print_json(&json!({ "id": id, "strength": strength }));
            } else {
                eprintln!("kept {id}: strength {strength:.2}");
            }
            Ok(())
        }
        MemoryCmd::Tier { id, tier, project } => {
            let n = engine.set_tier(&id, tier, project.as_deref()).await?;
            if json {
                print_json(&json!({ "id": n.id, "tier": n.tier, "project": n.project }));
            } else {
                eprintln!(
                    "{id} is now {}{}",
                    n.tier.as_str(),
                    n.project
                        .map(|p| format!(" (project {p})"))
                        .unwrap_or_default()
                );
            }
            Ok(())
        }
        MemoryCmd::Consolidate(options) => {
            consolidate(&Memory::Local(Arc::clone(engine)), &options, json).await
        }
        MemoryCmd::Project(action) => {
            match &action {
                ProjectAction::List => {}
                ProjectAction::Open { name } => engine.set_project_active(name, true).await?,
                ProjectAction::Close { name } => engine.set_project_active(name, false).await?,
            }
            let p = engine.projects().await?;
            if json {
                print_json(&serde_json::to_value(&p)?);
            } else if p.is_empty() {
                eprintln!("no projects; `kasten tier ID project --project NAME` starts one");
            } else {
                for s in p {
                    println!(
                        "{}  {}  since {}",
                        s.name,
                        if s.active { "active" } else { "closed" },
                        s.changed_at.to_rfc3339()
                    );
                }
            }
            Ok(())
        }
    }
}

/// `consolidate`: the supersessions among notes never compared on write, filed as
/// proposals, with a progress bar on a terminal; resumes an unfinished run. Runs in the
/// process that has the memory open when another one has.
pub(crate) async fn consolidate(
    memory: &Memory,
    options: &kasten_engine::ConsolidateOptions,
    json: bool,
) -> Result<()> {
    let pb = crate::open::progress_bar();
    pb.set_message("consolidating");
    let progress = |p: &kasten_engine::ConsolidateProgress| {
        pb.set_length(p.total.max(p.done_before + p.scanned));
        pb.set_position(p.done_before + p.scanned);
    };
    let s = memory.consolidate(options, &progress).await?;
    pb.finish_and_clear();
    if json {
        print_json(&serde_json::to_value(&s)?);
        return Ok(());
    }
    if let Some(after) = &s.resumed_from {
        eprintln!("continued the unfinished run after note {after}");
    }
    println!(
        "compared {} note(s) in {:.1} s: {} supersession(s) proposed, {} already known",
        s.scanned, s.seconds, s.proposed, s.already_known
    );
    if !s.finished {
        eprintln!("stopped at the limit; `kasten consolidate` again continues from there");
    }
    if s.proposed > 0 {
        eprintln!(
            "review them with `kasten proposals --by merge`; nothing changes until you accept"
        );
    }
    Ok(())
}

/// `ask`, in this process or through the process that has the memory open (which
/// answers with its LLM; the answer then arrives whole instead of token by token).
/// Sessions need the memory here.
pub async fn ask(
    memory: &Memory,
    question: &str,
    session: Option<&str>,
    new: bool,
    k: usize,
    as_of: Option<chrono::NaiveDate>,
    json: bool,
) -> Result<()> {
    let engine = match (memory, session) {
        (Memory::Local(e), _) => Some(e),
        (Memory::Remote(_), None) => None,
        (Memory::Remote(c), Some(_)) => bail!(
            "ask --session needs the memory to itself; it is open in {}",
            c.owner()
        ),
    };
    if let (Some(engine), Some(s)) = (engine, session)
        && new
    {
        engine.clear_chat(s).await?;
    }
    let history = match (engine, session) {
        (Some(engine), Some(s)) => engine.chat_history(s, 6).await?,
        _ => Vec::new(),
    };
    let options = kasten_engine::AskOptions {
        k: k.clamp(1, 50),
        as_of,
        ..Default::default()
    };
    let stream = !json;
    let on_token = |t: &str| {
        if stream {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(t.as_bytes());
            let _ = out.flush();
        }
    };
    let answer = match engine {
        Some(engine) => {
            engine
                .ask_with(question, &history, &options, &on_token)
                .await?
        }
        None => memory.ask(question, &options, &on_token).await?,
    };
    if let (Some(engine), Some(s)) = (engine, session) {
        engine.record_chat(s, question, &answer).await?;
    }
    if json {
        print_json(&answer_json(&answer));
    } else {
        println!();
        print_sources(&answer);
    }
    Ok(())
}

fn answer_json(a: &Answer) -> serde_json::Value {
    let notes: Vec<serde_json::Value> = a
        .notes
        .iter()
        .map(|n| {
            json!({
                "n": n.n,
                "id": n.id,
                "content": n.content,
                "created_at": n.created_at.to_rfc3339(),
                "score": n.score,
                "cosine": n.cosine,
                "via": n.via,
                "cited": n.cited,
            })
        })
        .collect();
    json!({
        "answer": a.answer,
        "citations": a.citations,
        "citations_inferred": a.citations_inferred,
        "notes": notes,
        "search_terms": a.search_terms,
        "not_in_memory": a.not_in_memory,
        "retrieval": a.retrieval,
        "invalid_citations": a.invalid_citations,
        "model": a.model,
        "usage": a.usage,
    })
}

fn print_sources(a: &Answer) {
    match &a.retrieval {
        Retrieval::Skipped { reason } => eprintln!("(memory not searched: {reason})"),
        Retrieval::Used { candidates, shown } => {
            if a.not_in_memory {
                eprintln!(
                    "(searched the memory: {candidates} candidate(s), {shown} about the question)"
                );
            }
        }
    }
    if a.citations_inferred {
        eprintln!("(the answer cites no note; its words come from:)");
    }
    for n in a.notes.iter().filter(|n| n.cited) {
        eprintln!("[{}] {}  {}", n.n, n.id, preview(&n.content, 70));
    }
    if a.invalid_citations > 0 {
        eprintln!(
            "({} citation(s) named no note shown to the model and were dropped)",
            a.invalid_citations
        );
    }
}

async fn boxes(engine: &Engine, recompute: bool, json: bool) -> Result<()> {
    let mut report = None;
    if recompute || engine.boxes().await?.is_empty() {
        if !json {
            eprintln!("computing Boxes…");
        }
        report = Some(engine.recompute_boxes().await?);
    }
    let boxes = engine.boxes().await?;
    if json {
        print_json(&serde_json::to_value(&boxes)?);
        return Ok(());
    }
    if let Some(r) = &report {
        eprintln!(
            "{} Box(es) over {} note(s) ({} in a Box), {} edges ({} links, {} similarity), modularity {:.3}",
            r.boxes,
            r.notes,
            r.boxed_notes,
            r.edges,
            r.link_edges,
            r.similarity_edges,
            r.modularity
        );
    }
    if boxes.is_empty() {
        eprintln!("no Boxes yet: notes form Boxes once they are linked or similar enough");
    }
    for b in boxes {
        println!("{}  {:>4} notes  {}", b.id, b.members.len(), b.label);
    }
    Ok(())
}

/// How `add` reports a note that was merged into an existing one.
pub fn merged(json: bool, m: &MergeInfo) {
    if json {
        print_json(&json!({
            "id": m.note,
            "merged": true,
            "merged_into": m.duplicate_of,
            "event": m.event,
            "status": m.status,
            "similarity": m.similarity,
        }));
    } else {
        println!("{}", m.note);
        eprintln!(
            "repeats note {} (similarity {:.2}): merged into it, not added as a second note ({}); `kasten rollback {}` keeps it separate",
            m.duplicate_of,
            m.similarity,
            if m.status == kasten_core::LinkStatus::Accepted {
                "applied"
            } else {
                "waiting for review"
            },
            m.event
        );
    }
}
