//! Query expansion: the other names of what a query names, so that "db migration" also finds the
//! note that says "database migration" and "k8s" the one that says "Kubernetes".
//!
//! A [`Vocabulary`] is a list of groups of terms that mean the same thing; a term is one or more
//! words. The built-in groups ([`BUILT_IN_SYNONYMS`]) are the abbreviations and alternative
//! names common in software work; a project adds its own (`[recall] synonyms` in kenning.toml:
//! service nicknames, product names, team jargon). [`Vocabulary::expand`] finds every term of a
//! group in the query, as whole words, and returns the group's other terms. Recall searches them
//! as a separate, lighter full-text leg, so they widen what is found without outweighing the
//! words the caller chose.
//!
//! With a language model, [`rewrite_request`] asks it for other words for the same search and
//! [`parse_rewrite`] reads its answer strictly; the engine adds those terms to the same leg.

use std::collections::BTreeSet;

use crate::llm::{CompletionRequest, Message};

/// Groups of terms that mean the same in software work.
const BUILT_IN_SYNONYMS: &[&[&str]] = &[
    &["db", "database"],
    &["pg", "postgres", "postgresql"],
    &["mongo", "mongodb"],
    &["k8s", "kubernetes"],
    &["repo", "repository"],
    &["config", "configuration"],
    &["auth", "authentication"],
    &["authz", "authorization"],
    &["env", "environment"],
    &["deps", "dependencies"],
    &["ci", "continuous integration"],
    &["pr", "pull request"],
    &["mr", "merge request"],
    &["js", "javascript"],
    &["ts", "typescript"],
    &["py", "python"],
    &["perf", "performance"],
    &["err", "error"],
    &["msg", "message"],
    &["fn", "function"],
    &["impl", "implementation"],
    &["dir", "directory", "folder"],
    &["docs", "documentation"],
    &["prod", "production"],
    &["async", "asynchronous"],
    &["tz", "timezone"],
    &["ui", "user interface"],
    &["cli", "command line"],
    &["gh", "github"],
    &["e2e", "end to end"],
    &["oom", "out of memory"],
    &["tls", "ssl"],
    &["segfault", "segmentation fault"],
    &["regex", "regular expression"],
    &["i18n", "internationalization"],
    &["l10n", "localization"],
    &["vm", "virtual machine"],
    &["os", "operating system"],
    &["dns", "domain name"],
    &["jwt", "json web token"],
    &["cve", "vulnerability"],
];

/// The most terms one query is expanded by.
pub const MAX_EXPANSION_TERMS: usize = 12;

/// Groups of equivalent terms, each term stored as its lower-cased words.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vocabulary {
    groups: Vec<Vec<Vec<String>>>,
}

impl Vocabulary {
    /// The built-in groups.
    pub fn built_in() -> Vocabulary {
        let mut vocabulary = Vocabulary::default();
        for group in BUILT_IN_SYNONYMS {
            vocabulary.add_group(group.iter().copied());
        }
        vocabulary
    }

    /// Adds a group of terms that mean the same; terms with no word are ignored, and a group of
    /// fewer than two terms adds nothing.
    pub fn add_group<S: AsRef<str>>(&mut self, terms: impl IntoIterator<Item = S>) {
        let group: Vec<Vec<String>> = terms.into_iter().map(|term| words(term.as_ref())).filter(|term| !term.is_empty()).collect();
        if group.len() >= 2 {
            self.groups.push(group);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups: each a list of terms, each term its lower-cased words.
    pub fn groups(&self) -> &[Vec<Vec<String>>] {
        &self.groups
    }

    /// The terms of every group the query names, except those it already contains, in group
    /// order, at most [`MAX_EXPANSION_TERMS`].
    pub fn expand(&self, query: &str) -> Vec<String> {
        let query_words = words(query);
        let mut added: Vec<String> = Vec::new();
        for group in &self.groups {
            if !group.iter().any(|term| contains_phrase(&query_words, term)) {
                continue;
            }
            for term in group.iter().filter(|term| !contains_phrase(&query_words, term)) {
                let text = term.join(" ");
                if !added.contains(&text) && added.len() < MAX_EXPANSION_TERMS {
                    added.push(text);
                }
            }
        }
        added
    }
}

/// Lower-cased words: letters and digits, split on anything else.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(str::to_lowercase).collect()
}

fn contains_phrase(words: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && words.windows(phrase.len()).any(|window| window == phrase)
}

/// The request asking a model for other search terms for `query`.
pub fn rewrite_request(query: &str) -> CompletionRequest {
    CompletionRequest {
        system: Some(
            "You help a coding agent search its memory of a software project. Given a search query, give up to 8 other \
             words or short phrases a note answering it might use instead: synonyms, expansions of abbreviations, the \
             names of the tools or concepts meant. Answer with one JSON object only: {\"terms\": [\"...\"]}."
                .to_owned(),
        ),
        messages: vec![Message::user(format!("Query: {query}"))],
        max_tokens: 200,
        temperature: Some(0.0),
        json: true,
    }
}

/// Reads a model's answer to [`rewrite_request`]: a JSON object with a `terms` list of strings,
/// possibly inside a fenced code block. Terms already in the query, empty ones and repeats are
/// dropped; at most [`MAX_EXPANSION_TERMS`] are kept. `None` when the answer has no such list.
pub fn parse_rewrite(query: &str, answer: &str) -> Option<Vec<String>> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    let value: serde_json::Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    let terms = value.get("terms")?.as_array()?;
    let query_words: BTreeSet<String> = words(query).into_iter().collect();
    let mut kept: Vec<String> = Vec::new();
    for term in terms.iter().filter_map(serde_json::Value::as_str) {
        let term_words = words(term);
        if term_words.is_empty() || term_words.iter().all(|word| query_words.contains(word)) {
            continue;
        }
        let text = term_words.join(" ");
        if !kept.contains(&text) && kept.len() < MAX_EXPANSION_TERMS {
            kept.push(text);
        }
    }
    Some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviations_and_full_names_expand_both_ways() {
        let vocabulary = Vocabulary::built_in();
        let cases: &[(&str, &[&str])] = &[
            ("db migration failed", &["database"]),
            ("Database migration failed", &["db"]),
            ("k8s pod restarts", &["kubernetes"]),
            ("why did the pull request stall", &["pr"]),
            ("postgres vacuum", &["pg", "postgresql"]),
            ("e2e tests flaky", &["end to end"]),
            ("the end to end suite", &["e2e"]),
            ("what did Caroline say about her painting", &[]),
            ("pending migrations", &[]),
        ];
        for (query, expected) in cases {
            assert_eq!(vocabulary.expand(query), *expected, "{query}");
        }
    }

    #[test]
    fn a_project_adds_its_own_groups() {
        let mut vocabulary = Vocabulary::built_in();
        vocabulary.add_group(["ledger", "billing-service", "the money pipe"]);
        vocabulary.add_group(["lonely"]);
        assert_eq!(vocabulary.expand("ledger outage"), ["billing service", "the money pipe"]);
        assert_eq!(vocabulary.expand("why is the billing-service slow"), ["ledger", "the money pipe"]);
    }

    #[test]
    fn a_model_rewrite_is_read_strictly() {
        let query = "db timeout";
        assert_eq!(parse_rewrite(query, r#"{"terms": ["database", "DB", "connection pool", "", 7]}"#), Some(vec!["database".to_owned(), "connection pool".to_owned()]));
        assert_eq!(parse_rewrite(query, "```json\n{\"terms\": [\"statement timeout\"]}\n```"), Some(vec!["statement timeout".to_owned()]));
        assert_eq!(parse_rewrite(query, "I think you mean database."), None);
        assert_eq!(parse_rewrite(query, r#"{"words": ["database"]}"#), None);
        let many = format!("{{\"terms\": [{}]}}", (0..30).map(|n| format!("\"term{n}\"")).collect::<Vec<_>>().join(","));
        assert_eq!(parse_rewrite(query, &many).unwrap().len(), MAX_EXPANSION_TERMS);
        assert!(rewrite_request(query).json);
    }
}
