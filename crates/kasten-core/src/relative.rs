//! Relative dates in a note's text ("last week", "yesterday", "two weeks ago"), read
//! against the day the note was written, for the answer prompt: a model shown "I started
//! at the gym last week" answers "last week" to "When did …?", which is no answer a month
//! later. Shown "last week (the week before 16 March 2023)" it can give the date.
//!
//! The note itself is never rewritten: the reading is added where the text is shown to a
//! model, and only where it is certain enough to say in words. Vague words ("recently",
//! "lately", "the other day") and a weekday alone ("on Friday") are left as written.
//! English only.

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc, Weekday};

use crate::facts::NUMBER_WORDS;

/// `text` with the reading of each relative date it holds added in parentheses right
/// after it: "yesterday" → "yesterday (15 March 2023)", "last Friday" → "last Friday (the
/// Friday before 16 March 2023)", "last month" → "last month (February 2023)". `day` is
/// the day the text was written. A text without relative dates comes back unchanged.
pub fn with_dates_resolved(text: &str, day: NaiveDate) -> String {
    let words = words(text);
    let mut out = String::with_capacity(text.len() + 32);
    let mut copied = 0;
    let mut i = 0;
    while i < words.len() {
        let lower: Vec<String> = words[i..(i + 5).min(words.len())]
            .iter()
            .map(|w| w.text.to_lowercase())
            .collect();
        let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
        match reading_at(&lower, day) {
            Some((n, reading)) => {
                let mut end = words[i + n - 1].end;
                // "yesterday's game (…)": after the possessive, not inside it
                for s in ["'s", "’s"] {
                    if text[end..].starts_with(s) {
                        end += s.len();
                    }
                }
                out.push_str(&text[copied..end]);
                // written already ("last week (the week before …)"): not twice
                if !text[end..].trim_start().starts_with('(') {
                    out.push_str(" (");
                    out.push_str(&reading);
                    out.push(')');
                }
                copied = end;
                i += n;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// A word of the text and where it ends (a byte offset).
struct Word<'a> {
    text: &'a str,
    end: usize,
}

fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let in_word = c.is_alphanumeric();
        match (start, in_word) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                out.push(Word {
                    text: &text[s..i],
                    end: i,
                });
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(Word {
            text: &text[s..],
            end: text.len(),
        });
    }
    out
}

/// A day as the model is shown it ("16 March 2023"): the readings and the notes' times
/// in one form, the form a model then writes its dates in.
const DAY_IN_WORDS: &str = "%-d %B %Y";

fn day_text(d: NaiveDate) -> String {
    d.format(DAY_IN_WORDS).to_string()
}

/// When a note was written, as the answer prompt shows it: "16 March 2023, 13:56".
pub fn time_in_words(t: DateTime<Utc>) -> String {
    t.format(&format!("{DAY_IN_WORDS}, %H:%M")).to_string()
}

fn month_text(d: NaiveDate) -> String {
    d.format("%B %Y").to_string()
}

fn weekday_of(word: &str) -> Option<Weekday> {
    Some(match word {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

fn weekday_name(w: Weekday) -> &'static str {
    match w {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// Counts spelled out that are read: one to twelve ([`NUMBER_WORDS`] is indexed by value).
const SPELLED_MAX: u32 = 12;

/// The value of a count spelled out, "one" to "twelve".
fn spelled(word: &str) -> Option<u32> {
    NUMBER_WORDS
        .iter()
        .take(SPELLED_MAX as usize + 1)
        .position(|n| *n == word)
        .and_then(|i| u32::try_from(i).ok())
        .filter(|v| *v >= 1)
}

/// A count before "days ago", "weeks ago": an exact number, or a vague one (`None`) kept
/// in words.
enum Count {
    Exact(u32),
    Vague(&'static str),
}

/// The count at the start of `w` and how many words it takes: "two", "3", "a", "an",
/// "a few", "a couple of", "few", "several".
fn count_at(w: &[&str]) -> Option<(Count, usize)> {
    let first = *w.first()?;
    if let Some(v) = spelled(first) {
        return Some((Count::Exact(v), 1));
    }
    if let Ok(n) = first.parse::<u32>()
        && (1..=100).contains(&n)
    {
        return Some((Count::Exact(n), 1));
    }
    let second = w.get(1).copied().unwrap_or("");
    match (first, second) {
        ("a", "few") => Some((Count::Vague("a few"), 2)),
        ("a", "couple") if w.get(2) == Some(&"of") => Some((Count::Vague("a couple of"), 3)),
        ("a", "couple") => Some((Count::Vague("a couple of"), 2)),
        ("a" | "an", _) => Some((Count::Exact(1), 1)),
        ("few", _) => Some((Count::Vague("a few"), 1)),
        ("several", _) => Some((Count::Vague("several"), 1)),
        _ => None,
    }
}

fn count_words(n: u32) -> String {
    (1..=SPELLED_MAX)
        .contains(&n)
        .then(|| NUMBER_WORDS.get(n as usize))
        .flatten()
        .map_or_else(|| n.to_string(), |w| (*w).to_owned())
}

/// The relative date at the start of `w` (lowercase words) read against `day`, and how
/// many words it takes.
fn reading_at(w: &[&str], day: NaiveDate) -> Option<(usize, String)> {
    let at = |j: usize| w.get(j).copied().unwrap_or("");
    let before = day_text(day);
    let single = match at(0) {
        "yesterday" => Some(day_text(day.checked_sub_days(Days::new(1))?)),
        "today" | "tonight" => Some(day_text(day)),
        "tomorrow" => Some(day_text(day.checked_add_days(Days::new(1))?)),
        _ => None,
    };
    if let Some(s) = single {
        return Some((1, s));
    }
    match (at(0), at(1)) {
        ("last", "night") => return Some((2, day_text(day.checked_sub_days(Days::new(1))?))),
        ("this", "morning" | "afternoon" | "evening") => return Some((2, day_text(day))),
        ("last" | "past", "week") => return Some((2, format!("the week before {before}"))),
        ("last" | "past", "weekend") => {
            return Some((2, format!("the weekend before {before}")));
        }
        ("next", "week") => return Some((2, format!("the week after {before}"))),
        ("next", "weekend") => return Some((2, format!("the weekend after {before}"))),
        ("this", "week") => return Some((2, format!("the week of {before}"))),
        ("this", "weekend") => {
            // said on a weekend day it is that weekend, on a weekday the one coming
            let reading = if matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
                format!("the weekend of {before}")
            } else {
                format!("the weekend after {before}")
            };
            return Some((2, reading));
        }
        ("last", "month") => return Some((2, month_text(day.checked_sub_months(Months::new(1))?))),
        ("this", "month") => return Some((2, month_text(day))),
        ("next", "month") => return Some((2, month_text(day.checked_add_months(Months::new(1))?))),
        ("last", "year") => return Some((2, (day.year() - 1).to_string())),
        ("this", "year") => return Some((2, day.year().to_string())),
        ("next", "year") => return Some((2, (day.year() + 1).to_string())),
        ("last" | "this" | "next", season @ ("spring" | "summer" | "autumn" | "fall")) => {
            // the last season of that name to have ended by `day`, the one `day` is in or
            // the next to begin
            let (first, last) = match season {
                "spring" => (3, 5),
                "summer" => (6, 8),
                _ => (9, 11),
            };
            let m = day.month();
            let year = match at(0) {
                "last" if m > last => day.year(),
                "last" => day.year() - 1,
                "next" if m < first => day.year(),
                "next" => day.year() + 1,
                // "this summer" said in winter is the one coming (or gone): the same year
                _ => day.year(),
            };
            let name = if season == "fall" { "autumn" } else { season };
            return Some((2, format!("{name} {year}")));
        }
        (side @ ("last" | "next"), d) if weekday_of(d).is_some() => {
            let name = weekday_of(d).map(weekday_name)?;
            let side = if side == "last" { "before" } else { "after" };
            return Some((2, format!("the {name} {side} {before}")));
        }
        _ => {}
    }
    // "two weeks ago", "a few days ago", "3 years ago"
    let (count, n) = count_at(w)?;
    let unit = at(n);
    let unit = unit.strip_suffix('s').unwrap_or(unit);
    if at(n + 1) != "ago" {
        return None;
    }
    let taken = n + 2;
    let reading = match (count, unit) {
        (Count::Exact(k), "day") => day_text(day.checked_sub_days(Days::new(u64::from(k)))?),
        (Count::Exact(k), "month") => month_text(day.checked_sub_months(Months::new(k))?),
        (Count::Exact(k), "year") => day.year().checked_sub(i32::try_from(k).ok()?)?.to_string(),
        (Count::Exact(1), u @ ("week" | "weekend")) => format!("the {u} before {before}"),
        (Count::Exact(k), u @ ("week" | "weekend")) => {
            format!("{} {u}s before {before}", count_words(k))
        }
        (Count::Vague(v), u @ ("day" | "week" | "weekend" | "month" | "year")) => {
            format!("{v} {u}s before {before}")
        }
        _ => return None,
    };
    Some((taken, reading))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default()
    }

    fn read(text: &str) -> String {
        // a Thursday
        with_dates_resolved(text, day(2023, 3, 16))
    }

    #[test]
    fn days_around_the_note_are_dates() {
        assert_eq!(
            read("Went to the support group yesterday."),
            "Went to the support group yesterday (15 March 2023)."
        );
        assert_eq!(
            read("Tomorrow is the fair"),
            "Tomorrow (17 March 2023) is the fair"
        );
        assert_eq!(
            read("I watched it last night and today"),
            "I watched it last night (15 March 2023) and today (16 March 2023)"
        );
    }

    #[test]
    fn weeks_and_weekdays_are_read_as_locomo_writes_them() {
        assert_eq!(
            read("Jon started hitting the gym last week"),
            "Jon started hitting the gym last week (the week before 16 March 2023)"
        );
        assert_eq!(
            read("We went hiking last weekend."),
            "We went hiking last weekend (the weekend before 16 March 2023)."
        );
        assert_eq!(
            read("I met her last Friday!"),
            "I met her last Friday (the Friday before 16 March 2023)!"
        );
        assert_eq!(
            read("See you next Tuesday"),
            "See you next Tuesday (the Tuesday after 16 March 2023)"
        );
        // on a Thursday "this weekend" is the coming one, on a Sunday the one it is
        assert_eq!(
            read("this weekend"),
            "this weekend (the weekend after 16 March 2023)"
        );
        assert_eq!(
            with_dates_resolved("this weekend", day(2023, 3, 19)),
            "this weekend (the weekend of 19 March 2023)"
        );
    }

    #[test]
    fn months_and_years_are_named() {
        assert_eq!(read("last month"), "last month (February 2023)");
        assert_eq!(
            read("Next month we move"),
            "Next month (April 2023) we move"
        );
        assert_eq!(read("last year"), "last year (2022)");
        assert_eq!(
            with_dates_resolved("since last month", day(2023, 1, 31)),
            "since last month (December 2022)"
        );
        assert_eq!(
            with_dates_resolved("next month", day(2023, 1, 31)),
            "next month (February 2023)"
        );
    }

    #[test]
    fn counts_ago_are_counted_back() {
        assert_eq!(read("two days ago"), "two days ago (14 March 2023)");
        assert_eq!(read("3 months ago"), "3 months ago (December 2022)");
        assert_eq!(read("five years ago"), "five years ago (2018)");
        assert_eq!(read("a year ago"), "a year ago (2022)");
        assert_eq!(
            read("I got Coco two weeks ago"),
            "I got Coco two weeks ago (two weeks before 16 March 2023)"
        );
        assert_eq!(
            read("a week ago"),
            "a week ago (the week before 16 March 2023)"
        );
        assert_eq!(
            read("I got it a few years ago"),
            "I got it a few years ago (a few years before 16 March 2023)"
        );
        assert_eq!(
            read("a couple of weeks ago"),
            "a couple of weeks ago (a couple of weeks before 16 March 2023)"
        );
    }

    #[test]
    fn seasons_are_the_nearest_of_their_name() {
        assert_eq!(read("last summer"), "last summer (summer 2022)");
        assert_eq!(read("this summer"), "this summer (summer 2023)");
        assert_eq!(
            with_dates_resolved("last summer", day(2023, 10, 2)),
            "last summer (summer 2023)"
        );
        assert_eq!(read("next fall"), "next fall (autumn 2023)");
    }

    #[test]
    fn vague_or_absent_dates_leave_the_text_as_written() {
        for text in [
            "I've been painting lately.",
            "Recently I saw her the other day.",
            "On Friday we met.",
            "The last time we spoke",
            "This is the week's best",
            "a few ago",
            "",
            "日本語のテキスト",
            "last",
            "ago",
        ] {
            assert_eq!(read(text), text);
        }
    }

    #[test]
    fn a_possessive_keeps_its_ending() {
        assert_eq!(read("last year's trip"), "last year's (2022) trip");
    }

    #[test]
    fn a_reading_written_already_is_not_added_twice() {
        let once = read("yesterday");
        assert_eq!(read(&once), once);
    }

    #[test]
    fn the_edges_of_the_calendar_give_no_reading_rather_than_a_wrong_one() {
        assert_eq!(
            with_dates_resolved("yesterday", NaiveDate::MIN),
            "yesterday"
        );
        assert_eq!(with_dates_resolved("tomorrow", NaiveDate::MAX), "tomorrow");
        assert_eq!(
            with_dates_resolved("next month", NaiveDate::MAX),
            "next month"
        );
    }
}
