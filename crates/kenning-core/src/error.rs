//! The core's error type and the field-level validation error every layer reports.

use serde::Serialize;
use serde_json::Value;

/// A rejected input, in the shape agents and users see: which field, what is wrong with it,
/// what was received, and what to do instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub problem: String,
    pub received: Value,
    pub suggestion: String,
}

impl FieldError {
    /// The refusal of a memory whose content would duplicate an active memory of the same
    /// domain and namespace: every backend refuses it with these words.
    fn duplicate_content(id: String, existing: &str) -> Self {
        FieldError::new(
            "content",
            format!("would duplicate the active memory {existing} in the same namespace"),
            id,
            format!("update or forget {existing} instead, or change the content"),
        )
    }

    pub fn new(
        field: impl Into<String>,
        problem: impl Into<String>,
        received: impl Into<Value>,
        suggestion: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            problem: problem.into(),
            received: received.into(),
            suggestion: suggestion.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid `{}`: {} (received {}); {}",
            self.field, self.problem, self.received, self.suggestion
        )
    }
}

/// Everything that can go wrong in the core and in the storage and embedding traits it defines.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Invalid(FieldError),
    #[error("memory not found: {0}")]
    NotFound(String),
    /// Another writer changed the record first; the caller should re-read and retry.
    #[error("memory {id} was changed concurrently (expected version {expected})")]
    Conflict { id: String, expected: u32 },
    #[error("storage failure: {0}")]
    Storage(String),
    #[error("embedding failure: {0}")]
    Embedding(String),
    /// The store cannot be reached now (a database server that is down or out of reach);
    /// the same call may succeed later. Recall leaves such a domain out and says so.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// A store turning a read or write away for a reason its caller can act on. Every backend
/// (SQLite, git notes, PostgreSQL) reports these in the same words and through the same mapping
/// onto [`Error`], so its own error type holds them as one variant.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("memory not found: {0}")]
    NotFound(String),
    #[error("memory {id} was changed concurrently (expected version {expected})")]
    Conflict { id: String, expected: u32 },
    #[error("memory id {0} already exists")]
    IdTaken(String),
    /// A write would make two active memories in one namespace hold the same content.
    #[error("memory {id} would duplicate the active memory {existing}")]
    Duplicate { id: String, existing: String },
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NotFound(id) => Error::NotFound(id),
            Refusal::Conflict { id, expected } => Error::Conflict { id, expected },
            Refusal::Duplicate { id, existing } => Error::Invalid(FieldError::duplicate_content(id, &existing)),
            taken @ Refusal::IdTaken(_) => Error::Storage(taken.to_string()),
        }
    }
}

impl From<FieldError> for Error {
    fn from(value: FieldError) -> Self {
        Error::Invalid(value)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The candidate closest to `input` by edit distance, if it is close enough to be a plausible typo.
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let input = input.to_lowercase();
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(&input, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= candidate.len().max(3) / 2 + 1)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_typos_and_ignores_strangers() {
        let kinds = ["episodic", "semantic", "procedural"];
        assert_eq!(closest("semantc", kinds), Some("semantic"));
        assert_eq!(closest("Episodic", kinds), Some("episodic"));
        assert_eq!(closest("banana", kinds), None);
    }
}
