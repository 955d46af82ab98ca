//! The git-notes backend of kenning: the project domain's memories live in the repository.
//!
//! - [`GitNotesStore`] is the store: a [`MemoryStore`](kenning_core::MemoryStore) and
//!   [`DecisionStore`](kenning_core::decision::DecisionStore) whose source of truth is one git
//!   note per memory under [`NOTES_REF`], and whose reads are answered by a
//!   [`kenning_sqlite::SqliteStore`] kept as an index of the notes (it records the notes commit
//!   it reflects and catches up by diffing notes trees).
//! - [`note`] is the note format (`kenning-note/1`): a memory with its whole version history,
//!   and a decision's signals and outcome, as JSON.
//! - [`merge`] is the rule that merges one memory's note changed on two clones; `sync` runs
//!   fetch, merge and push ([`GitNotesStore::sync_with`], [`setup_refspecs`]).
//! - [`Error`] is what goes wrong inside the crate; it converts into [`kenning_core::Error`].
//!
//! Every write is a notes commit whose ref moves by compare-and-swap, retried when another
//! writer moved it first, so writers in several processes lose nothing; the index is brought up
//! to the ref afterwards, and by every later read, so a crash between the two is repaired. A
//! write survives a power loss through one flush of a journal (`journal`), which opening the
//! store replays.

mod error;
mod journal;
pub mod merge;
pub mod note;
mod notes;
mod objects;
mod store;
mod sync;

pub use error::Error;
pub use notes::NOTES_REF;
pub use store::{BRANCH_KEY, COMMIT_KEY, GitNotesStore, Provenance};
pub use sync::{setup_refspecs, tracking_ref};
