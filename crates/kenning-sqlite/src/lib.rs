//! The SQLite backend of kenning: a [`MemoryStore`](kenning_core::MemoryStore) in one database file.
//!
//! - [`SqliteStore`] is the store; [`SqliteStore::open`] creates or upgrades the file.
//! - [`Error`] is what goes wrong inside it; it converts into [`kenning_core::Error`], mostly as
//!   `Storage`, with not-found and version conflicts mapped to the core's own variants.
//!
//! Each memory is one row whose `body` column holds the whole record as JSON, so records round
//! trip losslessly; the fields that filters and ordering need are copied into indexed columns.
//! Beside it live the version history, the tags, an FTS5 index over each memory's search text
//! (searched with BM25) and the vectors, which are searched exactly by dot product. Every write
//! updates all of these in one transaction, so the indexes never disagree with the records.
//!
//! Durability: WAL mode with `synchronous = FULL`, so a write that returned `Ok` survives a
//! crash of the process and of the machine. Concurrency: writers from several processes are
//! serialised by SQLite's lock and retried on contention, never failing with "database is locked".

mod codec;
mod db;
mod error;
mod filter;
mod fts_query;
mod read;
mod schema;
mod store;
mod text;
mod vector;
mod write;

pub use error::Error;
pub use store::SqliteStore;
