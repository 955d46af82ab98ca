//! Claim identity: whether two statements make the same claim, two different claims, or whether
//! their words cannot tell.
//!
//! A memory that says something different from a stored one must be stored: merging it would
//! lose it. So the rule is strict, and decided by what changes a claim, not by which words two
//! texts share. Each text is reduced to a canonical form:
//!
//! - words are lower-cased, contractions spelled out (`isn't` is `is not`), irregular forms
//!   brought to their lemma (`written` is `write`, `children` is `child`), British spellings to
//!   American ones, and every word stemmed (Snowball English), so inflections fall away;
//! - the other names of one thing become one token: the query-expansion groups (`db` and
//!   `database`, `pr` and `pull request`, and the project's own) and a short list of claim
//!   synonyms ([`CLAIM_SYNONYMS`]: `require` and `need`, `have to` and `must`, `never` and
//!   `not`, …);
//! - numbers become values with their units (`30 s`, `30 seconds` and `30000 ms` are one value;
//!   `five` is `5`; `7 am` is `07:00`; `12 March` is `March 12`), kept in their place;
//! - a phrase fronted before the sentence (`Before review, …`, `On Tuesday the …`) moves to its
//!   end, a passive clause becomes active (`X is called by Y` is `Y calls X`, `X is stored in Y`
//!   is `store X in Y`), and function words (articles, forms of `be` and `do`, `we`, `you`)
//!   drop out; prepositions, modal verbs, quantifiers and negations stay, in their place;
//! - clauses joined by `and`, `but`, commas or semicolons may come in any order, unless the
//!   text speaks of order (`then`, `first`, `before`, …) or one of them is a bare item of a list.
//!
//! Two texts with the same canonical form are the same claim ([`Judgement::Same`]). Otherwise
//! the rule says what tells them apart, most telling first ([`Difference`]): their numbers (a
//! value, a unit, or the order of values), their negations, the arrangement of the same words
//! (roles or order swapped), a word that narrows, widens or turns a claim (a preposition, a
//! quantifier, a modal verb, a comparative or one of a pair of opposites), or a named thing (a
//! capitalised word, an identifier). What remains is a difference of ordinary words ("talks to"
//! and "communicates with"), which the words alone cannot judge: [`Judgement::Unsure`]. A caller
//! stores and links such a pair, or asks a model that can tell paraphrases apart.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use foldhash::{HashMap, HashMapExt, HashSet};
use rust_stemmers::{Algorithm, Stemmer};

use crate::expansion::Vocabulary;
use crate::term::{Term, term};

/// What tells two claims apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    /// A number, a unit, or the order of the numbers.
    Number,
    /// One says `not` (or `never`, `no`, …) where the other does not.
    Negation,
    /// The same words in another arrangement: roles or order swapped.
    Order,
    /// A word that narrows, widens or turns the claim: a preposition, a quantifier, a modal
    /// verb, a comparative, or one of a pair of opposites.
    Scope,
    /// A named thing: a capitalised word, an identifier, a path.
    Entity,
}

impl Difference {
    pub fn as_str(self) -> &'static str {
        match self {
            Difference::Number => "number",
            Difference::Negation => "negation",
            Difference::Order => "order",
            Difference::Scope => "scope",
            Difference::Entity => "entity",
        }
    }
}

/// What the rule makes of two statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The same claim in the same or other words.
    Same,
    /// Two claims, told apart by this difference.
    Distinct(Difference),
    /// Other ordinary words, which may or may not mean the same.
    Unsure,
}

/// Claim synonyms beyond the query-expansion groups: words and phrases that state the same
/// claim in other words. Each entry's first term stands for the others; an empty first term
/// drops the phrase. Spellings are compared after stemming, so one form of each word suffices.
const CLAIM_SYNONYMS: &[&[&str]] = &[
    &["need", "require", "requires"],
    &["must", "have to", "has to", "had to", "need to", "needs to"],
    &["keep", "retain"],
    &["use", "utilize", "run on", "runs on", "rely on"],
    &["every", "each"],
    &["child", "kid"],
    &["call", "name", "named"],
    &["if", "when", "whenever"],
    &["with", "that have", "that has", "which have", "which has", "who have", "who has"],
    &["communicate with", "talk to", "talks to"],
    &["start", "begin"],
    &["delete", "remove"],
    &["big", "large"],
    &["math", "maths"],
    &["env var", "env variable", "environment variable"],
    &["stderr", "standard error"],
    &["stdout", "standard output"],
    &["", "to be"],
];

/// The canonical tokens of negation.
const NEGATION: &str = "¬";

/// The rules, with the stemmer and the synonym phrases they use.
pub struct ClaimRules {
    stemmer: Stemmer,
    /// Synonym phrases as stem sequences with the token each becomes, by their first stem and
    /// longest first: a word is checked only against the phrases it can begin. Reading a
    /// statement looks each word up here, and a bulk capture reads thousands of statements.
    phrases: HashMap<Term, Vec<(Vec<Term>, Term)>>,
    /// Stems of the words that narrow, widen or turn a claim.
    scope: BTreeSet<Term>,
}

impl std::fmt::Debug for ClaimRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimRules").field("phrases", &self.phrases.values().map(Vec::len).sum::<usize>()).finish_non_exhaustive()
    }
}

impl Default for ClaimRules {
    fn default() -> Self {
        ClaimRules::new(&Vocabulary::built_in())
    }
}

/// One text reduced by the rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The canonical form, and the other readings of its passive clauses: lists of clauses,
    /// each a list of tokens. Two claims are the same when any reading of one equals any of
    /// the other.
    forms: Vec<Vec<Vec<Term>>>,
    /// Every token of the first form with its count.
    tokens: BTreeMap<Term, usize>,
    /// The number tokens in reading order.
    numbers: Vec<Term>,
    negations: usize,
    /// Tokens that stand for named things.
    named: BTreeSet<Term>,
}

impl Claim {
    /// The canonical form as one string: equal for texts the rules take as the same claim
    /// (when neither has passive readings), so it can key a lookup.
    pub fn key(&self) -> String {
        self.forms[0].iter().map(|clause| clause.join(" ")).collect::<Vec<_>>().join(" | ")
    }

    /// Whether the text has no token the rules keep.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The canonical tokens, each once.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.tokens.keys().map(Term::as_str)
    }

    /// The number tokens in reading order (`q:30s`, `n:3`, `v:1.2.3`, `t:07:00`, `d:03-12`).
    pub fn numbers(&self) -> &[Term] {
        &self.numbers
    }

    /// The share of canonical tokens (Dice, counted with repeats) two claims have in common.
    pub fn overlap(&self, other: &Claim) -> f64 {
        let total: usize = self.tokens.values().sum::<usize>() + other.tokens.values().sum::<usize>();
        if total == 0 {
            return 0.0;
        }
        let shared: usize = self.tokens.iter().map(|(token, count)| (*count).min(other.tokens.get(token).copied().unwrap_or(0))).sum();
        2.0 * shared as f64 / total as f64
    }

    /// Whether a canonical token stands for a named thing (a capitalised word, an identifier).
    fn is_named(&self, token: &str) -> bool {
        self.named.contains(token) || is_number_token(token)
    }
}

/// Claims by their forms, to find among many the ones [`ClaimRules::compare`] judges the same
/// as another without comparing it with each: two claims are the same when both are empty or
/// when they share a form, so a look-up per form finds them all. A batch of captures is judged
/// against the captures before it this way, in time linear in its size.
#[derive(Debug, Default)]
pub struct SameClaims {
    by_form: HashMap<Vec<Vec<Term>>, Vec<usize>>,
    empty: Vec<usize>,
}

impl SameClaims {
    /// Adds `claim` as the one at `position`.
    pub fn insert(&mut self, claim: &Claim, position: usize) {
        if claim.is_empty() {
            self.empty.push(position);
            return;
        }
        for form in &claim.forms {
            self.by_form.entry(form.clone()).or_default().push(position);
        }
    }

    /// The positions of the claims added that are the same as `claim`, in ascending order.
    pub fn same_as(&self, claim: &Claim) -> Vec<usize> {
        if claim.is_empty() {
            return self.empty.clone();
        }
        let mut found: Vec<usize> = claim.forms.iter().filter_map(|form| self.by_form.get(form)).flatten().copied().collect();
        found.sort_unstable();
        found.dedup();
        found
    }
}

impl ClaimRules {
    /// Rules using the synonym groups of `vocabulary` besides [`CLAIM_SYNONYMS`].
    pub fn new(vocabulary: &Vocabulary) -> ClaimRules {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut phrases: Vec<(Vec<Term>, Term)> = Vec::new();
        let stem_words = |text: &str| -> Vec<Term> {
            text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(|word| stem_word(&stemmer, lemma(&word.to_lowercase()))).collect()
        };
        for group in CLAIM_SYNONYMS {
            let canonical = term(&stem_words(group[0]).join("_"));
            for spelling in group.iter() {
                let words = stem_words(spelling);
                if !words.is_empty() && !(words.len() == 1 && words[0] == canonical) {
                    phrases.push((words, canonical.clone()));
                }
            }
        }
        for group in vocabulary.groups() {
            let Some(first) = group.first() else { continue };
            let canonical = Term::from(format!("={}", first.join("_")));
            for spelling in group {
                let words: Vec<Term> = spelling.iter().map(|word| stem_word(&stemmer, lemma(word))).collect();
                if !words.is_empty() && !phrases.iter().any(|(known, _)| *known == words) {
                    phrases.push((words, canonical.clone()));
                }
            }
        }
        phrases.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
        let mut by_first: HashMap<Term, Vec<(Vec<Term>, Term)>> = HashMap::new();
        for (words, canonical) in phrases {
            by_first.entry(words[0].clone()).or_default().push((words, canonical));
        }
        let phrases = by_first;
        let scope = SCOPE_WORDS.iter().map(|word| stem_word(&stemmer, word)).collect();
        ClaimRules { stemmer, phrases, scope }
    }

    /// Whether `a` and `b` make the same claim (see the module documentation).
    pub fn judge(&self, a: &str, b: &str) -> Judgement {
        self.compare(&self.claim(a), &self.claim(b))
    }

    /// [`ClaimRules::judge`] of two texts already reduced.
    pub fn compare(&self, a: &Claim, b: &Claim) -> Judgement {
        if a.is_empty() || b.is_empty() {
            return if a.is_empty() && b.is_empty() { Judgement::Same } else { Judgement::Unsure };
        }
        if a.forms.iter().any(|form| b.forms.contains(form)) {
            return Judgement::Same;
        }
        if a.numbers != b.numbers {
            return Judgement::Distinct(Difference::Number);
        }
        if a.negations != b.negations {
            return Judgement::Distinct(Difference::Negation);
        }
        if a.tokens == b.tokens {
            return Judgement::Distinct(Difference::Order);
        }
        let differing: Vec<&Term> = a
            .tokens
            .keys()
            .chain(b.tokens.keys())
            .filter(|token| a.tokens.get(*token) != b.tokens.get(*token))
            .collect();
        if differing.iter().any(|token| self.scope.contains(token.as_str()) || token.starts_with("u:")) {
            return Judgement::Distinct(Difference::Scope);
        }
        if differing.iter().any(|token| a.is_named(token) || b.is_named(token)) {
            return Judgement::Distinct(Difference::Entity);
        }
        Judgement::Unsure
    }

    /// Reads a text's words once for both [`ClaimRules::claim_of`] and
    /// [`ClaimRules::statements_of`]: the reading does not depend on the rules' synonyms, so it
    /// can be shared by rules with different vocabularies.
    pub fn tokenize(&self, text: &str) -> Tokenized {
        let sentences = sentences(&spell_out(text)).into_iter().map(|sentence| sentence.split(';').map(|part| self.tokens(part)).collect()).collect();
        Tokenized { sentences }
    }

    /// The sentences of a text as the rules read their words (clauses split at semicolons too),
    /// before anything is moved or dropped, for rules that look at a statement's structure.
    pub fn statements(&self, text: &str) -> Vec<Vec<Word>> {
        self.statements_from(self.tokenize(text).sentences)
    }

    /// [`ClaimRules::statements`] of a text already read.
    pub fn statements_of(&self, text: &Tokenized) -> Vec<Vec<Word>> {
        self.statements_from(text.sentences.clone())
    }

    fn statements_from(&self, sentences: Vec<Vec<Vec<Token>>>) -> Vec<Vec<Word>> {
        sentences
            .into_iter()
            .flatten()
            .map(|part| {
                self.map_phrases(part)
                    .into_iter()
                    .map(|token| Word {
                        canon: token.canon,
                        lower: token.lower,
                        named: token.named,
                        capital: token.capital,
                        function: token.function,
                        kind: match token.kind {
                            Kind::Word => WordKind::Word,
                            Kind::Number => WordKind::Number,
                            Kind::Negation => WordKind::Negation,
                            Kind::Break => WordKind::Break,
                        },
                    })
                    .collect::<Vec<Word>>()
            })
            .filter(|words| !words.is_empty())
            .collect()
    }

    /// Reduces a text to its canonical form.
    pub fn claim(&self, text: &str) -> Claim {
        self.claim_from(self.tokenize(text).sentences)
    }

    /// [`ClaimRules::claim`] of a text already read.
    pub fn claim_of(&self, text: Tokenized) -> Claim {
        self.claim_from(text.sentences)
    }

    fn claim_from(&self, sentences: Vec<Vec<Vec<Token>>>) -> Claim {
        let mut clauses: Vec<Vec<Token>> = Vec::new();
        for sentence in sentences {
            let tokens = self.map_phrases(unfront(whole_sentence(sentence)));
            clauses.extend(split_clauses(tokens));
        }
        let ordered = clauses.iter().flatten().any(|token| ORDER_WORDS.contains(&token.lower.as_str()));
        let mut readings: Vec<Vec<Vec<Token>>> = vec![Vec::new()];
        for clause in clauses {
            let mut variants = passive_readings(clause);
            // A clause of one reading (most are) extends every reading as it stands.
            if variants.len() == 1 {
                let only = variants.pop().expect("one reading");
                let (last, others) = readings.split_last_mut().expect("one reading at least");
                for reading in others {
                    reading.push(only.clone());
                }
                last.push(only);
                continue;
            }
            let mut next = Vec::with_capacity(readings.len() * variants.len());
            for reading in &readings {
                for variant in &variants {
                    let mut extended = reading.clone();
                    extended.push(variant.clone());
                    next.push(extended);
                }
            }
            // Each passive clause doubles the readings at most; a text of many is compared by
            // its first readings only.
            next.truncate(MAX_READINGS);
            readings = next;
        }
        let mut forms: Vec<Vec<Vec<Term>>> = Vec::new();
        let mut primary: Vec<Token> = Vec::new();
        for (index, reading) in readings.into_iter().enumerate() {
            let kept: Vec<Vec<Token>> = reading
                .into_iter()
                .map(|clause| clause.into_iter().filter(|token| !token.function).collect::<Vec<_>>())
                .filter(|clause| !clause.is_empty())
                .collect();
            let free = !ordered && kept.iter().all(|clause| clause.len() >= 2);
            let mut form: Vec<Vec<Term>> = kept.iter().map(|clause| clause.iter().map(|token| token.canon.clone()).collect()).collect();
            if free {
                form.sort();
            }
            if index == 0 {
                primary = kept.into_iter().flatten().collect();
            }
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
        let mut named = BTreeSet::new();
        let mut tokens: BTreeMap<Term, usize> = BTreeMap::new();
        let mut numbers = Vec::new();
        let mut negations = 0;
        for token in primary {
            *tokens.entry(token.canon.clone()).or_default() += 1;
            if token.named {
                named.insert(token.canon.clone());
            }
            match token.kind {
                Kind::Number => numbers.push(token.canon),
                Kind::Negation => negations += 1,
                Kind::Word | Kind::Break => {}
            }
        }
        Claim { forms, tokens, numbers, negations, named }
    }

    /// The tokens of one sentence: numbers as values, words stemmed and mapped through the
    /// synonym phrases, commas as breaks.
    fn tokens(&self, sentence: &str) -> Vec<Token> {
        let raw = raw_tokens(sentence);
        let mut tokens: Vec<Token> = Vec::with_capacity(raw.len());
        let mut index = 0;
        while index < raw.len() {
            let current = &raw[index];
            if current.is_break {
                tokens.push(Token::breaking());
                index += 1;
                continue;
            }
            if let Some((canon, used)) = number_at(&raw, index) {
                tokens.push(Token { canon: Term::from(canon), lower: raw[index].lower.clone(), kind: Kind::Number, named: true, capital: false, function: false });
                index += used;
                continue;
            }
            let (named, capital) = (current.named, current.capital);
            let lower = raw[index].lower.clone();
            if is_negation(&lower) {
                tokens.push(Token { canon: term(NEGATION), lower, kind: Kind::Negation, named: false, capital, function: false });
            } else {
                let lemma = lemma(&lower);
                let canon = if is_code(&lower) { lower.clone() } else if let Some(unit) = bare_unit(lemma) { Term::from(unit) } else { stem_word(&self.stemmer, lemma) };
                let function = is_function_word(&lower);
                tokens.push(Token { canon, lower, kind: Kind::Word, named, capital, function });
            }
            index += 1;
        }
        tokens
    }

    /// Replaces each synonym phrase by the token standing for its group, longest phrase first.
    fn map_phrases(&self, mut tokens: Vec<Token>) -> Vec<Token> {
        let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
        let mut index = 0;
        'tokens: while index < tokens.len() {
            if tokens[index].kind == Kind::Word {
                for (phrase, canonical) in self.phrases.get(&tokens[index].canon).into_iter().flatten() {
                    let end = index + phrase.len();
                    if end <= tokens.len() && tokens[index..end].iter().zip(phrase).all(|(token, word)| token.kind == Kind::Word && token.canon == *word) {
                        let named = tokens[index..end].iter().any(|token| token.named);
                        let lower: Term = tokens[index..end].iter().map(|token| token.lower.as_str()).collect::<Vec<_>>().join(" ").into();
                        out.push(Token {
                            canon: canonical.clone(),
                            lower,
                            kind: Kind::Word,
                            named,
                            capital: tokens[index].capital,
                            function: canonical.is_empty(),
                        });
                        index = end;
                        continue 'tokens;
                    }
                }
            }
            // Phrases look ahead only, so a token passed over is moved out.
            out.push(std::mem::replace(&mut tokens[index], Token::breaking()));
            index += 1;
        }
        out
    }
}

/// A text's sentences, each split at its semicolons, as [`ClaimRules::tokenize`] reads their
/// words: made once per text, read by [`ClaimRules::claim_of`] and
/// [`ClaimRules::statements_of`].
#[derive(Debug, Clone)]
pub struct Tokenized {
    sentences: Vec<Vec<Vec<Token>>>,
}

/// The tokens of a sentence as if it were read whole rather than part by part: a semicolon is a
/// break, and the first word of a later part is not the sentence's first, so its capital names
/// a thing.
fn whole_sentence(parts: Vec<Vec<Token>>) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::with_capacity(parts.iter().map(|part| part.len() + 1).sum());
    for (index, part) in parts.into_iter().enumerate() {
        if index > 0 {
            tokens.push(Token::breaking());
        }
        let start = tokens.len();
        tokens.extend(part);
        if index > 0
            && let Some(first) = tokens[start..].iter_mut().find(|token| token.kind != Kind::Break)
            && first.kind == Kind::Word
        {
            first.named |= first.capital;
        }
    }
    tokens
}

/// A word of a statement as [`ClaimRules::statements`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    /// What it is compared by: its stem, its synonym group, or its value (`q:30s`).
    pub canon: Term,
    /// As written, lower-cased (the words of a synonym phrase joined by spaces).
    pub lower: Term,
    /// Whether it names a thing: capitalised inside the sentence, an identifier, a number.
    pub named: bool,
    /// Whether it was written with a capital first letter.
    pub capital: bool,
    /// Whether it carries no claim of its own (`the`, `is`, `we`, …).
    pub function: bool,
    pub kind: WordKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordKind {
    Word,
    Number,
    Negation,
    /// A comma or a colon.
    Break,
}

/// The most readings (from the two readings of each passive clause) a claim keeps.
const MAX_READINGS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Word,
    Number,
    Negation,
    /// A comma, semicolon or colon: the end of a clause.
    Break,
}

#[derive(Debug, Clone, PartialEq)]
struct Token {
    /// What the token is compared by.
    canon: Term,
    /// The word as written, lower-cased.
    lower: Term,
    kind: Kind,
    /// Whether it names a thing: capitalised inside the sentence, an identifier, a number.
    named: bool,
    /// Whether it was written with a capital first letter.
    capital: bool,
    /// Whether it carries no claim of its own and drops out of the canonical form.
    function: bool,
}

impl Token {
    fn breaking() -> Token {
        Token { canon: Term::empty(), lower: Term::empty(), kind: Kind::Break, named: false, capital: false, function: true }
    }

    fn is(&self, words: &[&str]) -> bool {
        self.kind == Kind::Word && words.contains(&self.lower.as_str())
    }
}

/// Words that carry no claim of their own in a statement an agent keeps.
const FUNCTION_WORDS: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "is", "are", "was", "were", "be", "been", "being", "am", "do",
    "does", "did", "we", "our", "ours", "you", "your", "yours", "there", "please", "just", "really", "actually", "also",
    "which", "who", "whom", "its", "itself", "get", "gets", "got", "i", "me",
];

/// Forms of `be` (and `get`) that make a passive with a participle after them.
const PASSIVE_AUXILIARIES: &[&str] = &["is", "are", "was", "were", "be", "been", "being", "get", "gets", "got"];

/// Modal verbs: they stay with the verb when a passive turns active.
const MODALS: &[&str] = &["can", "could", "must", "should", "will", "would", "may", "might", "shall"];

/// Adverbs that may stand between a form of `be` and its participle.
const PASSIVE_ADVERBS: &[&str] = &["only", "also", "always", "automatically", "usually", "often", "still", "already", "now", "currently"];

/// Words that say the order of things matters, so clauses keep theirs.
const ORDER_WORDS: &[&str] = &[
    "then", "first", "second", "before", "after", "finally", "afterwards", "next", "later", "earlier", "followed", "order",
    "step", "steps", "sequence", "until",
];

/// Words that, fronted, begin a phrase that moves to the end of its sentence.
const FRONT_STARTERS: &[&str] = &[
    "in", "on", "at", "after", "before", "during", "since", "until", "for", "with", "within", "by", "from", "over",
    "under", "throughout", "when", "whenever", "if", "once", "unless", "because", "although", "every", "each", "last",
    "next", "this", "outside", "inside", "without", "via", "through", "across", "between", "among",
];

/// Words after which `every`, `each`, `last`, `next` and `this` make a time, not a quantifier.
const TIME_WORDS: &[&str] = &[
    "day", "days", "night", "nights", "morning", "mornings", "evening", "evenings", "afternoon", "week", "weeks", "month",
    "months", "year", "years", "hour", "hours", "minute", "minutes", "second", "seconds", "time", "weekday", "weekend",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "sprint", "release", "quarter",
];

/// Words that end a fronted phrase written without a comma: the subject begins.
const SUBJECT_STARTERS: &[&str] = &[
    "the", "a", "an", "our", "my", "your", "their", "his", "her", "its", "we", "i", "you", "they", "he", "she", "it",
    "this", "these", "those", "every", "each", "all", "some", "no",
];

/// Words that narrow, widen or turn a claim: when two claims differ by one of these, they are
/// two claims. Prepositions, quantifiers, modal verbs, comparatives and pairs of opposites.
const SCOPE_WORDS: &[&str] = &[
    // prepositions and conjunctions of condition or time
    "in", "on", "at", "to", "from", "into", "onto", "for", "with", "without", "by", "over", "under", "above", "below",
    "before", "after", "between", "within", "through", "across", "during", "until", "since", "per", "than", "of", "via",
    "against", "among", "around", "about", "off", "out", "up", "down", "except", "unless", "if", "only", "also", "but",
    "or", "nor", "either", "both", "instead",
    // quantifiers and frequency
    "all", "some", "any", "every", "most", "many", "much", "few", "several", "none", "always", "sometimes", "usually",
    "often", "rarely", "seldom", "occasionally", "mostly", "partly", "fully", "entirely", "once", "twice", "again",
    "more", "less", "fewer", "least", "most", "enough", "too", "very", "almost", "nearly", "exactly", "approximately",
    "roughly", "at", "other", "same", "different", "another", "each", "whole", "half",
    // modal verbs
    "can", "could", "must", "should", "will", "would", "may", "might", "shall", "need", "optional", "required",
    "recommended", "allowed", "forbidden",
    // comparatives and opposites
    "greater", "larger", "smaller", "higher", "lower", "faster", "slower", "older", "younger", "newer", "cheaper",
    "expensive", "earlier", "later", "better", "worse", "longer", "shorter", "bigger", "minimum", "maximum", "min",
    "max", "first", "last", "next", "previous", "enable", "disable", "enabled", "disabled", "allow", "deny", "include",
    "exclude", "start", "stop", "open", "close", "closed", "read", "write", "increase", "decrease", "raise", "lower",
    "grow", "shrink", "accept", "reject", "buy", "sell", "input", "output", "client", "server", "push", "pull", "send",
    "receive", "import", "export", "encrypt", "decrypt", "upload", "download", "lock", "unlock", "add", "remove",
    "true", "false", "success", "failure", "pass", "fail", "internal", "external", "public", "private", "sync",
    "async", "local", "remote", "primary", "replica", "secondary", "old", "new", "major", "minor", "inbound",
    "outbound", "ingress", "egress", "upstream", "downstream", "parent", "child", "source", "target", "leader",
    "follower", "daily", "weekly", "monthly", "hourly", "nightly", "yearly", "am", "pm", "weekday", "weekend", "north",
    "south", "east", "west", "left", "right", "high", "low", "fast", "slow", "cheap", "empty", "full", "hot", "cold",
    "win", "lose", "beat", "teach", "study", "learn", "lend", "borrow", "give", "take", "like", "dislike", "love",
    "hate", "prefer", "avoid", "keep", "drop", "skip", "retry", "ignore", "block", "before", "success", "valid",
    "invalid", "safe", "unsafe", "stable", "unstable", "strict", "lenient", "on", "off", "up", "down",
];

const NUMBER_WORDS: &[(&str, u32)] = &[
    ("zero", 0), ("one", 1), ("two", 2), ("three", 3), ("four", 4), ("five", 5), ("six", 6), ("seven", 7), ("eight", 8),
    ("nine", 9), ("ten", 10), ("eleven", 11), ("twelve", 12), ("thirteen", 13), ("fourteen", 14), ("fifteen", 15),
    ("sixteen", 16), ("seventeen", 17), ("eighteen", 18), ("nineteen", 19), ("twenty", 20), ("thirty", 30),
    ("forty", 40), ("fifty", 50), ("sixty", 60), ("seventy", 70), ("eighty", 80), ("ninety", 90), ("hundred", 100),
    ("thousand", 1000), ("million", 1_000_000),
];

const MONTHS: &[&str] = &[
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december",
];

/// Irregular forms and their lemma, and British spellings with their American ones, so that
/// the stemmer sees one word.
const LEMMAS: &[(&str, &str)] = &[
    ("written", "write"), ("wrote", "write"), ("built", "build"), ("rebuilt", "rebuild"), ("kept", "keep"), ("ran", "run"),
    ("sent", "send"), ("made", "make"), ("held", "hold"), ("done", "do"), ("taken", "take"), ("took", "take"),
    ("given", "give"), ("gave", "give"), ("shown", "show"), ("known", "know"), ("knew", "know"), ("seen", "see"),
    ("saw", "see"), ("led", "lead"), ("paid", "pay"), ("sold", "sell"), ("told", "tell"), ("found", "find"),
    ("bought", "buy"), ("brought", "bring"), ("caught", "catch"), ("taught", "teach"), ("thought", "think"),
    ("chosen", "choose"), ("chose", "choose"), ("spoken", "speak"), ("spoke", "speak"), ("broken", "break"),
    ("broke", "break"), ("frozen", "freeze"), ("stolen", "steal"), ("forgotten", "forget"), ("begun", "begin"),
    ("began", "begin"), ("won", "win"), ("lost", "lose"), ("left", "leave"), ("meant", "mean"), ("felt", "feel"),
    ("dealt", "deal"), ("spent", "spend"), ("lent", "lend"), ("drawn", "draw"), ("drew", "draw"), ("grown", "grow"),
    ("grew", "grow"), ("thrown", "throw"), ("threw", "throw"), ("hidden", "hide"), ("hid", "hide"), ("went", "go"),
    ("gone", "go"), ("came", "come"), ("had", "have"), ("has", "have"), ("became", "become"), ("fell", "fall"),
    ("fallen", "fall"), ("driven", "drive"), ("drove", "drive"), ("eaten", "eat"), ("ate", "eat"), ("met", "meet"),
    ("sat", "sit"), ("stood", "stand"), ("understood", "understand"), ("woke", "wake"), ("rewritten", "rewrite"),
    ("rewrote", "rewrite"), ("children", "child"), ("people", "person"), ("men", "man"), ("women", "woman"),
    ("mice", "mouse"), ("feet", "foot"), ("teeth", "tooth"), ("bound", "bind"), ("fed", "feed"), ("lit", "light"),
    ("shut", "shut"), ("hit", "hit"), ("set", "set"), ("put", "put"), ("cut", "cut"), ("let", "let"),
    ("colour", "color"), ("colours", "colors"), ("licence", "license"), ("licences", "licenses"), ("tyre", "tire"),
    ("tyres", "tires"), ("kilometre", "kilometer"), ("kilometres", "kilometers"), ("metre", "meter"), ("metres", "meters"),
    ("behaviour", "behavior"), ("favour", "favor"), ("centre", "center"), ("grey", "gray"), ("cancelled", "canceled"),
    ("cancelling", "canceling"), ("organise", "organize"), ("organised", "organized"), ("optimise", "optimize"),
    ("optimised", "optimized"), ("initialise", "initialize"), ("initialised", "initialized"), ("serialise", "serialize"),
    ("serialised", "serialized"), ("normalise", "normalize"), ("normalised", "normalized"), ("analyse", "analyze"),
    ("analysed", "analyzed"), ("catalogue", "catalog"), ("programme", "program"), ("travelling", "traveling"),
    ("labelled", "labeled"), ("modelling", "modeling"),
];

/// Participles that do not end in `-ed`, for passives.
const IRREGULAR_PARTICIPLES: &[&str] = &[
    "written", "built", "rebuilt", "kept", "run", "sent", "made", "held", "done", "taken", "given", "shown", "known",
    "seen", "led", "paid", "sold", "told", "found", "bought", "brought", "caught", "taught", "thought", "chosen",
    "spoken", "broken", "frozen", "stolen", "forgotten", "begun", "won", "lost", "left", "meant", "felt", "dealt",
    "spent", "lent", "drawn", "grown", "thrown", "hidden", "cut", "set", "put", "read", "shut", "hit", "bound", "fed",
    "driven", "eaten", "rewritten", "understood", "overwritten", "withdrawn",
];

/// Words ending in `-ed` that are not participles.
const NOT_PARTICIPLES: &[&str] = &["need", "seed", "feed", "speed", "shed", "breed", "bleed", "greed", "embed", "indeed", "exceed", "proceed", "succeed"];

// Every word of every statement read is looked up in these lists: sets, not scans of them.
fn lemma(word: &str) -> &str {
    static BY_FORM: LazyLock<HashMap<&str, &str>> = LazyLock::new(|| LEMMAS.iter().copied().collect());
    BY_FORM.get(word).copied().unwrap_or(word)
}

fn is_function_word(word: &str) -> bool {
    static SET: LazyLock<HashSet<&str>> = LazyLock::new(|| FUNCTION_WORDS.iter().copied().collect());
    SET.contains(word)
}

/// Words stemmed per thread before the cache starts again: a bulk capture reads the same few
/// thousand words over and over, and the stemmer costs more than the look-up. Every
/// [`ClaimRules`] stems English, so the cache is keyed by the word alone.
const STEM_CACHE_WORDS: usize = 16_384;

fn stem_word(stemmer: &Stemmer, word: &str) -> Term {
    thread_local! {
        static STEMS: RefCell<HashMap<Term, Term>> = RefCell::new(HashMap::new());
    }
    if word.chars().count() > 40 || word.chars().any(|c| c.is_ascii_digit()) {
        return term(word);
    }
    STEMS.with_borrow_mut(|stems| {
        if let Some(stem) = stems.get(word) {
            return stem.clone();
        }
        if stems.len() >= STEM_CACHE_WORDS {
            stems.clear();
        }
        let stem = term(&stemmer.stem(word));
        stems.insert(term(word), stem.clone());
        stem
    })
}

fn is_negation(word: &str) -> bool {
    matches!(word, "not" | "no" | "never" | "none" | "nothing" | "nobody" | "neither" | "nor")
}

/// Whether a word is an identifier, a path or a host rather than an English word: it keeps its
/// spelling and is not stemmed.
fn is_code(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit() || matches!(c, '.' | '_' | '/' | '@' | '#' | '+' | ':' | '%'))
}

/// Spells out contractions and possessives, so that `isn't` reads `is not`, `it's` reads
/// `it is` and `Alice's` reads `Alice`.
fn spell_out(text: &str) -> String {
    let text = text.replace(['\u{2019}', '\u{2018}'], "'");
    let mut out = String::with_capacity(text.len() + 16);
    let words: Vec<&str> = text.split_inclusive(|c: char| c.is_whitespace()).collect();
    for piece in words {
        let (word, space) = match piece.char_indices().last() {
            Some((at, c)) if c.is_whitespace() => (&piece[..at], &piece[at..]),
            _ => (piece, ""),
        };
        let (core, tail) = split_trailing_punctuation(word);
        // A word without an apostrophe (`cannot` aside) has nothing to spell out: it is copied
        // as it stands.
        if !core.contains('\'') && !core.eq_ignore_ascii_case("cannot") {
            out.push_str(piece);
            continue;
        }
        let lower_core = core.to_lowercase();
        if lower_core.len() != core.len() {
            // Letters whose lower case is longer or shorter: no English contraction to spell out.
            out.push_str(piece);
            continue;
        }
        let spelled = match lower_core.as_str() {
            "can't" | "cannot" => format!("{} not", &core[..3]),
            "won't" => "will not".to_owned(),
            "shan't" => "shall not".to_owned(),
            "ain't" => "is not".to_owned(),
            _ if lower_core.ends_with("n't") => format!("{} not", &core[..core.len() - 3]),
            _ if lower_core.ends_with("'re") => format!("{} are", &core[..core.len() - 3]),
            _ if lower_core.ends_with("'ve") => format!("{} have", &core[..core.len() - 3]),
            _ if lower_core.ends_with("'ll") => format!("{} will", &core[..core.len() - 3]),
            _ if lower_core.ends_with("'m") => format!("{} am", &core[..core.len() - 2]),
            _ if lower_core.ends_with("'d") => format!("{} would", &core[..core.len() - 2]),
            _ if lower_core.ends_with("'s") => {
                let base = &core[..core.len() - 2];
                match base.to_lowercase().as_str() {
                    "it" | "that" | "there" | "what" | "who" | "here" | "he" | "she" | "where" | "how" => format!("{base} is"),
                    _ => base.to_owned(),
                }
            }
            _ if lower_core.ends_with("s'") => core[..core.len() - 1].to_owned(),
            _ => core.to_owned(),
        };
        out.push_str(&spelled);
        out.push_str(tail);
        out.push_str(space);
    }
    out
}

fn split_trailing_punctuation(word: &str) -> (&str, &str) {
    let end = word.trim_end_matches(|c: char| matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | ')' | '"')).len();
    word.split_at(end)
}

/// Abbreviations whose full stop ends no sentence: `Dr. Patel`, `e.g. Rust`.
const ABBREVIATIONS: &[&str] = &["dr", "mr", "mrs", "ms", "prof", "st", "e.g", "i.e", "vs", "cf", "approx"];

/// Sentences: split at `.`, `!` or `?` before a space or the end (not after an abbreviation such
/// as `Dr.`), and at line breaks.
fn sentences(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for index in 0..bytes.len() {
            let abbreviation = || {
                let word_start = line[..index].rfind(|c: char| c.is_whitespace() || c == '(').map_or(0, |at| at + 1);
                ABBREVIATIONS.contains(&line[word_start..index].to_lowercase().as_str())
            };
            let ends = matches!(bytes[index], b'.' | b'!' | b'?')
                && bytes.get(index + 1).is_none_or(|next| next.is_ascii_whitespace())
                && !(bytes[index] == b'.' && bytes.get(index + 1).is_some() && abbreviation());
            if ends {
                found.push(&line[start..index]);
                start = index + 1;
            }
        }
        found.push(&line[start..]);
    }
    found.retain(|sentence| !sentence.trim().is_empty());
    found
}

/// A token as written.
#[derive(Debug)]
struct Raw {
    lower: Term,
    /// Capitalised inside the sentence, an identifier, or all capitals.
    named: bool,
    capital: bool,
    is_break: bool,
}

impl Raw {
    fn breaking() -> Raw {
        Raw { lower: Term::empty(), named: false, capital: false, is_break: true }
    }
}

/// Splits a sentence into words (letters, digits and the signs of identifiers, paths and
/// values) and breaks (commas, semicolons, a colon ending a word). Hyphenated words of letters
/// become their parts; `a.m.` is `am`.
fn raw_tokens(sentence: &str) -> Vec<Raw> {
    let mut out: Vec<Raw> = Vec::new();
    let mut first = true;
    // Where the word being read began: a word is a run of the sentence's characters, read
    // where it stands.
    let mut word_start: Option<usize> = None;
    for (at, c) in sentence.char_indices() {
        if c.is_alphanumeric() || matches!(c, '.' | '_' | '/' | '-' | ':' | '%' | '#' | '@' | '+' | '\'') {
            word_start.get_or_insert(at);
        } else {
            if let Some(start) = word_start.take() {
                raw_word(&sentence[start..at], &mut out, &mut first);
            }
            if matches!(c, ',' | ';') {
                out.push(Raw::breaking());
            }
        }
    }
    if let Some(start) = word_start {
        raw_word(&sentence[start..], &mut out, &mut first);
    }
    out
}

/// The tokens of one word as written, `first` while no word of the sentence was read before.
fn raw_word(word: &str, out: &mut Vec<Raw>, first: &mut bool) {
    let trimmed_end = word.trim_end_matches(['.', ':', '\'', '-', '_', '#']);
    let ends_with_colon = word[trimmed_end.len()..].contains(':');
    let trimmed = trimmed_end.trim_start_matches(['.', ':', '\'', '-', '_']);
    if !trimmed.is_empty() {
        let hyphenated_words = trimmed.contains('-') && trimmed.split('-').all(|part| part.chars().all(char::is_alphabetic));
        if hyphenated_words {
            trimmed.split('-').filter(|part| !part.is_empty()).for_each(|part| out.push(raw_part(part, first)));
        } else {
            out.push(raw_part(trimmed, first));
        }
    }
    if ends_with_colon {
        out.push(Raw::breaking());
    }
}

fn raw_part(part: &str, first: &mut bool) -> Raw {
    // Most words are written in lower case already, and are looked up as they stand.
    let lowered: Cow<'_, str> = if part.bytes().any(|byte| !byte.is_ascii() || byte.is_ascii_uppercase()) { Cow::Owned(part.to_lowercase()) } else { Cow::Borrowed(part) };
    let lower = match &*lowered {
        "a.m" => term("am"),
        "p.m" => term("pm"),
        // The plural of an abbreviation: `PRs`, `APIs`, `VMs`.
        _ if part.len() >= 3 && part.ends_with('s') && part[..part.len() - 1].chars().all(|c| c.is_ascii_uppercase()) => term(&lowered[..lowered.len() - 1]),
        _ => term(&lowered),
    };
    let (letters, upper) = part.chars().filter(|c| c.is_alphabetic()).fold((0, 0), |(letters, upper), c| (letters + 1, upper + usize::from(c.is_uppercase())));
    let capital = part.chars().next().is_some_and(char::is_uppercase);
    let inner_capital = part.chars().skip(1).any(char::is_uppercase);
    let all_capitals = letters >= 2 && upper == letters;
    let named = (capital && !*first) || inner_capital || all_capitals || is_code(&lower);
    *first = false;
    Raw { lower, named, capital, is_break: false }
}

/// A unit's size in the base unit of its dimension, and the dimension's mark.
fn unit(word: &str) -> Option<(f64, &'static str)> {
    Some(match word {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => (0.001, "s"),
        "s" | "sec" | "secs" | "second" | "seconds" => (1.0, "s"),
        "m" | "min" | "mins" | "minute" | "minutes" => (60.0, "s"),
        "h" | "hr" | "hrs" | "hour" | "hours" => (3600.0, "s"),
        "d" | "day" | "days" => (86_400.0, "s"),
        "week" | "weeks" | "wk" | "wks" => (604_800.0, "s"),
        "month" | "months" => (2_592_000.0, "s"),
        "year" | "years" | "yr" | "yrs" => (31_536_000.0, "s"),
        "b" | "byte" | "bytes" => (1.0, "b"),
        "kb" | "kib" | "kilobyte" | "kilobytes" => (1024.0, "b"),
        "mb" | "mib" | "megabyte" | "megabytes" => (1_048_576.0, "b"),
        "gb" | "gib" | "gigabyte" | "gigabytes" => (1_073_741_824.0, "b"),
        "tb" | "tib" | "terabyte" | "terabytes" => (1_099_511_627_776.0, "b"),
        "%" | "percent" => (1.0, "%"),
        "mm" | "millimeter" | "millimeters" | "millimetre" | "millimetres" => (0.001, "m"),
        "cm" | "centimeter" | "centimeters" | "centimetre" | "centimetres" => (0.01, "m"),
        "meter" | "meters" | "metre" | "metres" => (1.0, "m"),
        "km" | "kilometer" | "kilometers" | "kilometre" | "kilometres" => (1000.0, "m"),
        "mile" | "miles" => (1609.344, "m"),
        "mg" | "milligram" | "milligrams" => (0.001, "g"),
        "g" | "gram" | "grams" => (1.0, "g"),
        "kg" | "kilogram" | "kilograms" => (1000.0, "g"),
        _ => return None,
    })
}

/// A unit word standing alone (`per minute`): the unit, so that `per min` and `per minute`
/// are one token. Single letters are left alone: alone, they are rarely units.
fn bare_unit(word: &str) -> Option<String> {
    if word.chars().count() < 2 {
        return None;
    }
    unit(word).map(|(factor, dimension)| format!("u:{}{dimension}", format_value(factor)))
}

fn format_value(value: f64) -> String {
    let rounded = (value * 1e6).round() / 1e6;
    if rounded.fract() == 0.0 && rounded.abs() < 1e15 { format!("{}", rounded as i64) } else { format!("{rounded}") }
}

fn is_number_token(token: &str) -> bool {
    token.len() > 2 && token.as_bytes()[1] == b':' && matches!(token.as_bytes()[0], b'n' | b'q' | b'v' | b't' | b'd' | b'o')
}

/// Reads a number at `index` (with the unit, meridiem or month that goes with it): its token
/// and how many raw tokens it used.
fn number_at(raw: &[Raw], index: usize) -> Option<(String, usize)> {
    let word = raw[index].lower.as_str();
    let next = raw.get(index + 1).filter(|token| !token.is_break).map(|token| token.lower.as_str());
    // A month and a day: `March 12`.
    if MONTHS.contains(&word) && word != "may"
        && let Some(day) = next.and_then(day_of_month)
    {
        let month = MONTHS.iter().position(|month| *month == word).expect("a month") + 1;
        return Some((format!("d:{month:02}-{day:02}"), 2));
    }
    // `a`/`an` before a unit: one of it (`for an hour`).
    if matches!(word, "a" | "an")
        && let Some((factor, dimension)) = next.filter(|next| next.len() >= 2).and_then(unit)
    {
        return Some((format!("q:{}{dimension}", format_value(factor)), 2));
    }
    let (value_text, suffix, versioned) = match NUMBER_WORDS.iter().find(|(name, _)| *name == word) {
        Some((_, value)) => (value.to_string(), String::new(), false),
        None => {
            let bare = word.strip_prefix('v').filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
            let body = bare.unwrap_or(word);
            if let Some(time) = clock_time(body, next) {
                return Some(time);
            }
            let digits = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
            if digits == 0 || !body.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            (body[..digits].trim_end_matches('.').to_owned(), body[digits..].to_owned(), bare.is_some())
        }
    };
    // A day and a month: `12 March`.
    if let (Some(day), Some(month)) = (day_of_month(&format!("{value_text}{suffix}")), next.and_then(|next| MONTHS.iter().position(|month| *month == next)))
    {
        return Some((format!("d:{:02}-{day:02}", month + 1), 2));
    }
    let dots = value_text.matches('.').count();
    let numeric: Option<f64> = if dots <= 1 { value_text.parse().ok() } else { None };
    match suffix.as_str() {
        "" => {
            if let (Some(value), Some((factor, dimension))) = (numeric, next.and_then(unit)) {
                return Some((format!("q:{}{dimension}", format_value(value * factor)), 2));
            }
            if let (Some(hour), Some(meridiem)) = (numeric, next.filter(|next| matches!(*next, "am" | "pm"))) {
                return meridiem_time(hour, 0, meridiem).map(|time| (time, 2));
            }
            if versioned || dots >= 2 {
                Some((format!("v:{value_text}"), 1))
            } else {
                Some((format!("n:{}", trim_leading_zeros(&value_text)), 1))
            }
        }
        "st" | "nd" | "rd" | "th" => Some((format!("o:{}", trim_leading_zeros(&value_text)), 1)),
        "am" | "pm" => numeric.and_then(|hour| meridiem_time(hour, 0, &suffix)).map(|time| (time, 1)),
        unit_suffix => match (numeric, unit(unit_suffix)) {
            (Some(value), Some((factor, dimension))) => Some((format!("q:{}{dimension}", format_value(value * factor)), 1)),
            _ => None,
        },
    }
}

fn trim_leading_zeros(text: &str) -> &str {
    let trimmed = text.trim_start_matches('0');
    if trimmed.is_empty() || trimmed.starts_with('.') { &text[text.len() - trimmed.len() - 1..] } else { trimmed }
}

fn day_of_month(text: &str) -> Option<u32> {
    let digits = text.trim_end_matches(|c: char| c.is_alphabetic());
    let suffix = &text[digits.len()..];
    if !(suffix.is_empty() || matches!(suffix, "st" | "nd" | "rd" | "th")) || digits.is_empty() || digits.len() > 2 {
        return None;
    }
    digits.parse().ok().filter(|day| (1..=31).contains(day))
}

/// `7:40`, `07:40`, `2:00 pm`.
fn clock_time(body: &str, next: Option<&str>) -> Option<(String, usize)> {
    let (hour, minute) = body.split_once(':')?;
    if hour.is_empty() || hour.len() > 2 || minute.len() != 2 || !hour.chars().chain(minute.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (hour, minute): (f64, u32) = (hour.parse().ok()?, minute.parse().ok()?);
    match next.filter(|next| matches!(*next, "am" | "pm")) {
        Some(meridiem) => meridiem_time(hour, minute, meridiem).map(|time| (time, 2)),
        None if hour < 24.0 && minute < 60 => Some((format!("t:{:02}:{minute:02}", hour as u32), 1)),
        None => None,
    }
}

fn meridiem_time(hour: f64, minute: u32, meridiem: &str) -> Option<String> {
    if hour.fract() != 0.0 || !(1.0..=12.0).contains(&hour) || minute >= 60 {
        return None;
    }
    let hour = hour as u32 % 12 + if meridiem == "pm" { 12 } else { 0 };
    Some(format!("t:{hour:02}:{minute:02}"))
}

/// Moves a phrase fronted before a sentence to its end: `Before review, a PR needs green CI`
/// reads `a PR needs green CI before review`. The phrase runs to the first break, or without
/// one to the word that begins the subject (`On Tuesday the meeting starts …`). A phrase
/// after the last break that begins like a fronted one joins the clause before it, so that
/// `X, in CI` and `X in CI` read alike.
fn unfront(mut tokens: Vec<Token>) -> Vec<Token> {
    let starts = |tokens: &[Token], at: usize| -> bool {
        let Some(first) = tokens.get(at) else { return false };
        if first.kind != Kind::Word || !FRONT_STARTERS.contains(&first.lower.as_str()) {
            return false;
        }
        // `every`, `each`, `last`, `next` and `this` front a time only: `every Monday`,
        // `last year`, `every 2 weeks`; `Every PR needs …` is a subject.
        if matches!(first.lower.as_str(), "every" | "each" | "last" | "next" | "this") {
            return tokens.get(at + 1).is_some_and(|next| next.kind == Kind::Number || TIME_WORDS.contains(&next.lower.as_str()));
        }
        true
    };
    if starts(&tokens, 0) {
        let end = match tokens.iter().position(|token| token.kind == Kind::Break) {
            Some(at) => Some((at, at + 1)),
            None => (2..tokens.len())
                .find(|&at| {
                    let token = &tokens[at];
                    let content_before = tokens[1..at].iter().any(|token| !token.function);
                    content_before && token.kind == Kind::Word && (SUBJECT_STARTERS.contains(&token.lower.as_str()) || token.capital)
                })
                .map(|at| (at, at)),
        };
        if let Some((phrase_end, rest_start)) = end
            && rest_start < tokens.len()
        {
            let phrase: Vec<Token> = tokens[..phrase_end].to_vec();
            let mut moved: Vec<Token> = tokens[rest_start..].to_vec();
            moved.extend(phrase);
            tokens = moved;
        }
    }
    while let Some(last_break) = tokens.iter().rposition(|token| token.kind == Kind::Break) {
        if last_break + 1 < tokens.len() && starts(&tokens, last_break + 1) {
            tokens.remove(last_break);
        } else {
            break;
        }
    }
    tokens
}

/// Splits a sentence into clauses at breaks and at `and`, `but`, `whereas`.
fn split_clauses(tokens: Vec<Token>) -> Vec<Vec<Token>> {
    let mut clauses: Vec<Vec<Token>> = vec![Vec::new()];
    for token in tokens {
        let splits = token.kind == Kind::Break
            || (token.is(&["and", "but", "whereas"]) && !clauses.last().is_some_and(|clause| clause.iter().any(|token| token.is(&["between", "both"]))));
        if splits {
            clauses.push(Vec::new());
        } else {
            clauses.last_mut().expect("one clause at least").push(token);
        }
    }
    clauses.retain(|clause| !clause.is_empty());
    clauses
}

/// The readings of a clause: itself, or, when it is passive (`X is V-ed [by Y] …`), its
/// active forms `Y V X …`, once with the agent `Y` up to the next preposition and once with
/// the agent running to the end of the clause.
fn passive_readings(clause: Vec<Token>) -> Vec<Vec<Token>> {
    let Some((auxiliary, participle)) = passive_at(&clause) else { return vec![clause] };
    // The subject runs to the first modal verb; the modals stay before the verb.
    let modal = clause[..auxiliary].iter().position(|token| token.is(MODALS)).unwrap_or(auxiliary);
    let subject = &clause[..modal];
    let modals = &clause[modal..auxiliary];
    let between: Vec<Token> = clause[auxiliary + 1..participle].to_vec();
    let verb = &clause[participle];
    let rest = &clause[participle + 1..];
    let agent_at = rest.iter().position(|token| token.is(&["by"])).filter(|&at| rest.get(at + 1).is_some_and(|next| next.kind != Kind::Number));
    let mut readings = Vec::new();
    let ends: Vec<usize> = match agent_at {
        None => vec![rest.len()],
        Some(at) => {
            let short = rest[at + 1..]
                .iter()
                .position(|token| token.kind == Kind::Word && !token.function && FRONT_STARTERS.contains(&token.lower.as_str()) && token.lower != "by")
                .map_or(rest.len(), |offset| at + 1 + offset);
            if short == rest.len() { vec![rest.len()] } else { vec![short, rest.len()] }
        }
    };
    for end in ends {
        let (agent, remainder): (Vec<Token>, Vec<Token>) = match agent_at {
            Some(at) => (rest[at + 1..end].to_vec(), rest[..at].iter().chain(&rest[end..]).cloned().collect()),
            None => (Vec::new(), rest.to_vec()),
        };
        let mut reading: Vec<Token> = Vec::with_capacity(clause.len());
        reading.extend(agent);
        reading.extend(modals.iter().cloned());
        reading.extend(between.iter().cloned());
        reading.push(verb.clone());
        reading.extend(subject.iter().cloned());
        reading.extend(remainder);
        readings.push(reading);
    }
    readings
}

/// The positions of the form of `be` and of the participle of a passive clause.
fn passive_at(clause: &[Token]) -> Option<(usize, usize)> {
    let auxiliary = clause.iter().position(|token| token.is(PASSIVE_AUXILIARIES))?;
    if auxiliary == 0 {
        return None;
    }
    let mut at = auxiliary + 1;
    while clause.get(at).is_some_and(|token| token.kind == Kind::Negation || token.is(PASSIVE_ADVERBS) || token.is(&["be", "been"])) {
        at += 1;
    }
    let participle = clause.get(at)?;
    let is_participle = participle.kind == Kind::Word
        && !is_code(&participle.lower)
        && (participle.lower.ends_with("ed") && participle.lower.len() >= 4 && !NOT_PARTICIPLES.contains(&participle.lower.as_str())
            || IRREGULAR_PARTICIPLES.contains(&participle.lower.as_str()));
    is_participle.then_some((auxiliary, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(a: &str, b: &str) -> Judgement {
        ClaimRules::default().judge(a, b)
    }

    #[test]
    fn forms_read_as_documented() {
        let rules = ClaimRules::default();
        let key = |text: &str| rules.claim(text).key();
        assert_eq!(key("The billing service is called by the auth service."), key("The auth service calls the billing service"));
        assert_eq!(key("Before review, a PR needs green CI."), key("A pull request needs green CI before review"));
        assert_eq!(key("Sessions expire after 30 min."), key("Sessions expire after 1800 seconds"));
        assert_eq!(rules.claim("Retry 3 times with a 5 s backoff").numbers(), ["n:3", "q:5s"]);
        assert_eq!(rules.claim("It opens at 7 a.m. on 12 March").numbers(), ["t:07:00", "d:03-12"]);
        assert_eq!(rules.claim("Upgrade to v1.39.0 and 3.10").numbers(), ["v:1.39.0", "n:3.10"]);
    }

    #[test]
    fn the_same_claim_in_other_words_is_the_same() {
        let cases = [
            ("Always run cargo fmt before committing Rust code.", "Always run cargo fmt before you commit Rust code."),
            ("Tests must not hit the network.", "Tests must never hit the network."),
            ("Write to the primary and read from the replica.", "Read from the replica and write to the primary."),
            ("The db connection pool holds 20 connections.", "The database connection pool holds 20 connections."),
            ("Use pnpm, not npm, in this repository.", "In this repository, use pnpm, not npm."),
            ("Secrets are stored in Vault.", "We store secrets in Vault."),
            ("On Tuesday the meeting starts at 3 pm.", "The meeting starts at 3 pm on Tuesday."),
            ("The parser isn't thread-safe.", "The parser is not thread-safe."),
        ];
        for (a, b) in cases {
            assert_eq!(judge(a, b), Judgement::Same, "{a} / {b}");
        }
    }

    #[test]
    fn another_claim_is_told_apart_by_what_changed() {
        use Difference::*;
        let cases = [
            ("Retry 3 times with a 5 s backoff.", "Retry 5 times with a 3 s backoff.", Number),
            ("The request timeout is 30 seconds.", "The request timeout is 30 milliseconds.", Number),
            ("The auth service calls the billing service.", "The billing service calls the auth service.", Order),
            ("Deploy to staging before production.", "Deploy to production before staging.", Order),
            ("The parser is thread-safe.", "The parser isn't thread-safe.", Negation),
            ("Run the tests.", "Run the tests on Linux.", Scope),
            ("All integration tests need Docker.", "Some integration tests need Docker.", Scope),
            ("The e2e tests run against Chromium.", "The e2e tests run against Firefox.", Entity),
        ];
        for (a, b, difference) in cases {
            assert_eq!(judge(a, b), Judgement::Distinct(difference), "{a} / {b}");
        }
        assert_eq!(judge("The flaky login test depends on the system timezone.", "The flaky login test depends on the system locale."), Judgement::Unsure);
    }

    #[test]
    fn same_claims_finds_exactly_what_compare_judges_the_same() {
        let rules = ClaimRules::default();
        let mut texts: Vec<String> = include_str!("../tests/fixtures/judgment-dev.jsonl")
            .lines()
            .flat_map(|line| {
                let pair: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
                [pair["a"].as_str().expect("a").to_owned(), pair["b"].as_str().expect("b").to_owned()]
            })
            .collect();
        texts.extend(["", "...", "The billing service is called by the auth service.", "The auth service calls the billing service"].map(str::to_owned));
        let claims: Vec<Claim> = texts.iter().map(|text| rules.claim(text)).collect();
        let mut index = SameClaims::default();
        for (position, claim) in claims.iter().enumerate() {
            let expected: Vec<usize> = (0..position).filter(|&before| rules.compare(&claims[before], claim) == Judgement::Same).collect();
            assert_eq!(index.same_as(claim), expected, "{}", texts[position]);
            index.insert(claim, position);
        }
        assert!(claims.iter().enumerate().any(|(position, claim)| !index.same_as(claim).iter().all(|&found| found == position)), "some texts of the fixture make the same claim");
    }
}
