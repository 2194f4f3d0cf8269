//! What a request and an answer are made of: roles, messages, token usage, the
//! structured and plain requests and their answers.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Token counts of one call (or the sum of several, see [`Usage::add`]).
///
/// Taken from the server (`usage` for OpenAI, `prompt_eval_count`/`eval_count` for
/// Ollama). A count the server does not report is estimated as ceil(characters / 4) of the
/// messages' contents (prompt) or of the answer (completion), and `estimated` is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub estimated: bool,
}

impl Usage {
    pub fn total(&self) -> u32 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Adds `other` to `self`; the sum is estimated if either part is.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.estimated |= other.estimated;
    }

    /// The estimate used when the server reports no count: ceil(chars / 4).
    pub fn estimate_tokens(text: &str) -> u32 {
        u32::try_from(text.chars().count().div_ceil(4)).unwrap_or(u32::MAX)
    }

    /// The usage of a call whose counts are not known (a stream stopped early), estimated
    /// from the messages and the answer.
    pub fn estimated(messages: &[Message], answer: &str) -> Self {
        Self::from_counts(None, None, messages, answer)
    }

    pub(super) fn from_counts(
        prompt: Option<u64>,
        completion: Option<u64>,
        messages: &[Message],
        answer: &str,
    ) -> Self {
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Self {
            prompt_tokens: prompt.map(clamp).unwrap_or_else(|| {
                messages
                    .iter()
                    .map(|m| Self::estimate_tokens(&m.content))
                    .sum()
            }),
            completion_tokens: completion
                .map(clamp)
                .unwrap_or_else(|| Self::estimate_tokens(answer)),
            estimated: prompt.is_none() || completion.is_none(),
        }
    }
}

/// A call whose answer must be JSON matching `schema`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructuredRequest {
    pub messages: Vec<Message>,
    pub schema_name: String,
    /// A JSON schema; sent as `response_format` (OpenAI) or `format` (Ollama).
    pub schema: Value,
    pub temperature: f32,
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StructuredResponse {
    pub value: Value,
    /// Summed over the first answer and the repair, if there was one.
    pub usage: Usage,
    /// HTTP requests made, including retries and the repair request.
    pub attempts: u32,
    /// Whether the value came from the repair request.
    pub repaired: bool,
    pub model: String,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: Option<u32>,
    /// A GBNF grammar the built-in model's answer must follow (servers ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub usage: Usage,
    pub model: String,
}

/// A validator for structured answers: `Err` says, in words the model can act on, what is
/// wrong with the value.
pub type Validator<'a> = dyn Fn(&Value) -> Result<(), String> + Send + Sync + 'a;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_estimates_and_sums() {
        let msgs = [Message::system("abcd"), Message::user("abcde")];
        let u = Usage::from_counts(None, Some(7), &msgs, "xyz");
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 1 + 2,
                completion_tokens: 7,
                estimated: true
            }
        );
        let mut s = Usage::from_counts(Some(10), Some(5), &msgs, "");
        assert!(!s.estimated);
        s.add(&u);
        assert_eq!(
            (s.prompt_tokens, s.completion_tokens, s.estimated, s.total()),
            (13, 12, true, 25)
        );
    }
}
