//! Calendar periods a query names ("in July 2023", "on 7 July, 2023", "May 3, 2023",
//! "in 2022", "2023-07-07"), for date-aware ranking: a note written in that period is
//! more likely to be what the query is about.
//!
//! Only absolute dates are recognised. Relative ones ("last week", "yesterday") need a
//! reference time the query does not give, and a month without a year ("in August") is
//! ambiguous; both are left to the text and vector rankings.

use chrono::NaiveDate;

/// A period of whole days, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub first: NaiveDate,
    pub last: NaiveDate,
}

impl Period {
    fn day(d: NaiveDate) -> Self {
        Self { first: d, last: d }
    }

    fn month(year: i32, month: u32) -> Option<Self> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        let next = if month == 12 {
            NaiveDate::from_ymd_opt(year + 1, 1, 1)?
        } else {
            NaiveDate::from_ymd_opt(year, month + 1, 1)?
        };
        Some(Self {
            first,
            last: next.pred_opt()?,
        })
    }

    fn year(year: i32) -> Option<Self> {
        Some(Self {
            first: NaiveDate::from_ymd_opt(year, 1, 1)?,
            last: NaiveDate::from_ymd_opt(year, 12, 31)?,
        })
    }

    /// Whether `d` lies in the period.
    pub fn contains(&self, d: NaiveDate) -> bool {
        self.first <= d && d <= self.last
    }
}

/// A lowercase month name or its 3-letter abbreviation (and "sept") → 1..=12.
pub(crate) fn month_of(word: &str) -> Option<u32> {
    const NAMES: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    if let Some(i) = NAMES.iter().position(|m| *m == word) {
        return Some(i as u32 + 1);
    }
    // three-letter abbreviations, and "sept"
    if word == "sept" {
        return Some(9);
    }
    if word.len() == 3 && word != "may" {
        return NAMES
            .iter()
            .position(|m| m.starts_with(word))
            .map(|i| i as u32 + 1);
    }
    None
}

fn year_of(word: &str) -> Option<i32> {
    if word.len() != 4 {
        return None;
    }
    word.parse::<i32>()
        .ok()
        .filter(|y| (1000..=2999).contains(y))
}

fn day_of(word: &str) -> Option<u32> {
    let digits = word
        .strip_suffix("st")
        .or_else(|| word.strip_suffix("nd"))
        .or_else(|| word.strip_suffix("rd"))
        .or_else(|| word.strip_suffix("th"))
        .unwrap_or(word);
    if digits.is_empty() || digits.len() > 2 {
        return None;
    }
    digits.parse::<u32>().ok().filter(|d| (1..=31).contains(d))
}

/// Every period `query` names, in the order they appear.
pub fn periods_in(query: &str) -> Vec<Period> {
    let lower = query.to_lowercase();
    // ISO dates first: 2023-07-07 and 2023-07
    let mut out = Vec::new();
    for raw in lower.split(|c: char| !(c.is_alphanumeric() || c == '-')) {
        let raw = raw.trim_matches('-');
        if let Ok(d) = NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
            out.push(Period::day(d));
        } else if let Some((y, m)) = raw.split_once('-')
            && m.len() == 2
            && let (Some(y), Ok(m)) = (year_of(y), m.parse::<u32>())
            && let Some(p) = Period::month(y, m)
        {
            out.push(p);
        }
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && *w != "of" && *w != "the")
        .collect();
    let mut i = 0;
    while i < words.len() {
        let w = |j: usize| words.get(i + j).copied().unwrap_or("");
        // 7 July 2023
        if let (Some(d), Some(m), Some(y)) = (day_of(w(0)), month_of(w(1)), year_of(w(2)))
            && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
        {
            out.push(Period::day(date));
            i += 3;
            continue;
        }
        // July 7 2023
        if let (Some(m), Some(d), Some(y)) = (month_of(w(0)), day_of(w(1)), year_of(w(2)))
            && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
        {
            out.push(Period::day(date));
            i += 3;
            continue;
        }
        // July 2023
        if let (Some(m), Some(y)) = (month_of(w(0)), year_of(w(1)))
            && let Some(p) = Period::month(y, m)
        {
            out.push(p);
            i += 2;
            continue;
        }
        // in 2023
        if matches!(w(0), "in" | "during" | "throughout" | "since" | "year")
            && let Some(y) = year_of(w(1))
            && let Some(p) = Period::year(y)
        {
            out.push(p);
            i += 2;
            continue;
        }
        i += 1;
    }
    out.sort_by_key(|p| (p.first, p.last));
    out.dedup();
    out
}

/// The period's days as a half-open range of milliseconds since the epoch (UTC), widened
/// by `slack_days` on both sides (a note's time may be in another time zone than the
/// query's date, or written down a little later).
pub fn millis_range(p: &Period, slack_days: i64) -> (i64, i64) {
    let start = p
        .first
        .checked_sub_days(chrono::Days::new(slack_days.max(0) as u64))
        .unwrap_or(p.first);
    let end = p
        .last
        .checked_add_days(chrono::Days::new(slack_days.max(0) as u64 + 1))
        .unwrap_or(p.last);
    let ms = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0)
            .map_or(0, |t| t.and_utc().timestamp_millis())
    };
    (ms(start), ms(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap_or_default()
    }

    fn one(q: &str) -> Option<(NaiveDate, NaiveDate)> {
        match periods_in(q).as_slice() {
            [p] => Some((p.first, p.last)),
            _ => None,
        }
    }

    #[test]
    fn days_in_the_usual_spellings() {
        let day = Some((d(2023, 7, 7), d(2023, 7, 7)));
        assert_eq!(one("What happened on 7 July, 2023?"), day);
        assert_eq!(one("what happened on July 7, 2023"), day);
        assert_eq!(one("on the 7th of July 2023"), day);
        assert_eq!(one("Jul 7th, 2023"), day);
        assert_eq!(one("notes from 2023-07-07"), day);
        assert_eq!(
            one("Who did Maria have dinner with on May 3, 2023?"),
            Some((d(2023, 5, 3), d(2023, 5, 3)))
        );
    }

    #[test]
    fn months_and_years() {
        assert_eq!(
            one("What did Maria donate in December 2023?"),
            Some((d(2023, 12, 1), d(2023, 12, 31)))
        );
        assert_eq!(
            one("in February 2024"),
            Some((d(2024, 2, 1), d(2024, 2, 29)))
        );
        assert_eq!(one("2023-02"), Some((d(2023, 2, 1), d(2023, 2, 28))));
        // an impossible day still names its month
        assert_eq!(
            one("31 February 2023"),
            Some((d(2023, 2, 1), d(2023, 2, 28)))
        );
        assert_eq!(
            one("How many times has Melanie gone to the beach in 2023?"),
            Some((d(2023, 1, 1), d(2023, 12, 31)))
        );
    }

    #[test]
    fn no_period_without_an_absolute_date() {
        assert!(periods_in("What did John do last weekend?").is_empty());
        assert!(periods_in("When did Caroline attend a pride parade in August?").is_empty());
        assert!(periods_in("What may happen next?").is_empty());
        assert!(periods_in("room 2023 is booked").is_empty());
        assert!(periods_in("").is_empty());
    }

    #[test]
    fn several_periods() {
        let ps = periods_in("between May 2023 and 3 June 2023");
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[1], Period::day(d(2023, 6, 3)));
        assert!(ps[0].contains(d(2023, 5, 31)) && !ps[0].contains(d(2023, 6, 1)));
    }

    #[test]
    fn millis_ranges_cover_whole_days_with_slack() {
        let (a, b) = millis_range(&Period::day(d(1970, 1, 2)), 0);
        assert_eq!((a, b), (86_400_000, 2 * 86_400_000));
        let (a, b) = millis_range(&Period::day(d(1970, 1, 2)), 1);
        assert_eq!((a, b), (0, 3 * 86_400_000));
    }
}
