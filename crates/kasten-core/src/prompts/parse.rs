//! The link + evolve answer read back: links and neighbour updates resolved from their
//! handles (unknown ones dropped and counted), operations checked, lengths cut.

use super::*;

/// Where a reason is shown, which decides how its references to notes read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// On a link from the new note to the note behind this handle.
    Link(&'a str),
    /// On a change to the older note behind this handle.
    Update(&'a str),
    /// On a change to the new note itself.
    NewNote,
}

/// Whether `w` is a prompt's handle for a note shown to the model (`N1` … `N999`): the
/// quality check's own rule, so what it would flag is what is rewritten.
fn is_handle_word(w: &str) -> bool {
    crate::quality::is_handle(&w.to_ascii_lowercase())
}

/// A reason as a person reads it once stored: a prompt's handles (`N3`) and framing ("the
/// new note", "the related notes") mean nothing outside the prompt, so they become plain
/// references — the note the reason is about "that note" (on a link) or "this note" (on a
/// change), another shown note "an earlier note", a list of them "earlier notes", the new
/// note "the newer note" (or "this note" on its own tags). Nothing else is changed.
pub(crate) fn plain_reason(reason: &str, place: Place<'_>) -> String {
    let words: Vec<&str> = reason.split_whitespace().collect();
    let core = |w: &str| -> (String, String, String) {
        let lead: String = w.chars().take_while(|c| *c == '(').collect();
        let rest = &w[lead.len()..];
        let mut body = rest.trim_end_matches(|c: char| !c.is_alphanumeric());
        // a possessive ("N1's") keeps its ending
        for s in ["'s", "’s"] {
            if let Some(h) = body.strip_suffix(s).filter(|h| is_handle_word(h)) {
                body = h;
            }
        }
        (lead, body.to_owned(), rest[body.len()..].to_owned())
    };
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (lead, body, tail) = core(words[i]);
        if !is_handle_word(&body) {
            out.push(words[i].to_owned());
            i += 1;
            continue;
        }
        // a list of handles: "N1, N2 and N3"
        let (mut n, mut last_tail, mut j) = (1, tail, i + 1);
        loop {
            let joiner = words
                .get(j)
                .is_some_and(|w| matches!(*w, "and" | "&" | "or"));
            let Some((l2, b2, t2)) = words.get(j + usize::from(joiner)).map(|w| core(w)) else {
                break;
            };
            if !(l2.is_empty() && is_handle_word(&b2) && (joiner || last_tail == ",")) {
                break;
            }
            n += 1;
            last_tail = t2;
            j += 1 + usize::from(joiner);
        }
        // in apposition ("the related note N1, which …", "notes N1 and N2"): the words
        // before already name the note, the handle goes (not "the earlier note that note")
        if lead.is_empty()
            && let Some(prev) = out
                .last_mut()
                .filter(|p| matches!(p.as_str(), "note" | "notes"))
        {
            prev.push_str(&last_tail);
            i = j;
            continue;
        }
        let own = match place {
            Place::Link(h) if n == 1 && body == h => Some("that note"),
            Place::Update(h) if n == 1 && body == h => Some("this note"),
            _ => None,
        };
        let words_for = own.unwrap_or(if n > 1 {
            "earlier notes"
        } else {
            "an earlier note"
        });
        out.push(format!("{lead}{words_for}{last_tail}"));
        i = j;
    }
    let mut text = out.join(" ");
    let (the_newer, newer) = match place {
        Place::NewNote => ("this note", "note"),
        _ => ("the newer note", "newer note"),
    };
    for (from, to) in [
        ("the new note", the_newer),
        ("new note", newer),
        ("the related notes", "the earlier notes"),
        ("related notes", "earlier notes"),
        ("the related note", "the earlier note"),
        ("related note", "earlier note"),
    ] {
        text = replace_words(&text, from, to);
    }
    // a sentence that now starts with a lower-case reference
    let mut chars = text.chars();
    match chars.next() {
        Some(c) if c.is_lowercase() && !reason.starts_with(c) => {
            c.to_uppercase().chain(chars).collect()
        }
        _ => text,
    }
}

/// Replaces `from` where it stands as whole words, in either case of its first letter
/// (keeping that case).
fn replace_words(text: &str, from: &str, to: &str) -> String {
    let mut out = text.to_owned();
    for (f, t) in [
        (from.to_owned(), to.to_owned()),
        (capitalise(from), capitalise(to)),
    ] {
        let mut result = String::new();
        let mut rest = out.as_str();
        while let Some(pos) = rest.find(&f) {
            let before = rest[..pos].chars().next_back();
            let after = rest[pos + f.len()..].chars().next();
            let bounded = !before.is_some_and(char::is_alphanumeric)
                && !after.is_some_and(char::is_alphanumeric);
            result.push_str(&rest[..pos]);
            result.push_str(if bounded { &t } else { &f });
            rest = &rest[pos + f.len()..];
        }
        result.push_str(rest);
        out = result;
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A link the LLM proposed, resolved to a note id.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedLink {
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
}

/// What an evolution operation does. Stored with each change of a revision and shown as
/// its word (serde's `snake_case` words are `as_str`'s; a test holds them equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    AddTag,
    RemoveTag,
    AddKeyword,
    RemoveKeyword,
    SetContext,
}

impl OpKind {
    /// Every operation, in declaration order.
    pub const ALL: &'static [OpKind] = &[
        Self::AddTag,
        Self::RemoveTag,
        Self::AddKeyword,
        Self::RemoveKeyword,
        Self::SetContext,
    ];

    /// The word stored and shown for this operation.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::AddTag => "add_tag",
            Self::RemoveTag => "remove_tag",
            Self::AddKeyword => "add_keyword",
            Self::RemoveKeyword => "remove_keyword",
            Self::SetContext => "set_context",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "add_tag" => Self::AddTag,
            "remove_tag" => Self::RemoveTag,
            "add_keyword" => Self::AddKeyword,
            "remove_keyword" => Self::RemoveKeyword,
            "set_context" => Self::SetContext,
            _ => return None,
        })
    }

    fn is_tag(self) -> bool {
        matches!(self, Self::AddTag | Self::RemoveTag)
    }
}

/// One change the LLM proposes to a note's annotations, with its one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldOp {
    pub op: OpKind,
    /// The tag or keyword added or removed, or the new context.
    pub value: String,
    pub reason: String,
}

/// A link's or an operation's reason: `about` (what both notes are about, asked for since
/// `amem-v7`), else `reason` (earlier prompt versions, the guided prompts).
fn about_or_reason(v: &Value) -> &str {
    v.get("about")
        .or_else(|| v.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl FieldOp {
    /// Reads `{op, tag|keyword|context, about|reason}`; `None` for an unknown op or an empty value.
    fn from_value(v: &Value, place: Place<'_>) -> Option<Self> {
        let op = OpKind::parse(v.get("op")?.as_str()?)?;
        let key = match op {
            OpKind::AddTag | OpKind::RemoveTag => "tag",
            OpKind::AddKeyword | OpKind::RemoveKeyword => "keyword",
            OpKind::SetContext => "context",
        };
        let raw = v.get(key).or_else(|| v.get("value"))?.as_str()?;
        let raw = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        let value = match op {
            OpKind::AddTag | OpKind::RemoveTag => cut(&raw.to_lowercase(), MAX_TERM_CHARS),
            OpKind::AddKeyword | OpKind::RemoveKeyword => cut(&raw, MAX_TERM_CHARS),
            OpKind::SetContext => cut(&raw, MAX_CONTEXT_CHARS),
        };
        if value.is_empty() {
            return None;
        }
        let reason = about_or_reason(v);
        let reason = cut(&plain_reason(reason, place), MAX_OP_REASON_CHARS);
        Some(Self { op, value, reason })
    }

    /// Applies the operation; `false` when it changes nothing (a tag already there, a
    /// keyword the note does not have, a list already at its limit, the same context).
    pub fn apply(
        &self,
        keywords: &mut Vec<String>,
        tags: &mut Vec<String>,
        context: &mut String,
    ) -> bool {
        let has = |list: &[String], v: &str| list.iter().position(|x| x.eq_ignore_ascii_case(v));
        match self.op {
            OpKind::AddTag | OpKind::AddKeyword => {
                let (list, max) = if self.op == OpKind::AddTag {
                    (tags, MAX_EVOLVED_TAGS)
                } else {
                    (keywords, MAX_EVOLVED_KEYWORDS)
                };
                if has(list, &self.value).is_some() || list.len() >= max {
                    return false;
                }
                list.push(self.value.clone());
                true
            }
            OpKind::RemoveTag | OpKind::RemoveKeyword => {
                let list = if self.op == OpKind::RemoveTag {
                    tags
                } else {
                    keywords
                };
                match has(list, &self.value) {
                    Some(i) => {
                        list.remove(i);
                        true
                    }
                    None => false,
                }
            }
            OpKind::SetContext => {
                if context.trim() == self.value {
                    return false;
                }
                *context = self.value.clone();
                true
            }
        }
    }
}

/// Reads a list of operations, keeping at most `max` (and only tag operations when
/// `tags_only`); returns them and how many were dropped.
fn read_ops(
    v: Option<&Value>,
    max: usize,
    place: Place<'_>,
) -> Result<(Vec<FieldOp>, usize), String> {
    let tags_only = matches!(place, Place::NewNote);
    let items = match v {
        None | Some(Value::Null) => return Ok((Vec::new(), 0)),
        Some(v) => v.as_array().ok_or("'ops' and 'note_tags' must be arrays")?,
    };
    let mut ops = Vec::new();
    let mut dropped = 0;
    for item in items {
        match FieldOp::from_value(item, place) {
            Some(op) if (!tags_only || op.op.is_tag()) && ops.len() < max && !ops.contains(&op) => {
                ops.push(op)
            }
            _ => dropped += 1,
        }
    }
    Ok((ops, dropped))
}

/// A neighbour update the LLM proposed: operations applied in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedUpdate {
    pub target: NoteId,
    pub ops: Vec<FieldOp>,
}

/// The link-and-evolve answer, resolved and cleaned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkEvolve {
    pub links: Vec<ProposedLink>,
    pub updates: Vec<ProposedUpdate>,
    /// Tag operations on the new note itself.
    pub note_tags: Vec<FieldOp>,
    /// Entries naming a handle that was not shown (dropped).
    pub unknown_handles: usize,
    /// Entries dropped for another reason (unknown kind, duplicate).
    pub dropped: usize,
}

impl LinkEvolve {
    /// Validates the shape (errors feed the repair retry) and resolves handles; entries
    /// with unknown handles or kinds are dropped and counted, not errors.
    pub fn from_value(v: &Value, handles: &Handles) -> Result<Self, String> {
        let obj = v
            .as_object()
            .ok_or("expected a JSON object with 'links' and 'updates'")?;
        let links = obj
            .get("links")
            .and_then(Value::as_array)
            .ok_or("'links' must be an array")?;
        let updates = match obj.get("updates") {
            None | Some(Value::Null) => &Vec::new(),
            Some(u) => u.as_array().ok_or("'updates' must be an array")?,
        };
        let mut out = LinkEvolve::default();
        let mut seen = BTreeSet::new();
        for value in links {
            let l = value.as_object().ok_or("each link must be an object")?;
            let target = l
                .get("target")
                .and_then(Value::as_str)
                .ok_or("each link needs a 'target' handle")?;
            let Some(to) = handles.resolve(target) else {
                out.unknown_handles += 1;
                continue;
            };
            let kind = l
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or(LinkKind::Relates.as_str())
                .trim()
                .to_lowercase();
            if !is_llm_kind(&kind) || !seen.insert((to.clone(), kind.clone())) {
                out.dropped += 1;
                continue;
            }
            let reason = cut(
                &plain_reason(about_or_reason(value), Place::Link(target.trim())),
                MAX_REASON_CHARS,
            );
            let confidence = l.get("confidence").and_then(Value::as_f64).unwrap_or(0.5);
            let confidence = if confidence.is_finite() {
                confidence.clamp(0.0, 1.0)
            } else {
                0.5
            };
            out.links.push(ProposedLink {
                to: to.clone(),
                kind,
                reason,
                confidence,
            });
        }
        if out.links.len() > MAX_LINKS {
            // the schema says so too; servers without schema support may still send more
            out.links
                .sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
            out.dropped += out.links.len() - MAX_LINKS;
            out.links.truncate(MAX_LINKS);
        }
        let mut updated = BTreeSet::new();
        for u in updates {
            let u = u.as_object().ok_or("each update must be an object")?;
            let target = u
                .get("target")
                .and_then(Value::as_str)
                .ok_or("each update needs a 'target' handle")?;
            let Some(id) = handles.resolve(target) else {
                out.unknown_handles += 1;
                continue;
            };
            if !updated.insert(id.clone()) {
                out.dropped += 1;
                continue;
            }
            let (ops, dropped) = read_ops(u.get("ops"), MAX_OPS, Place::Update(target.trim()))?;
            out.dropped += dropped;
            if ops.is_empty() {
                continue; // nothing to change
            }
            out.updates.push(ProposedUpdate {
                target: id.clone(),
                ops,
            });
        }
        let (note_tags, dropped) =
            read_ops(obj.get("note_tags"), MAX_NOTE_TAG_OPS, Place::NewNote)?;
        out.note_tags = note_tags;
        out.dropped += dropped;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::testing::id;

    #[test]
    fn every_operation_round_trips_through_its_word() {
        let words: Vec<&str> = OpKind::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            words,
            [
                "add_tag",
                "remove_tag",
                "add_keyword",
                "remove_keyword",
                "set_context"
            ]
        );
        for o in OpKind::ALL {
            assert_eq!(OpKind::parse(o.as_str()), Some(*o));
            assert_eq!(serde_json::json!(o), serde_json::json!(o.as_str()));
            let back: OpKind = serde_json::from_value(serde_json::json!(o.as_str()))
                .unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(back, *o);
        }
        assert_eq!(OpKind::parse("rename_tag"), None);
    }

    #[test]
    fn reasons_are_stored_without_the_prompts_handles_and_framing() {
        // reasons Qwen2.5-Coder-1.5B wrote on LoCoMo conv-30
        let cases = [
            (
                Place::Link("N1"),
                "Jon's one-on-one mentoring and training are mentioned in N1 and N2, which are related notes to the new note.",
                "Jon's one-on-one mentoring and training are mentioned in earlier notes, which are earlier notes to the newer note.",
            ),
            (
                Place::Link("N2"),
                "N1 and N2 both mention Gina's passion for dance and fashion, which is reflected in the new note.",
                "Earlier notes both mention Gina's passion for dance and fashion, which is reflected in the newer note.",
            ),
            (
                Place::Link("N3"),
                "Jon's excitement about the opening aligns with the excitement in N3 (Jon:",
                "Jon's excitement about the opening aligns with the excitement in that note (Jon:",
            ),
            (
                Place::Link("N4"),
                "Jon is mentioned in multiple notes, including N1, N2, N3, N4, N5, N6, N7, N8, N9, and N10, which all relate",
                "Jon is mentioned in multiple notes, including earlier notes, which all relate",
            ),
            (
                Place::Link("N5"),
                "Gina mentions that she likes contemporary dance, which is mentioned in N4 and N5.",
                "Gina mentions that she likes contemporary dance, which is mentioned in earlier notes.",
            ),
            (
                Place::Update("N2"),
                "Gina's support in N1 is better supported by the related notes about N2 (2023-03-23).",
                "Gina's support in an earlier note is better supported by the earlier notes about this note (2023-03-23).",
            ),
            (
                Place::NewNote,
                "Gina's new note mentions Shia Labeouf, and The new note quotes him.",
                "Gina's note mentions Shia Labeouf, and This note quotes him.",
            ),
            // a handle in apposition goes: the words before it name the note
            (
                Place::Link("N1"),
                "The new note plans the trip in the related note N1, which is in May.",
                "The newer note plans the trip in the earlier note, which is in May.",
            ),
            (
                Place::Update("N2"),
                "Both plan the trip of the related notes N1 and N2.",
                "Both plan the trip of the earlier notes.",
            ),
            // nothing to change
            (
                Place::Link("N1"),
                "both plan the Lisbon trip; NN1 and N12x stay",
                "both plan the Lisbon trip; NN1 and N12x stay",
            ),
        ];
        for (place, reason, want) in cases {
            let got = plain_reason(reason, place);
            assert_eq!(got, want, "{place:?}");
            assert!(!crate::quality::contains_prompt_text(&got, ""), "{got}");
        }
        // the answer is read with them
        let handles = Handles::new([id("a"), id("b")]);
        let v = json!({
            "links": [{"target": "N2", "kind": "supports", "reason": "N1 and N2 both plan the trip", "confidence": 0.9}],
            "updates": [{"target": "N1", "ops": [{"op": "add_tag", "tag": "trip", "reason": "the new note plans N1's trip"}]}]
        });
        let le = LinkEvolve::from_value(&v, &handles).unwrap();
        assert_eq!(le.links[0].reason, "Earlier notes both plan the trip");
        assert_eq!(
            le.updates[0].ops[0].reason,
            "the newer note plans this note's trip"
        );
    }

    #[test]
    fn handles_map_back_and_unknown_ones_are_dropped_and_counted() {
        let h = Handles::new([id("a"), id("b"), id("c")]);
        assert_eq!(h.all(), vec!["N1", "N2", "N3"]);
        let le = LinkEvolve::from_value(
            &json!({
                "links": [
                    {"target": "N2", "kind": "supports", "reason": "same trip", "confidence": 0.9},
                    {"target": "N9", "kind": "relates", "reason": "invented", "confidence": 1.0},
                    {"target": "N2", "kind": "supports", "reason": "dup", "confidence": 0.1},
                    {"target": "N3", "kind": "teleports", "reason": "bad kind", "confidence": 0.5},
                    {"target": "N1", "kind": "Relates", "reason": "x", "confidence": 7}
                ],
                "updates": [
                    {"target": "N3", "ops": [
                        {"op": "set_context", "context": "now about Berlin", "reason": "the trip moved"},
                        {"op": "add_tag", "tag": "Travel", "reason": "it is a trip"},
                        {"op": "explode", "tag": "x", "reason": "unknown op"}
                    ]},
                    {"target": "N0", "ops": [{"op": "add_tag", "tag": "nope", "reason": "r"}]},
                    {"target": "N1", "context": "an old-style overwrite is not an operation"}
                ],
                "note_tags": [
                    {"op": "add_tag", "tag": "Berlin", "reason": "the neighbours say where"},
                    {"op": "set_context", "context": "not a tag op", "reason": "r"}
                ]
            }),
            &h,
        )
        .unwrap();
        assert_eq!(le.links.len(), 2);
        assert_eq!(le.links[0].to, id("b"));
        assert_eq!(le.links[1].kind, "relates");
        assert_eq!(le.links[1].confidence, 1.0);
        assert_eq!(le.unknown_handles, 2);
        // bad kind, duplicate link, unknown op, the note's non-tag op
        assert_eq!(le.dropped, 4);
        assert_eq!(le.updates.len(), 1);
        assert_eq!(le.updates[0].target, id("c"));
        let ops: Vec<(OpKind, &str, &str)> = le.updates[0]
            .ops
            .iter()
            .map(|o| (o.op, o.value.as_str(), o.reason.as_str()))
            .collect();
        assert_eq!(
            ops,
            vec![
                (OpKind::SetContext, "now about Berlin", "the trip moved"),
                (OpKind::AddTag, "travel", "it is a trip")
            ]
        );
        assert_eq!(le.note_tags.len(), 1);
        assert_eq!(le.note_tags[0].value, "berlin");
    }

    #[test]
    fn operations_change_only_what_they_name() {
        let mut kw = vec!["Paris".to_owned(), "museum".to_owned()];
        let mut tags = vec!["travel".to_owned()];
        let mut ctx = "A trip.".to_owned();
        let op = |op, value: &str| FieldOp {
            op,
            value: value.into(),
            reason: "r".into(),
        };
        assert!(op(OpKind::AddTag, "art").apply(&mut kw, &mut tags, &mut ctx));
        assert!(
            !op(OpKind::AddTag, "Art").apply(&mut kw, &mut tags, &mut ctx),
            "already there"
        );
        assert!(
            !op(OpKind::RemoveKeyword, "louvre").apply(&mut kw, &mut tags, &mut ctx),
            "never had it"
        );
        assert!(op(OpKind::RemoveKeyword, "paris").apply(&mut kw, &mut tags, &mut ctx));
        assert!(op(OpKind::AddKeyword, "Louvre").apply(&mut kw, &mut tags, &mut ctx));
        assert!(!op(OpKind::SetContext, "A trip.").apply(&mut kw, &mut tags, &mut ctx));
        assert!(op(OpKind::SetContext, "A museum visit.").apply(&mut kw, &mut tags, &mut ctx));
        assert_eq!(
            kw,
            vec!["museum", "Louvre"],
            "the keyword no op named stays"
        );
        assert_eq!(tags, vec!["travel", "art"]);
        assert_eq!(ctx, "A museum visit.");
        let mut many: Vec<String> = (0..MAX_EVOLVED_TAGS).map(|i| format!("t{i}")).collect();
        assert!(
            !op(OpKind::AddTag, "one-more").apply(&mut kw, &mut many, &mut ctx),
            "at the limit"
        );
    }

    #[test]
    fn wrong_shapes_are_errors_for_the_repair_retry() {
        let h = Handles::new([id("a")]);
        assert!(LinkEvolve::from_value(&json!([]), &h).is_err());
        assert!(LinkEvolve::from_value(&json!({"links": "N1"}), &h).is_err());
        assert!(LinkEvolve::from_value(&json!({"links": [{"kind": "relates"}]}), &h).is_err());
        assert!(LinkEvolve::from_value(&json!({"links": [], "updates": null}), &h).is_ok());
    }
}
