//! The parts of a compound question: "why was X turned off, and what later allowed it to be
//! turned back on?" asks two things, and the memories that answer each rarely share the other's
//! words. Recall searches each part that can stand on its own besides the whole question.

/// Words that open a question of their own after "and" or after a question mark, colon or
/// semicolon ("…, and why …", "…? What …", "…: what …").
const OPENERS: &[&str] = &[
    "why", "what", "which", "when", "where", "who", "whom", "whose", "how", "in", "did", "does", "do", "is", "was", "were", "are", "can",
    "could", "has", "have", "had",
];

/// Words that carry no subject of their own: function words and question words.
const FUNCTION_WORDS: &[&str] = &[
    "the", "and", "but", "for", "nor", "that", "this", "these", "those", "with", "you", "your", "was", "were", "are", "has", "have", "had",
    "not", "its", "they", "them", "their", "she", "her", "him", "his", "our", "what", "who", "whom", "whose", "how", "why", "when", "where",
    "which", "did", "does", "can", "could", "will", "would", "should", "about", "from", "into", "there", "then", "than", "been", "being",
    "any", "all", "each", "also", "just", "more", "most", "get", "got",
];

/// The fewest subject words (three letters or more, not a function word) a part needs to be
/// searched on its own. A part such as "and in which release was it fixed" or "and how was it
/// fixed" leans on the rest of the question for its subject: searched alone, it would find any
/// memory that mentions a release or a fix.
pub const LEAST_SUBJECT_WORDS: usize = 3;

/// The parts of `question` that ask something of their own, in order, when it asks two things
/// or more; empty when it asks one, or when fewer than two of its parts stand on their own.
///
/// A question is cut before an "and" that opens a new question ("…, and why …") and after a
/// question mark, colon or semicolon followed by a word that opens one ("…? What …"). A bare
/// "and" between names ("What did Caroline and Melanie paint?") does not cut.
pub fn question_parts(question: &str) -> Vec<String> {
    let words: Vec<&str> = question.split_whitespace().collect();
    let opens_question = |position: usize| words.get(position).is_some_and(|word| OPENERS.contains(&bare(word).as_str()));
    let mut parts: Vec<Vec<&str>> = vec![Vec::new()];
    for (position, word) in words.iter().enumerate() {
        if bare(word) == "and" && opens_question(position + 1) && !parts.last().is_some_and(Vec::is_empty) {
            parts.push(Vec::new());
            continue;
        }
        parts.last_mut().expect("parts start with one").push(word);
        if word.ends_with(['?', ':', ';']) && opens_question(position + 1) {
            parts.push(Vec::new());
        }
    }
    let parts: Vec<String> = parts
        .into_iter()
        .map(|words| words.join(" ").trim_end_matches([',', '?', ':', ';']).trim().to_owned())
        .filter(|part| subject_words(part) >= LEAST_SUBJECT_WORDS)
        .collect();
    if parts.len() < 2 { Vec::new() } else { parts }
}

/// How many words of `text` name something: three letters or more, not a function word.
fn subject_words(text: &str) -> usize {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '-' | '_')))
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() >= 3 && !FUNCTION_WORDS.contains(&word.as_str()))
        .count()
}

/// A word in lower case without the punctuation around it.
fn bare(word: &str) -> String {
    word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::question_parts;

    #[test]
    fn a_compound_question_is_cut_where_a_new_question_opens() {
        let cases: &[(&str, &[&str])] = &[
            (
                "Why was memory-mapped searching turned off on 32-bit targets, and what later allowed it to be turned back on?",
                &["Why was memory-mapped searching turned off on 32-bit targets", "what later allowed it to be turned back on"],
            ),
            (
                "what did we decide about the auth flow and why did the first attempt fail",
                &["what did we decide about the auth flow", "why did the first attempt fail"],
            ),
            (
                "Which services did the outage touch? What did the postmortem change in the deploy pipeline?",
                &["Which services did the outage touch", "What did the postmortem change in the deploy pipeline"],
            ),
            (
                "How does the ignore crate find the global excludes file: what did the fix for quoted core.excludesFile values change, and what did GIT_CONFIG_GLOBAL support add?",
                &[
                    "How does the ignore crate find the global excludes file",
                    "what did the fix for quoted core.excludesFile values change",
                    "what did GIT_CONFIG_GLOBAL support add",
                ],
            ),
        ];
        for (question, parts) in cases {
            assert_eq!(question_parts(question), *parts, "{question}");
        }
    }

    #[test]
    fn a_question_that_asks_one_thing_has_no_parts() {
        for question in [
            "What did Caroline and Melanie both paint?",
            "Which port does the staging database listen on?",
            "and why",
            "Why was the cache added and removed?",
            "",
        ] {
            assert!(question_parts(question).is_empty(), "{question}: {:?}", question_parts(question));
        }
    }

    /// A part that takes its subject from the rest of the question ("it", "that") is not
    /// searched alone: it would find any memory mentioning a release or a fix.
    #[test]
    fn a_part_without_a_subject_of_its_own_is_left_to_the_whole_question() {
        assert!(question_parts("What caused the --line-buffered regression, and in which release was it fixed?").is_empty());
        assert!(question_parts("What caused the --line-buffered regression, and how was it fixed?").is_empty());
        assert_eq!(
            question_parts("What was the multi-root parent gitignore matching bug, how was it fixed, and what tests were added afterwards?"),
            ["What was the multi-root parent gitignore matching bug, how was it fixed", "what tests were added afterwards"],
        );
    }
}
