//! Knowledge updates: a newer statement saying that the fact an older one states has changed,
//! in the many ways people say so, and a newer statement giving the same setting another
//! number.
//!
//! Four shapes, each read from the words as the claim rule reads them ([`ClaimRules::statements`]:
//! stemmed, synonyms joined, numbers with their units):
//!
//! - **what was replaced**: "we replaced X with Y", "Y replaced X", "X was replaced by Y",
//!   "moved from X to Y", "moved off X to Y", "Y instead of X", "we dropped X", "stopped using
//!   X", "gave up X", "left X", "X is deprecated", "X was removed", "X retired", "took over from
//!   X", "handed … over", "no longer X". The older statement must name X (every named thing of
//!   it), must not name Y, and must share the rest of the newer statement's subject;
//! - **what moved where**: "S moved to Y", "we switched S to Y", "S was upgraded to Y",
//!   "raised S to Y", "rewritten in Y", … The older statement must be about S (most of its
//!   words), must not name Y, and must hold something the newer one does not (the old value);
//! - **a cue and the same slot**: "now", "currently", "as of …", "since …", "starting …",
//!   "from now on", "going forward", "these days", "new", "after the …", "became". With the cue
//!   set aside, the two statements share their frame (two words or more) and differ in a few
//!   words on each side: the old value and the new one;
//! - **another number**: no cue, the same words, and other numbers in the same places
//!   ("retry 3 times" / "retry 5 times"), unless a number identifies what the statement is
//!   about ("user 1 …" / "user 2 …").
//!
//! The older statement must state a fact: not a change of its own ("we moved from …") and not a
//! past event ("I went to …", "fixed the bug"), which a later statement does not replace. A
//! speaker's label ("Caroline: …") is not part of what is said.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::OnceLock;

use super::detect::quoted;
use super::{ContradictionKind, Detection};
use crate::claim::{ClaimRules, Tokenized, Word, WordKind};
use crate::term::{Term, term};

/// Statements compared per memory, as in [`super::detect`].
const MAX_STATEMENTS: usize = 12;

pub(super) fn rules() -> &'static ClaimRules {
    static RULES: OnceLock<ClaimRules> = OnceLock::new();
    RULES.get_or_init(ClaimRules::default)
}

/// Whether the newer statements change what the older ones state, and the words of each that
/// show it.
pub(super) fn update(olds: &[Statement], news: &[Statement]) -> Option<Detection> {
    for new in news.iter().filter(|new| !new.words.is_empty()) {
        for old in olds.iter().filter(|old| !old.words.is_empty() && !old.past && !old.change) {
            let found = replaced(old, new).or_else(|| moved(old, new)).or_else(|| cued(old, new));
            if let Some((before, after)) = found {
                return Some(Detection { kind: ContradictionKind::Superseded, older: quoted(before), newer: quoted(after), newer_states_change: true });
            }
            if let Some((before, after)) = renumbered(old, new) {
                return Some(Detection { kind: ContradictionKind::ChangedValue, older: quoted(before), newer: quoted(after), newer_states_change: false });
            }
        }
    }
    None
}

/// The statements of a text as [`update`] compares them.
pub(super) fn statements(text: &Tokenized) -> Vec<Statement> {
    rules().statements_of(text).into_iter().take(MAX_STATEMENTS).map(Statement::new).collect()
}

pub(super) struct Statement {
    words: Vec<Word>,
    /// It tells of a past event rather than stating a fact.
    past: bool,
    /// It tells of a change itself.
    change: bool,
    // [`update`] compares each statement of a capture with every statement of its neighbours,
    // so what depends on one side only is read once, on first use, and kept here.
    content: OnceLock<BTreeSet<Term>>,
    replacement: OnceLock<Option<Replacement>>,
    movement: OnceLock<Option<Movement>>,
    cued: OnceLock<Option<Cued>>,
    numbering: OnceLock<Numbering>,
}

impl Statement {
    fn new(mut words: Vec<Word>) -> Statement {
        // A speaker's label: `Caroline: …`.
        if words.len() > 2 && words[1].kind == WordKind::Break && words[0].capital {
            words.drain(..2);
        }
        let past = is_past(&words);
        let change = words.iter().any(|word| CHANGE_MARKERS.contains(&word.lower.as_str())) || has_pair(&words, "no", "longer");
        Statement {
            words,
            past,
            change,
            content: OnceLock::new(),
            replacement: OnceLock::new(),
            movement: OnceLock::new(),
            cued: OnceLock::new(),
            numbering: OnceLock::new(),
        }
    }

    fn content(&self) -> &BTreeSet<Term> {
        self.content.get_or_init(|| content(&self.words))
    }

    fn replacement(&self) -> Option<&Replacement> {
        self.replacement.get_or_init(|| Replacement::of(self)).as_ref()
    }

    fn movement(&self) -> Option<&Movement> {
        self.movement.get_or_init(|| Movement::of(self)).as_ref()
    }

    fn cued(&self) -> Option<&Cued> {
        self.cued.get_or_init(|| Cued::of(self)).as_ref()
    }

    fn numbering(&self) -> &Numbering {
        self.numbering.get_or_init(|| Numbering::of(self))
    }

    fn at(&self, lower: &str) -> Option<usize> {
        self.words.iter().position(|word| word.lower == lower)
    }
}

/// Words that tell of a change: a statement holding one is not a plain fact to replace.
const CHANGE_MARKERS: &[&str] = &[
    "moved", "moving", "switched", "switching", "migrated", "migrating", "changed", "replaced", "replaces", "replacing",
    "upgraded", "downgraded", "converted", "ported", "relocated", "rewritten", "raised", "lowered", "increased",
    "decreased", "reduced", "bumped", "deprecated", "dropped", "stopped", "retired", "removed", "instead", "anymore",
    "superseded", "supersedes", "became", "transitioned",
];

/// Verbs that move a subject to a new value with `to` (or `into`, `in`).
const MOVE_VERBS: &[&str] = &[
    "moved", "move", "switched", "switch", "migrated", "migrate", "changed", "change", "upgraded", "upgrade", "downgraded",
    "converted", "ported", "relocated", "rewritten", "rewrote", "raised", "lowered", "increased", "decreased", "reduced",
    "bumped", "went", "rose", "set", "updated", "transferred", "shifted",
];

/// Verbs whose object is what was given up.
const DROP_VERBS: &[&str] = &["dropped", "ditched", "abandoned", "retired", "deprecated", "removed", "uninstalled", "discontinued", "decommissioned", "sold", "left"];
/// Of those, the ones that also say other things ("left early", "sold out"): their object must be a named thing.
const LOOSE_DROP_VERBS: &[&str] = &["sold", "left"];
/// Participles and adjectives saying that the subject is gone.
const GONE_WORDS: &[&str] = &["deprecated", "removed", "retired", "dropped", "gone", "discontinued", "sunset", "abandoned", "decommissioned"];
/// Words after which a participle or a noun names a thing rather than saying it is gone.
const DETERMINERS: &[&str] = &["a", "an", "the", "this", "that", "these", "those", "our", "my", "your", "his", "her", "their", "its"];
const BE: &[&str] = &["is", "are", "was", "were", "be", "been", "being", "got", "gets", "get", "has", "have"];
/// Words that end the phrase of a new value.
const VALUE_ENDS: &[&str] = &[
    "in", "on", "at", "for", "with", "last", "next", "this", "since", "from", "starting", "after", "because", "and", "as",
    "permanently", "yesterday", "today", "now", "when", "by", "instead", "before", "until",
];

/// Forms only a past tense takes.
const PAST_FORMS: &[&str] = &[
    "was", "were", "did", "went", "came", "ran", "saw", "took", "gave", "wrote", "began", "ate", "drove", "knew", "grew",
    "threw", "drew", "spoke", "broke", "chose", "fell", "rose", "woke", "yesterday", "ago", "said", "told", "got", "made",
    "met", "thought", "felt", "bought", "brought", "caught", "taught", "won", "lost",
];
/// Nouns that name things by number: `user 1`, `issue 14`.
const IDENTIFYING_NOUNS: &[&str] = &[
    "user", "issue", "pr", "ticket", "port", "step", "item", "bug", "case", "room", "line", "node", "server", "service",
    "team", "group", "org", "rule", "standard", "test", "job", "task", "build", "release", "sprint", "week", "day",
];
/// Nouns whose number says where something is: `line 160`, `day 3`, `commit 4`.
const LOCATING_NOUNS: &[&str] = &["line", "day", "page", "row", "column", "chapter", "section", "step", "sprint", "week", "issue", "ticket", "pr", "commit"];
const SUBJECT_PRONOUNS: &[&str] = &["i", "we", "you", "he", "she", "they", "it"];

fn is_past(words: &[Word]) -> bool {
    words.iter().enumerate().any(|(index, word)| {
        if PAST_FORMS.contains(&word.lower.as_str()) {
            return true;
        }
        if word.lower == "last" && words.get(index + 1).is_some_and(|next| next.kind == WordKind::Word && next.canon.starts_with("u:")) {
            return true;
        }
        // A verb in `-ed` right after its subject (`I painted`, `Alice fixed`, a sentence's
        // capitalised first word as in `Ingrid confirmed`) or opening the sentence (`Fixed the
        // bug`); after `is` or `are` it is a passive, after `a` or `the` an adjective.
        let verb_in_ed = word.kind == WordKind::Word && word.lower.len() >= 5 && word.lower.ends_with("ed");
        verb_in_ed
            && match index.checked_sub(1).map(|at| &words[at]) {
                None => true,
                Some(before) => {
                    SUBJECT_PRONOUNS.contains(&before.lower.as_str())
                        || (before.kind == WordKind::Word && before.capital && (before.named || index == 1))
                        || matches!(before.lower.as_str(), "have" | "has" | "had" | "'ve")
                }
            }
    })
}

fn has_pair(words: &[Word], first: &str, second: &str) -> bool {
    words.windows(2).any(|pair| pair[0].lower == first && pair[1].lower == second)
}

/// The canonical words that carry content: not function words, negations or breaks.
fn content(words: &[Word]) -> BTreeSet<Term> {
    content_in_order(words).into_iter().cloned().collect()
}

/// The canonical words that carry content, in the order written.
fn content_in_order(words: &[Word]) -> Vec<&Term> {
    words.iter().filter(|word| matches!(word.kind, WordKind::Word | WordKind::Number) && !word.function && !word.canon.is_empty()).map(|word| &word.canon).collect()
}

fn named(words: &[Word]) -> BTreeSet<Term> {
    words.iter().filter(|word| word.named && matches!(word.kind, WordKind::Word | WordKind::Number)).map(|word| word.canon.clone()).collect()
}

fn written(words: &[Word]) -> Vec<Term> {
    words.iter().filter(|word| matches!(word.kind, WordKind::Word | WordKind::Number) && !word.function).map(|word| word.lower.clone()).collect()
}

/// Where the words of a value lie: from `start` up to a word that ends it, a break, or the end.
fn value_at(words: &[Word], start: usize) -> Range<usize> {
    let end = words[start..]
        .iter()
        .position(|word| word.kind == WordKind::Break || (word.kind == WordKind::Word && VALUE_ENDS.contains(&word.lower.as_str()) && !word.named))
        .map_or(words.len(), |offset| start + offset);
    start..end.max(start)
}

/// A value of the newer statement as the older one is searched for it.
struct Value {
    words: BTreeSet<Term>,
    things: BTreeSet<Term>,
}

impl Value {
    fn of(value: &[Word]) -> Value {
        Value { words: content(value), things: named(value) }
    }

    /// Whether the older statement names it: all of its named things (or, with none, most of
    /// its words).
    fn named_in(&self, old: &BTreeSet<Term>) -> bool {
        if self.words.is_empty() || self.words.is_disjoint(old) {
            return false;
        }
        if self.things.is_empty() { self.words.intersection(old).count() >= self.words.len().min(2) } else { self.things.is_subset(old) }
    }

    /// Whether the older statement already holds it.
    fn held_in(&self, old: &BTreeSet<Term>) -> bool {
        if self.things.is_empty() { !self.words.is_empty() && self.words.is_subset(old) } else { self.things.is_subset(old) }
    }
}

/// The first shape as a newer statement has it: what it says was replaced, and by what.
struct Replacement {
    before: Range<usize>,
    after: Range<usize>,
    gone: Value,
    coming: Value,
    /// The rest of its subject: its content words but the two values and the verbs of change.
    rest: BTreeSet<Term>,
    /// "gave up": the older statement must hold what was given up word for word.
    gave_up: bool,
}

impl Replacement {
    fn of(new: &Statement) -> Option<Replacement> {
        let words = &new.words;
        let (before, after, loose) = Replacement::shape(new)?;
        let (gone, coming) = (Value::of(&words[before.clone()]), Value::of(&words[after.clone()]));
        if gone.words.is_empty() || (loose && gone.things.is_empty()) {
            return None;
        }
        let rest: BTreeSet<Term> = new
            .content()
            .iter()
            .filter(|word| !gone.words.contains(*word) && !coming.words.contains(*word) && !is_cue(word) && *word != "use" && *word != "of")
            .cloned()
            .collect();
        // With no rest, only a named thing given up says what the subject is.
        if rest.is_empty() && gone.things.is_empty() {
            return None;
        }
        Some(Replacement { before, after, gone, coming, rest, gave_up: has_pair(words, "gave", "up") })
    }

    /// What was replaced and what replaced it, and whether the verb is a loose one.
    fn shape(new: &Statement) -> Option<(Range<usize>, Range<usize>, bool)> {
        let words = &new.words;
        // "replaced X with Y"
        if let Some(verb) = words.iter().position(|word| word.lower.starts_with("replac"))
            && let Some(with) = words[verb + 1..].iter().position(|word| word.canon == "with").map(|at| verb + 1 + at)
            && with > verb + 1
        {
            return Some((verb + 1..with, value_at(words, with + 1), false));
        }
        // "X was replaced by Y", "X is superseded by Y"
        if let Some(verb) = words.iter().position(|word| matches!(word.lower.as_str(), "replaced" | "superseded"))
            && words.get(verb + 1).is_some_and(|next| next.lower == "by")
        {
            return Some((0..verb, value_at(words, verb + 2), false));
        }
        // "Y replaced X (as …)"
        if let Some(verb) = words.iter().position(|word| matches!(word.lower.as_str(), "replaced" | "replaces" | "supersedes" | "superseded"))
            && verb > 0
        {
            return Some((value_at(words, verb + 1), 0..verb, false));
        }
        // "moved from X to Y", "moved off X to Y"
        if let Some(verb) = words.iter().position(|word| MOVE_VERBS.contains(&word.lower.as_str()))
            && let Some(from) = words[verb + 1..].iter().position(|word| matches!(word.lower.as_str(), "from" | "off")).map(|at| verb + 1 + at)
            && let Some(to) = words[from + 1..].iter().position(|word| word.lower == "to").map(|at| from + 1 + at)
            && to > from + 1
        {
            return Some((from + 1..to, value_at(words, to + 1), false));
        }
        // "Y instead of X"
        if let Some(instead) = new.at("instead")
            && words.get(instead + 1).is_some_and(|next| next.lower == "of")
        {
            return Some((value_at(words, instead + 2), 0..instead, false));
        }
        // "took over (…) from X", "X handed … over to Y"
        if let Some(took) = words.iter().position(|word| matches!(word.lower.as_str(), "took" | "takes" | "take"))
            && words.get(took + 1).is_some_and(|next| next.lower == "over")
            && let Some(from) = words[took + 2..].iter().position(|word| word.lower == "from").map(|at| took + 2 + at)
        {
            return Some((value_at(words, from + 1), 0..took, false));
        }
        if let Some(handed) = words.iter().position(|word| matches!(word.lower.as_str(), "handed" | "hands"))
            && let Some(to) = words[handed + 1..].iter().position(|word| word.lower == "to").map(|at| handed + 1 + at)
        {
            return Some((0..handed, value_at(words, to + 1), false));
        }
        // "we dropped X", "stopped using X", "gave up X", "left X"
        if let Some(verb) = words.iter().position(|word| DROP_VERBS.contains(&word.lower.as_str()))
            && verb > 0
            && !BE.contains(&words[verb - 1].lower.as_str())
            && verb + 1 < words.len()
        {
            let loose = LOOSE_DROP_VERBS.contains(&words[verb].lower.as_str());
            return Some((value_at(words, verb + 1), 0..0, loose));
        }
        for (first, second) in [("stopped", "using"), ("gave", "up"), ("no", "longer")] {
            if let Some(at) = words.windows(2).position(|pair| pair[0].lower == first && pair[1].lower == second) {
                return Some((value_at(words, at + 2), 0..0, false));
            }
        }
        // "X is deprecated", "X was removed", "X retired"; not "a sunset", "the retired teacher"
        // (a noun or an adjective), and "sunset" only as a verb after `is` or `was`.
        if let Some(gone) = words.iter().position(|word| GONE_WORDS.contains(&word.lower.as_str()) || word.lower == "retired")
            && gone > 0
            && !DETERMINERS.contains(&words[gone - 1].lower.as_str())
            && (words[gone].lower != "sunset" || BE.contains(&words[gone - 1].lower.as_str()))
        {
            let subject_end = if BE.contains(&words[gone - 1].lower.as_str()) { gone - 1 } else { gone };
            let subject_start = words[..subject_end]
                .iter()
                .rposition(|word| word.kind == WordKind::Break || matches!(word.lower.as_str(), "after" | "when" | "since" | "because" | "and"))
                .map_or(0, |at| at + 1);
            // "X is deprecated, use Y"
            let successor = words[gone + 1..].iter().position(|word| word.canon == "use").map_or(0..0, |at| value_at(words, gone + 2 + at));
            return Some((subject_start..subject_end, successor, false));
        }
        None
    }
}

/// The first shape: the newer statement names what it replaced.
fn replaced(old: &Statement, new: &Statement) -> Option<(Vec<Term>, Vec<Term>)> {
    let replacement = new.replacement()?;
    let old_words = old.content();
    // "gave up" drops what the older statement holds word for word ("gave up the violin", not
    // "gave up hope").
    if replacement.gave_up && !replacement.gone.words.is_subset(old_words) {
        return None;
    }
    if !replacement.gone.named_in(old_words) || replacement.coming.held_in(old_words) {
        return None;
    }
    // The rest of the newer statement's subject must be the older one's too.
    if !replacement.rest.is_empty() && replacement.rest.is_disjoint(old_words) {
        return None;
    }
    let after = &new.words[replacement.after.clone()];
    Some((written(&new.words[replacement.before.clone()]), if after.is_empty() { vec![term("no longer")] } else { written(after) }))
}

/// Whether a canonical word is one of the verbs of change, which are no part of a subject.
fn is_cue(canon: &str) -> bool {
    static CUES: OnceLock<BTreeSet<Term>> = OnceLock::new();
    CUES.get_or_init(|| {
        CHANGE_MARKERS
            .iter()
            .chain(MOVE_VERBS)
            .chain(DROP_VERBS)
            .filter_map(|marker| rules().statements(marker).into_iter().next().and_then(|words| words.into_iter().next()).map(|word| word.canon))
            .collect()
    })
    .contains(canon)
}

/// The second shape as a newer statement has it: the subject it moves, and where to.
struct Movement {
    subject: BTreeSet<Term>,
    value: Range<usize>,
    moved_to: Value,
}

impl Movement {
    fn of(new: &Statement) -> Option<Movement> {
        let words = &new.words;
        // "failed the database over to …" moves it as any verb of the list does.
        let is_verb = |at: usize| {
            MOVE_VERBS.contains(&words[at].lower.as_str())
                || (words[at].lower == "failed" && words[at + 1..].iter().take(8).position(|word| word.lower == "over").is_some_and(|over| words.get(at + 2 + over).is_some_and(|next| next.lower == "to")))
        };
        let verb = (0..words.len()).find(|&at| is_verb(at))?;
        let to = words[verb + 1..]
            .iter()
            .take(8)
            .position(|word| matches!(word.lower.as_str(), "to" | "into") || (word.lower == "in" && matches!(words[verb].lower.as_str(), "rewritten" | "rewrote")))
            .map(|at| verb + 1 + at)?;
        let value = value_at(words, to + 1);
        let moved_to = Value::of(&words[value.clone()]);
        // "Set X in the config to override it": `set` moves a setting only to a named value or
        // a number, not to a purpose.
        if (words[verb].lower == "set" && moved_to.things.is_empty()) || moved_to.words.is_empty() {
            return None;
        }
        // The particles of "went up to", "failed … over to" belong to the verb.
        let particle = |word: &Term| matches!(word.as_str(), "up" | "down" | "over" | "back");
        let subject: BTreeSet<Term> =
            content(&words[..verb]).into_iter().chain(content(&words[verb + 1..to])).filter(|word| !is_cue(word) && !particle(word)).collect();
        if subject.is_empty() {
            return None;
        }
        Some(Movement { subject, value, moved_to })
    }
}

/// The second shape: the newer statement moves a subject to a new value.
fn moved(old: &Statement, new: &Statement) -> Option<(Vec<Term>, Vec<Term>)> {
    let movement = new.movement()?;
    let old_words = old.content();
    let covered = movement.subject.intersection(old_words).count();
    if covered * 3 < movement.subject.len() * 2 || movement.moved_to.held_in(old_words) {
        return None;
    }
    // The older statement holds a value the newer one does not: what was moved away from.
    let new_words = new.content();
    let before: Vec<Term> = old
        .words
        .iter()
        .filter(|word| matches!(word.kind, WordKind::Word | WordKind::Number) && !word.function && !movement.subject.contains(&word.canon) && !new_words.contains(&word.canon))
        .map(|word| word.lower.clone())
        .collect();
    // The older statement is a sentence that holds a value, not a heading such as "React
    // connection pool size", which has no function word and names nothing it moved from.
    let held_value = old.words.iter().any(|word| word.function || (word.named && before.contains(&word.lower)));
    held_value.then(|| (before, written(&new.words[movement.value.clone()])))
}

/// Cue phrases of the third shape, and whether the words after them (to a break or the end)
/// belong to the cue: `as of March`, `since the split`.
const CUES: &[(&[&str], bool)] = &[
    (&["as", "of"], true),
    (&["since"], true),
    (&["starting"], true),
    (&["from", "now", "on"], false),
    (&["going", "forward"], false),
    (&["these", "days"], false),
    (&["nowadays"], false),
    (&["now"], false),
    (&["currently"], false),
    (&["new"], false),
    (&["after", "the"], true),
    (&["anymore"], false),
];

/// Where a phrase begins in `words`.
fn place(words: &[Word], phrase: &[&str]) -> Option<usize> {
    words.windows(phrase.len()).position(|window| window.iter().zip(phrase.iter()).all(|(word, part)| word.lower == *part))
}

/// The third shape as a newer statement has it: its words with the cues of change taken out.
struct Cued {
    words: Vec<Word>,
    /// The cues taken out. A cue the older statement holds too tells nothing of which one is
    /// newer.
    cues: Vec<&'static [&'static str]>,
    /// A cue that tells of a change whatever the older statement holds: "from Monday on",
    /// "became".
    sure: bool,
    content: BTreeSet<Term>,
    negations: usize,
}

impl Cued {
    fn of(new: &Statement) -> Option<Cued> {
        let mut words: Vec<Word> = new.words.clone();
        // "for now" says that something is temporary, not that it changed.
        while let Some(at) = place(&words, &["for", "now"]) {
            words.drain(at..at + 2);
        }
        let mut cues = Vec::new();
        for (cue, runs_on) in CUES {
            let mut taken = false;
            while let Some(at) = place(&words, cue) {
                let end = if *runs_on {
                    words[at..].iter().position(|word| word.kind == WordKind::Break).map_or(words.len(), |offset| at + offset)
                } else {
                    at + cue.len()
                };
                words.drain(at..end);
                taken = true;
            }
            if taken {
                cues.push(*cue);
            }
        }
        let mut sure = false;
        // "from Monday on"
        if let Some(from) = words.iter().position(|word| word.lower == "from")
            && words.last().is_some_and(|word| word.lower == "on")
            && words.len() - from <= 4
        {
            words.truncate(from);
            sure = true;
        }
        if let Some(became) = words.iter().position(|word| word.lower == "became" || word.lower == "becomes") {
            words[became].canon = term("is");
            words[became].function = true;
            sure = true;
        }
        if (cues.is_empty() && !sure) || is_past(&words) {
            return None;
        }
        let content = content(&words);
        let negations = negations(&words);
        Some(Cued { words, cues, sure, content, negations })
    }
}

fn negations(words: &[Word]) -> usize {
    words.iter().filter(|word| word.kind == WordKind::Negation).count()
}

/// The third shape: a cue of change, and the same frame with other values.
fn cued(old: &Statement, new: &Statement) -> Option<(Vec<Term>, Vec<Term>)> {
    let cued = new.cued()?;
    if !cued.sure && cued.cues.iter().all(|cue| place(&old.words, cue).is_some()) {
        return None;
    }
    let (old_words, new_words, words) = (old.content(), &cued.content, &cued.words);
    let gone: Vec<&Term> = old_words.difference(new_words).collect();
    let coming: Vec<&Term> = new_words.difference(old_words).collect();
    let shared = old_words.intersection(new_words).count();
    let negated = cued.negations > negations(&old.words);
    if coming.is_empty() || (gone.is_empty() && !negated) || gone.len() > 3 || coming.len() > 4 || shared < 2 {
        return None;
    }
    let valued = |tokens: &[&Term], words: &[Word]| tokens.iter().any(|token| words.iter().any(|word| &&word.canon == token && word.named));
    // The same words in the same order but one: "the default branch is master" / "… is now main".
    let (before, after) = (content_in_order(&old.words), content_in_order(words));
    let one_swapped = before.len() == after.len() && before.iter().zip(&after).filter(|(a, b)| a != b).count() == 1;
    // What changed is a value (a named thing, a number), the one word that differs, or what the
    // newer statement denies ("… now, not by hand"); not a verb or an opinion around the same
    // things ("I think you'd love this novel" / "I'm currently reading this novel").
    if !(valued(&gone, &old.words) || valued(&coming, words) || one_swapped || negated) {
        return None;
    }
    let spelled = |tokens: &[&Term], words: &[Word]| -> Vec<Term> {
        words.iter().filter(|word| tokens.contains(&&word.canon)).map(|word| word.lower.clone()).collect()
    };
    Some((spelled(&gone, &old.words), spelled(&coming, words)))
}

/// A statement's numbers and the words around them, as the fourth shape compares them.
struct Numbering {
    numbers: Vec<Term>,
    /// Its other words, but breaks and function words.
    rest: Vec<Term>,
    /// A number right after a word that names things by number says what the statement is
    /// about ("user 1 …", "issue 14 …"), as does one before a label's colon.
    identifies: bool,
    /// A number after a word that locates ("at line 160", "on day 3") says where, not how much.
    locates: bool,
}

impl Numbering {
    fn of(statement: &Statement) -> Numbering {
        let words = &statement.words;
        let numbers = words.iter().filter(|word| word.kind == WordKind::Number).map(|word| word.canon.clone()).collect();
        let rest = words.iter().filter(|word| word.kind != WordKind::Number && word.kind != WordKind::Break && !word.function).map(|word| word.canon.clone()).collect();
        let identifies = words.iter().position(|word| word.kind == WordKind::Number).is_some_and(|at| {
            let labelled = words[at..].iter().take(5).any(|word| word.kind == WordKind::Break);
            at <= 1 && (labelled || words.first().is_some_and(|word| IDENTIFYING_NOUNS.contains(&word.lower.as_str())))
        });
        let locates = words.windows(2).any(|pair| pair[1].kind == WordKind::Number && LOCATING_NOUNS.contains(&pair[0].lower.as_str()));
        Numbering { numbers, rest, identifies, locates }
    }
}

/// The fourth shape: the same words with other numbers in the same places.
fn renumbered(old: &Statement, new: &Statement) -> Option<(Vec<Term>, Vec<Term>)> {
    if new.past || new.change {
        return None;
    }
    let (older, newer) = (old.numbering(), new.numbering());
    let (before, after) = (&older.numbers, &newer.numbers);
    if before.is_empty() || before.len() != after.len() || before == after || older.rest != newer.rest {
        return None;
    }
    let first_change = before.iter().zip(after).position(|(a, b)| a != b)?;
    if (first_change == 0 && (older.identifies || newer.identifies)) || older.locates || newer.locates {
        return None;
    }
    let changed = |statement: &Statement, values: &[Term], other: &[Term]| -> Vec<Term> {
        statement
            .words
            .iter()
            .filter(|word| word.kind == WordKind::Number)
            .zip(values.iter().zip(other))
            .filter(|(_, (value, counterpart))| value != counterpart)
            .map(|(word, _)| word.lower.clone())
            .collect()
    };
    Some((changed(old, before, after), changed(new, after, before)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(older: &str, newer: &str) -> Option<ContradictionKind> {
        update(&statements(&rules().tokenize(older)), &statements(&rules().tokenize(newer))).map(|found| found.kind)
    }

    #[test]
    fn the_phrasings_of_a_change_are_read() {
        use ContradictionKind::*;
        let cases = [
            ("The orders service stores its data in MySQL 5.7.", "We switched the orders service to PostgreSQL 16 last week.", Superseded),
            ("We lint Python code with flake8.", "We replaced flake8 with ruff.", Superseded),
            ("Deploys happen on Thursdays.", "Deploys moved to Tuesdays.", Superseded),
            ("Alice is the platform team lead.", "Bob took over from Alice as the platform team lead.", Superseded),
            ("The API gateway is nginx.", "As of March, the API gateway is Kong.", Superseded),
            ("CI runs on Travis CI.", "We dropped Travis CI; CI runs on GitHub Actions now.", Superseded),
            ("Clients call the v1 endpoints.", "The v1 endpoints are deprecated, use the v2 endpoints.", Superseded),
            ("Retry 3 times with a 5 s backoff.", "Retry 5 times with a 3 s backoff.", ChangedValue),
            ("The default branch is master.", "The default branch is now main.", Superseded),
            ("The staging cluster runs Kubernetes 1.27.", "The staging cluster was upgraded to Kubernetes 1.29.", Superseded),
            ("The auth service issues HS256 tokens.", "The auth service issues RS256 tokens instead of HS256.", Superseded),
            ("The primary database region is us-east-1.", "We failed the primary database over to us-west-2 permanently.", Superseded),
            ("Our dentist is Dr. Patel.", "Our new dentist is Dr. Okafor.", Superseded),
            ("The rent is 900 euros a month.", "The rent went up to 950 euros a month.", Superseded),
            ("Kai plays the violin.", "Kai gave up the violin and plays the piano now.", Superseded),
            ("The school headteacher is Mrs. Green.", "Mr. Hale became the school headteacher after Mrs. Green retired.", Superseded),
        ];
        for (older, newer, expected) in cases {
            assert_eq!(kind(older, newer), Some(expected), "{older} / {newer}");
        }
    }

    #[test]
    fn events_history_and_other_subjects_are_not_updates() {
        let cases = [
            ("Caroline: I went to Paris last year.", "Caroline: I moved to Lisbon."),
            ("Caroline: I love painting.", "Caroline: I moved to a new apartment."),
            ("The analytics warehouse still runs on MySQL.", "We moved the orders service from MySQL to PostgreSQL."),
            ("User 0 org standard 1: the timeout is 1 ms.", "User 1 org standard 0: the timeout is 0 ms."),
            ("Use ripgrep for searching the code.", "Use ripgrep instead of grep for searching the code."),
            ("The bug is in the parser.", "We switched to the feature branch to fix the bug."),
            ("Ingrid decided to keep the job scheduler on DynamoDB for now.", "Chen decided to keep the data retention job on Node.js for now."),
            ("The config loader is implemented in pyproject.toml and deployed with sqlx.", "Set `HTTP_TIMEOUT_MS` in the deploy config to override it per environment."),
            ("React connection pool size", "We raised the pool size to 20 and added a 2 s acquire timeout."),
            ("The relevant code is in `api.conf` around line 767.", "The relevant code is in `api.conf` around line 282."),
            ("Ingrid confirmed the fix on staging on day 10 of the sprint.", "Ingrid confirmed the fix on staging on day 1 of the sprint."),
            ("PostgreSQL connection pool exhausted again.", "Leaked PostgreSQL connections left the connection pool exhausted and requests failed."),
            ("Melanie: 5 years already! [image: a photo of a bride in a wedding dress]", "Melanie: Here's our latest work. [image: a photo of a painting of a sunset with a palm tree]"),
            ("Tim: I think you'd love this fantasy novel by Patrick Rothfuss.", "Tim: I'm currently reading a fantasy novel by Patrick Rothfuss."),
        ];
        for (older, newer) in cases {
            assert_eq!(kind(older, newer), None, "{older} / {newer}");
        }
    }
}
