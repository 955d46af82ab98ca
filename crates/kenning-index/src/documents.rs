//! The document table: what the index knows of each memory besides its words and vectors, so
//! that every [`SearchFilter`] is answered in memory.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Seek, Write};

use chrono::{DateTime, Utc};
use kenning_core::{FilterCondition, MemoryKind, SearchFilter, Status};

use crate::column::Column;
use crate::image::{ImageError, ImageReader, ImageWriter, invalid};

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
    /// The memory's provenance facets (`kenning_core::provenance::facets`).
    pub facets: &'a [String],
}

/// The filterable fields of a live document, read from the table's columns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DocMeta<'t> {
    pub id: &'t str,
    pub namespace: u32,
    pub occurred_at: DateTime<Utc>,
}

/// Marks a dead slot in the state column.
const DEAD: u8 = u8::MAX;

/// Every slot ever handed out, as columns (one value per slot), with the interned namespace
/// and tag names they refer to. A slot's state is its status's position in [`Status::ALL`],
/// or [`DEAD`] once its document was replaced: a search that filters by status alone, as
/// recall does, checks every candidate against that one dense column.
#[derive(Default)]
pub(crate) struct DocTable {
    states: Column<u8>,
    kinds: Column<u8>,
    namespaces: Column<u32>,
    confidences: Column<f64>,
    occurred_seconds: Column<i64>,
    occurred_nanos: Column<u32>,
    /// The tags of slot `s` are `tags[tag_starts[s]..tag_starts[s] + tag_counts[s]]`, sorted.
    tag_starts: Column<u64>,
    tag_counts: Column<u32>,
    tags: Column<u32>,
    /// The facets of slot `s`, interned like tags and laid out the same way.
    facet_starts: Column<u64>,
    facet_counts: Column<u32>,
    facets: Column<u32>,
    /// The id of slot `s` is `id_bytes[id_ends[s - 1]..id_ends[s]]`.
    id_ends: Column<u64>,
    id_bytes: Column<u8>,
    dead: usize,
    names: Interner,
}

fn status_code(status: Status) -> u8 {
    Status::ALL.iter().position(|known| *known == status).map_or(DEAD, |position| position as u8)
}

fn kind_code(kind: MemoryKind) -> u8 {
    MemoryKind::ALL.iter().position(|known| *known == kind).map_or(u8::MAX, |position| position as u8)
}

impl DocTable {
    pub fn slot_count(&self) -> usize {
        self.states.len()
    }

    pub fn push(&mut self, doc: &DocInput<'_>) -> Slot {
        // A store holds far fewer than four billion memories; `Slot` is u32 to keep postings small.
        let slot = self.states.len() as Slot;
        self.states.push(status_code(doc.status));
        self.kinds.push(kind_code(doc.kind));
        self.namespaces.push(self.names.intern(doc.namespace));
        self.confidences.push(doc.confidence);
        self.occurred_seconds.push(doc.occurred_at.timestamp());
        self.occurred_nanos.push(doc.occurred_at.timestamp_subsec_nanos());
        let (start, count) = self.add_tags(doc.tags);
        self.tag_starts.push(start);
        self.tag_counts.push(count);
        let (start, count) = self.add_facets(doc.facets);
        self.facet_starts.push(start);
        self.facet_counts.push(count);
        let ids = self.id_bytes.to_mut();
        ids.extend_from_slice(doc.id.as_bytes());
        let end = ids.len() as u64;
        self.id_ends.push(end);
        slot
    }

    fn add_tags(&mut self, tags: &[String]) -> (u64, u32) {
        let ids = self.intern_sorted(tags);
        let arena = self.tags.to_mut();
        let start = arena.len() as u64;
        arena.extend_from_slice(&ids);
        (start, ids.len() as u32)
    }

    fn add_facets(&mut self, facets: &[String]) -> (u64, u32) {
        let ids = self.intern_sorted(facets);
        let arena = self.facets.to_mut();
        let start = arena.len() as u64;
        arena.extend_from_slice(&ids);
        (start, ids.len() as u32)
    }

    fn intern_sorted(&mut self, names: &[String]) -> Vec<u32> {
        let mut ids: Vec<u32> = names.iter().map(|name| self.names.intern(name)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn tags_of(&self, slot: usize) -> &[u32] {
        tag_range(self.tags.as_slice(), self.tag_starts.get(slot), self.tag_counts.get(slot))
    }

    fn facets_of(&self, slot: usize) -> &[u32] {
        tag_range(self.facets.as_slice(), self.facet_starts.get(slot), self.facet_counts.get(slot))
    }

    /// Replaces the filterable fields of a live slot whose text did not change (its id never does).
    pub fn update(&mut self, slot: Slot, doc: &DocInput<'_>) {
        let index = slot as usize;
        self.states.set(index, status_code(doc.status));
        self.kinds.set(index, kind_code(doc.kind));
        let namespace = self.names.intern(doc.namespace);
        self.namespaces.set(index, namespace);
        self.confidences.set(index, doc.confidence);
        self.occurred_seconds.set(index, doc.occurred_at.timestamp());
        self.occurred_nanos.set(index, doc.occurred_at.timestamp_subsec_nanos());
        let wanted = self.intern_sorted(doc.tags);
        if self.tags_of(index) != wanted.as_slice() {
            let (start, count) = self.add_tags(doc.tags);
            self.tag_starts.set(index, start);
            self.tag_counts.set(index, count);
        }
        let wanted = self.intern_sorted(doc.facets);
        if self.facets_of(index) != wanted.as_slice() {
            let (start, count) = self.add_facets(doc.facets);
            self.facet_starts.set(index, start);
            self.facet_counts.set(index, count);
        }
    }

    pub fn kill(&mut self, slot: Slot) {
        if self.states.get(slot as usize).is_some_and(|state| state != DEAD) {
            self.states.set(slot as usize, DEAD);
            self.dead += 1;
        }
    }

    pub fn get(&self, slot: Slot) -> Option<DocMeta<'_>> {
        let index = slot as usize;
        if self.states.get(index)? == DEAD {
            return None;
        }
        Some(DocMeta {
            id: self.id(index),
            namespace: self.namespaces.get(index)?,
            occurred_at: time(self.occurred_seconds.get(index)?, self.occurred_nanos.get(index)?),
        })
    }

    fn id(&self, index: usize) -> &str {
        std::str::from_utf8(self.id_bytes_of(index)).unwrap_or_default()
    }

    /// The id of slot `index` as bytes, which order as the id does: what ranking needs to break
    /// ties, without checking the bytes are text each time.
    fn id_bytes_of(&self, index: usize) -> &[u8] {
        let ends = self.id_ends.as_slice();
        let start = if index == 0 { Some(0) } else { ends.get(index - 1).copied() };
        let range = start.zip(ends.get(index).copied()).and_then(|(start, end)| self.id_bytes.as_slice().get(start as usize..end as usize));
        range.unwrap_or_default()
    }

    pub fn dead_count(&self) -> usize {
        self.dead
    }

    /// `filter` in terms of this table's interned names; `None` when no document can pass,
    /// because it names a namespace or tag no document has.
    pub fn compile(&self, filter: &SearchFilter) -> Option<CompiledFilter<'_>> {
        let moment = |at: DateTime<Utc>| (at.timestamp(), at.timestamp_subsec_nanos());
        let mut compiled = CompiledFilter {
            docs: self,
            states: self.states.as_slice(),
            status_only: true,
            kinds: Vec::new(),
            namespaces: Vec::new(),
            tags: Vec::new(),
            facets: Vec::new(),
            since: None,
            until: None,
            min_confidence: None,
            status: None,
        };
        for condition in filter.conditions() {
            compiled.status_only &= matches!(condition, FilterCondition::Status(_));
            match condition {
                FilterCondition::Kinds(kinds) => compiled.kinds = kinds.iter().map(|kind| kind_code(*kind)).collect(),
                FilterCondition::Namespaces(namespaces) => {
                    compiled.namespaces = namespaces.iter().filter_map(|namespace| self.names.get(namespace.as_str())).collect();
                    if compiled.namespaces.is_empty() {
                        return None;
                    }
                }
                FilterCondition::Tags(tags) => compiled.tags = tags.iter().map(|tag| self.names.get(tag)).collect::<Option<Vec<_>>>()?,
                FilterCondition::Since(since) => compiled.since = Some(moment(since)),
                FilterCondition::Until(until) => compiled.until = Some(moment(until)),
                FilterCondition::MinConfidence(min_confidence) => compiled.min_confidence = Some(min_confidence),
                FilterCondition::Facets(facets) => compiled.facets = facets.iter().map(|facet| self.names.get(facet)).collect::<Option<Vec<_>>>()?,
                FilterCondition::Status(status) => compiled.status = Some(status_code(status)),
            }
        }
        Some(compiled)
    }

    pub fn write<W: Write + Seek>(&self, out: &mut ImageWriter<'_, W>) -> io::Result<()> {
        // The codes of statuses and kinds are positions in these lists, so an image is only read
        // by a build whose lists are the same.
        out.strings(Status::ALL.iter().map(|status| status.as_str()))?;
        out.strings(MemoryKind::ALL.iter().map(|kind| kind.as_str()))?;
        out.section(&[self.dead as u64])?;
        out.section(self.states.as_slice())?;
        out.section(self.kinds.as_slice())?;
        out.section(self.namespaces.as_slice())?;
        out.section(self.confidences.as_slice())?;
        out.section(self.occurred_seconds.as_slice())?;
        out.section(self.occurred_nanos.as_slice())?;
        out.section(self.tag_starts.as_slice())?;
        out.section(self.tag_counts.as_slice())?;
        out.section(self.tags.as_slice())?;
        out.section(self.facet_starts.as_slice())?;
        out.section(self.facet_counts.as_slice())?;
        out.section(self.facets.as_slice())?;
        out.section(self.id_ends.as_slice())?;
        out.section(self.id_bytes.as_slice())?;
        out.strings(self.names.names.iter().map(|name| &**name))
    }

    /// Reads what [`DocTable::write`] wrote, checking every value a search relies on.
    pub fn read(image: &mut ImageReader) -> Result<DocTable, ImageError> {
        if !image.strings("statuses")?.iter().map(String::as_str).eq(Status::names())
            || !image.strings("kinds")?.iter().map(String::as_str).eq(MemoryKind::names())
        {
            return Err(invalid("written with other statuses or kinds"));
        }
        let dead = image.column::<u64>("dead count")?.get(0).ok_or_else(|| invalid("dead count"))? as usize;
        let table = DocTable {
            states: image.column("states")?,
            kinds: image.column("kinds")?,
            namespaces: image.column("namespaces")?,
            confidences: image.column("confidences")?,
            occurred_seconds: image.column("occurred seconds")?,
            occurred_nanos: image.column("occurred nanoseconds")?,
            tag_starts: image.column("tag starts")?,
            tag_counts: image.column("tag counts")?,
            tags: image.column("tags")?,
            facet_starts: image.column("facet starts")?,
            facet_counts: image.column("facet counts")?,
            facets: image.column("facets")?,
            id_ends: image.column("id ends")?,
            id_bytes: image.column("id bytes")?,
            dead,
            names: Interner::from_names(image.strings("names")?)?,
        };
        table.check()?;
        Ok(table)
    }

    /// Checks what a look-up follows: column lengths, codes, name numbers and ranges. A
    /// document's time is a value, trusted as the rest are (a time out of range reads as the
    /// epoch), so that opening a large image does not convert every one.
    fn check(&self) -> Result<(), ImageError> {
        let slots = self.states.len();
        let lengths = [
            self.kinds.len(),
            self.namespaces.len(),
            self.confidences.len(),
            self.occurred_seconds.len(),
            self.occurred_nanos.len(),
            self.tag_starts.len(),
            self.tag_counts.len(),
            self.facet_starts.len(),
            self.facet_counts.len(),
            self.id_ends.len(),
        ];
        if lengths.iter().any(|length| *length != slots) || slots > Slot::MAX as usize {
            return Err(invalid("document columns of different lengths"));
        }
        let states = self.states.as_slice();
        if states.iter().any(|state| *state != DEAD && usize::from(*state) >= Status::ALL.len()) {
            return Err(invalid("unknown status"));
        }
        if states.iter().filter(|state| **state == DEAD).count() != self.dead {
            return Err(invalid("dead count"));
        }
        if self.kinds.as_slice().iter().any(|kind| usize::from(*kind) >= MemoryKind::ALL.len()) {
            return Err(invalid("unknown kind"));
        }
        let names = self.names.names.len() as u32;
        if self.namespaces.as_slice().iter().chain(self.tags.as_slice()).chain(self.facets.as_slice()).any(|name| *name >= names) {
            return Err(invalid("name out of range"));
        }
        let out_of = |arena: usize, starts: &[u64], counts: &[u32]| {
            starts.iter().zip(counts).any(|(start, count)| start.checked_add(u64::from(*count)).is_none_or(|end| end > arena as u64))
        };
        if out_of(self.tags.len(), self.tag_starts.as_slice(), self.tag_counts.as_slice()) {
            return Err(invalid("tags out of range"));
        }
        if out_of(self.facets.len(), self.facet_starts.as_slice(), self.facet_counts.as_slice()) {
            return Err(invalid("facets out of range"));
        }
        let ends = self.id_ends.as_slice();
        if ends.windows(2).any(|pair| pair[0] > pair[1]) || ends.last().is_some_and(|end| *end != self.id_bytes.len() as u64) {
            return Err(invalid("ids out of range"));
        }
        Ok(())
    }
}

fn tag_range(tags: &[u32], start: Option<u64>, count: Option<u32>) -> &[u32] {
    let range = start.zip(count).map(|(start, count)| start as usize..start as usize + count as usize);
    range.and_then(|range| tags.get(range)).unwrap_or_default()
}

fn time(seconds: i64, nanos: u32) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, nanos).unwrap_or_default()
}

/// A [`SearchFilter`] ready to test documents against, holding the columns it reads so that
/// testing a candidate touches no more than them.
pub(crate) struct CompiledFilter<'t> {
    docs: &'t DocTable,
    states: &'t [u8],
    /// Nothing but the status is restricted, so the state column answers.
    status_only: bool,
    kinds: Vec<u8>,
    namespaces: Vec<u32>,
    tags: Vec<u32>,
    facets: Vec<u32>,
    since: Option<(i64, u32)>,
    until: Option<(i64, u32)>,
    min_confidence: Option<f64>,
    status: Option<u8>,
}

impl<'t> CompiledFilter<'t> {
    /// The live document in `slot`, if it passes.
    pub fn admit(&self, slot: Slot) -> Option<DocMeta<'t>> {
        if self.admits(slot) { self.docs.get(slot) } else { None }
    }

    /// The id of the live document in `slot`, as bytes, if it passes: all a ranking needs of a
    /// candidate, cheaper than [`CompiledFilter::admit`].
    pub fn admit_id(&self, slot: Slot) -> Option<&'t [u8]> {
        self.admits(slot).then(|| self.docs.id_bytes_of(slot as usize))
    }

    /// Whether the document in `slot` is live and passes.
    #[inline]
    pub fn admits(&self, slot: Slot) -> bool {
        let Some(state) = self.states.get(slot as usize).copied() else { return false };
        if state == DEAD {
            return false;
        }
        if self.status_only {
            return self.status.is_none_or(|wanted| wanted == state);
        }
        self.passes(slot as usize, state)
    }

    fn passes(&self, index: usize, state: u8) -> bool {
        let docs = self.docs;
        let occurred = || (docs.occurred_seconds.get(index).unwrap_or_default(), docs.occurred_nanos.get(index).unwrap_or_default());
        self.status.is_none_or(|status| status == state)
            && (self.kinds.is_empty() || docs.kinds.get(index).is_some_and(|kind| self.kinds.contains(&kind)))
            && (self.namespaces.is_empty() || docs.namespaces.get(index).is_some_and(|namespace| self.namespaces.contains(&namespace)))
            && (self.tags.is_empty() || {
                let tags = docs.tags_of(index);
                self.tags.iter().all(|tag| tags.binary_search(tag).is_ok())
            })
            && (self.facets.is_empty() || {
                let facets = docs.facets_of(index);
                self.facets.iter().all(|facet| facets.binary_search(facet).is_ok())
            })
            && self.since.is_none_or(|since| occurred() >= since)
            && self.until.is_none_or(|until| occurred() <= until)
            && self.min_confidence.is_none_or(|min| docs.confidences.get(index).is_some_and(|confidence| confidence >= min))
    }
}

/// Namespace and tag names, each stored once.
#[derive(Default)]
struct Interner {
    names: Vec<Box<str>>,
    ids: FastMap<Box<str>, u32>,
}

impl Interner {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        // Names are namespaces and tags, a few thousand at most.
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    fn from_names(names: Vec<String>) -> Result<Interner, ImageError> {
        let mut interner = Interner::default();
        for name in names {
            let before = interner.names.len();
            if interner.intern(&name) as usize != before {
                return Err(invalid("a name twice"));
            }
        }
        Ok(interner)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Three documents: no tags or facets, then one of each, then two tags and a facet.
    fn table() -> DocTable {
        let tags = ["db".to_owned(), "pool".to_owned()];
        let facets = ["file:src/db.rs".to_owned()];
        let mut table = DocTable::default();
        for (n, id) in ["m1", "m2", "m3"].into_iter().enumerate() {
            table.push(&DocInput {
                id,
                kind: MemoryKind::ALL[n % MemoryKind::ALL.len()],
                status: Status::Active,
                namespace: ["learnings", "decisions"][n % 2],
                tags: &tags[..n],
                confidence: 0.5,
                occurred_at: DateTime::from_timestamp(n as i64, 0).unwrap_or_default(),
                text: "",
                facets: &facets[..n.min(1)],
            });
        }
        table
    }

    /// Each damage a look-up would follow out of bounds is refused, and says what it found.
    #[test]
    fn a_damaged_document_column_is_refused_with_what_is_wrong() {
        assert!(table().check().is_ok());
        let damages: [(&str, fn(&mut DocTable)); 12] = [
            ("document columns of different lengths", |table| table.kinds.push(0)),
            ("unknown status", |table| table.states.set(1, Status::ALL.len() as u8)),
            ("dead count", |table| table.states.set(1, DEAD)),
            ("unknown kind", |table| table.kinds.set(2, MemoryKind::ALL.len() as u8)),
            ("name out of range", |table| table.namespaces.set(0, 99)),
            ("name out of range", |table| table.tags.set(0, 99)),
            ("name out of range", |table| table.facets.set(1, 99)),
            ("tags out of range", |table| table.tag_counts.set(2, 3)),
            ("tags out of range", |table| table.tag_starts.set(2, u64::MAX)),
            ("facets out of range", |table| table.facet_starts.set(1, 5)),
            ("ids out of range", |table| table.id_ends.set(0, 5)),
            ("ids out of range", |table| table.id_ends.set(2, 7)),
        ];
        for (expected, damage) in damages {
            let mut damaged = table();
            damage(&mut damaged);
            let error = damaged.check().expect_err(expected).to_string();
            assert!(error.contains(expected), "expected {expected:?}, got {error:?}");
        }
    }
}
