//! Turns arbitrary user text into an FTS5 query that cannot be a syntax error.
//!
//! FTS5 gives meaning to quotes, parentheses, `*`, `:`, `^`, `-`, `+` and the words AND, OR,
//! NOT and NEAR, so a question passed through as typed often fails to parse. Instead the text is
//! split into words the way the `unicode61` tokenizer splits it (on anything that is not a letter
//! or digit), each word becomes a quoted string, and the strings are joined with OR so that a
//! memory matching any of them is found and BM25 decides the order.

/// Words that carry no topic in an English question. They are left out of the query because with
/// OR every one of them would match most of the store and only cost time; BM25 would weigh them
/// down anyway. A query made only of such words keeps them, so it still finds something.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "but",
    "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "he", "her", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "was", "we",
    "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// More terms than this only slow the query down without changing which memories rank first.
const MAX_TERMS: usize = 32;

/// The FTS5 query for `text`, or `None` when it holds no words at all.
pub(crate) fn fts_query(text: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    if words.is_empty() {
        return None;
    }
    let topical: Vec<&String> = words.iter().filter(|word| !STOP_WORDS.contains(&word.as_str())).collect();
    let terms = if topical.is_empty() { words.iter().collect() } else { topical };
    // Only letters and digits are left, so no term can contain the quote that would end it.
    let quoted: Vec<String> = terms.iter().take(MAX_TERMS).map(|term| format!("\"{term}\"")).collect();
    Some(quoted.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_become_quoted_alternatives_without_stop_words() {
        assert_eq!(fts_query(r#"What did "Caroline" do in May?"#).as_deref(), Some(r#""caroline" OR "may""#));
    }

    #[test]
    fn operators_and_punctuation_are_neutralised() {
        assert_eq!(
            fts_query("title:foo* AND (bar OR -baz) NEAR/3 \"qux").as_deref(),
            Some(r#""title" OR "foo" OR "bar" OR "baz" OR "near" OR "3" OR "qux""#)
        );
    }

    #[test]
    fn empty_and_punctuation_only_text_gives_no_query() {
        assert_eq!(fts_query(""), None);
        assert_eq!(fts_query("  \t\n"), None);
        assert_eq!(fts_query("?!.\"'()*:^-+"), None);
    }

    #[test]
    fn a_query_of_only_stop_words_keeps_them() {
        assert_eq!(fts_query("What is it?").as_deref(), Some(r#""what" OR "is" OR "it""#));
    }

    #[test]
    fn terms_are_deduplicated_case_insensitively_and_capped() {
        assert_eq!(fts_query("Rust rust RUST").as_deref(), Some(r#""rust""#));
        let long: String = (0..100).map(|n| format!("word{n} ")).collect();
        assert_eq!(fts_query(&long).unwrap().matches(" OR ").count(), MAX_TERMS - 1);
    }

    #[test]
    fn non_ascii_words_survive() {
        assert_eq!(fts_query("Ünïcödé café—naïve").as_deref(), Some(r#""ünïcödé" OR "café" OR "naïve""#));
    }
}
