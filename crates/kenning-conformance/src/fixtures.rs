//! Builders for the memories, versions and vectors the checks use.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use kenning_core::{
    Domain, Embedding, Inserted, Memory, MemoryId, MemoryKind, MemoryStore, MemoryVersion, Namespace, ScoredId, Source,
    Status,
};

/// A fixed instant with nanoseconds, so that a backend that rounds times fails the round trip.
pub fn base_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap() + TimeDelta::nanoseconds(123_456_789)
}

/// [`base_time`] plus `minutes`.
pub fn at(minutes: i64) -> DateTime<Utc> {
    base_time() + TimeDelta::minutes(minutes)
}

pub fn id(text: &str) -> MemoryId {
    MemoryId::parse(text).unwrap()
}

/// A version-1 active memory captured at [`base_time`], titled with the start of its content.
pub fn memory(id_text: &str, namespace: &str, content: &str) -> Memory {
    Memory {
        id: id(id_text),
        domain: Domain::Project("conformance".to_owned()),
        namespace: Namespace::parse(namespace).unwrap(),
        kind: MemoryKind::Semantic,
        title: content.chars().take(40).collect(),
        content: content.to_owned(),
        tags: Vec::new(),
        category: None,
        source: Source::ToolResult,
        confidence: 0.8,
        salience: 0.5,
        status: Status::Active,
        created_at: base_time(),
        updated_at: base_time(),
        event_time: None,
        last_accessed_at: None,
        access_count: 0,
        links: Vec::new(),
        metadata: BTreeMap::new(),
        version: 1,
        author: None,
    }
}

/// The next version of `current` after `change`, and the history entry it supersedes, the way
/// the engine makes them: the version goes up by one and `updated_at` moves a minute on.
pub fn supersede(current: &Memory, reason: &str, change: impl FnOnce(&mut Memory)) -> (Memory, MemoryVersion) {
    let mut next = current.clone();
    change(&mut next);
    next.version = current.version + 1;
    next.updated_at = current.updated_at + TimeDelta::minutes(1);
    let previous = MemoryVersion {
        version: current.version,
        superseded_at: next.updated_at,
        reason: reason.to_owned(),
        memory: current.clone(),
    };
    (next, previous)
}

/// Replaces `current` with its changed next version, returning the stored result.
pub fn update(store: &dyn MemoryStore, current: &Memory, change: impl FnOnce(&mut Memory)) -> Memory {
    let (next, previous) = supersede(current, "changed by a conformance check", change);
    store.replace(&next, &previous, None).unwrap();
    next
}

/// `components` scaled to unit length, as embedders return them.
pub fn unit(components: &[f32]) -> Vec<f32> {
    let norm = components.iter().map(|c| c * c).sum::<f32>().sqrt();
    components.iter().map(|c| c / norm).collect()
}

pub fn embedding(model: &str, components: &[f32]) -> Embedding {
    Embedding { model: model.to_owned(), vector: unit(components) }
}

/// Inserts memories without vectors, asserting that each was created.
pub fn insert_all(store: &dyn MemoryStore, memories: &[Memory]) {
    let batch: Vec<(Memory, Option<Embedding>)> = memories.iter().map(|memory| (memory.clone(), None)).collect();
    let outcomes = store.insert(&batch).unwrap();
    assert_eq!(outcomes, vec![Inserted::Created; memories.len()]);
}

pub fn hit_ids(hits: &[ScoredId]) -> Vec<String> {
    hits.iter().map(|hit| hit.id.to_string()).collect()
}

pub fn memory_ids(memories: &[Memory]) -> Vec<String> {
    memories.iter().map(|memory| memory.id.to_string()).collect()
}

pub fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}
