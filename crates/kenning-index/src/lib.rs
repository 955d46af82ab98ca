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
//! An index persists as an image ([`SearchIndex::write_image`]) that a later process opens in
//! place ([`SearchIndex::read_image`]): its arrays are read straight from the image's bytes,
//! copied into memory only when that process changes them, so opening costs next to nothing
//! whatever the store's size. The layout is described in `image.rs`. An image also links each
//! model's vectors in a graph that a vector search walks (`graph.rs`). Linking takes seconds
//! for a large index, so it is split off: [`SearchIndex::graph_work`] copies what it needs,
//! [`GraphWork::link`] does it without the index, and [`SearchIndex::write_image_with`] writes
//! the graphs that still fit the index.
//!
//! Invariant: no I/O. The index writes its image to a sink and reads it from bytes the store
//! hands over (a memory map, say); it never opens a file. The index is a cache: a store can
//! always rebuild it from its records, and must whenever an image is missing, stale or refused.

pub mod analyzer;
mod column;
mod documents;
mod graph;
mod image;
mod text;
mod topk;
mod vector;

use std::hash::Hasher;
use std::io::{Seek, Write};
use std::sync::atomic::AtomicBool;

use chrono::TimeDelta;
use kenning_core::store::NEIGHBOUR_REACH;
use kenning_core::{MemoryId, ScoredId, SearchFilter};

pub use column::{ImageBytes, image_in_memory};
pub use documents::{DocInput, Slot};
pub use image::{BodyCheck, FORMAT_VERSION, ImageError};

use crate::column::Column;
use crate::documents::{DocTable, FastMap, FxHasher};
use crate::image::{ImageReader, ImageWriter, invalid};
use crate::text::TextIndex;
use crate::vector::{Linked, Unlinked, VectorIndex};

/// Fewer vector queries than twice this are answered on the calling thread: a thread costs
/// about as much to start as a few searches of a small index.
const QUERIES_PER_THREAD: usize = 16;

/// The fewest vectors of one model that [`SearchIndex::write_image`] links in a graph, and the
/// number a store should pass to [`SearchIndex::graph_work`]: from here on the scan of every
/// vector's code needs both cores of a small machine, while below it a walk of the graph is no
/// faster (measured at 30,000 and 100,000 rows) and finds slightly fewer of the exact nearest.
pub const GRAPH_ROWS: usize = 131_072;

/// How many threads the machine runs at once; asking reads the process's CPU quota, so it is
/// asked once.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The search index of one store. `key` is the store's own stable key of a record (a row id),
/// which survives changes to the record.
#[derive(Default)]
pub struct SearchIndex {
    documents: DocTable,
    text: TextIndex,
    keys: Keys,
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
        let slot = self.upsert_document(key, doc);
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

    /// [`SearchIndex::upsert`] without the vectors: a record whose text is unchanged keeps
    /// them, one whose text changed loses them. For a store whose vectors change only with
    /// their text, or by being replaced, and which sets the vectors of its changed records
    /// next ([`SearchIndex::set_vector`]): a record changed in its other fields (its status,
    /// its confidence) then keeps its place in the graph the vectors are linked in.
    pub fn upsert_document(&mut self, key: i64, doc: &DocInput<'_>) -> Slot {
        let hash = text_hash(doc.text);
        match self.keys.get(key) {
            Some((slot, known)) if known == hash => {
                self.documents.update(slot, doc);
                slot
            }
            previous => {
                if let Some((old, _)) = previous {
                    self.documents.kill(old);
                    self.text.remove(old);
                    for (_, _, index) in &mut self.vectors {
                        index.remove(old);
                    }
                }
                let slot = self.documents.push(doc);
                self.text.add(slot, doc.text);
                self.keys.insert(key, slot, hash);
                slot
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
        let Some((slot, _)) = self.keys.get(key) else { return };
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

    /// How many vectors of every model an image of the index would have to link, counting
    /// only models with at least `min_rows` vectors.
    pub fn unlinked_vectors(&self, min_rows: usize) -> usize {
        self.vectors.iter().map(|(_, _, index)| index.unlinked_rows(min_rows)).sum()
    }

    /// How many of `model`'s vectors the index's graph links (none until it is written as an
    /// image and read back).
    pub fn linked_vectors(&self, model: &str) -> usize {
        self.vectors.iter().filter(|(name, _, _)| name == model).map(|(_, _, index)| index.linked_rows()).sum()
    }

    /// Records indexed, live.
    pub fn len(&self) -> usize {
        self.keys.len
    }

    pub fn is_empty(&self) -> bool {
        self.keys.len == 0
    }

    /// Slots and vector rows left behind by records whose text or vectors changed; the store
    /// rebuilds the index when they pile up, because they cost memory and time in every search.
    pub fn dead_slots(&self) -> usize {
        self.documents.dead_count() + self.vectors.iter().map(|(_, _, index)| index.dead_rows()).sum::<usize>()
    }

    /// Full-text search: the `limit` best records for `query` by BM25 that pass `filter`.
    pub fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> Vec<ScoredId> {
        let Some(filter) = self.documents.compile(filter) else { return Vec::new() };
        let hits = self.text.search(query, &self.documents, &filter, limit);
        self.scored_ids(hits)
    }

    /// Vector search: the `limit` records passing `filter` whose vectors from `model` are most
    /// similar to `query`, by cosine. Vectors of another length than the query's are never compared.
    pub fn search_vector(&self, query: &[f32], model: &str, filter: &SearchFilter, limit: usize) -> Vec<ScoredId> {
        let Some(filter) = self.documents.compile(filter) else { return Vec::new() };
        let Some((_, _, index)) = self.vectors.iter().find(|(name, dims, _)| name == model && *dims == query.len()) else {
            return Vec::new();
        };
        let hits = index.search(query, &filter, limit);
        self.scored_ids(hits)
    }

    /// [`SearchIndex::search_vector`] for each of `queries`, in their order, on every core
    /// when there are enough of them (a bulk capture's judgment asks for hundreds at once).
    pub fn search_vector_many(&self, queries: &[&[f32]], model: &str, filter: &SearchFilter, limit: usize) -> Vec<Vec<ScoredId>> {
        let threads = if queries.len() < 2 * QUERIES_PER_THREAD { 1 } else { cores().min(queries.len() / QUERIES_PER_THREAD) };
        if threads <= 1 {
            return queries.iter().map(|query| self.search_vector(query, model, filter, limit)).collect();
        }
        let share = queries.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let others: Vec<_> = queries[share..]
                .chunks(share)
                .map(|part| scope.spawn(move || part.iter().map(|query| self.search_vector(query, model, filter, limit)).collect::<Vec<_>>()))
                .collect();
            let mut found: Vec<Vec<ScoredId>> = queries[..share].iter().map(|query| self.search_vector(query, model, filter, limit)).collect();
            for other in others {
                found.extend(other.join().expect("a vector search does not panic"));
            }
            found
        })
    }

    /// The records captured just before and just after the record under `key`, keys being in
    /// capture order: on each side, among the [`NEIGHBOUR_REACH`] keys next to it, the nearest
    /// live record that shares its namespace and passes `filter`, if it occurred within `window`
    /// of it. The one before comes first. A key that is not indexed, or whose record does not
    /// pass `filter`, has none.
    pub fn neighbours(&self, key: i64, filter: &SearchFilter, window: TimeDelta) -> Vec<MemoryId> {
        let Some(filter) = self.documents.compile(filter) else { return Vec::new() };
        let Some(origin) = self.keys.get(key).and_then(|(slot, _)| filter.admit(slot)) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for direction in [-1, 1] {
            let nearest = (1..=NEIGHBOUR_REACH as i64)
                .filter_map(|distance| key.checked_add(direction * distance))
                .filter_map(|near| self.keys.get(near))
                .filter_map(|(slot, _)| filter.admit(slot))
                .find(|meta| meta.namespace == origin.namespace);
            if let Some(meta) = nearest
                && (meta.occurred_at - origin.occurred_at).abs() <= window
                && let Ok(id) = MemoryId::parse(meta.id)
            {
                found.push(id);
            }
        }
        found
    }

    fn scored_ids(&self, hits: Vec<(f64, Slot)>) -> Vec<ScoredId> {
        hits.into_iter()
            .filter_map(|(score, slot)| {
                let meta = self.documents.get(slot)?;
                let id = MemoryId::parse(meta.id).ok()?;
                Some(ScoredId { id, score })
            })
            .collect()
    }

    /// Writes the index as an image to `out`, led by `stamp`: the store's own record of what
    /// the image reflects, returned as it was by [`SearchIndex::read_image`]. Every vector is
    /// linked in the image's graphs first, for models with at least [`GRAPH_ROWS`] of them.
    pub fn write_image<W: Write + Seek>(&self, stamp: &[u8], out: &mut W) -> Result<(), ImageError> {
        self.write_image_with(stamp, out, &self.graph_work(GRAPH_ROWS).link(&AtomicBool::new(false)))
    }

    /// What linking the vectors that the index's graphs lack takes, for models with at least
    /// `min_rows` vectors: a copy of those vectors (those read from an image are shared), cheap
    /// next to the linking itself.
    pub fn graph_work(&self, min_rows: usize) -> GraphWork {
        GraphWork(self.vectors.iter().filter_map(|(model, dims, index)| Some((model.clone(), *dims, index.unlinked(min_rows)?))).collect())
    }

    /// [`SearchIndex::write_image`] with `graphs` for the vectors they were linked from, if
    /// those are as they were then; vectors added since are left for a later image to link.
    pub fn write_image_with<W: Write + Seek>(&self, stamp: &[u8], out: &mut W, graphs: &Graphs) -> Result<(), ImageError> {
        let mut image = ImageWriter::new(out, stamp)?;
        self.documents.write(&mut image)?;
        self.text.write(&mut image)?;
        self.keys.write(&mut image)?;
        image.strings(self.models.iter().map(String::as_str))?;
        image.strings(self.vectors.iter().map(|(model, _, _)| model.as_str()))?;
        for (model, dims, index) in &self.vectors {
            let linked = graphs.0.iter().find(|(name, length, _)| name == model && length == dims).map(|(_, _, linked)| linked);
            index.write(&mut image, linked)?;
        }
        image.finish()
    }

    /// Opens an image written by [`SearchIndex::write_image`], reading its arrays in place,
    /// and returns the index with the image's stamp. The header is checked against its
    /// checksum, the body as `body_check` says, and every value a search relies on against the
    /// rest, so a damaged or foreign image is refused or, with [`BodyCheck::Structure`], at
    /// worst ranks differently; it never makes a search read out of bounds or panic.
    pub fn read_image(bytes: ImageBytes, body_check: BodyCheck) -> Result<(SearchIndex, Vec<u8>), ImageError> {
        let (mut image, stamp) = ImageReader::open(bytes, body_check)?;
        let docs = DocTable::read(&mut image)?;
        let slots = docs.slot_count();
        let text = TextIndex::read(&mut image, slots)?;
        let keys = Keys::read(&mut image, slots)?;
        let models = image.strings("models")?;
        let mut vectors = Vec::new();
        for model in image.strings("vector models")? {
            let index = VectorIndex::read(&mut image, slots)?;
            vectors.push((model, index.dims(), index));
        }
        image.finish()?;
        Ok((SearchIndex { documents: docs, text, keys, models, vectors }, stamp))
    }

    /// The stamp of an image, after checking its header but not its body: a cheap look at
    /// what an image claims to reflect before paying to check all of it.
    pub fn image_stamp(bytes: &[u8]) -> Result<&[u8], ImageError> {
        image::read_header(bytes).map(|header| header.stamp)
    }
}

/// The vectors of an index that its graphs do not link yet, per model, taken by
/// [`SearchIndex::graph_work`].
#[derive(Default)]
pub struct GraphWork(Vec<(String, usize, Unlinked)>);

impl GraphWork {
    /// Whether every vector is linked already (or too few to need a graph).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Links every vector: seconds for a hundred thousand of them, so a store does it without
    /// holding its index. Setting `stop` ends the work early, with the vectors linked so far.
    pub fn link(self, stop: &AtomicBool) -> Graphs {
        Graphs(self.0.into_iter().map(|(model, dims, unlinked)| (model, dims, unlinked.link(stop))).collect())
    }
}

/// Graphs linked by [`GraphWork::link`], for [`SearchIndex::write_image_with`].
pub struct Graphs(Vec<(String, usize, Linked)>);

/// The slot of each key and the hash of the text that slot indexes: the entries read from an
/// image, sorted by key, and those set in memory since, which take precedence.
#[derive(Default)]
struct Keys {
    base_keys: Column<i64>,
    base_slots: Column<Slot>,
    base_hashes: Column<u64>,
    added: FastMap<i64, (Slot, u64)>,
    /// Distinct keys.
    len: usize,
}

impl Keys {
    fn get(&self, key: i64) -> Option<(Slot, u64)> {
        if let Some(entry) = self.added.get(&key) {
            return Some(*entry);
        }
        let position = self.base_keys.as_slice().binary_search(&key).ok()?;
        self.base_slots.get(position).zip(self.base_hashes.get(position))
    }

    fn insert(&mut self, key: i64, slot: Slot, hash: u64) {
        if self.get(key).is_none() {
            self.len += 1;
        }
        self.added.insert(key, (slot, hash));
    }

    fn write<W: Write + Seek>(&self, out: &mut ImageWriter<'_, W>) -> std::io::Result<()> {
        let base = self.base_keys.as_slice().iter().zip(self.base_slots.as_slice()).zip(self.base_hashes.as_slice());
        let mut entries: Vec<(i64, Slot, u64)> = base
            .filter(|((key, _), _)| !self.added.contains_key(key))
            .map(|((key, slot), hash)| (*key, *slot, *hash))
            .chain(self.added.iter().map(|(key, (slot, hash))| (*key, *slot, *hash)))
            .collect();
        entries.sort_unstable_by_key(|(key, _, _)| *key);
        out.section(&entries.iter().map(|(key, _, _)| *key).collect::<Vec<_>>())?;
        out.section(&entries.iter().map(|(_, slot, _)| *slot).collect::<Vec<_>>())?;
        out.section(&entries.iter().map(|(_, _, hash)| *hash).collect::<Vec<_>>())
    }

    fn read(image: &mut ImageReader, slots: usize) -> Result<Keys, ImageError> {
        let keys = Keys {
            base_keys: image.column("keys")?,
            base_slots: image.column("key slots")?,
            base_hashes: image.column("key hashes")?,
            added: FastMap::default(),
            len: 0,
        };
        let len = keys.base_keys.len();
        if keys.base_slots.len() != len
            || keys.base_hashes.len() != len
            || keys.base_keys.as_slice().windows(2).any(|pair| pair[0] >= pair[1])
            || keys.base_slots.as_slice().iter().any(|slot| *slot as usize >= slots)
        {
            return Err(invalid("keys"));
        }
        Ok(Keys { len, ..keys })
    }
}

fn text_hash(text: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(text.as_bytes());
    hasher.finish()
}
