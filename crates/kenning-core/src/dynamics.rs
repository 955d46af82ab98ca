//! How much a memory is to be trusted now: its confidence from source, evidence, recency and
//! reinforcement, computed at read time from what the record stores.
//!
//! Evidence lives in two metadata keys, [`SUPPORTING_KEY`] and [`CONTRADICTING_KEY`], each a
//! count written as a decimal number, so that every backend keeps it with no schema of its own.
//! A near-duplicate capture adds supporting evidence; a contradiction settled against a memory
//! adds contradicting evidence.

use std::collections::BTreeMap;

use crate::memory::Memory;

/// Metadata key: how many later observations confirmed this memory.
pub const SUPPORTING_KEY: &str = "evidence_supporting";
/// Metadata key: how many settled contradictions went against this memory.
pub const CONTRADICTING_KEY: &str = "evidence_contradicting";

/// The evidence counts a memory carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvidenceCounts {
    pub supporting: u32,
    pub contradicting: u32,
}

/// The evidence counts kept in `metadata`; a missing or unreadable count is zero.
pub fn evidence_counts(metadata: &BTreeMap<String, String>) -> EvidenceCounts {
    let count = |key: &str| metadata.get(key).and_then(|value| value.trim().parse::<u32>().ok()).unwrap_or(0);
    EvidenceCounts { supporting: count(SUPPORTING_KEY), contradicting: count(CONTRADICTING_KEY) }
}

/// Adds one supporting observation to the memory's metadata.
pub fn add_supporting(memory: &mut Memory) {
    bump(&mut memory.metadata, SUPPORTING_KEY);
}

/// Adds one contradiction settled against the memory to its metadata.
pub fn add_contradicting(memory: &mut Memory) {
    bump(&mut memory.metadata, CONTRADICTING_KEY);
}

fn bump(metadata: &mut BTreeMap<String, String>, key: &str) {
    let next = metadata.get(key).and_then(|value| value.trim().parse::<u32>().ok()).unwrap_or(0).saturating_add(1);
    metadata.insert(key.to_owned(), next.to_string());
}
