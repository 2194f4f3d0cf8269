//! "May be outdated" flags: the notes that used a value a supersession replaced.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kasten_core::text::Tokenizer;
use kasten_core::{JobId, LinkKind, Note, NoteId, NoteStatus};
use kasten_store::{DifferWrite, FlagWrite, MAY_BE_OUTDATED, SUPERSEDES};

use crate::{Engine, EngineError};

/// Link kinds through which a note builds on another's value.
const DEPENDS: &[&str] = &[
    LinkKind::Supports.as_str(),
    LinkKind::Elaborates.as_str(),
    LinkKind::Causes.as_str(),
    LinkKind::Follows.as_str(),
];

/// Link kinds that say nothing about using a value: the supersession links themselves,
/// flags, and a `contradicts` (the note states another value).
const NOT_DEPENDING: &[&str] = &[SUPERSEDES, MAY_BE_OUTDATED, crate::merge::CONTRADICTS];

/// What a supersession changed, read back from its reason ("rent: 1,200 euros → 1,300
/// euros", as [`kasten_core::supersession::Supersession::reason`] writes it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Replaced {
    attribute: Option<Vec<String>>,
    attribute_text: String,
    old_text: String,
    /// The old value's terms, and its number's alone when it has one ("1,200 euros":
    /// `1 200 euro`, `1 200`).
    old: Vec<Vec<String>>,
}

impl Replaced {
    pub(crate) fn parse(tokenizer: &Tokenizer, reason: &str) -> Option<Self> {
        let (attribute, values) = reason.split_once(": ")?;
        let (old, _new) = values.split_once(" → ")?;
        let (attribute, old_text) = (attribute.trim(), old.trim());
        let terms = tokenizer.tokenize(old_text);
        if terms.is_empty() {
            return None;
        }
        let mut old = vec![terms.clone()];
        let number: Vec<String> = terms
            .iter()
            .take_while(|t| t.chars().all(|c| c.is_ascii_digit()))
            .cloned()
            .collect();
        if !number.is_empty() && number.len() < terms.len() {
            old.push(number);
        }
        let attr_terms = tokenizer.tokenize(attribute);
        Some(Self {
            attribute: (attribute != "value" && !attr_terms.is_empty()).then_some(attr_terms),
            attribute_text: attribute.to_owned(),
            old_text: old_text.to_owned(),
            old,
        })
    }

    /// Whether `text` states the old value.
    fn names_value(&self, tokenizer: &Tokenizer, text: &str) -> bool {
        let terms = tokenizer.tokenize(text);
        self.old
            .iter()
            .any(|v| terms.windows(v.len()).any(|w| w == v.as_slice()))
    }

    /// What of the replaced value `text` uses, in words ("rent 1,200 euros", "rent"), or
    /// `None`.
    fn used_in(&self, tokenizer: &Tokenizer, text: &str) -> Option<String> {
        let terms = tokenizer.tokenize(text);
        let attribute = self
            .attribute
            .as_ref()
            .is_some_and(|a| a.iter().all(|t| terms.contains(t)));
        let value = self
            .old
            .iter()
            .any(|v| terms.windows(v.len()).any(|w| w == v.as_slice()));
        match (attribute, value) {
            (true, true) => Some(format!("{} {}", self.attribute_text, self.old_text)),
            (false, true) => Some(self.old_text.clone()),
            (true, false) => Some(self.attribute_text.clone()),
            (false, false) => None,
        }
    }
}

impl Engine {
    /// The "may be outdated" flags the supersession `successor` → `superseded` raises: on
    /// each active note linked to the superseded note in force — by a link of a kind that
    /// builds on it (supports, elaborates, causes, follows) whose note uses the replaced
    /// value (states the old value or names the attribute), or by any link whose reason
    /// states the old value. Never on the two notes themselves. One event for all of them.
    pub(crate) async fn outdated_flags(
        &self,
        successor: &NoteId,
        superseded: &NoteId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<Vec<FlagWrite>, EngineError> {
        self.outdated_flags_of(&[(successor, superseded, reason)], at)
            .await
    }

    /// [`Engine::outdated_flags`] of several supersessions (successor, superseded,
    /// reason), with two reads for all of them: the links in force of every superseded
    /// note, then the notes they reach. One event per supersession.
    async fn outdated_flags_of(
        &self,
        supersessions: &[(&NoteId, &NoteId, &str)],
        at: DateTime<Utc>,
    ) -> Result<Vec<FlagWrite>, EngineError> {
        let tokenizer = Tokenizer::default();
        let parsed: Vec<(&NoteId, &NoteId, &str, Replaced)> = supersessions
            .iter()
            .filter_map(|&(successor, superseded, reason)| {
                Replaced::parse(&tokenizer, reason).map(|r| (successor, superseded, reason, r))
            })
            .collect();
        if parsed.is_empty() {
            return Ok(Vec::new());
        }
        let mut superseded: Vec<NoteId> = parsed.iter().map(|p| p.1.clone()).collect();
        superseded.sort_unstable();
        superseded.dedup();
        let links = self.store.links_in_force_of_many(&superseded).await?;
        // for each supersession, each other note and whether a link's reason states the
        // old value
        let mut linked_of: Vec<Vec<(NoteId, bool)>> = Vec::with_capacity(parsed.len());
        for (successor, superseded, _, replaced) in &parsed {
            let mut linked: Vec<(NoteId, bool)> = Vec::new();
            for l in &links {
                if NOT_DEPENDING.contains(&l.kind.as_str()) {
                    continue;
                }
                let other = if l.from == superseded.as_str() {
                    &l.to
                } else if l.to == superseded.as_str() {
                    &l.from
                } else {
                    continue;
                };
                let other = NoteId::parse(other)?;
                if &other == *successor || &other == *superseded {
                    continue;
                }
                let named = replaced.names_value(&tokenizer, &l.reason);
                if !named && !DEPENDS.contains(&l.kind.as_str()) {
                    continue;
                }
                match linked.iter_mut().find(|(n, _)| *n == other) {
                    Some(e) => e.1 |= named,
                    None => linked.push((other, named)),
                }
            }
            linked_of.push(linked);
        }
        let mut ids: Vec<NoteId> = linked_of.iter().flatten().map(|(n, _)| n.clone()).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        ids.sort_unstable();
        ids.dedup();
        let notes: HashMap<NoteId, Note> = self
            .store
            .get_notes(&ids)
            .await?
            .into_iter()
            .filter(|n| n.status == NoteStatus::Active)
            .map(|n| (n.id.clone(), n))
            .collect();
        let mut out = Vec::new();
        for ((successor, superseded, reason, replaced), linked) in parsed.iter().zip(linked_of) {
            if linked.is_empty() {
                continue;
            }
            let event = JobId::generate().to_string();
            for (id, named) in linked {
                let Some(n) = notes.get(&id) else {
                    continue;
                };
                let uses = match replaced.used_in(&tokenizer, &n.content) {
                    Some(what) => what,
                    None if named => replaced.old_text.clone(),
                    None => continue,
                };
                out.push(FlagWrite {
                    successor: (*successor).clone(),
                    superseded: (*superseded).clone(),
                    note: id,
                    event: event.clone(),
                    reason: format!("uses {uses}, replaced by note {successor} ({reason})"),
                    at,
                });
            }
        }
        Ok(out)
    }

    /// The flags that the accepted supersessions among the links written with new notes
    /// raise (see [`Engine::outdated_flags`]), with two reads for the whole batch.
    pub(crate) async fn flags_on_write(
        &self,
        links: &[DifferWrite],
        at: DateTime<Utc>,
    ) -> Result<Vec<FlagWrite>, EngineError> {
        let accepted: Vec<(&NoteId, &NoteId, &str)> = links
            .iter()
            .filter(|d| d.accepted && d.kind == SUPERSEDES)
            .map(|d| (&d.from, &d.to, d.reason.as_str()))
            .collect();
        self.outdated_flags_of(&accepted, at).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kasten_core::{LinkStatus, NewNote};

    use super::*;
    use crate::supersede::tests::{NOISE, add, engine, supersedes_links};
    use crate::{PolicyMode, ReviewStatus};

    /// The rent example with notes around the old figure: two build on it (one by a link
    /// that elaborates it and names the rent, one by a link whose reason states the
    /// figure), two do not (a link that elaborates it but says nothing of the rent; a note
    /// about the rent linked only as related).
    struct Dependents {
        old: NoteId,
        budget: NoteId,
        split: NoteId,
        flat: NoteId,
        due: NoteId,
    }

    async fn dependents(e: &Engine) -> Dependents {
        for n in NOISE {
            add(e, n, "2026-02-01").await;
        }
        let old = add(e, "Our rent is 1,200 euros a month.", "2026-03-01").await;
        let budget = add(e, "Budget for the year: rent 14,400 euros.", "2026-03-02").await;
        let split = add(e, "Tom and I share the flat costs evenly.", "2026-03-03").await;
        let flat = add(e, "The flat has two bedrooms and a balcony.", "2026-03-04").await;
        let due = add(
            e,
            "The rent is due on the first day of each month.",
            "2026-03-05",
        )
        .await;
        e.link(
            &budget,
            &old,
            Some("elaborates"),
            "twelve months of it",
            "user",
        )
        .await
        .unwrap();
        e.link(
            &split,
            &old,
            Some("relates"),
            "we each pay half of the 1,200 euros",
            "user",
        )
        .await
        .unwrap();
        e.link(&old, &flat, Some("elaborates"), "the flat we rent", "user")
            .await
            .unwrap();
        e.link(&due, &old, Some("relates"), "", "user")
            .await
            .unwrap();
        Dependents {
            old,
            budget,
            split,
            flat,
            due,
        }
    }

    /// The flags (any status) from `from`, by target.
    async fn flags_from(e: &Engine, from: &NoteId) -> Vec<kasten_core::Link> {
        let mut l: Vec<_> = e
            .get(from)
            .await
            .unwrap()
            .links
            .into_iter()
            .filter(|l| l.kind == MAY_BE_OUTDATED && &l.from == from)
            .collect();
        l.sort_by(|a, b| a.to.cmp(&b.to));
        l
    }

    fn sorted(mut v: Vec<NoteId>) -> Vec<NoteId> {
        v.sort();
        v
    }

    #[tokio::test]
    async fn a_supersession_in_force_flags_the_notes_that_used_the_old_value() {
        let e = engine(PolicyMode::Auto).await;
        let d = dependents(&e).await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        assert_eq!(supersedes_links(&e, &new).await.len(), 1);
        let flags = flags_from(&e, &new).await;
        let flagged: Vec<NoteId> = flags.iter().map(|l| l.to.clone()).collect();
        assert_eq!(
            flagged,
            sorted(vec![d.budget.clone(), d.split.clone()]),
            "{flags:#?}"
        );
        // a flag asks for a look, whatever the policy: a proposal, even under auto
        assert!(flags.iter().all(|l| l.status == LinkStatus::Proposed));
        let budget = flags.iter().find(|l| l.to == d.budget).unwrap();
        assert_eq!(
            budget.reason,
            format!("uses rent, replaced by note {new} (rent: 1,200 euros → 1,300 euros)")
        );
        let split = flags.iter().find(|l| l.to == d.split).unwrap();
        assert!(
            split.reason.starts_with("uses 1,200 euros, replaced by"),
            "{split:?}"
        );
        // never rewritten
        let b = e.get(&d.budget).await.unwrap().note;
        assert_eq!(b.content, "Budget for the year: rent 14,400 euros.");
        assert_eq!(b.version, 1);
        // in Review, with the supersession it comes from
        let queue = e.proposals(&[], 50).await.unwrap();
        let sup = queue.iter().find(|i| i.label == SUPERSEDES).unwrap();
        let items: Vec<_> = queue
            .iter()
            .filter(|i| i.label == MAY_BE_OUTDATED)
            .collect();
        assert_eq!(items.len(), 2, "{queue:#?}");
        for i in &items {
            let o = i.outdated.as_ref().unwrap();
            assert_eq!(Some(&o.note), i.target.as_ref());
            assert_eq!(o.superseded, d.old.to_string());
            assert_eq!(o.successor, new.to_string());
            assert_eq!(o.supersession.as_deref(), Some(sup.id.as_str()));
            assert_eq!(i.status, ReviewStatus::Proposed);
        }
        assert!(sup.outdated.is_none());
        let _ = (d.flat, d.due);
        e.close().await;
    }

    /// Two values replaced by the notes of one write: the batch's flags are read together,
    /// and each note that used an old value is flagged by the supersession of that value.
    #[tokio::test]
    async fn two_supersessions_in_one_write_flag_each_its_own_dependents() {
        let e = engine(PolicyMode::Auto).await;
        let d = dependents(&e).await;
        let gym = add(&e, "The gym membership is 35 euros a month.", "2026-03-01").await;
        let sport = add(
            &e,
            "Sport budget: the gym membership 35 euros.",
            "2026-03-02",
        )
        .await;
        e.link(&sport, &gym, Some("supports"), "", "user")
            .await
            .unwrap();
        let at = |day: &str| Some(format!("{day}T09:00:00Z").parse().unwrap());
        let batch = vec![
            NewNote::new("From September the rent is 1,300 euros.")
                .unwrap()
                .at(at("2026-09-01")),
            NewNote::new("From September the gym membership is 45 euros a month.")
                .unwrap()
                .at(at("2026-09-01")),
        ];
        let mut written = Vec::new();
        e.add_batches_merging([batch], |b| written.extend(b.notes))
            .await
            .unwrap();
        let (rent, gym_now) = (written[0].id.clone(), written[1].id.clone());
        assert_eq!(supersedes_links(&e, &rent).await.len(), 1);
        assert_eq!(supersedes_links(&e, &gym_now).await.len(), 1);
        let to = |flags: Vec<kasten_core::Link>| -> Vec<NoteId> {
            flags.into_iter().map(|l| l.to).collect()
        };
        assert_eq!(
            to(flags_from(&e, &rent).await),
            sorted(vec![d.budget.clone(), d.split.clone()])
        );
        let gym_flags = flags_from(&e, &gym_now).await;
        assert_eq!(to(gym_flags.clone()), vec![sport.clone()]);
        assert!(
            gym_flags[0].reason.contains("35 euros → 45 euros"),
            "{gym_flags:?}"
        );
        e.close().await;
    }

    #[tokio::test]
    async fn flags_come_with_the_accepted_supersession_and_go_exactly_with_its_rollback() {
        let e = engine(PolicyMode::Review).await;
        let d = dependents(&e).await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        // a proposal flags nothing yet
        assert!(flags_from(&e, &new).await.is_empty());
        let sup = e
            .proposals(&[], 50)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.label == SUPERSEDES)
            .unwrap();
        let in_force_before: BTreeSet<_> = e
            .store()
            .accepted_links()
            .await
            .unwrap()
            .into_iter()
            .collect();
        e.accept(&sup.id, &crate::FieldEdit::default(), "user")
            .await
            .unwrap();
        let flags = flags_from(&e, &new).await;
        let flagged: Vec<NoteId> = flags.iter().map(|l| l.to.clone()).collect();
        assert_eq!(flagged, sorted(vec![d.budget.clone(), d.split.clone()]));
        assert!(flags.iter().all(|l| l.status == LinkStatus::Proposed));
        let flag_items = |q: Vec<crate::ReviewItem>| -> Vec<String> {
            let mut v: Vec<String> = q
                .into_iter()
                .filter(|i| i.label == MAY_BE_OUTDATED)
                .map(|i| i.id)
                .collect();
            v.sort();
            v
        };
        let waiting = flag_items(e.proposals(&[], 50).await.unwrap());
        assert_eq!(waiting.len(), 2);
        // rolled back: its flags leave Review, nothing else in force changed
        e.rollback(&sup.id, "user").await.unwrap();
        assert!(flag_items(e.proposals(&[], 50).await.unwrap()).is_empty());
        assert_eq!(
            flag_items(e.proposals(&[ReviewStatus::RolledBack], 50).await.unwrap()),
            waiting,
            "withdrawn, kept in history"
        );
        let in_force_after: BTreeSet<_> = e
            .store()
            .accepted_links()
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(in_force_after, in_force_before);
        // re-applied: the same flags wait again
        e.reapply(&sup.id, "user").await.unwrap();
        assert_eq!(flag_items(e.proposals(&[], 50).await.unwrap()), waiting);
        // the user dismisses one and acknowledges the other: a rollback leaves both decided
        let budget_flag = e
            .proposals(&[], 50)
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.target.as_deref() == Some(d.budget.as_str()) && i.label == MAY_BE_OUTDATED)
            .unwrap();
        let split_flag = waiting.iter().find(|f| **f != budget_flag.id).unwrap();
        e.reject(&budget_flag.id, "user").await.unwrap();
        e.accept(split_flag, &crate::FieldEdit::default(), "user")
            .await
            .unwrap();
        e.rollback(&sup.id, "user").await.unwrap();
        let statuses: Vec<(NoteId, LinkStatus)> = flags_from(&e, &new)
            .await
            .into_iter()
            .map(|l| (l.to, l.status))
            .collect();
        let mut want = vec![
            (d.budget.clone(), LinkStatus::Rejected),
            (d.split.clone(), LinkStatus::Accepted),
        ];
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(statuses, want);
        e.close().await;
    }

    #[tokio::test]
    async fn accepting_every_link_above_a_confidence_flags_too() {
        let e = engine(PolicyMode::Review).await;
        let d = dependents(&e).await;
        let new = add(&e, "From September the rent is 1,300 euros.", "2026-09-01").await;
        assert!(flags_from(&e, &new).await.is_empty());
        e.accept_links_above(0.5, "user").await.unwrap();
        let flagged: Vec<NoteId> = flags_from(&e, &new)
            .await
            .into_iter()
            .filter(|l| l.status == LinkStatus::Proposed)
            .map(|l| l.to)
            .collect();
        assert_eq!(flagged, sorted(vec![d.budget, d.split]));
        e.close().await;
    }
}
