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
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio::runtime::{Handle, RuntimeFlavor};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::{Host, SslMode};

use crate::error::{Error, Result};
use crate::schema;

/// How a store connects: the URL and what the store may do to the database.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A PostgreSQL URL (`postgresql://user:password@host:port/database?sslmode=require`) or
    /// key-value connection string. TLS (through rustls) follows libpq's `sslmode`: `disable`
    /// never uses it; `prefer` (the default) and `require` encrypt without checking the server's
    /// certificate, unless `sslrootcert` names a CA file, which the certificate must then chain
    /// to; `verify-ca` checks the chain and `verify-full` also the host name, against
    /// `sslrootcert` or else the system's root certificates (and `SSL_CERT_FILE` when set).
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
    /// What the URL asked of TLS, to explain a refused connection.
    tls_mode: TlsMode,
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
        let (url, tls) = split_tls(&settings.url)?;
        let mut config = tokio_postgres::Config::from_str(&url).map_err(|error| Error::Url(error.to_string()))?;
        config.ssl_mode(match tls.mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        });
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
        let manager = if tls.mode == TlsMode::Disable {
            Manager::from_config(config, tokio_postgres::NoTls, manager_config)
        } else {
            Manager::from_config(config, tls_connector(&tls)?, manager_config)
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
            tls_mode: tls.mode,
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
            deadpool_postgres::PoolError::Backend(error) => match Error::from(error) {
                // The driver's own words ("server does not support TLS") do not say that the
                // URL is what asked for TLS, nor how to connect.
                Error::Unreachable { location, reason } if reason.contains("does not support TLS") => Error::Unreachable {
                    location,
                    reason: format!(
                        "{reason}: the URL asks for TLS (sslmode={}), and this server does not offer it; \
                         enable ssl on the server, or connect with sslmode=disable or prefer where plain \
                         connections are acceptable",
                        self.tls_mode.name()
                    ),
                },
                other => other,
            },
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

/// What a connection URL asks of TLS, in libpq's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    fn parse(text: &str) -> Option<TlsMode> {
        match text {
            "disable" => Some(TlsMode::Disable),
            "prefer" => Some(TlsMode::Prefer),
            "require" => Some(TlsMode::Require),
            "verify-ca" => Some(TlsMode::VerifyCa),
            "verify-full" => Some(TlsMode::VerifyFull),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

/// The URL's TLS settings: its `sslmode` and the CA file of `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsRequest {
    pub mode: TlsMode,
    pub root_cert: Option<PathBuf>,
}

/// Takes `sslmode` and `sslrootcert` out of a connection URL or key-value string, and returns
/// the rest with what they asked. The driver knows neither `verify-ca`/`verify-full` nor
/// `sslrootcert`, so kenning reads them itself and sets up the verification they ask for.
pub(crate) fn split_tls(url: &str) -> Result<(String, TlsRequest)> {
    let mut mode = None;
    let mut root_cert = None;
    let mut take = |key: &str, value: String| -> Result<bool> {
        match key {
            "sslmode" => {
                mode = Some(TlsMode::parse(&value).ok_or_else(|| {
                    Error::Url(format!(
                        "sslmode `{value}` is not one of disable, prefer, require, verify-ca, verify-full"
                    ))
                })?);
                Ok(true)
            }
            "sslrootcert" => {
                root_cert = Some(PathBuf::from(value));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|pair| !pair.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(key, percent_decode(value))? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) }
            }
        }
    } else {
        let mut kept = Vec::new();
        for (key, value, text) in key_value_pairs(url)? {
            if !take(&key, value)? {
                kept.push(text);
            }
        }
        kept.join(" ")
    };
    let request = TlsRequest { mode: mode.unwrap_or(TlsMode::Prefer), root_cert };
    if request.mode == TlsMode::Disable && request.root_cert.is_some() {
        return Err(Error::Url("sslrootcert is given but sslmode=disable turns TLS off; drop one of them".to_owned()));
    }
    Ok((rest, request))
}

/// `%XX` escapes of a URL's query value.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|byte| (*byte as char).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `key=value` pairs of a key-value connection string, each with its value unquoted and the
/// text it was written as. Values may be single-quoted, with `\'` and `\\` escapes.
fn key_value_pairs(text: &str) -> Result<Vec<(String, String, &str)>> {
    let mut pairs = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let start = rest;
        let equals = rest.find('=').ok_or_else(|| Error::Url(format!("`{rest}` is not a key=value pair")))?;
        let key = rest[..equals].trim().to_owned();
        rest = rest[equals + 1..].trim_start();
        let mut value = String::new();
        if let Some(quoted) = rest.strip_prefix('\'') {
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((at, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                    '\'' => {
                        end = Some(at);
                        break;
                    }
                    other => value.push(other),
                }
            }
            let end = end.ok_or_else(|| Error::Url(format!("the value of `{key}` has no closing quote")))?;
            rest = &quoted[end + 1..];
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            value.push_str(&rest[..end]);
            rest = &rest[end..];
        }
        let written = start[..start.len() - rest.len()].trim_end();
        pairs.push((key, value, written));
        rest = rest.trim_start();
    }
    Ok(pairs)
}

/// TLS through rustls, verifying the server as the URL's `sslmode` and `sslrootcert` ask.
fn tls_connector(request: &TlsRequest) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Tls(error.to_string()))?;
    let check_chain = request.root_cert.is_some() || matches!(request.mode, TlsMode::VerifyCa | TlsMode::VerifyFull);
    let chain = if check_chain {
        let roots = Arc::new(root_certificates(request.root_cert.as_deref())?);
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|error| Error::Tls(error.to_string()))?;
        Some(verifier)
    } else {
        None
    };
    let config = match chain {
        Some(verifier) if request.mode == TlsMode::VerifyFull => builder.with_webpki_verifier(verifier).with_no_client_auth(),
        chain => builder.dangerous().with_custom_certificate_verifier(Arc::new(LibpqVerifier { chain, provider })).with_no_client_auth(),
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The CA certificates of `sslrootcert`, or else the system's root certificates.
fn root_certificates(file: Option<&Path>) -> Result<rustls::RootCertStore> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    match file {
        Some(path) => {
            let unreadable = |reason: String| Error::Tls(format!("sslrootcert {}: {reason}", path.display()));
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|error| unreadable(error.to_string()))?
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|error| unreadable(error.to_string()))?;
            if certificates.is_empty() {
                return Err(unreadable("holds no PEM certificate".to_owned()));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|error| unreadable(error.to_string()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::warn!(%error, "a system root certificate could not be read");
            }
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            tracing::debug!(added, ignored, "root certificates for PostgreSQL TLS");
        }
    }
    Ok(roots)
}

/// The certificate check of `sslmode` short of `verify-full` (which is rustls's own check).
/// With `chain`, the certificate must chain to one of its CAs, whatever host name it names
/// (`verify-ca`, or `require` with a CA file). Without, any certificate is taken (`prefer` or
/// `require` without a CA file): libpq encrypts such connections without asking whose
/// certificate the server shows, and so does kenning. The handshake's signatures are checked
/// either way, so the session is bound to the certificate the server presented.
#[derive(Debug)]
struct LibpqVerifier {
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for LibpqVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        // webpki checks the chain before the name, so a name error means the chain was good.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
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
    fn tls_settings_are_taken_out_of_urls() {
        let (rest, request) =
            split_tls("postgresql://u@db:5432/org?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20file.pem").unwrap();
        assert_eq!(rest, "postgresql://u@db:5432/org?application_name=x");
        assert_eq!(request, TlsRequest { mode: TlsMode::VerifyFull, root_cert: Some(PathBuf::from("/etc/ca file.pem")) });

        let (rest, request) = split_tls("postgres://u@db/org?sslmode=require").unwrap();
        assert_eq!(rest, "postgres://u@db/org");
        assert_eq!(request, TlsRequest { mode: TlsMode::Require, root_cert: None });

        let (rest, request) = split_tls("postgres://u@db/org").unwrap();
        assert_eq!(rest, "postgres://u@db/org");
        assert_eq!(request.mode, TlsMode::Prefer);
    }

    #[test]
    fn tls_settings_are_taken_out_of_key_value_strings() {
        let (rest, request) =
            split_tls("host=db  sslmode=verify-ca sslrootcert='/tmp/my ca\\'s.pem' password='a b' user=u").unwrap();
        assert_eq!(rest, "host=db password='a b' user=u");
        assert_eq!(request, TlsRequest { mode: TlsMode::VerifyCa, root_cert: Some(PathBuf::from("/tmp/my ca's.pem")) });
        assert!(tokio_postgres::Config::from_str(&rest).is_ok());
    }

    #[test]
    fn unknown_or_contradictory_tls_settings_are_refused() {
        let error = split_tls("postgresql://db/org?sslmode=verify").unwrap_err().to_string();
        assert!(error.contains("sslmode `verify`") && error.contains("verify-full"), "{error}");
        let error = split_tls("host=db sslmode=disable sslrootcert=/ca.pem").unwrap_err().to_string();
        assert!(error.contains("sslrootcert"), "{error}");
        assert!(split_tls("host=db sslrootcert='/unterminated").is_err());
    }

    #[test]
    fn the_location_leaves_the_password_out() {
        let config = tokio_postgres::Config::from_str("postgresql://kenning:secret@db.example:6543/org").unwrap();
        let shown = location(&config, "kenning");
        assert_eq!(shown, "postgresql://db.example:6543/org (schema kenning)");
    }
}
