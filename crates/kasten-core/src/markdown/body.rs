//! The body of a note file: inline `#tags` and `[[wikilinks]]`, read from the text
//! outside code (as Obsidian reads them).

use super::front_matter::push_unique;
use super::*;

pub(super) struct BodyScan {
    pub(super) tags: Vec<String>,
    pub(super) links: Vec<WikiLink>,
}

/// Inline `#tags` and `[[wikilinks]]` of a body, read as Markdown (CommonMark with
/// Obsidian's wikilinks): taken only from text, never from code blocks (fenced or
/// indented), code spans, HTML, link destinations, autolinks or bare URLs. Embeds
/// (`![[image.png]]`) are not links.
pub(super) fn scan_body(body: &str) -> BodyScan {
    let mut out = BodyScan {
        tags: Vec::new(),
        links: Vec::new(),
    };
    // Text runs are gathered until something that is not text ends them, since the parser
    // may cut one run of text into several events.
    let mut run = String::new();
    // The wikilink being read: its target, whether it has an alias (`|`), the alias text.
    let mut wiki: Option<(String, bool, String)> = None;
    // Depth inside embeds, images, code blocks, HTML blocks and autolinks: no tags there.
    let mut opaque = 0usize;
    for event in MdParser::new_ext(body, Options::ENABLE_WIKILINKS) {
        if opaque > 0 {
            match event {
                MdEvent::Start(_) => opaque += 1,
                MdEvent::End(_) => opaque -= 1,
                _ => {}
            }
            continue;
        }
        match event {
            MdEvent::Text(t) => {
                if let Some((_, _, alias)) = wiki.as_mut() {
                    alias.push_str(&t);
                } else {
                    run.push_str(&t);
                }
            }
            MdEvent::SoftBreak | MdEvent::HardBreak => run.push('\n'),
            MdEvent::Start(Tag::Link {
                link_type: LinkType::WikiLink { has_pothole },
                dest_url,
                ..
            }) if wiki.is_none() => {
                scan_text(&run, &mut out);
                run.clear();
                wiki = Some((dest_url.to_string(), has_pothole, String::new()));
            }
            MdEvent::End(TagEnd::Link) if wiki.is_some() => {
                if let Some((target, has_alias, alias)) = wiki.take()
                    && let Some(mut l) = wikilink(&target)
                {
                    let alias = alias.trim();
                    l.alias = (has_alias && !alias.is_empty()).then(|| alias.to_owned());
                    out.links.push(l);
                }
            }
            MdEvent::Start(
                Tag::Image { .. }
                | Tag::CodeBlock(_)
                | Tag::HtmlBlock
                | Tag::Link {
                    link_type: LinkType::Autolink | LinkType::Email | LinkType::WikiLink { .. },
                    ..
                },
            ) => {
                scan_text(&run, &mut out);
                run.clear();
                opaque += 1;
            }
            _ => {
                // code spans, inline HTML, rules, the start or end of any other block or span
                scan_text(&run, &mut out);
                run.clear();
            }
        }
    }
    scan_text(&run, &mut out);
    out
}

/// `#tags` in a run of text: a `#` at the start of a word (or after `(`) followed by
/// letters, digits, `_`, `-` or `/`, not only digits (`#2024` is not a tag). Words that
/// are URLs are skipped.
pub(super) fn scan_text(text: &str, out: &mut BodyScan) {
    for word in text.split_whitespace() {
        if word.contains("://") || word.starts_with("www.") {
            continue;
        }
        let mut prev: Option<char> = None;
        for (at, c) in word.char_indices() {
            if c == '#' && matches!(prev, None | Some('(')) {
                let tag: String = word[at + 1..]
                    .chars()
                    .take_while(|x| x.is_alphanumeric() || matches!(x, '_' | '-' | '/'))
                    .collect();
                let tag = tag.trim_end_matches('/');
                if !tag.is_empty() && tag.chars().any(|x| !x.is_ascii_digit()) {
                    push_unique(&mut out.tags, tag.to_owned());
                }
            }
            prev = Some(c);
        }
    }
}

pub(super) fn wikilink(inner: &str) -> Option<WikiLink> {
    let (target, alias) = match inner.split_once('|') {
        Some((t, a)) => (t, Some(a.trim().to_owned()).filter(|a| !a.is_empty())),
        None => (inner, None),
    };
    let target = target.split(['#', '^']).next().unwrap_or("").trim();
    if target.is_empty() {
        return None; // [[#heading]]: a link inside the same note
    }
    Some(WikiLink {
        target: target.to_owned(),
        alias,
    })
}
