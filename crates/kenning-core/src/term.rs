//! Words as the judgment rules keep them: shared, not copied.
//!
//! The claim and contradiction rules read a text into tokens, stems, sets of content words and
//! statements, and each word is held in several of them. Held as `String`s, every one of those
//! places was an allocation and a copy (over a thousand allocations for a note of a few
//! sentences), and reading a text cost more in the allocator than in the rules. A [`Term`] is
//! one shared copy of a word: cloning it counts a reference, and the words a thread reads are
//! looked up in a table of those it read lately ([`term`]), so the same word read again is
//! the same copy.
//!
//! A term compares, orders and hashes as its text, so sets and maps of terms keep the order
//! and answers they had as strings, and are looked up by `&str`.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use foldhash::{HashSet, HashSetExt};

/// A word, or a value's token, held once and shared.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Term(Arc<str>);

impl Term {
    /// The empty term (a break between clauses holds it).
    pub fn empty() -> Term {
        static EMPTY: LazyLock<Term> = LazyLock::new(|| Term(Arc::from("")));
        EMPTY.clone()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Terms kept per thread before the table starts again: a bulk capture reads the same few
/// thousand words over and over.
const TABLE_TERMS: usize = 16_384;

/// `word` as a term: the copy this thread read lately, or a new one.
pub fn term(word: &str) -> Term {
    thread_local! {
        static TERMS: RefCell<HashSet<Term>> = RefCell::new(HashSet::new());
    }
    TERMS.with_borrow_mut(|terms| {
        if let Some(known) = terms.get(word) {
            return known.clone();
        }
        if terms.len() >= TABLE_TERMS {
            terms.clear();
        }
        let made = Term(Arc::from(word));
        terms.insert(made.clone());
        made
    })
}

impl Deref for Term {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Term {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for Term {
    fn from(text: String) -> Term {
        Term(Arc::from(text))
    }
}

impl PartialEq<str> for Term {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Term {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// As a string's: a term prints where a `String` did.
impl fmt::Debug for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_read_again_is_the_same_copy_and_compares_as_its_text() {
        let first = term("timeout");
        let again = term("timeout");
        assert!(Arc::ptr_eq(&first.0, &again.0));
        assert_eq!(first, Term::from("timeout".to_owned()));
        assert!(term("apple") < term("banana"));
        let set: std::collections::BTreeSet<Term> = ["b", "a"].into_iter().map(term).collect();
        assert!(set.contains("a"));
        assert_eq!(format!("{:?}", term("x")), format!("{:?}", "x".to_owned()));
    }
}
