//! Time expressions in queries: "on 13 October, 2023", "in May 2022", "last May", "in 2023",
//! "yesterday", "last week", "past year", "since March". Recall prefers memories that occurred
//! in the span a query names.
//!
//! [`find_time_expression`] finds the most specific English time expression in a text, and
//! [`TimeReference::span`] turns it into a [`TimeSpan`]. Expressions that leave out the year
//! ("in May", "on 13 October"), count from the present ("yesterday", "past year") or run up to
//! it ("since March") need to know what "now" is; [`TimeReference::needs_now`] says so, and the
//! caller decides what "now" means (the clock, or the reference time a caller gives), so that
//! this module reads no clock.
//!
//! "since" makes the span run from the start of what follows it up to the end of now's day:
//! "since March" is March and every day after it, not March alone. "past" counts back from now
//! ("past year" is the last twelve months), where "last" names the calendar period before the
//! current one ("last year" is the previous calendar year).
//!
//! A month name alone counts only after a word that makes it a time ("in May", "last May",
//! "early May"), so that "may" the verb is not read as a month; a bare year likewise needs
//! "in", "during", "of" or "throughout" before it.

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};

/// A half-open span of time, `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeSpan {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl TimeSpan {
    fn days(first: NaiveDate, count: u64) -> TimeSpan {
        TimeSpan { start: midnight(first), end: midnight(first + Days::new(count)) }
    }

    fn month(year: i32, month: u32) -> Option<TimeSpan> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        Some(TimeSpan { start: midnight(first), end: midnight(first + Months::new(1)) })
    }

    fn year(year: i32) -> Option<TimeSpan> {
        let first = NaiveDate::from_ymd_opt(year, 1, 1)?;
        Some(TimeSpan { start: midnight(first), end: midnight(first + Months::new(12)) })
    }

    pub fn contains(&self, time: DateTime<Utc>) -> bool {
        self.start <= time && time < self.end
    }
}

/// A time expression as written, before it is placed in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeExpression {
    /// A calendar day; without a year, the latest such day not after now.
    Day { year: Option<i32>, month: u32, day: u32 },
    /// A calendar month; without a year, the latest such month that began by now, or
    /// (`last` May) the latest that ended before now's month.
    Month { year: Option<i32>, month: u32, previous: bool },
    Year(i32),
    /// Days counted back from now's day: today is `Relative { days_back: 0, length: 1 }`.
    Relative { days_back: u64, length: u64 },
    /// Now's calendar month or year (`this month`) or the one before (`last month`).
    ThisMonth { previous: bool },
    ThisYear { previous: bool },
    /// The months up to and including now's day: `past year` is twelve, `past month` one.
    Trailing { months: u32 },
}

/// A time expression found in a text, and whether the text asks for everything from its start
/// on ("since March").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeReference {
    pub expression: TimeExpression,
    pub onwards: bool,
}

impl TimeReference {
    /// Whether [`TimeReference::span`] depends on what "now" is.
    pub fn needs_now(&self) -> bool {
        self.onwards || self.expression.needs_now()
    }

    /// The span the text names; from the expression's start to the end of now's day when it
    /// runs onwards. `None` for a date that does not exist, or without the `now` it needs.
    pub fn span(&self, now: Option<DateTime<Utc>>) -> Option<TimeSpan> {
        let span = self.expression.span(now)?;
        if !self.onwards {
            return Some(span);
        }
        let end_of_today = midnight(now?.date_naive() + Days::new(1));
        Some(TimeSpan { start: span.start, end: span.end.max(end_of_today) })
    }
}

impl TimeExpression {
    /// Whether [`TimeExpression::span`] depends on what "now" is.
    pub fn needs_now(&self) -> bool {
        !matches!(
            self,
            TimeExpression::Day { year: Some(_), .. } | TimeExpression::Month { year: Some(_), .. } | TimeExpression::Year(_)
        )
    }

    /// The span this expression names, reading `now` only for expressions relative to the
    /// present. `None` for a date that does not exist (30 February), or without the `now` it needs.
    pub fn span(&self, now: Option<DateTime<Utc>>) -> Option<TimeSpan> {
        let today = || now.map(|now| now.date_naive());
        match *self {
            TimeExpression::Day { year: Some(year), month, day } => Some(TimeSpan::days(NaiveDate::from_ymd_opt(year, month, day)?, 1)),
            TimeExpression::Day { year: None, month, day } => {
                let today = today()?;
                let this_year = NaiveDate::from_ymd_opt(today.year(), month, day);
                let date = match this_year {
                    Some(date) if date <= today => date,
                    _ => NaiveDate::from_ymd_opt(today.year() - 1, month, day)?,
                };
                Some(TimeSpan::days(date, 1))
            }
            TimeExpression::Month { year: Some(year), month, .. } => TimeSpan::month(year, month),
            TimeExpression::Month { year: None, month, previous } => {
                let today = today()?;
                let this_year = if previous { month < today.month() } else { month <= today.month() };
                TimeSpan::month(if this_year { today.year() } else { today.year() - 1 }, month)
            }
            TimeExpression::Year(year) => TimeSpan::year(year),
            TimeExpression::Relative { days_back, length } => Some(TimeSpan::days(today()? - Days::new(days_back), length)),
            TimeExpression::ThisMonth { previous } => {
                let today = today()?;
                let month = if previous { today - Months::new(1) } else { today };
                TimeSpan::month(month.year(), month.month())
            }
            TimeExpression::ThisYear { previous } => TimeSpan::year(today()?.year() - i32::from(previous)),
            TimeExpression::Trailing { months } => {
                let tomorrow = today()? + Days::new(1);
                Some(TimeSpan { start: midnight(tomorrow - Months::new(months)), end: midnight(tomorrow) })
            }
        }
    }
}

const MONTHS: [&str; 12] =
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

/// Words after which a month name is a time: "in May", "last May". Not "this", because "this
/// may" is far more often a verb than a month.
const MONTH_CUES: &[&str] = &["in", "during", "of", "throughout", "early", "mid", "late", "last", "since", "until"];
/// Words after which four digits are a year: "in 2023", "during 2023", "since 2023".
const YEAR_CUES: &[&str] = &["in", "during", "of", "throughout", "since"];
/// The word that makes a span run on to the present.
const ONWARDS: &str = "since";

/// Words and phrases that ask about the time before a change: "what did we use before",
/// "which database did we use originally".
const PAST_CUES: &[&[&str]] = &[
    &["before"], &["previously"], &["formerly"], &["originally"], &["initially"], &["earlier"], &["prior"],
    &["former"], &["used", "to"], &["in", "the", "past"], &["back", "then"], &["at", "the", "time"], &["at", "first"],
    &["until"], &["old"],
];
/// Words and phrases that ask about the present, whatever else the question says.
const PRESENT_CUES: &[&[&str]] = &[
    &["now"], &["currently"], &["current"], &["still"], &["today"], &["nowadays"], &["these", "days"], &["latest"],
    &["at", "the", "moment"],
];

/// Whether a question asks about the past rather than the present: it has a cue of the time
/// before ("before", "previously", "used to", "originally", …) or names a span of time that
/// ended before `now` ("in 2025", "last year"), and no cue of the present ("now", "currently",
/// "still", …). A question without either is about the present.
pub fn asks_about_the_past(text: &str, now: Option<DateTime<Utc>>) -> bool {
    let words = words(text);
    let has = |cues: &[&[&str]]| cues.iter().any(|cue| words.windows(cue.len()).any(|window| window.iter().zip(cue.iter()).all(|(word, part)| word == part)));
    if has(PRESENT_CUES) {
        return false;
    }
    if has(PAST_CUES) {
        return true;
    }
    let ended = find_time_expression(text).filter(|reference| !reference.onwards).and_then(|reference| reference.span(now));
    matches!((ended, now), (Some(span), Some(now)) if span.end <= now)
}

/// The most specific time expression in `text`: a full date, else a date without its year or a
/// month with its year, else an expression relative to now, else a month, else a year.
pub fn find_time_expression(text: &str) -> Option<TimeReference> {
    let words = words(text);
    let (position, expression) = iso_date(text)
        .or_else(|| full_date(&words))
        .or_else(|| partial_date(&words))
        .or_else(|| relative(&words))
        .or_else(|| month_alone(&words))
        .or_else(|| year_alone(&words))?;
    // "since 13 October", "since last week"; a month or a year takes "since" as its cue word,
    // which is where its position points.
    let onwards = words.get(position).is_some_and(|word| word == ONWARDS)
        || position.checked_sub(1).and_then(|before| words.get(before)).is_some_and(|word| word == ONWARDS);
    Some(TimeReference { expression, onwards })
}

/// Lower-case runs of letters and digits; everything else separates them.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(str::to_lowercase).collect()
}

/// `2023-10-13`, not inside a longer run of digits and dashes. Each finder returns the position
/// (in [`words`]) where its expression starts, with the expression.
fn iso_date(text: &str) -> Option<(usize, TimeExpression)> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(9)).find_map(|start| {
        let candidate = text.get(start..start + 10)?;
        let shape = candidate.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
        let bounded = |b: Option<&u8>| b.is_none_or(|b| !b.is_ascii_digit() && *b != b'-');
        if !shape || !bounded(start.checked_sub(1).and_then(|i| bytes.get(i))) || !bounded(bytes.get(start + 10)) {
            return None;
        }
        let date = NaiveDate::parse_from_str(candidate, "%Y-%m-%d").ok()?;
        Some((words(&text[..start]).len(), TimeExpression::Day { year: Some(date.year()), month: date.month(), day: date.day() }))
    })
}

/// `13 October 2023`, `13th Oct, 2023`, `October 13, 2023`.
fn full_date(words: &[String]) -> Option<(usize, TimeExpression)> {
    words.windows(3).enumerate().find_map(|(position, w)| {
        let (month, day) = match (month_of(&w[0]), month_of(&w[1])) {
            (None, Some(month)) => (month, day_of(&w[0])?),
            (Some(month), None) => (month, day_of(&w[1])?),
            _ => return None,
        };
        Some((position, TimeExpression::Day { year: Some(year_of(&w[2])?), month, day }))
    })
}

/// `13 October` or `October 13` without a year, and `October 2023`.
fn partial_date(words: &[String]) -> Option<(usize, TimeExpression)> {
    words.windows(2).enumerate().find_map(|(position, w)| {
        let expression = match (month_of(&w[0]), month_of(&w[1])) {
            (None, Some(month)) => TimeExpression::Day { year: None, month, day: day_of(&w[0])? },
            (Some(month), None) => match year_of(&w[1]) {
                Some(year) => TimeExpression::Month { year: Some(year), month, previous: false },
                None => TimeExpression::Day { year: None, month, day: day_of(&w[1])? },
            },
            _ => return None,
        };
        Some((position, expression))
    })
}

/// `today`, `yesterday`, `this week`, `last week`, `this month`, `last month`, `this year`,
/// `last year`, and `past week`, `past month`, `past year` counted back from today.
fn relative(words: &[String]) -> Option<(usize, TimeExpression)> {
    let single = words.iter().enumerate().find_map(|(position, word)| match word.as_str() {
        "today" => Some((position, TimeExpression::Relative { days_back: 0, length: 1 })),
        "yesterday" => Some((position, TimeExpression::Relative { days_back: 1, length: 1 })),
        _ => None,
    });
    single.or_else(|| {
        words.windows(2).enumerate().find_map(|(position, w)| {
            let expression = match (w[0].as_str(), w[1].as_str()) {
                // The seven days up to today, and the seven before them.
                ("this" | "past", "week") => TimeExpression::Relative { days_back: 6, length: 7 },
                ("last", "week") => TimeExpression::Relative { days_back: 13, length: 7 },
                ("this", "month") => TimeExpression::ThisMonth { previous: false },
                ("last", "month") => TimeExpression::ThisMonth { previous: true },
                ("past", "month") => TimeExpression::Trailing { months: 1 },
                ("this", "year") => TimeExpression::ThisYear { previous: false },
                ("last", "year") => TimeExpression::ThisYear { previous: true },
                ("past", "year") => TimeExpression::Trailing { months: 12 },
                _ => return None,
            };
            Some((position, expression))
        })
    })
}

/// `in May`, `last May`, `early May`, `since May`; the position is the cue word's.
fn month_alone(words: &[String]) -> Option<(usize, TimeExpression)> {
    words.windows(2).enumerate().find_map(|(position, w)| {
        let month = MONTHS.iter().position(|name| *name == w[1])? as u32 + 1;
        MONTH_CUES.contains(&w[0].as_str()).then_some((position, TimeExpression::Month { year: None, month, previous: w[0] == "last" }))
    })
}

/// `in 2023`, `during 2023`, `since 2023`; the position is the cue word's.
fn year_alone(words: &[String]) -> Option<(usize, TimeExpression)> {
    words.windows(2).enumerate().find_map(|(position, w)| {
        YEAR_CUES.contains(&w[0].as_str()).then(|| year_of(&w[1])).flatten().map(|year| (position, TimeExpression::Year(year)))
    })
}

/// A month's number from its full name or its first three letters (and `sept`).
fn month_of(word: &str) -> Option<u32> {
    let position = MONTHS.iter().position(|name| *name == word || (word.len() == 3 && name.starts_with(word)) || (word == "sept" && *name == "september"))?;
    Some(position as u32 + 1)
}

/// `13` or `13th`, 1 to 31.
fn day_of(word: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"].iter().find_map(|suffix| word.strip_suffix(suffix)).unwrap_or(word);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|day| (1..=31).contains(day))
}

/// Four digits from 1900 to 2199.
fn year_of(word: &str) -> Option<i32> {
    if word.len() != 4 || !word.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    word.parse().ok().filter(|year| (1900..2200).contains(year))
}

fn midnight(date: NaiveDate) -> DateTime<Utc> {
    date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
}
