//! How much a memory is to be trusted now: its confidence from source, evidence, recency and
//! reinforcement, computed at read time from what the record stores. No job sweeps the store:
//! [`assess`] is a pure function of the record and the time.
//!
//! The formula, in three factors:
//!
//! 1. **Stated confidence** `c`: what the caller gave at capture, else the source's documented
//!    default ([`crate::input::default_confidence`]: direct observation 0.95, told by the user
//!    0.9, tool result 0.85, inference 0.7, model-generated 0.6).
//! 2. **Evidence**: `s` later observations confirmed the memory, `k` settled contradictions went
//!    against it. The stated confidence is a prior worth [`PRIOR_WEIGHT`] observations, so the
//!    evidence-adjusted confidence is `(2c + s) / (2 + s + k)`: one confirmation lifts 0.9 to
//!    0.93, one lost contradiction drops it to 0.6, two to 0.45.
//! 3. **Retention** `2^(-age / h)`: `age` is the time since the memory was last captured,
//!    changed or retrieved, and `h` its half-life: the kind's ([`DecayPolicy`]: episodic 7 days,
//!    semantic 30, procedural 90), times `0.5 + salience` (0.5 to 1.5: what the caller marked as
//!    important fades slower), times `1 + ln(1 + n)` where `n` is how often it was retrieved or
//!    confirmed, at most [`MAX_REINFORCEMENTS`] (each use stretches the half-life, with
//!    diminishing returns, and bounded so no memory becomes permanent by popularity alone).
//!
//! Confidence is evidence × retention. Below [`DecayPolicy::dormant_below`] a memory is
//! dormant: default recall leaves it out, `include_dormant` brings it back. Recall multiplies a
//! hit's relevance by [`ranking_factor`] `= 1 - w + w·confidence` with `w` =
//! [`CONFIDENCE_RANK_WEIGHT`] (0.5): confidence reorders memories of like relevance but never
//! outweighs relevance itself (a fully trusted memory keeps its score, a dormant one keeps half).
//!
//! Evidence lives in two metadata keys, [`SUPPORTING_KEY`] and [`CONTRADICTING_KEY`], each a
//! count written as a decimal number, so that every backend keeps it with no schema of its own.
//! A capture making the same claim adds supporting evidence; a contradiction settled against a
//! memory adds contradicting evidence.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::memory::{Memory, MemoryKind};

/// How many observations the stated confidence counts for against later evidence.
const PRIOR_WEIGHT: f64 = 2.0;
/// Retrievals and confirmations beyond this many stretch the half-life no further.
const MAX_REINFORCEMENTS: u64 = 32;
/// How much confidence weighs in recall's ranking: relevance × (1 - w + w·confidence).
const CONFIDENCE_RANK_WEIGHT: f64 = 0.5;

/// The half-lives of the three kinds and the dormancy threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DecayPolicy {
    pub episodic_half_life_days: f64,
    pub semantic_half_life_days: f64,
    pub procedural_half_life_days: f64,
    /// A memory whose confidence falls below this is dormant.
    pub dormant_below: f64,
}

impl Default for DecayPolicy {
    fn default() -> Self {
        DecayPolicy { episodic_half_life_days: 7.0, semantic_half_life_days: 30.0, procedural_half_life_days: 90.0, dormant_below: 0.1 }
    }
}

impl DecayPolicy {
    fn half_life_days(&self, kind: MemoryKind) -> f64 {
        match kind {
            MemoryKind::Episodic => self.episodic_half_life_days,
            MemoryKind::Semantic => self.semantic_half_life_days,
            MemoryKind::Procedural => self.procedural_half_life_days,
        }
    }
}

/// A memory's confidence now, with the factors it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Assessment {
    /// Evidence-adjusted confidence times retention, in [0, 1].
    pub confidence: f64,
    /// The stated confidence adjusted by supporting and contradicting evidence.
    pub evidence_confidence: f64,
    /// How much of it recency leaves, in (0, 1].
    pub retention: f64,
    /// The half-life that applied, in days, after salience and reinforcement.
    pub half_life_days: f64,
    pub dormant: bool,
}

/// The memory's confidence at `now` under `policy` (see the module documentation).
pub fn assess(memory: &Memory, now: DateTime<Utc>, policy: &DecayPolicy) -> Assessment {
    let evidence = evidence_counts(&memory.metadata);
    let stated = memory.confidence.clamp(0.0, 1.0);
    let evidence_confidence = (PRIOR_WEIGHT * stated + f64::from(evidence.supporting))
        / (PRIOR_WEIGHT + f64::from(evidence.supporting) + f64::from(evidence.contradicting));
    let reinforcements = memory.access_count.saturating_add(u64::from(evidence.supporting)).min(MAX_REINFORCEMENTS);
    let half_life_days = policy.half_life_days(memory.kind).max(f64::MIN_POSITIVE)
        * (0.5 + memory.salience.clamp(0.0, 1.0))
        * (1.0 + (reinforcements as f64).ln_1p());
    let last_used = [Some(memory.created_at), Some(memory.updated_at), memory.last_accessed_at].into_iter().flatten().max().expect("created_at is there");
    let age_days = ((now - last_used).num_milliseconds().max(0) as f64) / 86_400_000.0;
    let retention = (-age_days / half_life_days).exp2();
    let confidence = (evidence_confidence * retention).clamp(0.0, 1.0);
    Assessment { confidence, evidence_confidence, retention, half_life_days, dormant: confidence < policy.dormant_below }
}

/// What recall multiplies a hit's relevance by, given its confidence.
pub fn ranking_factor(confidence: f64) -> f64 {
    1.0 - CONFIDENCE_RANK_WEIGHT + CONFIDENCE_RANK_WEIGHT * confidence.clamp(0.0, 1.0)
}

/// The vector similarity (cosine) at or above which a capture is judged against a stored memory
/// by the claim rule ([`crate::claim`]) and linked to it when it is another claim, by default
/// and per namespace; `None` turns deduplication off (every capture is stored, unlinked).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deduplication {
    pub default_threshold: Option<f64>,
    pub namespaces: BTreeMap<String, Option<f64>>,
}

/// The default threshold: rewordings of one sentence score above it with the built-in model,
/// while the claim rule keeps changed claims apart.
const DEFAULT_DUPLICATE_SIMILARITY: f64 = 0.9;

impl Default for Deduplication {
    fn default() -> Self {
        Deduplication { default_threshold: Some(DEFAULT_DUPLICATE_SIMILARITY), namespaces: BTreeMap::new() }
    }
}

impl Deduplication {
    pub fn threshold(&self, namespace: &crate::Namespace) -> Option<f64> {
        match self.namespaces.get(namespace.as_str()) {
            Some(threshold) => *threshold,
            None => self.default_threshold,
        }
    }
}

/// Metadata key: how many later observations confirmed this memory.
pub const SUPPORTING_KEY: &str = "evidence_supporting";
/// Metadata key: how many settled contradictions went against this memory.
const CONTRADICTING_KEY: &str = "evidence_contradicting";

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
pub(crate) fn add_contradicting(memory: &mut Memory) {
    bump(&mut memory.metadata, CONTRADICTING_KEY);
}

fn bump(metadata: &mut BTreeMap<String, String>, key: &str) {
    let next = metadata.get(key).and_then(|value| value.trim().parse::<u32>().ok()).unwrap_or(0).saturating_add(1);
    metadata.insert(key.to_owned(), next.to_string());
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::input::build_memory;
    use crate::{CaptureInput, Domain, MemoryId};

    fn memory(kind: &str, source: &str) -> Memory {
        let input = CaptureInput {
            content: "The deploy script needs the staging credentials file".into(),
            kind: Some(kind.into()),
            source: Some(source.into()),
            ..CaptureInput::default()
        };
        build_memory(input, Domain::User, MemoryId::parse("m1").unwrap(), start()).unwrap()
    }

    fn start() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn days(n: i64) -> DateTime<Utc> {
        start() + TimeDelta::days(n)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_fresh_memory_has_its_stated_confidence() {
        let assessment = assess(&memory("semantic", "told-by-user"), start(), &DecayPolicy::default());
        assert!(close(assessment.confidence, 0.9));
        assert!(close(assessment.retention, 1.0));
        assert!(!assessment.dormant);
    }

    #[test]
    fn each_kind_halves_over_its_own_half_life() {
        let policy = DecayPolicy::default();
        for (kind, half_life) in [("episodic", 7), ("semantic", 30), ("procedural", 90)] {
            let assessment = assess(&memory(kind, "told-by-user"), days(half_life), &policy);
            assert!(close(assessment.retention, 0.5), "{kind}: {assessment:?}");
            assert!(close(assessment.confidence, 0.45), "{kind}: {assessment:?}");
        }
    }

    #[test]
    fn salience_slows_decay_and_its_absence_hastens_it() {
        let policy = DecayPolicy::default();
        let mut important = memory("episodic", "told-by-user");
        important.salience = 1.0;
        let mut trivial = important.clone();
        trivial.salience = 0.0;
        assert!(close(assess(&important, days(14), &policy).half_life_days, 10.5));
        assert!(close(assess(&trivial, days(14), &policy).half_life_days, 3.5));
    }

    #[test]
    fn retrieval_restarts_the_clock_and_stretches_the_half_life_within_a_bound() {
        let policy = DecayPolicy::default();
        let mut used = memory("episodic", "told-by-user");
        used.access_count = 1;
        used.last_accessed_at = Some(days(20));
        let assessment = assess(&used, days(20), &policy);
        assert!(close(assessment.retention, 1.0));
        assert!(close(assessment.half_life_days, 7.0 * (1.0 + 2f64.ln())));
        used.access_count = 10_000;
        assert!(close(assess(&used, days(20), &policy).half_life_days, 7.0 * (1.0 + 33f64.ln())));
    }

    #[test]
    fn evidence_moves_confidence_from_the_stated_prior() {
        let policy = DecayPolicy::default();
        let mut confirmed = memory("semantic", "told-by-user");
        add_supporting(&mut confirmed);
        assert!(close(assess(&confirmed, start(), &policy).confidence, 2.8 / 3.0));
        let mut refuted = memory("semantic", "told-by-user");
        add_contradicting(&mut refuted);
        assert!(close(assess(&refuted, start(), &policy).confidence, 0.6));
        add_contradicting(&mut refuted);
        assert_eq!(evidence_counts(&refuted.metadata), EvidenceCounts { supporting: 0, contradicting: 2 });
        assert!(close(assess(&refuted, start(), &policy).confidence, 0.45));
    }

    #[test]
    fn an_unused_episode_goes_dormant_after_about_three_weeks() {
        let policy = DecayPolicy::default();
        let episode = memory("episodic", "told-by-user");
        assert!(!assess(&episode, days(21), &policy).dormant);
        assert!(assess(&episode, days(23), &policy).dormant);
        let fact = memory("semantic", "told-by-user");
        assert!(!assess(&fact, days(90), &policy).dormant);
    }

    #[test]
    fn the_source_sets_the_starting_confidence() {
        let policy = DecayPolicy::default();
        let observed = assess(&memory("semantic", "direct-observation"), start(), &policy).confidence;
        let guessed = assess(&memory("semantic", "model-generated"), start(), &policy).confidence;
        assert!(observed > guessed);
    }

    #[test]
    fn confidence_reorders_but_never_outweighs_relevance() {
        assert!(close(ranking_factor(1.0), 1.0));
        assert!(close(ranking_factor(0.0), 0.5));
        assert!(close(ranking_factor(0.6), 0.8));
    }
}
