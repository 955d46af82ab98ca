//! kenning's coding toolsets below the MCP layer: the repository inspector (`repo`), tests and
//! validation (`test`) and documentation (`docs`).
//!
//! - [`confine`]: every path a caller names is resolved inside the repository or refused.
//! - [`CodeIndex`] ([`index`]): source files walked with the `ignore` crate, parsed with
//!   tree-sitter ([`parse`]: Rust, Python, TypeScript, JavaScript, Go) into chunks at function
//!   and type boundaries, kept in a SQLite file beside the project store ([`store`]) and
//!   refreshed incrementally by modification time and hash; searched with kenning-index's BM25
//!   and, given an embedder, vectors.
//! - [`runner`]: test runners detected from the repository, run as fixed argument lists
//!   with a timeout and an output cap, their output read into structured results. [`graph`] resolves imports into a file graph;
//!   [`understand`] answers what a file or directory is; [`git`] reads history with git2.
//!
//! - [`docs`]: the project's documentation and the installed dependencies' (Cargo registry
//!   sources at Cargo.lock's versions, `node_modules`, `site-packages`), searched and looked up.
//!
//! Invariant: no path from a caller is joined onto the root before [`confine::Confinement`]
//! accepted it, and no caller text becomes a shell command.

pub mod confine;
pub mod docs;
mod error;
pub mod git;
pub mod graph;
mod index;
pub mod lang;
pub mod parse;
pub mod run;
pub mod runner;
mod store;
pub mod understand;
pub mod views;

pub use confine::{Confinement, RootPath};
pub use error::{Error, Result};
pub use index::{CodeIndex, MAX_LIMIT, SearchScope};
pub use lang::Language;
pub use understand::{Depth, Direction, Structure, TestLink};
