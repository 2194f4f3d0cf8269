use super::*;

fn serde_word<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("not a string: {other:?}"),
    }
}

macro_rules! round_trips {
    ($t:ty, $words:expr) => {{
        let words: Vec<&str> = <$t>::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(words, $words);
        for v in <$t>::ALL {
            assert_eq!(<$t>::parse(v.as_str()), Ok(*v));
            assert_eq!(v.as_str().parse::<$t>(), Ok(*v));
            assert_eq!(v.to_string(), v.as_str());
            // serde's words are the stored words
            assert_eq!(serde_word(v), v.as_str());
            let back: $t = serde_json::from_value(serde_json::json!(v.as_str()))
                .unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(back, *v);
        }
    }};
}

#[test]
fn every_status_round_trips_through_its_word() {
    round_trips!(
        LinkStatus,
        ["proposed", "accepted", "rejected", "rolled_back"]
    );
    round_trips!(
        RevisionStatus,
        ["proposed", "applied", "rejected", "rolled_back"]
    );
    round_trips!(
        ReviewStatus,
        ["proposed", "applied", "accepted", "rejected", "rolled_back"]
    );
}

#[test]
fn an_unknown_status_is_a_clear_error() {
    let e = LinkStatus::parse("acepted");
    assert_eq!(
        e.as_ref().map_err(ToString::to_string),
        Err(
            "'acepted' is not a link status (one of proposed, accepted, rejected, \
             rolled_back)"
                .to_owned()
        )
    );
    assert!(RevisionStatus::parse("accepted").is_err());
    assert!(ReviewStatus::parse("").is_err());
    assert!(serde_json::from_str::<LinkStatus>("\"Rolled_Back\"").is_err());
}

#[test]
fn every_link_kind_round_trips_and_unknown_words_stay_as_they_came() {
    let words: Vec<&str> = LinkKind::KNOWN.iter().map(LinkKind::as_str).collect();
    assert_eq!(
        words,
        [
            "relates",
            "supports",
            "contradicts",
            "elaborates",
            "causes",
            "follows",
            "same-entity",
            "supersedes",
            "may_be_outdated",
            "wikilink"
        ]
    );
    for k in LinkKind::KNOWN {
        assert_eq!(&LinkKind::parse(k.as_str()), k);
        assert_eq!(serde_word(k), k.as_str());
        let back: LinkKind = serde_json::from_value(serde_json::json!(k.as_str()))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(&back, k);
    }
    // the closed set the app's TypeScript names has the same words ("same-entity" too)
    assert_eq!(LinkKindWord::ALL.len(), LinkKind::KNOWN.len());
    for (k, w) in LinkKind::KNOWN.iter().zip(LinkKindWord::ALL) {
        assert_eq!(&LinkKind::from(*w), k);
        assert_eq!(k.word(), Some(*w));
        assert_eq!(serde_word(w), k.as_str());
    }
    assert_eq!(LinkKind::parse("mentions").word(), None);
    assert_eq!(LinkKind::default(), LinkKind::Relates);
    for w in ["mentions", "Relates", "same_entity", ""] {
        let k = LinkKind::parse(w);
        assert_eq!(k, LinkKind::Other(w.to_owned()));
        assert_eq!(k.as_str(), w);
        assert_eq!(serde_word(&k), w);
    }
    assert!(
        LinkKind::FOR_LLM
            .iter()
            .all(|k| LinkKind::KNOWN.contains(k))
    );
}

#[test]
fn enrichment_states_and_review_kinds_round_trip() {
    round_trips!(Enrich, ["pending", "done", "failed"]);
    round_trips!(ReviewKind, ["link", "edit"]);
    round_trips!(JobState, ["queued", "running", "done", "failed"]);
    round_trips!(JobKind, ["enrich"]);
    round_trips!(EventKind, ["enrich", "merge", "outdated"]);
}

#[test]
fn every_actor_round_trips_and_agents_keep_their_names() {
    let words: Vec<&str> = Actor::KNOWN.iter().map(Actor::as_str).collect();
    assert_eq!(words, ["user", "llm", "import", "merge", "agent"]);
    for a in Actor::KNOWN {
        assert_eq!(&Actor::parse(a.as_str()), a);
        assert_eq!(serde_word(a), a.as_str());
    }
    let named = Actor::agent(" claude-code ");
    assert_eq!(named.as_str(), "agent:claude-code");
    assert_eq!(named.agent_name(), Some("claude-code"));
    assert!(named.is_agent() && Actor::Agent.is_agent() && !Actor::User.is_agent());
    assert_eq!(Actor::parse("agent:claude-code"), named);
    assert_eq!(Actor::agent(""), Actor::Agent);
    assert_eq!(Actor::agent("agent"), Actor::Agent);
    let back: Actor = serde_json::from_value(serde_json::json!("agent:claude-code"))
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(back, named);
    for w in ["default", "User", ""] {
        let a = Actor::parse(w);
        assert_eq!(a, Actor::Other(w.to_owned()));
        assert_eq!(a.as_str(), w);
        assert!(!a.is_agent());
    }
}

#[test]
fn every_action_round_trips_and_other_words_stay_as_they_came() {
    let words: Vec<&str> = Action::KNOWN.iter().map(Action::as_str).collect();
    assert_eq!(
        words,
        [
            "created",
            "construction",
            "evolution",
            "edit",
            "edit_content",
            "propose_link",
            "link",
            "unlink",
            "accept",
            "accept_edited",
            "reject",
            "rollback",
            "rollback_event",
            "reapply",
            "both_true",
            "archive",
            "restore",
            "merge",
            "unmerge",
            "keep",
            "tier",
            "project_open",
            "project_close",
        ]
    );
    assert_eq!(ActionWord::ALL.len(), Action::KNOWN.len());
    for (a, w) in Action::KNOWN.iter().zip(ActionWord::ALL) {
        assert_eq!(&Action::parse(a.as_str()), a);
        assert_eq!(a.as_str().parse::<Action>(), Ok(a.clone()));
        assert_eq!(a.to_string(), a.as_str());
        assert_eq!(serde_word(a), a.as_str());
        let back: Action = serde_json::from_value(serde_json::json!(a.as_str()))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(&back, a);
        // the closed set the app's TypeScript names has the same words
        assert_eq!(&Action::from(*w), a);
        assert_eq!(a.word(), Some(*w));
        assert_eq!(serde_word(w), a.as_str());
    }
    // a word an older or newer version wrote reads back as it was stored
    for w in ["split", "Accept", "rolled_back", ""] {
        let a = Action::parse(w);
        assert_eq!(a, Action::Other(w.to_owned()));
        assert_eq!(a.as_str(), w);
        assert_eq!(serde_word(&a), w);
        let back: Action =
            serde_json::from_value(serde_json::json!(w)).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(back, a);
    }
    assert_eq!(Action::default().as_str(), "");
}

#[test]
fn words_take_the_width_they_are_printed_in() {
    assert_eq!(format!("{:<6}|", Actor::Llm), "llm   |");
    assert_eq!(format!("{:<13}|", Action::Accept), "accept       |");
    assert_eq!(format!("{:>9}|", LinkStatus::Accepted), " accepted|");
    assert_eq!(format!("{}", Action::Other("x".into())), "x");
}

#[test]
fn review_status_follows_stored_status_and_review() {
    assert_eq!(
        ReviewStatus::of_link(LinkStatus::Accepted, false),
        ReviewStatus::Applied
    );
    assert_eq!(
        ReviewStatus::of_link(LinkStatus::Accepted, true),
        ReviewStatus::Accepted
    );
    assert_eq!(
        ReviewStatus::of_revision(RevisionStatus::Applied, true),
        ReviewStatus::Accepted
    );
    assert_eq!(
        ReviewStatus::of_revision(RevisionStatus::RolledBack, true),
        ReviewStatus::RolledBack
    );
    assert!(LinkStatus::Proposed.is_live() && !LinkStatus::RolledBack.is_live());
}
