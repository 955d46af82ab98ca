//! [`PostgresStore`]: the [`MemoryStore`] and [`DecisionStore`] implementation, which routes each
//! call to a read on a pooled connection or to a write transaction.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};
use kenning_core::decision::{
    Decision, DecisionChange, DecisionFilter, DecisionId, DecisionRecord, DecisionStore, Edge, Hop, Node, Outcome, Signal,
    SkillSync,
};
use kenning_core::{
    Embedding, Inserted, Memory, MemoryId, MemoryRecord, MemoryStore, MemoryVersion, PurgeCounts, ScoredId, SearchFilter,
    StoreStats,
};

use crate::db::{Db, Settings, VectorIndex};
use crate::error::Error;
use crate::{decisions, purge, read, relations, schema, state, write};

/// A memory store, and the decision store beside it, in one PostgreSQL schema.
///
/// Safe to share between threads and to use from many processes at once: each call takes a
/// pooled connection, every write is one transaction, updates are compare-and-swap on the
/// memory's version under a row lock, and exact duplicates are kept out by a unique index.
pub struct PostgresStore {
    db: Arc<Db>,
    schema: String,
    /// The (model, dimension) pairs whose vector index this process has seen to exist.
    indexed_models: Mutex<HashSet<(String, usize)>>,
    vector_index: VectorIndex,
}

/// Runs `$body` (which uses the transaction `$tx`) in one transaction and commits it; a
/// transaction that lost a race with another writer is run again from the start.
macro_rules! in_transaction {
    ($self:ident, |$tx:ident| $body:expr) => {
        $self.db.run_retrying(|mut client| async move {
            let $tx = client.transaction().await?;
            let value = $body;
            $tx.commit().await?;
            Ok(value)
        })
    };
}

/// Runs `$body` (which uses the connection `$client`) outside a transaction.
macro_rules! on_connection {
    ($self:ident, |$client:ident| $body:expr) => {
        $self.db.run(|client| async move {
            let $client = &client;
            Ok($body)
        })
    };
}

impl PostgresStore {
    /// Sets up a store over the database at `settings.url`, without connecting yet: the first
    /// call connects, creates the schema (and the pgvector extension) or upgrades it. Fails only
    /// on a malformed URL or schema name.
    pub fn open(settings: &Settings) -> Result<PostgresStore, Error> {
        Ok(PostgresStore {
            db: Db::open(settings)?,
            schema: settings.schema.clone(),
            indexed_models: Mutex::new(HashSet::new()),
            vector_index: settings.vector_index,
        })
    }

    /// Where the store is (host, port, database, schema; never the password).
    pub fn location(&self) -> &str {
        self.db.location()
    }

    /// Connects now, creating or upgrading the schema, and reports whether the database answers.
    pub fn check(&self) -> Result<(), Error> {
        on_connection!(self, |client| client.execute("SELECT 1", &[]).await?)?;
        Ok(())
    }

    /// The schema version the database holds.
    pub fn schema_version(&self) -> Result<i64, Error> {
        let schema = self.schema.as_str();
        on_connection!(self, |client| schema::version(client, schema).await?)
    }

    /// Drops the store's schema and everything in it: for a benchmark or test that made a
    /// schema of its own. The store is unusable afterwards.
    pub fn drop_schema(&self) -> Result<(), Error> {
        let schema = self.schema.as_str();
        on_connection!(self, |client| client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await?)?;
        Ok(())
    }

    /// The number of migrations this build knows.
    pub fn latest_schema_version() -> i64 {
        schema::MIGRATIONS.len() as i64
    }

    /// Makes sure each (model, dimension) of `embeddings` has its vector index, outside the write
    /// transaction that stores them: building an index locks the table against writes.
    fn ensure_vector_indexes<'a>(&self, embeddings: impl Iterator<Item = &'a Embedding>) -> Result<(), Error> {
        if self.vector_index == VectorIndex::Exact {
            return Ok(());
        }
        let wanted: Vec<(String, usize)> = {
            let known = self.indexed_models.lock().unwrap_or_else(PoisonError::into_inner);
            let mut wanted: Vec<(String, usize)> = Vec::new();
            for embedding in embeddings {
                let key = (embedding.model.clone(), embedding.vector.len());
                if !known.contains(&key) && !wanted.contains(&key) {
                    wanted.push(key);
                }
            }
            wanted
        };
        if wanted.is_empty() {
            return Ok(());
        }
        let schema = self.schema.as_str();
        let pairs = &wanted;
        on_connection!(self, |client| {
            for (model, dim) in pairs {
                schema::ensure_vector_index(client, schema, model, *dim).await?;
            }
        })?;
        self.indexed_models.lock().unwrap_or_else(PoisonError::into_inner).extend(wanted);
        Ok(())
    }
}

/// Creates the schema at an older version, for tests of upgrades: the store's next call
/// migrates it the rest of the way.
#[doc(hidden)]
pub fn migrate_to(settings: &Settings, version: usize) -> Result<(), Error> {
    let db = Db::open_unmigrated(settings)?;
    let schema = settings.schema.clone();
    db.run(|client| async move { schema::migrate(&client, &schema, Some(version)).await })
}

/// What a connection to the server shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The server's version, as `SHOW server_version` gives it.
    pub version: String,
    /// The TLS protocol of the connection (`TLSv1.3`), or `None` when it is not encrypted.
    pub tls: Option<String>,
}

/// Connects as `settings` say, without touching kenning's schema, and reports the server's
/// version and whether the connection is encrypted: to check a URL's TLS settings against a
/// server before a store uses it.
pub fn probe(settings: &Settings) -> Result<ServerInfo, Error> {
    let db = Db::open_unmigrated(settings)?;
    db.run(|client| async move {
        let version: String = client.query_one("SHOW server_version", &[]).await?.get(0);
        let tls: Option<String> = client
            .query_opt("SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl", &[])
            .await?
            .map(|row| row.get(0));
        Ok(ServerInfo { version, tls })
    })
}

type CoreResult<T> = kenning_core::Result<T>;

impl MemoryStore for PostgresStore {
    fn insert(&self, batch: &[(Memory, Option<Embedding>)]) -> CoreResult<Vec<Inserted>> {
        self.ensure_vector_indexes(batch.iter().filter_map(|(_, embedding)| embedding.as_ref()))?;
        Ok(in_transaction!(self, |tx| write::insert(&tx, batch).await?)?)
    }

    fn get(&self, id: &MemoryId) -> CoreResult<Option<Memory>> {
        Ok(on_connection!(self, |client| read::get(client, id.as_str()).await?)?)
    }

    fn get_many(&self, ids: &[MemoryId]) -> CoreResult<Vec<Memory>> {
        Ok(on_connection!(self, |client| read::get_many(client, ids).await?)?)
    }

    fn replace(&self, next: &Memory, previous: &MemoryVersion, embedding: Option<&Embedding>) -> CoreResult<()> {
        self.ensure_vector_indexes(embedding.into_iter())?;
        Ok(in_transaction!(self, |tx| write::replace(&tx, next, previous, embedding).await?)?)
    }

    fn history(&self, id: &MemoryId) -> CoreResult<Vec<MemoryVersion>> {
        Ok(on_connection!(self, |client| read::history(client, id.as_str()).await?)?)
    }

    fn record_access(&self, ids: &[MemoryId], at: DateTime<Utc>) -> CoreResult<()> {
        Ok(in_transaction!(self, |tx| write::record_access(&tx, ids, at).await?)?)
    }

    fn list(&self, filter: &SearchFilter, offset: usize, limit: usize) -> CoreResult<Vec<Memory>> {
        Ok(on_connection!(self, |client| read::list(client, filter, offset, limit).await?)?)
    }

    fn count(&self, filter: &SearchFilter) -> CoreResult<u64> {
        Ok(on_connection!(self, |client| read::count(client, filter).await?)?)
    }

    fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        Ok(on_connection!(self, |client| read::search_text(client, query, filter, limit).await?)?)
    }

    fn search_vector(&self, vector: &[f32], model: &str, filter: &SearchFilter, limit: usize) -> CoreResult<Vec<ScoredId>> {
        Ok(on_connection!(self, |client| read::search_vector(client, vector, model, filter, limit).await?)?)
    }

    fn neighbours(&self, ids: &[MemoryId], filter: &SearchFilter, window: TimeDelta) -> CoreResult<Vec<Vec<MemoryId>>> {
        Ok(on_connection!(self, |client| read::neighbours(client, ids, filter, window).await?)?)
    }

    fn missing_embeddings(&self, model: &str, limit: usize) -> CoreResult<Vec<Memory>> {
        Ok(on_connection!(self, |client| read::missing_embeddings(client, model, limit).await?)?)
    }

    fn purge_author(&self, author: &str, apply: bool) -> CoreResult<PurgeCounts> {
        Ok(self.db.run_retrying(|mut client| async move {
            let tx = client.transaction().await?;
            let counts = purge::purge_author(&tx, author).await?;
            if apply {
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok(counts)
        })?)
    }

    fn set_embeddings(&self, items: &[(MemoryId, Embedding)]) -> CoreResult<()> {
        self.ensure_vector_indexes(items.iter().map(|(_, embedding)| embedding))?;
        Ok(in_transaction!(self, |tx| write::set_embeddings(&tx, items).await?)?)
    }

    fn export(&self, offset: usize, limit: usize) -> CoreResult<Vec<MemoryRecord>> {
        Ok(on_connection!(self, |client| read::export(client, offset, limit).await?)?)
    }

    fn import(&self, records: &[MemoryRecord]) -> CoreResult<usize> {
        self.ensure_vector_indexes(records.iter().filter_map(|record| record.embedding.as_ref()))?;
        Ok(in_transaction!(self, |tx| write::import(&tx, records).await?)?)
    }

    fn stats(&self) -> CoreResult<StoreStats> {
        let location = self.db.location();
        let schema = self.schema.as_str();
        Ok(on_connection!(self, |client| read::stats(client, location, schema).await?)?)
    }

    fn rebuild_index(&self) -> CoreResult<u64> {
        Ok(in_transaction!(self, |tx| write::rebuild_index(&tx).await?)?)
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
        Ok(Some(on_connection!(self, |client| read::change_mark(client).await?)?))
    }
}

impl DecisionStore for PostgresStore {
    fn insert_decision(&self, decision: &Decision, memory: &Memory, embedding: Option<&Embedding>) -> CoreResult<()> {
        self.ensure_vector_indexes(embedding.into_iter())?;
        Ok(in_transaction!(self, |tx| decisions::insert_decision(&tx, decision, memory, embedding).await?)?)
    }

    fn get_decision(&self, id: &DecisionId) -> CoreResult<Option<DecisionRecord>> {
        Ok(on_connection!(self, |client| decisions::get_decision(client, id.as_str()).await?)?)
    }

    fn update_decision(&self, change: &DecisionChange) -> CoreResult<()> {
        self.ensure_vector_indexes(change.memory.iter().filter_map(|memory| memory.embedding.as_ref()))?;
        Ok(in_transaction!(self, |tx| decisions::update_decision(&tx, change).await?)?)
    }

    fn list_decisions(&self, filter: &DecisionFilter, offset: usize, limit: usize) -> CoreResult<Vec<DecisionRecord>> {
        Ok(on_connection!(self, |client| decisions::list_decisions(client, filter, offset, limit).await?)?)
    }

    fn count_decisions(&self, filter: &DecisionFilter) -> CoreResult<u64> {
        Ok(on_connection!(self, |client| decisions::count_decisions(client, filter).await?)?)
    }

    fn add_signal(&self, signal: &Signal) -> CoreResult<()> {
        Ok(in_transaction!(self, |tx| decisions::add_signal(&tx, signal).await?)?)
    }

    fn record_outcome(
        &self,
        change: &DecisionChange,
        outcome: &Outcome,
        lessons: &[(Memory, Option<Embedding>)],
        edges: &[Edge],
    ) -> CoreResult<Vec<Inserted>> {
        self.ensure_vector_indexes(lessons.iter().filter_map(|(_, embedding)| embedding.as_ref()))?;
        Ok(in_transaction!(self, |tx| decisions::record_outcome(&tx, change, outcome, lessons, edges).await?)?)
    }

    fn outcomes(&self, module: Option<&str>) -> CoreResult<Vec<(Decision, Outcome)>> {
        Ok(on_connection!(self, |client| decisions::outcomes(client, module).await?)?)
    }

    fn sync_skills(&self, sync: &SkillSync) -> CoreResult<()> {
        self.ensure_vector_indexes(sync.inserts.iter().filter_map(|(_, embedding)| embedding.as_ref()))?;
        Ok(in_transaction!(self, |tx| decisions::sync_skills(&tx, sync).await?)?)
    }

    fn causal_chain(&self, start: &Node, max_depth: u32) -> CoreResult<Vec<Hop>> {
        Ok(on_connection!(self, |client| relations::causal_chain(client, start, max_depth).await?)?)
    }

    fn edges_to(&self, node: &Node) -> CoreResult<Vec<Edge>> {
        Ok(on_connection!(self, |client| relations::edges_to(client, node).await?)?)
    }
}

impl kenning_core::state::StateStore for PostgresStore {
    fn put_state(&self, record: &kenning_core::state::StateRecord) -> CoreResult<()> {
        Ok(on_connection!(self, |client| state::put(client, record).await?)?)
    }

    fn get_state(&self, kind: kenning_core::state::StateKind, id: &str) -> CoreResult<Option<kenning_core::state::StateRecord>> {
        Ok(on_connection!(self, |client| state::get(client, kind, id).await?)?)
    }

    fn list_state(&self, kind: kenning_core::state::StateKind, offset: usize, limit: usize) -> CoreResult<Vec<kenning_core::state::StateRecord>> {
        Ok(on_connection!(self, |client| state::list(client, kind, offset, limit).await?)?)
    }

    fn delete_state(&self, kind: kenning_core::state::StateKind, id: &str) -> CoreResult<bool> {
        Ok(on_connection!(self, |client| state::delete(client, kind, id).await?)?)
    }
}
