//! Full-text search ranks a bounded set of candidates: each query word's newest matches.

use kenning_conformance::fixtures::{hit_ids, memory};
use kenning_core::SearchFilter;

use super::*;

/// A word few memories hold brings all of them, however many newer memories hold the query's
/// common words; a common word brings its newest uses.
#[test]
fn a_rare_word_finds_its_old_memory_past_many_newer_common_matches() {
    if !servers(&[PG_URL]) {
        return;
    }
    let store = fresh_store("text_candidates");
    let old = memory("old-zephyr", "learnings", "The zephyr service restarts its workers at midnight.");
    store.insert(&[(old, None)]).unwrap();
    let newer: Vec<_> = (0..450)
        .map(|n| (memory(&format!("service-{n:04}"), "learnings", &format!("Service note {n}: the service was redeployed.")), None))
        .collect();
    store.insert(&newer).unwrap();

    let hits = hit_ids(&store.search_text("zephyr service", &SearchFilter::active(), 10).unwrap());
    assert_eq!(hits.first().map(String::as_str), Some("old-zephyr"), "{hits:?}");

    let common = hit_ids(&store.search_text("service", &SearchFilter::active(), 10).unwrap());
    assert_eq!(common.len(), 10);
    assert!(!common.contains(&"old-zephyr".to_owned()), "the oldest use of a common word is not among its newest matches");

    // A deep page asks for more than a word's usual share, and gets it.
    assert_eq!(store.search_text("service", &SearchFilter::active(), 451).unwrap().len(), 451);
}
