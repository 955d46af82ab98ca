//! The document table: what the index knows of each memory besides its words and vectors, so
//! that every [`SearchFilter`] is answered in memory.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use chrono::{DateTime, Utc};
use kenning_core::{MemoryKind, SearchFilter, Status};

/// A memory's position in the index. Slots are handed out in order and never reused, so that
/// postings can refer to them without being rewritten; a replaced memory gets a new slot.
pub type Slot = u32;

/// What a memory contributes to the index, as the store hands it over.
#[derive(Debug, Clone, PartialEq)]
pub struct DocInput<'a> {
    pub id: &'a str,
    pub kind: MemoryKind,
    pub status: Status,
    pub namespace: &'a str,
    pub tags: &'a [String],
    pub confidence: f64,
    pub occurred_at: DateTime<Utc>,
    /// The memory's search text: title, tags and content.
    pub text: &'a str,
}

/// The filterable fields of a live document.
#[derive(Debug, Clone)]
pub(crate) struct DocMeta {
    pub id: Box<str>,
    pub kind: MemoryKind,
    pub status: Status,
    pub namespace: u32,
    pub tags: Box<[u32]>,
    pub confidence: f64,
    pub occurred_at: DateTime<Utc>,
}

/// Every slot ever handed out, with the meta of the live ones, and the interned namespace and
/// tag names the metas refer to.
#[derive(Default)]
pub(crate) struct DocTable {
    slots: Vec<Option<DocMeta>>,
    /// Each slot's status, or `None` once dead, packed densely: a search that filters by status
    /// alone, as recall does, checks every candidate against this instead of its meta.
    states: Vec<Option<Status>>,
    dead: usize,
    names: Interner,
}

impl DocTable {
    pub fn push(&mut self, doc: &DocInput<'_>) -> Slot {
        let slot = Slot::try_from(self.slots.len()).expect("fewer than four billion documents");
        let meta = self.meta(doc);
        self.slots.push(Some(meta));
        self.states.push(Some(doc.status));
        slot
    }

    /// Replaces the filterable fields of a live slot whose text did not change.
    pub fn update(&mut self, slot: Slot, doc: &DocInput<'_>) {
        let meta = self.meta(doc);
        self.slots[slot as usize] = Some(meta);
        self.states[slot as usize] = Some(doc.status);
    }

    pub fn kill(&mut self, slot: Slot) {
        if self.slots[slot as usize].take().is_some() {
            self.states[slot as usize] = None;
            self.dead += 1;
        }
    }

    fn meta(&mut self, doc: &DocInput<'_>) -> DocMeta {
        let mut tags: Vec<u32> = doc.tags.iter().map(|tag| self.names.intern(tag)).collect();
        tags.sort_unstable();
        tags.dedup();
        DocMeta {
            id: doc.id.into(),
            kind: doc.kind,
            status: doc.status,
            namespace: self.names.intern(doc.namespace),
            tags: tags.into_boxed_slice(),
            confidence: doc.confidence,
            occurred_at: doc.occurred_at,
        }
    }

    pub fn get(&self, slot: Slot) -> Option<&DocMeta> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    pub fn dead_count(&self) -> usize {
        self.dead
    }

    /// `filter` in terms of this table's interned names; `None` when no document can pass,
    /// because it names a namespace or tag no document has.
    pub fn compile(&self, filter: &SearchFilter) -> Option<CompiledFilter> {
        let namespaces = filter.namespaces.iter().filter_map(|namespace| self.names.get(namespace.as_str())).collect::<Vec<_>>();
        if !filter.namespaces.is_empty() && namespaces.is_empty() {
            return None;
        }
        let tags = filter.tags.iter().map(|tag| self.names.get(tag)).collect::<Option<Vec<_>>>()?;
        let by_status_only = SearchFilter { status: filter.status, ..SearchFilter::default() };
        Some(CompiledFilter {
            status_only: *filter == by_status_only,
            kinds: filter.kinds.clone(),
            namespaces,
            tags,
            since: filter.since,
            until: filter.until,
            min_confidence: filter.min_confidence,
            status: filter.status,
        })
    }
}

/// A [`SearchFilter`] ready to test documents against.
pub(crate) struct CompiledFilter {
    /// Nothing but the status is restricted, so the dense state array answers.
    status_only: bool,
    kinds: Vec<MemoryKind>,
    namespaces: Vec<u32>,
    tags: Vec<u32>,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    min_confidence: Option<f64>,
    status: Option<Status>,
}

impl CompiledFilter {
    /// The live document in `slot`, if it passes.
    pub fn admit<'t>(&self, docs: &'t DocTable, slot: Slot) -> Option<&'t DocMeta> {
        if self.admits(docs, slot) { docs.get(slot) } else { None }
    }

    /// Whether the document in `slot` is live and passes.
    pub fn admits(&self, docs: &DocTable, slot: Slot) -> bool {
        let Some(Some(status)) = docs.states.get(slot as usize) else { return false };
        if self.status_only {
            return self.status.is_none_or(|wanted| wanted == *status);
        }
        docs.get(slot).is_some_and(|meta| self.passes(meta))
    }

    fn passes(&self, meta: &DocMeta) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&meta.kind))
            && (self.namespaces.is_empty() || self.namespaces.contains(&meta.namespace))
            && self.tags.iter().all(|tag| meta.tags.binary_search(tag).is_ok())
            && self.since.is_none_or(|since| meta.occurred_at >= since)
            && self.until.is_none_or(|until| meta.occurred_at <= until)
            && self.min_confidence.is_none_or(|min| meta.confidence >= min)
            && self.status.is_none_or(|status| meta.status == status)
    }
}

/// Namespace and tag names, each stored once.
#[derive(Default)]
struct Interner {
    ids: FastMap<Box<str>, u32>,
}

impl Interner {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = u32::try_from(self.ids.len()).expect("fewer than four billion names");
        self.ids.insert(name.into(), id);
        id
    }

    fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}

/// A hash map with the Fx hash, which is several times faster than the default SipHash on the
/// short keys the index uses. The keys come from the store's own records, so the resistance to
/// crafted collisions that SipHash buys is not needed here.
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The hash function of rustc (`rustc-hash`): a multiply and a rotate per word.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ rest.len() as u64);
    }

    fn write_u8(&mut self, value: u8) {
        self.add(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.add(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}
