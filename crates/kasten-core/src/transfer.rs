//! What every import format produces, and the chat-transcript format (pure: the caller
//! reads the bytes).
//!
//! An import is a list of [`ImportNote`]s and [`ImportLink`]s between them (by position in
//! that list). The engine decides which notes already exist — a note is the same note when
//! it has the same `source` and the same content, or when it carries the id of a note that
//! exists with that content — so importing the same source twice creates nothing new.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::import::parse_time;
use crate::{LinkStatus, NewNote, NoteId};

/// One note to import.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportNote {
    /// Content, time and source (`source` is what re-imports are recognised by).
    pub note: NewNote,
    /// The id to keep when it is free (a note exported by Kasten carries its id).
    pub id: Option<NoteId>,
    pub keywords: Vec<String>,
    pub tags: Vec<String>,
    pub context: String,
    /// The annotations are final (a Kasten export of an enriched note): no enrichment job.
    pub enriched: bool,
    /// Archived in the memory it was exported from: kept, but out of retrieval.
    pub archived: bool,
    /// Where it came from, for messages (`notes/a.md`, `chat.json message 3`).
    pub origin: String,
    /// The source to record when the note has none and cannot keep the id it carries (a
    /// copy of an exported file, or an edited one, whose id names another note): its own
    /// file (`ROOT/path`), so that importing it again recognises it.
    pub file_source: Option<String>,
}

impl ImportNote {
    /// A plain note (no annotations) from `origin`.
    pub fn plain(note: NewNote, origin: impl Into<String>) -> Self {
        Self {
            note,
            id: None,
            keywords: Vec::new(),
            tags: Vec::new(),
            context: String::new(),
            enriched: false,
            archived: false,
            origin: origin.into(),
            file_source: None,
        }
    }
}

/// A link between two imported notes (indexes into the import's note list).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportLink {
    pub from: usize,
    pub to: usize,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
    pub status: LinkStatus,
}

/// Something wrong with one file or record; the rest of the import goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file (and record) it is about.
    pub origin: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// A parsed chat transcript.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatImport {
    pub notes: Vec<ImportNote>,
    /// Messages that were skipped, and why.
    pub problems: Vec<Problem>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ChatFile {
    List(Vec<serde_json::Value>),
    Wrapped { messages: Vec<serde_json::Value> },
}

/// Parses a chat transcript: a JSON list of `{"role", "content", "time"?}` (also
/// `{"messages": [...]}`, and `content` as a list of `{"type": "text", "text"}` parts).
/// Each message becomes a note `role: content`, with source `FILE:N` (N from 1), so the
/// turns of one transcript form one stream (see [`crate::timeline`]). A bad message is a
/// [`Problem`] and is skipped; a file that is not such a list is an error.
pub fn parse_chat(file_name: &str, bytes: &[u8]) -> Result<ChatImport, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the file is not valid UTF-8 text")?;
    let text = text.trim_start_matches('\u{feff}');
    let file: ChatFile = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a chat transcript ({e}); expected a JSON list of {{\"role\": ..., \"content\": ..., \"time\": ...}}"
        )
    })?;
    let messages = match file {
        ChatFile::List(v) | ChatFile::Wrapped { messages: v } => v,
    };
    let mut out = ChatImport::default();
    for (i, m) in messages.iter().enumerate() {
        let n = i + 1;
        let origin = format!("{file_name} message {n}");
        match chat_message(m) {
            Ok((role, content, time)) => {
                let text = if role.is_empty() {
                    content
                } else {
                    format!("{role}: {content}")
                };
                match NewNote::new(&text) {
                    Ok(note) => out.notes.push(ImportNote::plain(
                        note.at(time).with_source(Some(format!("{file_name}:{n}"))),
                        origin,
                    )),
                    Err(e) => out.problems.push(Problem {
                        origin,
                        message: e.to_string(),
                    }),
                }
            }
            Err(message) => out.problems.push(Problem { origin, message }),
        }
    }
    Ok(out)
}

type Message = (String, String, Option<DateTime<Utc>>);

fn chat_message(m: &serde_json::Value) -> Result<Message, String> {
    let obj = m
        .as_object()
        .ok_or("not an object {\"role\", \"content\", \"time\"}")?;
    let role = obj
        .get("role")
        .or_else(|| obj.get("speaker"))
        .or_else(|| obj.get("author"))
        .and_then(|r| r.as_str())
        .unwrap_or("")
        .trim()
        .to_owned();
    let content = match obj.get("content").or_else(|| obj.get("text")) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                serde_json::Value::String(s) => Some(s.as_str()),
                serde_json::Value::Object(o) => o.get("text").and_then(|t| t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(serde_json::Value::Null) | None => return Err("has no \"content\"".into()),
        Some(_) => return Err("\"content\" is not text".into()),
    };
    if content.trim().is_empty() {
        return Err("the message is empty".into());
    }
    let time = match obj
        .get("time")
        .or_else(|| obj.get("timestamp"))
        .or_else(|| obj.get("created_at"))
    {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(t)) if t.trim().is_empty() => None,
        Some(serde_json::Value::String(t)) => Some(parse_time(t.trim())?),
        Some(serde_json::Value::Number(n)) => {
            // Unix seconds (or milliseconds, when too large to be seconds)
            let secs = n.as_f64().ok_or("\"time\" is not a number")?;
            let ms = if secs.abs() > 1e11 {
                secs
            } else {
                secs * 1000.0
            };
            if !ms.is_finite() || ms.abs() > 8.0e15 {
                return Err(format!("\"time\" {n} is out of range"));
            }
            Some(
                DateTime::<Utc>::from_timestamp_millis(ms as i64)
                    .ok_or_else(|| format!("\"time\" {n} is out of range"))?,
            )
        }
        Some(_) => return Err("\"time\" is neither an RFC 3339 text nor a number".into()),
    };
    Ok((role, content, time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_becomes_one_stream_of_notes() {
        let json = r#"[
            {"role": "user", "content": "I moved to Lisbon in May", "time": "2024-05-03T10:00:00Z"},
            {"role": "assistant", "content": [{"type": "text", "text": "Nice!"}], "time": "2024-05-03T10:00:05Z"},
            {"role": "user", "content": "   "},
            {"role": "user", "content": "bad time", "time": "yesterday"},
            42,
            {"role": "user", "content": "no time at all"}
        ]"#;
        let c = parse_chat("talk.json", json.as_bytes()).expect("parses");
        let contents: Vec<&str> = c.notes.iter().map(|n| n.note.content.as_str()).collect();
        assert_eq!(
            contents,
            vec![
                "user: I moved to Lisbon in May",
                "assistant: Nice!",
                "user: no time at all"
            ]
        );
        assert_eq!(c.notes[1].note.source.as_deref(), Some("talk.json:2"));
        assert_eq!(c.notes[2].note.source.as_deref(), Some("talk.json:6"));
        assert!(c.notes[2].note.created_at.is_none());
        assert_eq!(
            c.notes[0].note.created_at.map(|t| t.to_rfc3339()),
            Some("2024-05-03T10:00:00+00:00".into())
        );
        let origins: Vec<&str> = c.problems.iter().map(|p| p.origin.as_str()).collect();
        assert_eq!(
            origins,
            vec![
                "talk.json message 3",
                "talk.json message 4",
                "talk.json message 5"
            ]
        );
        assert!(c.problems[1].message.contains("yesterday"));
    }

    #[test]
    fn wrapped_messages_and_unix_times_are_accepted() {
        let json = r#"{"messages": [{"role": "user", "content": "hi", "time": 1700000000}]}"#;
        let c = parse_chat("x.json", json.as_bytes()).expect("parses");
        assert_eq!(
            c.notes[0].note.created_at.map(|t| t.timestamp()),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn a_file_that_is_not_a_transcript_is_an_error() {
        assert!(parse_chat("x.json", b"{\"a\": 1}").is_err());
        assert!(parse_chat("x.json", b"\xff\xfe").is_err());
        assert!(parse_chat("x.json", b"[").is_err());
    }
}
