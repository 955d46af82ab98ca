//! The engine's error type.

use kenning_core::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller sent something invalid; the field error says what and how to fix it.
    #[error("{0}")]
    Invalid(FieldError),
    /// Nothing under `target`: a memory's URN, or the id a store did not find (a memory's,
    /// a decision's or a state record's, such as a contradiction or a workflow).
    #[error("no memory at {target}")]
    NotFound { target: String },
    /// A well-formed decision id that no configured domain holds.
    #[error("no decision {id}")]
    DecisionNotFound { id: String },
    /// A write kept losing compare-and-swap races; retrying later will succeed. `target` names
    /// what kept changing: a memory's URN, or the id of a decision, workflow or state record.
    #[error("memory {target} is being changed by another writer; try again")]
    Busy { target: String },
    #[error("{0}")]
    Storage(String),
    #[error("{0}")]
    Embedding(String),
    /// A domain's store cannot be reached now (its database is down); nothing was written.
    #[error("{0}")]
    Unavailable(String),
    /// A code tool could not do its work (no repository, no runner, a runner that failed to
    /// start, an unreadable code index); `error` names the case for machines.
    #[error("{message}")]
    Code { error: &'static str, message: String, suggestion: String },
    /// The request was cancelled by its client or ran past its deadline; its work stopped early.
    #[error("the request was cancelled or ran past its deadline")]
    Interrupted,
}

impl From<FieldError> for Error {
    fn from(value: FieldError) -> Self {
        Error::Invalid(value)
    }
}

impl From<kenning_core::Error> for Error {
    fn from(value: kenning_core::Error) -> Self {
        match value {
            kenning_core::Error::Invalid(field) => Error::Invalid(field),
            kenning_core::Error::NotFound(target) => Error::NotFound { target },
            kenning_core::Error::Conflict { id, .. } => Error::Busy { target: id },
            kenning_core::Error::Storage(message) => Error::Storage(message),
            kenning_core::Error::Embedding(message) => Error::Embedding(message),
            kenning_core::Error::Unavailable(message) => Error::Unavailable(message),
        }
    }
}

/// Stops the current request's work when it has been called off (see
/// [`kenning_core::interrupt`]).
pub fn check_interrupt() -> Result<()> {
    if kenning_core::interrupt::interrupted() { Err(Error::Interrupted) } else { Ok(()) }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
