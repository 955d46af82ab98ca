//! Decisions and what they teach: the vocabulary, validation, similarity, and the storage seam.
//!
//! - [`Decision`] is the record; [`Signal`]s and an [`Outcome`] hang off it ([`DecisionRecord`]).
//!   [`DecisionStatus::transition`] enforces pending -> executed -> completed | failed | reworked.
//! - [`input`] validates what callers send ([`CaptureDecision`], [`UpdateDecision`],
//!   [`SignalInput`], [`OutcomeInput`]) against a configured [`ModuleList`], and renders a
//!   decision and its lessons as memories.
//! - [`similarity`] compares decisions by their words, with no embedding model.
//! - [`mining`] groups decisions with outcomes into patterns and mines skills and antipatterns;
//!   [`warnings`] flags a proposed decision and gives a risk score and a firewall verdict.
//! - [`estimate`] turns signals into an estimated chance of success.
//! - [`DecisionStore`] is the storage seam: a memory store that also keeps decisions and the
//!   graph around them.

pub mod estimate;
pub mod input;
pub mod mining;
mod model;
pub mod similarity;
mod store;
pub mod warnings;

pub use input::{CaptureDecision, ModuleList, OutcomeInput, SignalInput, UpdateDecision};
pub use model::{
    Decision, DecisionContext, DecisionId, DecisionRecord, DecisionStatus, Note, Outcome, OutcomeStatus, RiskLevel,
    Signal, SignalType, Valence,
};
pub use store::{normalise_decision_path, paths_under_pattern,
    DecisionChange, DecisionFilter, DecisionStore, Edge, Hop, MemoryChange, Node, NodeKind, SkillSync, outcome_with_lessons, purged_nodes,
    taught_edges,
};
