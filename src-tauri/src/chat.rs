//! Chat over the memory: the question, the streamed answer and its citations.

use serde::{Deserialize, Serialize};
use specta::Type;
use tauri::State;
use tauri::ipc::Channel;

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// One earlier exchange, for follow-up questions.
#[derive(Debug, Clone, Serialize, Deserialize, Type)]
pub struct ChatTurnDto {
    pub question: String,
    pub answer: String,
}

/// A cited note: `[n]` in the answer is `citations[n - 1]`.
#[derive(Debug, Clone, Serialize, Type)]
pub struct CitationDto {
    pub n: u32,
    pub id: String,
    pub preview: String,
}

#[derive(Debug, Clone, Serialize, Type)]
pub struct AnswerDto {
    pub answer: String,
    pub citations: Vec<CitationDto>,
    /// The memory holds nothing that answers the question.
    pub not_in_memory: bool,
    /// The question needed no retrieval (e.g. a greeting).
    pub skipped_retrieval: bool,
}

/// Answers from memory, streaming the answer's tokens to `on_token` as they arrive.
#[tauri::command]
#[specta::specta]
pub async fn ask(
    state: State<'_, AppState>,
    question: String,
    history: Vec<ChatTurnDto>,
    on_token: Channel<String>,
) -> AppResult<AnswerDto> {
    let _engine = state.engine().await?;
    let _ = (question, history, on_token);
    Err(AppError::Unavailable(
        "chat is not available in this build yet".into(),
    ))
}
