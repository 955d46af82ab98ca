//! Turning text into search terms: words split the way SQLite's `unicode61` tokenizer splits
//! them, folded to lower case without diacritics, and stemmed with the Snowball English stemmer
//! so that a question about "deploying" finds a memory about "deployment".

use std::collections::HashSet;

use rust_stemmers::{Algorithm, Stemmer};

/// Words that carry no topic in an English question. Queries leave them out, because every one of
/// them matches most of a store and only costs time; BM25 would weigh them down anyway. Documents
/// keep them, so that a query made only of such words still finds something. Negations ("no",
/// "not", "never") are not among them: "the cache is not shared" and "the cache is shared" are
/// opposite claims, and a query that says "not" should prefer the memory that does.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "but",
    "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "he", "her", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "was", "we",
    "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// More query terms than this only slow a search down without changing which memories rank first.
pub const MAX_QUERY_TERMS: usize = 32;

/// Words longer than this are kept as they are: they are identifiers, hashes or encoded data,
/// which a stemmer can only damage.
const MAX_STEMMED_CHARS: usize = 40;

/// Splits text into folded words and stems them.
pub struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer { stemmer: Stemmer::create(Algorithm::English) }
    }
}

impl Analyzer {
    /// The stem of one folded word.
    pub fn stem(&self, word: &str) -> String {
        if word.chars().count() > MAX_STEMMED_CHARS || word.bytes().any(|byte| byte.is_ascii_digit()) {
            return word.to_owned();
        }
        self.stemmer.stem(word).into_owned()
    }

    /// The stemmed terms of a query, without stop words (unless it has nothing else), each once,
    /// at most [`MAX_QUERY_TERMS`], in the order they first appear. Linear in the query's length:
    /// words are de-duplicated through hash sets, and once the topical terms are full the rest of
    /// the query only has its words split.
    pub fn query_terms(&self, text: &str) -> Vec<String> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut topical: Vec<String> = Vec::new();
        let mut stop_words: Vec<String> = Vec::new();
        for_each_word(text, |word| {
            if topical.len() == MAX_QUERY_TERMS || seen.contains(word) {
                return;
            }
            seen.insert(word.to_owned());
            if is_stop_word(word) {
                if stop_words.len() < MAX_QUERY_TERMS {
                    stop_words.push(word.to_owned());
                }
                return;
            }
            let term = self.stem(word);
            if !topical.contains(&term) {
                topical.push(term);
            }
        });
        if topical.is_empty() {
            // A query of stop words alone ("what did we do?") still searches with them.
            stop_words.iter().map(|word| self.stem(word)).fold(Vec::new(), |mut terms, term| {
                if !terms.contains(&term) {
                    terms.push(term);
                }
                terms
            })
        } else {
            topical
        }
    }
}

pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// Calls `visit` with every word of `text`, lower-cased and without diacritics. A word is a run
/// of letters and digits; everything else separates words.
pub fn for_each_word(text: &str, mut visit: impl FnMut(&str)) {
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_ascii() {
                word.push(c.to_ascii_lowercase());
            } else {
                fold_into(c, &mut word);
            }
        } else if !word.is_empty() {
            visit(&word);
            word.clear();
        }
    }
    if !word.is_empty() {
        visit(&word);
    }
}

/// Appends the lower-case form of `c` without its diacritic, for the Latin letters that carry
/// one; other letters are only lower-cased.
fn fold_into(c: char, out: &mut String) {
    for lower in c.to_lowercase() {
        match strip_diacritic(lower) {
            Some(base) => out.push_str(base),
            None => out.push(lower),
        }
    }
}

fn strip_diacritic(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => "a",
        'æ' => "ae",
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => "c",
        'ď' | 'đ' => "d",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => "e",
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => "g",
        'ĥ' | 'ħ' => "h",
        'ì' | 'í' | 'î' | 'ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => "i",
        'ĵ' => "j",
        'ķ' => "k",
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => "l",
        'ñ' | 'ń' | 'ņ' | 'ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => "o",
        'œ' => "oe",
        'ŕ' | 'ŗ' | 'ř' => "r",
        'ś' | 'ŝ' | 'ş' | 'š' => "s",
        'ß' => "ss",
        'ţ' | 'ť' | 'ŧ' => "t",
        'ù' | 'ú' | 'û' | 'ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => "u",
        'ŵ' => "w",
        'ý' | 'ÿ' | 'ŷ' => "y",
        'ź' | 'ż' | 'ž' => "z",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, |word| out.push(word.to_owned()));
        out
    }

    #[test]
    fn words_split_on_anything_but_letters_and_digits() {
        assert_eq!(words("title:foo* AND (bar-baz) v2.1"), ["title", "foo", "and", "bar", "baz", "v2", "1"]);
        assert_eq!(words("  \t?!.\"'()*:^-+"), Vec::<String>::new());
    }

    #[test]
    fn words_are_folded() {
        assert_eq!(words("Ünïcödé CAFÉ—naïve Straße"), ["unicode", "cafe", "naive", "strasse"]);
        assert_eq!(words("Ωμέγα 東京"), ["ωμέγα", "東京"]);
    }

    #[test]
    fn stems_meet_across_inflections() {
        let analyzer = Analyzer::default();
        assert_eq!(analyzer.stem("deploying"), analyzer.stem("deployment"));
        assert_eq!(analyzer.stem("connections"), analyzer.stem("connection"));
        assert_eq!(analyzer.stem("sha256"), "sha256");
    }

    #[test]
    fn queries_drop_stop_words_unless_nothing_else_is_left() {
        let analyzer = Analyzer::default();
        assert_eq!(analyzer.query_terms(r#"What did "Caroline" do in May?"#), ["carolin", "may"]);
        assert_eq!(analyzer.query_terms("What is it?"), ["what", "is", "it"]);
        assert!(analyzer.query_terms("?!").is_empty());
    }

    #[test]
    fn query_terms_are_unique_and_capped() {
        let analyzer = Analyzer::default();
        assert_eq!(analyzer.query_terms("Rust rust RUST"), ["rust"]);
        let long: String = (0..100).map(|n| format!("word{n} ")).collect();
        assert_eq!(analyzer.query_terms(&long).len(), MAX_QUERY_TERMS);
    }

    /// Regression: every word of the query was de-duplicated against a list of all the words
    /// before it, quadratic in the number of distinct words (100,000 words took 35 s to recall).
    #[test]
    fn a_query_of_many_distinct_words_keeps_the_first_ones() {
        let analyzer = Analyzer::default();
        let long: String = (0..200_000).map(|n| format!("the word{n} ")).collect();
        let terms = analyzer.query_terms(&long);
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert_eq!(terms[0], "word0");
        assert_eq!(terms[MAX_QUERY_TERMS - 1], format!("word{}", MAX_QUERY_TERMS - 1));
    }
}
