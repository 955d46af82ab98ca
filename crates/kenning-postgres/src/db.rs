//! Connections: the pools (the primary's, and a read replica's when one is configured), the
//! private runtime that runs the asynchronous driver behind the synchronous store traits, the
//! schema check on the first connection, and where each unit of work runs.
//!
//! The store traits are synchronous and are called from plain threads, from the CLI's main
//! thread and from the server's blocking pool. The driver is asynchronous, so the store owns a
//! small multi-threaded tokio runtime of its own: its worker threads drive the connections'
//! sockets, and a call blocks its caller on the private runtime until the database answered.
//! Called from a thread of another multi-threaded runtime, the wait is wrapped in
//! `block_in_place`, which hands that thread's other work to its siblings; from a
//! current-thread runtime, where that is not allowed, the wait moves to a scoped thread. The
//! private runtime never waits on the caller's, so no caller can deadlock it.
//!
//! Reads that may be a little behind (recall, listings, status) go to the read replica when
//! there is one and it answers. A process reads its own writes: every write records where the
//! primary's log stood after its commit, and a read goes to the replica only once the replica
//! has replayed that far; until then the primary answers it. A replica that cannot be reached
//! is left alone until a background probe finds it back, the primary answering meanwhile, and
//! [`Db::degraded`] says so.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool::Runtime;
use deadpool::managed::{Pool, PoolError, Timeouts};
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::connect::Connector;
use crate::conninfo::{self, Environment};
use crate::error::{Error, Result};
use crate::schema;
use crate::sql::Tx;

/// How a store connects: the URLs and what the store may do to the database.
#[derive(Clone)]
pub struct Settings {
    /// The primary: a PostgreSQL URL (`postgresql://user:password@host:port/database?sslmode=require`)
    /// or key-value connection string, read as libpq reads it (see `conninfo`): Unix-socket
    /// hosts, host lists with `target_session_attrs`, every `sslmode`, client certificates.
    pub url: String,
    /// A read replica (a streaming standby of the primary) for recall, listings and status.
    pub read_url: Option<String>,
    /// What libpq takes from the environment when a URL leaves it out (`PG*` variables, the
    /// password file, the login name); empty unless the caller fills it in.
    pub environment: Environment,
    /// The PostgreSQL schema that holds kenning's tables, so that one database can hold several
    /// organisations' stores (or test stores) side by side. Created if missing.
    pub schema: String,
    /// The most connections the store opens at once, to the primary and to the replica each.
    pub max_connections: usize,
    /// How long a call waits to connect to one host (unless the URL sets `connect_timeout`), or
    /// for a free connection, before the database counts as unreachable.
    pub connect_timeout: Duration,
    /// How vector search finds the nearest vectors.
    pub vector_index: VectorIndex,
    /// How long bulk loading must pause before the vectors it loaded join the vector index by
    /// themselves; `None` leaves that to [`PostgresStore::catch_up_vector_index`](crate::PostgresStore::catch_up_vector_index).
    pub catch_up_after: Option<Duration>,
}

/// The URLs are shown with their passwords masked.
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("url", &conninfo::masked(&self.url))
            .field("read_url", &self.read_url.as_deref().map(conninfo::masked))
            .field("environment", &self.environment)
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("vector_index", &self.vector_index)
            .field("catch_up_after", &self.catch_up_after)
            .finish()
    }
}

/// How vector search finds the nearest vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VectorIndex {
    /// HNSW indexes (cosine) per embedding model and dimension: approximate, fast at any size.
    #[default]
    Hnsw,
    /// No vector index: every vector of the model that passes the filter is compared, exactly.
    /// For a pgvector build whose HNSW code the server's CPU cannot run (some prebuilt
    /// binaries are compiled for newer instruction sets and crash the backend with SIGILL on the
    /// first insert into an HNSW index), and for small stores, where a scan is as fast.
    Exact,
}

impl VectorIndex {
    pub fn parse(text: &str) -> Option<VectorIndex> {
        match text.trim() {
            "hnsw" => Some(VectorIndex::Hnsw),
            "exact" => Some(VectorIndex::Exact),
            _ => None,
        }
    }
}

impl Settings {
    pub fn new(url: impl Into<String>) -> Settings {
        Settings {
            url: url.into(),
            read_url: None,
            environment: Environment::default(),
            schema: "kenning".to_owned(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(3),
            vector_index: VectorIndex::default(),
            catch_up_after: Some(Duration::from_secs(3)),
        }
    }
}

/// How long a replica found unreachable is left alone before it is tried again.
const REPLICA_PROBE_INTERVAL: Duration = Duration::from_secs(2);

/// The pools, the runtime they live on and whether the schema has been checked.
pub(crate) struct Db {
    /// Always `Some` until the store is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    primary: Pool<Connector>,
    replica: Option<Arc<Replica>>,
    schema: String,
    location: String,
    /// `BEGIN` and the session settings every unit of work starts with.
    begin: String,
    schema_ready: AtomicBool,
    /// Serialises the schema check of this process's first connections.
    schema_lock: tokio::sync::Mutex<()>,
    /// Where the primary's log stood after this process's latest write (0 before any).
    written_at: AtomicU64,
}

/// A read replica and what this process knows of it.
struct Replica {
    pool: Pool<Connector>,
    location: String,
    /// Why the replica was last found unreachable, while it still is.
    down: Mutex<Option<String>>,
    /// The furthest log position the replica was seen to have replayed.
    replayed: AtomicU64,
}

impl Replica {
    fn is_down(&self) -> bool {
        self.down.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }
}

/// How a unit of work ends when it succeeded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Commit,
    /// Commit and report where the log stood, for read-your-writes on the replica.
    CommitAt,
    /// Commit after the caller has its answer: a read has nothing to lose by it.
    CommitLater,
    /// Undo it all (a dry run).
    Rollback,
}

impl Db {
    /// Sets up the pools without connecting: an unreachable database must not keep a server from
    /// starting, since its other domains still work. The first call connects and migrates.
    pub fn open(settings: &Settings) -> Result<Arc<Db>> {
        Self::open_with(settings, true)
    }

    /// Sets up the pools without the schema check, for a caller that migrates by hand.
    pub fn open_unmigrated(settings: &Settings) -> Result<Arc<Db>> {
        Self::open_with(settings, false)
    }

    fn open_with(settings: &Settings, migrate: bool) -> Result<Arc<Db>> {
        let schema = validate_schema_name(&settings.schema)?;
        let location = format!("{} (schema {schema})", conninfo::masked(&settings.url));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kenning-postgres")
            .enable_all()
            .build()
            .map_err(|error| Error::Unreachable { location: location.clone(), reason: format!("cannot start the I/O runtime: {error}") })?;
        let primary = pool(settings, &settings.url, &location)?;
        let replica = match &settings.read_url {
            None => None,
            Some(url) => {
                let location = conninfo::masked(url);
                Some(Arc::new(Replica {
                    pool: pool(settings, url, &location)?,
                    location,
                    down: Mutex::new(None),
                    replayed: AtomicU64::new(0),
                }))
            }
        };
        // Every unit finds kenning's tables first and pgvector's types (in `public`) after;
        // filtered vector searches keep walking the graph until they have enough rows that pass.
        let begin = format!(
            "BEGIN; SET LOCAL search_path = {schema}, public; SET LOCAL hnsw.ef_search = 100; \
             SET LOCAL hnsw.iterative_scan = relaxed_order"
        );
        Ok(Arc::new(Db {
            runtime: Some(runtime),
            primary,
            replica,
            schema,
            location,
            begin,
            schema_ready: AtomicBool::new(!migrate),
            schema_lock: tokio::sync::Mutex::new(()),
            written_at: AtomicU64::new(0),
        }))
    }

    /// Where the store is, for messages and statistics: the connection string with its password
    /// masked, and the schema; with a replica, where reads go too.
    pub fn location(&self) -> String {
        match &self.replica {
            Some(replica) => format!("{}; reads from {}", self.location, replica.location),
            None => self.location.clone(),
        }
    }

    /// Why reads are not going where they were configured to, while that lasts: the read
    /// replica cannot be reached, so the primary answers them.
    pub fn degraded(&self) -> Option<String> {
        let replica = self.replica.as_ref()?;
        let down = replica.down.lock().unwrap_or_else(PoisonError::into_inner);
        down.as_ref().map(|reason| format!("the read replica at {} is unreachable ({reason}); the primary answered", replica.location))
    }

    /// Runs a unit of work that writes, on the primary, in one transaction committed before
    /// this returns. A unit that lost a race with a concurrent writer (a serialisation failure
    /// or a deadlock the server broke) runs again on a fresh transaction.
    pub fn write<T: Send>(&self, work: impl AsyncFn(&Tx) -> Result<T> + Send + Sync) -> Result<T> {
        self.retrying(|| self.on_primary(&work, if self.replica.is_some() { End::CommitAt } else { End::Commit }))
    }

    /// Runs a unit of work that writes only statistics (access counts), which a read need not
    /// wait for the replica to replay: unlike [`Db::write`], it leaves the log position this
    /// process's reads wait for where it was.
    pub fn write_statistics<T: Send>(&self, work: impl AsyncFn(&Tx) -> Result<T> + Send + Sync) -> Result<T> {
        self.retrying(|| self.on_primary(&work, End::Commit))
    }

    /// Runs a unit of work on the primary and undoes it, for a dry run.
    pub fn rolled_back<T: Send>(&self, work: impl AsyncFn(&Tx) -> Result<T> + Send + Sync) -> Result<T> {
        self.retrying(|| self.on_primary(&work, End::Rollback))
    }

    /// Runs a unit of work that reads on the primary: reads that decide a write, and reads
    /// that must see every process's latest writes.
    pub fn read_primary<T: Send>(&self, work: impl AsyncFn(&Tx) -> Result<T> + Send + Sync) -> Result<T> {
        self.on_primary(&work, End::CommitLater)
    }

    /// Runs a unit of work on one connection without a transaction around it, each statement
    /// committing on its own: for `CREATE INDEX CONCURRENTLY`, which refuses to run in one.
    pub fn autocommit<T: Send>(&self, work: impl AsyncFn(&Tx) -> Result<T> + Send + Sync) -> Result<T> {
        self.block_on(|| async {
            self.ensure_schema().await?;
            let object = self.primary.get().await.map_err(|error| pool_error(&self.location, error))?;
            let tx = Tx::new(object, None);
            work(&tx).await
        })
        .map_err(|error: Error| error.at(&self.location))
    }

    /// Runs a unit of work that reads, on the replica when there is one that answers and has
    /// replayed this process's writes, else on the primary.
    pub fn read<T: Send>(&self, work: impl AsyncFn(&Tx) -> Result<T> + Send + Sync) -> Result<T> {
        if let Some(replica) = self.replica.as_ref().filter(|replica| !replica.is_down() && self.schema_ready.load(Ordering::Acquire)) {
            match self.block_on(|| self.on_replica(replica, &work)) {
                Ok(Some(value)) => return Ok(value),
                // Behind this process's own writes: the primary answers this one.
                Ok(None) => {}
                Err(Error::Unreachable { reason, .. }) => self.replica_down(replica, reason),
                Err(other) => return Err(other),
            }
        }
        self.on_primary(&work, End::CommitLater)
    }

    fn on_primary<T: Send>(&self, work: &(impl AsyncFn(&Tx) -> Result<T> + Send + Sync), end: End) -> Result<T> {
        self.block_on(|| async {
            self.ensure_schema().await?;
            let object = self.primary.get().await.map_err(|error| pool_error(&self.location, error))?;
            let (value, written_at) = self.unit(Tx::new(object, Some(self.begin.clone())), work, end).await?;
            if let Some(lsn) = written_at {
                self.written_at.fetch_max(lsn, Ordering::AcqRel);
            }
            Ok(value)
        })
        .map_err(|error: Error| error.at(&self.location))
    }

    /// The read on the replica, or `None` when the replica has not yet replayed this process's
    /// latest write.
    async fn on_replica<T>(&self, replica: &Replica, work: &impl AsyncFn(&Tx) -> Result<T>) -> Result<Option<T>> {
        let object = replica.pool.get().await.map_err(|error| pool_error(&replica.location, error))?;
        let tx = Tx::new(object, Some(self.begin.clone()));
        let needed = self.written_at.load(Ordering::Acquire);
        if needed > replica.replayed.load(Ordering::Acquire) {
            // A server that is not in recovery (a read URL naming the primary itself) has no
            // replay position, and holds every write.
            let replayed = match tx.simple_value("SELECT pg_catalog.pg_last_wal_replay_lsn()::text").await? {
                Some(text) => crate::sql::parse_lsn(&text).unwrap_or(0),
                None => u64::MAX,
            };
            replica.replayed.fetch_max(replayed, Ordering::AcqRel);
            if replayed < needed {
                tx.rollback().await;
                return Ok(None);
            }
        }
        Ok(Some(self.unit(tx, work, End::CommitLater).await?.0))
    }

    async fn unit<T>(&self, tx: Tx, work: &impl AsyncFn(&Tx) -> Result<T>, end: End) -> Result<(T, Option<u64>)> {
        match work(&tx).await {
            Ok(value) => match end {
                End::Commit => {
                    tx.commit().await?;
                    Ok((value, None))
                }
                End::CommitAt => {
                    let lsn = tx.commit_at().await?;
                    Ok((value, lsn))
                }
                End::CommitLater => {
                    tokio::spawn(async move {
                        if let Err(error) = tx.commit().await {
                            tracing::debug!(%error, "ending a read transaction failed; its connection was closed");
                        }
                    });
                    Ok((value, None))
                }
                End::Rollback => {
                    tx.rollback().await;
                    Ok((value, None))
                }
            },
            Err(error) => {
                tx.rollback().await;
                Err(error)
            }
        }
    }

    /// Notes that the replica cannot be reached, and starts looking for it in the background.
    fn replica_down(&self, replica: &Arc<Replica>, reason: String) {
        tracing::warn!(replica = %replica.location, %reason, "the read replica is unreachable; reads go to the primary");
        let first = replica.down.lock().unwrap_or_else(PoisonError::into_inner).replace(reason).is_none();
        if !first {
            return;
        }
        let runtime = self.runtime.as_ref().expect("the runtime lives as long as the store");
        let replica = replica.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(REPLICA_PROBE_INTERVAL).await;
                let answered = match replica.pool.get().await {
                    Ok(object) => Tx::new(object, None).simple_value("SELECT 1").await.is_ok(),
                    Err(_) => false,
                };
                if answered {
                    tracing::info!(replica = %replica.location, "the read replica answers again");
                    *replica.down.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    break;
                }
            }
        });
    }

    fn retrying<T>(&self, attempt: impl Fn() -> Result<T>) -> Result<T> {
        const ATTEMPTS: u32 = 8;
        let mut tried = 0;
        loop {
            tried += 1;
            match attempt() {
                Err(error) if error.is_retryable() && tried < ATTEMPTS => {
                    std::thread::sleep(Duration::from_millis(u64::from(tried) * 5 + fastrand::u64(0..7)));
                }
                other => return other,
            }
        }
    }

    /// Runs the future `make` makes on the private runtime and blocks until it is done. The
    /// future is made on the thread that runs it, so it need not be `Send`.
    fn block_on<T: Send, Fut: Future<Output = T>>(&self, make: impl FnOnce() -> Fut + Send) -> T {
        let runtime = self.runtime.as_ref().expect("the runtime lives as long as the store");
        match Handle::try_current() {
            Err(_) => runtime.block_on(make()),
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| runtime.block_on(make()))
            }
            Ok(_) => std::thread::scope(|scope| {
                let waiter = scope.spawn(|| runtime.block_on(make()));
                waiter.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }),
        }
    }

    /// Creates or upgrades the schema on this process's first use of the primary.
    async fn ensure_schema(&self) -> Result<()> {
        if self.schema_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let _guard = self.schema_lock.lock().await;
        if self.schema_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let schema = self.schema.as_str();
        let end = if self.replica.is_some() { End::CommitAt } else { End::Commit };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let object = self.primary.get().await.map_err(|error| pool_error(&self.location, error))?;
            let tx = Tx::new(object, Some(self.begin.clone()));
            match self.unit(tx, &async |tx: &Tx| schema::migrate(tx, schema, None).await, end).await {
                Ok(((), written_at)) => {
                    if let Some(lsn) = written_at {
                        self.written_at.fetch_max(lsn, Ordering::AcqRel);
                    }
                    break;
                }
                // Another process created the schema or the extension while this one waited for
                // the migration lock, and this session's catalog cache had not heard of it yet:
                // a new transaction sees it.
                Err(error) if error.is_unique_violation() && attempt < 3 => {}
                Err(error) => return Err(error),
            }
        }
        self.schema_ready.store(true, Ordering::Release);
        Ok(())
    }
}

/// A pool of connections to `url`, made as libpq would make them.
fn pool(settings: &Settings, url: &str, location: &str) -> Result<Pool<Connector>> {
    let params = conninfo::resolve(url, &settings.environment)?;
    let connector = Connector::new(params, settings.connect_timeout, location.to_owned());
    let timeouts = Timeouts {
        wait: Some(settings.connect_timeout),
        create: Some(connector.create_timeout()),
        recycle: Some(settings.connect_timeout),
    };
    Pool::builder(connector)
        .max_size(settings.max_connections.max(1))
        .timeouts(timeouts)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|error| Error::Url(error.to_string()))
}

fn pool_error(location: &str, error: PoolError<Error>) -> Error {
    match error {
        PoolError::Backend(error) => error,
        PoolError::Timeout(_) => Error::Unreachable {
            location: location.to_owned(),
            reason: "no connection could be made or became free in time".to_owned(),
        },
        other => Error::Unreachable { location: location.to_owned(), reason: other.to_string() },
    }
}

impl Drop for Db {
    /// A runtime dropped the ordinary way blocks until its tasks end, which tokio forbids inside
    /// another runtime's task; the store may well be dropped there (a server shutting down), so
    /// its runtime is let go in the background.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A schema name is spliced into `search_path` and DDL, so it is held to a plain identifier.
fn validate_schema_name(name: &str) -> Result<String> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if valid {
        Ok(name.to_owned())
    } else {
        Err(Error::Url(format!("schema `{name}` must be a lower-case identifier: [a-z_][a-z0-9_]*, at most 63 characters")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(validate_schema_name("kenning").is_ok());
        assert!(validate_schema_name("org_acme_2").is_ok());
        for bad in ["", "Kenning", "a-b", "a;drop", "1abc", &"x".repeat(64)] {
            assert!(validate_schema_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_never_show_a_password() {
        let settings = Settings { read_url: Some("host=replica password=also-secret user=k".into()), ..Settings::new("postgresql://k:secret@db/org") };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("postgresql://k:****@db/org"), "{shown}");
    }

    #[test]
    fn the_location_leaves_the_password_out() {
        let db = Db::open(&Settings::new("postgresql://kenning:secret@db.example:6543/org")).unwrap();
        assert_eq!(db.location(), "postgresql://kenning:****@db.example:6543/org (schema kenning)");
    }
}
