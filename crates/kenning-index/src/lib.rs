//! In-memory search structures for kenning's stores: the index a store searches, kept in step
//! with the records the store holds durably.
//!
//! - [`SearchIndex`] is the whole index of one store: a document table, a full-text index and
//!   one vector index per embedding model. The store feeds it with [`SearchIndex::upsert`] as
//!   records change and asks it [`SearchIndex::search_text`] and [`SearchIndex::search_vector`],
//!   and for the records captured next to one, [`SearchIndex::neighbours`].
//! - [`analyzer`] turns text into terms: words folded to lower case without diacritics and
//!   stemmed, with stop words left out of queries.
//!
//! The text leg ranks by BM25 over an inverted index; the vector leg ranks by cosine over 8-bit
//! vectors, preselected by binary codes when there are many. Both answer every
//! [`SearchFilter`] from the document table, so a search never goes back to the store.
//!
//! Invariant: no I/O. The index is a cache: a store can always rebuild it from its records,
//! and must, because nothing here is persisted.

pub mod analyzer;
mod docs;
mod text;
mod topk;
mod vector;

use std::hash::Hasher;

use chrono::TimeDelta;
use kenning_core::store::NEIGHBOUR_REACH;
use kenning_core::{MemoryId, ScoredId, SearchFilter};

pub use docs::{DocInput, Slot};

use crate::docs::{DocTable, FastMap, FxHasher};
use crate::text::TextIndex;
use crate::vector::VectorIndex;

/// The search index of one store. `key` is the store's own stable key of a record (a row id),
/// which survives changes to the record.
#[derive(Default)]
pub struct SearchIndex {
    docs: DocTable,
    text: TextIndex,
    /// The slot of each key and the hash of the text that slot indexes.
    keys: FastMap<i64, (Slot, u64)>,
    /// Models whose vectors are loaded, and their vectors by length.
    models: Vec<String>,
    vectors: Vec<(String, usize, VectorIndex)>,
}

impl SearchIndex {
    pub fn new() -> SearchIndex {
        SearchIndex::default()
    }

    /// Records the current state of the record under `key` and its vectors from the loaded
    /// models (any loaded model it has no vector from loses its old one). A record whose text
    /// is unchanged keeps its slot and only has its filterable fields replaced.
    pub fn upsert(&mut self, key: i64, doc: &DocInput<'_>, vectors: &[(&str, &[f32])]) {
        let hash = text_hash(doc.text);
        let slot = match self.keys.get(&key).copied() {
            Some((slot, known)) if known == hash => {
                self.docs.update(slot, doc);
                slot
            }
            previous => {
                if let Some((old, _)) = previous {
                    self.docs.kill(old);
                    self.text.remove(old);
                    for (_, _, index) in &mut self.vectors {
                        index.remove(old);
                    }
                }
                let slot = self.docs.push(doc);
                self.text.add(slot, doc.text);
                self.keys.insert(key, (slot, hash));
                slot
            }
        };
        for (name, dims, index) in &mut self.vectors {
            let kept = vectors.iter().any(|(model, vector)| model == name && vector.len() == *dims);
            if !kept {
                index.remove(slot);
            }
        }
        for (model, vector) in vectors {
            if self.has_model(model) {
                self.vector_index(model, vector.len()).set(slot, vector);
            }
        }
    }

    /// Whether the vectors of `model` are loaded; until they are, vector searches with it find
    /// nothing, and [`SearchIndex::upsert`] ignores its vectors.
    pub fn has_model(&self, model: &str) -> bool {
        self.models.iter().any(|known| known == model)
    }

    /// The models whose vectors are loaded.
    pub fn models(&self) -> Vec<String> {
        self.models.clone()
    }

    /// Starts keeping vectors of `model`; the store then loads them with [`SearchIndex::set_vector`].
    pub fn add_model(&mut self, model: &str) {
        if !self.has_model(model) {
            self.models.push(model.to_owned());
        }
    }

    /// Sets the vector of an indexed record from a loaded model.
    pub fn set_vector(&mut self, key: i64, model: &str, vector: &[f32]) {
        let Some((slot, _)) = self.keys.get(&key).copied() else { return };
        debug_assert!(self.has_model(model), "vectors are only kept for loaded models");
        self.vector_index(model, vector.len()).set(slot, vector);
    }

    fn vector_index(&mut self, model: &str, dims: usize) -> &mut VectorIndex {
        let position = match self.vectors.iter().position(|(name, length, _)| name == model && *length == dims) {
            Some(position) => position,
            None => {
                self.vectors.push((model.to_owned(), dims, VectorIndex::new(dims)));
                self.vectors.len() - 1
            }
        };
        &mut self.vectors[position].2
    }

    /// Records indexed, live.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Slots left behind by records whose text changed; the store rebuilds the index when they
    /// pile up, because they cost memory and time in every search.
    pub fn dead_slots(&self) -> usize {
        self.docs.dead_count()
    }

    /// Full-text search: the `limit` best records for `query` by BM25 that pass `filter`.
    pub fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> Vec<ScoredId> {
        let Some(filter) = self.docs.compile(filter) else { return Vec::new() };
        let hits = self.text.search(query, &self.docs, &filter, limit);
        self.scored_ids(hits)
    }

    /// Vector search: the `limit` records passing `filter` whose vectors from `model` are most
    /// similar to `query`, by cosine. Vectors of another length than the query's are never compared.
    pub fn search_vector(&self, query: &[f32], model: &str, filter: &SearchFilter, limit: usize) -> Vec<ScoredId> {
        let Some(filter) = self.docs.compile(filter) else { return Vec::new() };
        let Some((_, _, index)) = self.vectors.iter().find(|(name, dims, _)| name == model && *dims == query.len()) else {
            return Vec::new();
        };
        let hits = index.search(query, &self.docs, &filter, limit);
        self.scored_ids(hits)
    }

    /// The records captured just before and just after the record under `key`, keys being in
    /// capture order: on each side, among the [`NEIGHBOUR_REACH`] keys next to it, the nearest
    /// live record that shares its namespace and passes `filter`, if it occurred within `window`
    /// of it. The one before comes first. A key that is not indexed, or whose record does not
    /// pass `filter`, has none.
    pub fn neighbours(&self, key: i64, filter: &SearchFilter, window: TimeDelta) -> Vec<MemoryId> {
        let Some(filter) = self.docs.compile(filter) else { return Vec::new() };
        let Some(origin) = self.keys.get(&key).and_then(|(slot, _)| filter.admit(&self.docs, *slot)) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for direction in [-1, 1] {
            let nearest = (1..=NEIGHBOUR_REACH as i64)
                .filter_map(|distance| key.checked_add(direction * distance))
                .filter_map(|near| self.keys.get(&near))
                .filter_map(|(slot, _)| filter.admit(&self.docs, *slot))
                .find(|meta| meta.namespace == origin.namespace);
            if let Some(meta) = nearest
                && (meta.occurred_at - origin.occurred_at).abs() <= window
                && let Ok(id) = MemoryId::parse(&meta.id)
            {
                found.push(id);
            }
        }
        found
    }

    fn scored_ids(&self, hits: Vec<(f64, Slot)>) -> Vec<ScoredId> {
        hits.into_iter()
            .filter_map(|(score, slot)| {
                let meta = self.docs.get(slot)?;
                let id = MemoryId::parse(&meta.id).ok()?;
                Some(ScoredId { id, score })
            })
            .collect()
    }
}

fn text_hash(text: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(text.as_bytes());
    hasher.finish()
}
