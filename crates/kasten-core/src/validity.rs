//! When a note's fact became true (`valid_from`), and what "as of a day" means.
//!
//! A note's `valid_from` is, in this order:
//!
//! 1. **a date its text states**: the latest first day of the periods the text names
//!    ([`crate::period`]: "on 7 July 2023", "in 2022", "since March 2026", "2026-09-01"; a
//!    period open at its start, "until 2024", gives none), or a month without a year after
//!    "from", "since", "starting", "as of" or "effective" ("From September the rent is
//!    1,300 euros."), read against the note's time: "from"/"starting"/"as of"/"effective"
//!    look ahead (the next such month from the note's month on), "since" back (the last
//!    one up to the note's month);
//! 2. **the date of its source**, when the source names a day (`Journal/2026-03-01.md`,
//!    `chat:2026-03-01:4`);
//! 3. **the note's time** (`created_at`: the time an import or the writer gave, else when
//!    it was recorded).
//!
//! It is derived from the note's stored fields on every read, never stored: a rollback, an
//! import or a restore that puts the fields back puts the validity back with them. A
//! note's `valid_until` is its successor's `valid_from` (the engine reads the accepted
//! `supersedes` links).

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};

/// A calendar day (re-exported for crates that take an as-of day without using chrono).
pub use chrono::NaiveDate;

use crate::CoreError;
use crate::period::{self, month_of};

/// Where a note's `valid_from` was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValidFromSource {
    /// A date in the note's text.
    Text,
    /// A date in the note's source (a daily note's file name, a dated transcript).
    Source,
    /// The note's own time.
    Time,
}

/// When a note's fact became true, and where that was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidFrom {
    pub at: DateTime<Utc>,
    pub from: ValidFromSource,
}

/// The note's `valid_from` (see the module docs). A date is its first moment, UTC.
pub fn valid_from(content: &str, source: Option<&str>, time: DateTime<Utc>) -> ValidFrom {
    if let Some(d) = date_in_text(content, time) {
        return ValidFrom {
            at: start_of(d),
            from: ValidFromSource::Text,
        };
    }
    if let Some(d) = source.and_then(date_in_source) {
        return ValidFrom {
            at: start_of(d),
            from: ValidFromSource::Source,
        };
    }
    ValidFrom {
        at: time,
        from: ValidFromSource::Time,
    }
}

/// The first moment of a day, UTC.
pub fn start_of(d: NaiveDate) -> DateTime<Utc> {
    d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}

/// "As of `day`" covers the whole day: what became valid before the end of it (the first
/// moment of the next day) was valid then.
pub fn end_of(day: NaiveDate) -> DateTime<Utc> {
    start_of(day.succ_opt().unwrap_or(NaiveDate::MAX))
}

/// An as-of date as a user types it: `YYYY-MM-DD`.
pub fn parse_day(s: &str) -> Result<NaiveDate, CoreError> {
    let t = s.trim();
    let ok = t.len() == 10 && t.as_bytes()[4] == b'-' && t.as_bytes()[7] == b'-';
    ok.then(|| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
        .flatten()
        .ok_or_else(|| {
            CoreError::Invalid(format!(
                "'{s}' is not a date: give it as YYYY-MM-DD (e.g. 2026-06-30)"
            ))
        })
}

/// The day a note's text says its fact took effect, if it names one (see the module docs).
pub fn date_in_text(text: &str, time: DateTime<Utc>) -> Option<NaiveDate> {
    let named = period::periods_named(text)
        .into_iter()
        .filter(|p| p.first != NaiveDate::MIN && p.first != NaiveDate::MAX)
        .map(|p| p.first)
        .max();
    named.or_else(|| month_without_year(text, time.date_naive()))
}

/// "from September", "since May": the first day of that month, the year read against
/// `today` (the note's day).
fn month_without_year(text: &str, today: NaiveDate) -> Option<NaiveDate> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let lower = w.to_lowercase();
        let ahead = match lower.as_str() {
            "from" | "starting" | "effective" => true,
            "as" if words
                .get(i + 1)
                .is_some_and(|n| n.eq_ignore_ascii_case("of")) =>
            {
                true
            }
            "since" => false,
            _ => continue,
        };
        let skip = if lower == "as" { 2 } else { 1 };
        let Some(next) = words.get(i + skip) else {
            continue;
        };
        // "may" is a month only when written as one
        if next.eq_ignore_ascii_case("may") && *next != "May" {
            continue;
        }
        let Some(month) = month_of(&next.to_lowercase()) else {
            continue;
        };
        // a year right after is a period `periods_named` already read
        if words
            .get(i + skip + 1)
            .is_some_and(|y| y.len() == 4 && y.chars().all(|c| c.is_ascii_digit()))
        {
            continue;
        }
        let year = if ahead {
            if month >= today.month() {
                today.year()
            } else {
                today.year() + 1
            }
        } else if month <= today.month() {
            today.year()
        } else {
            today.year() - 1
        };
        let d = NaiveDate::from_ymd_opt(year, month, 1)?;
        found = Some(found.map_or(d, |f: NaiveDate| f.max(d)));
    }
    found
}

/// The first ISO day (`YYYY-MM-DD`) written in a note's source.
pub fn date_in_source(source: &str) -> Option<NaiveDate> {
    let b = source.as_bytes();
    if b.len() < 10 {
        return None;
    }
    for i in 0..=b.len() - 10 {
        let w = &b[i..i + 10];
        let digits = |r: std::ops::Range<usize>| w[r].iter().all(u8::is_ascii_digit);
        let before_ok = i == 0 || !b[i - 1].is_ascii_digit();
        let after_ok = b.get(i + 10).is_none_or(|c| !c.is_ascii_digit());
        if before_ok
            && after_ok
            && digits(0..4)
            && w[4] == b'-'
            && digits(5..7)
            && w[7] == b'-'
            && digits(8..10)
            && let Ok(s) = std::str::from_utf8(w)
            && let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        {
            return Some(d);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        format!("{s}T09:30:00Z").parse().unwrap()
    }

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    #[test]
    fn a_date_in_the_text_comes_first_then_the_source_then_the_time() {
        let v = valid_from(
            "We moved to Berlin on 3 June 2020.",
            Some("Journal/2021-01-05.md"),
            t("2026-03-01"),
        );
        assert_eq!(v.at, start_of(d(2020, 6, 3)));
        assert_eq!(v.from, ValidFromSource::Text);
        let v = valid_from(
            "We moved to Berlin.",
            Some("Journal/2021-01-05.md"),
            t("2026-03-01"),
        );
        assert_eq!(
            (v.at, v.from),
            (start_of(d(2021, 1, 5)), ValidFromSource::Source)
        );
        let v = valid_from("We moved to Berlin.", Some("chat:S1:3"), t("2026-03-01"));
        assert_eq!((v.at, v.from), (t("2026-03-01"), ValidFromSource::Time));
        let v = valid_from("Room 2023 is ours.", None, t("2026-03-01"));
        assert_eq!(v.from, ValidFromSource::Time, "a bare number is no year");
    }

    #[test]
    fn the_latest_start_the_text_names_is_when_it_took_effect() {
        assert_eq!(
            date_in_text(
                "Since March 2026 the rent was 1,200; from September 2026 it is 1,300.",
                t("2026-03-01")
            ),
            Some(d(2026, 9, 1))
        );
        assert_eq!(
            date_in_text("In 2022 she joined Acme.", t("2026-03-01")),
            Some(d(2022, 1, 1))
        );
        assert_eq!(
            date_in_text("The lease runs until 2024.", t("2026-03-01")),
            None,
            "an open start says nothing about when it began"
        );
        assert_eq!(
            date_in_text("Paid on 2026-07-15.", t("2026-03-01")),
            Some(d(2026, 7, 15))
        );
    }

    #[test]
    fn a_month_without_a_year_is_read_against_the_notes_time() {
        let rent = "From September the rent is 1,300 euros.";
        assert_eq!(date_in_text(rent, t("2026-03-10")), Some(d(2026, 9, 1)));
        assert_eq!(date_in_text(rent, t("2026-09-01")), Some(d(2026, 9, 1)));
        assert_eq!(date_in_text(rent, t("2026-11-20")), Some(d(2027, 9, 1)));
        assert_eq!(
            date_in_text("Starting January we pay 40 euros.", t("2026-12-01")),
            Some(d(2027, 1, 1))
        );
        assert_eq!(
            date_in_text("As of March, Tom leads the team.", t("2026-02-01")),
            Some(d(2026, 3, 1))
        );
        assert_eq!(
            date_in_text("Since May I work at Acme.", t("2026-08-01")),
            Some(d(2026, 5, 1))
        );
        assert_eq!(
            date_in_text("Since November I work at Acme.", t("2026-08-01")),
            Some(d(2025, 11, 1))
        );
        assert_eq!(
            date_in_text("Apart from may be, nothing changed.", t("2026-08-01")),
            None
        );
        assert_eq!(
            date_in_text("In September we went hiking.", t("2026-08-01")),
            None,
            "no word saying it took effect"
        );
    }

    #[test]
    fn source_dates_are_whole_iso_days() {
        assert_eq!(
            date_in_source("vault/Daily/2026-03-01.md"),
            Some(d(2026, 3, 1))
        );
        assert_eq!(date_in_source("chat:2026-13-01:2"), None);
        assert_eq!(date_in_source("x12026-03-01"), None);
        assert_eq!(date_in_source("mcp:claude:4"), None);
        assert_eq!(date_in_source("ä2026-03-01ö"), Some(d(2026, 3, 1)));
        assert_eq!(date_in_source(""), None);
    }

    #[test]
    fn as_of_days_are_typed_as_iso_dates_and_cover_the_whole_day() {
        assert_eq!(parse_day("2026-06-30").unwrap(), d(2026, 6, 30));
        for bad in [
            "2026-6-30",
            "30.06.2026",
            "2026-02-30",
            "june",
            "",
            "2026-06-30x",
        ] {
            let e = parse_day(bad).unwrap_err().to_string();
            assert!(e.contains("YYYY-MM-DD"), "{bad}: {e}");
        }
        assert_eq!(end_of(d(2026, 6, 30)), start_of(d(2026, 7, 1)));
    }
}
