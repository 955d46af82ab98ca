//! How alike two decisions are, from their words alone, so that patterns, similar decisions and
//! antipattern matches work without an embedding model and give the same answer every time.
//!
//! A statement becomes a set of content words: lower-cased, split on anything that is not a
//! letter or digit, stop words and decision verbs ("use", "add", "switch") dropped, plurals
//! folded. Two statements are compared by the Dice coefficient of their sets, 2|A∩B| / (|A|+|B|).
//!
//! Words alone cannot tell "Use PostgreSQL for orders" from "Use MongoDB for orders" (they share
//! "orders"), but the alternatives can: when one decision chose what the other rejected, they
//! are the same question answered differently, a [`Relation::Contrast`], never one pattern.

use std::collections::BTreeSet;

/// Statements at least this alike (Dice) are the same pattern, unless they contrast.
const PATTERN_SIMILARITY: f64 = 0.5;
/// Statements at least this alike are shown as similar decisions.
pub const SIMILAR_SIMILARITY: f64 = 0.3;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it", "its", "of", "on", "or",
    "our", "so", "than", "that", "the", "their", "then", "this", "to", "we", "with", "without", "will", "instead",
    "rather", "over", "all", "each", "every", "new", "via", "per", "use", "using", "used", "add", "adding", "adopt",
    "choose", "chose", "go", "keep", "make", "move", "switch", "start", "stop", "do", "not", "no",
];

/// The content words of a text.
pub fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .map(|word| fold_plural(&word))
        .filter(|word| word.chars().count() >= 2 || word.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

/// `queries` → `query`, `caches` → `cache`, `services` → `service`; leaves `redis`, `class` and
/// short words alone.
fn fold_plural(word: &str) -> String {
    if word.chars().count() > 4 {
        if let Some(stem) = word.strip_suffix("ies") {
            return format!("{stem}y");
        }
        if word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("is") && !word.ends_with("us") {
            return word[..word.len() - 1].to_owned();
        }
    }
    word.to_owned()
}

/// The Dice coefficient of two word sets: 1 for equal sets, 0 when they share nothing.
pub(crate) fn dice<Word: Ord>(a: &BTreeSet<Word>, b: &BTreeSet<Word>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(b).count();
    2.0 * shared as f64 / (a.len() + b.len()) as f64
}

/// A decision's words: what it chose and what it rejected.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecisionWords {
    pub chosen: BTreeSet<String>,
    pub rejected: BTreeSet<String>,
}

impl DecisionWords {
    pub fn new<S: AsRef<str>>(statement: &str, alternatives: &[S]) -> DecisionWords {
        let chosen = words(statement);
        let rejected = alternatives
            .iter()
            .flat_map(|alternative| words(alternative.as_ref()))
            .filter(|word| !chosen.contains(word))
            .collect();
        DecisionWords { chosen, rejected }
    }
}

/// How two decisions relate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Relation {
    /// Alike in words and not contradicting each other; the value is the Dice coefficient.
    Alike(f64),
    /// One chose what the other rejected; the value is the Dice coefficient of the statements.
    Contrast(f64),
}

impl Relation {
    /// The Dice coefficient of the statements, whichever the relation.
    pub fn similarity(self) -> f64 {
        match self {
            Relation::Alike(value) | Relation::Contrast(value) => value,
        }
    }

    /// Whether the two belong to one pattern: alike enough and not contrasting.
    pub fn same_pattern(self) -> bool {
        matches!(self, Relation::Alike(value) if value >= PATTERN_SIMILARITY)
    }
}

/// Compares two decisions.
pub fn relate(a: &DecisionWords, b: &DecisionWords) -> Relation {
    let similarity = dice(&a.chosen, &b.chosen);
    let contrast = a.chosen.iter().any(|word| b.rejected.contains(word)) || b.chosen.iter().any(|word| a.rejected.contains(word));
    if contrast { Relation::Contrast(similarity) } else { Relation::Alike(similarity) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    #[test]
    fn words_drop_stop_words_and_fold_plurals() {
        assert_eq!(words("Use PostgreSQL for the orders services"), set(&["postgresql", "order", "service"]));
        assert_eq!(words("Add Redis caches; queries go through them"), set(&["redis", "cache", "query", "through", "them"]));
        assert_eq!(words("HTTP/2 for gRPC"), set(&["http", "2", "grpc"]));
    }

    #[test]
    fn dice_by_hand() {
        // {postgresql, order, service} against {postgresql, billing, service}: 2·2 / (3+3).
        let a = words("Use PostgreSQL for the orders service");
        let b = words("Use PostgreSQL for the billing service");
        assert!((dice(&a, &b) - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(dice(&set(&[]), &set(&[])), 0.0);
    }

    #[test]
    fn choosing_what_the_other_rejected_is_a_contrast() {
        let postgres = DecisionWords::new("Use PostgreSQL for the orders service", &["MongoDB"]);
        let mongo = DecisionWords::new("Use MongoDB for the orders service", &["PostgreSQL"]);
        let billing = DecisionWords::new("Use PostgreSQL for the billing service", &["MySQL"]);
        assert!(matches!(relate(&postgres, &mongo), Relation::Contrast(_)));
        assert!(!relate(&postgres, &mongo).same_pattern());
        assert!(relate(&postgres, &billing).same_pattern());
    }
}
