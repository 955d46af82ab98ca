//! The crate's error type and how it maps onto the core's.

use std::path::PathBuf;

use kenning_core::Refusal;
use rusqlite::ErrorCode;

/// Everything that can go wrong inside the SQLite backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create the store directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("cannot create the store file {path} or make it private: {source}")]
    CreateFile { path: PathBuf, source: std::io::Error },
    #[error("memory JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored value that this code could not have written, such as a truncated vector.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    #[error(
        "the store at {path} has schema version {found}, newer than the {supported} this build knows; upgrade kenning"
    )]
    NewerSchema { path: PathBuf, found: i64, supported: i64 },
    /// The caller's plan of a mirror update failed; the caller holds its own error.
    #[error("the mirror update was abandoned by its planner")]
    PlanFailed,
    #[error("search index file {path}: {source}")]
    IndexFile { path: PathBuf, source: std::io::Error },
    #[error("search index image: {0}")]
    IndexImage(String),
    /// Not found, changed concurrently, id taken, duplicate content: as every backend says it.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

impl Error {
    /// Whether the error is SQLite reporting lock contention with another connection, which
    /// goes away if the operation is simply tried again.
    pub(crate) fn is_busy(&self) -> bool {
        match self {
            Error::Sqlite(error) => {
                matches!(error.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
            }
            _ => false,
        }
    }
}

impl From<Error> for kenning_core::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::Refused(refusal) => refusal.into(),
            other => kenning_core::Error::Storage(other.to_string()),
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
