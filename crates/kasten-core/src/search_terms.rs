//! A question turned into search terms by the LLM, as A-Mem retrieves: before searching,
//! the model writes the keywords a note answering the question would hold (names, things,
//! places, activities, times). [`with_question`] puts them beside the question, so the
//! ranking sees both the question's own words and the model's.
//!
//! The model's answer is data: [`parse`] keeps at most [`MAX_TERMS`] short terms, drops
//! empty and repeated ones and the prompt's own kinds of word echoed back as terms
//! ("time", "places", "activities": they match any note), and accepts A-Mem's own form
//! (one string, terms separated by commas or by the word "cosmos") as well as a JSON array.

use serde_json::{Value, json};

use crate::prompts::PromptMessage;

/// Terms kept from the model's answer.
pub const MAX_TERMS: usize = 8;
/// Characters of one term (in the schema too: a grammar then closes the string).
const MAX_TERM_CHARS: usize = 40;
/// Characters of the question shown to the model (a longer one is cut).
const MAX_QUESTION_CHARS: usize = 600;
/// The schema's name, as the structured call sends it.
pub const SCHEMA_NAME: &str = "search_terms";
/// Tokens the answer may take (eight short terms in JSON fit in well under half).
pub const MAX_TOKENS: u32 = 120;

/// Words that name a kind of term rather than a term: the prompt's own words, which a
/// small model writes back ("Caroline, research, things, places, activities, times"; the
/// 1.5B on LoCoMo in 71 of 150 questions). As search terms they match any note.
const KINDS: [&str; 16] = [
    "people",
    "person",
    "thing",
    "things",
    "place",
    "places",
    "location",
    "activity",
    "activities",
    "time",
    "times",
    "date",
    "dates",
    "name",
    "names",
    "keywords",
];

const SYSTEM: &str = "You help search a person's notes. Given a question, write the keywords \
a note that answers it would contain: the people, things, places, activities and times it \
names, and other words for them. Do not answer the question. Reply with JSON only.";

/// The messages that ask for a question's search terms.
pub fn prompt(question: &str) -> Vec<PromptMessage> {
    let question: String = question.trim().chars().take(MAX_QUESTION_CHARS).collect();
    vec![
        PromptMessage {
            role: "system",
            content: SYSTEM.to_owned(),
        },
        PromptMessage {
            role: "user",
            content: format!(
                "Question: {question}\n\nReply as {{\"keywords\": [\"keyword\", ...]}} with at \
                 most {MAX_TERMS} keywords."
            ),
        },
    ]
}

/// The JSON schema of the answer.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "keywords": {
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_TERM_CHARS},
                "minItems": 1,
                "maxItems": MAX_TERMS
            }
        },
        "required": ["keywords"],
        "additionalProperties": false
    })
}

/// Why an answer holds no terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TermsError {
    #[error("the answer has no \"keywords\" field")]
    Missing,
    #[error("\"keywords\" is neither a list nor a string")]
    WrongType,
    #[error("\"keywords\" holds no term")]
    Empty,
}

/// The terms of the model's answer (`{"keywords": [...]}` or `{"keywords": "a, b"}`):
/// trimmed, at most [`MAX_TERM_CHARS`] characters each, repeated ones (ignoring case) and
/// the names of kinds of term ([`KINDS`]) dropped, at most [`MAX_TERMS`].
pub fn parse(value: &Value) -> Result<Vec<String>, TermsError> {
    let raw: Vec<String> = match value.get("keywords").ok_or(TermsError::Missing)? {
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .flat_map(split_terms)
            .collect(),
        Value::String(s) => split_terms(s),
        _ => return Err(TermsError::WrongType),
    };
    let mut terms: Vec<String> = Vec::new();
    for t in raw {
        let t: String = t.chars().take(MAX_TERM_CHARS).collect();
        let t = t.trim();
        if t.is_empty()
            || terms.iter().any(|k| k.eq_ignore_ascii_case(t))
            || KINDS.iter().any(|k| k.eq_ignore_ascii_case(t))
        {
            continue;
        }
        terms.push(t.to_owned());
        if terms.len() == MAX_TERMS {
            break;
        }
    }
    if terms.is_empty() {
        return Err(TermsError::Empty);
    }
    Ok(terms)
}

/// One string of terms split as A-Mem writes it: commas, semicolons, new lines or the
/// word "cosmos" between them.
fn split_terms(s: &str) -> Vec<String> {
    s.split([',', ';', '\n'])
        .flat_map(|part| part.split(" cosmos "))
        .map(|t| t.trim().trim_matches(['"', '\'', '.']).trim())
        .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("cosmos"))
        .map(str::to_owned)
        .collect()
}

/// The question with the terms it does not already hold (ignoring case), for a search
/// that sees both.
pub fn with_question(question: &str, terms: &[String]) -> String {
    let lower = question.to_lowercase();
    let mut out = question.trim().to_owned();
    for t in terms {
        if !lower.contains(&t.to_lowercase()) {
            out.push(' ');
            out.push_str(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_come_from_a_list_or_from_a_mem_s_one_string() {
        let list = json!({"keywords": ["Caroline", " adoption agency ", "caroline", ""]});
        assert_eq!(parse(&list).unwrap(), ["Caroline", "adoption agency"]);
        let amem = json!({"keywords": "Melanie cosmos pottery class, July 2023"});
        assert_eq!(
            parse(&amem).unwrap(),
            ["Melanie", "pottery class", "July 2023"]
        );
    }

    #[test]
    fn the_prompt_s_kinds_of_word_echoed_back_are_not_terms() {
        let echo = json!({"keywords": ["research", "Caroline", "things", "Places", "times"]});
        assert_eq!(parse(&echo).unwrap(), ["research", "Caroline"]);
        // a kind inside a term is part of it
        let named = json!({"keywords": ["time capsule", "date night"]});
        assert_eq!(parse(&named).unwrap(), ["time capsule", "date night"]);
        assert_eq!(
            parse(&json!({"keywords": ["time", "date"]})),
            Err(TermsError::Empty)
        );
    }

    #[test]
    fn an_answer_without_terms_is_an_error_not_an_empty_search() {
        assert_eq!(parse(&json!({})), Err(TermsError::Missing));
        assert_eq!(parse(&json!({"keywords": 3})), Err(TermsError::WrongType));
        assert_eq!(
            parse(&json!({"keywords": [" ", ","]})),
            Err(TermsError::Empty)
        );
    }

    #[test]
    fn terms_are_bounded_in_number_and_length() {
        let many: Vec<String> = (0..20).map(|i| format!("term{i}")).collect();
        assert_eq!(
            parse(&json!({ "keywords": many })).unwrap().len(),
            MAX_TERMS
        );
        let long = "x".repeat(100);
        let got = parse(&json!({ "keywords": [long] })).unwrap();
        assert_eq!(got[0].chars().count(), MAX_TERM_CHARS);
    }

    #[test]
    fn the_question_gets_only_the_terms_it_lacks() {
        let terms = vec!["Caroline".to_owned(), "LGBTQ support group".to_owned()];
        assert_eq!(
            with_question("When did Caroline go to a group?", &terms),
            "When did Caroline go to a group? LGBTQ support group"
        );
    }

    #[test]
    fn the_prompt_holds_the_question_and_a_schema_the_parser_reads() {
        let p = prompt("  What did Melanie paint?  ");
        assert!(
            p[1].content
                .starts_with("Question: What did Melanie paint?\n")
        );
        let props = &schema()["properties"]["keywords"];
        assert_eq!(props["maxItems"], json!(MAX_TERMS));
    }
}
