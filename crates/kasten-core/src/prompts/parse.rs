//! The link + evolve answer read back: links and neighbour updates resolved from their
//! handles (unknown ones dropped and counted), operations checked, lengths cut.

use super::*;

/// A link the LLM proposed, resolved to a note id.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedLink {
    pub to: NoteId,
    pub kind: String,
    pub reason: String,
    pub confidence: f64,
}

/// What an evolution operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    AddTag,
    RemoveTag,
    AddKeyword,
    RemoveKeyword,
    SetContext,
}

impl OpKind {
    pub fn as_str(self) -> &'static str {
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

impl FieldOp {
    /// Reads `{op, tag|keyword|context, reason}`; `None` for an unknown op or an empty value.
    fn from_value(v: &Value) -> Option<Self> {
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
        let reason = v.get("reason").and_then(Value::as_str).unwrap_or("");
        let reason = cut(
            &reason.split_whitespace().collect::<Vec<_>>().join(" "),
            MAX_OP_REASON_CHARS,
        );
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
    tags_only: bool,
) -> Result<(Vec<FieldOp>, usize), String> {
    let items = match v {
        None | Some(Value::Null) => return Ok((Vec::new(), 0)),
        Some(v) => v.as_array().ok_or("'ops' and 'note_tags' must be arrays")?,
    };
    let mut ops = Vec::new();
    let mut dropped = 0;
    for item in items {
        match FieldOp::from_value(item) {
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
        for l in links {
            let l = l.as_object().ok_or("each link must be an object")?;
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
                l.get("reason").and_then(Value::as_str).unwrap_or("").trim(),
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
            let (ops, dropped) = read_ops(u.get("ops"), MAX_OPS, false)?;
            out.dropped += dropped;
            if ops.is_empty() {
                continue; // nothing to change
            }
            out.updates.push(ProposedUpdate {
                target: id.clone(),
                ops,
            });
        }
        let (note_tags, dropped) = read_ops(obj.get("note_tags"), MAX_NOTE_TAG_OPS, true)?;
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
