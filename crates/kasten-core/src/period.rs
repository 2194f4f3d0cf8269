//! Calendar periods a query names ("in July 2023", "on 7 July, 2023", "May 3, 2023",
//! "in 2022", "2023-07-07"), for date-aware ranking: a note written in that period is
//! more likely to be what the query is about.
//!
//! "since X" and "after X" name everything from X on (from the first day of X, or from the
//! day after X), "until X" and "before X" everything up to X (up to its last day, or up to
//! the day before it): periods with one open end.
//!
//! Only absolute dates are recognised. Relative ones ("last week", "yesterday") need a
//! reference time the query does not give, and a month without a year ("in August") is
//! ambiguous; both are left to the text and vector rankings.

use chrono::NaiveDate;

/// A period of whole days, both ends included. An open end is `NaiveDate::MIN` (from the
/// beginning) or `NaiveDate::MAX` (from then on).
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

    /// From the first day of `self` on ("since"), from the day after it ("after"), up to
    /// its last day ("until") or up to the day before it ("before").
    fn bounded(self, bound: Bound) -> Self {
        match bound {
            Bound::Since => Self {
                first: self.first,
                last: NaiveDate::MAX,
            },
            Bound::After => Self {
                first: self.last.succ_opt().unwrap_or(NaiveDate::MAX),
                last: NaiveDate::MAX,
            },
            Bound::Until => Self {
                first: NaiveDate::MIN,
                last: self.last,
            },
            Bound::Before => Self {
                first: NaiveDate::MIN,
                last: self.first.pred_opt().unwrap_or(NaiveDate::MIN),
            },
        }
    }

    /// Whether `d` lies in the period.
    pub fn contains(&self, d: NaiveDate) -> bool {
        self.first <= d && d <= self.last
    }
}

/// A lowercase month name or its 3-letter abbreviation (and "sept") → 1..=12.
pub fn month_of(word: &str) -> Option<u32> {
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

/// A word that makes the period after it open at one end.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Since,
    After,
    Until,
    Before,
}

fn bound_of(word: &str) -> Option<Bound> {
    match word {
        "since" => Some(Bound::Since),
        "after" => Some(Bound::After),
        "until" | "till" | "til" => Some(Bound::Until),
        "before" => Some(Bound::Before),
        _ => None,
    }
}

/// An ISO date (2023-07-07) or month (2023-07).
fn iso_of(word: &str) -> Option<Period> {
    if let Ok(d) = NaiveDate::parse_from_str(word, "%Y-%m-%d") {
        return Some(Period::day(d));
    }
    let (y, m) = word.split_once('-')?;
    if m.len() != 2 {
        return None;
    }
    Period::month(year_of(y)?, m.parse::<u32>().ok()?)
}

/// The period written at the start of `words` and how many words it takes. A bare year
/// ("2023") is a period only when `bare_year` (after "since", "before", …): alone it may
/// be a room number.
fn period_at(words: &[&str], bare_year: bool) -> Option<(Period, usize)> {
    let w = |j: usize| words.get(j).copied().unwrap_or("");
    if let Some(p) = iso_of(w(0)) {
        return Some((p, 1));
    }
    // 7 July 2023
    if let (Some(d), Some(m), Some(y)) = (day_of(w(0)), month_of(w(1)), year_of(w(2)))
        && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
    {
        return Some((Period::day(date), 3));
    }
    // July 7 2023
    if let (Some(m), Some(d), Some(y)) = (month_of(w(0)), day_of(w(1)), year_of(w(2)))
        && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
    {
        return Some((Period::day(date), 3));
    }
    // July 2023
    if let (Some(m), Some(y)) = (month_of(w(0)), year_of(w(1)))
        && let Some(p) = Period::month(y, m)
    {
        return Some((p, 2));
    }
    // in 2023
    if matches!(w(0), "in" | "during" | "throughout" | "year")
        && let Some(y) = year_of(w(1))
        && let Some(p) = Period::year(y)
    {
        return Some((p, 2));
    }
    if bare_year && let Some(p) = year_of(w(0)).and_then(Period::year) {
        return Some((p, 1));
    }
    None
}

/// The most periods a query is taken to name: each costs a scan of the timeline in a
/// search, and no question names more than a few ("between May and June 2023").
pub const MAX_PERIODS: usize = 8;

/// The periods `query` names, in order of their first day: periods that overlap or touch
/// joined into one ("since 2021 … since 2022" is "since 2021"), at most [`MAX_PERIODS`]
/// (the earliest).
pub fn periods_in(query: &str) -> Vec<Period> {
    let mut out = periods_named(query);
    out.sort_by_key(|p| (p.first, p.last));
    // periods that overlap or touch are one: a note is in it once, whatever names it
    let mut joined: Vec<Period> = Vec::with_capacity(out.len().min(MAX_PERIODS));
    for p in out {
        match joined.last_mut() {
            Some(last) if p.first <= last.last.succ_opt().unwrap_or(NaiveDate::MAX) => {
                last.last = last.last.max(p.last);
            }
            _ => {
                if joined.len() == MAX_PERIODS {
                    break;
                }
                joined.push(p);
            }
        }
    }
    joined
}

/// Every period `text` names, in the order written, none joined ("since March 2026 …
/// from September 2026" is two periods).
pub fn periods_named(text: &str) -> Vec<Period> {
    let lower = text.to_lowercase();
    // words; an ISO date or month (2023-07-07, 2023-07) stays one word
    let mut words: Vec<&str> = Vec::new();
    for raw in lower.split(|c: char| !(c.is_alphanumeric() || c == '-')) {
        let raw = raw.trim_matches('-');
        if iso_of(raw).is_some() {
            words.push(raw);
        } else {
            words.extend(raw.split('-'));
        }
    }
    words.retain(|w| !w.is_empty() && *w != "of" && *w != "the");
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if let Some(bound) = bound_of(words[i])
            && let Some((p, n)) = period_at(&words[i + 1..], true)
        {
            out.push(p.bounded(bound));
            i += 1 + n;
            continue;
        }
        if let Some((p, n)) = period_at(&words[i..], false) {
            out.push(p);
            i += n;
            continue;
        }
        i += 1;
    }
    out
}

/// The period's days as a half-open range of milliseconds since the epoch (UTC), widened
/// by `slack_days` on both sides (a note's time may be in another time zone than the
/// query's date, or written down a little later). An open end is `i64::MIN` / `i64::MAX`.
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
    let start = if p.first == NaiveDate::MIN {
        i64::MIN
    } else {
        ms(start)
    };
    let end = if p.last == NaiveDate::MAX {
        i64::MAX
    } else {
        ms(end)
    };
    (start, end)
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
    fn since_after_until_before_leave_one_end_open() {
        let open_end = |q: &str| one(q).map(|(a, b)| (a, b == NaiveDate::MAX));
        assert_eq!(
            open_end("what changed since 2022?"),
            Some((d(2022, 1, 1), true))
        );
        assert_eq!(open_end("trips after 2022"), Some((d(2023, 1, 1), true)));
        assert_eq!(open_end("since 7 July 2023"), Some((d(2023, 7, 7), true)));
        assert_eq!(open_end("after 2023-07-07"), Some((d(2023, 7, 8), true)));
        assert_eq!(open_end("since March 2021"), Some((d(2021, 3, 1), true)));
        let open_start = |q: &str| one(q).map(|(a, b)| (a == NaiveDate::MIN, b));
        assert_eq!(open_start("until 2022"), Some((true, d(2022, 12, 31))));
        assert_eq!(open_start("before 2022"), Some((true, d(2021, 12, 31))));
        assert_eq!(
            open_start("before May 3, 2023"),
            Some((true, d(2023, 5, 2)))
        );
        let since = periods_in("since 2022")[0];
        assert!(since.contains(d(2025, 6, 1)) && !since.contains(d(2021, 12, 31)));
        // an open end is open in milliseconds too
        let (a, b) = millis_range(&since, 1);
        assert_eq!(b, i64::MAX);
        assert_eq!(a, millis_range(&Period::year(2022).unwrap_or(since), 1).0);
        let (a, _) = millis_range(&periods_in("before 2022")[0], 1);
        assert_eq!(a, i64::MIN);
        // a bound word without a date is nothing
        assert!(periods_in("since then").is_empty());
    }

    #[test]
    fn several_periods() {
        let ps = periods_in("between May 2023 and 3 June 2023");
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[1], Period::day(d(2023, 6, 3)));
        assert!(ps[0].contains(d(2023, 5, 31)) && !ps[0].contains(d(2023, 6, 1)));
    }

    #[test]
    fn many_periods_are_joined_and_capped() {
        // nested open periods are one
        let nested: String = (1000..3000).map(|y| format!("since {y} ")).collect();
        let ps = periods_in(&nested);
        assert_eq!(ps.len(), 1, "{}", ps.len());
        assert_eq!((ps[0].first, ps[0].last), (d(1000, 1, 1), NaiveDate::MAX));
        // disjoint ones: at most MAX_PERIODS, the earliest
        let days: String = (1..=28)
            .step_by(2)
            .map(|k| format!("on 2023-02-{k:02} and "))
            .collect();
        let days = format!("{days} in 2020 and in 1999");
        let ps = periods_in(&days);
        assert_eq!(ps.len(), MAX_PERIODS);
        assert_eq!(ps[0], Period::year(1999).unwrap_or(ps[0]));
        // touching periods are one
        let ps = periods_in("in May 2023 or June 2023");
        assert_eq!(
            ps,
            vec![Period {
                first: d(2023, 5, 1),
                last: d(2023, 6, 30)
            }]
        );
    }

    #[test]
    fn millis_ranges_cover_whole_days_with_slack() {
        let (a, b) = millis_range(&Period::day(d(1970, 1, 2)), 0);
        assert_eq!((a, b), (86_400_000, 2 * 86_400_000));
        let (a, b) = millis_range(&Period::day(d(1970, 1, 2)), 1);
        assert_eq!((a, b), (0, 3 * 86_400_000));
    }
}
