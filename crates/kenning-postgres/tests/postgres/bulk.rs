//! Bulk loads and the vector index: a large batch is copied in, its vectors wait outside the
//! indexes (searched exactly) until the catch-up builds a bulk index over them in one pass or,
//! for a small backlog, moves them into the live index; the index of an older schema, which
//! covered every vector, is replaced by the live one. Searches find every vector throughout.

use kenning_conformance::fixtures::memory;
use kenning_core::{Embedding, Memory, MemoryStore, SearchFilter};
use kenning_postgres::CatchUp;

use super::*;

const MODEL: &str = "bulk-model-8";

/// The vector of memory `n`: eight pseudo-random components (splitmix64), the same on every run.
fn vector(n: usize) -> Vec<f32> {
    let mut state = n as u64;
    (0..8)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn batch(first: usize, count: usize) -> Vec<(Memory, Option<Embedding>)> {
    (first..first + count)
        .map(|n| {
            let memory = memory(&format!("bulk-{n:05}"), "learnings", &format!("Bulk-loaded note number {n} about topic {}.", n % 13));
            (memory, Some(Embedding { model: MODEL.to_owned(), vector: vector(n) }))
        })
        .collect()
}

fn nearest(store: &PostgresStore, n: usize) -> Option<String> {
    let hits = store.search_vector(&vector(n), MODEL, &SearchFilter::active(), 5).unwrap();
    hits.first().map(|hit| hit.id.to_string())
}

/// The store's vector indexes: each index's name and definition.
fn indexes(schema: &str) -> Vec<(String, String)> {
    let mut client = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    client
        .query("SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = $1 AND indexdef LIKE '%USING hnsw%' ORDER BY 1", &[&schema])
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[test]
fn bulk_loaded_vectors_are_found_before_and_after_the_index_catches_up() {
    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("bulk");
    let store = PostgresStore::open(&settings(&schema)).unwrap();
    // One vector written alone: it makes the model's live index and goes into it.
    store.insert(&batch(0, 1)).unwrap();
    for first in (1..3001).step_by(1000) {
        store.insert(&batch(first, 1000)).unwrap();
    }
    // Before the catch-up the loaded vectors are the backlog, found by an exact search.
    for n in [0, 1, 1500, 3000] {
        assert_eq!(nearest(&store, n), Some(format!("bulk-{n:05}")), "before the catch-up");
    }
    let status = store.stats().unwrap();
    assert!(status.warnings.iter().any(|warning| warning.contains("3000 vectors") && warning.contains("wait for the vector index")), "{:?}", status.warnings);

    let done = store.catch_up_vector_index().unwrap();
    assert_eq!(done, CatchUp { bulk_indexes_built: 1, vectors_in_bulk_index: 3000, vectors_moved_to_live: 0 });
    let names: Vec<String> = indexes(&schema).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("embeddings_bulk_") && names[1].starts_with("embeddings_live_"), "{names:?}");
    assert!(store.stats().unwrap().warnings.is_empty());
    for n in [0, 1, 1500, 3000] {
        assert_eq!(nearest(&store, n), Some(format!("bulk-{n:05}")), "after the catch-up");
    }

    // A small load after that is moved into the live index, not rebuilt.
    store.insert(&batch(3001, 100)).unwrap();
    assert_eq!(nearest(&store, 3050), Some("bulk-03050".to_owned()));
    let done = store.catch_up_vector_index().unwrap();
    assert_eq!(done, CatchUp { bulk_indexes_built: 0, vectors_in_bulk_index: 0, vectors_moved_to_live: 100 });
    assert_eq!(nearest(&store, 3050), Some("bulk-03050".to_owned()));

    // A load as large as what the bulk index covers builds a new one, which replaces it.
    for first in (3101..6101).step_by(1000) {
        store.insert(&batch(first, 1000)).unwrap();
    }
    let done = store.catch_up_vector_index().unwrap();
    assert_eq!(done.bulk_indexes_built, 1);
    assert_eq!(done.vectors_in_bulk_index, 6000);
    let bulk: Vec<String> = indexes(&schema).into_iter().map(|(name, _)| name).filter(|name| name.starts_with("embeddings_bulk_")).collect();
    assert_eq!(bulk.len(), 1, "{bulk:?}");
    assert_eq!(nearest(&store, 5000), Some("bulk-05000".to_owned()));
    // A vector rewritten one by one leaves the bulk index for the live one.
    let (mut moved, _) = batch(5000, 1).remove(0);
    let previous = kenning_core::MemoryVersion { version: moved.version, superseded_at: moved.updated_at, reason: "edited".into(), memory: moved.clone() };
    moved.version += 1;
    moved.content.push_str(" Edited.");
    store.replace(&moved, &previous, Some(&Embedding { model: MODEL.to_owned(), vector: vector(5000) })).unwrap();
    assert_eq!(nearest(&store, 5000), Some("bulk-05000".to_owned()));
    store.drop_schema().unwrap();
}

#[test]
fn an_older_schemas_vector_index_is_replaced_by_the_live_one() {
    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("legacy_index");
    kenning_postgres::migrate_to(&settings(&schema), 5).unwrap();
    // The index schema 5 made for a model's first vectors, over every vector of the model, named
    // by an FNV-1a hash of the model and dimension.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in MODEL.bytes().chain(8usize.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let legacy = format!("embeddings_hnsw_{hash:016x}");
    let mut client = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "SET search_path = {schema}, public; CREATE INDEX {legacy} ON embeddings USING hnsw ((vector::vector(8)) vector_cosine_ops) \
             WHERE model = '{MODEL}' AND dim = 8"
        ))
        .unwrap();
    let store = PostgresStore::open(&settings(&schema)).unwrap();
    store.insert(&batch(0, 10)).unwrap();
    // The older index serves the live part until the live index replaces it.
    assert_eq!(indexes(&schema).into_iter().map(|(name, _)| name).collect::<Vec<_>>(), [legacy.clone()]);
    assert_eq!(nearest(&store, 3), Some("bulk-00003".to_owned()));
    store.catch_up_vector_index().unwrap();
    let names: Vec<String> = indexes(&schema).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("embeddings_live_"), "{names:?}");
    assert_eq!(nearest(&store, 3), Some("bulk-00003".to_owned()));
    store.drop_schema().unwrap();
}
