//! Search through an in-memory [`SearchIndex`], kept in step with the database.
//!
//! The index is built on the first search, from the rows' search text, tags, filter columns
//! and, per embedding model on its first vector search, their vectors. Every later search first
//! asks the database for its highest change number (one indexed lookup) and, if rows changed
//! since the index last looked, whichever process changed them, reloads just those rows. So a
//! search always sees every write committed before it began, and the index costs nothing to
//! keep in step on the write path.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use chrono::TimeDelta;
use kenning_core::{FieldError, MemoryId, MemoryKind, ScoredId, SearchFilter, Status};
use kenning_index::{DocInput, SearchIndex};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row, Rows, params};

use crate::codec::parse_time_key;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::vector;

/// An index this far behind its records in replaced slots is rebuilt rather than patched.
const MIN_DEAD_SLOTS_FOR_REBUILD: usize = 1000;

#[derive(Default)]
pub(crate) struct SearchCache {
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    index: Option<SearchIndex>,
    /// The highest change number the index reflects.
    applied: i64,
}

impl SearchCache {
    pub fn search_text(&self, db: &Db, query: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<ScoredId>> {
        let state = self.current(db, None)?;
        Ok(state.index.as_ref().map_or_else(Vec::new, |index| index.search_text(query, filter, limit)))
    }

    pub fn search_vector(
        &self,
        db: &Db,
        query: &[f32],
        model: &str,
        filter: &SearchFilter,
        limit: usize,
    ) -> Result<Vec<ScoredId>> {
        let state = self.current(db, Some(model))?;
        Ok(state.index.as_ref().map_or_else(Vec::new, |index| index.search_vector(query, model, filter, limit)))
    }

    /// The neighbours of the records under `keys` (`None` for a record the store does not hold).
    pub fn neighbours(&self, db: &Db, keys: &[Option<i64>], filter: &SearchFilter, window: TimeDelta) -> Result<Vec<Vec<MemoryId>>> {
        let state = self.current(db, None)?;
        let Some(index) = state.index.as_ref() else { return Ok(vec![Vec::new(); keys.len()]) };
        Ok(keys.iter().map(|key| key.map_or_else(Vec::new, |key| index.neighbours(key, filter, window))).collect())
    }

    /// Builds or updates the index now, with `model`'s vectors.
    pub fn warm_up(&self, db: &Db, model: Option<&str>) -> Result<()> {
        self.current(db, model).map(drop)
    }

    /// Drops the index; the next search builds it again from the database.
    pub fn reset(&self) {
        *write(&self.state) = State::default();
    }

    /// The state, once it reflects every change committed so far and holds `model`'s vectors.
    fn current(&self, db: &Db, model: Option<&str>) -> Result<RwLockReadGuard<'_, State>> {
        let head = db.read(|conn| head_change(conn))?;
        {
            let state = read(&self.state);
            if state.is_current(head, model) {
                return Ok(state);
            }
        }
        {
            let mut state = write(&self.state);
            // Another thread may have caught up while this one waited for the lock.
            if !state.is_current(head, model) {
                db.read(|conn| state.catch_up(conn, model))?;
            }
        }
        Ok(read(&self.state))
    }
}

impl State {
    fn is_current(&self, head: i64, model: Option<&str>) -> bool {
        self.index.as_ref().is_some_and(|index| self.applied >= head && model.is_none_or(|model| index.has_model(model)))
    }

    /// Loads what changed since `applied`, and `model`'s vectors if they are not loaded yet.
    /// Runs in one read transaction, so everything loaded comes from one snapshot.
    fn catch_up(&mut self, conn: &Connection, model: Option<&str>) -> Result<()> {
        let head = head_change(conn)?;
        let stale = self.index.as_ref().is_some_and(|index| index.dead_slots() >= MIN_DEAD_SLOTS_FOR_REBUILD.max(index.len() / 4));
        if self.index.is_none() || stale {
            // The models of the old index stay loaded in the new one.
            let models = self.index.as_ref().map(SearchIndex::models).unwrap_or_default();
            let mut index = SearchIndex::new();
            for model in &models {
                index.add_model(model);
            }
            self.index = Some(index);
            self.applied = 0;
        }
        let index = self.index.as_mut().expect("just ensured");
        if let Some(model) = model.filter(|model| !index.has_model(model)) {
            index.add_model(model);
            load_vectors(conn, index, model, self.applied)?;
        }
        load_rows(conn, index, self.applied, head)?;
        self.applied = head;
        Ok(())
    }
}

pub(crate) fn head_change(conn: &Connection) -> Result<i64> {
    Ok(conn.prepare_cached("SELECT coalesce(max(change_seq), 0) FROM memories")?.query_row([], |row| row.get(0))?)
}

/// The vectors of `model` for rows the index already holds (changed at or before `applied`).
fn load_vectors(conn: &Connection, index: &mut SearchIndex, model: &str, applied: i64) -> Result<()> {
    let mut statement = conn.prepare_cached(
        "SELECT m.seq, e.vector FROM embeddings e JOIN memories m ON m.id = e.memory_id \
         WHERE e.model = ? AND m.change_seq <= ?",
    )?;
    let mut rows = statement.query(params![model, applied])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        index.set_vector(seq, model, &blob_vector(row, 1)?);
    }
    Ok(())
}

/// Every row changed in `(after, head]`, with its tags and its vectors from the loaded models.
/// Each query walks the changed rows through the change-number index and looks up their tags
/// and vectors by key (`CROSS JOIN` keeps SQLite to that order), so a small change costs a few
/// lookups and a full load streams the tables without sorting them. Rows and tags come in the
/// same order and are merged as they stream, so loading a large store holds no table of tags.
fn load_rows(conn: &Connection, index: &mut SearchIndex, after: i64, head: i64) -> Result<()> {
    let mut tags_statement = conn.prepare_cached(
        "SELECT m.seq, t.tag FROM memories m CROSS JOIN memory_tags t ON t.memory_id = m.id \
         WHERE m.change_seq > ?1 AND m.change_seq <= ?2 ORDER BY m.change_seq, m.seq",
    )?;
    let mut tag_rows = tags_statement.query(params![after, head])?;
    let mut next_tag: Option<(i64, String)> = next_tag_row(&mut tag_rows)?;
    let mut tags: Vec<String> = Vec::new();

    let mut rows_statement = conn.prepare_cached(
        "SELECT seq, id, namespace, kind, status, confidence, occurred_at, search_text FROM memories \
         WHERE change_seq > ?1 AND change_seq <= ?2 ORDER BY change_seq, seq",
    )?;
    let mut rows = rows_statement.query(params![after, head])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        tags.clear();
        while let Some((_, tag)) = next_tag.take_if(|(tag_seq, _)| *tag_seq == seq) {
            tags.push(tag);
            next_tag = next_tag_row(&mut tag_rows)?;
        }
        let id: String = row.get(1)?;
        let namespace: String = row.get(2)?;
        let text: String = row.get(7)?;
        let doc = DocInput {
            id: &id,
            kind: MemoryKind::parse(&row.get::<_, String>(3)?).map_err(corrupt)?,
            status: Status::parse(&row.get::<_, String>(4)?).map_err(corrupt)?,
            namespace: &namespace,
            tags: &tags,
            confidence: row.get(5)?,
            occurred_at: parse_time_key(&row.get::<_, String>(6)?)?,
            text: &text,
        };
        // The row's vectors follow below; until then it has none.
        index.upsert(seq, &doc, &[]);
    }

    for model in index.models() {
        let mut vectors_statement = conn.prepare_cached(
            "SELECT m.seq, e.vector FROM memories m CROSS JOIN embeddings e ON e.memory_id = m.id AND e.model = ?3 \
             WHERE m.change_seq > ?1 AND m.change_seq <= ?2",
        )?;
        let mut rows = vectors_statement.query(params![after, head, model])?;
        while let Some(row) = rows.next()? {
            index.set_vector(row.get(0)?, &model, &blob_vector(row, 1)?);
        }
    }
    Ok(())
}

fn next_tag_row(rows: &mut Rows<'_>) -> Result<Option<(i64, String)>> {
    Ok(match rows.next()? {
        Some(row) => Some((row.get(0)?, row.get(1)?)),
        None => None,
    })
}

fn blob_vector(row: &Row<'_>, column: usize) -> Result<Vec<f32>> {
    match row.get_ref(column)? {
        ValueRef::Blob(blob) => vector::decode(blob),
        _ => Err(Error::Corrupt("a stored vector is not a BLOB".to_owned())),
    }
}

fn corrupt(error: FieldError) -> Error {
    Error::Corrupt(error.to_string())
}

/// A poisoned lock only means another thread panicked while holding it. The index may then be
/// half updated, so it is dropped and built again.
fn read(lock: &RwLock<State>) -> RwLockReadGuard<'_, State> {
    lock.read().unwrap_or_else(|poisoned| {
        drop(poisoned);
        lock.clear_poison();
        *write(lock) = State::default();
        lock.read().unwrap_or_else(PoisonError::into_inner)
    })
}

fn write(lock: &RwLock<State>) -> RwLockWriteGuard<'_, State> {
    lock.write().unwrap_or_else(|poisoned| {
        let mut state = poisoned.into_inner();
        *state = State::default();
        lock.clear_poison();
        state
    })
}
