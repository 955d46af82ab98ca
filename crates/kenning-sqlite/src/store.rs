//! [`SqliteStore`]: the [`MemoryStore`] implementation, which routes each call to a read or a
//! write transaction.

use std::path::Path;

use chrono::{DateTime, TimeDelta, Utc};
use kenning_core::decision::{
    Decision, DecisionChange, DecisionFilter, DecisionId, DecisionRecord, DecisionStore, Edge, Hop, Node, Outcome, Signal,
    SkillSync,
};
use kenning_core::{
    Embedding, Inserted, Memory, MemoryId, MemoryRecord, MemoryStore, MemoryVersion, PurgeCounts, PurgeMode, ScoredId, SearchFilter,
    StoreStats,
};

use crate::db::{Db, Durability};
use crate::error::Error;
use crate::search::SearchCache;
use crate::mirror::{MirrorUpdate, VersionedEmbedding};
use crate::{decisions, mirror, purge, read, relations, write};

/// A memory store, and the decision store beside it, in one SQLite database file.
///
/// Safe to share between threads and to open from several processes at once: writes from this
/// process are serialised on one connection, SQLite's locks serialise them across processes,
/// and contention is retried rather than reported.
pub struct SqliteStore {
    db: Db,
    search: SearchCache,
}

impl SqliteStore {
    /// Opens the store at `path`, creating the file, its directory and the schema if needed and
    /// upgrading an older schema. Writes are durable against power loss.
    pub fn open(path: &Path) -> Result<SqliteStore, Error> {
        Self::open_with(path, Durability::default())
    }

    /// Opens the store at `path` with writes as durable as `durability` says.
    pub fn open_with(path: &Path, durability: Durability) -> Result<SqliteStore, Error> {
        Ok(SqliteStore { db: Db::open(path, durability)?, search: SearchCache::default() })
    }

    /// This store, linking a model's vectors in its index file's graph from `rows` of them on
    /// rather than from [`kenning_index::GRAPH_ROWS`] (tests use a few thousand).
    pub fn with_graph_rows(mut self, rows: usize) -> SqliteStore {
        self.search.set_graph_rows(rows);
        self
    }

    pub fn path(&self) -> &Path {
        self.db.path()
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The source state (a notes commit) this store reflects as an index, if it is one.
    pub fn mirror_source(&self) -> Result<Option<String>, Error> {
        self.db.read(|tx| mirror::source(tx))
    }

    /// A value recorded beside the mirrored source, such as whether a migration ran.
    pub fn mirror_state(&self, key: &str) -> Result<Option<String>, Error> {
        self.db.read(|tx| mirror::state(tx, key))
    }

    pub fn set_mirror_state(&self, key: &str, value: &str) -> Result<(), Error> {
        self.db.write(|tx| mirror::set_state(tx, key, value))
    }

    /// The source's entries that could not be indexed, with why: (entry, reason).
    pub fn mirror_skipped(&self) -> Result<Vec<(String, String)>, Error> {
        self.db.read(|tx| mirror::skipped(tx))
    }

    /// Brings the index up to its source. `plan` is called inside the write transaction with the
    /// source state the index reflects now and returns what to apply, or `None` when the index
    /// is current; `embeddings` are stored afterwards either way. Returns the source state the
    /// index reflects afterwards. `plan` may be called more than once if SQLite reports
    /// contention, so it must only read.
    pub fn catch_up_mirror<E: From<Error>>(
        &self,
        mut plan: impl FnMut(Option<&str>) -> Result<Option<MirrorUpdate>, E>,
        embeddings: &[VersionedEmbedding],
    ) -> Result<Option<String>, E> {
        let mut failure = None;
        let outcome = self.db.write(|tx| {
            let current = mirror::source(tx)?;
            match plan(current.as_deref()) {
                Err(error) => {
                    failure = Some(error);
                    Err(Error::PlanFailed)
                }
                Ok(None) => {
                    mirror::apply_embeddings(tx, embeddings)?;
                    Ok((current, 0))
                }
                Ok(Some(update)) => {
                    let applied = mirror::apply(tx, &update, embeddings)?;
                    Ok((Some(update.source), applied.removed))
                }
            }
        });
        match (outcome, failure) {
            (Err(Error::PlanFailed), Some(error)) => Err(error),
            (Err(error), _) => Err(error.into()),
            (Ok((source, removed)), _) => {
                if removed > 0 {
                    // Removed rows never come back as changes, so only a fresh index forgets them.
                    self.search.reset(&self.db);
                }
                Ok(source)
            }
        }
    }

    /// The domain of the memory captured first (any status), which a store that holds one
    /// domain's records keeps as the domain's identity: `None` while the store is empty.
    pub fn first_captured_domain(&self) -> Result<Option<kenning_core::Domain>, Error> {
        Ok(self.db.read(|tx| crate::read::first_captured(tx))?.map(|memory| memory.domain))
    }

    /// The id of an active memory other than `except` that holds the content of `memory`.
    pub fn active_duplicate(&self, memory: &Memory, except: Option<&MemoryId>) -> Result<Option<MemoryId>, Error> {
        self.db.read(|tx| mirror::active_duplicate(tx, memory, except))
    }

    /// The memories whose current record or any superseded version names `author`, the
    /// selection [`MemoryStore::purge_author`] removes.
    pub fn authored(&self, author: &str) -> Result<Vec<MemoryId>, Error> {
        let ids = self.db.read(|tx| purge::authored(tx, author))?;
        ids.iter().map(|id| MemoryId::parse(id).map_err(|error| Error::Corrupt(error.to_string()))).collect()
    }

    /// Where the search index is kept between processes: beside the database, a cache that
    /// is rebuilt from the database whenever it is missing, stale or damaged.
    pub fn index_path(&self) -> std::path::PathBuf {
        crate::index_file::index_path(self.db.path())
    }

    /// Brings the search index up to date and writes its file now, unless the file already
    /// reflects every change. The index is otherwise written in the background, after it was
    /// built and whenever it has moved well past its file; this is for callers that want the
    /// file complete before they go on, such as a benchmark or a command about to exit.
    pub fn persist_index(&self) -> Result<(), Error> {
        self.search.persist(&self.db)
    }

    /// After rows were deleted for good (a purge, here or applied from git notes), leaves none
    /// of their bytes in the store's files: the database and its WAL are rewritten
    /// (`VACUUM`, then a checkpoint that empties the WAL), and the search index file, which holds their
    /// words, is removed (the next search builds it again from the database).
    pub fn erase_purged(&self) -> Result<(), Error> {
        self.search.reset(&self.db);
        self.db.erase_freed()
    }
}

type CoreResult<T> = kenning_core::Result<T>;

impl Drop for SqliteStore {
    /// Leaves the index file as current as the index this process holds (see
    /// [`SearchCache::persist_loaded`]). The file is a cache, so a failure only costs the next
    /// process a longer catch-up.
    fn drop(&mut self) {
        if let Err(error) = self.search.persist_loaded(&self.db) {
            tracing::debug!(%error, "could not write the search index file on close");
        }
    }
}

impl MemoryStore for SqliteStore {
    fn insert(&self, batch: &[(Memory, Option<Embedding>)]) -> CoreResult<Vec<Inserted>> {
        Ok(self.db.write(|tx| write::insert(tx, batch))?)
    }

    fn active_holders(&self, memories: &[&Memory]) -> CoreResult<Vec<Option<MemoryId>>> {
        Ok(self.db.read(|tx| memories.iter().map(|memory| mirror::active_duplicate(tx, memory, None)).collect())?)
    }

    fn get(&self, id: &MemoryId) -> CoreResult<Option<Memory>> {
        Ok(self.db.read(|tx| read::get(tx, id.as_str()))?)
    }

    fn get_many(&self, ids: &[MemoryId]) -> CoreResult<Vec<Memory>> {
        Ok(self.db.read(|tx| read::get_many(tx, ids))?)
    }

    fn replace(&self, next: &Memory, previous: &MemoryVersion, embedding: Option<&Embedding>) -> CoreResult<()> {
        Ok(self.db.write(|tx| write::replace(tx, next, previous, embedding))?)
    }

    fn replace_many(&self, changes: &[kenning_core::Replacement<'_>]) -> CoreResult<()> {
        Ok(self.db.write(|tx| changes.iter().try_for_each(|change| write::replace(tx, change.next, change.previous, change.embedding)))?)
    }

    fn history(&self, id: &MemoryId) -> CoreResult<Vec<MemoryVersion>> {
        Ok(self.db.read(|tx| read::history(tx, id.as_str()))?)
    }

    fn record_access(&self, ids: &[MemoryId], at: DateTime<Utc>) -> CoreResult<()> {
        Ok(self.db.write_statistics(|tx| write::record_access(tx, ids, at))?)
    }

    fn list(&self, filter: &SearchFilter, offset: usize, limit: usize) -> CoreResult<Vec<Memory>> {
        Ok(self.db.read(|tx| read::list(tx, filter, offset, limit))?)
    }

    fn count(&self, filter: &SearchFilter) -> CoreResult<u64> {
        Ok(self.db.read(|tx| read::count(tx, filter))?)
    }

    fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        Ok(self.search.search_text(&self.db, query, filter, limit)?)
    }

    fn search_vector(
        &self,
        query: &[f32],
        model: &str,
        filter: &SearchFilter,
        limit: usize,
    ) -> CoreResult<Vec<ScoredId>> {
        Ok(self.search.search_vector(&self.db, query, model, filter, limit)?)
    }

    fn search_vector_many(&self, queries: &[&[f32]], model: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<Vec<ScoredId>>> {
        Ok(self.search.search_vector_many(&self.db, queries, model, filter, limit)?)
    }

    fn neighbours(&self, ids: &[MemoryId], filter: &SearchFilter, window: TimeDelta) -> CoreResult<Vec<Vec<MemoryId>>> {
        let keys = self.db.read(|tx| read::keys(tx, ids))?;
        Ok(self.search.neighbours(&self.db, &keys, filter, window)?)
    }

    fn missing_embeddings(&self, model: &str, limit: usize) -> CoreResult<Vec<Memory>> {
        Ok(self.db.read(|tx| read::missing_embeddings(tx, model, limit))?)
    }

    fn set_embeddings(&self, items: &[(MemoryId, Embedding)]) -> CoreResult<()> {
        Ok(self.db.write(|tx| write::set_embeddings(tx, items))?)
    }

    fn export(&self, offset: usize, limit: usize) -> CoreResult<Vec<MemoryRecord>> {
        Ok(self.db.read(|tx| read::export(tx, offset, limit))?)
    }

    fn import(&self, records: &[MemoryRecord]) -> CoreResult<usize> {
        Ok(self.db.write(|tx| write::import(tx, records))?)
    }

    fn stats(&self) -> CoreResult<StoreStats> {
        Ok(self.db.read(|tx| read::stats(tx, self.db.path()))?)
    }

    /// The store's identity (renewed by a purge) and its highest change number (moved by every
    /// write of a record or its vectors, never by a read).
    fn change_mark(&self) -> CoreResult<Option<String>> {
        let (head, identity) = self.db.read(|tx| crate::search::head_and_identity(tx))?;
        Ok(Some(format!("{identity}:{head}")))
    }

    fn authored_by(&self, author: &str) -> CoreResult<Vec<MemoryId>> {
        Ok(self.authored(author)?)
    }

    fn purge_author(&self, author: &str, mode: PurgeMode) -> CoreResult<PurgeCounts> {
        let counts = match mode {
            PurgeMode::Apply => self.db.write(|tx| purge::purge_author(tx, author))?,
            PurgeMode::DryRun => self.db.rehearse(|tx| purge::purge_author(tx, author))?,
        };
        if mode == PurgeMode::Apply && counts.memories > 0 {
            self.search.reset(&self.db);
        }
        Ok(counts)
    }

    fn erase_deleted(&self) -> CoreResult<()> {
        Ok(self.erase_purged()?)
    }

    fn rebuild_index(&self) -> CoreResult<u64> {
        let indexed = self.db.write(|tx| write::rebuild_index(tx))?;
        self.search.reset(&self.db);
        Ok(indexed)
    }

    fn warm_up(&self, model: Option<&str>) -> CoreResult<()> {
        Ok(self.search.warm_up(&self.db, model)?)
    }

    fn state(&self) -> Option<&dyn kenning_core::state::StateStore> {
        Some(self)
    }
}

impl DecisionStore for SqliteStore {
    fn insert_decision(&self, decision: &Decision, memory: &Memory, embedding: Option<&Embedding>) -> CoreResult<()> {
        Ok(self.db.write(|tx| decisions::insert_decision(tx, decision, memory, embedding))?)
    }

    fn get_decision(&self, id: &DecisionId) -> CoreResult<Option<DecisionRecord>> {
        Ok(self.db.read(|tx| decisions::get_decision(tx, id.as_str()))?)
    }

    fn update_decision(&self, change: &DecisionChange) -> CoreResult<()> {
        Ok(self.db.write(|tx| decisions::update_decision(tx, change))?)
    }

    fn list_decisions(&self, filter: &DecisionFilter, offset: usize, limit: usize) -> CoreResult<Vec<DecisionRecord>> {
        Ok(self.db.read(|tx| decisions::list_decisions(tx, filter, offset, limit))?)
    }

    fn count_decisions(&self, filter: &DecisionFilter) -> CoreResult<u64> {
        Ok(self.db.read(|tx| decisions::count_decisions(tx, filter))?)
    }

    fn add_signal(&self, signal: &Signal) -> CoreResult<()> {
        Ok(self.db.write(|tx| decisions::add_signal(tx, signal))?)
    }

    fn record_outcome(
        &self,
        change: &DecisionChange,
        outcome: &Outcome,
        lessons: &[(Memory, Option<Embedding>)],
        edges: &[Edge],
    ) -> CoreResult<Vec<Inserted>> {
        Ok(self.db.write(|tx| decisions::record_outcome(tx, change, outcome, lessons, edges))?)
    }

    fn outcomes(&self, module: Option<&str>) -> CoreResult<Vec<(Decision, Outcome)>> {
        Ok(self.db.read(|tx| decisions::outcomes(tx, module))?)
    }

    fn sync_skills(&self, sync: &SkillSync) -> CoreResult<()> {
        Ok(self.db.write(|tx| decisions::sync_skills(tx, sync))?)
    }

    fn causal_chain(&self, start: &Node, max_depth: u32) -> CoreResult<Vec<Hop>> {
        Ok(self.db.read(|tx| relations::causal_chain(tx, start, max_depth))?)
    }

    fn edges_to(&self, node: &Node) -> CoreResult<Vec<Edge>> {
        Ok(self.db.read(|tx| relations::edges_to(tx, node))?)
    }
}
