//! The database schema and its versioned migrations.
//!
//! `PRAGMA user_version` records how many entries of [`MIGRATIONS`] a database has applied.
//! Migrations only ever get appended: an applied one is never edited, so a store written by any
//! earlier build upgrades by running the ones it lacks.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

/// Each entry moves the schema from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    //
    // `memories.body` holds the whole record as JSON and is the source of truth; the other
    // columns copy the fields that filters and ordering need so that they can be indexed.
    // `seq` is an explicit integer key because the full-text index refers to rows by rowid, and
    // only an INTEGER PRIMARY KEY keeps its value across VACUUM. Times are stored as fixed-width
    // RFC 3339 text with nanoseconds, which sorts as text in time order and loses no precision.
    r#"
    CREATE TABLE memories (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        confidence REAL NOT NULL,
        created_at TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        version INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE UNIQUE INDEX memories_active_content ON memories (namespace, content_hash) WHERE status = 'active';
    CREATE INDEX memories_created ON memories (created_at, id);
    CREATE INDEX memories_occurred ON memories (occurred_at);

    CREATE TABLE memory_tags (
        memory_id TEXT NOT NULL,
        tag TEXT NOT NULL,
        PRIMARY KEY (memory_id, tag)
    ) WITHOUT ROWID;

    CREATE TABLE memory_versions (
        memory_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        superseded_at TEXT NOT NULL,
        reason TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (memory_id, version)
    ) WITHOUT ROWID;

    -- A rowid table on purpose: a rewrite of a vector gets a new, larger rowid, so the largest
    -- rowid of a memory's vectors is the one written last.
    CREATE TABLE embeddings (
        memory_id TEXT NOT NULL,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (memory_id, model)
    );
    CREATE INDEX embeddings_model ON embeddings (model, dim);

    -- Holds `Memory::search_text()` under rowid = memories.seq. Porter stemming lets a question
    -- about "deploying" find a memory about "deployment".
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    "#,
    // 2: search moves into memory (kenning-index), kept in step through a change sequence.
    //
    // `change_seq` grows with every write of a row's record or vectors (reads recorded by
    // `record_access` leave it alone), so a process finds what changed since it last looked,
    // whichever process wrote it, with one indexed range query. `search_text` is the text the
    // index analyses, kept beside the record so that loading the index needs no JSON decoding.
    // The FTS5 table, which held the same text, goes.
    r#"
    ALTER TABLE memories ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE memories ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
    UPDATE memories SET change_seq = seq,
        search_text = coalesce((SELECT text FROM memories_fts WHERE memories_fts.rowid = memories.seq), '');
    CREATE INDEX memories_change ON memories (change_seq);
    DROP TABLE memories_fts;
    "#,
];

/// Brings the database up to the newest schema. Safe to race: the version is read and bumped
/// inside one write transaction, so when two processes open a new store at once, one migrates
/// and the other finds the work done.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let supported = MIGRATIONS.len() as i64;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if found > supported {
        return Err(Error::NewerSchema { path: path.to_owned(), found, supported });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tracing::info!(path = %path.display(), version = index + 1, "migrated memory store schema");
    }
    if found < supported {
        // PRAGMA takes no bound parameters; the value is a constant of this build.
        tx.execute_batch(&format!("PRAGMA user_version = {supported}"))?;
    }
    tx.commit()?;
    Ok(())
}
