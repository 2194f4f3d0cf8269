//! The IPC commands. Each is a short delegation to the engine plus a conversion to the
//! typed shapes in `dto.rs`. Lists are paged: no command returns the whole memory.

use std::collections::HashMap;

use kasten_core::{NewNote, NoteId, ReviewKind};
use kasten_engine::NoteFilter;
use kasten_engine::ReviewStatus;
use tauri::{AppHandle, State};

use crate::dto::*;
use crate::error::{AppError, AppResult};
use crate::events::StatusEvent;
use crate::settings::{self, SaveOutcome, SettingsDto, SettingsInput};
use crate::state::AppState;

/// Most items one page may carry.
pub const MAX_PAGE: u32 = 500;
/// Most graph elements one page may carry.
pub const MAX_GRAPH_PAGE: u32 = 5000;
/// Who the app acts as in the audit history.
const ACTOR: &str = kasten_core::Actor::User.as_str();

fn page(limit: u32, max: u32) -> usize {
    limit.clamp(1, max) as usize
}

fn note_id(s: &str) -> AppResult<NoteId> {
    NoteId::parse(s).map_err(|_| AppError::NotFound(format!("there is no note {s}")))
}

/// Previews of these notes' content, by id.
async fn previews(
    engine: &kasten_engine::Engine,
    ids: impl IntoIterator<Item = String>,
) -> AppResult<HashMap<String, String>> {
    let mut v: Vec<NoteId> = ids
        .into_iter()
        .filter_map(|s| NoteId::parse(&s).ok())
        .collect();
    v.sort_by_key(|a| a.to_string());
    v.dedup();
    let notes = engine.get_notes(&v).await?;
    Ok(notes
        .into_iter()
        .map(|n| (n.id.to_string(), preview(&n.content, PREVIEW_CHARS)))
        .collect())
}

/// The status bar's figures (the same as the `StatusEvent` pushes).
#[tauri::command]
#[specta::specta]
pub async fn app_status(state: State<'_, AppState>) -> AppResult<StatusEvent> {
    Ok(crate::status::status_of(&state).await)
}

/// Saves a note (embedded and searchable at once) and wakes the enrichment worker. A
/// note saved while the memory is still opening is written as soon as it is open.
#[tauri::command]
#[specta::specta]
pub async fn add_note(state: State<'_, AppState>, content: String) -> AppResult<NoteDto> {
    add_note_to(&state, content).await
}

pub(crate) async fn add_note_to(state: &AppState, content: String) -> AppResult<NoteDto> {
    let new = NewNote::new(&content).map_err(|e| AppError::Invalid(e.to_string()))?;
    let note = state.engine_when_open().await?.add(new).await?;
    state.kick.notify_one();
    Ok(note.into())
}

/// A page of notes, newest first, with filters. With `as_of` (a day, `YYYY-MM-DD`), only
/// the notes whose value had taken effect by then, as search shows them.
#[tauri::command]
#[specta::specta]
pub async fn list_notes(
    state: State<'_, AppState>,
    filter: NoteFilterInput,
    offset: u32,
    limit: u32,
    as_of: Option<String>,
) -> AppResult<NotesPage> {
    let as_of = as_of_day(as_of)?;
    let engine = state.engine().await?;
    let f = note_filter(&engine, filter).await?;
    let (total, notes) = engine
        .notes_page_as_of(&f, page(limit, MAX_PAGE), offset as usize, as_of)
        .await?;
    Ok(NotesPage {
        total: clamp_u32(total),
        offset,
        notes: notes.into_iter().map(Into::into).collect(),
    })
}

/// The engine's filter for the app's: a Box becomes its members.
async fn note_filter(
    engine: &kasten_engine::Engine,
    filter: NoteFilterInput,
) -> AppResult<NoteFilter> {
    let ids = match filter.box_id.filter(|b| !b.is_empty()) {
        Some(b) => Some(crate::boxes::members(engine, &b).await?),
        None => None,
    };
    Ok(NoteFilter {
        tag: filter.tag.filter(|t| !t.is_empty()),
        enrich_state: filter.enrich,
        ids,
    })
}

/// Hybrid search (vector + keyword + links), best first, among the notes the filter admits.
/// A note a newer one replaced ranks below it and says so. With `as_of` (a day,
/// `YYYY-MM-DD`), what was current then: notes not yet valid that day are left out.
#[tauri::command]
#[specta::specta]
pub async fn search_notes(
    state: State<'_, AppState>,
    query: String,
    k: u32,
    filter: NoteFilterInput,
    as_of: Option<String>,
) -> AppResult<Vec<HitDto>> {
    let as_of = as_of_day(as_of)?;
    let engine = state.engine().await?;
    let f = note_filter(&engine, filter).await?;
    let out = engine
        .search_filtered_as_of(&query, page(k, 100), &f, as_of)
        .await?;
    let pv = previews(
        &engine,
        out.hits
            .iter()
            .filter_map(|h| h.superseded_by.as_ref().map(|s| s.id.to_string())),
    )
    .await?;
    Ok(out
        .hits
        .into_iter()
        .map(|h| {
            let p = h
                .superseded_by
                .as_ref()
                .and_then(|s| pv.get(s.id.as_str()).cloned());
            HitDto::new(h, p)
        })
        .collect())
}

/// The app's "as of" day: `YYYY-MM-DD`, or none (empty too) for today.
pub(crate) fn as_of_day(s: Option<String>) -> AppResult<Option<chrono::NaiveDate>> {
    s.map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty())
        .map(|d| {
            kasten_core::validity::parse_day(&d)
                .map_err(|e| AppError::Invalid(format!("as of: {e}")))
        })
        .transpose()
}

/// A note with its links (and previews of the notes at their other ends) and its history.
#[tauri::command]
#[specta::specta]
pub async fn get_note(state: State<'_, AppState>, id: String) -> AppResult<NoteDetailDto> {
    let engine = state.engine().await?;
    let nid = note_id(&id)?;
    let detail = engine.open_note(&nid).await?;
    let history = engine.history(&nid).await?;
    let others = detail.links.iter().map(|l| {
        if l.from == nid {
            l.to.to_string()
        } else {
            l.from.to_string()
        }
    });
    let successor = detail.superseded_by.as_ref().map(|s| s.id.to_string());
    let pv = previews(&engine, others.chain(successor)).await?;
    // the notes this one replaced: its accepted `supersedes` links
    let replaces = detail
        .links
        .iter()
        .filter(|l| {
            l.from == nid
                && l.kind == kasten_engine::SUPERSEDES
                && l.status == kasten_core::LinkStatus::Accepted
        })
        .map(|l| ReplacedDto {
            id: l.to.to_string(),
            reason: l.reason.clone(),
            preview: pv.get(l.to.as_str()).cloned().unwrap_or_default(),
        })
        .collect();
    let superseded_by = detail.superseded_by.clone().map(|s| {
        let p = pv.get(s.id.as_str()).cloned().unwrap_or_default();
        superseded_by_dto(s, p)
    });
    let validity = ValidityDto::new(
        detail.valid_from,
        detail.valid_until,
        superseded_by,
        replaces,
    );
    let links = detail
        .links
        .into_iter()
        .map(|l| {
            let other = if l.from == nid {
                l.to.to_string()
            } else {
                l.from.to_string()
            };
            link_dto(l, pv.get(&other).cloned().unwrap_or_default())
        })
        .collect();
    Ok(NoteDetailDto {
        note: detail.note.into(),
        links,
        history: history.into_iter().map(Into::into).collect(),
        validity,
    })
}

/// Changes a note's keywords, tags or context (a versioned user edit; content never changes).
#[tauri::command]
#[specta::specta]
pub async fn edit_note(
    state: State<'_, AppState>,
    id: String,
    fields: FieldsInput,
) -> AppResult<OutcomeDto> {
    let engine = state.engine().await?;
    Ok(engine
        .edit_note(&note_id(&id)?, &fields.into(), ACTOR, "edited in the app")
        .await?
        .into())
}

/// Deletes a note and its links.
#[tauri::command]
#[specta::specta]
pub async fn delete_note(state: State<'_, AppState>, id: String) -> AppResult<()> {
    Ok(state.engine().await?.delete(&note_id(&id)?).await?)
}

/// The most used tags (for the filter).
#[tauri::command]
#[specta::specta]
pub async fn list_tags(state: State<'_, AppState>, limit: u32) -> AppResult<Vec<TagCount>> {
    let tags = state
        .engine()
        .await?
        .tag_counts(page(limit, MAX_PAGE))
        .await?;
    Ok(tags
        .into_iter()
        .map(|(tag, n)| TagCount {
            tag,
            n: clamp_u32(n),
        })
        .collect())
}

/// One page of the whole graph's nodes, in id order after `after`.
#[tauri::command]
#[specta::specta]
pub async fn graph_nodes(
    state: State<'_, AppState>,
    after: Option<String>,
    limit: u32,
) -> AppResult<GraphPage> {
    let after = after.map(|a| note_id(&a)).transpose()?;
    let limit = page(limit, MAX_GRAPH_PAGE);
    let engine = state.engine().await?;
    let rows = engine.graph_nodes(after.as_ref(), limit).await?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|r| r.id.clone()))
        .flatten();
    Ok(GraphPage {
        nodes: graph_nodes_of(&engine, rows).await?,
        links: vec![],
        next,
    })
}

/// Graph nodes with their Boxes and their strength now (one query for the page).
async fn graph_nodes_of(
    engine: &kasten_engine::Engine,
    rows: Vec<kasten_engine::GraphNode>,
) -> AppResult<Vec<GraphNodeDto>> {
    let boxes = crate::boxes::membership(engine).await?;
    let ids: Vec<NoteId> = rows
        .iter()
        .filter_map(|r| NoteId::parse(&r.id).ok())
        .collect();
    let strength = engine.strength_now(&ids).await?;
    Ok(rows
        .into_iter()
        .map(|r| graph_node(r, &boxes, &strength))
        .collect())
}

/// One page of the whole graph's links (proposed and accepted), after the link id `after`.
#[tauri::command]
#[specta::specta]
pub async fn graph_links(
    state: State<'_, AppState>,
    after: Option<String>,
    limit: u32,
) -> AppResult<GraphPage> {
    let limit = page(limit, MAX_GRAPH_PAGE);
    let rows = state
        .engine()
        .await?
        .graph_links(after.as_deref(), limit)
        .await?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|r| r.id.clone()))
        .flatten();
    Ok(GraphPage {
        nodes: vec![],
        links: rows.into_iter().map(Into::into).collect(),
        next,
    })
}

/// A note's neighbourhood to `depth` (1–3) hops, at most 2,000 notes.
#[tauri::command]
#[specta::specta]
pub async fn local_graph(
    state: State<'_, AppState>,
    id: String,
    depth: u32,
) -> AppResult<LocalGraphDto> {
    let engine = state.engine().await?;
    let g = engine
        .local_graph(&note_id(&id)?, depth.clamp(1, 3), 2000)
        .await?;
    Ok(LocalGraphDto {
        nodes: graph_nodes_of(&engine, g.nodes).await?,
        links: g.links.into_iter().map(Into::into).collect(),
        truncated: g.truncated,
    })
}

/// The review queue (default: proposed and applied, newest first), a page at a time;
/// with `by`, only what one maker made (`llm`, `merge`, `agent` for every agent,
/// `agent:<name>`).
#[tauri::command]
#[specta::specta]
pub async fn review_queue(
    state: State<'_, AppState>,
    statuses: Vec<ReviewStatus>,
    offset: u32,
    limit: u32,
    by: Option<String>,
) -> AppResult<ReviewPage> {
    let engine = state.engine().await?;
    let wanted = statuses;
    let limit = page(limit, MAX_PAGE);
    let mut items = engine
        .proposals_by(&wanted, by.as_deref(), offset as usize + limit + 1)
        .await?;
    let agents = engine.review_agents().await?;
    let items: Vec<_> = items.drain(..).skip(offset as usize).collect();
    let more = items.len() > limit;
    let items: Vec<_> = items.into_iter().take(limit).collect();
    let pv = previews(
        &engine,
        items
            .iter()
            .flat_map(|i| std::iter::once(i.note.clone()).chain(i.target.clone())),
    )
    .await?;
    let mut out = Vec::with_capacity(items.len());
    for i in items {
        let np = pv.get(&i.note).cloned().unwrap_or_default();
        let tp = i
            .target
            .as_ref()
            .map(|t| pv.get(t).cloned().unwrap_or_default());
        let supersession = i.kind == ReviewKind::Link && i.label == kasten_engine::SUPERSEDES;
        let ends = (i.note.clone(), i.target.clone());
        let d = review_dto(i, np, tp);
        out.push(if supersession {
            // when each side's value took effect, shown beside it
            with_validity(
                d,
                valid_from(&engine, Some(&ends.0)).await?,
                valid_from(&engine, ends.1.as_ref()).await?,
            )
        } else {
            d
        });
    }
    Ok(ReviewPage {
        items: out,
        more,
        agents,
    })
}

/// When a note's fact became true; none for a note that is gone (or no note).
async fn valid_from(
    engine: &kasten_engine::Engine,
    id: Option<&String>,
) -> AppResult<Option<chrono::DateTime<chrono::Utc>>> {
    let Some(id) = id.and_then(|s| NoteId::parse(s).ok()) else {
        return Ok(None);
    };
    match engine.get(&id).await {
        Ok(d) => Ok(Some(d.valid_from)),
        Err(kasten_engine::EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Accepts a link or edit (an edit optionally adjusted first).
#[tauri::command]
#[specta::specta]
pub async fn review_accept(
    state: State<'_, AppState>,
    id: String,
    edit: Option<FieldsInput>,
) -> AppResult<OutcomeDto> {
    let engine = state.engine().await?;
    Ok(engine
        .accept(&id, &edit.unwrap_or_default().into(), ACTOR)
        .await?
        .into())
}

/// Rejects a link or edit (an applied one is rolled back).
#[tauri::command]
#[specta::specta]
pub async fn review_reject(state: State<'_, AppState>, id: String) -> AppResult<OutcomeDto> {
    Ok(state.engine().await?.reject(&id, ACTOR).await?.into())
}

/// Settles a supersession proposal as "both stay true": the two notes do not conflict;
/// the proposal is rejected and the pair is never proposed again.
#[tauri::command]
#[specta::specta]
pub async fn review_both_true(state: State<'_, AppState>, id: String) -> AppResult<OutcomeDto> {
    Ok(state.engine().await?.keep_both(&id, ACTOR).await?.into())
}

/// Rolls back a revision, a link, or a whole event, exactly.
#[tauri::command]
#[specta::specta]
pub async fn review_rollback(state: State<'_, AppState>, id: String) -> AppResult<OutcomeDto> {
    Ok(state.engine().await?.rollback(&id, ACTOR).await?.into())
}

/// Applies a rolled-back event again.
#[tauri::command]
#[specta::specta]
pub async fn review_reapply(state: State<'_, AppState>, id: String) -> AppResult<OutcomeDto> {
    Ok(state.engine().await?.reapply(&id, ACTOR).await?.into())
}

/// Accepts every waiting link at or above `min_confidence`, in one transaction.
#[tauri::command]
#[specta::specta]
pub async fn review_bulk_accept(
    state: State<'_, AppState>,
    min_confidence: f64,
) -> AppResult<BulkOutcome> {
    let accepted = state
        .engine()
        .await?
        .accept_links_above(min_confidence, ACTOR)
        .await?;
    Ok(BulkOutcome {
        accepted: u32::try_from(accepted).unwrap_or(u32::MAX),
        failed: vec![],
    })
}

/// Recent enrichment events (one per enriched note), newest first.
#[tauri::command]
#[specta::specta]
pub async fn list_events(state: State<'_, AppState>, limit: u32) -> AppResult<Vec<EventDto>> {
    let engine = state.engine().await?;
    let evs = engine.events(page(limit, MAX_PAGE)).await?;
    let pv = previews(&engine, evs.iter().map(|e| e.note.clone())).await?;
    let n = |x: i64| u32::try_from(x.max(0)).unwrap_or(u32::MAX);
    Ok(evs
        .into_iter()
        .map(|e| EventDto {
            note_preview: pv.get(&e.note).cloned().unwrap_or_default(),
            id: e.id,
            note: e.note,
            model: e.model,
            tokens: n(e.tokens_in + e.tokens_out),
            links: n(e.links),
            revisions: n(e.revisions),
            dropped: n(e.dropped + e.unknown_handles),
            created_at: e
                .created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
        .collect())
}

/// Queues failed enrichment jobs again and wakes the worker.
#[tauri::command]
#[specta::specta]
pub async fn retry_failed(state: State<'_, AppState>) -> AppResult<u32> {
    let n = state.engine().await?.retry_failed().await?;
    state.kick.notify_one();
    Ok(clamp_u32(n))
}

/// Imports a Markdown folder or Obsidian vault, one Markdown file, a chat transcript
/// (`chat`: a JSON list of `{role, content, time}`) or JSON Lines (`jsonl`) from a path on
/// this computer. Importing the same source again adds nothing.
#[tauri::command]
#[specta::specta]
pub async fn import_path(
    state: State<'_, AppState>,
    path: String,
    format: String,
    on_progress: tauri::ipc::Channel<ImportProgressDto>,
) -> AppResult<ImportResultDto> {
    let path = std::path::PathBuf::from(path.trim());
    let plan = match format.as_str() {
        "markdown" => kasten_engine::files::plan_markdown(&path, 256)?,
        "chat" => kasten_engine::files::plan_chat(&path, 256)?,
        "jsonl" => kasten_engine::files::plan_jsonl(&path, 256)?,
        other => {
            return Err(AppError::Invalid(format!(
                "unknown import format '{other}': use markdown, chat or jsonl"
            )));
        }
    };
    let report = |p: kasten_engine::ImportProgress| {
        let (phase, done, total) = match p {
            kasten_engine::ImportProgress::Notes { done, total } => {
                (ImportPhase::Notes, done, total)
            }
            kasten_engine::ImportProgress::Links { done, total } => {
                (ImportPhase::Links, done, total)
            }
        };
        let _ = on_progress.send(ImportProgressDto {
            phase,
            done: clamp_u32(done),
            total: clamp_u32(total),
        });
    };
    let summary = state
        .engine()
        .await?
        .import_notes(plan.notes, &plan.links, plan.batch, &report)
        .await?;
    state.kick.notify_one();
    let said = |v: &[kasten_core::transfer::Problem]| -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    };
    Ok(ImportResultDto {
        created: clamp_u32(summary.created),
        existing: clamp_u32(summary.existing),
        links_created: clamp_u32(summary.links_created),
        attachments_skipped: clamp_u32(plan.attachments as u64),
        problems: said(&plan.problems),
        warnings: said(&plan.warnings)
            .into_iter()
            .chain(summary.new_ids.iter().map(ToString::to_string))
            .collect(),
    })
}

/// Imports the sample notebook (17 notes, 6 of them in Chinese) into the memory.
#[tauri::command]
#[specta::specta]
pub async fn load_sample_notebook(state: State<'_, AppState>) -> AppResult<u32> {
    let (records, _) =
        kasten_core::import::parse_jsonl(include_str!("../../assets/sample-notes.jsonl"));
    let notes: Vec<NewNote> = records
        .into_iter()
        .map(|r| r.note.with_source(Some("import:sample-notebook".into())))
        .collect();
    let added = state.engine_when_open().await?.add_batch(notes).await?;
    state.kick.notify_one();
    Ok(clamp_u32(added.notes.len() as u64))
}

#[tauri::command]
#[specta::specta]
pub async fn get_settings(state: State<'_, AppState>) -> AppResult<SettingsDto> {
    settings::load(&*state.engine().await?).await
}

/// Saves the settings; the LLM client is rebuilt before the next enrichment pass.
#[tauri::command]
#[specta::specta]
pub async fn save_settings(
    app: AppHandle,
    state: State<'_, AppState>,
    input: SettingsInput,
) -> AppResult<SaveOutcome> {
    let engine = state.engine().await?;
    let warning = settings::save(&engine, &input).await?;
    let settings = settings::load(&engine).await?;
    drop(engine);
    crate::worker::llm_settings_changed(&app, &state).await;
    Ok(SaveOutcome { settings, warning })
}

/// Asks the server for its models with these settings (unsaved); returns what it listed.
#[tauri::command]
#[specta::specta]
pub async fn test_connection(
    state: State<'_, AppState>,
    input: SettingsInput,
) -> AppResult<Vec<String>> {
    settings::validate(&input)?;
    let key = settings::key_for_test(&*state.engine().await?, input.api_key.clone()).await?;
    let client = settings::client_for(&input, key)?
        .ok_or_else(|| AppError::Invalid("enter a base URL and a model first".into()))?;
    match client.ping().await {
        Ok(models) => {
            state.set_llm(Some(true), "connected");
            Ok(models)
        }
        Err(e) => Err(AppError::Llm(format!(
            "the server did not answer as expected: {e}"
        ))),
    }
}

/// Charts: notes, links and tokens per day (last 90 days), top tags, Box sizes.
#[tauri::command]
#[specta::specta]
pub async fn insights(state: State<'_, AppState>) -> AppResult<InsightsDto> {
    let engine = state.engine().await?;
    let since = chrono::Utc::now() - chrono::Duration::days(90);
    let d = engine.daily(since).await?;
    let day = |v: Vec<kasten_engine::DayCount>| {
        v.into_iter()
            .map(|c| DayDto {
                day: c.day,
                n: u32::try_from(c.n.max(0)).unwrap_or(u32::MAX),
                tokens: u32::try_from(c.tokens.max(0)).unwrap_or(u32::MAX),
            })
            .collect()
    };
    let top_tags = engine
        .tag_counts(12)
        .await?
        .into_iter()
        .map(|(tag, n)| TagCount {
            tag,
            n: clamp_u32(n),
        })
        .collect();
    Ok(InsightsDto {
        notes_per_day: day(d.notes),
        links_per_day: day(d.links),
        tokens_per_day: day(d.tokens),
        top_tags,
        boxes: crate::boxes::list(&engine, 12).await?,
        total_notes: clamp_u32(engine.count().await?),
    })
}

/// The Boxes (clusters of linked notes), largest first, with their sizes.
#[tauri::command]
#[specta::specta]
pub async fn list_boxes(state: State<'_, AppState>, limit: u32) -> AppResult<Vec<BoxDto>> {
    crate::boxes::list(&*state.engine().await?, page(limit, MAX_PAGE)).await
}
