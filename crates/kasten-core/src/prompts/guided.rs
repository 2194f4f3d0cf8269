//! The guided prompts for small models: choices from a shortlist (the note's own terms,
//! known tags, neighbours that share a term) instead of free text, and their answers read
//! with reasons built from the shared term.

use super::*;

/// Recorded on events enriched with the guided prompts (small models); part of the eval
/// cache key. v6: the tags offered are those whose meaning is nearest the note.
pub const GUIDED_PROMPT_VERSION: &str = "amem-v6-guided";

/// Links a small model may make per note with the guided prompt.
const GUIDED_MAX_LINKS: usize = 3;
/// Keyword candidates offered to a small model.
const GUIDED_CANDIDATES: usize = 40;
/// Characters of a neighbour's content shown to a small model.
const GUIDED_PREVIEW_CHARS: usize = 110;

const GUIDED_SYSTEM: &str = "You annotate the notes of a personal memory. Reply with JSON only.";

/// Few-shot examples for the guided construction prompt: a small model copies what it is
/// shown, so it is shown good annotations instead of descriptions of them.
const GUIDED_EXAMPLES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "2024-05-03",
        "Maria's daughter starts piano lessons on Tuesday with Mr. Otto.",
        "piano lessons, daughter, maria's, tuesday, starts, otto",
        "music, family, learning, events, plans",
        r#"{"context":"About family: Maria's daughter begins weekly piano lessons with a new teacher.","keywords":["piano lessons","daughter","tuesday"],"tags":["family","music"]}"#,
    ),
    (
        "2024-06-11",
        "Server migration blocked: the staging database is out of disk space.",
        "staging database, disk space, server migration, blocked, server, space",
        "tech, work, plans, money, home",
        r#"{"context":"About work: a database problem blocks the server migration.","keywords":["server migration","staging database","disk space"],"tags":["work","tech"]}"#,
    ),
];

/// A context a small model may write: "About …", one sentence of words, no braces or markup
/// (the grammar forbids the `{{{{` a confused model produces, and the opening makes it
/// say what the note is about instead of copying it).
const GUIDED_CONTEXT_PATTERN: &str = "^About [A-Za-z0-9 ,.'’:;()/&-]{8,140}$";
/// The most bytes a context the pattern allows can take ("About " and 140 characters of
/// at most three bytes each).
const GUIDED_CONTEXT_MAX_BYTES: usize = 6 + 140 * 3;
/// Bytes of key names, punctuation and whitespace the grammar allows around the values.
const JSON_SLACK: usize = 96;
/// Bytes of one guided link besides its shared term: its keys, a handle, the longest kind
/// and a number of up to 18 characters, with punctuation.
const GUIDED_LINK_BYTES: usize = 120;
/// The floor of a guided answer's token budget.
const GUIDED_MIN_TOKENS: usize = 200;

/// Bytes of the `n` longest strings, each quoted and followed by a comma and a space: what
/// an array choosing `n` of them takes at most.
fn longest_bytes(items: &[String], n: usize) -> usize {
    let mut lens: Vec<usize> = items.iter().map(|s| s.len() + 4).collect();
    lens.sort_unstable_by(|a, b| b.cmp(a));
    lens.iter().take(n).sum()
}

fn tokens_for(bytes: usize) -> u32 {
    u32::try_from(bytes.max(GUIDED_MIN_TOKENS)).unwrap_or(u32::MAX)
}

fn note_message(time: &str, content: &str, terms: &str, tags: &str) -> String {
    format!(
        "Note ({time}):\n{}\nKeywords from: {terms}\nTags from: {tags}",
        fenced(content)
    )
}

/// Keyword candidates a small model is offered: the note's own terms
/// ([`crate::quality::candidate_terms`]), before the caller shortlists them.
pub fn guided_candidates(content: &str) -> Vec<String> {
    crate::quality::candidate_terms(content, GUIDED_CANDIDATES)
}

/// Prompt 1 for small models: keywords may only be chosen from `candidates` (terms of the
/// note itself, see [`guided_candidates`]; best first) and tags from `tag_choices` (a
/// shortlist of the memory's tags and general ones); the context is a short sentence.
/// Shown by example, not described, so there is no instruction text to copy.
pub fn construct_guided(
    content: &str,
    time: &str,
    candidates: &[String],
    tag_choices: &[String],
) -> Prompt {
    let mut messages = vec![PromptMessage {
        role: "system",
        content: GUIDED_SYSTEM.into(),
    }];
    for (t, c, terms, tags, answer) in GUIDED_EXAMPLES {
        messages.push(PromptMessage {
            role: "user",
            content: note_message(t, c, terms, tags),
        });
        messages.push(PromptMessage {
            role: "assistant",
            content: (*answer).to_owned(),
        });
    }
    messages.push(PromptMessage {
        role: "user",
        content: note_message(
            time,
            &cut(content, NOTE_CHARS),
            &candidates.join(", "),
            &tag_choices.join(", "),
        ),
    });
    // the longest answer the schema allows, in bytes (long terms, a Chinese clause for
    // one, take many tokens: a fixed budget cut such answers off)
    let longest = GUIDED_CONTEXT_MAX_BYTES
        + longest_bytes(candidates, candidates.len().min(5))
        + longest_bytes(tag_choices, tag_choices.len().min(2))
        + JSON_SLACK;
    let keywords = if candidates.is_empty() {
        json!({"type": "array", "maxItems": 0})
    } else {
        json!({"type": "array", "items": {"type": "string", "enum": candidates},
               "minItems": candidates.len().min(2), "maxItems": candidates.len().min(5)})
    };
    let tags = if tag_choices.is_empty() {
        json!({"type": "array", "maxItems": 0})
    } else {
        json!({"type": "array", "items": {"type": "string", "enum": tag_choices},
               "minItems": 1, "maxItems": tag_choices.len().min(2)})
    };
    Prompt {
        messages,
        schema_name: "note_construction",
        schema: json!({
            "type": "object",
            "properties": {
                "keywords": keywords,
                "tags": tags,
                "context": {"type": "string", "pattern": GUIDED_CONTEXT_PATTERN}
            },
            // no tier: a small model proposed the same one for every note
            "required": ["context", "keywords", "tags"],
            "additionalProperties": false
        }),
        max_tokens: tokens_for(longest),
    }
}

/// Terms of the new note (its keyword candidates and keywords) that also occur in
/// `other` (word or stem): what a link between the two may name as its reason. Terms
/// `common` says are everywhere in the memory (a speaker's name in a chat log, the theme of
/// the whole notebook) are not: "both mention gina" links every note Gina wrote.
pub fn shared_terms(
    note: &Neighbour,
    other: &Neighbour,
    common: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let tok = crate::text::Tokenizer::default();
    let other_text = format!(
        "{} {} {}",
        other.content,
        other.keywords.join(" "),
        other.tags.join(" ")
    );
    let mut terms = note.keywords.clone();
    for c in crate::quality::candidate_terms(&note.content, GUIDED_CANDIDATES) {
        if !terms.iter().any(|t| t.eq_ignore_ascii_case(&c)) {
            terms.push(c);
        }
    }
    let mut out: Vec<String> = Vec::new();
    for t in terms {
        if !common(&t)
            && crate::quality::keyword_in_note(&tok, &t, &other_text)
            && !out.iter().any(|o| o.eq_ignore_ascii_case(&t))
        {
            out.push(t.to_lowercase());
        }
        if out.len() == 6 {
            break;
        }
    }
    out
}

/// Prompt 2 for small models: links only, at most three, each to a neighbour that shares a
/// term with the new note and naming that term (the reason is "both mention …"); no
/// neighbour updates (a small model's rewrites were measured to be junk). Neighbours that
/// share nothing but `common` terms (see [`shared_terms`]) are not offered. `None` when no
/// neighbour can be linked.
pub fn link_guided(
    note: &Neighbour,
    neighbours: &[Neighbour],
    handles: &Handles,
    common: &dyn Fn(&str) -> bool,
) -> Option<Prompt> {
    let mut shown = String::new();
    let mut options = Vec::new();
    // per option, the most bytes its link can take
    let mut link_bytes = Vec::new();
    for (i, n) in neighbours.iter().enumerate() {
        let shared = shared_terms(note, n, common);
        if shared.is_empty() {
            continue;
        }
        link_bytes.push(GUIDED_LINK_BYTES + longest_bytes(&shared, 1));
        let h = Handles::handle(i);
        shown.push_str(&format!(
            "{h}{}: {}\n",
            n.time
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default(),
            fenced(&cut(&n.content, GUIDED_PREVIEW_CHARS)).replace('\n', " ")
        ));
        options.push(json!({
            "type": "object",
            "properties": {
                "target": {"type": "string", "enum": [h]},
                "kind": {"type": "string", "enum": LINK_KINDS},
                "shared": {"type": "string", "enum": shared},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}
            },
            "required": ["target", "kind", "shared", "confidence"],
            "additionalProperties": false
        }));
    }
    if options.is_empty() || handles.is_empty() {
        return None;
    }
    let user = format!(
        "New note{}:\n{}\n\nOlder notes:\n{shown}\nLink the new note to the older notes it is really about \
         (same person, event, plan or thing); none is fine.",
        note.time
            .as_deref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default(),
        fenced(&cut(&note.content, NOTE_CHARS)),
    );
    let max = options.len().min(GUIDED_MAX_LINKS);
    link_bytes.sort_unstable_by(|a, b| b.cmp(a));
    let longest = JSON_SLACK + link_bytes.iter().take(max).sum::<usize>();
    Some(Prompt {
        messages: system_and_user(GUIDED_SYSTEM, user),
        schema_name: "links",
        schema: json!({
            "type": "object",
            "properties": {
                "links": {"type": "array", "maxItems": max, "items": {"anyOf": options}}
            },
            "required": ["links"],
            "additionalProperties": false
        }),
        max_tokens: tokens_for(longest),
    })
}

/// Links below this confidence from a guided (small-model) answer are not kept.
pub const GUIDED_MIN_CONFIDENCE: f64 = 0.5;

impl LinkEvolve {
    /// Reads a guided answer: each link's reason is built from the term it names
    /// ("both mention …"), links under [`GUIDED_MIN_CONFIDENCE`] are dropped and counted,
    /// and there are no updates.
    pub fn from_guided(v: &Value, handles: &Handles) -> Result<Self, String> {
        let mut v = v.clone();
        let links = v
            .get_mut("links")
            .and_then(Value::as_array_mut)
            .ok_or("'links' must be an array")?;
        let mut low = 0;
        links.retain(|l| {
            let keep = l
                .get("confidence")
                .and_then(Value::as_f64)
                .is_none_or(|c| c >= GUIDED_MIN_CONFIDENCE);
            low += usize::from(!keep);
            keep
        });
        for l in links.iter_mut() {
            let shared = l
                .get("shared")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .to_owned();
            if let Some(o) = l.as_object_mut() {
                o.remove("shared");
                let reason = if shared.is_empty() {
                    String::new()
                } else {
                    format!("both mention {shared}")
                };
                o.insert("reason".into(), Value::String(reason));
            }
        }
        let mut out = Self::from_value(&json!({"links": links, "updates": []}), handles)?;
        out.dropped += low;
        if out.links.len() > GUIDED_MAX_LINKS {
            out.dropped += out.links.len() - GUIDED_MAX_LINKS;
            out.links.truncate(GUIDED_MAX_LINKS);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::testing::{id, nb};

    #[test]
    fn guided_construction_can_only_choose_the_notes_terms_and_known_tags() {
        let tags = crate::quality::tag_choices(&["garden".into()], 20);
        let note = "Planted tomatoes and basil in the garden bed.";
        let p = construct_guided(note, "2024-05-02", &guided_candidates(note), &tags);
        let kw = &p.schema["properties"]["keywords"]["items"]["enum"];
        let kw: Vec<&str> = kw
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            kw.contains(&"tomatoes") && kw.contains(&"garden bed"),
            "{kw:?}"
        );
        assert!(!kw.iter().any(|k| k.contains("keyword") || *k == "the"));
        assert_eq!(
            p.schema["properties"]["tags"]["items"]["enum"][0],
            json!("garden")
        );
        // the examples are shown as earlier turns; the last message is the note alone
        let last = &p.messages.last().unwrap().content;
        assert!(last.starts_with("Note (2024-05-02)") && !last.contains("Return"));
        assert_eq!(p.messages.len(), 6);
        let empty = construct_guided("ok", "2024-05-02", &guided_candidates("ok"), &tags);
        assert_eq!(empty.schema["properties"]["keywords"]["maxItems"], json!(0));
    }

    /// The strings of an enum in the schema at `path`, longest first.
    fn enum_longest_first(schema: &Value, path: &[&str]) -> Vec<String> {
        let mut v = schema;
        for p in path {
            v = &v[*p];
        }
        let mut out: Vec<String> = v
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out
    }

    /// A Chinese note's terms are whole clauses of several bytes per character: the longest
    /// answer the schema allows (the five longest terms, the two longest tags, the longest
    /// context, with generous whitespace) must fit the request's budget, which a fixed 300
    /// did not (an answer cut off inside a keyword, seen with the built-in model).
    #[test]
    fn the_guided_budgets_fit_the_longest_answer_the_schema_allows() {
        let note = "卢曼用卡片盒笔记法积累了约九万张卡片，写出七十多本书；关键是每张卡片只写一个想法，并和其他卡片互相链接。";
        let tags = crate::quality::tag_choices(&["知识管理与个人笔记方法".into()], 20);
        let p = construct_guided(note, "2024-05-02", &guided_candidates(note), &tags);
        let kw = enum_longest_first(&p.schema, &["properties", "keywords", "items", "enum"]);
        let tg = enum_longest_first(&p.schema, &["properties", "tags", "items", "enum"]);
        let context = format!("About {}", "’".repeat(140));
        let longest = json!({
            "context": context,
            "keywords": kw.iter().take(5).collect::<Vec<_>>(),
            "tags": tg.iter().take(2).collect::<Vec<_>>(),
        });
        let pretty = serde_json::to_string_pretty(&longest).unwrap_or_default();
        assert!(
            pretty.len() > 300,
            "the case needs more than the old budget: {}",
            pretty.len()
        );
        assert!(
            pretty.len() <= p.max_tokens as usize,
            "{} bytes, budget {}",
            pretty.len(),
            p.max_tokens
        );
        // an English note keeps at least the usual budget
        let en = "Planted tomatoes and basil in the garden bed.";
        assert!(
            construct_guided(en, "2024-05-02", &guided_candidates(en), &tags).max_tokens >= 300
        );

        // links: three neighbours sharing long Chinese terms
        let me = nb("m", note);
        let ns = [
            nb(
                "a",
                "卢曼用卡片盒笔记法积累了约九万张卡片，也写了很多文章。",
            ),
            nb("b", "写出七十多本书；这是卢曼的成果。"),
            nb("c", "关键是每张卡片只写一个想法，不要混在一起。"),
        ];
        let h = Handles::new(ns.iter().map(|n| n.id.clone()));
        let p = link_guided(&me, &ns, &h, &|_| false).unwrap();
        let options = p.schema["properties"]["links"]["items"]["anyOf"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(!options.is_empty());
        let links: Vec<Value> = options
            .iter()
            .take(GUIDED_MAX_LINKS)
            .map(|o| {
                let shared = enum_longest_first(o, &["properties", "shared", "enum"]);
                json!({
                    "target": "N10",
                    "kind": "same-entity",
                    "shared": shared.first().cloned().unwrap_or_default(),
                    "confidence": 0.123_456_789_012_345_6,
                })
            })
            .collect();
        let pretty = serde_json::to_string_pretty(&json!({ "links": links })).unwrap_or_default();
        assert!(
            pretty.len() <= p.max_tokens as usize,
            "{} bytes, budget {}",
            pretty.len(),
            p.max_tokens
        );
    }

    #[test]
    fn guided_links_offer_only_neighbours_that_share_a_term() {
        let me = nb("m", "The garden tomatoes got blight after the rain.");
        let ns = [
            nb("a", "Bought tomato seedlings for the garden."),
            nb("b", "Quarterly tax return is due in April."),
        ];
        let h = Handles::new(ns.iter().map(|n| n.id.clone()));
        let p = link_guided(&me, &ns, &h, &|_| false).unwrap();
        let options = p.schema["properties"]["links"]["items"]["anyOf"]
            .as_array()
            .unwrap();
        assert_eq!(options.len(), 1);
        assert_eq!(options[0]["properties"]["target"]["enum"], json!(["N1"]));
        let shared = &options[0]["properties"]["shared"]["enum"];
        assert!(
            shared.as_array().unwrap().contains(&json!("garden")),
            "{shared}"
        );
        assert!(p.messages[1].content.contains("(2024-05-01)"));
        assert!(
            !p.messages[1].content.contains("tax return"),
            "N2 shares nothing"
        );
        assert!(
            p.schema["properties"].get("updates").is_none(),
            "no evolution"
        );
        assert!(link_guided(&me, &ns[1..], &Handles::new([id("b")]), &|_| false).is_none());
    }

    #[test]
    fn guided_links_do_not_name_terms_common_to_the_whole_memory() {
        let me = nb("m", "Gina: thanks, the dance studio opens on Friday!");
        let ns = [
            nb("a", "Gina: thanks for coming to the recital."),
            nb("b", "Jon: the studio lease is signed."),
        ];
        let h = Handles::new(ns.iter().map(|n| n.id.clone()));
        let everywhere = |t: &str| t.eq_ignore_ascii_case("gina");
        assert!(shared_terms(&me, &ns[0], &|_| false).contains(&"gina".to_owned()));
        assert!(shared_terms(&me, &ns[0], &everywhere).is_empty());
        let p = link_guided(&me, &ns, &h, &everywhere).unwrap();
        let options = p.schema["properties"]["links"]["items"]["anyOf"]
            .as_array()
            .unwrap();
        // N1 shares only the speaker's name (and a thank-you): not offered
        assert_eq!(options.len(), 1);
        assert_eq!(options[0]["properties"]["target"]["enum"], json!(["N2"]));
        assert_eq!(
            options[0]["properties"]["shared"]["enum"],
            json!(["studio"])
        );
    }

    #[test]
    fn guided_answers_get_reasons_from_the_shared_term_and_low_confidence_is_dropped() {
        let h = Handles::new([id("a"), id("b")]);
        let le = LinkEvolve::from_guided(
            &json!({"links": [
                {"target": "N1", "kind": "relates", "shared": "garden", "confidence": 0.9},
                {"target": "N2", "kind": "supports", "shared": "rain", "confidence": 0.2}
            ]}),
            &h,
        )
        .unwrap();
        assert_eq!(le.links.len(), 1);
        assert_eq!(le.links[0].reason, "both mention garden");
        assert_eq!(le.dropped, 1);
        assert!(le.updates.is_empty());
    }
}
