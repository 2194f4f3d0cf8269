//! Front matter: the YAML read under size, nesting and alias guards into tags,
//! keywords, context, dates, aliases and links.

use super::*;

pub(super) fn read_front_matter(front: &str, p: &mut ParsedFile) -> Result<(), String> {
    if front.len() > MAX_FRONT_MATTER {
        return Err(format!(
            "front matter of {} KB is larger than the {} KB this importer reads",
            front.len() / 1024,
            MAX_FRONT_MATTER / 1024
        ));
    }
    let yaml_error = |e: ScanError| {
        let m = e.marker();
        format!(
            "front matter is not valid YAML: {} (line {}, column {} of the front matter)",
            e.info(),
            m.line() + 1,
            m.col() + 1
        )
    };
    // Measured with the YAML event parser (which keeps its own stacks, so any nesting is
    // safe to scan) before the tree is built: deep nesting would make dropping the tree
    // recurse that deep, and YAML aliases are copied where they are used, so a few hundred
    // bytes of nested `*a` expand to gigabytes ("billion laughs").
    let mut size = ExpandedSize::default();
    let mut events = Parser::new_from_str(front);
    loop {
        // event by event: `Parser::load` would recurse once per nesting level
        let (event, _) = events.next_token().map_err(yaml_error)?;
        if event == Event::StreamEnd {
            break;
        }
        size.add(event);
    }
    if size.deepest > MAX_NESTING {
        return Err("front matter is nested too deeply to be note properties".into());
    }
    if size.total > MAX_EXPANDED {
        return Err(format!(
            "front matter expands to more than {} KB through YAML aliases (*name); not read",
            MAX_EXPANDED / 1024
        ));
    }
    let docs = YamlLoader::load_from_str(front).map_err(yaml_error)?;
    let map = match docs.into_iter().next() {
        None | Some(Yaml::Null) => return Ok(()),
        Some(Yaml::Hash(h)) => h,
        Some(_) => {
            return Err("front matter is not a list of `key: value` properties".into());
        }
    };
    for (k, v) in &map {
        let Some(key) = scalar(k) else { continue };
        let key = key.to_ascii_lowercase();
        match key.as_str() {
            "tags" | "tag" => {
                for t in strings(v, true) {
                    push_unique(&mut p.tags, t.trim_start_matches('#').trim().to_owned());
                }
            }
            "keywords" | "keyword" => {
                for t in strings(v, false) {
                    push_unique(&mut p.keywords, t);
                }
            }
            "context" | "description" | "summary" if p.context.is_empty() => {
                p.context = scalar(v).unwrap_or_default().trim().to_owned();
            }
            "aliases" | "alias" => {
                for t in strings(v, false) {
                    push_unique(&mut p.aliases, t);
                }
            }
            "created" | "date" | "created_at" | "created-at" | "time" => {
                if p.created.is_some() && key != "created" {
                    continue;
                }
                match scalar(v).map(|s| parse_date(&s)) {
                    Some(Some(t)) => p.created = Some(t),
                    Some(None) | None if matches!(v, Yaml::Null) => {}
                    _ => p.warnings.push(format!(
                        "'{key}' is not a date or time this importer understands ({}); the note gets the file's time",
                        scalar(v).unwrap_or_else(|| "not text".into())
                    )),
                }
            }
            "kasten_id" => match scalar(v).map(|s| NoteId::parse(&s)) {
                Some(Ok(id)) => p.kasten_id = Some(id),
                _ => p
                    .warnings
                    .push("'kasten_id' is not a Kasten note id; a new id is given".into()),
            },
            "kasten_source" => p.kasten_source = scalar(v).filter(|s| !s.trim().is_empty()),
            "kasten_enriched" => p.kasten_enriched = matches!(v, Yaml::Boolean(true)),
            "kasten_archived" => p.kasten_archived = matches!(v, Yaml::Boolean(true)),
            "links" => read_links(v, p),
            _ => {}
        }
    }
    Ok(())
}

/// The size of a YAML stream as the loader builds it, every alias expanded: the bytes of
/// each scalar plus one per node. Anchors are measured when they close; an alias adds the
/// size of its anchor again.
#[derive(Default)]
pub(super) struct ExpandedSize {
    /// Open sequences and mappings: their anchor id (0: none) and size so far.
    open: Vec<(usize, usize)>,
    anchors: HashMap<usize, usize>,
    total: usize,
    /// The deepest nesting of sequences and mappings.
    deepest: usize,
}

impl ExpandedSize {
    fn add(&mut self, ev: Event) {
        let size = match ev {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.open.push((anchor, 1));
                self.deepest = self.deepest.max(self.open.len());
                return;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((anchor, size)) = self.open.pop() else {
                    return;
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, size);
                }
                size
            }
            Event::Scalar(value, _, anchor, _) => {
                let size = value.len().saturating_add(1);
                if anchor > 0 {
                    self.anchors.insert(anchor, size);
                }
                size
            }
            Event::Alias(anchor) => self.anchors.get(&anchor).copied().unwrap_or(1),
            _ => return,
        };
        match self.open.last_mut() {
            Some((_, parent)) => *parent = parent.saturating_add(size),
            None => self.total = self.total.saturating_add(size),
        }
    }
}

pub(super) fn read_links(v: &Yaml, p: &mut ParsedFile) {
    let Yaml::Array(items) = v else {
        // Obsidian users also keep `links: "[[a]]"` style properties: plain targets
        for t in strings(v, false) {
            push_plain_link(&t, p);
        }
        return;
    };
    for item in items {
        match item {
            Yaml::Hash(h) => {
                let get = |k: &str| h.get(&Yaml::String(k.to_owned()));
                let Some(target) = get("target").or_else(|| get("to")).and_then(scalar) else {
                    p.warnings
                        .push("a link in the front matter has no 'target'; skipped".into());
                    continue;
                };
                let kind = get("kind")
                    .and_then(scalar)
                    .map(|k| k.trim().to_owned())
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| WIKILINK_KIND.to_owned());
                let reason = get("reason").and_then(scalar).unwrap_or_default();
                let confidence = get("confidence")
                    .and_then(|c| match c {
                        Yaml::Real(r) => r.parse::<f64>().ok(),
                        Yaml::Integer(i) => Some(*i as f64),
                        _ => None,
                    })
                    .filter(|c| c.is_finite())
                    .map_or(1.0, |c| c.clamp(0.0, 1.0));
                // a link held for review stays held; any other status is taken as accepted
                let status = match get("status")
                    .and_then(scalar)
                    .as_deref()
                    .map(LinkStatus::parse)
                {
                    Some(Ok(LinkStatus::Proposed)) => LinkStatus::Proposed,
                    _ => LinkStatus::Accepted,
                };
                p.links.push(FrontMatterLink {
                    target: strip_brackets(&target),
                    kind,
                    reason,
                    confidence,
                    status,
                });
            }
            other => {
                if let Some(t) = scalar(other) {
                    push_plain_link(&t, p);
                }
            }
        }
    }
}

pub(super) fn push_plain_link(t: &str, p: &mut ParsedFile) {
    let target = strip_brackets(t);
    if !target.is_empty() {
        p.links.push(FrontMatterLink {
            target,
            kind: WIKILINK_KIND.to_owned(),
            reason: String::new(),
            confidence: 1.0,
            status: LinkStatus::Accepted,
        });
    }
}

/// `[[a|b]]` → `a`; `a` → `a`.
pub(super) fn strip_brackets(t: &str) -> String {
    let t = t.trim();
    let t = t
        .strip_prefix("[[")
        .and_then(|x| x.strip_suffix("]]"))
        .unwrap_or(t);
    t.split('|').next().unwrap_or("").trim().to_owned()
}

pub(super) fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A list property: a YAML list, or one text split at commas (and spaces, for tags).
pub(super) fn strings(y: &Yaml, split_spaces: bool) -> Vec<String> {
    let parts: Vec<String> = match y {
        Yaml::Array(a) => a.iter().filter_map(scalar).collect(),
        other => match scalar(other) {
            Some(s) => s
                .split(|c: char| c == ',' || (split_spaces && c.is_whitespace()))
                .map(str::to_owned)
                .collect(),
            None => Vec::new(),
        },
    };
    parts
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

pub(super) fn push_unique(v: &mut Vec<String>, s: String) {
    if !s.is_empty() && !v.iter().any(|x| x == &s) {
        v.push(s);
    }
}

/// RFC 3339, `YYYY-MM-DD`, `YYYY-MM-DD HH:MM[:SS]`, `YYYY-MM-DDTHH:MM[:SS]` (UTC).
pub fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(s, f) {
            return Some(d.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
}
