//! The crate's error type and how it maps onto the core's.

use std::path::PathBuf;

use kenning_core::Refusal;

/// Everything that can go wrong in the git-notes backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Core(#[from] kenning_core::Error),
    #[error("index: {0}")]
    Index(#[from] kenning_sqlite::Error),
    #[error("cannot open the git repository at {path}: {reason}")]
    Repository { path: PathBuf, reason: String },
    /// A note this build cannot read, met where it has to be read (a write to that memory).
    #[error("the note of memory {id} cannot be read: {reason}")]
    Note { id: String, reason: String },
    /// Not found, changed concurrently, id taken, duplicate content: as every backend says it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Other writers kept moving the notes ref for longer than the write was willing to retry.
    #[error("the notes ref {0} kept moving under this write; try again")]
    Busy(String),
    #[error("sync with {remote}: {reason}")]
    Sync { remote: String, reason: String },
    /// A loose object of a notes commit could not be written.
    #[error("object {id} could not be written to {path}: {reason}")]
    Object { id: String, path: PathBuf, reason: String },
    /// The journal that makes writes survive a power loss could not be written or read.
    #[error("{reason} ({path})")]
    Journal { path: PathBuf, reason: String },
}

impl From<Error> for kenning_core::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::Refused(refusal) => refusal.into(),
            Error::Index(inner) => inner.into(),
            Error::Core(inner) => inner,
            other => kenning_core::Error::Storage(other.to_string()),
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
