//! Every change to the store. Each function runs inside one write transaction opened by the
//! caller, and keeps the filter columns, tags, search text and vectors in step with the record.
//! Every write of a record or its vectors takes a new change sequence number, which is how
//! search indexes in this and other processes learn what to reload.

use chrono::{DateTime, Utc};
use kenning_core::Refusal;
use kenning_core::{Embedding, Inserted, Memory, MemoryId, MemoryRecord, MemoryVersion, Status};
use rusqlite::{Connection, OptionalExtension, params};

use crate::codec::{decode_memory, encode_facets, encode_memory, time_key};
use crate::error::{Error, Result};
use crate::{relations, vector};

pub(crate) fn insert(conn: &Connection, batch: &[(Memory, Option<Embedding>)]) -> Result<Vec<Inserted>> {
    let mut outcomes = Vec::with_capacity(batch.len());
    for (memory, embedding) in batch {
        let hash = memory.content_hash();
        // Checked before the id, so that retrying a capture whose acknowledgement was lost
        // reports the duplicate instead of failing.
        if let Some(existing) = active_duplicate(conn, memory, &hash, None)? {
            outcomes.push(Inserted::Duplicate(existing));
            continue;
        }
        if stored(conn, memory.id.as_str())?.is_some() {
            return Err(Error::Refused(Refusal::IdTaken(memory.id.to_string())));
        }
        write_row(conn, memory, &hash, None)?;
        if let Some(embedding) = embedding {
            vector::put(conn, memory.id.as_str(), embedding)?;
        }
        outcomes.push(Inserted::Created);
    }
    Ok(outcomes)
}

/// Compare-and-swap on the version. The row is read and written under the transaction's write
/// lock, so no other writer can move the version in between.
pub(crate) fn replace(
    conn: &Connection,
    next: &Memory,
    previous: &MemoryVersion,
    embedding: Option<&Embedding>,
) -> Result<()> {
    let id = next.id.as_str();
    let Some(current) = stored(conn, id)? else {
        return Err(Error::Refused(Refusal::NotFound(id.to_owned())));
    };
    if current.version != previous.version {
        return Err(Error::Refused(Refusal::Conflict { id: id.to_owned(), expected: previous.version }));
    }
    let hash = next.content_hash();
    if let Some(existing) = active_duplicate(conn, next, &hash, Some(id))? {
        return Err(Error::Refused(Refusal::Duplicate { id: id.to_owned(), existing: existing.to_string() }));
    }
    // Reads are recorded outside versions, so the stored counters are newer than the caller's copy.
    let mut next = next.clone();
    next.access_count = next.access_count.max(current.memory.access_count);
    next.last_accessed_at = next.last_accessed_at.max(current.memory.last_accessed_at);
    write_row(conn, &next, &hash, Some(current.seq))?;
    put_version(conn, id, previous, true)?;
    let text_changed = current.memory.search_text() != next.search_text();
    update_vectors(conn, id, text_changed, embedding)
}

/// Bumps access counts without a new version: reading a memory does not change what it says.
pub(crate) fn record_access(conn: &Connection, ids: &[MemoryId], at: DateTime<Utc>) -> Result<()> {
    // A memory read several times since the last write (the same hit of many recalls) is read,
    // decoded and rewritten once with all its reads.
    let mut sorted: Vec<&MemoryId> = ids.iter().collect();
    sorted.sort_unstable();
    for reads in sorted.chunk_by(|a, b| a == b) {
        let Some(mut current) = stored(conn, reads[0].as_str())? else {
            continue;
        };
        current.memory.access_count += reads.len() as u64;
        // Two processes may record reads out of order; the latest read time must still win.
        current.memory.last_accessed_at = current.memory.last_accessed_at.max(Some(at));
        conn.prepare_cached("UPDATE memories SET body = ? WHERE seq = ?")?
            .execute(params![encode_memory(&current.memory)?, current.seq])?;
    }
    Ok(())
}

pub(crate) fn set_embeddings(conn: &Connection, items: &[(MemoryId, Embedding)]) -> Result<()> {
    for (id, embedding) in items {
        if stored(conn, id.as_str())?.is_none() {
            tracing::warn!(%id, "not storing a vector for a memory that does not exist");
            continue;
        }
        vector::put(conn, id.as_str(), embedding)?;
        conn.prepare_cached("UPDATE memories SET change_seq = ? WHERE id = ?")?.execute(params![next_change(conn)?, id.as_str()])?;
    }
    Ok(())
}

/// Writes records as they are. A record is skipped when its id exists at the same or a newer
/// version, and when it is active and another active memory already holds its content, because
/// the store never holds two active copies of one content.
pub(crate) fn import(conn: &Connection, records: &[MemoryRecord]) -> Result<usize> {
    let mut written = 0;
    for record in records {
        let memory = &record.memory;
        let id = memory.id.as_str();
        let current = stored(conn, id)?;
        if current.as_ref().is_some_and(|current| current.version >= memory.version) {
            continue;
        }
        let hash = memory.content_hash();
        if let Some(existing) = active_duplicate(conn, memory, &hash, Some(id))? {
            tracing::info!(%id, %existing, "import skipped a duplicate of an active memory");
            continue;
        }
        write_row(conn, memory, &hash, current.as_ref().map(|current| current.seq))?;
        for version in &record.history {
            put_version(conn, id, version, true)?;
        }
        let text_changed = match &current {
            Some(current) => {
                // The version being overwritten stays in the history unless the incoming
                // history already has an entry for it.
                let overwritten = MemoryVersion {
                    version: current.version,
                    superseded_at: memory.updated_at,
                    reason: format!("replaced by imported version {}", memory.version),
                    memory: current.memory.clone(),
                };
                put_version(conn, id, &overwritten, false)?;
                current.memory.search_text() != memory.search_text()
            }
            None => false,
        };
        update_vectors(conn, id, text_changed, record.embedding.as_ref())?;
        written += 1;
    }
    Ok(written)
}

/// Rewrites every row's search text and tags, and the copy of its links in the graph, from the
/// record itself, under a new change number, so that every search index reloads it.
pub(crate) fn rebuild_index(conn: &Connection) -> Result<u64> {
    conn.execute("DELETE FROM memory_tags", [])?;
    let change = next_change(conn)?;
    let mut statement = conn.prepare("SELECT seq, body FROM memories")?;
    let mut rows = statement.query([])?;
    let mut indexed = 0;
    while let Some(row) = rows.next()? {
        let memory = decode_memory(&row.get::<_, String>(1)?)?;
        let seq: i64 = row.get(0)?;
        conn.prepare_cached("UPDATE memories SET search_text = ?, facets = ?, change_seq = ? WHERE seq = ?")?
            .execute(params![memory.search_text(), encode_facets(&memory), change, seq])?;
        write_tags(conn, &memory)?;
        relations::sync_links(conn, &memory)?;
        indexed += 1;
    }
    Ok(indexed)
}

/// The next change sequence number. Write transactions are serialised by SQLite's write lock,
/// so numbers grow in commit order, across processes too.
pub(crate) fn next_change(conn: &Connection) -> Result<i64> {
    Ok(conn.prepare_cached("SELECT coalesce(max(change_seq), 0) + 1 FROM memories")?.query_row([], |row| row.get(0))?)
}

/// A stored memory with its row key and version column.
pub(crate) struct Stored {
    pub(crate) seq: i64,
    pub(crate) version: u32,
    pub(crate) memory: Memory,
}

pub(crate) fn stored(conn: &Connection, id: &str) -> Result<Option<Stored>> {
    let row = conn
        .prepare_cached("SELECT seq, version, body FROM memories WHERE id = ?")?
        .query_row([id], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, u32>(1)?, row.get::<_, String>(2)?)))
        .optional()?;
    row.map(|(seq, version, body)| Ok(Stored { seq, version, memory: decode_memory(&body)? })).transpose()
}

/// The id of an active memory, other than `except`, that `memory` (whose content hash is
/// `hash`) would duplicate if it is active.
pub(crate) fn active_duplicate(conn: &Connection, memory: &Memory, hash: &str, except: Option<&str>) -> Result<Option<MemoryId>> {
    if memory.status != Status::Active {
        return Ok(None);
    }
    let existing: Option<String> = conn
        .prepare_cached(
            "SELECT id FROM memories WHERE namespace = ? AND content_hash = ? AND status = 'active' \
             AND id IS NOT ?",
        )?
        .query_row(params![memory.namespace.as_str(), hash, except], |row| row.get(0))
        .optional()?;
    existing.map(|id| MemoryId::parse(&id).map_err(|error| Error::Corrupt(error.to_string()))).transpose()
}

/// Writes the row of `memory` (a new one when `seq` is `None`) with its content hash, tags,
/// search text and the copy of its links in the graph. Inserting NULL into `seq` makes SQLite
/// assign a fresh key.
pub(crate) fn write_row(conn: &Connection, memory: &Memory, hash: &str, seq: Option<i64>) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO memories (seq, id, namespace, kind, status, confidence, created_at, occurred_at, \
         content_hash, version, body, change_seq, search_text, facets) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (seq) DO UPDATE SET id = excluded.id, namespace = excluded.namespace, \
         kind = excluded.kind, status = excluded.status, confidence = excluded.confidence, \
         created_at = excluded.created_at, occurred_at = excluded.occurred_at, \
         content_hash = excluded.content_hash, version = excluded.version, body = excluded.body, \
         change_seq = excluded.change_seq, search_text = excluded.search_text, facets = excluded.facets",
    )?
    .execute(params![
        seq,
        memory.id.as_str(),
        memory.namespace.as_str(),
        memory.kind.as_str(),
        memory.status.as_str(),
        memory.confidence,
        time_key(memory.created_at),
        time_key(memory.occurred_at()),
        hash,
        memory.version,
        encode_memory(memory)?,
        next_change(conn)?,
        memory.search_text(),
        encode_facets(memory),
    ])?;
    if seq.is_some() {
        conn.prepare_cached("DELETE FROM memory_tags WHERE memory_id = ?")?.execute([memory.id.as_str()])?;
    }
    write_tags(conn, memory)?;
    relations::sync_links(conn, memory)
}

/// Adds the tag rows of `memory`, which has none yet.
fn write_tags(conn: &Connection, memory: &Memory) -> Result<()> {
    let id = memory.id.as_str();
    let mut statement = conn.prepare_cached("INSERT OR IGNORE INTO memory_tags (memory_id, tag) VALUES (?, ?)")?;
    for tag in &memory.tags {
        statement.execute(params![id, tag])?;
    }
    Ok(())
}

/// Adds a superseded version to the history; with `overwrite`, over an entry of the same version.
pub(crate) fn put_version(conn: &Connection, id: &str, version: &MemoryVersion, overwrite: bool) -> Result<()> {
    let sql = if overwrite {
        "INSERT OR REPLACE INTO memory_versions (memory_id, version, superseded_at, reason, body) VALUES (?, ?, ?, ?, ?)"
    } else {
        "INSERT OR IGNORE INTO memory_versions (memory_id, version, superseded_at, reason, body) VALUES (?, ?, ?, ?, ?)"
    };
    conn.prepare_cached(sql)?.execute(params![
        id,
        version.version,
        time_key(version.superseded_at),
        version.reason,
        encode_memory(&version.memory)?
    ])?;
    Ok(())
}

/// Vectors embed the search text, so they are stale once it changes; `embedding`, when given,
/// is the vector of the new text.
fn update_vectors(conn: &Connection, id: &str, text_changed: bool, embedding: Option<&Embedding>) -> Result<()> {
    if text_changed {
        vector::delete_all(conn, id)?;
    }
    if let Some(embedding) = embedding {
        vector::put(conn, id, embedding)?;
    }
    Ok(())
}
