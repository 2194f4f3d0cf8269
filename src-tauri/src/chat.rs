//! Chat over the memory: the question, the streamed answer and its citations.

use kasten_engine::ChatTurn;
use serde::{Deserialize, Serialize};
use specta::Type;
use tauri::State;
use tauri::ipc::Channel;

use crate::dto::{PREVIEW_CHARS, preview};
use crate::error::AppResult;
use crate::state::AppState;

/// One earlier exchange, for follow-up questions.
#[derive(Debug, Clone, Serialize, Deserialize, Type)]
pub struct ChatTurnDto {
    pub question: String,
    pub answer: String,
}

/// A cited note: `[n]` in the answer is the note with this `n`.
#[derive(Debug, Clone, Serialize, Type)]
pub struct CitationDto {
    pub n: u32,
    pub id: String,
    pub preview: String,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct AnswerDto {
    pub answer: String,
    /// The notes the answer cites, in order of first citation, with their `[n]`.
    pub citations: Vec<CitationDto>,
    /// The model cited no note: `citations` are the notes the answer's words come from
    /// (the answer has no `[n]`).
    pub citations_inferred: bool,
    /// The memory holds nothing that answers the question.
    pub not_in_memory: bool,
    /// The question needed no retrieval (e.g. a greeting).
    pub skipped_retrieval: bool,
}

/// Answers from memory, streaming the answer's tokens to `on_token` as they arrive. With
/// `as_of` (a day, `YYYY-MM-DD`), as the memory stood that day.
#[tauri::command]
#[specta::specta]
pub async fn ask(
    state: State<'_, AppState>,
    question: String,
    history: Vec<ChatTurnDto>,
    as_of: Option<String>,
    on_token: Channel<String>,
) -> AppResult<AnswerDto> {
    let options = kasten_engine::AskOptions {
        as_of: crate::commands::as_of_day(as_of)?,
        ..Default::default()
    };
    let turns: Vec<ChatTurn> = history
        .into_iter()
        .flat_map(|t| {
            [
                ChatTurn {
                    role: "user".into(),
                    content: t.question,
                },
                ChatTurn {
                    role: "assistant".into(),
                    content: t.answer,
                },
            ]
        })
        .collect();
    let send = |t: &str| {
        let _ = on_token.send(t.to_owned());
    };
    let a = state
        .engine()
        .await?
        .ask_with(&question, &turns, &options, &send)
        .await?;
    Ok(AnswerDto {
        not_in_memory: a.not_in_memory,
        skipped_retrieval: matches!(a.retrieval, kasten_engine::Retrieval::Skipped { .. }),
        citations_inferred: a.citations_inferred,
        citations: a
            .cited_notes()
            .into_iter()
            .map(|n| CitationDto {
                n: u32::try_from(n.n).unwrap_or(u32::MAX),
                id: n.id.to_string(),
                preview: preview(&n.content, PREVIEW_CHARS),
            })
            .collect(),
        answer: a.answer,
    })
}
