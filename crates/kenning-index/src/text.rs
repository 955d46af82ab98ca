//! The full-text leg: an inverted index over stemmed words, ranked by BM25.
//!
//! Each term has a postings list of (slot, term frequency) in slot order. A search adds up the
//! BM25 contributions of the query's terms into one score per slot, touching only the postings
//! of those terms, and keeps the best that pass the filter. Dead slots stay in the postings
//! until the index is rebuilt; they are skipped, and left out of document frequencies, so
//! that scores do not depend on a memory's edit history.

use crate::analyzer::{Analyzer, for_each_word};
use crate::docs::{CompiledFilter, DocTable, FastMap, Slot};
use crate::topk::TopK;

/// BM25's term-frequency saturation and length normalisation, at the usual values (those of
/// SQLite FTS5 and Lucene).
const K1: f32 = 1.2;
const B: f32 = 0.75;

type TermId = u32;

#[derive(Default)]
struct Postings {
    slots: Vec<Slot>,
    /// Occurrences in the document, saturated at 255: BM25 hardly distinguishes beyond that.
    counts: Vec<u8>,
}

#[derive(Default)]
pub(crate) struct TextIndex {
    analyzer: Analyzer,
    /// Folded words seen so far and the term (stem) each belongs to, so that every distinct
    /// word is stemmed once rather than at every occurrence.
    words: FastMap<Box<str>, TermId>,
    stems: FastMap<Box<str>, TermId>,
    postings: Vec<Postings>,
    /// Words per slot; zero for a dead slot.
    lengths: Vec<u32>,
    live_words: u64,
    live_docs: u32,
}

impl TextIndex {
    /// Indexes the text of a new slot; slots arrive in increasing order.
    pub fn add(&mut self, slot: Slot, text: &str) {
        debug_assert_eq!(slot as usize, self.lengths.len(), "slots are added in order");
        let mut counts: FastMap<TermId, u32> = FastMap::default();
        let mut length = 0u32;
        for_each_word(text, |word| {
            let term = self.term_of(word);
            *counts.entry(term).or_default() += 1;
            length += 1;
        });
        let mut terms: Vec<(TermId, u32)> = counts.into_iter().collect();
        terms.sort_unstable();
        for (term, count) in terms {
            let postings = &mut self.postings[term as usize];
            postings.slots.push(slot);
            postings.counts.push(u8::try_from(count).unwrap_or(u8::MAX));
        }
        self.lengths.push(length);
        self.live_words += u64::from(length);
        self.live_docs += 1;
    }

    pub fn remove(&mut self, slot: Slot) {
        let length = std::mem::take(&mut self.lengths[slot as usize]);
        self.live_words -= u64::from(length);
        self.live_docs -= 1;
    }

    fn term_of(&mut self, word: &str) -> TermId {
        if let Some(term) = self.words.get(word) {
            return *term;
        }
        let stem = self.analyzer.stem(word);
        let term = match self.stems.get(stem.as_str()) {
            Some(term) => *term,
            None => {
                let term = TermId::try_from(self.postings.len()).expect("fewer than four billion terms");
                self.postings.push(Postings::default());
                self.stems.insert(stem.into_boxed_str(), term);
                term
            }
        };
        self.words.insert(word.into(), term);
        term
    }

    /// The `limit` best slots for `query` among those `filter` admits, best first, with their
    /// BM25 scores. Slots with equal scores come in id order.
    pub fn search(&self, query: &str, docs: &DocTable, filter: &CompiledFilter, limit: usize) -> Vec<(f64, Slot)> {
        if limit == 0 || self.live_docs == 0 {
            return Vec::new();
        }
        let terms: Vec<&Postings> = self
            .analyzer
            .query_terms(query)
            .iter()
            .filter_map(|term| self.stems.get(term.as_str()))
            .map(|term| &self.postings[*term as usize])
            .collect();
        if terms.is_empty() {
            return Vec::new();
        }
        let has_dead = docs.dead_count() > 0;
        let documents = self.live_docs as f32;
        let mean_length = (self.live_words as f32 / documents).max(1.0);
        let mut scores = vec![0f32; self.lengths.len()];
        let mut touched: Vec<Slot> = Vec::new();
        for postings in terms {
            let frequency = if has_dead {
                postings.slots.iter().filter(|slot| self.lengths[**slot as usize] > 0).count()
            } else {
                postings.slots.len()
            } as f32;
            if frequency == 0.0 {
                continue;
            }
            // The Lucene form of IDF, which stays positive for terms in most documents.
            let idf = (1.0 + (documents - frequency + 0.5) / (frequency + 0.5)).ln();
            for (slot, count) in postings.slots.iter().zip(&postings.counts) {
                let length = self.lengths[*slot as usize];
                if length == 0 {
                    continue;
                }
                let tf = f32::from(*count);
                let norm = K1 * (1.0 - B + B * length as f32 / mean_length);
                let score = &mut scores[*slot as usize];
                if *score == 0.0 {
                    touched.push(*slot);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut best = TopK::new(limit);
        for slot in touched {
            let score = f64::from(scores[slot as usize]);
            if best.admits(score)
                && let Some(meta) = filter.admit(docs, slot)
            {
                best.push(score, slot, &meta.id);
            }
        }
        best.into_sorted()
    }
}
