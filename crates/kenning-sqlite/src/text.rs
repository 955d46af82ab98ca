//! The full-text leg: keeping the FTS5 index in step with `memories`, and BM25 search over it.

use kenning_core::{Memory, MemoryId, ScoredId, SearchFilter};
use rusqlite::types::Value;
use rusqlite::{Connection, params, params_from_iter};

use crate::codec::sql_count;
use crate::error::{Error, Result};
use crate::filter;
use crate::fts_query::fts_query;

/// Sets the indexed text of the memory stored under `seq`, whether or not it had an entry.
pub(crate) fn index(conn: &Connection, seq: i64, memory: &Memory) -> Result<()> {
    conn.prepare_cached("DELETE FROM memories_fts WHERE rowid = ?")?.execute([seq])?;
    conn.prepare_cached("INSERT INTO memories_fts (rowid, text) VALUES (?, ?)")?
        .execute(params![seq, memory.search_text()])?;
    Ok(())
}

/// Memories matching any word of `query`, best BM25 first. The score is the negated BM25 value,
/// because FTS5 makes better matches more negative and callers expect higher to be better.
pub(crate) fn search(conn: &Connection, query: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<ScoredId>> {
    let Some(fts) = fts_query(query) else {
        return Ok(Vec::new());
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    let condition = filter::condition(filter);
    let sql = format!(
        "SELECT m.id, -bm25(memories_fts) AS score FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid \
         WHERE memories_fts MATCH ? AND {} ORDER BY score DESC, m.id LIMIT ?",
        condition.sql
    );
    let mut params = vec![Value::Text(fts)];
    params.extend(condition.params);
    params.push(Value::Integer(sql_count(limit)));
    let mut statement = conn.prepare_cached(&sql)?;
    let rows =
        statement.query_map(params_from_iter(params), |row| Ok((row.get::<_, String>(0)?, row.get::<_, f64>(1)?)))?;
    rows.map(|row| {
        let (id, score) = row?;
        let id = MemoryId::parse(&id).map_err(|error| Error::Corrupt(error.to_string()))?;
        Ok(ScoredId { id, score })
    })
    .collect()
}
