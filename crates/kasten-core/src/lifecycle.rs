//! The memory lifecycle: strength, decay, reinforcement and archive candidates.
//!
//! Strength is a number in `[0, 1]`. What is stored is the strength at a reference time
//! (the later of when the note entered the memory and when it was last reinforced); the
//! strength *now* is computed from timestamps, never by a background tick:
//!
//! ```text
//! s(t)  = s_ref · 2^(−Δ / h)            Δ = t − t_ref, in days
//! h     = h_tier · (1 + ln(1 + n))      n = times the note was reinforced
//! ```
//!
//! `h_tier` is the tier's half-life: long-term 120 days, short-term 5 days, project-scoped
//! ∞ while its project is active (no decay) and the short-term half-life counted from the
//! moment the project was closed. Every reinforcement lengthens the half-life (spacing
//! effect), so a note that keeps being useful fades ever more slowly.
//!
//! Reinforcement moves the current strength part of the way back to 1:
//!
//! ```text
//! s' = s(t) + α · (1 − s(t))            α = 0.2 retrieved, 0.5 cited in an answer
//! ```
//!
//! and makes `t` the new reference time. A note whose current strength falls below the
//! archive threshold (default 0.2) becomes an *archive candidate*; archiving is always the
//! user's decision. With the defaults an untouched long-term note becomes a candidate
//! after about 279 days (log2(1/0.2) = 2.32 half-lives), a short-term one after 12 days.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How fast a note fades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Facts, preferences, people: decays slowly.
    #[default]
    LongTerm,
    /// Transient state (today's plan, a passing mood): decays fast.
    ShortTerm,
    /// Lives as long as its project is active.
    Project,
}

impl Tier {
    pub const fn as_str(self) -> &'static str {
        match self {
            Tier::LongTerm => "long_term",
            Tier::ShortTerm => "short_term",
            Tier::Project => "project",
        }
    }

    /// Accepts `long_term`, `long-term`, `long` (and the same for the others).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "long_term" | "long" => Some(Tier::LongTerm),
            "short_term" | "short" => Some(Tier::ShortTerm),
            "project" => Some(Tier::Project),
            _ => None,
        }
    }
}

/// Half-life of a long-term note, in days.
pub const LONG_TERM_HALF_LIFE_DAYS: f64 = 120.0;
/// Half-life of a short-term note (and of a closed project's notes), in days.
pub const SHORT_TERM_HALF_LIFE_DAYS: f64 = 5.0;
/// Reinforcement when a note is retrieved for an answer.
pub const ALPHA_RETRIEVED: f64 = 0.2;
/// Reinforcement when an answer cites the note.
pub const ALPHA_CITED: f64 = 0.5;
/// Below this current strength a note is an archive candidate.
pub const DEFAULT_ARCHIVE_THRESHOLD: f64 = 0.2;

/// Why a note is reinforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reinforce {
    Retrieved,
    Cited,
    /// A near-duplicate was written: the memory was told the same thing again.
    Repeated,
}

impl Reinforce {
    pub fn alpha(self) -> f64 {
        match self {
            Reinforce::Retrieved => ALPHA_RETRIEVED,
            Reinforce::Cited | Reinforce::Repeated => ALPHA_CITED,
        }
    }
}

/// What the strength of one note is computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct StrengthState {
    /// Strength at `reference`.
    pub strength: f64,
    /// The later of when the note entered the memory and its last reinforcement.
    pub reference: DateTime<Utc>,
    pub reinforcements: u64,
    pub tier: Tier,
    /// For project notes: when the project was closed (`None` while it is active).
    pub project_closed: Option<DateTime<Utc>>,
}

fn days(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    ((to - from).num_milliseconds() as f64 / 86_400_000.0).max(0.0)
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

impl StrengthState {
    /// The half-life in days given the reinforcements so far (∞ for an active project).
    pub fn half_life_days(&self) -> f64 {
        let base = match self.tier {
            Tier::LongTerm => LONG_TERM_HALF_LIFE_DAYS,
            Tier::ShortTerm => SHORT_TERM_HALF_LIFE_DAYS,
            Tier::Project if self.project_closed.is_none() => return f64::INFINITY,
            Tier::Project => SHORT_TERM_HALF_LIFE_DAYS,
        };
        base * (1.0 + (1.0 + self.reinforcements as f64).ln())
    }

    /// The strength at `now`.
    pub fn at(&self, now: DateTime<Utc>) -> f64 {
        let s = clamp01(self.strength);
        let from = match (self.tier, self.project_closed) {
            // a project note does not fade while the project is active, and from its
            // closing on it fades like a short-term note
            (Tier::Project, None) => return s,
            (Tier::Project, Some(closed)) => closed.max(self.reference),
            _ => self.reference,
        };
        let h = self.half_life_days();
        s * (-(days(from, now) / h) * std::f64::consts::LN_2).exp()
    }

    /// The state after a reinforcement at `now`.
    pub fn reinforced(&self, why: Reinforce, now: DateTime<Utc>) -> StrengthState {
        let s = self.at(now);
        StrengthState {
            strength: clamp01(s + why.alpha() * (1.0 - s)),
            reference: now.max(self.reference),
            reinforcements: self.reinforcements + 1,
            tier: self.tier,
            project_closed: self.project_closed,
        }
    }

    pub fn is_archive_candidate(&self, now: DateTime<Utc>, threshold: f64) -> bool {
        self.at(now) < threshold
    }
}

/// The factor a retrieval score is multiplied by when ranking weighs strength
/// (`retrieval.strength_weight` = w; 0, the default, turns it off): `(1 − w) + w · s(t)`.
/// Strength already carries recency (it decays with time since the last use).
pub fn retrieval_factor(weight: f64, strength_now: f64) -> f64 {
    let w = clamp01(weight);
    (1.0 - w) + w * clamp01(strength_now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn state(tier: Tier) -> StrengthState {
        StrengthState {
            strength: 1.0,
            reference: t0(),
            reinforcements: 0,
            tier,
            project_closed: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn decays_by_half_per_half_life() {
        let s = state(Tier::LongTerm);
        assert!(close(s.at(t0()), 1.0));
        assert!(close(s.at(t0() + Duration::days(120)), 0.5));
        assert!(close(s.at(t0() + Duration::days(240)), 0.25));
        let s = state(Tier::ShortTerm);
        assert!(close(s.at(t0() + Duration::days(5)), 0.5));
    }

    #[test]
    fn time_before_the_reference_does_not_strengthen() {
        let s = state(Tier::LongTerm);
        assert!(close(s.at(t0() - Duration::days(30)), 1.0));
    }

    #[test]
    fn short_term_fades_faster_than_long_term() {
        let later = t0() + Duration::days(10);
        assert!(state(Tier::ShortTerm).at(later) < state(Tier::LongTerm).at(later));
    }

    #[test]
    fn project_notes_live_while_the_project_is_active() {
        let mut s = state(Tier::Project);
        let much_later = t0() + Duration::days(3650);
        assert!(close(s.at(much_later), 1.0));
        s.project_closed = Some(t0() + Duration::days(100));
        assert!(close(s.at(t0() + Duration::days(105)), 0.5));
        assert!(close(s.at(t0() + Duration::days(50)), 1.0));
    }

    #[test]
    fn reinforcement_moves_towards_one_and_slows_decay() {
        let s = state(Tier::ShortTerm);
        let at = t0() + Duration::days(5);
        let r = s.reinforced(Reinforce::Retrieved, at);
        // 0.5 + 0.2 · 0.5
        assert!(close(r.strength, 0.6));
        assert_eq!(r.reference, at);
        assert_eq!(r.reinforcements, 1);
        // half-life grew by 1 + ln 2
        assert!(close(r.half_life_days(), 5.0 * (1.0 + 2f64.ln())));
        let cited = s.reinforced(Reinforce::Cited, at);
        assert!(close(cited.strength, 0.75));
        // a reinforced note is stronger than an untouched one at any later time
        let later = at + Duration::days(7);
        assert!(r.at(later) > s.at(later));
    }

    #[test]
    fn strength_stays_in_unit_interval() {
        let mut s = state(Tier::LongTerm);
        s.strength = 7.0;
        assert!(close(s.at(t0()), 1.0));
        s.strength = f64::NAN;
        assert!(close(s.at(t0()), 0.0));
        let r = s.reinforced(Reinforce::Cited, t0());
        assert!((0.0..=1.0).contains(&r.strength));
    }

    #[test]
    fn archive_candidate_threshold() {
        let s = state(Tier::LongTerm);
        assert!(!s.is_archive_candidate(t0() + Duration::days(270), DEFAULT_ARCHIVE_THRESHOLD));
        assert!(s.is_archive_candidate(t0() + Duration::days(290), DEFAULT_ARCHIVE_THRESHOLD));
        let s = state(Tier::ShortTerm);
        assert!(s.is_archive_candidate(t0() + Duration::days(12), DEFAULT_ARCHIVE_THRESHOLD));
    }

    #[test]
    fn retrieval_factor_is_off_at_zero_weight() {
        assert!(close(retrieval_factor(0.0, 0.1), 1.0));
        assert!(close(retrieval_factor(1.0, 0.1), 0.1));
        assert!(close(retrieval_factor(0.5, 0.5), 0.75));
    }

    #[test]
    fn tier_names_parse() {
        assert_eq!(Tier::parse("long-term"), Some(Tier::LongTerm));
        assert_eq!(Tier::parse("short_term"), Some(Tier::ShortTerm));
        assert_eq!(Tier::parse("Project"), Some(Tier::Project));
        assert_eq!(Tier::parse("forever"), None);
        for t in [Tier::LongTerm, Tier::ShortTerm, Tier::Project] {
            assert_eq!(Tier::parse(t.as_str()), Some(t));
        }
    }
}
