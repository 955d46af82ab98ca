//! Whether a new memory contradicts an existing one, from their words alone.
//!
//! A coding agent's notes are full of sentences that look alike and do not conflict ("fixed bug
//! 123 in the parser", "fixed bug 456 in the parser"), so every rule here asks for two things: the
//! same subject (nearly the same content words, sentence by sentence) and an explicit sign of
//! conflict, of one of three kinds:
//!
//! - **negation**: the same claim, one side negated ("the API uses JWT" / "the API does not use
//!   JWT") or an antonym of a state ("caching is enabled" / "caching is disabled");
//! - **changed value**: the same key given another value, where the sentence says it is a value
//!   (`timeout is 30s` / `timeout is 60s`, `port 5432` / `port 6543`, `log level: debug` /
//!   `log level: info`): after a copula or `=`/`:`, or after a word that names a setting;
//! - **superseded**: the newer statement says the older one's choice was replaced ("we moved
//!   from MySQL to PostgreSQL", "v2 replaces v1", "instead of", "no longer", "switched to"),
//!   names what the older one asserts, and shares its subject.
//!
//! When none of these is found, [`super::change`] reads the many other ways a newer statement
//! says that a fact changed ("we replaced X with Y", "X took over from Y", "as of March …",
//! "S moved to Y", "… now") and a newer statement giving the same setting other numbers.
//!
//! Precision matters more than recall: a contradiction an agent is told of must be one. The
//! corpus in `tests/fixtures/contradictions.json` holds true conflicts and near-misses.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{LazyLock, OnceLock};

use foldhash::HashSet;

use super::ContradictionKind;
use crate::claim::Tokenized;
use crate::decision::similarity::dice;
use crate::term::{Term, term};

/// Sentences whose content words are at least this alike (Dice) state the same claim, so that
/// one of them negated is a contradiction. High on purpose: "tests run on forks" and "tests do
/// not run on main" differ in one word and do not conflict.
const NEGATION_SUBJECT: f64 = 0.9;
/// Sentences giving a key a value share at least this much of the rest of their words.
const VALUE_SUBJECT: f64 = 0.8;
/// A "switched to Y" sentence, with Y and the older choice set aside, shares at least this
/// much with the older sentence.
const SWITCH_SUBJECT: f64 = 0.6;
/// A sentence saying a choice was replaced shares at least this many words with the older
/// sentence besides the choices themselves: "moving to X is tracked in KEN-1" and "tracked in
/// KEN-2" share one word and are not about one thing.
const MIN_SHARED: usize = 2;
/// A vector similarity (cosine) at which the caller's embedder says two memories are about
/// the same thing; it lowers the word-overlap bar of a changed value, never the conflict sign.
const VECTOR_SUBJECT: f64 = 0.9;
/// Two memories are about the same thing only if at least this much of their words (values
/// aside) are shared, whatever their sentences say: a long note and another that share one
/// boilerplate sentence ("latency went from 851 ms to 207 ms at p95") are about different
/// components. A vector similarity of [`VECTOR_SUBJECT`] or more stands in for it.
const MEMORY_SUBJECT: f64 = 0.4;
/// Sentences compared per memory; a long memory is compared by its first sentences only, which
/// bounds the work of one capture.
const MAX_SENTENCES: usize = 12;

/// A conflict found between an older and a newer statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    pub kind: ContradictionKind,
    /// The words of the older statement that the newer one contradicts.
    pub older: Vec<String>,
    /// The words of the newer statement that contradict it.
    pub newer: Vec<String>,
    /// Whether the newer statement itself says the older one's fact changed ("moved from X to
    /// Y"), so that recency settles it; false when only the older one says so.
    pub newer_states_change: bool,
}

/// Compares a newer memory's text with an older one's. `vector_similarity` is the cosine of
/// their embeddings when the caller has them.
pub fn detect(older: &str, newer: &str, vector_similarity: Option<f64>) -> Option<Detection> {
    detect_read(&Reading::new(older), &Reading::new(newer), vector_similarity)
}

/// A memory's text read once for comparison with several others: reading (splitting,
/// tokenising, stemming) costs more than comparing, and a capture is compared with each of its
/// neighbours.
pub struct Reading<'a> {
    text: Cow<'a, str>,
    sentences: OnceLock<Vec<Sentence>>,
    subject: OnceLock<BTreeSet<Term>>,
    statements: OnceLock<Vec<super::change::Statement>>,
}

impl<'a> Reading<'a> {
    pub fn new(text: &'a str) -> Reading<'a> {
        Reading { text: Cow::Borrowed(text), sentences: OnceLock::new(), subject: OnceLock::new(), statements: OnceLock::new() }
    }

    /// A reading that keeps its own copy of the text, to be kept beyond the text's owner.
    pub fn owned(text: String) -> Reading<'static> {
        Reading { text: Cow::Owned(text), sentences: OnceLock::new(), subject: OnceLock::new(), statements: OnceLock::new() }
    }

    /// The text read.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Reads now what the comparisons read on first use, so that a reading prepared on one
    /// thread is compared on another without further work.
    pub fn prepare(&self) {
        self.sentences();
        self.subject();
        self.statements();
    }

    fn sentences(&self) -> &[Sentence] {
        self.sentences.get_or_init(|| sentences(&self.text).into_iter().take(MAX_SENTENCES).collect())
    }

    /// The content words of all its sentences, values aside.
    fn subject(&self) -> &BTreeSet<Term> {
        self.subject.get_or_init(|| self.sentences().iter().flat_map(|sentence| sentence.subject().iter().cloned()).collect())
    }

    /// Reads its words as the claim rules do ([`crate::claim::ClaimRules::tokenize`]) once, for
    /// its statements and for `also`, which is handed them: a caller that judges claims makes
    /// its claim from them ([`crate::claim::ClaimRules::claim_of`]) rather than reading the text
    /// again. The reading does not keep them: a kept reading holds what is compared, not what it
    /// was made from.
    pub fn with_words<T>(&self, also: impl FnOnce(Tokenized) -> T) -> T {
        let words = super::change::rules().tokenize(&self.text);
        self.statements.get_or_init(|| super::change::statements(&words));
        also(words)
    }

    fn statements(&self) -> &[super::change::Statement] {
        self.statements.get_or_init(|| super::change::statements(&super::change::rules().tokenize(&self.text)))
    }
}

/// [`detect`] on texts already read.
pub fn detect_read(older: &Reading<'_>, newer: &Reading<'_>, vector_similarity: Option<f64>) -> Option<Detection> {
    if older.text.trim() == newer.text.trim() {
        return None;
    }
    by_words(older, newer, vector_similarity).or_else(|| super::change::update(older.statements(), newer.statements()))
}

/// The detections of the module documentation, from the shared words of the two texts.
fn by_words(older: &Reading<'_>, newer: &Reading<'_>, vector_similarity: Option<f64>) -> Option<Detection> {
    let olds = older.sentences();
    let news = newer.sentences();
    let close = vector_similarity.is_some_and(|value| value >= VECTOR_SUBJECT);
    if !close && dice(older.subject(), newer.subject()) < MEMORY_SUBJECT {
        return None;
    }
    let pairs = || news.iter().flat_map(|new| olds.iter().map(move |old| (old, new)));
    if let Some(found) = pairs().find_map(|(old, new)| superseded(old, new)) {
        return Some(Detection { kind: ContradictionKind::Superseded, older: quoted(found.0), newer: quoted(found.1), newer_states_change: true });
    }
    // The older statement says its subject changed and the newer one asserts what it changed
    // from: a conflict, but recency cannot settle it.
    if let Some(found) = pairs().find_map(|(old, new)| superseded(new, old)) {
        return Some(Detection { kind: ContradictionKind::Superseded, older: quoted(found.1), newer: quoted(found.0), newer_states_change: false });
    }
    if let Some(found) = pairs().find_map(|(old, new)| changed_value(old, new, close)) {
        return Some(Detection { kind: ContradictionKind::ChangedValue, older: quoted(found.0), newer: quoted(found.1), newer_states_change: false });
    }
    pairs()
        .find_map(|(old, new)| negation(old, new))
        .map(|found| Detection { kind: ContradictionKind::Negation, older: quoted(found.0), newer: quoted(found.1), newer_states_change: false })
}

/// The words a detection quotes, as it keeps them.
pub(super) fn quoted(words: Vec<Term>) -> Vec<String> {
    words.iter().map(Term::to_string).collect()
}

/// One sentence: its tokens (lower-cased words, numbers, `=` and `:`) and its content words,
/// with what the rules read from it made on first use: a sentence of a memory is compared with
/// every sentence of each memory it is checked against.
#[derive(Debug)]
struct Sentence {
    tokens: Vec<Term>,
    /// Stemmed content words, values included.
    content: BTreeSet<Term>,
    negated: bool,
    subject: OnceLock<BTreeSet<Term>>,
    settings: OnceLock<Vec<Setting>>,
    change: OnceLock<Option<Change>>,
}

impl Sentence {
    fn new(text: &str) -> Sentence {
        let tokens = tokens(text);
        let content = tokens.iter().filter(|token| is_content(token)).map(stem_term).collect();
        let negated = tokens.iter().any(|token| is_negation(token));
        Sentence { tokens, content, negated, subject: OnceLock::new(), settings: OnceLock::new(), change: OnceLock::new() }
    }

    /// Content words that are not values.
    fn subject(&self) -> &BTreeSet<Term> {
        self.subject.get_or_init(|| self.content.iter().filter(|word| !has_digit(word)).cloned().collect())
    }

    /// The keys it gives values to.
    fn settings(&self) -> &[Setting] {
        self.settings.get_or_init(|| settings(self))
    }

    /// The change of choice it tells of, if any.
    fn change(&self) -> Option<&Change> {
        self.change.get_or_init(|| change_of(self)).as_ref()
    }
}

fn sentences(text: &str) -> Vec<Sentence> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let ends = match c {
            '\n' | ';' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|next| next.is_whitespace()),
            _ => false,
        };
        if ends {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    parts.push(current);
    parts.iter().map(|part| Sentence::new(part)).filter(|sentence| !sentence.content.is_empty()).collect()
}

/// Lower-cased tokens: runs of letters, digits and `. _ - ' % #` (so `v1.2.3`, `30s`, `don't`
/// and `snake_case` stay whole), trimmed of punctuation at their ends; `=` and `:` are tokens
/// of their own, because they mark a value.
fn tokens(text: &str) -> Vec<Term> {
    let mut out = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, out: &mut Vec<Term>| {
        let trimmed = current.trim_matches(|c: char| matches!(c, '.' | '_' | '-' | '\'' | '#'));
        if !trimmed.is_empty() {
            out.push(term(trimmed));
        }
        current.clear();
    };
    for c in text.chars().flat_map(char::to_lowercase) {
        let c = if c == '\u{2019}' { '\'' } else { c };
        if c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '\'' | '%' | '#') {
            current.push(c);
        } else {
            flush(&mut current, &mut out);
            if c == '=' || c == ':' {
                out.push(term(if c == '=' { "=" } else { ":" }));
            }
        }
    }
    flush(&mut current, &mut out);
    out
}

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "being", "by", "for", "from", "in", "into", "is", "it", "its", "of",
    "on", "or", "our", "so", "than", "that", "the", "their", "then", "this", "these", "those", "to", "we", "with", "will",
    "was", "were", "has", "have", "had", "do", "does", "did", "should", "must", "can", "could", "would", "may", "might",
    "shall", "which", "who", "when", "where", "there", "here", "also", "just", "now", "currently", "still", "all", "each",
    "every", "via", "per", "use", "uses", "using", "used", "i", "you", "they", "he", "she", "us", "them", "my", "your",
    "any", "some", "more", "most", "very", "only", "if", "but", "because", "=", ":", "set", "longer", "anymore", "instead",
    "over",
];

/// Words that negate the claim of their sentence.
fn is_negation(token: &str) -> bool {
    matches!(token, "not" | "no" | "never" | "cannot" | "none" | "nothing" | "neither" | "nor" | "nobody") || token.ends_with("n't")
}

fn is_content(token: &str) -> bool {
    // Every word of every sentence compared is looked up here: a set, not a scan of the list.
    static STOP: LazyLock<HashSet<&str>> = LazyLock::new(|| STOP_WORDS.iter().copied().collect());
    !STOP.contains(token) && !is_negation(token) && (token.chars().count() >= 2 || has_digit(token))
}

fn has_digit(token: &str) -> bool {
    token.chars().any(|c| c.is_ascii_digit())
}

/// A light stem so that "uses" meets "use" and "services" meets "service"; values and short
/// words stay as they are. Both sides are stemmed alike, so a crude stem costs nothing.
fn stem(token: &str) -> Cow<'_, str> {
    if has_digit(token) || token.chars().count() <= 3 {
        return Cow::Borrowed(token);
    }
    if let Some(base) = token.strip_suffix("ies") {
        return Cow::Owned(format!("{base}y"));
    }
    if token.ends_with('s') && !token.ends_with("ss") && !token.ends_with("us") && !token.ends_with("is") {
        return Cow::Borrowed(&token[..token.len() - 1]);
    }
    Cow::Borrowed(token)
}

/// [`stem`] as a term to keep: the token itself when its stem is the whole of it.
fn stem_term(token: &Term) -> Term {
    match stem(token) {
        Cow::Borrowed(stemmed) if stemmed.len() == token.len() => token.clone(),
        stemmed => term(&stemmed),
    }
}

// ---------------------------------------------------------------------------------------------
// Negation

/// Pairs of words that state opposite states of the same thing.
const ANTONYMS: &[(&str, &str)] = &[
    ("enabled", "disabled"),
    ("enable", "disable"),
    ("true", "false"),
    ("allowed", "forbidden"),
    ("allowed", "disallowed"),
    ("supported", "unsupported"),
    ("required", "optional"),
    ("synchronous", "asynchronous"),
    ("sync", "async"),
    ("public", "private"),
];

fn antonym(word: &str) -> Option<&'static str> {
    ANTONYMS.iter().find_map(|(a, b)| if *a == word { Some(*b) } else if *b == word { Some(*a) } else { None })
}

fn negation(old: &Sentence, new: &Sentence) -> Option<(Vec<Term>, Vec<Term>)> {
    if old.content.len() < 2 || new.content.len() < 2 {
        return None;
    }
    if old.negated != new.negated {
        if dice(&old.content, &new.content) < NEGATION_SUBJECT {
            return None;
        }
        let negations = |sentence: &Sentence| sentence.tokens.iter().filter(|token| is_negation(token)).cloned().collect::<Vec<_>>();
        return Some((negations(old), negations(new)));
    }
    // Same polarity: the sentences differ by one word and its antonym, all else equal. One word
    // on each side apart means as many words on each side, and with two words or more each,
    // at least one shared; most pairs of sentences fail the first test, before any set is walked.
    if old.content.len() != new.content.len() {
        return None;
    }
    let (a, b) = (only_word(&old.content, &new.content)?, only_word(&new.content, &old.content)?);
    (antonym(a) == Some(b.as_str())).then(|| (vec![a.clone()], vec![b.clone()]))
}

/// The one word of `these` that `those` lacks, or `None` when there is none or more than one.
fn only_word<'a>(these: &'a BTreeSet<Term>, those: &'a BTreeSet<Term>) -> Option<&'a Term> {
    let mut missing = these.difference(those);
    let word = missing.next()?;
    missing.next().is_none().then_some(word)
}

// ---------------------------------------------------------------------------------------------
// Changed value

/// Words that name a setting, so that the value after them is that setting's value with no
/// `is` or `=` between ("port 5432", "timeout 30s").
const KEY_NOUNS: &[&str] = &[
    "port", "version", "timeout", "limit", "size", "level", "branch", "host", "hostname", "region", "mode", "path", "url",
    "endpoint", "directory", "dir", "folder", "format", "encoding", "locale", "timezone", "driver", "backend", "provider",
    "engine", "database", "db", "runtime", "framework", "manager", "registry", "channel", "strategy", "policy", "default",
    "threshold", "interval", "ttl", "retries", "retry", "concurrency", "workers", "replicas", "quota", "rate", "model",
    "python", "node", "rust", "java", "go", "msrv", "edition", "toolchain", "max", "min", "maximum", "minimum", "pool",
    "batch", "capacity", "budget", "deadline", "delay", "cap", "bound", "workers", "threads", "connections", "target",
];

/// Words between a key and its value that say "this is the value".
const MARKERS: &[&str] = &["is", "are", "was", "were", "be", "=", ":", "to", "of", "at", "equals", "on"];

/// Words a key may be separated from its value by.
const FILLERS: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "=", ":", "to", "of", "at", "equals", "on", "set", "now", "currently",
    "changed", "defaults", "the", "a", "an", "from", "still", "always", "should", "must", "will",
];

/// Words that, before a version, describe an event rather than a setting ("release v1.2").
const EVENT_WORDS: &[&str] = &["release", "ship", "tag", "deploy", "fix", "publish", "merge", "cut", "bump", "since", "until", "before", "after", "in"];

/// Units of time (to seconds) and size (to bytes), so that `30s` and `30 seconds` are one value.
fn unit_factor(unit: &str) -> Option<f64> {
    Some(match unit {
        "ms" | "msec" | "millis" | "millisecond" | "milliseconds" => 0.001,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        "b" | "byte" | "bytes" => 1.0,
        "kb" | "kib" | "k" => 1024.0,
        "mb" | "mib" => 1024.0 * 1024.0,
        "gb" | "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

fn is_version(token: &str) -> bool {
    let bare = token.strip_prefix('v').unwrap_or(token);
    bare.chars().next().is_some_and(|c| c.is_ascii_digit())
        && bare.contains('.')
        && bare.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// A value in comparable form: a number times its unit, else the token without a leading `v`.
fn normalise(token: &str, next: Option<&str>) -> Term {
    let split = token.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(token.len());
    let (number, unit) = token.split_at(split);
    if let Ok(value) = number.parse::<f64>()
        && !is_version(token)
    {
        let factor = if unit.is_empty() { next.and_then(unit_factor) } else { unit_factor(unit) };
        if let Some(factor) = factor {
            return Term::from(format!("{}", value * factor));
        }
        if unit.is_empty() {
            return Term::from(format!("{value}"));
        }
    }
    term(token.strip_prefix('v').filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(token))
}

/// A key and the value a sentence gives it.
#[derive(Debug)]
struct Setting {
    key: Term,
    value: Term,
    /// The value as written, with its unit when the unit is a word of its own.
    written: Term,
}

fn settings(sentence: &Sentence) -> Vec<Setting> {
    let tokens = &sentence.tokens;
    let mut found = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        let numeric = has_digit(token);
        if !numeric && index == 0 {
            continue;
        }
        // Walk back over fillers (and an earlier value, as in "from 30s to 60s") to the key.
        let mut marked = false;
        let mut key = None;
        let mut back = index;
        let mut steps = 0;
        while back > 0 && steps < 5 {
            back -= 1;
            steps += 1;
            let word = tokens[back].as_str();
            if MARKERS.contains(&word) {
                marked = true;
            }
            if FILLERS.contains(&word) || (numeric && has_digit(word)) || unit_factor(word).is_some() && back + 1 < index {
                continue;
            }
            key = Some((word, back + 1 == index));
            break;
        }
        let Some((key, adjacent)) = key else { continue };
        // A key is a plain word: not a file name (`api.conf:537` is a place, not a setting)
        // and not a verb of change or a past tense ("moved 6 of 17 endpoints").
        if !is_content(key) || has_digit(key) || is_negation(key) || key.contains('.') || key.ends_with("ed") || CHANGE_VERBS.contains(&key) {
            continue;
        }
        let key_noun = KEY_NOUNS.contains(&key) || KEY_NOUNS.contains(&&*stem(key));
        let accepted = if numeric {
            marked || (adjacent && key_noun) || (adjacent && is_version(token) && !key.ends_with("ed") && !EVENT_WORDS.contains(&key))
        } else {
            // A word as a value only where the sentence plainly assigns it to a setting.
            is_content(token)
                && unit_factor(token).is_none()
                && match tokens[index - 1].as_str() {
                    "=" | ":" => true,
                    "is" | "are" | "was" | "were" => key_noun,
                    _ => false,
                }
        };
        if !accepted {
            continue;
        }
        let next = tokens.get(index + 1).map(Term::as_str);
        let written = match next {
            Some(unit) if numeric && unit_factor(unit).is_some() && !token.ends_with(|c: char| c.is_alphabetic()) => Term::from(format!("{token} {unit}")),
            _ => token.clone(),
        };
        found.push(Setting { key: term(&stem(key)), value: normalise(token, next), written });
    }
    found
}

/// Whether a sentence tells of a change or a range ("went from 851 ms to 207 ms", "from 3 to
/// 5 replicas"): history, not a value it holds now, so it is compared as a supersession only.
fn from_to(sentence: &Sentence) -> bool {
    sentence.tokens.iter().position(|token| token == "from").is_some_and(|from| sentence.tokens[from..].iter().any(|token| token == "to"))
}

fn changed_value(old: &Sentence, new: &Sentence, close: bool) -> Option<(Vec<Term>, Vec<Term>)> {
    if old.negated != new.negated || from_to(old) || from_to(new) {
        return None;
    }
    let old_settings = old.settings();
    if old_settings.is_empty() {
        return None;
    }
    let new_settings = new.settings();
    let values = |settings: &[Setting]| settings.iter().map(|setting| setting.value.clone()).collect::<BTreeSet<_>>();
    let (old_values, new_values) = (values(old_settings), values(new_settings));
    for before in old_settings {
        for after in new_settings.iter().filter(|after| after.key == before.key && after.value != before.value) {
            // A sentence naming both values ("from 30s to 60s") is not contradicted by either.
            if old_values.contains(&after.value) || new_values.contains(&before.value) {
                continue;
            }
            let strip = |sentence: &Sentence, setting: &Setting| {
                let mut words = sentence.subject().clone();
                words.remove(&*stem(&setting.value));
                words.retain(|word| stem(&setting.written) != word.as_str() && !setting.written.split(' ').any(|part| stem(part) == word.as_str()));
                words
            };
            let (old_subject, new_subject) = (strip(old, before), strip(new, after));
            let bar = if close { VALUE_SUBJECT - 0.25 } else { VALUE_SUBJECT };
            if dice(&old_subject, &new_subject) >= bar && old_subject.contains(&before.key) {
                return Some((vec![before.key.clone(), before.written.clone()], vec![after.key.clone(), after.written.clone()]));
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Superseded

/// Verbs that, with "from X to Y", say a choice or a value changed.
const CHANGE_VERBS: &[&str] = &[
    "moved", "move", "moving", "migrated", "migrate", "migrating", "switched", "switch", "switching", "changed", "change",
    "upgraded", "upgrade", "downgraded", "downgrade", "increased", "decreased", "raised", "lowered", "bumped", "went",
    "ported", "converted", "renamed", "replaced", "transitioned",
];
/// Verbs that say the choice before them replaced the one after ("v2 replaces v1").
const REPLACES: &[&str] = &["replaces", "replaced", "supersedes", "superseded", "obsoletes", "deprecates"];

/// The content words of `tokens[from..]`, at most `most`, stopping at the first stop word after
/// a content word was taken (the end of the noun phrase).
fn phrase_after(tokens: &[Term], from: usize, most: usize) -> Vec<Term> {
    let mut words = Vec::new();
    for token in tokens.iter().skip(from) {
        if is_content(token) {
            words.push(token.clone());
            if words.len() == most {
                break;
            }
        } else if !words.is_empty() || is_negation(token) || token == "to" || token == "with" || token == "by" || token == "of" {
            break;
        }
    }
    words
}

/// The last content word of `tokens[..to]`.
fn word_before(tokens: &[Term], to: usize) -> Vec<Term> {
    tokens[..to].iter().rev().find(|token| is_content(token)).cloned().into_iter().collect()
}

/// What a sentence says was replaced (`old`, empty when it does not say) and by what (`new`,
/// empty for "no longer").
#[derive(Debug)]
struct Change {
    old: Vec<Term>,
    new: Vec<Term>,
}

fn change_of(sentence: &Sentence) -> Option<Change> {
    let tokens = &sentence.tokens;
    let position = |word: &str| tokens.iter().position(|token| token == word);
    // "from X to Y" after a change verb.
    if let (Some(verb), Some(from)) = (tokens.iter().position(|token| CHANGE_VERBS.contains(&token.as_str())), position("from"))
        && verb < from
        && let Some(to) = tokens.iter().skip(from + 1).position(|token| token == "to").map(|offset| from + 1 + offset)
    {
        let old: Vec<Term> = tokens[from + 1..to].iter().filter(|token| is_content(token)).take(3).cloned().collect();
        let new = phrase_after(tokens, to + 1, 1);
        if !old.is_empty() && !new.is_empty() {
            return Some(Change { old, new });
        }
    }
    // "replaced X with Y".
    if let (Some(verb), Some(with)) = (tokens.iter().position(|token| token == "replaced" || token == "replace"), position("with"))
        && verb + 1 < with
    {
        let old: Vec<Term> = tokens[verb + 1..with].iter().filter(|token| is_content(token)).take(3).cloned().collect();
        let new = phrase_after(tokens, with + 1, 1);
        if !old.is_empty() && !new.is_empty() {
            return Some(Change { old, new });
        }
    }
    // "X was replaced by Y", "X is superseded by Y".
    if let Some(by) = position("by")
        && by > 0
        && REPLACES.contains(&tokens[by - 1].as_str())
    {
        let old = word_before(tokens, by - 1);
        let new = phrase_after(tokens, by + 1, 1);
        if !old.is_empty() && !new.is_empty() {
            return Some(Change { old, new });
        }
    }
    // "Y replaces X".
    if let Some(verb) = tokens.iter().position(|token| REPLACES.contains(&token.as_str()))
        && tokens.get(verb + 1).is_some_and(|next| next != "by")
    {
        let new = word_before(tokens, verb);
        let old = phrase_after(tokens, verb + 1, 2);
        if !old.is_empty() && !new.is_empty() {
            return Some(Change { old, new });
        }
    }
    // "Y instead of X".
    if let Some(instead) = position("instead")
        && tokens.get(instead + 1).is_some_and(|next| next == "of")
    {
        let new = word_before(tokens, instead);
        let old = phrase_after(tokens, instead + 2, 2);
        if !old.is_empty() && !new.is_empty() {
            return Some(Change { old, new });
        }
    }
    // "switched to Y", "moved to Y", "in favour of Y": what was replaced is left to the older
    // statement to say.
    for (index, token) in tokens.iter().enumerate() {
        let switched = CHANGE_VERBS.contains(&token.as_str()) && tokens.get(index + 1).is_some_and(|next| next == "to" || next == "over");
        let favour = (token == "favour" || token == "favor") && tokens.get(index + 1).is_some_and(|next| next == "of");
        if switched || favour {
            let after = if tokens.get(index + 1).is_some_and(|next| next == "over") && tokens.get(index + 2).is_some_and(|next| next == "to") {
                index + 3
            } else {
                index + 2
            };
            let new = phrase_after(tokens, after, 1);
            if !new.is_empty() {
                return Some(Change { old: Vec::new(), new });
            }
        }
    }
    // "no longer X", "not X anymore": X is what stopped being so.
    let no_longer = tokens.windows(2).position(|pair| pair[0] == "no" && pair[1] == "longer").map(|at| at + 2);
    let anymore = tokens.iter().any(|token| token == "anymore") || tokens.windows(2).any(|pair| pair[0] == "any" && pair[1] == "more");
    if let Some(after) = no_longer {
        let old: Vec<Term> = tokens[after..].iter().filter(|token| is_content(token)).take(4).cloned().collect();
        if !old.is_empty() {
            return Some(Change { old, new: Vec::new() });
        }
    }
    if anymore && sentence.negated {
        let old: Vec<Term> = tokens.iter().filter(|token| is_content(token) && *token != "any" && *token != "more").take(6).cloned().collect();
        if !old.is_empty() {
            return Some(Change { old, new: Vec::new() });
        }
    }
    None
}

fn stems(words: &[Term]) -> BTreeSet<Term> {
    words.iter().map(stem_term).collect()
}

/// Whether `new` says that what `old` asserts was replaced: the words it says were replaced
/// appear in `old`, the words that replaced them do not, and the rest of their subject is
/// shared. Returns the words of `old` and of `new` that conflict.
fn superseded(old: &Sentence, new: &Sentence) -> Option<(Vec<Term>, Vec<Term>)> {
    let change = new.change()?;
    // An older sentence that states a change of its own is history, not a claim to replace.
    if old.change().is_some() {
        return None;
    }
    let new_words = stems(&change.new);
    if new_words.iter().any(|word| old.content.contains(word)) {
        return None;
    }
    let original = |stemmed: &BTreeSet<Term>| -> Vec<Term> {
        old.tokens.iter().filter(|token| is_content(token) && stemmed.contains(&*stem(token))).cloned().collect::<Vec<_>>()
    };
    if change.old.is_empty() {
        // "switched to Y": the older sentence's own choice is its words the newer one lacks,
        // one or two of them, with the rest of the subject shared.
        let replaced: BTreeSet<Term> = old.content.difference(&new.content).cloned().collect();
        if replaced.is_empty() || replaced.len() > 2 || old.negated {
            return None;
        }
        let old_rest: BTreeSet<Term> = old.content.intersection(&new.content).cloned().collect();
        let new_rest: BTreeSet<Term> = new.content.difference(&new_words).filter(|word| !CHANGE_VERBS.contains(&word.as_str())).cloned().collect();
        if old_rest.len() < MIN_SHARED || dice(&old_rest, &new_rest) < SWITCH_SUBJECT {
            return None;
        }
        let mut older = original(&replaced);
        older.dedup();
        return Some((older, change.new.clone()));
    }
    let old_words = stems(&change.old);
    let named: BTreeSet<Term> = old_words.intersection(&old.content).cloned().collect();
    if named.is_empty() {
        return None;
    }
    if change.new.is_empty() {
        // "no longer": the older sentence asserts, without negation, what stopped, and the two
        // are mostly about the same things.
        let new_rest: BTreeSet<Term> = new.content.iter().filter(|word| !CHANGE_VERBS.contains(&word.as_str())).cloned().collect();
        if old.negated || dice(&old.content, &new_rest) < SWITCH_SUBJECT {
            return None;
        }
        let mut older = original(&named);
        older.dedup();
        return Some((older, vec![term("no longer")].into_iter().chain(change.old.iter().cloned()).collect()));
    }
    // "from X to Y", "Y replaces X", "Y instead of X": the subject apart from X and Y is shared.
    let shared = old.content.iter().filter(|word| !old_words.contains(*word) && !new_words.contains(*word) && new.content.contains(*word)).count();
    if shared < MIN_SHARED || old.negated {
        return None;
    }
    let mut older = original(&named);
    older.dedup();
    Some((older, change.new.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(older: &str, newer: &str) -> Option<ContradictionKind> {
        detect(older, newer, None).map(|found| found.kind)
    }

    #[test]
    fn a_reading_whose_words_made_a_claim_finds_what_a_fresh_one_finds() {
        let rules = crate::claim::ClaimRules::default();
        let pairs = [
            ("The orders service stores its data in MySQL; Backups run nightly.", "We replaced MySQL with PostgreSQL for the orders service."),
            ("The request timeout is 30 seconds.", "The request timeout is now 60 seconds."),
            ("The cache is enabled in staging.", "The cache is disabled in staging."),
        ];
        for (older, newer) in pairs {
            let (older_read, newer_read) = (Reading::new(older), Reading::new(newer));
            let claims = (older_read.with_words(|words| rules.claim_of(words)), newer_read.with_words(|words| rules.claim_of(words)));
            assert_eq!(claims, (rules.claim(older), rules.claim(newer)), "{older} / {newer}");
            let found = |detection: Option<Detection>| detection.map(|found| (found.kind, found.older, found.newer));
            let fresh = found(detect(older, newer, None));
            assert!(fresh.is_some(), "{older} / {newer}");
            assert_eq!(found(detect_read(&older_read, &newer_read, None)), fresh, "{older} / {newer}");
        }
    }

    #[test]
    fn tokens_keep_values_and_contractions_whole() {
        assert_eq!(tokens("Timeout = 30s; PG v1.2.3 doesn't."), ["timeout", "=", "30s", "pg", "v1.2.3", "doesn't"]);
        assert_eq!(tokens("host: db.internal"), ["host", ":", "db.internal"]);
    }

    #[test]
    fn units_make_one_value() {
        assert_eq!(normalise("30s", None), normalise("30", Some("seconds")));
        assert_eq!(normalise("30000ms", None), normalise("30s", None));
        assert_ne!(normalise("30s", None), normalise("60s", None));
        assert_eq!(normalise("v1.2", None), "1.2");
    }

    #[test]
    fn each_kind_with_its_evidence() {
        let found = detect("The request timeout is 30s.", "The request timeout is 60s.", None).unwrap();
        assert_eq!((found.kind, found.older, found.newer), (ContradictionKind::ChangedValue, vec!["timeout".into(), "30s".into()], vec!["timeout".into(), "60s".into()]));
        let found = detect("The orders service uses MySQL.", "We moved the orders service from MySQL to PostgreSQL.", None).unwrap();
        assert_eq!((found.kind, found.older, found.newer, found.newer_states_change), (ContradictionKind::Superseded, vec!["mysql".into()], vec!["postgresql".into()], true));
        let found = detect("The API uses JWT for auth.", "The API does not use JWT for auth.", None).unwrap();
        assert_eq!((found.kind, found.newer), (ContradictionKind::Negation, vec!["not".into()]));
    }

    #[test]
    fn the_older_statement_of_a_change_is_not_settled_by_recency() {
        let found = detect("We moved the orders service from MySQL to PostgreSQL.", "The orders service uses MySQL.", None).unwrap();
        assert_eq!((found.kind, found.newer_states_change), (ContradictionKind::Superseded, false));
    }

    #[test]
    fn same_text_and_unrelated_text_are_not_conflicts() {
        assert_eq!(kind("Port is 5432.", "Port is 5432."), None);
        assert_eq!(kind("The parser handles unicode.", "Deploys happen on Fridays."), None);
    }
}
