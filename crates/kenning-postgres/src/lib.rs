//! The PostgreSQL backend of kenning: the organisation's shared memory, a
//! [`MemoryStore`](kenning_core::MemoryStore) and [`DecisionStore`](kenning_core::decision::DecisionStore)
//! in one PostgreSQL schema with pgvector, used by many people and processes at once.
//!
//! - [`PostgresStore`] is the store; [`PostgresStore::open`] sets it up from [`Settings`] (a
//!   connection string, an optional read replica's, the `PG*` [`Environment`], the schema to
//!   use) without connecting, so an unreachable database does not stop a server whose other
//!   domains work. The first call connects, and creates or upgrades the schema under an
//!   advisory lock (`schema`). Connection strings are read as libpq reads them (`conninfo`,
//!   `connect`, `tls`, `pgpass`), and [`masked`] shows one without its password.
//! - [`Error`] is what goes wrong inside it. It converts into [`kenning_core::Error`]: a database
//!   that cannot be reached becomes `Unavailable`, which recall reports and steps around;
//!   not-found, version conflicts and duplicates map to the core's own variants.
//!
//! Each memory is one row whose `body` holds the record as JSON; the fields that filters and
//! ordering need are copied into indexed columns. Full-text search runs on a `tsvector` column
//! with a GIN index, vector search on pgvector with one HNSW (cosine) index per embedding model,
//! and every [`SearchFilter`](kenning_core::SearchFilter) field is part of the SQL. The decision
//! tables and the graph mirror the SQLite store's, walked with recursive SQL.
//!
//! Concurrency: every write is one transaction; updates compare and swap the memory's version
//! under a row lock, and the engine retries the loser; exact duplicates among active memories
//! are refused by a partial unique index, so racing captures of one content store it once.
//!
//! The traits are synchronous and the driver (tokio-postgres, pooled by deadpool) is not: the
//! store runs the driver on a small runtime of its own and blocks the caller (`db`). Every call
//! is one transaction of unnamed statements (`sql`), which a connection pooler in transaction
//! mode (pgbouncer) passes through; reads go to a read replica when one is configured (`db`).
//! Bulk loads are copied in, their vectors indexed all at once afterwards (`vectors`).

mod codec;
mod connect;
mod conninfo;
mod db;
mod decisions;
mod error;
mod filter;
mod pgpass;
mod purge;
mod read;
mod relations;
mod schema;
mod sql;
mod state;
mod store;
mod tls;
mod vectors;
mod write;

pub use conninfo::{Environment, masked};
pub use db::{Settings, VectorIndex};
pub use error::Error;
pub use store::{PostgresStore, ServerInfo, migrate_to, probe};
pub use vectors::CatchUp;
