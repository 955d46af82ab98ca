//! The hard delete of everything one author wrote (the data-rights purge).
//!
//! Rows are deleted, which nothing else in the store does: the search index of every process
//! learns of new and changed rows through their change numbers, and a deleted row has none. So
//! a purge that removed anything gives the store a new identity in the same transaction
//! (`store_identity`), which every process checks with its change number before a search: an
//! index of the old identity, in memory or in the index file, is dropped and built again.

use kenning_core::PurgeCounts;
use kenning_core::decision::purged_nodes;
use rusqlite::{Connection, params};

use crate::error::Result;

/// Removes every memory `author` wrote, with everything kept about it, and returns the counts.
/// The caller rolls the transaction back for a dry run.
pub(crate) fn purge_author(conn: &Connection, author: &str) -> Result<PurgeCounts> {
    let ids = authored(conn, author)?;
    let mut counts = PurgeCounts::default();
    for id in &ids {
        remove(conn, id, &mut counts)?;
    }
    if counts != PurgeCounts::default() {
        renew_identity(conn)?;
    }
    Ok(counts)
}

/// The memories whose current record or any superseded version names `author`: the same
/// selection as the author's export.
pub(crate) fn authored(conn: &Connection, author: &str) -> Result<Vec<String>> {
    let mut statement = conn.prepare_cached(
        "SELECT id FROM memories WHERE json_extract(body, '$.author') = ?1 \
         UNION SELECT memory_id FROM memory_versions WHERE json_extract(body, '$.author') = ?1",
    )?;
    let ids = statement.query_map([author], |row| row.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(ids)
}

fn remove(conn: &Connection, id: &str, counts: &mut PurgeCounts) -> Result<()> {
    let decision = conn.prepare_cached("DELETE FROM decisions WHERE id = ?")?.execute([id])?;
    counts.decisions += decision as u64;
    let signals: Vec<String> = conn
        .prepare_cached("SELECT id FROM decision_signals WHERE decision_id = ?")?
        .query_map([id], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let outcomes: Vec<String> = conn
        .prepare_cached("SELECT id FROM decision_outcomes WHERE decision_id = ?")?
        .query_map([id], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    counts.signals += signals.len() as u64;
    counts.outcomes += outcomes.len() as u64;
    for node in purged_nodes(id, &signals, &outcomes) {
        let edges = conn
            .prepare_cached("DELETE FROM relations WHERE (from_kind = ?1 AND from_id = ?2) OR (to_kind = ?1 AND to_id = ?2)")?
            .execute(params![node.kind.as_str(), node.id])?;
        counts.edges += edges as u64;
    }
    for table in ["decision_signals", "decision_outcomes", "decision_files"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE decision_id = ?"))?.execute([id])?;
    }
    conn.prepare_cached("DELETE FROM memory_tags WHERE memory_id = ?")?.execute([id])?;
    counts.versions += conn.prepare_cached("DELETE FROM memory_versions WHERE memory_id = ?")?.execute([id])? as u64;
    counts.vectors += conn.prepare_cached("DELETE FROM embeddings WHERE memory_id = ?")?.execute([id])? as u64;
    counts.memories += conn.prepare_cached("DELETE FROM memories WHERE id = ?")?.execute([id])? as u64;
    Ok(())
}

/// A new random identity: every search index made from this store so far, in any process or
/// in the index file, stops matching it and is rebuilt, so none can still find a deleted row.
pub(crate) fn renew_identity(conn: &Connection) -> Result<()> {
    conn.prepare_cached("UPDATE store_identity SET id = lower(hex(randomblob(16)))")?.execute([])?;
    Ok(())
}
