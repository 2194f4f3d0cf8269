//! What the CLI prints: plain text for people, `--json` for tools. The JSON field names
//! are a contract (README "CLI"): add fields freely, never rename or remove one.

use std::io::Write;
use std::path::Path;

use kasten_core::import::LineError;
use kasten_core::{Enrich, EnrichState, Note, NoteId, ReviewKind};
use kasten_engine::Fields;
use kasten_engine::{EventSummary, JobCounts, ModelUsage};
use kasten_engine::{
    HistoryEntry, JobOutcome, ListCounts, NoteDetail, ReviewItem, ReviewOutcome, RunSummary,
    SearchOutput,
};
use serde_json::{Value, json};

/// What the standard library's `print!` panics with when stdout cannot be written.
const PRINT_PANIC: &str = "failed printing to stdout";

/// Whether a panic is a print to a stdout whose reader has gone (`kasten list | head -1`):
/// the normal end of a command whose output is no longer wanted, not a failure.
fn is_closed_stdout(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    let broken_pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe).to_string();
    msg.starts_with(PRINT_PANIC)
        && (msg.contains("Broken pipe")
            || msg.contains("os error 32")
            || msg.contains(&broken_pipe))
}

/// Keeps the panic report of a print to a closed stdout off stderr (other panics are
/// reported as before).
pub fn quiet_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_closed_stdout(info.payload()) {
            default(info);
        }
    }));
}

/// Runs a command's work. A print to a closed stdout ends it as a success and any other
/// panic as an error, so that the caller still closes the store either way.
pub async fn until_stdout_closed(
    work: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(r) => r,
        Err(payload) if is_closed_stdout(payload.as_ref()) => Ok(()),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(anyhow::anyhow!("internal error: {msg}"))
        }
    }
}

pub fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

fn enrich_error(state: &EnrichState) -> Option<String> {
    match state {
        EnrichState::Pending { reason } => reason.clone(),
        EnrichState::Failed { error } => Some(error.clone()),
        EnrichState::Done => None,
    }
}

fn pending_reason(state: &EnrichState) -> Option<String> {
    match state {
        EnrichState::Pending { reason: Some(r) } => Some(r.clone()),
        EnrichState::Pending { reason: None } => Some(kasten_llm_reason()),
        _ => None,
    }
}

fn kasten_llm_reason() -> String {
    let env = |k: &str| std::env::var(k).ok();
    let settings = kasten_engine::LlmSettings::combine(&env, &Value::Null);
    match settings.provider.as_deref() {
        Some(p) if p.trim().eq_ignore_ascii_case("none") => {
            "no LLM configured: the LLM is switched off (KASTEN_LLM_PROVIDER is 'none')".to_owned()
        }
        _ => "queued for enrichment: `kasten enrich` runs it (so do `add --wait` and the open app)"
            .to_owned(),
    }
}

fn note_json(n: &Note) -> Value {
    json!({
        "id": n.id,
        "content": n.content,
        "created_at": n.created_at.to_rfc3339(),
        "updated_at": n.updated_at.to_rfc3339(),
        "keywords": n.keywords,
        "tags": n.tags,
        "context": n.context,
        "status": n.status.as_str(),
        "enrich_state": n.enrich_state.label(),
        "enrich_error": enrich_error(&n.enrich_state),
        "source": n.source,
        "strength": n.strength,
        "access_count": n.access_count,
        "last_accessed": n.last_accessed.map(|t| t.to_rfc3339()),
        "tier": n.tier.as_str(),
        "project": n.project,
        "added_at": n.added_at.to_rfc3339(),
        "version": n.version,
    })
}

pub fn preview(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max - 1).collect::<String>())
    }
}

pub fn added(json: bool, note: &Note, outcome: Option<&JobOutcome>) {
    if json {
        // `merged`/`merged_into` as in `memory::merged`: this note was not merged
        let mut v = json!({
            "id": note.id,
            "enrich_state": note.enrich_state.label(),
            "merged": false,
            "merged_into": null,
        });
        if let Some(o) = outcome {
            v["enrich_state"] = json!(match o {
                JobOutcome::Done { .. } => Enrich::Done.as_str(),
                JobOutcome::Retrying { .. } => Enrich::Pending.as_str(),
                JobOutcome::Failed { .. } => Enrich::Failed.as_str(),
                // the note was deleted: no enrichment state of a note
                JobOutcome::Gone { .. } => "gone",
            });
            v["enrichment"] = serde_json::to_value(o).unwrap_or(Value::Null);
        }
        print_json(&v);
    } else {
        println!("{}", note.id);
        if let Some(JobOutcome::Done {
            links,
            updates,
            tokens,
            ..
        }) = outcome
        {
            eprintln!("enriched: {links} link(s), {updates} neighbour update(s), {tokens} tokens");
        }
    }
}

pub fn enriched(json: bool, s: &RunSummary, after: &JobCounts) {
    if json {
        print_json(&json!({ "summary": s, "jobs": after }));
        return;
    }
    eprintln!(
        "enriched {} note(s) ({} tokens); {} will be retried, {} failed; queue: {} queued, {} failed",
        s.done, s.tokens, s.retrying, s.failed, after.queued, after.failed
    );
}

pub fn usage(json: bool, by_model: &[ModelUsage], recent: &[EventSummary]) {
    if json {
        print_json(&json!({ "by_model": by_model, "by_note": recent }));
        return;
    }
    if by_model.is_empty() {
        println!("No LLM tokens spent yet.");
        return;
    }
    println!(
        "{:<32} {:>7} {:>10} {:>10} {:>9}",
        "model", "notes", "tokens in", "tokens out", "per note"
    );
    for m in by_model {
        let per = (m.tokens_in + m.tokens_out) as f64 / m.notes.max(1) as f64;
        println!(
            "{:<32} {:>7} {:>10} {:>10} {:>9.0}",
            m.model.as_deref().unwrap_or("?"),
            m.notes,
            m.tokens_in,
            m.tokens_out,
            per
        );
    }
    println!();
    println!(
        "{:<28} {:>10} {:>10}  time",
        "note", "tokens in", "tokens out"
    );
    for e in recent {
        let est = if e.tokens_estimated {
            " (estimated)"
        } else {
            ""
        };
        println!(
            "{:<28} {:>10} {:>10}  {}{est}",
            e.note,
            e.tokens_in,
            e.tokens_out,
            e.created_at.format("%Y-%m-%d %H:%M")
        );
    }
}

pub fn events(json: bool, events: &[EventSummary]) {
    if json {
        let list: Vec<Value> = events
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(e).unwrap_or_default();
                v["timings_ms"] = e.timings_ms();
                v
            })
            .collect();
        print_json(&json!({ "events": list }));
        return;
    }
    if events.is_empty() {
        println!("No events yet: they appear when notes are enriched (kasten enrich).");
        return;
    }
    for e in events {
        let t = e.timings_ms();
        let secs = |k: &str| t.get(k).and_then(Value::as_f64).map(|ms| ms / 1000.0);
        let timing = match (secs("construct"), secs("link_evolve")) {
            (Some(c), Some(l)) => format!(", construction {c:.1} s + links and evolution {l:.1} s"),
            _ => String::new(),
        };
        println!(
            "{}  {}  note {}  {} link(s), {} revision(s), {} tokens{timing}{}{}",
            e.id,
            e.created_at.format("%Y-%m-%d %H:%M"),
            e.note,
            e.links,
            e.revisions,
            e.tokens_in + e.tokens_out,
            if e.unknown_handles > 0 {
                format!(", {} unknown handle(s) dropped", e.unknown_handles)
            } else {
                String::new()
            },
            e.model
                .as_deref()
                .map(|m| format!("  [{m}]"))
                .unwrap_or_default()
        );
    }
}

/// The stored settings (by group, secrets masked) and every setting in effect: `--json`
/// adds `effective: {"llm.timeout": {"value", "source", "problem"}, ...}`.
pub fn settings(json: bool, v: &Value, effective: &kasten_engine::settings::EffectiveSettings) {
    if json {
        let mut v = v.clone();
        let mut eff = serde_json::Map::new();
        for e in &effective.0 {
            eff.insert(
                e.key.to_owned(),
                json!({"value": e.value, "source": e.source, "problem": e.problem}),
            );
        }
        v["effective"] = Value::Object(eff);
        print_json(&v);
        return;
    }
    if let Some(groups) = v.as_object() {
        for (g, fields) in groups {
            if let Some(f) = fields.as_object() {
                for (k, val) in f {
                    println!("{g}.{k} = {val}");
                }
            }
        }
    }
    println!("in effect (environment, then settings, then defaults):");
    for e in &effective.0 {
        let source = match e.source {
            kasten_engine::settings::ValueSource::Environment => "environment",
            kasten_engine::settings::ValueSource::Settings => "settings",
            kasten_engine::settings::ValueSource::Default => "default",
        };
        println!("  {} = {} ({source})", e.key, e.value);
    }
    for p in effective.problems() {
        eprintln!("warning: {p}");
    }
}

pub fn show(json: bool, d: &NoteDetail) {
    let n = &d.note;
    if json {
        let mut v = note_json(n);
        v["links"] = serde_json::to_value(&d.links).unwrap_or(Value::Array(vec![]));
        v["valid_from"] = json!(d.valid_from.to_rfc3339());
        v["valid_until"] = json!(d.valid_until.map(|t| t.to_rfc3339()));
        v["superseded_by"] = json!(d.superseded_by.as_ref().map(|s| json!({
            "id": s.id,
            "since": s.since.to_rfc3339(),
            "reason": s.reason,
        })));
        print_json(&v);
        return;
    }
    println!("id:        {}", n.id);
    println!("time:      {}", n.created_at.to_rfc3339());
    match &d.superseded_by {
        Some(s) => println!(
            "valid:     {} until {} (superseded by {}: {})",
            d.valid_from.format("%Y-%m-%d"),
            s.since.format("%Y-%m-%d"),
            s.id,
            s.reason
        ),
        None => println!("valid:     from {}", d.valid_from.format("%Y-%m-%d")),
    }
    println!("status:    {}", n.status.as_str());
    match pending_reason(&n.enrich_state) {
        Some(r) => println!("enrich:    pending ({r})"),
        None => match &n.enrich_state {
            EnrichState::Failed { error } => println!("enrich:    FAILED: {error}"),
            s => println!("enrich:    {}", s.label()),
        },
    }
    println!("keywords:  {}", n.keywords.join(", "));
    println!("tags:      {}", n.tags.join(", "));
    println!("context:   {}", n.context);
    if let Some(s) = &n.source {
        println!("source:    {s}");
    }
    println!("content:\n{}", n.content);
    if d.links.is_empty() {
        println!("links:     none");
    } else {
        println!("links:");
        for l in &d.links {
            let other = if l.from == n.id {
                format!("-> {}", l.to)
            } else {
                format!("<- {}", l.from)
            };
            println!(
                "  {other}  {} ({:.2}, {:?}, by {}): {}",
                l.kind, l.confidence, l.status, l.created_by, l.reason
            );
        }
    }
}

/// `total` counts what the list can show; notes merged into another are counted apart.
pub fn list(json: bool, notes: &[Note], counts: ListCounts) {
    if json {
        list_json(notes, counts, None);
    } else if notes.is_empty() {
        println!("The memory is empty. Add a note with: kasten add \"...\"");
    } else {
        list_lines(notes, counts.total);
    }
}

/// `list --as-of DAY`: `total` counts the notes that had taken effect by the end of `day`.
pub fn list_as_of(json: bool, notes: &[Note], counts: ListCounts, day: chrono::NaiveDate) {
    if json {
        list_json(notes, counts, Some(day));
    } else if notes.is_empty() {
        println!("No note had taken effect by the end of {day}.");
    } else {
        list_lines(notes, counts.total);
    }
}

fn list_json(notes: &[Note], counts: ListCounts, as_of: Option<chrono::NaiveDate>) {
    let mut out = json!({
        "total": counts.total,
        "merged": counts.merged,
        "notes": notes.iter().map(note_json).collect::<Vec<_>>()
    });
    if let Some(day) = as_of {
        out["as_of"] = json!(day.to_string());
    }
    print_json(&out);
}

fn list_lines(notes: &[Note], total: u64) {
    for n in notes {
        println!(
            "{}  {}  {:<7}  {}",
            n.id,
            n.created_at.format("%Y-%m-%d %H:%M"),
            n.enrich_state.label(),
            preview(&n.content, 80)
        );
    }
    if total as usize > notes.len() {
        println!(
            "({} of {total} notes; use --limit to see more)",
            notes.len()
        );
    }
}

pub fn deleted(json: bool, id: &NoteId) {
    if json {
        print_json(&json!({ "deleted": id }));
    } else {
        println!("deleted {id}");
    }
}

pub fn search(json: bool, out: &SearchOutput) {
    if json {
        let hits: Vec<Value> = out
            .hits
            .iter()
            .map(|h| {
                json!({
                    "id": h.note.id,
                    "content": h.note.content,
                    "score": h.score,
                    "via": h.via.iter().map(|v| v.label()).collect::<Vec<_>>(),
                    "created_at": h.note.created_at.to_rfc3339(),
                    "superseded_by": h.superseded_by.as_ref().map(|s| json!({
                        "id": s.id,
                        "since": s.since.to_rfc3339(),
                        "reason": s.reason,
                    })),
                })
            })
            .collect();
        let t = &out.timings;
        print_json(&json!({
            "hits": hits,
            "timings_ms": {
                "embed": t.embed.as_secs_f64() * 1e3,
                "rank": t.rank.as_secs_f64() * 1e3,
                "fetch": t.fetch.as_secs_f64() * 1e3,
            }
        }));
        return;
    }
    if out.hits.is_empty() {
        println!("No matching notes.");
        return;
    }
    for (i, h) in out.hits.iter().enumerate() {
        let via: Vec<String> = h.via.iter().map(|v| v.label()).collect();
        println!(
            "{:>2}. {}  [{:.4}; {}]\n    {}",
            i + 1,
            h.note.id,
            h.score,
            via.join(", "),
            preview(&h.note.content, 100)
        );
        if let Some(s) = &h.superseded_by {
            println!(
                "    superseded by {} since {} ({})",
                s.id,
                s.since.format("%Y-%m-%d"),
                s.reason
            );
        }
    }
}

pub fn imported(json: bool, file: &Path, imported: u64, skipped: &[LineError]) {
    if json {
        print_json(&json!({
            "imported": imported,
            "skipped": skipped.iter().map(|e| json!({"line": e.line, "error": e.message})).collect::<Vec<_>>(),
        }));
        return;
    }
    eprintln!("imported {imported} note(s) from {}", file.display());
    if !skipped.is_empty() {
        eprintln!("skipped {} invalid line(s):", skipped.len());
        for e in skipped.iter().take(20) {
            eprintln!("  {}: {e}", file.display());
        }
        if skipped.len() > 20 {
            eprintln!("  … and {} more", skipped.len() - 20);
        }
    }
}

/// A failure the command's `--json` output already states (e.g. a quality report with
/// `"passed": false`): [`fail`] still exits non-zero and says it on stderr, but does not
/// print a second JSON document after the report.
#[derive(Debug)]
pub struct Reported(pub String);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reported {}

/// Prints an error for the user and returns exit code 1.
pub fn fail(json: bool, e: &anyhow::Error) -> std::process::ExitCode {
    // The chain reads as "cannot open the memory at …: <cause>".
    let msg = e
        .chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    // A write the disk refused reaches us as a failed transaction; the cause was logged.
    let msg = match crate::oserror::last() {
        Some(cause) if !msg.contains(&cause) => format!(
            "{msg} (the disk refused a write: {cause}; is it full, or the data directory \
             not writable?)"
        ),
        _ => msg,
    };
    if json && e.downcast_ref::<Reported>().is_none() {
        // stdout may be closed already; the message still goes to stderr
        let _ = writeln!(std::io::stdout(), "{}", json!({ "error": msg }));
    }
    eprintln!("error: {msg}");
    std::process::ExitCode::from(1)
}

fn diff(before: Option<&Fields>, after: Option<&Fields>) -> Vec<String> {
    let (Some(b), Some(a)) = (before, after) else {
        return vec![];
    };
    let mut out = Vec::new();
    if b.keywords != a.keywords {
        out.push(format!(
            "keywords: [{}] -> [{}]",
            b.keywords.join(", "),
            a.keywords.join(", ")
        ));
    }
    if b.tags != a.tags {
        out.push(format!(
            "tags: [{}] -> [{}]",
            b.tags.join(", "),
            a.tags.join(", ")
        ));
    }
    if b.context != a.context {
        out.push(format!("context: {:?} -> {:?}", b.context, a.context));
    }
    out
}

pub fn proposals(json: bool, items: &[ReviewItem]) {
    if json {
        print_json(&json!({ "items": items }));
        return;
    }
    if items.is_empty() {
        println!("Nothing to review.");
        return;
    }
    for i in items {
        let status = serde_json::to_value(i.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        match i.kind {
            ReviewKind::Link if i.outdated.is_some() => {
                let o = i.outdated.as_ref().map(|o| {
                    (
                        o.superseded.as_str(),
                        o.supersession.as_deref().unwrap_or("gone"),
                    )
                });
                let (old, sup) = o.unwrap_or_default();
                println!(
                    "{}  flag  {:<11} {} may be outdated: {}",
                    i.id,
                    status,
                    i.target.as_deref().unwrap_or("?"),
                    i.reason
                );
                println!(
                    "      the value of {old} was replaced by {} (supersession {sup})",
                    i.note
                );
            }
            ReviewKind::Link => println!(
                "{}  link  {:<11} {} -[{}]-> {}  ({:.2}, {}) {}",
                i.id,
                status,
                i.note,
                i.label,
                i.target.as_deref().unwrap_or("?"),
                i.confidence.unwrap_or(0.0),
                i.by,
                i.reason
            ),
            ReviewKind::Edit => {
                println!(
                    "{}  edit  {:<11} {} ({}, {})",
                    i.id, status, i.note, i.label, i.by
                );
                print_changes(&i.changes);
                for d in diff(i.before.as_ref(), i.after.as_ref()) {
                    println!("      {d}");
                }
            }
        }
    }
}

pub fn reviewed(json: bool, o: &ReviewOutcome) {
    if json {
        print_json(&json!(o));
        return;
    }
    println!(
        "{}: {} ({} revision(s), {} link(s); notes: {})",
        o.action,
        o.target,
        o.revisions,
        o.links,
        if o.notes.is_empty() {
            "none".to_owned()
        } else {
            o.notes.join(", ")
        }
    );
}

/// Each change of an LLM revision with its own reason, one per line.
fn print_changes(changes: &[kasten_engine::Change]) {
    for c in changes {
        let why = if c.reason.is_empty() {
            "(no reason given)"
        } else {
            c.reason.as_str()
        };
        println!("      {} {:?} — {why}", c.op.replace('_', " "), c.value);
    }
}

pub fn history(json: bool, id: &NoteId, entries: &[HistoryEntry]) {
    if json {
        print_json(&json!({ "id": id, "history": entries }));
        return;
    }
    for e in entries {
        let status = e
            .status
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        println!(
            "{}  {:<6} {:<13} {}{}{}",
            e.at.format("%Y-%m-%d %H:%M:%S"),
            e.actor,
            e.action,
            e.id.as_deref().unwrap_or(""),
            status.map(|s| format!(" [{s}]")).unwrap_or_default(),
            if e.reason.is_empty() || e.reason == e.action.as_str() || !e.changes.is_empty() {
                String::new()
            } else {
                format!(" — {}", e.reason)
            }
        );
        print_changes(&e.changes);
        for d in diff(e.before.as_ref(), e.after.as_ref()) {
            println!("      {d}");
        }
        if let (Some(b), Some(a)) = (&e.content_before, &e.content_after) {
            println!("      text:");
            for line in crate::manual::text_diff(b, a) {
                println!("        {line}");
            }
        }
    }
}
