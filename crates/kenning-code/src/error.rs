//! The one error type of this crate.

use kenning_core::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller sent something invalid (a path outside the repository, an unknown scope).
    #[error("{0}")]
    Invalid(FieldError),
    /// The code index could not be read or written.
    #[error("code index at {path}: {message}")]
    Index { path: String, message: String },
    /// Reading the repository (its files or its git history) failed.
    #[error("{0}")]
    Repository(String),
    /// No runner or tool for what was asked is configured in this repository.
    #[error("{what}")]
    NotAvailable { what: String, suggestion: String },
    /// A runner could not be started.
    #[error("could not run `{program}`: {message}")]
    Spawn { program: String, message: String },
    /// The request was cancelled or ran past its deadline.
    #[error("the request was cancelled or ran past its deadline")]
    Interrupted,
}

impl From<FieldError> for Error {
    fn from(error: FieldError) -> Self {
        Error::Invalid(error)
    }
}

impl Error {
    /// A short machine-readable name of the error, for a tool's structured error body.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "invalid",
            Error::Index { .. } => "code_index_failure",
            Error::Repository(_) => "repository_failure",
            Error::NotAvailable { .. } => "not_available",
            Error::Spawn { .. } => "runner_failed_to_start",
            Error::Interrupted => "interrupted",
        }
    }

    /// What the caller can do about it.
    pub fn suggestion(&self) -> String {
        match self {
            Error::Invalid(field) => field.suggestion.clone(),
            Error::Index { .. } => "retry; the code index is a cache and is rebuilt if deleted".to_owned(),
            Error::Repository(_) => "check that the repository is readable".to_owned(),
            Error::NotAvailable { suggestion, .. } => suggestion.clone(),
            Error::Spawn { .. } => "install the tool or make it available on PATH".to_owned(),
            Error::Interrupted => "narrow the request and call again".to_owned(),
        }
    }

    pub(crate) fn index(path: &std::path::Path, error: impl std::fmt::Display) -> Error {
        Error::Index { path: path.display().to_string(), message: error.to_string() }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
