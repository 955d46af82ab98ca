//! Connections: the URL, TLS, the pool, the private runtime that runs the asynchronous driver
//! behind the synchronous store traits, and the schema check on the first connection.
//!
//! The store traits are synchronous and are called from plain threads, from the CLI's main
//! thread and from the server's blocking pool. The driver is asynchronous, so the store owns a
//! small multi-threaded tokio runtime of its own: its worker threads drive the connections'
//! sockets, and a call blocks its caller on the private runtime until the database answered.
//! Called from a thread of another multi-threaded runtime, the wait is wrapped in
//! `block_in_place`, which hands that thread's other work to its siblings; from a
//! current-thread runtime, where that is not allowed, the wait moves to a scoped thread. The
//! private runtime never waits on the caller's, so no caller can deadlock it.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio_postgres::config::{Host, SslMode};

use crate::error::{Error, Result};
use crate::schema;

/// How a store connects: the URL and what the store may do to the database.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A PostgreSQL URL (`postgresql://user:password@host:port/database?sslmode=require`) or
    /// key-value connection string. `sslmode=require` (or `prefer`, the default) uses TLS via
    /// rustls with the system's root certificates; `disable` never does.
    pub url: String,
    /// The PostgreSQL schema that holds kenning's tables, so that one database can hold several
    /// organisations' stores (or test stores) side by side. Created if missing.
    pub schema: String,
    /// The most connections the store opens at once.
    pub max_connections: usize,
    /// How long a call waits to connect (or for a free connection) before the database counts as
    /// unreachable.
    pub connect_timeout: Duration,
    /// How vector search finds the nearest vectors.
    pub vector_index: VectorIndex,
}

/// How vector search finds the nearest vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VectorIndex {
    /// An HNSW index (cosine) per embedding model and dimension: approximate, fast at any size.
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
            schema: "kenning".to_owned(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(3),
            vector_index: VectorIndex::default(),
        }
    }
}

/// The pool, the runtime it lives on and whether the schema has been checked.
pub(crate) struct Db {
    /// Always `Some` until the store is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    schema: String,
    location: String,
    schema_ready: AtomicBool,
    /// Serialises the schema check of this process's first connections.
    schema_lock: tokio::sync::Mutex<()>,
}

impl Db {
    /// Sets up the pool without connecting: an unreachable database must not keep a server from
    /// starting, since its other domains still work. The first call connects and migrates.
    pub fn open(settings: &Settings) -> Result<Arc<Db>> {
        Self::open_with(settings, true)
    }

    /// Sets up the pool without the schema check, for a caller that migrates by hand.
    pub fn open_unmigrated(settings: &Settings) -> Result<Arc<Db>> {
        Self::open_with(settings, false)
    }

    fn open_with(settings: &Settings, migrate: bool) -> Result<Arc<Db>> {
        let schema = validate_schema_name(&settings.schema)?;
        let mut config = tokio_postgres::Config::from_str(&settings.url).map_err(|error| Error::Url(error.to_string()))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(settings.connect_timeout);
        }
        // Every session finds kenning's tables first and pgvector's type (in `public`) after.
        // Filtered vector searches keep walking the graph until they have enough rows that pass.
        config.options(format!("-c search_path={schema},public -c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search=100"));
        if config.get_application_name().is_none() {
            config.application_name("kenning");
        }
        let location = location(&config, &schema);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kenning-postgres")
            .enable_all()
            .build()
            .map_err(|error| Error::Unreachable { location: location.clone(), reason: format!("cannot start the I/O runtime: {error}") })?;
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = if config.get_ssl_mode() == SslMode::Disable {
            Manager::from_config(config, tokio_postgres::NoTls, manager_config)
        } else {
            Manager::from_config(config, tls_connector()?, manager_config)
        };
        let timeouts = Timeouts {
            wait: Some(settings.connect_timeout),
            create: Some(settings.connect_timeout),
            recycle: Some(settings.connect_timeout),
        };
        let pool = Pool::builder(manager)
            .max_size(settings.max_connections.max(1))
            .timeouts(timeouts)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|error| Error::Url(error.to_string()))?;
        Ok(Arc::new(Db {
            runtime: Some(runtime),
            pool,
            schema,
            location,
            schema_ready: AtomicBool::new(!migrate),
            schema_lock: tokio::sync::Mutex::new(()),
        }))
    }

    /// Where the store is, for messages and statistics: host, port, database and schema,
    /// never the password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Runs `work` with a connection whose schema is up to date, on the private runtime, and
    /// blocks until it is done.
    pub fn run<T, F, Fut>(&self, work: F) -> Result<T>
    where
        T: Send,
        F: FnOnce(Object) -> Fut + Send,
        Fut: Future<Output = Result<T>> + Send,
    {
        let task = async move {
            let client = self.connection().await?;
            work(client).await
        };
        self.block_on(task).map_err(|error| error.at(&self.location))
    }

    /// Runs `work` and, if it lost a race with a concurrent writer (a serialisation failure or
    /// a deadlock the server broke), runs it again on a fresh transaction.
    pub fn run_retrying<T, F, Fut>(&self, work: F) -> Result<T>
    where
        T: Send,
        F: Fn(Object) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T>> + Send,
    {
        const ATTEMPTS: u32 = 8;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.run(&work) {
                Err(error) if error.is_retryable() && attempt < ATTEMPTS => {
                    std::thread::sleep(Duration::from_millis(u64::from(attempt) * 5 + fastish_jitter()));
                }
                other => return other,
            }
        }
    }

    fn block_on<T: Send>(&self, task: impl Future<Output = T> + Send) -> T {
        let runtime = self.runtime.as_ref().expect("the runtime lives as long as the store");
        match Handle::try_current() {
            Err(_) => runtime.block_on(task),
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| runtime.block_on(task))
            }
            Ok(_) => std::thread::scope(|scope| {
                let waiter = scope.spawn(|| runtime.block_on(task));
                waiter.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }),
        }
    }

    async fn connection(&self) -> Result<Object> {
        let client = self.pool.get().await.map_err(|error| self.pool_error(error))?;
        if !self.schema_ready.load(Ordering::Acquire) {
            let _guard = self.schema_lock.lock().await;
            if !self.schema_ready.load(Ordering::Acquire) {
                schema::migrate(&client, &self.schema, None).await?;
                self.schema_ready.store(true, Ordering::Release);
            }
        }
        Ok(client)
    }

    fn pool_error(&self, error: deadpool_postgres::PoolError) -> Error {
        match error {
            deadpool_postgres::PoolError::Backend(error) => Error::from(error),
            other => Error::Unreachable { location: self.location.clone(), reason: other.to_string() },
        }
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

/// A few milliseconds of jitter so that writers that collided do not collide again in step.
fn fastish_jitter() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |time| time.subsec_nanos());
    u64::from(nanos % 7)
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

fn location(config: &tokio_postgres::Config, schema: &str) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("postgresql://{host}:{port}/{database} (schema {schema})")
}

/// TLS through rustls, trusting the system's root certificates (and `SSL_CERT_FILE` when set).
fn tls_connector() -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "a system root certificate could not be read");
    }
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    tracing::debug!(added, ignored, "root certificates for PostgreSQL TLS");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Tls(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
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
    fn the_location_leaves_the_password_out() {
        let config = tokio_postgres::Config::from_str("postgresql://kenning:secret@db.example:6543/org").unwrap();
        let shown = location(&config, "kenning");
        assert_eq!(shown, "postgresql://db.example:6543/org (schema kenning)");
    }
}
