use std::path::PathBuf;

use kenning_core::FieldError;

/// Why a key, audit or configuration operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid `{}`: {} (received {}); {}", .0.field, .0.problem, .0.received, .0.suggestion)]
    Invalid(FieldError),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not a kenning key file ({detail}); move it aside and create the keys again", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("the system's random number generator failed: {0}")]
    Random(String),
}

impl Error {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io { path: path.to_owned(), source }
    }
}
