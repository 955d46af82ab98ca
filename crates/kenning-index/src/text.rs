//! The full-text leg: an inverted index over stemmed words, ranked by BM25.
//!
//! Each term has a postings list of (slot, term frequency) in slot order: the part read in place
//! from a persisted image, if any, then the part added in memory since. A search adds up the
//! BM25 contributions of the query's terms into one score per slot, touching only the postings
//! of those terms, and keeps the best that pass the filter. Dead slots stay in the postings
//! until the index is rebuilt; they are skipped, and left out of document frequencies, so
//! that scores do not depend on a memory's edit history.

use std::io::{self, Seek, Write};

use crate::analyzer::{Analyzer, for_each_word};
use crate::column::Column;
use crate::documents::{CompiledFilter, DocTable, FastMap, Slot};
use crate::image::{ImageError, ImageReader, ImageWriter, invalid};
use crate::topk::TopK;

thread_local! {
    /// Each thread's score of every document for the text search it runs, all zeros between
    /// searches: a search resets the documents it met, rather than making and zeroing a buffer
    /// the size of the index (4 MB at a million memories) for every query.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// BM25's term-frequency saturation and length normalisation, at the usual values (those of
/// SQLite FTS5 and Lucene).
const K1: f32 = 1.2;
const B: f32 = 0.75;

type TermId = u32;

/// Postings added in memory: (slot, term frequency) in slot order.
#[derive(Default)]
struct Postings {
    slots: Vec<Slot>,
    /// Occurrences in the document, saturated at 255: BM25 hardly distinguishes beyond that.
    counts: Vec<u8>,
}

/// The terms and postings read from an image, in place. Term `t`'s postings are
/// `slots[offsets[t]..offsets[t + 1]]`; the stems are sorted, so a query term is found by
/// binary search, and `stem_terms` gives each one's term.
#[derive(Default)]
struct BaseTerms {
    stem_ends: Column<u64>,
    stem_bytes: Column<u8>,
    stem_terms: Column<u32>,
    offsets: Column<u64>,
    slots: Column<Slot>,
    counts: Column<u8>,
}

impl BaseTerms {
    fn term_count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    fn find(&self, stem: &str) -> Option<TermId> {
        let (ends, bytes) = (self.stem_ends.as_slice(), self.stem_bytes.as_slice());
        let stem_at = |index: usize| {
            let start = if index == 0 { 0 } else { ends[index - 1] as usize };
            bytes.get(start..ends[index] as usize).unwrap_or_default()
        };
        let position = binary_search_by(ends.len(), |index| stem_at(index).cmp(stem.as_bytes()))?;
        self.stem_terms.get(position)
    }

    fn postings(&self, term: TermId) -> (&[Slot], &[u8]) {
        let offsets = self.offsets.as_slice();
        let range = offsets.get(term as usize).zip(offsets.get(term as usize + 1)).map(|(start, end)| *start as usize..*end as usize);
        match range {
            Some(range) => (
                self.slots.as_slice().get(range.clone()).unwrap_or_default(),
                self.counts.as_slice().get(range).unwrap_or_default(),
            ),
            None => (&[], &[]),
        }
    }
}

fn binary_search_by(len: usize, compare: impl Fn(usize) -> std::cmp::Ordering) -> Option<usize> {
    let (mut low, mut high) = (0, len);
    while low < high {
        let middle = low + (high - low) / 2;
        match compare(middle) {
            std::cmp::Ordering::Less => low = middle + 1,
            std::cmp::Ordering::Greater => high = middle,
            std::cmp::Ordering::Equal => return Some(middle),
        }
    }
    None
}

#[derive(Default)]
pub(crate) struct TextIndex {
    analyzer: Analyzer,
    /// Folded words seen so far and the term (stem) each belongs to, so that every distinct
    /// word is stemmed once rather than at every occurrence.
    words: FastMap<Box<str>, TermId>,
    /// Stems added in memory; those read from an image are in `base`.
    stems: FastMap<Box<str>, TermId>,
    base: BaseTerms,
    /// Postings added in memory, by term, after the term's postings in `base`.
    postings: Vec<Postings>,
    term_count: u32,
    /// Words per slot; zero for a dead slot.
    lengths: Column<u32>,
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
            if self.postings.len() <= term as usize {
                self.postings.resize_with(term as usize + 1, Postings::default);
            }
            let postings = &mut self.postings[term as usize];
            postings.slots.push(slot);
            postings.counts.push(u8::try_from(count).unwrap_or(u8::MAX));
        }
        self.lengths.push(length);
        self.live_words += u64::from(length);
        self.live_docs += 1;
    }

    pub fn remove(&mut self, slot: Slot) {
        let length = self.lengths.get(slot as usize).unwrap_or_default();
        self.lengths.set(slot as usize, 0);
        self.live_words = self.live_words.saturating_sub(u64::from(length));
        self.live_docs = self.live_docs.saturating_sub(1);
    }

    fn term_of(&mut self, word: &str) -> TermId {
        if let Some(term) = self.words.get(word) {
            return *term;
        }
        let stem = self.analyzer.stem(word);
        let term = match self.stems.get(stem.as_str()).copied().or_else(|| self.base.find(&stem)) {
            Some(term) => term,
            None => {
                let term = self.term_count;
                self.term_count += 1;
                self.stems.insert(stem.into_boxed_str(), term);
                term
            }
        };
        self.words.insert(word.into(), term);
        term
    }

    fn find(&self, stem: &str) -> Option<TermId> {
        self.stems.get(stem).copied().or_else(|| self.base.find(stem))
    }

    /// The postings of `term`: those read from the image, then those added since.
    fn postings(&self, term: TermId) -> [(&[Slot], &[u8]); 2] {
        let added = self.postings.get(term as usize).map_or((&[][..], &[][..]), |postings| (&postings.slots[..], &postings.counts[..]));
        [self.base.postings(term), added]
    }

    /// The `limit` best slots for `query` among those `filter` admits, best first, with their
    /// BM25 scores. Slots with equal scores come in id order.
    pub fn search(&self, query: &str, docs: &DocTable, filter: &CompiledFilter<'_>, limit: usize) -> Vec<(f64, Slot)> {
        if limit == 0 || self.live_docs == 0 {
            return Vec::new();
        }
        let terms: Vec<[(&[Slot], &[u8]); 2]> =
            self.analyzer.query_terms(query).iter().filter_map(|term| self.find(term)).map(|term| self.postings(term)).collect();
        if terms.is_empty() {
            return Vec::new();
        }
        let lengths = self.lengths.as_slice();
        let has_dead = docs.dead_count() > 0;
        let documents = self.live_docs as f32;
        let mean_length = (self.live_words as f32 / documents).max(1.0);
        SCORES.with_borrow_mut(|scores| {
            if scores.len() < lengths.len() {
                scores.resize(lengths.len(), 0.0);
            }
            let touched = self.accumulate(&terms, lengths, has_dead, documents, mean_length, scores);
            let mut best = TopK::new(limit);
            for slot in touched {
                // Read and reset in one pass, so the buffer is all zeros for the next search.
                let score = f64::from(std::mem::take(&mut scores[slot as usize]));
                if best.admits(score)
                    && let Some(id) = filter.admit_id(slot)
                {
                    best.push(score, slot, id);
                }
            }
            best.into_sorted()
        })
    }

    /// Adds each document's BM25 score for `terms` to `scores` (zero where no term was met) and
    /// returns the documents met.
    fn accumulate(&self, terms: &[[(&[Slot], &[u8]); 2]], lengths: &[u32], has_dead: bool, documents: f32, mean_length: f32, scores: &mut [f32]) -> Vec<Slot> {
        // Room for every posting, so that a document met for the first time is noted without a
        // branch: whether a document was met before is as good as random, and a mispredicted
        // branch per posting cost more than writing every slot and keeping the new ones.
        let postings: usize = terms.iter().flat_map(|parts| parts.iter()).map(|(slots, _)| slots.len()).sum();
        let mut touched: Vec<Slot> = vec![0; postings];
        let mut met = 0;
        for parts in terms {
            // A called-off search returns what it has; the caller sees the interrupt and drops it.
            if kenning_core::interrupt::interrupted() {
                break;
            }
            let frequency = if has_dead {
                parts.iter().flat_map(|(slots, _)| slots.iter()).filter(|slot| lengths.get(**slot as usize).is_some_and(|length| *length > 0)).count()
            } else {
                parts.iter().map(|(slots, _)| slots.len()).sum()
            } as f32;
            if frequency == 0.0 {
                continue;
            }
            // The Lucene form of IDF, which stays positive for terms in most documents.
            let idf = (1.0 + (documents - frequency + 0.5) / (frequency + 0.5)).ln();
            for (slots, counts) in parts {
                for (slot, count) in slots.iter().zip(counts.iter()) {
                    // A slot past the table (only in an image damaged since it was written) counts
                    // as a dead one, so the postings need not all be read when an image is opened.
                    let length = lengths.get(*slot as usize).copied().unwrap_or_default();
                    if length == 0 {
                        continue;
                    }
                    let tf = f32::from(*count);
                    let norm = K1 * (1.0 - B + B * length as f32 / mean_length);
                    let score = &mut scores[*slot as usize];
                    // Every contribution is positive, so a score of zero means not met yet.
                    touched[met] = *slot;
                    met += usize::from(*score == 0.0);
                    *score += idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        touched.truncate(met);
        touched
    }

    pub fn write<W: Write + Seek>(&self, out: &mut ImageWriter<'_, W>) -> io::Result<()> {
        out.section(&[self.live_words, u64::from(self.live_docs)])?;
        out.section(self.lengths.as_slice())?;
        // Every stem, sorted, with its term.
        let (ends, bytes) = (self.base.stem_ends.as_slice(), self.base.stem_bytes.as_slice());
        let mut stems: Vec<(&[u8], TermId)> = Vec::with_capacity(ends.len() + self.stems.len());
        let mut start = 0usize;
        for (end, term) in ends.iter().zip(self.base.stem_terms.as_slice()) {
            stems.push((&bytes[start..*end as usize], *term));
            start = *end as usize;
        }
        stems.extend(self.stems.iter().map(|(stem, term)| (stem.as_bytes(), *term)));
        stems.sort_unstable();
        let mut end = 0u64;
        let stem_ends: Vec<u64> = stems
            .iter()
            .map(|(stem, _)| {
                end += stem.len() as u64;
                end
            })
            .collect();
        out.section(&stem_ends)?;
        out.begin()?;
        for (stem, _) in &stems {
            out.part(stem)?;
        }
        out.end();
        out.section(&stems.iter().map(|(_, term)| *term).collect::<Vec<_>>())?;
        // Each term's postings, the image's then the added ones, one after another.
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.term_count as usize + 1);
        offsets.push(0);
        for term in 0..self.term_count {
            offset += self.postings(term).iter().map(|(slots, _)| slots.len() as u64).sum::<u64>();
            offsets.push(offset);
        }
        out.section(&offsets)?;
        out.begin()?;
        for term in 0..self.term_count {
            for (slots, _) in self.postings(term) {
                out.part(slots)?;
            }
        }
        out.end();
        out.begin()?;
        for term in 0..self.term_count {
            for (_, counts) in self.postings(term) {
                out.part(counts)?;
            }
        }
        out.end();
        Ok(())
    }

    /// Reads what [`TextIndex::write`] wrote for a table of `slots` slots, checking every offset
    /// a search follows. The postings' slots are not read here (a search checks each one it
    /// meets), since reading them all was most of the time a process took to open a large image.
    pub fn read(image: &mut ImageReader, slots: usize) -> Result<TextIndex, ImageError> {
        let totals = image.column::<u64>("text totals")?;
        let (live_words, live_docs) = (totals.get(0).unwrap_or_default(), totals.get(1).unwrap_or_default());
        let lengths = image.column::<u32>("lengths")?;
        let base = BaseTerms {
            stem_ends: image.column("stem ends")?,
            stem_bytes: image.column("stem bytes")?,
            stem_terms: image.column("stem terms")?,
            offsets: image.column("postings offsets")?,
            slots: image.column("postings slots")?,
            counts: image.column("postings counts")?,
        };
        if lengths.len() != slots {
            return Err(invalid("lengths"));
        }
        let live = lengths.as_slice().iter().filter(|length| **length > 0);
        if live.clone().count() as u64 != live_docs || live.map(|length| u64::from(*length)).sum::<u64>() != live_words {
            return Err(invalid("text totals"));
        }
        let terms = base.term_count();
        let ends = base.stem_ends.as_slice();
        if ends.len() != terms
            || base.stem_terms.len() != terms
            || ends.windows(2).any(|pair| pair[0] > pair[1])
            || ends.last().is_some_and(|end| *end != base.stem_bytes.len() as u64)
        {
            return Err(invalid("stems"));
        }
        let mut seen = vec![false; terms];
        for term in base.stem_terms.as_slice() {
            match seen.get_mut(*term as usize) {
                Some(flag) if !*flag => *flag = true,
                _ => return Err(invalid("stem terms")),
            }
        }
        let offsets = base.offsets.as_slice();
        if offsets.first().is_some_and(|first| *first != 0)
            || offsets.windows(2).any(|pair| pair[0] > pair[1])
            || offsets.last().copied().unwrap_or_default() != base.slots.len() as u64
            || base.counts.len() != base.slots.len()
        {
            return Err(invalid("postings"));
        }
        Ok(TextIndex {
            analyzer: Analyzer::default(),
            words: FastMap::default(),
            stems: FastMap::default(),
            term_count: terms as u32,
            base,
            postings: Vec::new(),
            lengths,
            live_words,
            live_docs: live_docs as u32,
        })
    }
}
