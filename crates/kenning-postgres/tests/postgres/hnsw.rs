//! Vector search in a store with HNSW indexes at the size of a real embedding model:
//! 384-dimension vectors, bulk-loaded and then indexed, checked against an exact search over the
//! same vectors in a store with `vector_index = "exact"`. Whether PostgreSQL scans the index or the table for 1,500 rows is
//! the planner's choice, which changes once the table is analysed, so the test asserts what the
//! searches find, not which plan found it.

use kenning_conformance::fixtures::memory;
use kenning_core::{Embedding, MemoryStore, SearchFilter};

use super::*;

const DIMENSIONS: usize = 384;
const MEMORIES: usize = 1500;
const QUERIES: usize = 40;
const MODEL: &str = "test-model-384";

/// xorshift64*: the same vectors on every run, without a dependency.
struct Vectors(u64);

impl Vectors {
    fn next_component(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vector(&mut self) -> Vec<f32> {
        (0..DIMENSIONS).map(|_| self.next_component()).collect()
    }
}

fn load(store: &PostgresStore, vectors: &[Vec<f32>]) {
    let batch: Vec<_> = vectors
        .iter()
        .enumerate()
        .map(|(index, vector)| {
            let memory = memory(&format!("vec-{index:05}"), "learnings", &format!("Memory number {index} of the HNSW test."));
            (memory, Some(Embedding { model: MODEL.to_owned(), vector: vector.clone() }))
        })
        .collect();
    for chunk in batch.chunks(250) {
        store.insert(chunk).unwrap();
    }
}

fn nearest(store: &PostgresStore, query: &[f32]) -> Vec<String> {
    store.search_vector(query, MODEL, &SearchFilter::default(), 10).unwrap().into_iter().map(|hit| hit.id.to_string()).collect()
}

#[test]
fn hnsw_search_over_384_dimensions_finds_what_an_exact_search_finds() {
    if !servers(&[PG_URL]) {
        return;
    }
    let mut generator = Vectors(0x9e37_79b9_7f4a_7c15);
    let vectors: Vec<Vec<f32>> = (0..MEMORIES).map(|_| generator.vector()).collect();

    let schema = fresh_schema("hnsw");
    let indexed = PostgresStore::open(&settings(&schema)).unwrap();
    let exact_schema = fresh_schema("hnsw_exact");
    let exact = PostgresStore::open(&Settings { vector_index: VectorIndex::Exact, ..settings(&exact_schema) }).unwrap();
    load(&indexed, &vectors);
    load(&exact, &vectors);
    indexed.catch_up_vector_index().unwrap();
    exact.catch_up_vector_index().unwrap();

    // The store made one HNSW index over this model's 384-dimension vectors, the live one: a
    // load this small joins it rather than a bulk index of its own. The exact store made none.
    let mut client = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    let hnsw_indexes = |client: &mut postgres::Client, schema: &str| -> Vec<String> {
        client
            .query("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexdef LIKE '%USING hnsw%'", &[&schema])
            .unwrap()
            .into_iter()
            .map(|row| row.get(0))
            .collect()
    };
    let definitions = hnsw_indexes(&mut client, &schema);
    assert_eq!(definitions.len(), 1, "{definitions:?}");
    assert!(definitions[0].contains("embeddings_live_") && definitions[0].contains("vector(384)"), "{}", definitions[0]);
    assert!(hnsw_indexes(&mut client, &exact_schema).is_empty());

    // Each query is a stored vector with a little noise: both searches must rank that memory
    // first, and the approximate top ten must hold nearly all of the exact top ten.
    let mut noise = Vectors(7);
    let mut shared = 0;
    for query_index in 0..QUERIES {
        let target = query_index * (MEMORIES / QUERIES);
        let query: Vec<f32> = vectors[target].iter().map(|component| component + 0.05 * noise.next_component()).collect();
        let approximate = nearest(&indexed, &query);
        let truth = nearest(&exact, &query);
        let expected = format!("vec-{target:05}");
        assert_eq!(truth.first(), Some(&expected), "the exact search missed its own vector");
        assert_eq!(approximate.first(), Some(&expected), "the HNSW search missed its own vector");
        assert_eq!(approximate.len(), 10);
        shared += approximate.iter().filter(|id| truth.contains(id)).count();
    }
    let recall = shared as f64 / (QUERIES * 10) as f64;
    assert!(recall >= 0.9, "HNSW recall@10 against the exact search is {recall:.3}");

    indexed.drop_schema().unwrap();
    exact.drop_schema().unwrap();
}
