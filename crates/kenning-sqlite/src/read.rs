//! Queries that fetch memories, their history and their vectors, and the store's figures.

use std::path::Path;

use kenning_core::{Memory, MemoryId, MemoryKind, MemoryRecord, MemoryVersion, SearchFilter, Status, StoreStats};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use crate::codec::{decode_memory, parse_time_key, sql_count};
use crate::error::Result;
use crate::{filter, vector};

pub(crate) fn get(conn: &Connection, id: &str) -> Result<Option<Memory>> {
    let body: Option<String> =
        conn.prepare_cached("SELECT body FROM memories WHERE id = ?")?.query_row([id], |row| row.get(0)).optional()?;
    body.map(|body| decode_memory(&body)).transpose()
}

/// The memory captured first, by capture time then id (the `memories_created` index).
pub(crate) fn first_captured(conn: &Connection) -> Result<Option<Memory>> {
    let body: Option<String> =
        conn.prepare_cached("SELECT body FROM memories ORDER BY created_at, id LIMIT 1")?.query_row([], |row| row.get(0)).optional()?;
    body.map(|body| decode_memory(&body)).transpose()
}

pub(crate) fn get_many(conn: &Connection, ids: &[MemoryId]) -> Result<Vec<Memory>> {
    let mut memories = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(memory) = get(conn, id.as_str())? {
            memories.push(memory);
        }
    }
    Ok(memories)
}

/// The row key (`seq`, which grows in capture order) of each id, `None` for an id not stored.
pub(crate) fn keys(conn: &Connection, ids: &[MemoryId]) -> Result<Vec<Option<i64>>> {
    let mut statement = conn.prepare_cached("SELECT seq FROM memories WHERE id = ?")?;
    ids.iter().map(|id| Ok(statement.query_row([id.as_str()], |row| row.get(0)).optional()?)).collect()
}

pub(crate) fn history(conn: &Connection, id: &str) -> Result<Vec<MemoryVersion>> {
    let mut statement = conn.prepare_cached(
        "SELECT version, superseded_at, reason, body FROM memory_versions WHERE memory_id = ? ORDER BY version",
    )?;
    let rows = statement.query_map([id], |row| {
        Ok((row.get::<_, u32>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?, row.get::<_, String>(3)?))
    })?;
    rows.map(|row| {
        let (version, superseded_at, reason, body) = row?;
        Ok(MemoryVersion {
            version,
            superseded_at: parse_time_key(&superseded_at)?,
            reason,
            memory: decode_memory(&body)?,
        })
    })
    .collect()
}

pub(crate) fn list(conn: &Connection, filter: &SearchFilter, offset: usize, limit: usize) -> Result<Vec<Memory>> {
    let condition = filter::condition(filter);
    let sql = format!(
        "SELECT m.body FROM memories m WHERE {} ORDER BY m.created_at DESC, m.id DESC LIMIT ? OFFSET ?",
        condition.sql
    );
    let mut params = condition.params;
    params.push(Value::Integer(sql_count(limit)));
    params.push(Value::Integer(sql_count(offset)));
    bodies(conn, &sql, params)
}

pub(crate) fn count(conn: &Connection, filter: &SearchFilter) -> Result<u64> {
    let condition = filter::condition(filter);
    let sql = format!("SELECT COUNT(*) FROM memories m WHERE {}", condition.sql);
    let count: i64 = conn.prepare_cached(&sql)?.query_row(params_from_iter(condition.params), |row| row.get(0))?;
    Ok(count as u64)
}

/// Newest first, so that after a model change recent memories become findable first.
pub(crate) fn missing_embeddings(conn: &Connection, model: &str, limit: usize) -> Result<Vec<Memory>> {
    let sql = "SELECT m.body FROM memories m \
               WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.memory_id = m.id AND e.model = ?) \
               ORDER BY m.created_at DESC, m.id DESC LIMIT ?";
    bodies(conn, sql, vec![Value::Text(model.to_owned()), Value::Integer(sql_count(limit))])
}

/// Capture order is creation time, then id; unlike insertion order it survives export and import.
pub(crate) fn export(conn: &Connection, offset: usize, limit: usize) -> Result<Vec<MemoryRecord>> {
    let memories = bodies(
        conn,
        "SELECT body FROM memories ORDER BY created_at, id LIMIT ? OFFSET ?",
        vec![Value::Integer(sql_count(limit)), Value::Integer(sql_count(offset))],
    )?;
    memories
        .into_iter()
        .map(|memory| {
            let history = history(conn, memory.id.as_str())?;
            let embedding = vector::latest(conn, memory.id.as_str())?;
            Ok(MemoryRecord { memory, history, embedding })
        })
        .collect()
}

pub(crate) fn stats(conn: &Connection, path: &Path) -> Result<StoreStats> {
    let mut stats =
        StoreStats { backend: "sqlite".to_owned(), location: path.display().to_string(), ..StoreStats::default() };
    // Every status and kind is listed, with zero where there are none, so that readers of the
    // figures see the whole vocabulary.
    stats.by_status = Status::names().map(|name| (name.to_owned(), 0)).collect();
    stats.by_kind = MemoryKind::names().map(|name| (name.to_owned(), 0)).collect();
    for (status, count) in grouped(conn, "SELECT status, COUNT(*) FROM memories GROUP BY status")? {
        stats.total += count;
        stats.by_status.insert(status, count);
    }
    let active = "FROM memories WHERE status = 'active'";
    stats.by_namespace =
        grouped(conn, &format!("SELECT namespace, COUNT(*) {active} GROUP BY namespace"))?.into_iter().collect();
    stats.by_kind.extend(grouped(conn, &format!("SELECT kind, COUNT(*) {active} GROUP BY kind"))?);
    stats.vectors_by_model =
        grouped(conn, "SELECT model, COUNT(*) FROM embeddings GROUP BY model")?.into_iter().collect();
    stats.text_index_entries =
        conn.query_row("SELECT COUNT(*) FROM memories WHERE search_text != ''", [], |row| row.get::<_, i64>(0))? as u64;
    stats.size_bytes = size_bytes(path);
    Ok(stats)
}

/// The database file plus its write-ahead log, which holds recent commits until a checkpoint.
fn size_bytes(path: &Path) -> Option<u64> {
    let main = std::fs::metadata(path).ok()?.len();
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    Some(main + std::fs::metadata(wal).map_or(0, |meta| meta.len()))
}

fn grouped(conn: &Connection, sql: &str) -> Result<Vec<(String, u64)>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params![], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as u64)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn bodies(conn: &Connection, sql: &str, params: Vec<Value>) -> Result<Vec<Memory>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params_from_iter(params), |row| row.get::<_, String>(0))?;
    rows.map(|body| decode_memory(&body?)).collect()
}
