//! The states and kinds a memory's records carry, as types: a link's status and kind, a
//! revision's status, the status the review queue shows, a note's enrichment state, what a
//! review item is, who acted, what was done. Each has one `as_str`/`parse` pair; the words are what the store keeps and what every JSON output
//! (the CLI's `--json`, MCP, the share wire, the app) shows, so they never change.
//!
//! Closed sets serialise through serde's `snake_case` renaming (a test holds it equal to
//! `as_str`), which also gives the app's TypeScript a union of the words. A link kind is
//! open: a kind this build does not know (an import's, a newer version's) is kept as
//! [`LinkKind::Other`] and written back as it came; so is an [`Actor`], which also holds an
//! agent's name (`agent:<name>`), and an [`Action`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::CoreError;

/// Defines a closed state enum: its variants with their words, `ALL`, `as_str`, `parse`
/// (a [`CoreError::UnknownState`] naming the words it takes), `FromStr` and `Display`.
macro_rules! states {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident => $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "specta", derive(specta::Type))]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word stored and shown for this state.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word ),+
                }
            }

            /// The state a stored or typed word names.
            pub fn parse(s: &str) -> Result<Self, CoreError> {
                match s {
                    $( $word => Ok($name::$variant), )+
                    _ => Err(CoreError::UnknownState {
                        what: $what,
                        word: s.to_owned(),
                        expected: [$($word),+].join(", "),
                    }),
                }
            }
        }

        impl FromStr for $name {
            type Err = CoreError;

            fn from_str(s: &str) -> Result<Self, CoreError> {
                Self::parse(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }
    };
}

states! {
    /// Review status of a link as stored.
    LinkStatus, "link status" {
        /// Held for review: neither followed by search nor in the graph.
        Proposed => "proposed",
        /// In force (applied at once or accepted by a person; `reviewed` tells which).
        Accepted => "accepted",
        Rejected => "rejected",
        RolledBack => "rolled_back",
    }
}

impl LinkStatus {
    /// Whether the link is in force or waits for a decision (not rejected or rolled back).
    pub fn is_live(self) -> bool {
        matches!(self, LinkStatus::Proposed | LinkStatus::Accepted)
    }
}

states! {
    /// Status of a revision (a change of a note's annotations or text) as stored.
    RevisionStatus, "revision status" {
        Proposed => "proposed",
        /// In force (applied at once or accepted; `reviewed` tells which).
        Applied => "applied",
        Rejected => "rejected",
        RolledBack => "rolled_back",
    }
}

states! {
    /// Review status of a proposal as the review queue and history show it: a link's or a
    /// revision's stored status with whether a person reviewed it.
    ReviewStatus, "review status" {
        /// Held for review.
        Proposed => "proposed",
        /// In force, not reviewed yet.
        Applied => "applied",
        /// In force and accepted by a person.
        Accepted => "accepted",
        Rejected => "rejected",
        RolledBack => "rolled_back",
    }
}

impl ReviewStatus {
    /// How a link with this stored status shows.
    pub fn of_link(status: LinkStatus, reviewed: bool) -> Self {
        match (status, reviewed) {
            (LinkStatus::Proposed, _) => Self::Proposed,
            (LinkStatus::Accepted, false) => Self::Applied,
            (LinkStatus::Accepted, true) => Self::Accepted,
            (LinkStatus::Rejected, _) => Self::Rejected,
            (LinkStatus::RolledBack, _) => Self::RolledBack,
        }
    }

    /// How a revision with this stored status shows.
    pub fn of_revision(status: RevisionStatus, reviewed: bool) -> Self {
        match (status, reviewed) {
            (RevisionStatus::Proposed, _) => Self::Proposed,
            (RevisionStatus::Applied, false) => Self::Applied,
            (RevisionStatus::Applied, true) => Self::Accepted,
            (RevisionStatus::Rejected, _) => Self::Rejected,
            (RevisionStatus::RolledBack, _) => Self::RolledBack,
        }
    }
}

states! {
    /// Where a note's enrichment stands, as stored (`enrich_state`) and shown: the word of
    /// its `EnrichState`, without the reason.
    Enrich, "note enrichment state" {
        /// Saved, waiting for the LLM.
        Pending => "pending",
        Done => "done",
        Failed => "failed",
    }
}

states! {
    /// Where an enrichment job stands, as stored.
    JobState, "job state" {
        /// Waiting for a worker.
        Queued => "queued",
        /// Claimed by a worker (until its lease runs out).
        Running => "running",
        Done => "done",
        /// Gave up after its attempts.
        Failed => "failed",
    }
}

states! {
    /// What an enrichment job does (the one kind there is).
    JobKind, "job kind" {
        /// Enrich a note: construction, links, evolution.
        Enrich => "enrich",
    }
}

states! {
    /// What made an event (the group a batch of revisions and links hangs off).
    EventKind, "event kind" {
        /// An enrichment of a note by the LLM.
        Enrich => "enrich",
        /// Merge on write: a near-duplicate folded into the note it repeats.
        Merge => "merge",
        /// A supersession raised "may be outdated" flags on the notes that used the old value.
        Outdated => "outdated",
    }
}

states! {
    /// What a review item is: a proposed or applied link, or a change of a note's
    /// annotations (a revision).
    ReviewKind, "review item kind" {
        Link => "link",
        Edit => "edit",
    }
}

/// Who made a change: wrote a link, a revision or an audit entry. Stored and shown as its
/// word. An agent names itself (`agent:<name>`); a word this build does not know (a newer
/// version's) is kept as [`Actor::Other`] and written back as it came.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Actor {
    /// A person, in the app or the CLI.
    User,
    /// The LLM: enrichment's constructions, links and evolutions.
    Llm,
    /// An import.
    Import,
    /// The checks Kasten runs on write: merge of a near-duplicate, a supersession.
    Merge,
    /// An agent (MCP) that gave no name.
    Agent,
    /// An agent with the name it gave (MCP's `clientInfo.name`). Holds the whole word,
    /// `agent:<name>`; [`Actor::agent`] builds it.
    NamedAgent(String),
    /// Any other word, kept as it came.
    Other(String),
}

impl Actor {
    /// What starts the word of an [`Actor::NamedAgent`].
    pub const AGENT_PREFIX: &'static str = "agent:";

    /// The actors with a variant of their own and a fixed word.
    pub const KNOWN: &'static [Actor] = &[
        Actor::User,
        Actor::Llm,
        Actor::Import,
        Actor::Merge,
        Actor::Agent,
    ];

    /// The actor an agent's changes are recorded under: `agent:<name>` with the name it
    /// gave (trimmed), or plain `agent` without one.
    pub fn agent(name: &str) -> Self {
        let name = name.trim();
        if name.is_empty() || name == Actor::Agent.as_str() {
            Actor::Agent
        } else {
            Actor::NamedAgent(format!("{}{name}", Self::AGENT_PREFIX))
        }
    }

    /// The word stored and shown for this actor.
    pub const fn as_str(&self) -> &str {
        match self {
            Actor::User => "user",
            Actor::Llm => "llm",
            Actor::Import => "import",
            Actor::Merge => "merge",
            Actor::Agent => "agent",
            Actor::NamedAgent(s) | Actor::Other(s) => s.as_str(),
        }
    }

    /// The actor a word names: a known word, `agent:<name>`, else [`Actor::Other`].
    pub fn parse(s: &str) -> Self {
        if let Some(a) = Self::KNOWN.iter().find(|a| a.as_str() == s) {
            return a.clone();
        }
        if s.starts_with(Self::AGENT_PREFIX) {
            Actor::NamedAgent(s.to_owned())
        } else {
            Actor::Other(s.to_owned())
        }
    }

    /// Whether an agent acted (`agent` or `agent:<name>`).
    pub fn is_agent(&self) -> bool {
        matches!(self, Actor::Agent | Actor::NamedAgent(_))
    }

    /// The name an agent gave, if it gave one.
    pub fn agent_name(&self) -> Option<&str> {
        match self {
            Actor::NamedAgent(s) => s.strip_prefix(Self::AGENT_PREFIX),
            _ => None,
        }
    }
}

/// No word: what a record read from a peer that did not send its actor holds.
impl Default for Actor {
    fn default() -> Self {
        Actor::Other(String::new())
    }
}

impl From<String> for Actor {
    fn from(s: String) -> Self {
        Self::parse(&s)
    }
}

/// The traits of an open set of words (a type with an infallible `parse` and an `as_str`):
/// parsing never fails, it prints and compares as its word, and serde reads and writes the
/// word.
macro_rules! open_words {
    ($name:ident) => {
        impl FromStr for $name {
            type Err = std::convert::Infallible;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(Self::parse(s))
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::parse(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
                Ok(Self::parse(&s))
            }
        }
    };
}

open_words!(Actor);

/// Defines an open set of words: an enum of the words this build writes, each with its
/// word, and `Other` for any other word (an older or newer version's, an import's), kept
/// as it came; `KNOWN`, `as_str`, an infallible `parse`, and the traits of
/// [`open_words!`]. `$closed` is the same words as a closed set, the type the app's
/// TypeScript names (a field holding the open type declares it with
/// `#[specta(type = $closed)]`).
macro_rules! open_states {
    (
        $(#[$meta:meta])*
        $name:ident,
        $(#[$cmeta:meta])*
        $closed:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// Any other word, kept as it came.
            Other(String),
        }

        impl $name {
            /// The words with a variant of their own, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The word stored and shown.
            pub const fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $word, )+
                    $name::Other(s) => s.as_str(),
                }
            }

            /// What a word names; a word without a variant of its own is `Other`.
            pub fn parse(s: &str) -> Self {
                match s {
                    $( $word => $name::$variant, )+
                    _ => $name::Other(s.to_owned()),
                }
            }

            /// The word as the closed set names it; none for `Other`.
            pub fn word(&self) -> Option<$closed> {
                match self {
                    $( $name::$variant => Some($closed::$variant), )+
                    $name::Other(_) => None,
                }
            }
        }

        open_words!($name);

        $(#[$cmeta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "specta", derive(specta::Type))]
        pub enum $closed {
            $( #[serde(rename = $word)] $variant ),+
        }

        impl $closed {
            /// Every word, in declaration order.
            pub const ALL: &'static [$closed] = &[$($closed::$variant),+];
        }

        impl From<$closed> for $name {
            fn from(w: $closed) -> Self {
                match w {
                    $( $closed::$variant => $name::$variant ),+
                }
            }
        }
    };
}

open_states! {
    /// What a link says about the two notes. The kinds Kasten writes or offers the LLM have
    /// a variant of their own; any other word (an import's, a person's) is
    /// [`LinkKind::Other`], serialised as the plain word.
    #[derive(Default)]
    LinkKind,
    /// The link kinds this build writes, as a closed set: what the app's TypeScript names.
    /// A kind field may also hold an import's or a person's word, shown as it came.
    LinkKindWord {
        /// The default kind of a link by hand.
        #[default]
        Relates => "relates",
        Supports => "supports",
        Contradicts => "contradicts",
        Elaborates => "elaborates",
        Causes => "causes",
        Follows => "follows",
        /// A near-duplicate merged on write.
        SameEntity => "same-entity",
        /// The newer note states another value for what the older one said.
        Supersedes => "supersedes",
        /// A note that used a value a newer note replaced.
        MayBeOutdated => "may_be_outdated",
        /// An Obsidian `[[wikilink]]`.
        Wikilink => "wikilink",
    }
}

impl LinkKind {
    /// The kinds the LLM may choose from.
    pub const FOR_LLM: &'static [LinkKind] = &[
        LinkKind::Relates,
        LinkKind::Supports,
        LinkKind::Contradicts,
        LinkKind::Elaborates,
        LinkKind::Causes,
        LinkKind::Follows,
        LinkKind::SameEntity,
    ];
}

open_states! {
    /// What an entry of a note's history or of the audit log says was done, and what a
    /// review or editing action reports it did. Stored (the audit log's `action`, the
    /// `reason` of an LLM revision: `construction`, `evolution`) and shown as its word; a
    /// word this build does not write (an older or newer version's, an import's) is kept as
    /// [`Action::Other`] and shown as it came.
    Action,
    /// The actions this build writes, as a closed set: what the app's TypeScript names. An
    /// action field may also hold a word an older or newer version wrote, shown as it came.
    ActionWord {
        /// The note was saved (the first entry of its history).
        Created => "created",
        /// The LLM's annotations of a new note (an LLM revision's reason).
        Construction => "construction",
        /// The LLM's change of an older note's annotations (an LLM revision's reason).
        Evolution => "evolution",
        /// A person's (or agent's) change of a note's annotations or text.
        Edit => "edit",
        /// A rewrite of a note's text (what the action reports; its audit entry is `edit`).
        EditContent => "edit_content",
        /// A link by an agent that may only propose, held for review.
        ProposeLink => "propose_link",
        /// A link by hand.
        Link => "link",
        /// A link by hand removed.
        Unlink => "unlink",
        Accept => "accept",
        /// An accept with the person's adjustment on top (what the action reports).
        AcceptEdited => "accept_edited",
        Reject => "reject",
        /// A revision, a link or a whole event rolled back.
        Rollback => "rollback",
        /// A whole event rolled back (what the action reports; its audit entry is
        /// `rollback`).
        RollbackEvent => "rollback_event",
        /// A rolled-back event or link applied again.
        Reapply => "reapply",
        /// A supersession settled as "both stay true".
        BothTrue => "both_true",
        Archive => "archive",
        /// An archived note back in the active memory.
        Restore => "restore",
        /// A near-duplicate folded into the note it repeats.
        Merge => "merge",
        /// A merged note let out again (its merge link rejected or rolled back).
        Unmerge => "unmerge",
        /// A fading note kept.
        Keep => "keep",
        /// A note's tier (and project) set.
        Tier => "tier",
        /// A project opened.
        ProjectOpen => "project_open",
        /// A project closed.
        ProjectClose => "project_close",
    }
}

/// No word: what a default entry holds until it is filled in.
impl Default for Action {
    fn default() -> Self {
        Action::Other(String::new())
    }
}

#[cfg(test)]
mod tests;
