//! Search through an in-memory [`SearchIndex`], kept in step with the database.
//!
//! The index is opened from its file beside the database on the first search (see
//! `index_file`), or built from the rows' search text, tags, filter columns and, per
//! embedding model on its first vector search, their vectors when that file is missing or
//! refused. The file is rewritten in the background when the index was built afresh or has
//! moved well past it; the vectors it holds are linked in a graph for it first, without
//! holding the index, and once a file with newly linked vectors is written, the next search
//! reopens the index from it so that this process walks the graph too. Every later search first
//! asks the database for its highest change number (one indexed lookup) and, if rows changed
//! since the index last looked, whichever process changed them, reloads just those rows. So a
//! search always sees every write committed before it began, and the index costs nothing to
//! keep in step on the write path.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use chrono::TimeDelta;
use kenning_core::{FieldError, MemoryId, MemoryKind, ScoredId, SearchFilter, Status};
use kenning_index::{DocInput, GraphWork, SearchIndex};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row, Rows, params};

use crate::codec::{decode_facets, parse_time_key};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::index_file::{self, Refused};
use crate::vector;

/// An index this far behind its records in replaced slots is rebuilt rather than patched.
const MIN_DEAD_SLOTS_FOR_REBUILD: usize = 1000;
/// The index file is rewritten once the index in memory is this many changes ahead of it, and
/// at least a tenth of the store: often enough that a new process has little to catch up on,
/// rarely enough that the writes cost the store little.
const MIN_CHANGES_TO_PERSIST: i64 = 1000;
/// Marks that this process has not read or written the index file.
const NOT_PERSISTED: i64 = -1;
/// A process letting its store go links at most this many vectors before it writes the file
/// (about a third of a second's work); more are left to a process that stays, which links them
/// in the background.
const LINK_AT_EXIT: usize = 1000;

/// The index of one store, shared with the thread that writes it to its file.
pub(crate) struct SearchCache {
    state: Arc<RwLock<State>>,
    /// The change number the index file reflects, as far as this process knows: the change
    /// it read the file at, or last wrote it at (or tried to).
    persisted: Arc<AtomicI64>,
    /// The background write of the index file, if one was started.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The change at which this process last linked the index's vectors for its file, so that
    /// a file that cannot be written is not linked for again and again.
    linked: Arc<AtomicI64>,
    /// Set once the store is being let go: a background linking then stops where it is, and
    /// the file is written with what it linked.
    leaving: Arc<AtomicBool>,
    /// The fewest vectors of a model that the file links in a graph.
    graph_rows: usize,
}

impl Default for SearchCache {
    fn default() -> Self {
        SearchCache {
            state: Arc::default(),
            persisted: Arc::new(AtomicI64::new(NOT_PERSISTED)),
            writer: Mutex::new(None),
            linked: Arc::new(AtomicI64::new(NOT_PERSISTED)),
            leaving: Arc::new(AtomicBool::new(false)),
            graph_rows: kenning_index::GRAPH_ROWS,
        }
    }
}

#[derive(Default)]
struct State {
    index: Option<SearchIndex>,
    /// The highest change number the index reflects.
    applied: i64,
    /// The store's identity, read with the first catch-up.
    identity: Option<String>,
    /// The index file links vectors this index does not: the next catch-up opens the file
    /// again rather than keep searching them by scanning.
    reopen: bool,
}

impl SearchCache {
    /// Links a model's vectors in the file's graph from `rows` of them on, rather than from
    /// [`kenning_index::GRAPH_ROWS`].
    pub fn set_graph_rows(&mut self, rows: usize) {
        self.graph_rows = rows;
    }

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

    /// [`SearchCache::search_vector`] for each of `queries`, from one state of the index.
    pub fn search_vector_many(&self, db: &Db, queries: &[&[f32]], model: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<Vec<ScoredId>>> {
        let state = self.current(db, Some(model))?;
        Ok(state.index.as_ref().map_or_else(|| vec![Vec::new(); queries.len()], |index| index.search_vector_many(queries, model, filter, limit)))
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

    /// Drops the index and its file; the next search builds it again from the database.
    pub fn reset(&self, db: &Db) {
        let mut state = write(&self.state);
        *state = State::default();
        index_file::remove(db.path());
        self.persisted.store(NOT_PERSISTED, Ordering::SeqCst);
    }

    /// Brings the index up to date and writes it to its file now, with every vector linked,
    /// unless the file already reflects every change and links every vector; waits for a write
    /// under way first.
    pub fn persist(&self, db: &Db) -> Result<()> {
        self.persist_linking(db, usize::MAX)
    }

    fn persist_linking(&self, db: &Db, link_at_most: usize) -> Result<()> {
        // Catching up may start a background write; it is let finish first, and the index
        // reopened from the file it wrote, so that what it linked is not linked again.
        drop(self.current(db, None)?);
        self.wait_for_writer();
        drop(self.current(db, None)?);
        self.wait_for_writer();
        // The linking here is this call's own, bounded by `link_at_most`, and never cut short.
        let linking = Linking { graph_rows: self.graph_rows, at_most: link_at_most };
        write_file(&self.state, &self.persisted, &self.linked, &AtomicBool::new(false), db.path(), linking)
    }

    /// [`SearchCache::persist`] for a process about to let the store go, if it has the index in
    /// memory: a short-lived process (a hook, a CLI command) that caught up on changes or made
    /// some leaves the file reflecting them, so that the next process, often the very next
    /// prompt's hook, does not reload those rows itself. A process that never searched reads
    /// nothing for this. It links the vectors the file lacks only when they are few
    /// ([`LINK_AT_EXIT`]): a hook that built a large index afresh would otherwise spend seconds
    /// on its way out.
    pub fn persist_loaded(&self, db: &Db) -> Result<()> {
        if read(&self.state).index.is_none() {
            return Ok(());
        }
        self.leaving.store(true, Ordering::SeqCst);
        self.persist_linking(db, LINK_AT_EXIT)
    }

    /// The state, once it reflects every change committed so far and holds `model`'s vectors.
    fn current(&self, db: &Db, model: Option<&str>) -> Result<RwLockReadGuard<'_, State>> {
        let (head, identity) = db.read(|conn| head_and_identity(conn))?;
        {
            let state = read(&self.state);
            if state.is_current(head, &identity, model) {
                return Ok(state);
            }
        }
        {
            let mut state = write(&self.state);
            // Another thread may have caught up while this one waited for the lock.
            if !state.is_current(head, &identity, model) {
                let before = state.identity.clone();
                let caught_up = db.read(|conn| state.catch_up(conn, db.path(), model))?;
                if caught_up.added_model {
                    // The file lacks the vectors just loaded from the database, whatever change
                    // it reflects: written out, they spare every later process that load (a hook
                    // process recalls once and exits, so it would otherwise pay it every time).
                    self.persisted.store(NOT_PERSISTED, Ordering::SeqCst);
                } else if let Some(change) = caught_up.file_change {
                    self.persisted.store(change, Ordering::SeqCst);
                } else if before.is_some() && before != state.identity {
                    // A purge renewed the store's identity: the file is of the old one, so the
                    // index just rebuilt is written out at once.
                    self.persisted.store(NOT_PERSISTED, Ordering::SeqCst);
                }
            }
            let persisted = self.persisted.load(Ordering::SeqCst);
            let ahead = state.applied - persisted;
            let threshold = MIN_CHANGES_TO_PERSIST.max(state.index.as_ref().map_or(0, |index| index.len() as i64 / 10));
            // A file written by a process that left its vectors unlinked is linked here, once
            // per change, even though it reflects every change.
            let unlinked = state.index.as_ref().map_or(0, |index| index.unlinked_vectors(self.graph_rows)) as i64;
            let link_due = unlinked >= threshold && self.linked.load(Ordering::SeqCst) != state.applied;
            if persisted == NOT_PERSISTED || ahead >= threshold || link_due {
                drop(state);
                self.persist_in_background(db.path());
            }
        }
        Ok(read(&self.state))
    }

    /// Starts writing the index to its file on another thread, unless a write is under way
    /// (see `write_file`: searches go on meanwhile).
    fn persist_in_background(&self, path: &Path) {
        let mut writer = lock(&self.writer);
        if writer.as_ref().is_some_and(|running| !running.is_finished()) {
            return;
        }
        if let Some(finished) = writer.take() {
            let _ = finished.join();
        }
        let (state, persisted, path) = (Arc::clone(&self.state), Arc::clone(&self.persisted), path.to_owned());
        let (linked, leaving) = (Arc::clone(&self.linked), Arc::clone(&self.leaving));
        let linking = Linking { graph_rows: self.graph_rows, at_most: usize::MAX };
        let spawned = std::thread::Builder::new().name("kenning-index-writer".to_owned()).spawn(move || {
            // The file is a cache: without it the next process builds the index itself. A
            // failed write counts as the write of this change (see `write_file`), so that a
            // directory that cannot be written is not tried again before the index has moved
            // on as far again.
            if let Err(error) = write_file(&state, &persisted, &linked, &leaving, &path, linking) {
                tracing::warn!(%error, "could not write the search index file");
            }
        });
        match spawned {
            Ok(handle) => *writer = Some(handle),
            Err(error) => tracing::warn!(%error, "could not start the search index writer"),
        }
    }

    fn wait_for_writer(&self) {
        if let Some(running) = lock(&self.writer).take() {
            let _ = running.join();
        }
    }
}

impl Drop for SearchCache {
    /// A write under way is finished rather than abandoned, so no temporary file is left
    /// behind; its linking is cut short.
    fn drop(&mut self) {
        self.leaving.store(true, Ordering::SeqCst);
        self.wait_for_writer();
    }
}

/// Which vectors a write of the file links: those of models with at least `graph_rows`, if
/// there are no more than `at_most` to link.
#[derive(Clone, Copy)]
struct Linking {
    graph_rows: usize,
    at_most: usize,
}

/// Writes the index to its file unless the file already reflects every change it holds and
/// there are no vectors to link. The vectors its graphs lack are linked first, as `linking`
/// says, from a copy and with no lock held, since that takes seconds for a large store, and
/// stop once `stop` is set; the file is then written under a read lock, so searches go on
/// throughout, and any vector added or moved meanwhile is left for the next file to link. A
/// write that fails still counts as the write of its change, and linking as the linking of it
/// (`linked`).
fn write_file(state: &RwLock<State>, persisted: &AtomicI64, linked: &AtomicI64, stop: &AtomicBool, path: &Path, linking: Linking) -> Result<()> {
    let work = {
        let state = read(state);
        let Some(index) = state.index.as_ref() else { return Ok(()) };
        // Counted before the rows are copied, so that a process leaving a large unlinked index
        // does not copy all of its vectors only to drop them.
        let work = (index.unlinked_vectors(linking.graph_rows) <= linking.at_most).then(|| index.graph_work(linking.graph_rows));
        if persisted.load(Ordering::SeqCst) == state.applied && work.as_ref().is_none_or(GraphWork::is_empty) {
            return Ok(());
        }
        if work.is_some() {
            linked.store(state.applied, Ordering::SeqCst);
        }
        work.unwrap_or_default()
    };
    let linked_any = !work.is_empty();
    let graphs = work.link(stop);
    let written = {
        let state = read(state);
        let (Some(index), Some(identity)) = (state.index.as_ref(), state.identity.as_deref()) else { return Ok(()) };
        let started = Instant::now();
        let written = index_file::write(path, index, identity, state.applied, &graphs);
        persisted.store(state.applied, Ordering::SeqCst);
        if written.is_ok() {
            tracing::debug!(path = %path.display(), change = state.applied, elapsed = ?started.elapsed(), "wrote the search index file");
        }
        written
    };
    if written.is_ok() && linked_any {
        write(state).reopen = true;
    }
    written
}

impl State {
    fn is_current(&self, head: i64, identity: &str, model: Option<&str>) -> bool {
        !self.reopen
            && self.identity.as_deref() == Some(identity)
            && self.index.as_ref().is_some_and(|index| self.applied >= head && model.is_none_or(|model| index.has_model(model)))
    }

    /// Loads what changed since `applied`, and `model`'s vectors if they are not loaded yet.
    /// Runs in one read transaction, so everything loaded comes from one snapshot. Without an
    /// index in memory, it starts from the index file of the database at `path` if that is
    /// usable, and says which change that file reflects.
    fn catch_up(&mut self, conn: &Connection, path: &Path, model: Option<&str>) -> Result<CaughtUp> {
        let head = head_change(conn)?;
        let identity = index_file::store_identity(conn)?;
        if self.identity.as_ref().is_some_and(|known| *known != identity) {
            // A purge deleted rows, which change numbers cannot tell: start from scratch.
            tracing::info!(path = %path.display(), "the store was purged; building the index");
            self.index = None;
        }
        self.identity = Some(identity.clone());
        if std::mem::take(&mut self.reopen) {
            self.index = None;
        }
        let stale = self.index.as_ref().is_some_and(|index| index.dead_slots() >= MIN_DEAD_SLOTS_FOR_REBUILD.max(index.len() / 4));
        let mut loaded = None;
        if self.index.is_none() {
            match index_file::open(path, &identity, head) {
                Ok((index, change)) => {
                    self.index = Some(index);
                    self.applied = change;
                    loaded = Some(change);
                }
                Err(Refused::Missing) => tracing::debug!(path = %path.display(), "no search index file; building the index"),
                Err(Refused::Unusable(reason)) => {
                    tracing::info!(path = %path.display(), %reason, "search index file not used; building the index");
                }
            }
        }
        if self.index.is_none() || stale {
            self.start_afresh();
        }
        let mut added_model = self.load(conn, model, head)?;
        if loaded.is_some() {
            // Every row has a change number, and rows are deleted only by a purge, which gives
            // the store a new identity that no older file carries, so an index that caught up
            // from a sound file holds every row. One that does not is rebuilt.
            let held = self.index.as_ref().map_or(0, |index| index.len() as i64);
            if let Some(rows) = rows_unless(conn, held)? {
                tracing::warn!(path = %path.display(), rows, held, "search index file disagrees with the store; building the index");
                self.start_afresh();
                added_model |= self.load(conn, model, head)?;
                loaded = None;
            }
        }
        Ok(CaughtUp { file_change: loaded, added_model })
    }

    /// An empty index, keeping the models of the one it replaces.
    fn start_afresh(&mut self) {
        let models = self.index.as_ref().map(SearchIndex::models).unwrap_or_default();
        let mut index = SearchIndex::new();
        for model in &models {
            index.add_model(model);
        }
        self.index = Some(index);
        self.applied = 0;
    }

    /// Loads the rows changed since `applied`, and first `model`'s vectors if the index lacks
    /// them; says whether it added that model.
    fn load(&mut self, conn: &Connection, model: Option<&str>, head: i64) -> Result<bool> {
        let Some(index) = self.index.as_mut() else { return Ok(false) };
        let mut added_model = false;
        if let Some(model) = model.filter(|model| !index.has_model(model)) {
            index.add_model(model);
            load_vectors(conn, index, model, self.applied)?;
            added_model = true;
        }
        load_rows(conn, index, self.applied, head)?;
        self.applied = head;
        Ok(added_model)
    }
}

/// The number of rows in the store, unless it is `held`. Rows are numbered by SQLite, one more
/// than the largest, and deleted only by a purge, which renews the store's identity and so
/// discards every index of it: an index's rows are rows of the store, so when it holds as many
/// as the largest number, it holds them all. That answers from one step down the table's tree;
/// counting the rows reads a whole index of the table (half a second from a cold disk at a
/// million rows), and is left for a store whose numbers a purge left gaps in.
fn rows_unless(conn: &Connection, held: i64) -> Result<Option<i64>> {
    let largest: i64 = conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM memories")?.query_row([], |row| row.get(0))?;
    if largest == held {
        return Ok(None);
    }
    let rows: i64 = conn.prepare_cached("SELECT count(*) FROM memories")?.query_row([], |row| row.get(0))?;
    Ok((rows != held).then_some(rows))
}

/// What a catch-up did, as far as the index file is concerned.
struct CaughtUp {
    /// The change the index file reflects, when the index was read from it.
    file_change: Option<i64>,
    /// Whether a model's vectors were loaded from the database, which the file then lacks.
    added_model: bool,
}

/// The highest change number and the store's identity, read together in one statement: a
/// search checks both before it runs.
pub(crate) fn head_and_identity(conn: &Connection) -> Result<(i64, String)> {
    Ok(conn
        .prepare_cached("SELECT coalesce(max(change_seq), 0), (SELECT id FROM store_identity) FROM memories")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?)
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
        "SELECT seq, id, namespace, kind, status, confidence, occurred_at, search_text, facets FROM memories \
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
        let facets = decode_facets(&row.get::<_, String>(8)?);
        let doc = DocInput {
            id: &id,
            kind: MemoryKind::parse(&row.get::<_, String>(3)?).map_err(corrupt)?,
            status: Status::parse(&row.get::<_, String>(4)?).map_err(corrupt)?,
            namespace: &namespace,
            tags: &tags,
            confidence: row.get(5)?,
            occurred_at: parse_time_key(&row.get::<_, String>(6)?)?,
            text: &text,
            facets: &facets,
        };
        // A row keeps its vectors while its text is unchanged (the store drops a row's
        // vectors only when its text changes); those of every changed row are set below, and
        // one set again as it was keeps its place in the index's graph.
        index.upsert_document(seq, &doc);
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn write(lock: &RwLock<State>) -> RwLockWriteGuard<'_, State> {
    lock.write().unwrap_or_else(|poisoned| {
        let mut state = poisoned.into_inner();
        *state = State::default();
        lock.clear_poison();
        state
    })
}
