//! The vector leg: how vectors are stored, and exact nearest-neighbour search over them.
//!
//! Vectors are BLOBs of little-endian `f32`. Search reads every stored vector of the query's
//! model that passes the filter and keeps the best `limit` by dot product, which is cosine
//! similarity because embedders return L2-normalised vectors. That is exact and needs no index
//! to keep in sync. At ten thousand 384-dimensional vectors a query takes around ten
//! milliseconds, most of it SQLite stepping through 15 MB of BLOBs; the dot products are two.
//! Holding the vectors in memory is the next step if that becomes too slow.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};

use kenning_core::{Embedding, MemoryId, ScoredId, SearchFilter};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use crate::error::{Error, Result};
use crate::filter;

pub(crate) fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

pub(crate) fn decode(blob: &[u8]) -> Result<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return Err(Error::Corrupt(format!("a stored vector is {} bytes, not a whole number of f32s", blob.len())));
    }
    Ok(blob.chunks_exact(4).map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])).collect())
}

/// Stores `embedding` as the vector of `id` for its model, replacing an earlier one.
pub(crate) fn put(conn: &Connection, id: &str, embedding: &Embedding) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO embeddings (memory_id, model, dim, vector) VALUES (?, ?, ?, ?)")?
        .execute(params![id, embedding.model, embedding.vector.len() as i64, encode(&embedding.vector)])?;
    Ok(())
}

/// Drops every vector of `id`, whichever model made it.
pub(crate) fn delete_all(conn: &Connection, id: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM embeddings WHERE memory_id = ?")?.execute([id])?;
    Ok(())
}

/// The vector of `id` written last, if it has any.
pub(crate) fn latest(conn: &Connection, id: &str) -> Result<Option<Embedding>> {
    let row = conn
        .prepare_cached("SELECT model, vector FROM embeddings WHERE memory_id = ? ORDER BY rowid DESC LIMIT 1")?
        .query_row([id], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)))
        .optional()?;
    row.map(|(model, blob)| Ok(Embedding { model, vector: decode(&blob)? })).transpose()
}

/// The `limit` memories passing `filter` whose vectors from `model` are closest to `query`.
/// Vectors of another length than the query cannot be compared and are passed over.
///
/// The memories passing the filter are collected first and the vectors scanned on their own:
/// that is two sequential scans, where joining each vector to its memory would cost an index
/// lookup per vector and, at ten thousand vectors, about as much again as the scan itself.
pub(crate) fn search(
    conn: &Connection,
    query: &[f32],
    model: &str,
    filter: &SearchFilter,
    limit: usize,
) -> Result<Vec<ScoredId>> {
    if limit == 0 || query.is_empty() {
        return Ok(Vec::new());
    }
    let allowed = if *filter == SearchFilter::default() { None } else { Some(passing(conn, filter)?) };
    if allowed.as_ref().is_some_and(HashSet::is_empty) {
        return Ok(Vec::new());
    }

    let mut best = TopK::new(limit);
    let mut statement = conn.prepare_cached("SELECT memory_id, vector FROM embeddings WHERE model = ? AND dim = ?")?;
    let mut rows = statement.query(params![model, query.len() as i64])?;
    while let Some(row) = rows.next()? {
        let (ValueRef::Text(id), ValueRef::Blob(blob)) = (row.get_ref(0)?, row.get_ref(1)?) else {
            return Err(Error::Corrupt("a stored vector row does not hold a text id and a BLOB".to_owned()));
        };
        let id = std::str::from_utf8(id).map_err(|error| Error::Corrupt(error.to_string()))?;
        if allowed.as_ref().is_some_and(|allowed| !allowed.contains(id)) {
            continue;
        }
        if blob.len() != query.len() * 4 {
            return Err(Error::Corrupt(format!("a stored vector's length disagrees with its dim of {}", query.len())));
        }
        let score = dot(query, blob);
        if best.admits(score) {
            best.push(score, id.to_owned());
        }
    }
    best.into_sorted()
        .into_iter()
        .map(|(score, id)| Ok(ScoredId { id: MemoryId::parse(&id).map_err(|e| Error::Corrupt(e.to_string()))?, score }))
        .collect()
}

fn passing(conn: &Connection, filter: &SearchFilter) -> Result<HashSet<String>> {
    let condition = filter::condition(filter);
    let mut statement = conn.prepare_cached(&format!("SELECT m.id FROM memories m WHERE {}", condition.sql))?;
    let ids = statement.query_map(params_from_iter(condition.params), |row| row.get(0))?;
    Ok(ids.collect::<rusqlite::Result<_>>()?)
}

/// The dot product of `query` with a vector still in its stored little-endian bytes, which
/// saves decoding every candidate into a fresh allocation. Eight independent sums let the
/// compiler use SIMD lanes, which it may not do for one running sum of floats.
fn dot(query: &[f32], blob: &[u8]) -> f64 {
    let mut sums = [0f32; 8];
    let mut query_chunks = query.chunks_exact(8);
    let mut blob_chunks = blob.chunks_exact(32);
    for (q, b) in (&mut query_chunks).zip(&mut blob_chunks) {
        for lane in 0..8 {
            let at = lane * 4;
            sums[lane] += q[lane] * f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        }
    }
    let mut total: f32 = sums.iter().sum();
    for (q, b) in query_chunks.remainder().iter().zip(blob_chunks.remainder().chunks_exact(4)) {
        total += q * f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    f64::from(total)
}

/// The best `k` (score, id) pairs seen so far; ties go to the smaller id so results are stable.
struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Candidate>>,
}

#[derive(PartialEq)]
struct Candidate {
    score: f64,
    id: String,
}

impl Eq for Candidate {}

impl Ord for Candidate {
    /// Better candidates are greater: a higher score, or an equal score and a smaller id.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK { k, heap: BinaryHeap::with_capacity(k + 1) }
    }

    /// A cheap pre-check so that ids are only copied for scores that may make the cut.
    fn admits(&self, score: f64) -> bool {
        !score.is_nan()
            && (self.heap.len() < self.k || self.heap.peek().is_some_and(|Reverse(worst)| score >= worst.score))
    }

    fn push(&mut self, score: f64, id: String) {
        self.heap.push(Reverse(Candidate { score, id }));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    fn into_sorted(self) -> Vec<(f64, String)> {
        // Ascending order of `Reverse` is best first.
        self.heap.into_sorted_vec().into_iter().map(|Reverse(c)| (c.score, c.id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_dot_matches_a_plain_sum() {
        let a: Vec<f32> = (0..19).map(|n| n as f32 * 0.25 - 2.0).collect();
        let b: Vec<f32> = (0..19).map(|n| 1.0 / (n as f32 + 1.0)).collect();
        assert_eq!(decode(&encode(&a)).unwrap(), a);
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &encode(&b)) - f64::from(plain)).abs() < 1e-5);
    }

    #[test]
    fn a_truncated_blob_is_reported() {
        assert!(decode(&[0, 0, 128]).is_err());
    }

    #[test]
    fn top_k_keeps_the_best_and_breaks_ties_by_id() {
        let mut top = TopK::new(2);
        for (score, id) in [(0.1, "a"), (0.9, "b"), (0.5, "d"), (0.5, "c"), (0.2, "e")] {
            if top.admits(score) {
                top.push(score, id.to_owned());
            }
        }
        assert_eq!(top.into_sorted(), [(0.9, "b".to_owned()), (0.5, "c".to_owned())]);
    }
}
