//! The domain core of kenning: what a memory is, how it is addressed and validated, and the
//! traits that storage backends and embedders implement.
//!
//! - [`Memory`] is the record; [`MemoryVersion`] keeps what every update replaced.
//! - [`Urn`] / [`MemoryUrn`] address domains, namespaces and memories as
//!   `kenning://{domain}/{namespace}/{id}`; [`Domain`] is `project:{id}`, `user` or `org:{id}`.
//! - [`input`] validates what callers send ([`CaptureInput`], [`UpdateInput`]) into records,
//!   reporting problems as [`FieldError`]s that name the field, the problem, the value and a fix.
//! - [`secrets`] finds API keys, tokens, passwords, private keys and credentials in text and
//!   replaces them with `[REDACTED:kind]` before anything is stored; every record a write stores
//!   implements [`secrets::Redact`], which hands each of its string fields to the redactor.
//! - [`interrupt`] lets a front end call off a request's work (cancelled, or past its deadline)
//!   and lets long loops below notice.
//! - [`search`] holds filters, score fusion, token estimates, cursors and snippets.
//! - [`provenance`] reduces a memory's branch and the files it is about to facets that every
//!   backend matches exactly, and makes a caller's path relative to the repository root.
//! - [`claim`] tells whether two statements make the same claim: order, roles, numbers with
//!   their units, negation and scope words decide, not the set of words they share; its words
//!   and the contradiction rules' are [`term::Term`]s, one shared copy of each word read.
//! - [`expansion`] widens a query by the other names of what it names (built-in and project
//!   synonyms, or a model's rewrite); [`question`] cuts a compound question into the parts that
//!   ask something of their own; [`confidence`] assesses a memory's confidence now.
//! - [`when`] finds time expressions in queries ("last May", "on 13 October, 2023") and the
//!   span of time each names.
//! - [`MemoryStore`] and [`Embedder`] are the seams to storage and to embedding models;
//!   [`llm::LanguageModel`] is the seam to an optional language model.
//! - [`calibration`] holds the statistics of decisions and outcomes: [`calibrate`] turns
//!   [`Evidence`] (stated confidence, outcome score, time) into a [`Calibration`] (Beta posterior,
//!   exact credible interval, confidence gap, status, trend, Brier score, reliability table),
//!   [`guidance`] advises on a proposed confidence, and [`beta_cdf`] / [`beta_quantile`] /
//!   [`lower_credible_bound`] are the exact Beta functions underneath.
//! - [`consolidation`] groups alike episodes by their vectors and writes a principle from each
//!   group, extractive or through a language model's prompt and strictly read answer.
//! - [`state`] is the seam to working state kept beside the memories ([`state::StateStore`]);
//!   [`workflow`] validates workflows (a DAG of steps) and moves their steps along.
//! - [`decision`] holds decisions, signals and outcomes, their similarity, and the
//!   [`decision::DecisionStore`] seam that keeps them beside the memories.
//!
//! Invariant: this crate does no I/O and has no async runtime. Clocks and ids come from callers.

pub mod calibration;
pub mod claim;
pub mod consolidation;
pub mod contradiction;
pub mod decision;
pub mod confidence;
pub mod error;
pub mod expansion;
pub mod graph;
mod hex;
pub mod input;
pub mod interrupt;
pub mod llm;
pub mod memory;
pub mod provenance;
pub mod question;
pub mod relation;
pub mod search;
pub mod secrets;
pub mod state;
pub mod store;
pub mod term;
pub mod urn;
pub mod when;
pub mod workflow;

pub use calibration::{
    Calibration, CalibrationStatus, Evidence, Guidance, ReliabilityBin, Trend, TrendDetail, TrendWindow, beta_cdf,
    beta_quantile, brier_score, calibrate, guidance, lower_credible_bound,
};
pub use error::{Error, FieldError, Refusal, Result, closest};
pub use hex::hex;
pub use input::{CaptureInput, LinkInput, UpdateInput};
pub use memory::{
    BUILT_IN_NAMESPACES, Link, Memory, MemoryId, MemoryKind, MemoryVersion, Namespace, Source, Status, validate_author,
};
pub use search::{Cursor, Detail, FilterCondition, ScoredId, SearchFilter};
pub use store::{Embedder, Embedding, Inserted, MemoryRecord, MemoryStore, PurgeCounts, PurgeMode, Replacement, StoreStats, SyncReport, parse_time_key, time_key};
pub use urn::{Domain, MemoryUrn, Urn};
