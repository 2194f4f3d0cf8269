//! The LLM's word on a pair the supersession rule could not settle: two notes that read
//! alike but state other facts (a `contradicts` link, from merge on write or from the link
//! step). Does the newer one state another value for the same thing, so that the older is
//! no longer current? A paraphrase or a value in other words is what the rule misses.

use serde_json::{Value, json};

use super::{Prompt, SYSTEM, cut, fenced, system_and_user};
use crate::text::Tokenizer;

/// Changes whenever this template or its schema changes; recorded on the link's event.
pub const REPLACE_PROMPT_VERSION: &str = "replace-v1";

const MAX_ATTRIBUTE_CHARS: usize = 40;
/// The answers: the newer note replaces the older, or both stay true. The answer is the
/// schema's first property (properties go in name order), so a model decides before it
/// names the values.
const UPDATED: &str = "updated";
const BOTH_TRUE: &str = "both_true";
const MAX_VALUE_CHARS: usize = 60;
/// Characters of each note shown.
const NOTE_CHARS: usize = 600;

/// What the newer note replaced, in the words of a supersession's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub attribute: String,
    pub old_value: String,
    pub new_value: String,
}

impl Replacement {
    /// `attribute: old → new`, the form the rule writes (and the "may be outdated" flags
    /// read back).
    pub fn reason(&self) -> String {
        format!(
            "{}: {} → {}",
            self.attribute, self.old_value, self.new_value
        )
    }

    /// Whether the values come from the notes: every term of the old value is in the
    /// older note and every term of the new value in the newer one. A value the model made
    /// up, or the two notes taken the wrong way round, fails.
    pub fn grounded_in(&self, tokenizer: &Tokenizer, older: &str, newer: &str) -> bool {
        let within = |value: &str, note: &str| {
            let terms = tokenizer.tokenize(value);
            let note = tokenizer.tokenize(note);
            !terms.is_empty() && terms.iter().all(|t| note.contains(t))
        };
        within(&self.old_value, older) && within(&self.new_value, newer)
    }
}

/// The question for one pair: `older` (noted `older_day`) and `newer` (`newer_day`).
pub fn replaces(older: &str, older_day: &str, newer: &str, newer_day: &str) -> Prompt {
    let user = format!(
        "OLDER note ({older_day}):\n{}\n\nNEWER note ({newer_day}):\n{}\n\nIs the NEWER note an \
         update of the OLDER note: the same thing (one person's address, one team's captain, \
         one price, one plan) now has another value, so the OLDER note is out of date? Or can \
         both notes be true at the same time (other events, other people, more detail)? \
         First answer \"updated\" or \"both_true\"; then name the attribute in one or two \
         words and the value before and the value now in a few words each (such as \
         \"1,200 euros\" and \"1,300 euros\").",
        fenced(&cut(older, NOTE_CHARS)),
        fenced(&cut(newer, NOTE_CHARS)),
    );
    let max_tokens = 64 + 2 * (MAX_ATTRIBUTE_CHARS + 2 * MAX_VALUE_CHARS) as u32;
    Prompt {
        messages: system_and_user(SYSTEM, user),
        schema_name: "replaces",
        schema: json!({
            "type": "object",
            "properties": {
                "answer": {"type": "string", "enum": [UPDATED, BOTH_TRUE]},
                "attribute": {"type": "string", "maxLength": MAX_ATTRIBUTE_CHARS},
                "value_before": {"type": "string", "maxLength": MAX_VALUE_CHARS},
                "value_now": {"type": "string", "maxLength": MAX_VALUE_CHARS}
            },
            "required": ["answer", "attribute", "value_before", "value_now"],
            "additionalProperties": false
        }),
        max_tokens,
    }
}

/// The answer to [`replaces`]: `Ok(None)` when the verdict is that both notes stay true,
/// or an update without two different values to name (nothing could say what changed);
/// `Err` when the answer is not of the asked shape.
pub fn parse_replacement(v: &Value) -> Result<Option<Replacement>, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| "the answer is not a JSON object".to_owned())?;
    let yes = match obj.get("answer").and_then(Value::as_str) {
        Some(UPDATED) => true,
        Some(BOTH_TRUE) => false,
        _ => {
            return Err(format!(
                "`answer` is missing or not {UPDATED} or {BOTH_TRUE}"
            ));
        }
    };
    let text = |key: &str, max: usize| -> Result<String, String> {
        let s = obj
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("`{key}` is missing or not a string"))?;
        // one line, without the marks the reason is read back by or the fences
        let s = s
            .replace("<<<", " ")
            .replace(">>>", " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('→', "->");
        Ok(s.chars().take(max).collect::<String>().trim().to_owned())
    };
    let attribute = text("attribute", MAX_ATTRIBUTE_CHARS)?
        .replace(':', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let old_value = text("value_before", MAX_VALUE_CHARS)?;
    let new_value = text("value_now", MAX_VALUE_CHARS)?;
    if !yes
        || old_value.is_empty()
        || new_value.is_empty()
        || old_value.to_lowercase() == new_value.to_lowercase()
    {
        return Ok(None);
    }
    Ok(Some(Replacement {
        attribute: if attribute.is_empty() {
            "value".to_owned()
        } else {
            attribute
        },
        old_value,
        new_value,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_fences_both_notes_older_first_and_asks_for_the_values() {
        let p = replaces(
            "The team captain is Anna Virtanen.",
            "2026-03-01",
            "Mikko Laine took over as team captain.",
            "2026-09-01",
        );
        let user = &p.messages[1].content;
        let older = user.find("Anna Virtanen").unwrap();
        let newer = user.find("Mikko Laine").unwrap();
        assert!(older < newer, "{user}");
        assert!(user.starts_with("OLDER note (2026-03-01):\n<<<"), "{user}");
        assert_eq!(p.schema["required"].as_array().map(Vec::len), Some(4));
        // a note cannot close its fence
        let p = replaces("a >>> b", "d", "c", "d");
        assert!(!p.messages[1].content.contains("a >>> b"));
    }

    #[test]
    fn a_yes_with_two_values_is_a_replacement_in_the_rule_s_reason_form() {
        let r = parse_replacement(&json!({
            "answer": "updated", "attribute": "team captain",
            "value_before": "Anna Virtanen", "value_now": "Mikko Laine"
        }))
        .unwrap()
        .unwrap();
        assert_eq!(r.reason(), "team captain: Anna Virtanen → Mikko Laine");
        // the marks the reason is read back by cannot come from the model
        let r = parse_replacement(&json!({
            "answer": "updated", "attribute": "rent: monthly",
            "value_before": "1,200 → euros", "value_now": "1,300\neuros"
        }))
        .unwrap()
        .unwrap();
        assert_eq!(r.reason(), "rent monthly: 1,200 -> euros → 1,300 euros");
        let r = parse_replacement(&json!({
            "answer": "updated", "attribute": " ", "value_before": "a", "value_now": "b"
        }))
        .unwrap()
        .unwrap();
        assert_eq!(r.attribute, "value");
    }

    #[test]
    fn values_must_come_from_their_notes() {
        let t = Tokenizer::default();
        let r = |old: &str, new: &str| Replacement {
            attribute: "rent".into(),
            old_value: old.into(),
            new_value: new.into(),
        };
        let (older, newer) = (
            "Our rent is 1,200 euros a month.",
            "From September we pay 1,300 euros.",
        );
        assert!(r("1,200 euros", "1,300 euros").grounded_in(&t, older, newer));
        // made up, or the notes the wrong way round
        assert!(!r("1,100 euros", "1,300 euros").grounded_in(&t, older, newer));
        assert!(!r("1,300 euros", "1,200 euros").grounded_in(&t, older, newer));
        assert!(!r("", "1,300 euros").grounded_in(&t, older, newer));
    }

    #[test]
    fn a_no_or_a_yes_without_two_different_values_is_no_replacement() {
        for v in [
            json!({"answer": "both_true", "attribute": "a", "value_before": "x", "value_now": "y"}),
            json!({"answer": "updated", "attribute": "a", "value_before": "Same", "value_now": "same"}),
            json!({"answer": "updated", "attribute": "a", "value_before": "", "value_now": "y"}),
        ] {
            assert_eq!(parse_replacement(&v), Ok(None), "{v}");
        }
    }

    #[test]
    fn an_answer_of_another_shape_is_an_error() {
        for v in [
            json!([]),
            json!({"answer": "yes", "attribute": "a", "value_before": "x", "value_now": "y"}),
            json!({"answer": "updated", "attribute": "a", "value_now": "y"}),
            json!({"answer": "updated", "attribute": 3, "value_before": "x", "value_now": "y"}),
        ] {
            assert!(parse_replacement(&v).is_err(), "{v}");
        }
    }
}
