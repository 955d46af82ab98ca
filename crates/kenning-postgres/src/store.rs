//! [`PostgresStore`]: the [`MemoryStore`] and [`DecisionStore`] implementation, which routes each
//! call to a unit of work: a read (on the replica when one is configured and may answer) or a
//! write transaction on the primary.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use kenning_core::decision::{
    Decision, DecisionChange, DecisionFilter, DecisionId, DecisionRecord, DecisionStore, Edge, Hop, Node, Outcome, Signal,
    SkillSync,
};
use kenning_core::{
    Embedding, Inserted, Memory, MemoryId, MemoryRecord, MemoryStore, MemoryVersion, PurgeCounts, PurgeMode, ScoredId, SearchFilter,
    StoreStats,
};

use crate::db::{Db, Settings};
use crate::error::Error;
use crate::sql::Tx;
use crate::vectors::{CatchUp, Vectors};
use crate::{decisions, purge, read, relations, schema, state, write};

/// A memory store, and the decision store beside it, in one PostgreSQL schema.
///
/// Safe to share between threads and to use from many processes at once: each call takes a
/// pooled connection, every write is one transaction, updates are compare-and-swap on the
/// memory's version under a row lock, and exact duplicates are kept out by a unique index.
pub struct PostgresStore {
    db: Arc<Db>,
    schema: String,
    vectors: Arc<Vectors>,
}

impl PostgresStore {
    /// Sets up a store over the database at `settings.url` (and its read replica at
    /// `settings.read_url`), without connecting yet: the first call connects, creates the schema
    /// (and the pgvector extension) or upgrades it. Fails only on a malformed URL, a schema name
    /// that is not an identifier, or TLS files that cannot be read.
    pub fn open(settings: &Settings) -> Result<PostgresStore, Error> {
        let db = Db::open(settings)?;
        let vectors = Arc::new(Vectors::new(db.clone(), settings.schema.clone(), settings.vector_index, settings.catch_up_after));
        Ok(PostgresStore { db, schema: settings.schema.clone(), vectors })
    }

    /// Where the store is (the connection string with its password masked, and the schema;
    /// with a replica, where reads go).
    pub fn location(&self) -> String {
        self.db.location()
    }

    /// Connects now, creating or upgrading the schema, and reports whether the database answers.
    pub fn check(&self) -> Result<(), Error> {
        self.db.read_primary(async |tx: &Tx| tx.execute("SELECT 1", &[]).await)?;
        Ok(())
    }

    /// The schema version the database holds.
    pub fn schema_version(&self) -> Result<i64, Error> {
        let schema = self.schema.as_str();
        self.db.read_primary(async |tx: &Tx| schema::version(tx, schema).await)
    }

    /// Drops the store's schema and everything in it: for a benchmark or test that made a
    /// schema of its own. The store is unusable afterwards.
    pub fn drop_schema(&self) -> Result<(), Error> {
        let schema = self.schema.as_str();
        self.db.write(async |tx: &Tx| tx.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await)
    }

    /// The number of migrations this build knows.
    pub fn latest_schema_version() -> i64 {
        schema::MIGRATIONS.len() as i64
    }

    /// Brings the vectors of bulk loads into an index now (building a bulk index, or moving a
    /// small backlog into the live one) instead of waiting for loading to pause; see `vectors`.
    pub fn catch_up_vector_index(&self) -> Result<CatchUp, Error> {
        self.vectors.catch_up()
    }

    fn ensure_live_indexes<'a>(&self, embeddings: impl Iterator<Item = &'a Embedding>) -> Result<(), Error> {
        self.vectors.ensure_live(embeddings.map(|embedding| (embedding.model.clone(), embedding.vector.len())))
    }
}

/// Creates the schema at an older version, for tests of upgrades: the store's next call
/// migrates it the rest of the way.
#[doc(hidden)]
pub fn migrate_to(settings: &Settings, version: usize) -> Result<(), Error> {
    let db = Db::open_unmigrated(settings)?;
    let schema = settings.schema.as_str();
    db.write(async |tx: &Tx| schema::migrate(tx, schema, Some(version)).await)
}

/// What a connection to the server shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The server's version, as `SHOW server_version` gives it.
    pub version: String,
    /// The TLS protocol of the connection (`TLSv1.3`), or `None` when it is not encrypted.
    pub tls: Option<String>,
    /// Whether the server is a standby (in recovery).
    pub standby: bool,
}

/// Connects as `settings` say, without touching kenning's schema, and reports the server's
/// version, whether the connection is encrypted and whether the server is a standby: to check a
/// URL's connection settings against a server before a store uses it.
pub fn probe(settings: &Settings) -> Result<ServerInfo, Error> {
    let db = Db::open_unmigrated(settings)?;
    db.read_primary(async |tx: &Tx| {
        let row = tx
            .query_one(
                "SELECT current_setting('server_version'), \
                 (SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl), pg_is_in_recovery()",
                &[],
            )
            .await?;
        Ok(ServerInfo { version: row.get(0), tls: row.get(1), standby: row.get(2) })
    })
}

type CoreResult<T> = kenning_core::Result<T>;

impl MemoryStore for PostgresStore {
    fn insert(&self, batch: &[(Memory, Option<Embedding>)]) -> CoreResult<Vec<Inserted>> {
        self.ensure_live_indexes(batch.iter().filter_map(|(_, embedding)| embedding.as_ref()))?;
        if batch.len() < write::BULK_ROWS {
            return Ok(self.db.write(async |tx: &Tx| write::insert(tx, batch).await)?);
        }
        let inserted = self.db.write(async |tx: &Tx| write::insert_bulk(tx, batch).await)?;
        if batch.iter().any(|(_, embedding)| embedding.is_some()) {
            self.vectors.bulk_loaded();
        }
        Ok(inserted)
    }

    fn active_holders(&self, memories: &[&Memory]) -> CoreResult<Vec<Option<MemoryId>>> {
        // Asked before a write, so of the primary: a replica may not hold the latest capture yet.
        Ok(self.db.read_primary(async |tx: &Tx| read::active_holders(tx, memories).await)?)
    }

    fn get(&self, id: &MemoryId) -> CoreResult<Option<Memory>> {
        // A read that an update starts from: the primary's latest.
        Ok(self.db.read_primary(async |tx: &Tx| read::get(tx, id.as_str()).await)?)
    }

    fn get_many(&self, ids: &[MemoryId]) -> CoreResult<Vec<Memory>> {
        Ok(self.db.read(async |tx: &Tx| read::get_many(tx, ids).await)?)
    }

    fn replace(&self, next: &Memory, previous: &MemoryVersion, embedding: Option<&Embedding>) -> CoreResult<()> {
        self.ensure_live_indexes(embedding.into_iter())?;
        Ok(self.db.write(async |tx: &Tx| write::replace(tx, next, previous, embedding).await)?)
    }

    fn replace_many(&self, changes: &[kenning_core::Replacement<'_>]) -> CoreResult<()> {
        self.ensure_live_indexes(changes.iter().filter_map(|change| change.embedding))?;
        Ok(self.db.write(async |tx: &Tx| {
            for change in changes {
                write::replace(tx, change.next, change.previous, change.embedding).await?;
            }
            Ok(())
        })?)
    }

    fn history(&self, id: &MemoryId) -> CoreResult<Vec<MemoryVersion>> {
        Ok(self.db.read(async |tx: &Tx| read::history(tx, id.as_str()).await)?)
    }

    fn record_access(&self, ids: &[MemoryId], at: DateTime<Utc>) -> CoreResult<()> {
        Ok(self.db.write_statistics(async |tx: &Tx| write::record_access(tx, ids, at).await)?)
    }

    fn list(&self, filter: &SearchFilter, offset: usize, limit: usize) -> CoreResult<Vec<Memory>> {
        Ok(self.db.read(async |tx: &Tx| read::list(tx, filter, offset, limit).await)?)
    }

    fn count(&self, filter: &SearchFilter) -> CoreResult<u64> {
        Ok(self.db.read(async |tx: &Tx| read::count(tx, filter).await)?)
    }

    fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        Ok(self.db.read(async |tx: &Tx| read::search_text(tx, query, filter, limit).await)?)
    }

    fn search_vector(&self, vector: &[f32], model: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        let vectors = &self.vectors;
        Ok(self.db.read(async |tx: &Tx| {
            let layout = vectors.layout(tx, model, vector.len()).await?;
            read::search_vector(tx, vector, model, filter, limit, layout).await
        })?)
    }

    fn search_vector_many(&self, vectors: &[&[f32]], model: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<Vec<ScoredId>>> {
        // One statement per dimension (a model writes one, so one in practice), each with the
        // layout of its vectors' indexes.
        let mut by_dimension: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (at, vector) in vectors.iter().enumerate() {
            by_dimension.entry(vector.len()).or_default().push(at);
        }
        let store = &self.vectors;
        let mut found = vec![Vec::new(); vectors.len()];
        for (dim, positions) in by_dimension {
            let queries: Vec<&[f32]> = positions.iter().map(|&at| vectors[at]).collect();
            // Of the primary: the batch's checks decide what it writes.
            let lists = self.db.read_primary(async |tx: &Tx| {
                let layout = store.layout(tx, model, dim).await?;
                read::search_vector_many(tx, &queries, model, filter, limit, layout).await
            })?;
            for (at, list) in positions.into_iter().zip(lists) {
                found[at] = list;
            }
        }
        Ok(found)
    }

    fn neighbours(&self, ids: &[MemoryId], filter: &SearchFilter, window: TimeDelta) -> CoreResult<Vec<Vec<MemoryId>>> {
        Ok(self.db.read(async |tx: &Tx| read::neighbours(tx, ids, filter, window).await)?)
    }

    fn missing_embeddings(&self, model: &str, limit: usize) -> CoreResult<Vec<Memory>> {
        Ok(self.db.read_primary(async |tx: &Tx| read::missing_embeddings(tx, model, limit).await)?)
    }

    fn authored_by(&self, author: &str) -> CoreResult<Vec<MemoryId>> {
        let ids = self.db.read_primary(async |tx: &Tx| purge::authored(tx, author).await)?;
        ids.iter().map(|id| MemoryId::parse(id).map_err(|error| kenning_core::Error::Storage(format!("a stored memory id: {error}")))).collect()
    }

    fn purge_author(&self, author: &str, mode: PurgeMode) -> CoreResult<PurgeCounts> {
        let work = async |tx: &Tx| purge::purge_author(tx, author).await;
        Ok(match mode {
            PurgeMode::Apply => self.db.write(work)?,
            PurgeMode::DryRun => self.db.rolled_back(work)?,
        })
    }

    fn set_embeddings(&self, items: &[(MemoryId, Embedding)]) -> CoreResult<()> {
        self.ensure_live_indexes(items.iter().map(|(_, embedding)| embedding))?;
        Ok(self.db.write(async |tx: &Tx| write::set_embeddings(tx, items).await)?)
    }

    fn export(&self, offset: usize, limit: usize) -> CoreResult<Vec<MemoryRecord>> {
        Ok(self.db.read_primary(async |tx: &Tx| read::export(tx, offset, limit).await)?)
    }

    fn import(&self, records: &[MemoryRecord]) -> CoreResult<usize> {
        self.ensure_live_indexes(records.iter().filter_map(|record| record.embedding.as_ref()))?;
        Ok(self.db.write(async |tx: &Tx| write::import(tx, records).await)?)
    }

    fn stats(&self) -> CoreResult<StoreStats> {
        let location = self.db.location();
        let schema = self.schema.as_str();
        let vectors = &self.vectors;
        let mut stats = self.db.read(async |tx: &Tx| {
            let mut stats = read::stats(tx, &location, schema).await?;
            for (model, waiting) in vectors.backlog(tx).await? {
                stats.warnings.push(format!(
                    "{waiting} vectors of model {model} from bulk loads wait for the vector index, and are compared \
                     exactly until it catches up (by itself once loading pauses, or with `kenning reindex`)"
                ));
            }
            Ok(stats)
        })?;
        stats.warnings.extend(self.db.degraded());
        Ok(stats)
    }

    fn rebuild_index(&self) -> CoreResult<u64> {
        let rebuilt = self.db.write(async |tx: &Tx| write::rebuild_index(tx).await)?;
        self.vectors.catch_up()?;
        Ok(rebuilt)
    }

    fn warm_up(&self, model: Option<&str>) -> CoreResult<()> {
        let _ = model;
        // Connecting (and migrating) now spares the first call the wait. An unreachable
        // database is not an error here: the calls that need it will say so.
        if let Err(error) = self.check() {
            tracing::warn!(%error, "the organisation database is not reachable yet");
        }
        Ok(())
    }

    fn state(&self) -> Option<&dyn kenning_core::state::StateStore> {
        Some(self)
    }

    fn change_mark(&self) -> CoreResult<Option<String>> {
        Ok(Some(self.db.read_primary(async |tx: &Tx| read::change_mark(tx).await)?))
    }

    fn degraded(&self) -> Option<String> {
        self.db.degraded()
    }
}

impl DecisionStore for PostgresStore {
    fn insert_decision(&self, decision: &Decision, memory: &Memory, embedding: Option<&Embedding>) -> CoreResult<()> {
        self.ensure_live_indexes(embedding.into_iter())?;
        Ok(self.db.write(async |tx: &Tx| decisions::insert_decision(tx, decision, memory, embedding).await)?)
    }

    fn get_decision(&self, id: &DecisionId) -> CoreResult<Option<DecisionRecord>> {
        Ok(self.db.read_primary(async |tx: &Tx| decisions::get_decision(tx, id.as_str()).await)?)
    }

    fn update_decision(&self, change: &DecisionChange) -> CoreResult<()> {
        self.ensure_live_indexes(change.memory.iter().filter_map(|memory| memory.embedding.as_ref()))?;
        Ok(self.db.write(async |tx: &Tx| decisions::update_decision(tx, change).await)?)
    }

    fn list_decisions(&self, filter: &DecisionFilter, offset: usize, limit: usize) -> CoreResult<Vec<DecisionRecord>> {
        Ok(self.db.read_primary(async |tx: &Tx| decisions::list_decisions(tx, filter, offset, limit).await)?)
    }

    fn count_decisions(&self, filter: &DecisionFilter) -> CoreResult<u64> {
        Ok(self.db.read_primary(async |tx: &Tx| decisions::count_decisions(tx, filter).await)?)
    }

    fn add_signal(&self, signal: &Signal) -> CoreResult<()> {
        Ok(self.db.write(async |tx: &Tx| decisions::add_signal(tx, signal).await)?)
    }

    fn record_outcome(
        &self,
        change: &DecisionChange,
        outcome: &Outcome,
        lessons: &[(Memory, Option<Embedding>)],
        edges: &[Edge],
    ) -> CoreResult<Vec<Inserted>> {
        self.ensure_live_indexes(lessons.iter().filter_map(|(_, embedding)| embedding.as_ref()))?;
        Ok(self.db.write(async |tx: &Tx| decisions::record_outcome(tx, change, outcome, lessons, edges).await)?)
    }

    fn outcomes(&self, module: Option<&str>) -> CoreResult<Vec<(Decision, Outcome)>> {
        Ok(self.db.read_primary(async |tx: &Tx| decisions::outcomes(tx, module).await)?)
    }

    fn sync_skills(&self, sync: &SkillSync) -> CoreResult<()> {
        self.ensure_live_indexes(sync.inserts.iter().filter_map(|(_, embedding)| embedding.as_ref()))?;
        Ok(self.db.write(async |tx: &Tx| decisions::sync_skills(tx, sync).await)?)
    }

    fn causal_chain(&self, start: &Node, max_depth: u32) -> CoreResult<Vec<Hop>> {
        Ok(self.db.read_primary(async |tx: &Tx| relations::causal_chain(tx, start, max_depth).await)?)
    }

    fn edges_to(&self, node: &Node) -> CoreResult<Vec<Edge>> {
        Ok(self.db.read_primary(async |tx: &Tx| relations::edges_to(tx, node).await)?)
    }
}

impl kenning_core::state::StateStore for PostgresStore {
    fn put_state(&self, record: &kenning_core::state::StateRecord) -> CoreResult<()> {
        Ok(self.db.write(async |tx: &Tx| state::put(tx, record).await)?)
    }

    fn put_states(&self, records: &[kenning_core::state::StateRecord]) -> CoreResult<Vec<bool>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.db.write(async |tx: &Tx| state::put_many(tx, records).await)?)
    }

    fn get_state(&self, kind: kenning_core::state::StateKind, id: &str) -> CoreResult<Option<kenning_core::state::StateRecord>> {
        Ok(self.db.read_primary(async |tx: &Tx| state::get(tx, kind, id).await)?)
    }

    fn list_state(&self, kind: kenning_core::state::StateKind, offset: usize, limit: usize) -> CoreResult<Vec<kenning_core::state::StateRecord>> {
        Ok(self.db.read_primary(async |tx: &Tx| state::list(tx, kind, offset, limit).await)?)
    }

    fn state_about(&self, kind: kenning_core::state::StateKind, subjects: &[&str]) -> CoreResult<Vec<kenning_core::state::StateRecord>> {
        Ok(self.db.read_primary(async |tx: &Tx| state::about(tx, kind, subjects).await)?)
    }

    fn delete_state(&self, kind: kenning_core::state::StateKind, id: &str) -> CoreResult<bool> {
        Ok(self.db.write(async |tx: &Tx| state::delete(tx, kind, id).await)?)
    }
}
