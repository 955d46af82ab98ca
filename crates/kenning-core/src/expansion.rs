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
//! With a language model, [`rewrite_request`] asks it for other words for the same search, the
//! questions a query needing several notes is made of, or both, and [`parse_rewrite`] reads its
//! answer strictly; the engine adds the terms to the same leg and searches each part as it
//! searches the parts of a compound question.

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

/// The most parts a model may split one query into: each is one more search.
pub const MAX_MODEL_PARTS: usize = 4;
/// The longest part kept, in bytes: a part is a question, not a paragraph.
const MAX_PART_BYTES: usize = 300;

/// What recall asks a model about a query: other terms for it, the questions it is made of, or
/// both in one request; by default nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RewriteAsk {
    pub terms: bool,
    pub parts: bool,
}

/// A model's reading of a query: other terms for its words, and the questions it is made of
/// (empty when it asks one thing, or when that was not asked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrite {
    pub terms: Vec<String>,
    pub parts: Vec<String>,
}

/// The request asking a model what `ask` names about `query`, answered as one JSON object.
pub fn rewrite_request(query: &str, ask: RewriteAsk) -> CompletionRequest {
    let mut instructions = vec!["You help a coding agent search its memory of a software project, where each note records one fact, decision or event.".to_owned()];
    let mut fields = Vec::new();
    if ask.terms {
        instructions.push(
            "Under \"terms\", give up to 8 other words or short phrases a note answering the query might use instead: \
             synonyms, expansions of abbreviations, the names of the tools or concepts meant."
                .to_owned(),
        );
        fields.push("\"terms\": [\"...\"]");
    }
    if ask.parts {
        instructions.push(format!(
            "Under \"parts\", when answering the query needs several notes (it asks two things, a cause and its fix, a \
             comparison, or everything of a kind across occasions), give the questions each of which one note answers, \
             2 to {MAX_MODEL_PARTS}, each complete on its own (name the subject instead of \"it\"); when one note can answer it, \
             give an empty list."
        ));
        fields.push("\"parts\": [\"...\"]");
    }
    instructions.push(format!("Answer with one JSON object only: {{{}}}.", fields.join(", ")));
    CompletionRequest {
        system: Some(instructions.join(" ")),
        messages: vec![Message::user(format!("Query: {query}"))],
        max_tokens: if ask.parts { 400 } else { 200 },
        temperature: Some(0.0),
        json: true,
    }
}

/// Reads a model's answer to [`rewrite_request`]: a JSON object with the lists `ask` names,
/// possibly inside a fenced code block. Terms already in the query, empty ones and repeats are
/// dropped, and at most [`MAX_EXPANSION_TERMS`] kept. A part must have two words or more, at
/// most [`MAX_PART_BYTES`] bytes, and differ from the query and the parts before it; at most
/// [`MAX_MODEL_PARTS`] are kept, and a single part is no split at all. `None` when the answer
/// has none of the lists asked for.
pub fn parse_rewrite(query: &str, answer: &str, ask: RewriteAsk) -> Option<Rewrite> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    let value: serde_json::Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    let list = |name: &str| value.get(name).and_then(serde_json::Value::as_array).map(|items| items.iter().filter_map(serde_json::Value::as_str));
    let terms = list("terms").filter(|_| ask.terms);
    let parts = list("parts").filter(|_| ask.parts);
    if terms.is_none() && parts.is_none() {
        return None;
    }
    let query_words = words(query);
    let query_set: BTreeSet<&String> = query_words.iter().collect();
    let mut rewrite = Rewrite::default();
    for term in terms.into_iter().flatten() {
        let term_words = words(term);
        if term_words.is_empty() || term_words.iter().all(|word| query_set.contains(word)) {
            continue;
        }
        let text = term_words.join(" ");
        if !rewrite.terms.contains(&text) && rewrite.terms.len() < MAX_EXPANSION_TERMS {
            rewrite.terms.push(text);
        }
    }
    let mut seen: Vec<Vec<String>> = vec![query_words.clone()];
    for part in parts.into_iter().flatten() {
        let part = part.trim();
        let part_words = words(part);
        if part_words.len() < 2 || part.len() > MAX_PART_BYTES || seen.contains(&part_words) {
            continue;
        }
        seen.push(part_words);
        if rewrite.parts.len() < MAX_MODEL_PARTS {
            rewrite.parts.push(part.to_owned());
        }
    }
    if rewrite.parts.len() < 2 {
        rewrite.parts.clear();
    }
    Some(rewrite)
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

    const TERMS: RewriteAsk = RewriteAsk { terms: true, parts: false };
    const PARTS: RewriteAsk = RewriteAsk { terms: false, parts: true };

    #[test]
    fn a_model_rewrite_is_read_strictly() {
        let query = "db timeout";
        let terms = |answer: &str| parse_rewrite(query, answer, TERMS).map(|rewrite| rewrite.terms);
        assert_eq!(terms(r#"{"terms": ["database", "DB", "connection pool", "", 7]}"#), Some(vec!["database".to_owned(), "connection pool".to_owned()]));
        assert_eq!(terms("```json\n{\"terms\": [\"statement timeout\"]}\n```"), Some(vec!["statement timeout".to_owned()]));
        assert_eq!(terms("I think you mean database."), None);
        assert_eq!(terms(r#"{"words": ["database"]}"#), None);
        let many = format!("{{\"terms\": [{}]}}", (0..30).map(|n| format!("\"term{n}\"")).collect::<Vec<_>>().join(","));
        assert_eq!(terms(&many).unwrap().len(), MAX_EXPANSION_TERMS);
        assert!(rewrite_request(query, TERMS).json);
        assert!(!rewrite_request(query, TERMS).system.unwrap().contains("parts"), "only what is asked for is asked");
    }

    #[test]
    fn a_model_split_keeps_distinct_questions_of_two_words_or_more() {
        let query = "What did we decide about the auth flow, and why did the first attempt fail?";
        let answer = r#"{"parts": ["What did we decide about the auth flow?", "  Why did the first auth flow attempt fail? ",
            "what did we decide about the AUTH flow", "auth", "", 3,
            "what did we decide about the auth flow and why did the first attempt fail"]}"#;
        let rewrite = parse_rewrite(query, answer, PARTS).unwrap();
        assert_eq!(rewrite.parts, ["What did we decide about the auth flow?", "Why did the first auth flow attempt fail?"]);
        assert!(rewrite.terms.is_empty(), "terms were not asked for");

        // One question is no split, and a list of many is cut.
        assert_eq!(parse_rewrite(query, r#"{"parts": ["What did we decide about the auth flow?"]}"#, PARTS), Some(Rewrite::default()));
        assert_eq!(parse_rewrite(query, r#"{"parts": []}"#, PARTS), Some(Rewrite::default()));
        let many = format!("{{\"parts\": [{}]}}", (0..9).map(|n| format!("\"which service broke in outage {n}\"")).collect::<Vec<_>>().join(","));
        assert_eq!(parse_rewrite(query, &many, PARTS).unwrap().parts.len(), MAX_MODEL_PARTS);
        let long = format!("{{\"parts\": [\"{}\", \"why did it fail\", \"what was decided\"]}}", "word ".repeat(100));
        assert_eq!(parse_rewrite(query, &long, PARTS).unwrap().parts, ["why did it fail", "what was decided"]);
        // A list not asked for does not count as an answer.
        assert_eq!(parse_rewrite(query, r#"{"terms": ["authentication"]}"#, PARTS), None);

        let both = RewriteAsk { terms: true, parts: true };
        let rewrite = parse_rewrite(query, r#"{"terms": ["login"], "parts": ["what was decided about login", "why did the first login attempt fail"]}"#, both).unwrap();
        assert_eq!((rewrite.terms.len(), rewrite.parts.len()), (1, 2));
        let system = rewrite_request(query, both).system.unwrap();
        assert!(system.contains(r#"{"terms": ["..."], "parts": ["..."]}"#), "{system}");
    }
}
