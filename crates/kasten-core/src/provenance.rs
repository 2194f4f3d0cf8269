//! Who set a note's annotations, and what that allows the LLM to do with them.
//!
//! A note records the annotation values a person set — typed by the user, brought in by an
//! import (front matter, JSON Lines fields), or written by an agent acting for the user — as
//! [`Origin`]s: field, value, who. Everything else on the note was written by the LLM. The
//! rules that follow, all here:
//!
//! - construction adds to what a person set and never removes or replaces it
//!   ([`merge_construction`]): their keywords and tags stay, first; their context stays;
//! - an LLM operation that would remove or replace a person's value ([`touches_person`]) is
//!   not applied directly: the pipeline holds it as a proposal for review.
//!
//! A value counts as a person's while the note holds it and an origin names it; origins
//! are only ever added (a rollback that brings a value back brings its ownership back too).

use serde::{Deserialize, Serialize};

use crate::prompts::OpKind;

/// Which annotation an [`Origin`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Keywords,
    Tags,
    Context,
}

impl Field {
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Keywords => "keywords",
            Field::Tags => "tags",
            Field::Context => "context",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "keywords" => Some(Field::Keywords),
            "tags" => Some(Field::Tags),
            "context" => Some(Field::Context),
            _ => None,
        }
    }
}

/// Who set an annotation value other than the LLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetBy {
    /// The user, in the app or the CLI.
    User,
    /// An import (Markdown front matter, JSON Lines fields, a chat transcript).
    Import,
    /// An agent (MCP) acting for the user.
    Agent,
}

impl SetBy {
    pub fn as_str(self) -> &'static str {
        match self {
            SetBy::User => "user",
            SetBy::Import => "import",
            SetBy::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(SetBy::User),
            "import" => Some(SetBy::Import),
            "agent" => Some(SetBy::Agent),
            _ => None,
        }
    }

    /// The setter an edit's actor stands for: `None` for the LLM (its values are not
    /// recorded), an agent for `agent` and `agent:NAME`, else the user.
    pub fn of_actor(actor: &str) -> Option<Self> {
        match crate::Actor::parse(actor) {
            crate::Actor::Llm => None,
            crate::Actor::Import => Some(SetBy::Import),
            a if a.is_agent() => Some(SetBy::Agent),
            _ => Some(SetBy::User),
        }
    }
}

/// One annotation value a person set, and who.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Origin {
    pub field: Field,
    pub value: String,
    pub by: SetBy,
}

/// A note's three annotations, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Annotations<'a> {
    pub keywords: &'a [String],
    pub tags: &'a [String],
    pub context: &'a str,
}

fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

fn named(origins: &[Origin], field: Field, value: &str) -> bool {
    origins
        .iter()
        .any(|o| o.field == field && same(&o.value, value))
}

/// Whether the note's current `value` of `field` is a person's.
pub fn is_person(origins: &[Origin], field: Field, value: &str) -> bool {
    !value.trim().is_empty() && named(origins, field, value)
}

/// The origins of every non-empty value of `a`, all set by `by` (a new note or an import).
pub fn all_set_by(a: Annotations<'_>, by: SetBy) -> Vec<Origin> {
    let mut out = Vec::new();
    let mut push = |field: Field, value: &str| {
        if !value.trim().is_empty() && !named(&out, field, value) {
            out.push(Origin {
                field,
                value: value.to_owned(),
                by,
            });
        }
    };
    for k in a.keywords {
        push(Field::Keywords, k);
    }
    for t in a.tags {
        push(Field::Tags, t);
    }
    push(Field::Context, a.context);
    out
}

/// The origins an edit by `by` from `before` to `after` adds to `origins`: each value it
/// introduces (the same value already held is not re-attributed).
pub fn added_by_edit(
    origins: &[Origin],
    before: Annotations<'_>,
    after: Annotations<'_>,
    by: SetBy,
) -> Vec<Origin> {
    let mut out: Vec<Origin> = Vec::new();
    let mut add = |field: Field, value: &str| {
        if !value.trim().is_empty() && !named(origins, field, value) && !named(&out, field, value) {
            out.push(Origin {
                field,
                value: value.to_owned(),
                by,
            });
        }
    };
    for k in after.keywords {
        if !before.keywords.iter().any(|h| same(h, k)) {
            add(Field::Keywords, k);
        }
    }
    for t in after.tags {
        if !before.tags.iter().any(|h| same(h, t)) {
            add(Field::Tags, t);
        }
    }
    if !same(before.context, after.context) {
        add(Field::Context, after.context);
    }
    out
}

/// What construction writes over a note whose current annotations are `current`: the
/// person's keywords and tags first, then the LLM's that are new; the person's context if
/// they set one, else the LLM's. Values the LLM had written before are replaced, as ever.
pub fn merge_construction(
    origins: &[Origin],
    current: Annotations<'_>,
    keywords: &mut Vec<String>,
    tags: &mut Vec<String>,
    context: &mut String,
) {
    let keep = |field: Field, held: &[String], llm: &mut Vec<String>| {
        let mut out: Vec<String> = held
            .iter()
            .filter(|v| is_person(origins, field, v))
            .cloned()
            .collect();
        for v in llm.drain(..) {
            if !out.iter().any(|o| same(o, &v)) {
                out.push(v);
            }
        }
        *llm = out;
    };
    keep(Field::Keywords, current.keywords, keywords);
    keep(Field::Tags, current.tags, tags);
    if is_person(origins, Field::Context, current.context) {
        *context = current.context.to_owned();
    }
}

/// Whether an LLM operation with `value` on a note with annotations `current` would
/// remove or replace a person's value. Adding never does.
pub fn touches_person(
    origins: &[Origin],
    current: Annotations<'_>,
    op: OpKind,
    value: &str,
) -> bool {
    match op {
        OpKind::RemoveTag => is_person(origins, Field::Tags, value),
        OpKind::RemoveKeyword => is_person(origins, Field::Keywords, value),
        OpKind::SetContext => {
            !same(current.context, value) && is_person(origins, Field::Context, current.context)
        }
        OpKind::AddTag | OpKind::AddKeyword => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn ann<'a>(k: &'a [String], t: &'a [String], c: &'a str) -> Annotations<'a> {
        Annotations {
            keywords: k,
            tags: t,
            context: c,
        }
    }

    #[test]
    fn construction_keeps_a_persons_values_and_adds_the_llms() {
        let (k, t) = (s(&["rust"]), s(&["language", "old-llm-tag"]));
        let cur = ann(&k, &t, "Notes on languages");
        let mut origins = all_set_by(
            ann(&k, &s(&["language"]), "Notes on languages"),
            SetBy::Import,
        );
        origins.retain(|o| o.field != Field::Context);
        let (mut kw, mut tags, mut ctx) = (
            s(&["borrow", "Rust"]),
            s(&["programming"]),
            "LLM".to_owned(),
        );
        merge_construction(&origins, cur, &mut kw, &mut tags, &mut ctx);
        assert_eq!(
            kw,
            s(&["rust", "borrow"]),
            "the person's first, no case duplicate"
        );
        assert_eq!(
            tags,
            s(&["language", "programming"]),
            "the LLM's own old tag is replaced"
        );
        assert_eq!(
            ctx, "LLM",
            "a context the person did not set is the LLM's to write"
        );

        let origins = all_set_by(cur, SetBy::User);
        let mut ctx = "LLM".to_owned();
        merge_construction(&origins, cur, &mut Vec::new(), &mut Vec::new(), &mut ctx);
        assert_eq!(ctx, "Notes on languages");
    }

    #[test]
    fn removing_or_replacing_a_persons_value_is_flagged_adding_is_not() {
        let (k, t) = (s(&["rust"]), s(&["language", "llm-tag"]));
        let cur = ann(&k, &t, "ctx");
        let origins = vec![
            Origin {
                field: Field::Tags,
                value: "language".into(),
                by: SetBy::User,
            },
            Origin {
                field: Field::Context,
                value: "ctx".into(),
                by: SetBy::Agent,
            },
        ];
        assert!(touches_person(&origins, cur, OpKind::RemoveTag, "Language"));
        assert!(!touches_person(&origins, cur, OpKind::RemoveTag, "llm-tag"));
        assert!(!touches_person(
            &origins,
            cur,
            OpKind::RemoveKeyword,
            "rust"
        ));
        assert!(touches_person(&origins, cur, OpKind::SetContext, "another"));
        assert!(!touches_person(&origins, cur, OpKind::SetContext, "ctx"));
        assert!(!touches_person(&origins, cur, OpKind::AddTag, "language"));
        assert!(!touches_person(&[], cur, OpKind::SetContext, "another"));
    }

    #[test]
    fn an_edit_attributes_only_what_it_introduces() {
        let (k0, t0) = (s(&["a"]), s(&["x"]));
        let (k1, t1) = (s(&["a", "b"]), s(&["y"]));
        let added = added_by_edit(
            &[],
            ann(&k0, &t0, ""),
            ann(&k1, &t1, "new ctx"),
            SetBy::User,
        );
        let got: Vec<(Field, &str)> = added.iter().map(|o| (o.field, o.value.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Field::Keywords, "b"),
                (Field::Tags, "y"),
                (Field::Context, "new ctx")
            ]
        );
        // a value already a person's is not attributed again
        let again = added_by_edit(
            &added,
            ann(&k0, &t0, ""),
            ann(&k1, &t1, "new ctx"),
            SetBy::Agent,
        );
        assert!(again.is_empty());
        assert_eq!(SetBy::of_actor("agent:claude"), Some(SetBy::Agent));
        assert_eq!(SetBy::of_actor("llm"), None);
        assert_eq!(SetBy::of_actor("user"), Some(SetBy::User));
    }
}
