//! Tolerant JSON extraction from model output.
//!
//! Small local models wrap JSON in code fences or prose. [`parse_json_lenient`] finds the
//! JSON without guessing at repairs: a trailing comma or an unquoted key is an error, so
//! the repair request (or the user) sees what was actually wrong.

use serde_json::Value;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("the answer is empty")]
    Empty,
    #[error("the answer contains no JSON object or array")]
    NoJson,
    #[error(
        "the JSON is cut off: it ends with {unclosed} unclosed bracket(s){}",
        if *in_string { " inside a string" } else { "" }
    )]
    Truncated { unclosed: usize, in_string: bool },
    #[error("the JSON is malformed: {0}")]
    Malformed(String),
}

/// Parses model output that should be JSON. Accepts, in order: the whole text as JSON;
/// the first ```` ``` ```` fenced block (with or without a language tag); the first
/// balanced top-level `{...}` or `[...]` in the text (brackets inside strings and escaped
/// quotes are respected). A balanced candidate that does not parse is skipped as a whole
/// (its inner objects are never taken for the answer); if nothing parses, the error of the
/// longest candidate is returned.
pub fn parse_json_lenient(text: &str) -> Result<Value, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    match fenced(text).map(scan) {
        Some(Ok(v)) => Ok(v),
        Some(Err(fenced_err)) => scan(text).map_err(|whole_err| {
            if fenced_err == ParseError::NoJson {
                whole_err
            } else {
                fenced_err
            }
        }),
        None => scan(text),
    }
}

/// The content of the first fenced block (to the closing fence or the end of the text).
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")? + 3;
    let rest = text.get(start..)?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let end = rest.find("```").unwrap_or(rest.len());
    rest.get(..end)
}

fn scan(text: &str) -> Result<Value, ParseError> {
    let bytes = text.as_bytes();
    let mut best: Option<(usize, ParseError)> = None;
    let mut from = 0;
    while let Some(off) = bytes
        .get(from..)
        .and_then(|b| b.iter().position(|&c| c == b'{' || c == b'['))
    {
        let start = from + off;
        let (len, err) = match balanced_len(bytes.get(start..).unwrap_or_default()) {
            Ok(len) => match text
                .get(start..start + len)
                .map(serde_json::from_str::<Value>)
            {
                Some(Ok(v)) => return Ok(v),
                Some(Err(e)) => (len, ParseError::Malformed(e.to_string())),
                None => (len, ParseError::Malformed("invalid text boundary".into())),
            },
            // unbalanced to the end: cut off, unless it already breaks before the end
            Err(truncated) => match text.get(start..).map(serde_json::from_str::<Value>) {
                Some(Err(e)) if !e.is_eof() => {
                    (bytes.len() - start, ParseError::Malformed(e.to_string()))
                }
                _ => (bytes.len() - start, truncated),
            },
        };
        if best.as_ref().is_none_or(|(l, _)| len > *l) {
            best = Some((len, err));
        }
        from = start + len;
    }
    Err(best.map_or(ParseError::NoJson, |(_, e)| e))
}

/// Length of the bracketed value at the start of `b` (which starts with `{` or `[`), up to
/// its matching closer, or up to a mismatched closer (serde then says what is wrong).
fn balanced_len(b: &[u8]) -> Result<usize, ParseError> {
    let mut stack = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for (i, &c) in b.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                let matched = stack.pop() == Some(c);
                if !matched || stack.is_empty() {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
    }
    Err(ParseError::Truncated {
        unclosed: stack.len(),
        in_string,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(s: &str) -> Value {
        parse_json_lenient(s).unwrap()
    }

    #[test]
    fn plain_json_and_scalars() {
        assert_eq!(ok(r#" {"a": [1, 2]} "#), json!({"a": [1, 2]}));
        assert_eq!(ok("[1, {\"b\": null}]"), json!([1, {"b": null}]));
        assert_eq!(ok("42"), json!(42));
    }

    #[test]
    fn fenced_blocks() {
        assert_eq!(ok("```json\n{\"a\": 1}\n```"), json!({"a": 1}));
        assert_eq!(ok("Here you go:\n```\n[\"x\"]\n```\nDone."), json!(["x"]));
        // brackets in the prose before the fence do not matter
        assert_eq!(
            ok("Notes [1] and {2}:\n```JSON\n{\"k\": \"v\"}\n```"),
            json!({"k": "v"})
        );
        // a fence marker inside a JSON string: the fenced cut fails, the whole text works
        assert_eq!(ok("```json\n{\"a\": \"```\"}\n```"), json!({"a": "```"}));
    }

    #[test]
    fn prose_around_json() {
        assert_eq!(
            ok("Sure! The answer is {\"tags\": [\"a\"], \"n\": 2}. Hope that helps {:"),
            json!({"tags": ["a"], "n": 2})
        );
        // a bracketed aside that is not JSON is skipped as a whole
        assert_eq!(ok("See [note one]: {\"a\": 1}"), json!({"a": 1}));
    }

    #[test]
    fn brackets_and_escapes_inside_strings() {
        assert_eq!(
            ok(r#"x {"a": "}{][", "b": "say \"}\" \\", "c": {"d": [1]}} y"#),
            json!({"a": "}{][", "b": "say \"}\" \\", "c": {"d": [1]}})
        );
    }

    #[test]
    fn truncated_is_reported_precisely() {
        assert_eq!(
            parse_json_lenient("{\"a\": [1, 2"),
            Err(ParseError::Truncated {
                unclosed: 2,
                in_string: false
            })
        );
        let e = parse_json_lenient("ok: {\"a\": \"unfinis").unwrap_err();
        assert_eq!(
            e,
            ParseError::Truncated {
                unclosed: 1,
                in_string: true
            }
        );
        assert!(e.to_string().contains("inside a string"), "{e}");
        // an open fence whose JSON stops early
        assert!(matches!(
            parse_json_lenient("```json\n{\"a\": 1,"),
            Err(ParseError::Truncated { .. })
        ));
    }

    #[test]
    fn malformed_is_not_repaired() {
        let e = parse_json_lenient("{\"a\": 1,}").unwrap_err();
        assert!(matches!(e, ParseError::Malformed(_)), "{e:?}");
        assert!(e.to_string().contains("trailing comma"), "{e}");
        // the inner object of a broken outer one is not taken for the answer
        assert!(matches!(
            parse_json_lenient("{\"a\": {\"b\": 1} \"c\": 2}"),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(
            parse_json_lenient("{\"a\": 1]"),
            Err(ParseError::Malformed(_))
        ));
        // unbalanced, but broken before the end: malformed, not cut off
        let e = parse_json_lenient("Sure! Here you go: {keywords: [oops").unwrap_err();
        assert!(e.to_string().contains("key must be a string"), "{e}");
    }

    #[test]
    fn empty_and_no_json() {
        assert_eq!(parse_json_lenient(""), Err(ParseError::Empty));
        assert_eq!(parse_json_lenient("  \n "), Err(ParseError::Empty));
        assert_eq!(parse_json_lenient("no json here"), Err(ParseError::NoJson));
        assert_eq!(parse_json_lenient("```\n```"), Err(ParseError::NoJson));
    }
}
