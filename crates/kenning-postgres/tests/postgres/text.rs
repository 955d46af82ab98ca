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

/// A word's newest matches are looked for in windows of capture order, newest first; across
/// the windows' edges they are still exactly its newest. Equal ranks come out oldest first, so
/// the first hit is the oldest candidate: the 200th newest match, not any older one. A filter
/// holds in every window.
#[test]
fn each_word_brings_exactly_its_newest_matches_across_capture_windows() {
    if !servers(&[PG_URL]) {
        return;
    }
    let store = fresh_store("text_windows");
    let notes: Vec<_> = (0..2_600)
        .map(|n| {
            let content = match n {
                _ if n % 5 == 0 => format!("Note {n}: the quota budget was checked."),
                7 | 1_234 | 2_556 => format!("Note {n}: the kestrel queue stalled."),
                _ => format!("Note {n}: nothing happened."),
            };
            let namespace = if n == 2_556 { "decisions" } else { "learnings" };
            (memory(&format!("note-{n:04}"), namespace, &content), None)
        })
        .collect();
    for batch in notes.chunks(650) {
        store.insert(batch).unwrap();
    }

    // 520 memories hold "budget"; its newest 200 are notes 1,600 to 2,595.
    let oldest_candidate = hit_ids(&store.search_text("budget", &SearchFilter::active(), 1).unwrap());
    assert_eq!(oldest_candidate, ["note-1600"]);
    assert_eq!(store.search_text("budget", &SearchFilter::active(), 600).unwrap().len(), 520);
    // A rare word's matches in every window are all found, beside a common word's.
    assert_eq!(hit_ids(&store.search_text("kestrel", &SearchFilter::active(), 10).unwrap()), ["note-0007", "note-1234", "note-2556"]);
    let both = hit_ids(&store.search_text("kestrel budget", &SearchFilter::active(), 3).unwrap());
    assert_eq!(both, ["note-0007", "note-1234", "note-1600"]);
    let in_namespace = |namespace: &str| SearchFilter { namespaces: vec![kenning_core::Namespace::parse(namespace).unwrap()], ..SearchFilter::active() };
    assert_eq!(hit_ids(&store.search_text("kestrel budget", &in_namespace("decisions"), 10).unwrap()), ["note-2556"]);
    let learnings = hit_ids(&store.search_text("kestrel budget", &in_namespace("learnings"), 600).unwrap());
    assert_eq!(learnings.len(), 522, "every budget note and two kestrel notes");
    assert!(!learnings.contains(&"note-2556".to_owned()));
}
