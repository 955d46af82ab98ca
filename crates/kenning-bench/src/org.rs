//! The `org` benchmark: the organisation domain on a real PostgreSQL server with pgvector, side
//! by side with the SQLite user domain, in one run over the same synthetic corpus.
//!
//! For each backend, in turn and on its own fresh store (a new PostgreSQL schema; a new SQLite
//! file in a temporary directory):
//!
//! 1. single captures (`MemoryService::capture`, one transaction each), as an agent captures;
//! 2. a bulk load of the rest (`capture_many` in batches, on `--load-threads` threads), the
//!    capture throughput; on PostgreSQL the loaded vectors then join the vector index in one
//!    build (`PostgresStore::catch_up_vector_index`), timed on its own;
//! 3. recalls (one untimed warm-up pass, then a timed pass over the same queries), and on
//!    PostgreSQL how much of an exact search's top ten the vector leg finds;
//! 4. `--clients` threads sharing the service, each recalling, or capturing and recalling in
//!    turn, as that many agents (or people) using one store: the aggregate rate and the latency
//!    each saw.
//!
//! Only the calls are timed, never the making of the inputs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore, SearchFilter};
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_postgres::{Environment, PostgresStore, Settings, VectorIndex};
use kenning_sqlite::SqliteStore;
use serde::Serialize;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::stats::{Summary, round};

#[derive(Debug, Args)]
pub struct OrgArgs {
    /// The PostgreSQL server (with pgvector) to measure; a fresh schema is created on it and
    /// dropped afterwards.
    #[arg(long, env = "KENNING_ORG_URL")]
    url: String,
    /// How many memories each store holds.
    #[arg(long)]
    memories: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Recall queries timed per backend.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Memories captured one at a time before the bulk load.
    #[arg(long, default_value_t = 500)]
    single_captures: usize,
    /// Memories per `capture_many` call in the bulk load.
    #[arg(long, default_value_t = 1000)]
    bulk_batch: usize,
    /// Threads calling `capture_many` at once in the bulk load.
    #[arg(long, default_value_t = 2)]
    load_threads: usize,
    /// The backends to measure, in this order.
    #[arg(long, value_delimiter = ',', default_value = "postgres,sqlite")]
    backends: Vec<String>,
    /// Queries whose vector-leg top ten on PostgreSQL is compared with an exact search's.
    #[arg(long, default_value_t = 20)]
    recall_checks: usize,
    /// Concurrent clients in the shared-store phase.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Captures and recalls each client makes in the shared-store phase.
    #[arg(long, default_value_t = 50)]
    client_operations: usize,
    /// A read replica of the PostgreSQL server, for recalls (captures go to `--url`).
    #[arg(long)]
    read_url: Option<String>,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Keep the PostgreSQL schema after the run (to inspect it) instead of dropping it.
    #[arg(long)]
    keep_schema: bool,
    #[arg(long)]
    pub json_out: Option<std::path::PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct OrgReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub machine: Machine,
    pub memories: usize,
    pub seed: u64,
    pub embedder: &'static str,
    pub model: Option<String>,
    pub clients: usize,
    pub backends: Vec<BackendFigures>,
}

#[derive(Debug, Serialize)]
pub struct BackendFigures {
    /// `postgres` (the org domain) or `sqlite` (the user domain).
    pub backend: &'static str,
    pub single_capture: Summary,
    /// Memories per second through `capture_many`.
    pub bulk_capture_per_second: f64,
    pub bulk_seconds: f64,
    /// PostgreSQL: the seconds the loaded vectors took to join the vector index.
    pub index_seconds: Option<f64>,
    pub recall: Summary,
    /// PostgreSQL: the share of an exact search's top ten the vector leg found.
    pub vector_recall_at_10: Option<f64>,
    /// `--clients` threads each recalling.
    pub concurrent_recall: ConcurrentFigures,
    /// `--clients` threads each capturing and recalling in turn.
    pub concurrent: ConcurrentFigures,
    pub store_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct ConcurrentFigures {
    pub clients: usize,
    pub seconds: f64,
    pub captures_per_second: f64,
    pub recalls_per_second: f64,
    pub capture: Option<Summary>,
    pub recall: Summary,
}

pub fn run(args: &OrgArgs) -> Result<OrgReport> {
    ensure!(
        args.memories > 0 && args.queries > 0 && args.bulk_batch > 0 && args.clients > 0 && args.load_threads > 0,
        "every count must be at least 1"
    );
    for backend in &args.backends {
        ensure!(matches!(backend.as_str(), "postgres" | "sqlite"), "--backends: `{backend}` is not postgres or sqlite");
    }
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let loaded = args.embedder.load()?;
    let corpus = Corpus::new(args.seed);

    let mut backends = Vec::new();
    for backend in &args.backends {
        if backend == "postgres" {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |time| time.subsec_nanos());
            let environment =
                Environment::from_lookup(|name| std::env::var(name).ok(), std::env::var("USER").ok(), std::env::var_os("HOME").map(Into::into));
            let settings = Settings {
                schema: format!("bench_{}_{nanos}", std::process::id()),
                max_connections: args.clients.max(4),
                read_url: args.read_url.clone(),
                environment,
                // The load's vectors join the index when the benchmark says, and that is timed.
                catch_up_after: None,
                ..Settings::new(args.url.clone())
            };
            let postgres = Arc::new(PostgresStore::open(&settings)?);
            postgres.check().with_context(|| format!("connecting to {}", postgres.location()))?;
            let exact = PostgresStore::open(&Settings { vector_index: VectorIndex::Exact, read_url: None, ..settings.clone() })?;
            let index = || -> Result<()> {
                postgres.catch_up_vector_index()?;
                Ok(())
            };
            let model = loaded.embedder.as_ref().map(|embedder| embedder.model_id().to_owned());
            let checks = RecallChecks { exact: &exact, model: model.as_deref() };
            let org = Domain::Org("bench".to_owned());
            let figures = measure(args, "postgres", org, postgres.clone(), &corpus, loaded.embedder.clone(), Some(&index), Some(checks));
            if !args.keep_schema {
                postgres.drop_schema().context("dropping the benchmark's schema")?;
            }
            backends.push(figures?);
        } else {
            let dir = tempfile::tempdir().context("creating a temporary directory for the SQLite store")?;
            let sqlite = Arc::new(SqliteStore::open(&dir.path().join("user.db"))?);
            backends.push(measure(args, "sqlite", Domain::User, sqlite, &corpus, loaded.embedder.clone(), None, None)?);
        }
    }
    Ok(OrgReport {
        benchmark: "org",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        machine,
        memories: args.memories,
        seed: args.seed,
        embedder: args.embedder.embedder.name(),
        model: loaded.model,
        clients: args.clients,
        backends,
    })
}

/// The exact search the vector leg's answers are checked against.
struct RecallChecks<'a> {
    exact: &'a PostgresStore,
    model: Option<&'a str>,
}

#[allow(clippy::too_many_arguments)]
fn measure(
    args: &OrgArgs,
    backend: &'static str,
    domain: Domain,
    store: Arc<dyn MemoryStore>,
    corpus: &Corpus,
    embedder: Option<Arc<dyn kenning_core::Embedder>>,
    index: Option<&dyn Fn() -> Result<()>>,
    checks: Option<RecallChecks<'_>>,
) -> Result<BackendFigures> {
    eprintln!("{backend}: loading {} memories", args.memories);
    let service = Arc::new(MemoryService::new(vec![DomainStore { domain, store: store.clone() }], embedder.clone()));
    let single_count = args.memories.min(args.single_captures);
    let mut single = Vec::with_capacity(single_count);
    for index in 0..single_count {
        let input = corpus.memory(index);
        let started = Instant::now();
        service.capture(input, None)?;
        single.push(started.elapsed());
    }
    let bulk_time = bulk_load(args, &service, corpus, single_count)?;
    let bulk_count = args.memories - single_count;
    let index_seconds = match index {
        Some(index) => {
            eprintln!("{backend}: bringing the loaded vectors into the index");
            let started = Instant::now();
            index()?;
            Some(round(started.elapsed().as_secs_f64()))
        }
        None => None,
    };

    let queries: Vec<String> = (0..args.queries).map(|index| corpus.query(index, args.memories)).collect();
    for query in &queries {
        service.recall(request(query))?;
    }
    let mut recall = Vec::with_capacity(queries.len());
    for query in &queries {
        let started = Instant::now();
        service.recall(request(query))?;
        recall.push(started.elapsed());
    }
    let vector_recall_at_10 = match (checks, &embedder) {
        (Some(checks), Some(embedder)) => Some(vector_recall(args, store.as_ref(), &checks, embedder.as_ref(), &queries)?),
        _ => None,
    };

    eprintln!("{backend}: {} clients recalling", args.clients);
    let concurrent_recall = concurrent(args, &service, corpus, &queries, false)?;
    eprintln!("{backend}: {} clients capturing and recalling", args.clients);
    let concurrent = concurrent(args, &service, corpus, &queries, true)?;
    let store_bytes = store.stats()?.size_bytes;
    Ok(BackendFigures {
        backend,
        single_capture: Summary::of(&single).context("no single captures")?,
        bulk_capture_per_second: if bulk_time.is_zero() { 0.0 } else { round(bulk_count as f64 / bulk_time.as_secs_f64()) },
        bulk_seconds: round(bulk_time.as_secs_f64()),
        index_seconds,
        recall: Summary::of(&recall).context("no recalls")?,
        vector_recall_at_10,
        concurrent_recall,
        concurrent,
        store_bytes,
    })
}

/// The memories after the single captures, in `capture_many` batches spread over
/// `--load-threads` threads; returns the time from the first batch to the last.
fn bulk_load(args: &OrgArgs, service: &Arc<MemoryService>, corpus: &Corpus, first: usize) -> Result<Duration> {
    let batches: Vec<usize> = (first..args.memories).step_by(args.bulk_batch).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..args.load_threads)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    loop {
                        let Some(&start) = batches.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) else { return Ok(()) };
                        let end = (start + args.bulk_batch).min(args.memories);
                        service.capture_many((start..end).map(|index| corpus.memory(index)).collect(), None)?;
                    }
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let elapsed = started.elapsed();
    results.into_iter().collect::<Result<()>>()?;
    Ok(elapsed)
}

/// How much of the exact top ten (every vector compared) the store's vector search finds, over
/// the first `--recall-checks` queries.
fn vector_recall(args: &OrgArgs, store: &dyn MemoryStore, checks: &RecallChecks<'_>, embedder: &dyn kenning_core::Embedder, queries: &[String]) -> Result<f64> {
    let Some(model) = checks.model else { return Ok(0.0) };
    let filter = SearchFilter::active();
    let (mut found, mut wanted) = (0, 0);
    for query in queries.iter().take(args.recall_checks) {
        let vector = embedder.embed(&[query.as_str()])?.remove(0);
        let truth: Vec<_> = checks.exact.search_vector(&vector, model, &filter, 10)?.into_iter().map(|hit| hit.id).collect();
        let approximate: Vec<_> = store.search_vector(&vector, model, &filter, 10)?.into_iter().map(|hit| hit.id).collect();
        wanted += truth.len();
        found += truth.iter().filter(|id| approximate.contains(id)).count();
    }
    Ok(if wanted == 0 { 0.0 } else { round(found as f64 / wanted as f64) })
}

/// Every client recalls `client_operations` times, with `capturing` each recall after a
/// capture of a new memory.
fn concurrent(args: &OrgArgs, service: &Arc<MemoryService>, corpus: &Corpus, queries: &[String], capturing: bool) -> Result<ConcurrentFigures> {
    // Memories the shared phases capture come after the loaded ones and never repeat.
    let first_new = args.memories + usize::from(capturing) * args.clients * args.client_operations;
    let started = Instant::now();
    let results: Vec<Result<(Vec<Duration>, Vec<Duration>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..args.clients)
            .map(|client| {
                let service = service.clone();
                scope.spawn(move || -> Result<(Vec<Duration>, Vec<Duration>)> {
                    let mut captures = Vec::with_capacity(args.client_operations);
                    let mut recalls = Vec::with_capacity(args.client_operations);
                    for operation in 0..args.client_operations {
                        if capturing {
                            let input = corpus.memory(first_new + client * args.client_operations + operation);
                            let at = Instant::now();
                            service.capture(input, None)?;
                            captures.push(at.elapsed());
                        }
                        let query = &queries[(client * 7 + operation) % queries.len()];
                        let at = Instant::now();
                        service.recall(request(query))?;
                        recalls.push(at.elapsed());
                    }
                    Ok((captures, recalls))
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let (mut captures, mut recalls) = (Vec::new(), Vec::new());
    for result in results {
        let (client_captures, client_recalls) = result?;
        captures.extend(client_captures);
        recalls.extend(client_recalls);
    }
    Ok(ConcurrentFigures {
        clients: args.clients,
        seconds: round(seconds),
        captures_per_second: round(captures.len() as f64 / seconds),
        recalls_per_second: round(recalls.len() as f64 / seconds),
        capture: Summary::of(&captures),
        recall: Summary::of(&recalls).context("no concurrent recalls")?,
    })
}

fn request(query: &str) -> RecallRequest {
    RecallRequest { query: query.to_owned(), ..RecallRequest::default() }
}

pub fn table(report: &OrgReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "org benchmark: {} memories per store, embedder {}, {} concurrent clients",
        report.memories, report.embedder, report.clients
    );
    let clients = report.clients;
    let _ = writeln!(
        out,
        "{:<9} {:>9} {:>10} {:>8} {:>11} {:>11} {:>9} {:>17} {:>17} {:>14} {:>9}",
        "backend",
        "capture",
        "bulk",
        "index",
        "recall p50",
        "recall p95",
        "vector",
        format!("{clients}x recall p50/p95"),
        format!("{clients}x mixed p50/p95"),
        format!("{clients}x mixed/s"),
        "size"
    );
    let _ = writeln!(
        out,
        "{:<9} {:>9} {:>10} {:>8} {:>11} {:>11} {:>9} {:>17} {:>17} {:>14} {:>9}",
        "", "p50 ms", "mem/s", "s", "ms", "ms", "recall@10", "ms", "ms", "capt+recall", "MiB"
    );
    for backend in &report.backends {
        let optional = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |value| value.to_string());
        let _ = writeln!(
            out,
            "{:<9} {:>9} {:>10} {:>8} {:>11} {:>11} {:>9} {:>17} {:>17} {:>14} {:>9}",
            backend.backend,
            backend.single_capture.p50_ms,
            backend.bulk_capture_per_second,
            optional(backend.index_seconds),
            backend.recall.p50_ms,
            backend.recall.p95_ms,
            optional(backend.vector_recall_at_10),
            format!("{}/{}", backend.concurrent_recall.recall.p50_ms, backend.concurrent_recall.recall.p95_ms),
            format!("{}/{}", backend.concurrent.recall.p50_ms, backend.concurrent.recall.p95_ms),
            format!("{}+{}", backend.concurrent.captures_per_second, backend.concurrent.recalls_per_second),
            backend.store_bytes.map_or_else(|| "-".to_owned(), |bytes| (bytes >> 20).to_string()),
        );
    }
    out
}
