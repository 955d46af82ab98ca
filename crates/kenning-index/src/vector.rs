//! The vector leg: nearest neighbours by cosine similarity among one model's vectors.
//!
//! Every vector is held twice, compactly: as 8-bit integers with a per-vector scale (a quarter
//! of its `f32` size), and as a binary code of the signs of its components (one bit a
//! dimension), or of only the leading components of its 8-bit values when those carry nearly
//! all the variance. The 8-bit values hold a vector's difference from the index's centre, the
//! mean of its first [`CENTRE_ROWS`] vectors, rather than the vector itself: a model's vectors share a
//! large common part (the built-in model's mean vector has a length of 0.74) that 8 bits would
//! spend their steps on, so the difference is rounded about 2.5 times as finely, and more of
//! the exact ten nearest are found (0.977 to 0.989 at 100k, `kenning-bench latency`). A small
//! store is searched exactly over the 8-bit vectors. A larger one is searched in two steps: the Hamming distance
//! between binary codes, a few instructions a vector, picks the closest candidates (a few
//! hundred, and one per 125 vectors in a large store), and the 8-bit dot product ranks those. How close the two-step answer stays to
//! the exact one is measured by `kenning-bench`, not assumed.
//!
//! Once an index is written as an image, its rows are also linked in a [`Graph`], and a search
//! walks the graph for them instead of scanning their codes: it scores a few thousand rows
//! whatever the store's size. Rows added since the image was written are not linked yet and are
//! searched as above; a filter that leaves out most rows also sends a search back to the scan,
//! since the graph's walk would meet too few rows it admits.

use std::collections::HashMap;
use std::io::{self, Seek, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::column::Column;
use crate::documents::{CompiledFilter, Slot};
use crate::graph::{Graph, RowScores};
use crate::image::{ImageError, ImageReader, ImageWriter, invalid};
use crate::topk::TopK;

/// Up to this many vectors passing the filter, every one is scored: the exact answer costs
/// little more than the two-step one.
const EXACT_ROWS: usize = 4096;
/// How many candidates the binary codes pass on per result asked for, and at least.
const CANDIDATES_PER_RESULT: usize = 10;
const MIN_CANDIDATES: usize = 400;
/// And at least one candidate per this many rows: the more vectors, the more of them fall
/// between the query's true neighbours in Hamming distance.
const ROWS_PER_CANDIDATE: usize = 125;
/// From this many rows on, the scan of binary codes is split across the machine's cores: about
/// a millisecond's work, worth the tens of microseconds it takes to start a thread.
const PARALLEL_SCAN_ROWS: usize = 131_072;
/// How many of the nearest rows a walk of the graph keeps, at least, and per result asked
/// for: recall's vector leg asks for 100, and at a million rows keeping 200 found 0.9725 of the
/// exact ten nearest (walk p50 1.23 ms), 300 found 0.9805 (1.54 ms) and 400 found 0.9830
/// (1.77 ms) (`kenning-bench vectors --rows 1000000`).
const EF_SEARCH: usize = 100;
const EF_PER_RESULT: usize = 4;
/// A graph search that admitted fewer than one in this many of the rows it scored is redone
/// by the scan: the filter leaves out most rows, and the walk meets too few of those it keeps.
const GRAPH_ADMITTED_SHARE: usize = 2;
/// When an index reaches this many rows it takes their mean as its centre and quantises every
/// row again as its difference from it; later rows are quantised against the same centre.
/// Enough rows for the mean to hold most of the common part, few enough that few rows pay the
/// second rounding.
const CENTRE_ROWS: usize = 1024;

/// Numbers each index made in this process, so that a graph linked for one is never written
/// with another.
static LINEAGES: AtomicU64 = AtomicU64::new(0);

/// Marks a row whose slot's vector was replaced or dropped, and a slot without a row.
const NONE: u32 = u32::MAX;

/// How many leading components a binary code covers at most, in 64-bit words, when they carry
/// at least [`SHORT_CODE_SHARE`] of the rows' variance about the centre: the built-in model's
/// vectors are rotated onto their principal axes, so their first 256 of 384 components carry
/// nearly all of it, and a code of those alone reads two thirds of the bytes for as good a
/// shortlist (recall@10 0.9890 against 0.9883 for the full code of the uncentred vectors,
/// `kenning-bench vectors --rows 100000`). A model whose variance is spread over all its
/// components keeps a bit for each.
const SHORT_CODE_WORDS: usize = 4;
const SHORT_CODE_SHARE: f64 = 0.9;

/// Rows of vectors: each row's binary code, 8-bit values and scale.
#[derive(Default, Clone)]
struct Rows {
    codes: Column<u64>,
    values: Column<i8>,
    scales: Column<f32>,
}

pub(crate) struct VectorIndex {
    dims: usize,
    /// 64-bit words per binary code. A full code has a bit for each component of a row's vector,
    /// set where it is positive. A short one, taken when the centre is fixed if the first
    /// [`SHORT_CODE_WORDS`] words' components carry most of the variance about it, has a bit
    /// for each of those components of the row's 8-bit values, its difference from the centre.
    words: usize,
    /// What every row's 8-bit values are the difference from: empty until the index has held
    /// [`CENTRE_ROWS`] rows (the values are then the vectors themselves), then fixed.
    centre: Vec<f32>,
    /// The vectors of the rows added while there is no centre yet, by slot, so that fixing it
    /// quantises them from their own values rather than rounding them twice.
    uncentred: HashMap<Slot, Vec<f32>>,
    /// Rows read in place from an image, never changed: a vector replaced there only marks its
    /// row dead. Rows added since live in `added`, numbered after these.
    base: Rows,
    base_rows: usize,
    added: Rows,
    /// The slot of each row, [`NONE`] for a dead row.
    row_slots: Column<Slot>,
    /// The row of each slot, [`NONE`] for a slot without a vector.
    slot_rows: Column<u32>,
    dead_rows: usize,
    /// Links the image's rows `0..graph.rows()`, as read from the image.
    graph: Graph,
    /// This index among those of the process, and how many times a row it added was moved or
    /// dropped: a graph linked from a copy of its rows is written only while both are as they
    /// were when the copy was taken.
    lineage: u64,
    moves: u64,
}

impl VectorIndex {
    pub fn new(dims: usize) -> VectorIndex {
        VectorIndex {
            dims,
            words: dims.div_ceil(64),
            centre: Vec::new(),
            uncentred: HashMap::new(),
            base: Rows::default(),
            base_rows: 0,
            added: Rows::default(),
            row_slots: Column::default(),
            slot_rows: Column::default(),
            dead_rows: 0,
            graph: Graph::default(),
            lineage: LINEAGES.fetch_add(1, Ordering::Relaxed),
            moves: 0,
        }
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    fn rows(&self) -> usize {
        self.row_slots.len()
    }

    /// Rows the graph links.
    pub fn linked_rows(&self) -> usize {
        self.graph.rows()
    }

    /// Rows an image would link that the graph does not: none in an index of fewer than
    /// `min_rows` rows (and never fewer than an exact search covers).
    pub fn unlinked_rows(&self, min_rows: usize) -> usize {
        let rows = self.rows();
        if rows < min_rows.max(EXACT_ROWS) { 0 } else { rows - self.graph.rows().min(rows) }
    }

    /// Rows whose vectors were replaced or dropped but are still stored.
    pub fn dead_rows(&self) -> usize {
        self.dead_rows
    }

    /// Stores `vector` (of this index's length) as the vector of `slot`, replacing its old one.
    pub fn set(&mut self, slot: Slot, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dims);
        let (values, scale) = quantise(vector, &self.centre);
        // A store sets every vector of a changed record again, most often the one it holds: that
        // row is kept where it is, so it stays linked in the graph and a linking under way for
        // the next file is not made void by a row moved for nothing.
        if self.holds(slot, vector, &values, scale) {
            return;
        }
        self.remove(slot);
        // A store holds far fewer than four billion vectors.
        let row = self.rows() as u32;
        self.added.values.to_mut().extend_from_slice(&values);
        self.added.scales.push(scale);
        let code = self.code(vector, &values);
        self.added.codes.to_mut().extend(code);
        self.row_slots.push(slot);
        if self.centre.is_empty() {
            self.uncentred.insert(slot, vector.to_vec());
        }
        let slot_rows = self.slot_rows.to_mut();
        if slot_rows.len() <= slot as usize {
            slot_rows.resize(slot as usize + 1, NONE);
        }
        slot_rows[slot as usize] = row;
        if self.centre.is_empty() && self.rows() - self.dead_rows >= CENTRE_ROWS && self.graph.rows() == 0 {
            self.recentre();
        }
    }

    /// Whether `slot`'s row already holds `vector`, which quantises to `values` and `scale`.
    fn holds(&self, slot: Slot, vector: &[f32], values: &[i8], scale: f32) -> bool {
        let Some(row) = self.slot_rows.get(slot as usize).filter(|row| *row != NONE) else { return false };
        let row = row as usize;
        let (part, at) = if row < self.base_rows { (&self.base, row) } else { (&self.added, row - self.base_rows) };
        let held = part.values.as_slice().get(at * self.dims..(at + 1) * self.dims);
        let held_scale = part.scales.get(at);
        let code = part.codes.as_slice().get(at * self.words..(at + 1) * self.words).unwrap_or_default();
        held == Some(values)
            && held_scale.is_some_and(|held| held.to_bits() == scale.to_bits())
            && code.iter().copied().eq(self.code(vector, values))
            // Without a centre the vector itself is kept too, to be centred later.
            && (!self.centre.is_empty() || self.uncentred.get(&slot).is_some_and(|kept| kept.as_slice() == vector))
    }

    /// Takes the mean of the live rows as the centre and stores every live row again as its
    /// difference from it, in row order, so the index holds them all in memory from then on.
    /// Rows added in this process are quantised from their vectors; only those read from an
    /// image written before the index had a centre are rounded a second time.
    fn recentre(&mut self) {
        let mut uncentred = std::mem::take(&mut self.uncentred);
        let views = self.row_views();
        let row_slots = self.row_slots.as_slice();
        let live: Vec<(Slot, Vec<f32>)> = (0..self.rows())
            .filter(|row| row_slots[*row] != NONE)
            .map(|row| {
                let slot = row_slots[row];
                (slot, uncentred.remove(&slot).unwrap_or_else(|| views.vector(row)))
            })
            .collect();
        let mut centre = vec![0f32; self.dims];
        for (_, vector) in &live {
            for (sum, value) in centre.iter_mut().zip(vector) {
                *sum += value;
            }
        }
        let count = live.len().max(1) as f32;
        centre.iter_mut().for_each(|sum| *sum /= count);
        let mut centred = VectorIndex::new(self.dims);
        centred.words = code_words(&live, &centre);
        centred.centre = centre;
        for (slot, vector) in &live {
            centred.set(*slot, vector);
        }
        *self = centred;
    }

    /// Drops the vector of `slot`. A row added in memory is filled with the last added row; a
    /// row read from an image is marked dead.
    pub fn remove(&mut self, slot: Slot) {
        self.uncentred.remove(&slot);
        let Some(row) = self.slot_rows.get(slot as usize).filter(|row| *row != NONE) else { return };
        self.slot_rows.set(slot as usize, NONE);
        let row = row as usize;
        if row < self.base_rows {
            self.row_slots.set(row, NONE);
            self.dead_rows += 1;
            return;
        }
        self.moves += 1;
        let last = self.rows() - 1;
        let (dims, words) = (self.dims, self.words);
        let (from, to) = (last - self.base_rows, row - self.base_rows);
        let row_slots = self.row_slots.to_mut();
        if row != last {
            let moved = row_slots[last];
            row_slots[row] = moved;
            let added = &mut self.added;
            let scales = added.scales.to_mut();
            scales[to] = scales[from];
            added.values.to_mut().copy_within(from * dims..(from + 1) * dims, to * dims);
            added.codes.to_mut().copy_within(from * words..(from + 1) * words, to * words);
            if moved != NONE {
                self.slot_rows.set(moved as usize, row as u32);
            }
        }
        row_slots.pop();
        self.added.scales.to_mut().pop();
        self.added.values.to_mut().truncate(from * dims);
        self.added.codes.to_mut().truncate(from * words);
    }

    /// The `limit` slots admitted by `filter` whose vectors are closest to `query` (L2-normalised,
    /// of this index's length), best first, with their cosine similarities.
    pub fn search(&self, query: &[f32], filter: &CompiledFilter<'_>, limit: usize) -> Vec<(f64, Slot)> {
        let rows = self.rows();
        if limit == 0 || rows == self.dead_rows {
            return Vec::new();
        }
        let views = self.row_views();
        // Rows are scored against their difference from the centre; the query's dot product
        // with the centre, the same for every row, makes the scores cosines again.
        let offset = views.offset(query);
        let integer = views.query(query);
        let (mut best, unlinked) = match self.search_graph(&views, &integer, offset, filter, limit) {
            Some(best) => (best, self.graph.rows()..rows),
            None => (TopK::new(limit), 0..rows),
        };
        let row_slots = self.row_slots.as_slice();
        let admitted = |row: usize| filter.admits(row_slots[row]);
        let candidates = self.candidates(query, admitted, limit, unlinked);
        for (position, &row) in candidates.iter().enumerate() {
            // The candidates are scattered over the whole array, so each row is a cache miss
            // the hardware cannot foresee; asking for a row a few candidates ahead overlaps
            // those misses with the arithmetic, and the answer is the same.
            if let Some(&ahead) = candidates.get(position + PREFETCH_AHEAD) {
                views.prefetch(ahead);
            }
            let score = f64::from(views.score(&integer, row) + offset);
            if best.admits(score) {
                let slot = row_slots[row];
                if let Some(id) = filter.admit_id(slot) {
                    best.push(score, slot, id);
                }
            }
        }
        best.into_sorted()
    }

    /// The best `limit` of the linked rows that a walk of the graph meets, or `None` when
    /// there is no graph or `filter` left out most of the rows the walk scored.
    fn search_graph<'f>(&self, views: &RowsView<'_>, query: &IntegerQuery, offset: f32, filter: &CompiledFilter<'f>, limit: usize) -> Option<TopK<'f>> {
        if self.graph.rows() == 0 {
            return None;
        }
        let row_slots = self.row_slots.as_slice();
        let mut best = TopK::new(limit);
        let (mut scored, mut admitted) = (0usize, 0usize);
        self.graph.search(views, query, EF_SEARCH.max(EF_PER_RESULT * limit), |row, score| {
            scored += 1;
            let Some(&slot) = row_slots.get(row) else { return };
            if !filter.admits(slot) {
                return;
            }
            admitted += 1;
            let score = f64::from(score + offset);
            if best.admits(score)
                && let Some(id) = filter.admit_id(slot)
            {
                best.push(score, slot, id);
            }
        });
        (admitted * GRAPH_ADMITTED_SHARE >= scored).then_some(best)
    }

    /// The rows of `range` to score exactly: every admitted one when they are few, else the
    /// admitted ones nearest by their binary codes.
    fn candidates(&self, query: &[f32], admitted: impl Fn(usize) -> bool + Sync, limit: usize, range: Range<usize>) -> Vec<usize> {
        let wanted = limit.saturating_mul(CANDIDATES_PER_RESULT).max(MIN_CANDIDATES).max(range.len() / ROWS_PER_CANDIDATE);
        if range.len() <= EXACT_ROWS.max(wanted) {
            range.filter(|row| admitted(*row)).collect()
        } else {
            self.closest_codes(query, admitted, wanted, range)
        }
    }

    /// The `wanted` admitted rows of `range` whose binary codes are nearest the query's in
    /// Hamming distance, or every admitted row when there are no more than [`EXACT_ROWS`].
    /// Distances are small integers, so a histogram of them gives the cut-off distance without
    /// sorting: every row at or nearer than it is taken. Rows at the cut-off are as near as one
    /// another by their codes, so all of them go on to the 8-bit ranking rather than the first few.
    fn closest_codes(&self, query: &[f32], admitted: impl Fn(usize) -> bool + Sync, wanted: usize, range: Range<usize>) -> Vec<usize> {
        let code = self.query_code(query);
        let mut distances = vec![NOT_ADMITTED; range.len()];
        let mut histogram = vec![0usize; self.dims + 1];
        self.code_distances(range.start, &code, &admitted, &mut distances, &mut histogram);
        let admitted_rows: usize = histogram.iter().sum();
        let first = range.start;
        if admitted_rows <= EXACT_ROWS.max(wanted) {
            return rows_within(&distances, NOT_ADMITTED - 1, first);
        }
        let mut nearer = 0;
        let mut cut_off = 0;
        for (distance, count) in histogram.iter().enumerate() {
            if nearer + count >= wanted {
                cut_off = distance;
                break;
            }
            nearer += count;
        }
        rows_within(&distances, u16::try_from(cut_off).unwrap_or(NOT_ADMITTED - 1), first)
    }

    /// Fills in the Hamming distance to `code` of the code of every admitted row from
    /// `first_row` on, as many as `distances` holds, and counts rows per distance. A large
    /// index is split across the machine's cores, each part with a histogram of its own: the
    /// scan reads every code, so it is bound by memory and by the number of rows.
    fn code_distances(&self, first_row: usize, code: &[u64], admitted: &(impl Fn(usize) -> bool + Sync), distances: &mut [u16], histogram: &mut [usize]) {
        let rows = distances.len();
        let threads = if rows >= PARALLEL_SCAN_ROWS { crate::cores() } else { 1 };
        if threads <= 1 {
            self.code_distances_from(first_row, code, admitted, distances, histogram);
            return;
        }
        let share = rows.div_ceil(threads);
        let parts: Vec<Vec<usize>> = std::thread::scope(|scope| {
            let workers: Vec<_> = distances
                .chunks_mut(share)
                .enumerate()
                .map(|(part, distances)| {
                    scope.spawn(move || {
                        let mut histogram = vec![0usize; self.dims + 1];
                        self.code_distances_from(first_row + part * share, code, admitted, distances, &mut histogram);
                        histogram
                    })
                })
                .collect();
            workers.into_iter().map(|worker| worker.join().expect("the scan does not panic")).collect()
        });
        for part in parts {
            for (total, count) in histogram.iter_mut().zip(part) {
                *total += count;
            }
        }
    }

    /// [`VectorIndex::code_distances`] for the rows from `first_row` on, as many as
    /// `distances` holds, over the image's rows and then the added ones.
    fn code_distances_from(&self, first_row: usize, code: &[u64], admitted: &impl Fn(usize) -> bool, distances: &mut [u16], histogram: &mut [usize]) {
        let end_row = first_row + distances.len();
        let split = self.base_rows.clamp(first_row, end_row);
        let (in_base, in_added) = distances.split_at_mut(split - first_row);
        if !in_base.is_empty() {
            let codes = &self.base.codes.as_slice()[first_row * self.words..split * self.words];
            scan_codes(codes, self.words, first_row, code, admitted, in_base, histogram);
        }
        if !in_added.is_empty() {
            let (from, to) = (split - self.base_rows, end_row - self.base_rows);
            let codes = &self.added.codes.as_slice()[from * self.words..to * self.words];
            scan_codes(codes, self.words, split, code, admitted, in_added, histogram);
        }
    }

    /// Whether the codes are short: the signs of the rows' leading 8-bit values, their
    /// difference from the centre. Full codes are the signs of the vectors themselves.
    fn short_codes(&self) -> bool {
        self.words < self.dims.div_ceil(64)
    }

    /// The binary code of a row holding `vector`, quantised to `values`.
    fn code(&self, vector: &[f32], values: &[i8]) -> Vec<u64> {
        if self.short_codes() { sign_code(values).take(self.words).collect() } else { sign_code(vector).collect() }
    }

    /// The binary code of `query` as the rows' codes are made: with short codes, the signs of
    /// its difference from the centre over the components they cover.
    fn query_code(&self, query: &[f32]) -> Vec<u64> {
        if !self.short_codes() {
            return sign_code(query).collect();
        }
        let difference: Vec<f32> = query.iter().zip(&self.centre).map(|(value, centre)| value - centre).collect();
        sign_code(&difference).take(self.words).collect()
    }

    /// The image's rows and the added ones as plain slices, looked up once per search rather
    /// than once per row.
    fn row_views(&self) -> RowsView<'_> {
        RowsView::new(&self.base, &self.added, self.base_rows, self.dims, &self.centre)
    }

    #[cfg(test)]
    fn dot(&self, query: &[f32], row: usize) -> f32 {
        let views = self.row_views();
        views.score(&views.query(query), row) + views.offset(query)
    }

    /// A copy of what linking the rows the graph lacks needs, or `None` when it lacks none or
    /// the index has fewer than `min_rows` rows. Rows read from an image are shared, not copied.
    pub fn unlinked(&self, min_rows: usize) -> Option<Unlinked> {
        let rows = self.rows();
        if self.unlinked_rows(min_rows) == 0 {
            return None;
        }
        let copy = |rows: &Rows| Rows { codes: Column::default(), values: rows.values.clone(), scales: rows.scales.clone() };
        Some(Unlinked {
            dims: self.dims,
            centre: self.centre.clone(),
            base_rows: self.base_rows,
            base: copy(&self.base),
            added: copy(&self.added),
            rows,
            graph: self.graph.clone(),
            lineage: self.lineage,
            moves: self.moves,
        })
    }

    /// Writes the index, with `linked`'s graph if it was linked from this index's rows as they
    /// still are, else with the graph it was read with.
    pub fn write<W: Write + Seek>(&self, out: &mut ImageWriter<'_, W>, linked: Option<&Linked>) -> io::Result<()> {
        out.section(&[self.dims as u64, self.dead_rows as u64, self.words as u64])?;
        out.section(&self.centre)?;
        out.begin()?;
        out.part(self.base.codes.as_slice())?;
        out.part(self.added.codes.as_slice())?;
        out.end();
        out.begin()?;
        out.part(self.base.values.as_slice())?;
        out.part(self.added.values.as_slice())?;
        out.end();
        out.begin()?;
        out.part(self.base.scales.as_slice())?;
        out.part(self.added.scales.as_slice())?;
        out.end();
        out.section(self.row_slots.as_slice())?;
        out.section(self.slot_rows.as_slice())?;
        let graph = linked
            .filter(|linked| linked.lineage == self.lineage && linked.moves == self.moves && linked.graph.rows() <= self.rows())
            .map_or(&self.graph, |linked| &linked.graph);
        graph.write(out)
    }

    /// Reads what [`VectorIndex::write`] wrote for a table of `slots` slots, checking every
    /// value a search relies on.
    pub fn read(image: &mut ImageReader, slots: usize) -> Result<VectorIndex, ImageError> {
        let header = image.column::<u64>("vector header")?;
        let (dims, dead_rows) = (header.get(0).unwrap_or_default() as usize, header.get(1).unwrap_or_default() as usize);
        if dims == 0 || dims > usize::from(u16::MAX) - 1 {
            return Err(invalid("vector length"));
        }
        let mut index = VectorIndex::new(dims);
        index.words = header.get(2).unwrap_or_default() as usize;
        if index.words == 0 || index.words > dims.div_ceil(64) {
            return Err(invalid("vector code length"));
        }
        let centre = image.column::<f32>("vector centre")?;
        if !centre.as_slice().is_empty() && centre.len() != dims {
            return Err(invalid("vector centre"));
        }
        // Short codes are made from the differences from a centre, so an index has one.
        if index.short_codes() && centre.as_slice().is_empty() {
            return Err(invalid("vector code length"));
        }
        index.centre = centre.as_slice().to_vec();
        index.base = Rows { codes: image.column("codes")?, values: image.column("values")?, scales: image.column("scales")? };
        index.row_slots = image.column("row slots")?;
        index.slot_rows = image.column("slot rows")?;
        index.base_rows = index.row_slots.len();
        index.dead_rows = dead_rows;
        let rows = index.base_rows;
        if index.base.scales.len() != rows || index.base.values.len() != rows * dims || index.base.codes.len() != rows * index.words {
            return Err(invalid("vector rows"));
        }
        let row_slots = index.row_slots.as_slice();
        if row_slots.iter().filter(|slot| **slot == NONE).count() != dead_rows || index.slot_rows.len() > slots {
            return Err(invalid("dead vector rows"));
        }
        let slot_rows = index.slot_rows.as_slice();
        for (slot, row) in slot_rows.iter().enumerate() {
            if *row != NONE && row_slots.get(*row as usize).is_none_or(|owner| *owner as usize != slot) {
                return Err(invalid("slot rows"));
            }
        }
        if row_slots.iter().enumerate().any(|(row, slot)| *slot != NONE && slot_rows.get(*slot as usize).is_none_or(|back| *back as usize != row)) {
            return Err(invalid("row slots"));
        }
        index.graph = Graph::read(image, rows)?;
        Ok(index)
    }
}

/// How many candidates ahead of the one being scored the 8-bit ranking asks for a row: enough
/// for the memory's latency to pass while the rows before it are scored.
const PREFETCH_AHEAD: usize = 8;

/// The rows of an index that its graph lacks, copied (or shared from the image) so that they
/// can be linked without holding the index.
pub(crate) struct Unlinked {
    dims: usize,
    centre: Vec<f32>,
    base_rows: usize,
    base: Rows,
    added: Rows,
    rows: usize,
    graph: Graph,
    lineage: u64,
    moves: u64,
}

impl Unlinked {
    /// Links every row in a graph, or the rows up to the one it was at when `stop` was set:
    /// the work of seconds for a hundred thousand rows.
    pub fn link(self, stop: &AtomicBool) -> Linked {
        let views = RowsView::new(&self.base, &self.added, self.base_rows, self.dims, &self.centre).with_centre_dots(self.rows);
        Linked { graph: self.graph.extend(&views, self.rows, stop), lineage: self.lineage, moves: self.moves }
    }
}

/// A graph linking an index's rows, and which index and state of it it was linked from.
pub(crate) struct Linked {
    graph: Graph,
    lineage: u64,
    moves: u64,
}

/// One part of the rows (the image's, or those added since) as slices.
struct RowView<'a> {
    values: &'a [i8],
    scales: &'a [f32],
}

/// Both parts of the rows, numbered as the index numbers them, and the centre their values are
/// the differences from.
struct RowsView<'a> {
    parts: [RowView<'a>; 2],
    base_rows: usize,
    dims: usize,
    centre: &'a [f32],
    /// The centre's dot product with itself.
    centre_square: f32,
    /// Each row's 8-bit values' dot product with the centre, scaled back, when worked out ahead
    /// for linking, where every pair of rows needs both; empty otherwise.
    centre_dots: Vec<f32>,
}

impl<'a> RowsView<'a> {
    fn new(base: &'a Rows, added: &'a Rows, base_rows: usize, dims: usize, centre: &'a [f32]) -> RowsView<'a> {
        let parts = [base, added].map(|rows| RowView { values: rows.values.as_slice(), scales: rows.scales.as_slice() });
        let centre_square = centre.iter().map(|value| value * value).sum();
        RowsView { parts, base_rows, dims, centre, centre_square, centre_dots: Vec::new() }
    }

    /// This view with the dot products of the first `rows` rows with the centre worked out.
    fn with_centre_dots(mut self, rows: usize) -> RowsView<'a> {
        if !self.centre.is_empty() {
            self.centre_dots = (0..rows).map(|row| self.centre_dot(row)).collect();
        }
        self
    }

    /// The dot product of `row`'s scaled 8-bit values with the centre.
    fn centre_dot(&self, row: usize) -> f32 {
        if self.centre.is_empty() {
            return 0.0;
        }
        self.centre_dots.get(row).copied().unwrap_or_else(|| row_dot(&self.parts, self.base_rows, self.dims, self.centre, row))
    }

    /// What [`RowScores::score`] leaves out of `query`'s cosine with every row: its dot product
    /// with the centre.
    fn offset(&self, query: &[f32]) -> f32 {
        query.iter().zip(self.centre).map(|(a, b)| a * b).sum()
    }

    fn values(&self, row: usize) -> (&'a [i8], f32) {
        let (part, row) = locate(&self.parts, self.base_rows, row);
        (part.values.get(row * self.dims..(row + 1) * self.dims).unwrap_or_default(), part.scales.get(row).copied().unwrap_or_default())
    }
}

impl RowScores for RowsView<'_> {
    type Query = IntegerQuery;

    fn query(&self, vector: &[f32]) -> IntegerQuery {
        IntegerQuery::new(vector)
    }

    fn score(&self, query: &IntegerQuery, row: usize) -> f32 {
        let (values, scale) = self.values(row);
        dot_values(&query.values, values) as f32 * query.scale * scale
    }

    fn pair(&self, a: usize, b: usize) -> f32 {
        let ((a_values, a_scale), (b_values, b_scale)) = (self.values(a), self.values(b));
        dot_values(a_values, b_values) as f32 * a_scale * b_scale + self.centre_dot(a) + self.centre_dot(b) + self.centre_square
    }

    fn offset(&self, query: &[f32]) -> f32 {
        RowsView::offset(self, query)
    }

    fn vector(&self, row: usize) -> Vec<f32> {
        let (values, scale) = self.values(row);
        let centre = self.centre.iter().copied().chain(std::iter::repeat(0.0));
        values.iter().zip(centre).map(|(value, centre)| f32::from(*value) * scale + centre).collect()
    }

    fn prefetch(&self, row: usize) {
        prefetch_row(&self.parts, self.base_rows, self.dims, row);
    }
}

/// The part holding `row` and the row's position in it.
fn locate<'v, 'a>(rows: &'v [RowView<'a>; 2], base_rows: usize, row: usize) -> (&'v RowView<'a>, usize) {
    if row < base_rows { (&rows[0], row) } else { (&rows[1], row - base_rows) }
}

/// The dot product of `query` with the 8-bit vector of `row`, scaled back.
fn row_dot(rows: &[RowView<'_>; 2], base_rows: usize, dims: usize, query: &[f32], row: usize) -> f32 {
    let (rows, row) = locate(rows, base_rows, row);
    let values = rows.values.get(row * dims..(row + 1) * dims).unwrap_or_default();
    dot(query, values) * rows.scales.get(row).copied().unwrap_or_default()
}

/// With the CPU's 256-bit vector instructions the loop takes half the instructions, so they
/// are used when the CPU has them; the sums are added in the same order either way, so the
/// answer is the same to the bit.
fn dot(query: &[f32], values: &[i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just found to have the instructions the function is compiled for.
        return unsafe { dot_avx2(query, values) };
    }
    dot_portable(query, values)
}

/// Four independent sums of eight lanes each: with one, every addition waited for the one
/// before it in its lane (a 384-component row took some 200 cycles, the additions' latency);
/// with four, the additions of one step overlap.
#[inline(always)]
fn dot_portable(query: &[f32], values: &[i8]) -> f32 {
    const LANES: usize = 8;
    const SUMS: usize = 4;
    let mut sums = [[0f32; LANES]; SUMS];
    let mut query_chunks = query.chunks_exact(LANES * SUMS);
    let mut value_chunks = values.chunks_exact(LANES * SUMS);
    for (q, v) in (&mut query_chunks).zip(&mut value_chunks) {
        for (sum, (q, v)) in sums.iter_mut().zip(q.chunks_exact(LANES).zip(v.chunks_exact(LANES))) {
            for lane in 0..LANES {
                sum[lane] += q[lane] * f32::from(v[lane]);
            }
        }
    }
    let mut total: f32 = sums.iter().flatten().sum();
    for (q, v) in query_chunks.remainder().iter().zip(value_chunks.remainder()) {
        total += q * f32::from(*v);
    }
    total
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_avx2(query: &[f32], values: &[i8]) -> f32 {
    dot_portable(query, values)
}

/// A query's components as 16-bit integers with one scale, so that a row's 8-bit values are
/// multiplied and summed as integers: exact in any order, and fewer instructions than in
/// floating point, where every 8-bit value is first converted.
struct IntegerQuery {
    values: Vec<i16>,
    scale: f32,
}

impl IntegerQuery {
    fn new(query: &[f32]) -> IntegerQuery {
        let largest = query.iter().fold(0f32, |max, value| max.max(value.abs()));
        if largest == 0.0 || !largest.is_finite() {
            return IntegerQuery { values: vec![0; query.len()], scale: 0.0 };
        }
        // A row's products are summed in 32 bits; each is at most 127 times the largest value.
        let top = (f64::from(i32::MAX) / (127.0 * query.len() as f64)).clamp(1.0, f64::from(i16::MAX)).floor() as f32;
        let scale = largest / top;
        IntegerQuery { values: query.iter().map(|value| (value / scale).round() as i16).collect(), scale }
    }
}

/// The dot product of a row's 8-bit values with another row's (`i8`) or with a query made
/// integers (`i16`), with [`dot`]'s choice of instructions: the sum is exact, so every path
/// gives the same answer.
fn dot_values<T: Copy + Into<i32>>(a: &[T], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: as in `dot`.
        return unsafe { dot_values_avx2(a, b) };
    }
    dot_values_portable(a, b)
}

#[inline(always)]
fn dot_values_portable<T: Copy + Into<i32>>(a: &[T], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(x, y)| (*x).into() * i32::from(*y)).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_values_avx2<T: Copy + Into<i32>>(a: &[T], b: &[i8]) -> i32 {
    dot_values_portable(a, b)
}

/// Asks the CPU to bring the 8-bit vector and the scale of `row` into its cache; a hint only,
/// given where the instruction exists.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn prefetch_row(rows: &[RowView<'_>; 2], base_rows: usize, dims: usize, row: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let (rows, row) = locate(rows, base_rows, row);
        if let Some(values) = rows.values.get(row * dims..(row + 1) * dims) {
            for line in values.chunks(64) {
                // SAFETY: SSE is part of every x86_64 CPU, and a prefetch never faults; the
                // address is in a live slice anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr()) };
            }
        }
        if let Some(scale) = rows.scales.get(row) {
            // SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(scale).cast()) };
        }
    }
}

/// Symmetric 8-bit quantisation of `vector`'s difference from `centre` (none when empty): the
/// largest component maps to ±127.
fn quantise(vector: &[f32], centre: &[f32]) -> (Vec<i8>, f32) {
    let centre = centre.iter().copied().chain(std::iter::repeat(0.0));
    let difference: Vec<f32> = vector.iter().zip(centre).map(|(value, centre)| value - centre).collect();
    let largest = difference.iter().fold(0f32, |max, value| max.max(value.abs()));
    if largest == 0.0 || !largest.is_finite() {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    let values = difference.iter().map(|value| (value / scale).round().clamp(-127.0, 127.0) as i8).collect();
    (values, scale)
}

/// How many words the codes of an index centred on `centre` take, from its `live` vectors: the
/// short code when its components carry [`SHORT_CODE_SHARE`] of their variance about the centre.
fn code_words(live: &[(Slot, Vec<f32>)], centre: &[f32]) -> usize {
    let full = centre.len().div_ceil(64);
    let covered = SHORT_CODE_WORDS * 64;
    if full <= SHORT_CODE_WORDS {
        return full;
    }
    let mut variance = vec![0f64; centre.len()];
    for (_, vector) in live {
        for ((sum, value), centre) in variance.iter_mut().zip(vector).zip(centre) {
            *sum += f64::from(value - centre).powi(2);
        }
    }
    let total: f64 = variance.iter().sum();
    let leading: f64 = variance[..covered].iter().sum();
    if total > 0.0 && leading >= SHORT_CODE_SHARE * total { SHORT_CODE_WORDS } else { full }
}

/// One bit a component (of a vector, or of its 8-bit values), set where the component is
/// positive.
fn sign_code<T: Copy + Default + PartialOrd>(vector: &[T]) -> impl Iterator<Item = u64> + '_ {
    vector.chunks(64).map(|chunk| chunk.iter().enumerate().fold(0u64, |code, (bit, value)| code | (u64::from(*value > T::default()) << bit)))
}

fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Marks a row the filter left out.
const NOT_ADMITTED: u16 = u16::MAX;

/// The rows (`first` plus the offset) whose distance is at most `cut_off`. Most rows are
/// farther, and those to take are spread evenly: each block of rows gets a bit mask of its rows
/// to take (a comparison the compiler makes with vector instructions), and only the set bits
/// are visited, with no branch per row.
fn rows_within(distances: &[u16], cut_off: u16, first: usize) -> Vec<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: as in `dot`.
        return unsafe { rows_within_avx2(distances, cut_off, first) };
    }
    rows_within_portable(distances, cut_off, first)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn rows_within_avx2(distances: &[u16], cut_off: u16, first: usize) -> Vec<usize> {
    rows_within_portable(distances, cut_off, first)
}

#[inline(always)]
fn rows_within_portable(distances: &[u16], cut_off: u16, first: usize) -> Vec<usize> {
    const BLOCK: usize = 32;
    let mut rows = Vec::new();
    let (blocks, rest) = distances.as_chunks::<BLOCK>();
    for (index, block) in blocks.iter().enumerate() {
        let mut mask = 0u32;
        for (bit, distance) in block.iter().enumerate() {
            mask |= u32::from(*distance <= cut_off) << bit;
        }
        while mask != 0 {
            rows.push(first + index * BLOCK + mask.trailing_zeros() as usize);
            mask &= mask - 1;
        }
    }
    let rest_first = first + blocks.len() * BLOCK;
    rows.extend(rest.iter().enumerate().filter(|(_, distance)| **distance <= cut_off).map(|(offset, _)| rest_first + offset));
    rows
}

/// With the CPU's population-count instruction the loop is several times faster, so it is
/// used when the CPU has one.
fn scan_codes(codes: &[u64], words: usize, first_row: usize, code: &[u64], admitted: &impl Fn(usize) -> bool, distances: &mut [u16], histogram: &mut [usize]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU was just found to have the instruction the function is compiled for.
        unsafe { code_distances_popcnt(codes, words, first_row, code, admitted, distances, histogram) };
        return;
    }
    code_distances_portable(codes, words, first_row, code, admitted, distances, histogram);
}

#[inline(always)]
fn code_distances_portable(
    codes: &[u64],
    words: usize,
    first_row: usize,
    code: &[u64],
    admitted: &impl Fn(usize) -> bool,
    distances: &mut [u16],
    histogram: &mut [usize],
) {
    // The common lengths get a loop whose code length the compiler knows, so it unrolls the
    // comparison; the answer is the same.
    match words {
        4 => code_distances_fixed::<4>(codes, first_row, code, admitted, distances, histogram),
        6 => code_distances_fixed::<6>(codes, first_row, code, admitted, distances, histogram),
        8 => code_distances_fixed::<8>(codes, first_row, code, admitted, distances, histogram),
        12 => code_distances_fixed::<12>(codes, first_row, code, admitted, distances, histogram),
        16 => code_distances_fixed::<16>(codes, first_row, code, admitted, distances, histogram),
        24 => code_distances_fixed::<24>(codes, first_row, code, admitted, distances, histogram),
        _ => {
            for (offset, row_code) in codes.chunks_exact(words).enumerate() {
                if admitted(first_row + offset) {
                    let distance = hamming(code, row_code);
                    distances[offset] = distance as u16;
                    histogram[distance as usize] += 1;
                }
            }
        }
    }
}

/// [`code_distances_portable`] for codes of `WORDS` words.
#[inline(always)]
fn code_distances_fixed<const WORDS: usize>(
    codes: &[u64],
    first_row: usize,
    code: &[u64],
    admitted: &impl Fn(usize) -> bool,
    distances: &mut [u16],
    histogram: &mut [usize],
) {
    // The query's code has as many words as every row's, so this never returns early.
    let Ok(code) = <&[u64; WORDS]>::try_from(code) else { return };
    let (rows, _) = codes.as_chunks::<WORDS>();
    for ((offset, row_code), distance_slot) in rows.iter().enumerate().zip(distances.iter_mut()) {
        if admitted(first_row + offset) {
            let mut distance = 0;
            for word in 0..WORDS {
                distance += (code[word] ^ row_code[word]).count_ones();
            }
            *distance_slot = distance as u16;
            histogram[distance as usize] += 1;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn code_distances_popcnt(
    codes: &[u64],
    words: usize,
    first_row: usize,
    code: &[u64],
    admitted: &impl Fn(usize) -> bool,
    distances: &mut [u16],
    histogram: &mut [usize],
) {
    code_distances_portable(codes, words, first_row, code, admitted, distances, histogram);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantisation_keeps_dot_products_close() {
        let vector: Vec<f32> = (0..384).map(|n| ((n * 37 % 101) as f32 - 50.0) / 200.0).collect();
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        let vector: Vec<f32> = vector.iter().map(|v| v / norm).collect();
        let mut index = VectorIndex::new(384);
        index.set(7, &vector);
        let exact: f32 = vector.iter().map(|v| v * v).sum();
        assert!((index.dot(&vector, 0) - exact).abs() < 0.005);
    }

    #[test]
    fn rows_within_a_cut_off_are_those_a_row_by_row_test_takes() {
        let mut seed = 5u64;
        for length in [0, 1, 31, 32, 33, 1000, 4097] {
            let distances: Vec<u16> = (0..length)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    // A tenth of the rows left out, the rest at distances up to 256.
                    if seed >> 60 == 0 { NOT_ADMITTED } else { (seed >> 40) as u16 % 257 }
                })
                .collect();
            for cut_off in [0, 3, 40, 256, NOT_ADMITTED - 1] {
                let expected: Vec<usize> = (0..length).filter(|offset| distances[*offset] <= cut_off).map(|offset| 100 + offset).collect();
                assert_eq!(rows_within(&distances, cut_off, 100), expected, "{length} rows, cut-off {cut_off}");
            }
        }
    }

    #[test]
    fn a_scan_split_across_threads_finds_what_one_thread_finds() {
        let mut index = VectorIndex::new(64);
        let mut seed = 42u64;
        for slot in 0..PARALLEL_SCAN_ROWS as u32 + 1000 {
            let vector: Vec<f32> = (0..64)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            index.set(slot, &vector);
        }
        let code: Vec<u64> = sign_code(&[0.25; 64]).collect();
        let admitted = |row: usize| row % 3 != 0;
        let rows = index.rows();
        let (mut split, mut split_histogram) = (vec![NOT_ADMITTED; rows], vec![0; 65]);
        index.code_distances(0, &code, &admitted, &mut split, &mut split_histogram);
        let (mut single, mut single_histogram) = (vec![NOT_ADMITTED; rows], vec![0; 65]);
        index.code_distances_from(0, &code, &admitted, &mut single, &mut single_histogram);
        assert_eq!(split, single);
        assert_eq!(split_histogram, single_histogram);
        assert_eq!(split_histogram.iter().sum::<usize>(), (0..rows).filter(|row| admitted(*row)).count());
    }

    #[test]
    fn code_scans_of_every_length_count_as_hamming_does() {
        let mut seed = 9u64;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            seed
        };
        for words in 1..=25 {
            let rows = 50;
            let codes: Vec<u64> = (0..rows * words).map(|_| next()).collect();
            let code: Vec<u64> = (0..words).map(|_| next()).collect();
            let admitted = |row: usize| row % 4 != 1;
            let (mut distances, mut histogram) = (vec![NOT_ADMITTED; rows], vec![0; words * 64 + 1]);
            code_distances_portable(&codes, words, 100, &code, &|row| admitted(row - 100), &mut distances, &mut histogram);
            for (row, distance) in distances.iter().enumerate() {
                let expected = if admitted(row) { hamming(&code, &codes[row * words..(row + 1) * words]) as u16 } else { NOT_ADMITTED };
                assert_eq!(*distance, expected, "row {row} of codes of {words} words");
            }
            assert_eq!(histogram.iter().sum::<usize>(), (0..rows).filter(|row| admitted(*row)).count());
        }
    }

    #[test]
    fn removing_moves_the_last_row_into_the_gap() {
        let mut index = VectorIndex::new(2);
        index.set(1, &[1.0, 0.0]);
        index.set(2, &[0.0, 1.0]);
        index.set(3, &[-1.0, 0.0]);
        index.remove(1);
        assert_eq!(index.rows(), 2);
        assert_eq!(index.row_slots.as_slice(), [3, 2]);
        assert_eq!(index.slot_rows.get(3), Some(0));
        assert!(index.dot(&[-1.0, 0.0], 0) > 0.99);
        index.set(2, &[0.6, 0.8]);
        assert_eq!(index.rows(), 2);
        assert!(index.dot(&[0.6, 0.8], index.slot_rows.get(2).unwrap() as usize) > 0.99);
    }

    /// 1,100 unit vectors of 384 components, the components from `leading` on scaled by `scale`.
    fn index_of(leading: usize, scale: f32) -> VectorIndex {
        let mut index = VectorIndex::new(384);
        let mut seed = 7u64;
        for slot in 0..1100 {
            let raw: Vec<f32> = (0..384)
                .map(|component| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let value = (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                    if component < leading { value } else { scale * value }
                })
                .collect();
            let norm = raw.iter().map(|v| v * v).sum::<f32>().sqrt();
            index.set(slot, &raw.iter().map(|v| v / norm).collect::<Vec<f32>>());
        }
        index
    }

    #[test]
    fn codes_cover_the_leading_components_only_when_they_carry_most_of_the_variance() {
        assert!(!index_of(384, 1.0).centre.is_empty());
        assert_eq!(index_of(256, 0.15).words, SHORT_CODE_WORDS);
        assert_eq!(index_of(256, 0.5).words, 6);
        assert_eq!(index_of(384, 1.0).words, 6);
        // Until the centre is fixed, a code has a bit for every component.
        assert_eq!(VectorIndex::new(384).words, 6);
        assert_eq!(VectorIndex::new(200).words, 4);
    }

    #[test]
    fn hamming_counts_differing_signs() {
        let a: Vec<u64> = sign_code(&[1.0, -1.0, 1.0, -1.0]).collect();
        let b: Vec<u64> = sign_code(&[1.0, 1.0, -1.0, -1.0]).collect();
        assert_eq!(hamming(&a, &b), 2);
    }
}
