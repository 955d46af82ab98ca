//! The crate's error type and how it maps onto the core's.

use kenning_core::Refusal;

/// Everything that can go wrong inside the PostgreSQL backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection URL (or one of its settings) is not usable.
    #[error("invalid PostgreSQL connection URL: {0}")]
    Url(String),
    /// The database could not be reached, or the connection broke; trying again later may work.
    #[error("the organisation database at {location} is unreachable: {reason}")]
    Unreachable { location: String, reason: String },
    #[error("postgres: {}", describe(.0))]
    Postgres(tokio_postgres::Error),
    #[error("memory JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored value that this code could not have written.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    #[error(
        "the database schema `{schema}` is at version {found}, newer than the {supported} this build knows; upgrade kenning"
    )]
    NewerSchema { schema: String, found: i64, supported: i64 },
    /// Not found, changed concurrently, id taken, duplicate content: as every backend says it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("TLS setup: {0}")]
    Tls(String),
}

/// SQLSTATE class 08 (connection exceptions), 57P01-57P03 (the server shutting down or not
/// yet accepting connections) and 53300 (too many connections) mean the database is not
/// reachable right now, not that the request was wrong.
fn is_unreachable(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
        }
        // No SQLSTATE: an I/O error, a timeout or a protocol failure on the socket.
        None => error.as_db_error().is_none(),
    }
}

/// Classifies a driver error: the database being unreachable is reported as such, so that
/// callers can degrade (recall from the other domains) instead of failing. The store fills in
/// its location before the error leaves the crate.
impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Error {
        if is_unreachable(&error) {
            Error::Unreachable { location: String::new(), reason: describe(&error) }
        } else {
            Error::Postgres(error)
        }
    }
}

impl Error {
    /// Names the database in an unreachable error that does not name one yet.
    pub(crate) fn at(self, location: &str) -> Error {
        match self {
            Error::Unreachable { location: found, reason } if found.is_empty() => {
                Error::Unreachable { location: location.to_owned(), reason }
            }
            other => other,
        }
    }

    /// Whether a unique index turned a write away.
    pub(crate) fn is_unique_violation(&self) -> bool {
        matches!(self, Error::Postgres(error) if error.code().map(|code| code.code()) == Some("23505"))
    }

    /// Whether a writer that lost a race (a serialisation failure, a deadlock, or a unique index
    /// filled by a concurrent insert) should simply try again.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            Error::Postgres(error) => {
                matches!(error.code().map(|code| code.code()), Some("40001" | "40P01"))
            }
            _ => false,
        }
    }
}

impl From<Error> for kenning_core::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::Refused(refusal) => refusal.into(),
            error @ Error::Unreachable { .. } => kenning_core::Error::Unavailable(error.to_string()),
            other => kenning_core::Error::Storage(other.to_string()),
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// The driver's error with its cause: the server's message and SQLSTATE, or the I/O error
/// underneath, which the driver's own message leaves out.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    }
}
