//! BERT's uncased WordPiece tokenizer, as the `tokenizers` crate runs it for all-MiniLM-L6-v2
//! (a `BertNormalizer` with lowercasing, a `BertPreTokenizer`, a `WordPiece` model), without
//! its offsets, alignments and allocations.
//!
//! The steps, in the order BERT applies them:
//! 1. clean: drop NUL, U+FFFD and control characters; every whitespace character becomes a space;
//! 2. put spaces around CJK ideographs, so that each is a word of its own;
//! 3. strip accents: canonical decomposition (NFD), then drop nonspacing marks;
//! 4. lowercase;
//! 5. split on whitespace, and make every punctuation character a word of its own;
//! 6. WordPiece each word: greedily take the longest vocabulary entry from the start, later
//!    pieces spelled with a `##` prefix; a word with a piece the vocabulary lacks, or longer
//!    than 100 characters, becomes the single token `[UNK]`.
//!
//! The character tables (NFD, the Unicode categories) are the crates `tokenizers` uses, so the
//! two agree on every input; the crate's tests compare them on a varied set of strings. Unlike
//! `tokenizers`, text such as `[CLS]` in the input is not taken for a special token: it is
//! three words, as it should be for text that is embedded rather than fed to a model's prompt.

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

/// The vocabulary lookup WordPiece needs: the id of `prefix` followed by `rest`.
pub(crate) trait Vocabulary {
    fn lookup(&self, prefix: &[u8], rest: &[u8]) -> Option<u32>;
    fn unk_id(&self) -> u32;
    /// The length in bytes of the longest token, its `##` included: WordPiece need not look
    /// up anything longer.
    fn longest_token(&self) -> usize;
}

const CONTINUATION_PREFIX: &[u8] = b"##";
const MAX_CHARS_PER_WORD: usize = 100;

/// Appends the token ids of `text` to `ids`.
pub(crate) fn tokenize(vocabulary: &impl Vocabulary, text: &str, ids: &mut Vec<u32>) {
    let mut words = WordSplitter { vocabulary, word: String::new(), ids };
    if text.is_ascii() {
        // ASCII needs no decomposition and has no accents: the common case takes a short path.
        for byte in text.bytes() {
            if !is_dropped_ascii(byte) {
                words.push(char::from(byte.to_ascii_lowercase()));
            }
        }
    } else {
        let mut cleaned = String::with_capacity(text.len() + 8);
        for c in text.chars() {
            if c == '\0' || c == '\u{fffd}' || is_control(c) {
                continue;
            }
            if is_whitespace(c) {
                cleaned.push(' ');
            } else if is_chinese_char(c) {
                cleaned.extend([' ', c, ' ']);
            } else {
                cleaned.push(c);
            }
        }
        // The decomposition also reports how each character moved, which is not needed here.
        for (c, _) in cleaned.chars().nfd().filter(|(c, _)| !c.is_mark_nonspacing()) {
            for lower in c.to_lowercase() {
                words.push(lower);
            }
        }
    }
    words.finish();
}

/// Collects the characters of one word and hands each finished word to WordPiece.
struct WordSplitter<'a, V> {
    vocabulary: &'a V,
    word: String,
    ids: &'a mut Vec<u32>,
}

impl<V: Vocabulary> WordSplitter<'_, V> {
    fn push(&mut self, c: char) {
        if c.is_whitespace() {
            self.finish();
        } else if c.is_ascii_punctuation() || (!c.is_ascii() && c.is_punctuation()) {
            self.finish();
            self.word.push(c);
            self.finish();
        } else {
            self.word.push(c);
        }
    }

    fn finish(&mut self) {
        if !self.word.is_empty() {
            word_piece(self.vocabulary, &self.word, self.ids);
            self.word.clear();
        }
    }
}

fn word_piece(vocabulary: &impl Vocabulary, word: &str, ids: &mut Vec<u32>) {
    let first_piece = ids.len();
    let bytes = word.as_bytes();
    if word.len() > MAX_CHARS_PER_WORD && word.chars().nth(MAX_CHARS_PER_WORD).is_some() {
        ids.push(vocabulary.unk_id());
        return;
    }
    let mut start = 0;
    while start < bytes.len() {
        let prefix = if start == 0 { &b""[..] } else { CONTINUATION_PREFIX };
        // Longest match first, from the longest piece the vocabulary could hold: without that
        // bound a long word the vocabulary lacks costs a lookup for every one of its lengths.
        let mut end = bytes.len().min(start + vocabulary.longest_token().saturating_sub(prefix.len()));
        while !word.is_char_boundary(end) {
            end -= 1;
        }
        if end <= start {
            ids.truncate(first_piece);
            ids.push(vocabulary.unk_id());
            return;
        }
        let found = loop {
            if let Some(id) = vocabulary.lookup(prefix, &bytes[start..end]) {
                break Some(id);
            }
            // Step back one character, not one byte.
            end = word[..end].char_indices().next_back().map_or(start, |(at, _)| at);
            if end <= start {
                break None;
            }
        };
        match found {
            Some(id) => {
                ids.push(id);
                start = end;
            }
            None => {
                ids.truncate(first_piece);
                ids.push(vocabulary.unk_id());
                return;
            }
        }
    }
}

/// The ASCII bytes cleaning drops: control characters other than tab, newline and carriage
/// return, which count as whitespace. NUL is among them.
fn is_dropped_ascii(byte: u8) -> bool {
    byte.is_ascii_control() && !matches!(byte, b'\t' | b'\n' | b'\r')
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// BERT's "control" characters: the Unicode categories Cc, Cf, Cn, Co and Cs, except tab,
/// newline and carriage return.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// The CJK ideograph blocks BERT splits into single characters (not Hangul, Hiragana or
/// Katakana, which are written with spaces between words).
fn is_chinese_char(c: char) -> bool {
    matches!(
        u32::from(c),
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Words(HashMap<String, u32>);

    impl Vocabulary for Words {
        fn lookup(&self, prefix: &[u8], rest: &[u8]) -> Option<u32> {
            let token = [prefix, rest].concat();
            self.0.get(std::str::from_utf8(&token).ok()?).copied()
        }

        fn unk_id(&self) -> u32 {
            0
        }

        fn longest_token(&self) -> usize {
            self.0.keys().map(String::len).max().unwrap_or(0)
        }
    }

    fn words() -> Words {
        let tokens = ["[UNK]", "un", "##aff", "##able", "play", "##ing", "!", "cafe", "中", "a", "##play"];
        Words(tokens.iter().enumerate().map(|(id, token)| (token.to_string(), id as u32)).collect())
    }

    fn ids(text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        tokenize(&words(), text, &mut ids);
        ids
    }

    #[test]
    fn greedy_longest_match_with_continuation_pieces() {
        assert_eq!(ids("unaffable playing!"), [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn a_word_longer_than_any_token_is_matched_from_the_longest_token_down() {
        assert_eq!(ids("unaffableplay unaffableplaying"), [1, 2, 3, 10, 1, 2, 3, 10, 5]);
    }

    #[test]
    fn a_word_with_an_unknown_piece_is_one_unknown_token() {
        assert_eq!(ids("unaffablex play"), [0, 4]);
    }

    #[test]
    fn accents_case_and_ideographs() {
        assert_eq!(ids("CAFÉ中a"), [7, 8, 9]);
    }

    #[test]
    fn control_characters_vanish_and_whitespace_splits() {
        assert_eq!(ids("pl\u{0}ay\u{b}ing\tplay"), [4, 5, 4]);
    }

    #[test]
    fn words_over_a_hundred_characters_are_unknown() {
        let hundred = "play".repeat(25);
        assert_eq!(ids(&hundred), [[4].as_slice(), &[10; 24]].concat());
        assert_eq!(ids(&format!("{hundred}ing")), [0]);
    }
}
