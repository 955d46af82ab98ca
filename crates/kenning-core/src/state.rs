//! Working state kept beside a domain's memories: workflows, guided-protocol sessions and the
//! records of consolidation runs and the contradictions found between memories.
//!
//! These are not memories (nothing recalls them and they change on every step) but they must
//! outlive the process that made them, so that an agent that crashed resumes where it was. A
//! backend that can hold them answers [`crate::MemoryStore::state`] with a [`StateStore`]; one
//! that cannot answers `None`, and the engine refuses the request with a clear error rather than
//! keeping the state where a restart would lose it.

use chrono::{DateTime, Utc};

use crate::error::Result;

/// What a state record holds. Each kind has its own id space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateKind {
    Workflow,
    ProtocolSession,
    /// What one consolidation run did, so that it can be listed and rolled back.
    ConsolidationRun,
    /// A contradiction between two memories of the domain (`crate::contradiction::Contradiction`).
    Contradiction,
}

impl StateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StateKind::Workflow => "workflow",
            StateKind::ProtocolSession => "protocol_session",
            StateKind::ConsolidationRun => "consolidation_run",
            StateKind::Contradiction => "contradiction",
        }
    }
}

/// One record of working state: an opaque body (JSON written by the engine) under a kind and
/// an id, with a revision that every write moves on by one.
#[derive(Debug, Clone, PartialEq)]
pub struct StateRecord {
    pub kind: StateKind,
    pub id: String,
    /// 1 for a new record; each later write is `revision + 1` of the one it replaces.
    pub revision: u64,
    /// Kept to the microsecond.
    pub updated_at: DateTime<Utc>,
    pub body: String,
    /// What the record is about, by which [`StateStore::state_about`] finds it without reading
    /// every record of its kind: for a contradiction, the URNs of its two memories. Each write
    /// replaces them.
    pub subjects: Vec<String>,
}

/// Durable working state of one domain.
///
/// Contract (checked by the conformance suite's state checks): [`StateStore::put_state`] is
/// compare-and-swap on the revision and durable once it returns `Ok`; lists come newest first
/// by `updated_at` (then by id) and are paginated; a record is found by each of its subjects
/// as last written; a deleted record is gone for every reader.
pub trait StateStore: Send + Sync {
    /// Writes `record`. Revision 1 creates it and fails with [`crate::Error::Conflict`] if a
    /// record of that kind and id exists; a later revision replaces the stored record only if
    /// the stored revision is one less, and fails with `Conflict` otherwise (`NotFound` if there
    /// is none).
    fn put_state(&self, record: &StateRecord) -> Result<()>;

    /// [`StateStore::put_state`] for several records in one durable write, in order, so that a
    /// later record may be the next revision of an earlier one. Each is written by the same
    /// compare-and-swap; one that it refuses (a conflict, or a later revision of a record that
    /// does not exist) is left out and answered `false`, and the others are written. Any other
    /// failure writes none of them.
    fn put_states(&self, records: &[StateRecord]) -> Result<Vec<bool>>;

    fn get_state(&self, kind: StateKind, id: &str) -> Result<Option<StateRecord>>;

    /// Records of `kind`, most recently updated first, from `offset`.
    fn list_state(&self, kind: StateKind, offset: usize, limit: usize) -> Result<Vec<StateRecord>>;

    /// Every record of `kind` that has any of `subjects` among its own, each once, most
    /// recently updated first (then by id): one read however many subjects are asked about.
    fn state_about(&self, kind: StateKind, subjects: &[&str]) -> Result<Vec<StateRecord>>;

    /// Removes a record; returns whether there was one.
    fn delete_state(&self, kind: StateKind, id: &str) -> Result<bool>;
}
