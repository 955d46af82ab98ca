//! The relevance floor: a prompt gets memories only when it says something (at least two
//! content words: nothing on "thanks" or "ok, go ahead") and only memories that clear the floor.
//!
//! Recall's fused scores are scaled within one response, so the best hit of any query scores
//! high; a fused score alone cannot tell a real match from the best of nothing. A hit therefore
//! passes when it scores at least [`RELEVANCE_FLOOR`] *and* shares a content word with the
//! prompt (compared by their first [`STEM_CHARS`] characters, so "deploying" meets "deployment").

use kenning_engine::RecallRequest;

use crate::context::{ContextBlock, MAX_TEXT_CHARS, Resource, bounded};
use crate::{Error, Hooks};

/// The least fused score a memory needs to be offered unasked.
pub const RELEVANCE_FLOOR: f64 = 0.4;
/// The fewest content words a prompt needs before memories are looked up for it.
pub const MIN_CONTENT_WORDS: usize = 2;
/// Characters compared when matching words, a crude stemmer.
const STEM_CHARS: usize = 5;
/// The most of a prompt used as a query: a pasted log says what it is about early on.
const MAX_QUERY_CHARS: usize = 2000;
/// The most memories one hook offers.
const MAX_RESULTS: usize = 6;

/// Words that carry no topic: pleasantries, confirmations and function words.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "ahead", "all", "also", "am", "an", "and", "any", "are", "as", "at", "awesome", "be",
    "because", "been", "but", "by", "can", "cheers", "cool", "could", "did", "do", "does", "done", "for", "from", "go",
    "good", "got", "great", "had", "has", "have", "hello", "hey", "hi", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "let", "lgtm", "like", "look", "looks", "make", "me", "more", "much", "my", "nice", "no", "nope", "not",
    "now", "of", "ok", "okay", "on", "one", "or", "our", "perfect", "please", "proceed", "right", "so", "some", "sounds",
    "sure", "thank", "thanks", "that", "the", "then", "there", "these", "this", "those", "thx", "to", "too", "try", "ty",
    "up", "us", "very", "want", "was", "we", "well", "were", "what", "when", "where", "which", "who", "why", "will",
    "with", "would", "yeah", "yep", "yes", "you", "your", "continue", "keep", "going", "still", "next", "work", "fine",
];

/// The topic words of a text, lower-cased, in order, without repeats.
pub fn content_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| word.chars().count() >= 3) {
        let word = word.to_lowercase();
        if !STOP_WORDS.contains(&word.as_str()) && !word.chars().all(|c| c.is_ascii_digit()) && !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

fn stem(word: &str) -> &str {
    match word.char_indices().nth(STEM_CHARS) {
        Some((index, _)) => &word[..index],
        None => word,
    }
}

/// Whether `text` holds a word that starts like one of `words`.
pub fn shares_a_word(words: &[String], text: &str) -> bool {
    let stems: Vec<&str> = words.iter().map(|word| stem(word)).collect();
    content_words(text).iter().any(|candidate| stems.contains(&stem(candidate)))
}

/// Memories relevant to a prompt, above the floor, as a context block.
pub fn user_prompt(hooks: &Hooks, prompt: &str) -> Result<Option<String>, Error> {
    let note = "Memories kenning found relevant to this prompt (by relevance; read them with memory_get).";
    recall_block(hooks, prompt, Vec::new(), note, hooks.budgets.user_prompt)
}

/// Recalls `query` (restricted to `namespaces` when given) and keeps the hits above the floor.
pub(crate) fn recall_block(
    hooks: &Hooks,
    query: &str,
    namespaces: Vec<String>,
    note: &str,
    max_tokens: usize,
) -> Result<Option<String>, Error> {
    let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
    let words = content_words(&query);
    if words.len() < MIN_CONTENT_WORDS {
        return Ok(None);
    }
    // The whole text comes back (the block cuts each to its bound), and the page is not cut to
    // the budget here: the block decides what fits, giving the last memory what room is left.
    let page = hooks.memory.recall(RecallRequest {
        query: words.join(" "),
        limit: Some(MAX_RESULTS),
        max_tokens: Some(MAX_RESULTS * MAX_TEXT_CHARS),
        detail: Some("full".into()),
        namespaces,
        ..RecallRequest::default()
    })?;
    let resources: Vec<Resource> = page
        .results
        .into_iter()
        .filter(|hit| hit.score >= RELEVANCE_FLOOR)
        .filter(|hit| {
            let text = format!("{} {} {}", hit.title, hit.tags.join(" "), hit.content.as_deref().unwrap_or_default());
            shares_a_word(&words, &text)
        })
        .map(|hit| Resource {
            uri: hit.urn,
            namespace: hit.namespace,
            summary: hit.title,
            timestamp: hit.occurred_at,
            relevance: Some(hit.score),
            text: hit.content.map(|content| bounded(&content, MAX_TEXT_CHARS)),
            detail: None,
        })
        .collect();
    let block = ContextBlock { project: hooks.project.clone(), note: Some(note.to_owned()), warnings: Vec::new(), resources };
    Ok(block.render(max_tokens))
}
