//! The kenning engine: the services that front ends call, orchestrating stores and embedders
//! through the core's traits.
//!
//! - [`MemoryService`] owns one [`DomainStore`] per configured domain (project, user, org) and
//!   an optional [`kenning_core::Embedder`]. It validates input, assigns ids, embeds, applies
//!   updates with compare-and-swap retries, and answers [`RecallRequest`]s by fusing full-text
//!   and vector results from every selected domain.
//!   Recall queues the reads it served for a background thread to record, so that it never
//!   waits on a disk write (`access_counts`).
//! - [`DecisionService`] keeps decisions, signals and outcomes in each domain's
//!   [`kenning_core::decision::DecisionStore`], beside (and as) memories, and answers
//!   calibration, skills, warnings and context from them ([`decisions`]).
//! - [`code::CodeService`] serves the `repo`, `test` and `docs` toolsets from kenning-code and
//!   turns test runs into memories and decision signals.
//! - [`ProtocolService`] runs guided protocols ([`kenning_protocol`]) as sessions kept in a
//!   domain's working state, writing what they create only when they complete ([`protocols`]).
//! - [`WorkflowService`] keeps workflows (steps with dependencies) in each domain's working
//!   state and writes an ended one up as an episodic memory ([`workflows`]).
//! - A capture is judged against the memories like it (`judgment`): the same claim is merged
//!   (its wording kept, the merge reversible), another claim much like one is stored and linked.
//! - Contradictions between memories are found at capture, kept in each domain's working state
//!   and settled by [`MemoryService::resolve_truth`] (`contradictions`).
//! - [`consolidation`]: `MemoryService::consolidate` groups a domain's episodes by meaning into
//!   semantic principles linked to them, records each run in the domain's working state, and
//!   rolls a run back on request.
//! - [`introspect`] reports a domain's memory at a glance: counts by kind, dormant memories,
//!   links, evidence, contradictions and consolidation runs.
//! - [`views`] are the serialisable shapes every front end returns.
//! - [`transfer`] is the lossless JSON-lines export and import.
//!
//! The engine picks no backend and reads no configuration: the binary builds the stores and
//! hands them in. It knows nothing of MCP.

mod access_counts;
mod analysis;
pub mod code;
pub mod consolidation;
mod contradictions;
pub mod decisions;
pub mod error;
pub mod ids;
pub mod introspect;
mod judgment;
pub mod protocols;
pub mod recall;
mod redaction;
pub mod service;
pub mod transfer;
pub mod views;
pub mod workflows;

pub use code::CodeService;
pub use consolidation::{ConsolidateRequest, ConsolidationRun};
pub use decisions::{ChainAnalysis, DecisionDomain, DecisionQuery, DecisionService};
pub use error::{Error, Result};
pub use recall::RecallRequest;
pub use service::{Clock, DomainStore, MemoryService, RESOURCE_TEMPLATE, SystemClock};
pub use protocols::ProtocolService;
pub use workflows::{WorkflowQuery, WorkflowService};

/// The cores this process may use. Asking costs a few system calls (the process's CPU quota
/// is read), so it is asked once.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}
pub use transfer::{DomainPurge, ExportLine, ImportReport};
