//! Parsing of import files (pure: the caller reads the bytes).
//!
//! JSON Lines: one object per line, `{"content": "...", "time"?: RFC 3339, "source"?: "..."}`.
//! Blank lines are skipped. Every bad line is reported with its number, so a user can fix
//! the file; the caller decides whether to stop or to skip them (nothing is half-imported).

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::NewNote;

/// One problem in an import file, by 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlRecord {
    content: String,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    source: Option<String>,
}

/// A parsed record with the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRecord {
    pub line: usize,
    pub note: NewNote,
}

/// Parses a whole JSON Lines file. Returns the good records and the bad lines.
pub fn parse_jsonl(text: &str) -> (Vec<ImportRecord>, Vec<LineError>) {
    parse_jsonl_bytes(text.as_bytes())
}

/// Like [`parse_jsonl`] for raw bytes: a line that is not UTF-8 is a bad line, never a
/// reason to drop or mangle the rest of the file.
pub fn parse_jsonl_bytes(bytes: &[u8]) -> (Vec<ImportRecord>, Vec<LineError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let Ok(raw) = std::str::from_utf8(raw) else {
            bad.push(LineError {
                line,
                message: "not valid UTF-8 text".into(),
            });
            continue;
        };
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        match parse_line(raw) {
            Ok(note) => ok.push(ImportRecord { line, note }),
            Err(message) => bad.push(LineError { line, message }),
        }
    }
    (ok, bad)
}

/// Reads a JSON Lines file a line at a time, with the same rules as
/// [`parse_jsonl_bytes`] (1-based line numbers, blank lines skipped, a line that is not
/// UTF-8 is a bad line): for files too large to hold. Each item is a record or a bad line;
/// an error reading the file ends it.
pub struct JsonlLines<R> {
    reader: R,
    line: usize,
    buf: Vec<u8>,
}

impl<R: std::io::BufRead> JsonlLines<R> {
    pub fn new(reader: R) -> Self {
        JsonlLines {
            reader,
            line: 0,
            buf: Vec::new(),
        }
    }
}

impl<R: std::io::BufRead> Iterator for JsonlLines<R> {
    type Item = std::io::Result<Result<ImportRecord, LineError>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            match self.reader.read_until(b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
            self.line += 1;
            let line = self.line;
            let raw = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
            let Ok(raw) = std::str::from_utf8(raw) else {
                return Some(Ok(Err(LineError {
                    line,
                    message: "not valid UTF-8 text".into(),
                })));
            };
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            return Some(Ok(match parse_line(raw) {
                Ok(note) => Ok(ImportRecord { line, note }),
                Err(message) => Err(LineError { line, message }),
            }));
        }
    }
}

fn parse_line(raw: &str) -> Result<NewNote, String> {
    let rec: JsonlRecord = serde_json::from_str(raw).map_err(|e| {
        // serde's message names the column; the line is added by the caller
        format!(
            "not a valid record ({e}); expected {{\"content\": \"...\", \"time\": \"RFC 3339\"}}"
        )
    })?;
    let time = match rec.time.as_deref() {
        None | Some("") => None,
        Some(t) => Some(parse_time(t)?),
    };
    let note = NewNote::new(&rec.content).map_err(|e| e.to_string())?;
    Ok(note.at(time).with_source(rec.source))
}

/// Parses an RFC 3339 timestamp (also accepting a plain date, taken as midnight UTC).
pub fn parse_time(t: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.with_timezone(&Utc));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d")
        && let Some(dt) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(dt.and_utc());
    }
    Err(format!(
        "'{t}' is not an RFC 3339 time (e.g. 2024-05-01T14:30:00Z)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming reader tells the same records and bad lines apart as the whole-file
    /// parser, line numbers included.
    #[test]
    fn lines_read_one_at_a_time_match_the_whole_file() {
        let text = b"{\"content\": \"one\"}\n\n\xff\xfe\n{\"content\": \"two\", \"time\": \"2023-05-08\"}\r\nnot json\n{\"content\": \"last, no newline\"}";
        let (ok, bad) = parse_jsonl_bytes(text);
        let (mut ok2, mut bad2) = (Vec::new(), Vec::new());
        for item in JsonlLines::new(&text[..]) {
            match item {
                Ok(Ok(r)) => ok2.push(r),
                Ok(Err(e)) => bad2.push(e),
                Err(e) => panic!("reading from memory failed: {e}"),
            }
        }
        assert_eq!(ok2, ok);
        assert_eq!(bad2, bad);
        assert_eq!(ok.len(), 3);
        assert_eq!(bad.iter().map(|e| e.line).collect::<Vec<_>>(), vec![3, 5]);
    }

    #[test]
    fn good_and_bad_lines_are_told_apart_by_line_number() {
        let text = "{\"content\": \"one\"}\n\n{\"content\": \"two\", \"time\": \"2023-05-08T13:56:00Z\"}\n{\"content\": \nnot json\n{\"content\": \"  \"}\n{\"content\": \"x\", \"time\": \"yesterday\"}\n{\"text\": \"wrong field\"}\n";
        let (ok, bad) = parse_jsonl(text);
        assert_eq!(ok.iter().map(|r| r.line).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(
            ok[1].note.created_at.map(|t| t.to_rfc3339()),
            Some("2023-05-08T13:56:00+00:00".into())
        );
        assert_eq!(
            bad.iter().map(|e| e.line).collect::<Vec<_>>(),
            vec![4, 5, 6, 7, 8]
        );
        assert!(bad[2].message.contains("empty"), "{}", bad[2]);
        assert!(bad[3].message.contains("yesterday"));
        assert!(bad[0].to_string().starts_with("line 4:"));
    }

    #[test]
    fn invalid_utf8_is_reported_per_line() {
        let bytes = b"{\"content\": \"a\"}\n\xff\xfe\n{\"content\": \"b\"}\r\n";
        let (ok, bad) = parse_jsonl_bytes(bytes);
        assert_eq!(ok.len(), 2);
        assert_eq!(
            bad,
            vec![LineError {
                line: 2,
                message: "not valid UTF-8 text".into()
            }]
        );
    }

    #[test]
    fn dates_without_time_are_accepted() {
        assert_eq!(
            parse_time("2024-01-02").map(|t| t.to_rfc3339()),
            Ok("2024-01-02T00:00:00+00:00".into())
        );
    }
}
