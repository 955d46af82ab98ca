//! The SQLite backend of kenning: a [`MemoryStore`](kenning_core::MemoryStore) in one database file.
//!
//! - [`SqliteStore`] is the store; [`SqliteStore::open`] creates or upgrades the file.
//! - [`Error`] is what goes wrong inside it; it converts into [`kenning_core::Error`], mostly as
//!   `Storage`, with not-found and version conflicts mapped to the core's own variants.
//!
//! Each memory is one row whose `body` column holds the whole record as JSON, so records round
//! trip losslessly; the fields that filters and ordering need are copied into indexed columns,
//! beside the memory's search text. The version history, the tags and the vectors live in
//! tables of their own. Every write updates all of these in one transaction.
//!
//! Searches run in memory, on a [`kenning_index::SearchIndex`] built from the database on the
//! first search and brought up to date before each later one through the rows' change
//! sequence numbers (see `search`), so writes by other processes are seen too.
//!
//! The same file keeps the domain's decisions (the [`DecisionStore`](kenning_core::decision::DecisionStore)
//! half of [`SqliteStore`]): decision rows beside their memories, signals, outcomes, and a
//! `relations` table holding the decision graph and a copy of every memory's links, walked
//! with a recursive common table expression.
//!
//! A backend whose source of truth lies elsewhere uses the store as its index (see `mirror`):
//! [`SqliteStore::catch_up_mirror`] applies whole records from the source and records, in the
//! same transaction, which source state the index reflects.
//!
//! Durability: WAL mode with `synchronous = FULL`, so a write that returned `Ok` survives a
//! crash of the process and of the machine; [`Durability::ProcessCrash`] trades the machine
//! crash for writes that do not wait for the disk. Concurrency: writers from several processes are
//! serialised by SQLite's lock and retried on contention, never failing with "database is locked".

mod codec;
mod db;
mod decisions;
mod error;
mod filter;
mod mirror;
mod purge;
mod index_file;
mod read;
mod relations;
mod schema;
mod search;
mod state;
mod store;
mod vector;
mod write;

pub use db::Durability;
pub use error::Error;
pub use mirror::{MirrorChange, MirrorDecision, MirrorRecord, MirrorUpdate, VersionedEmbedding};
pub use store::SqliteStore;
