//! The `org` benchmark: the organisation domain on a real PostgreSQL server with pgvector, side
//! by side with the SQLite user domain, in one run over the same synthetic corpus.
//!
//! For each backend, in turn and on its own fresh store (a new PostgreSQL schema; a new SQLite
//! file in a temporary directory):
//!
//! 1. single captures (`MemoryService::capture`, one transaction each), as an agent captures;
//! 2. a bulk load of the rest (`capture_many` in batches), the capture throughput;
//! 3. recalls (one untimed warm-up pass, then a timed pass over the same queries);
//! 4. `--clients` threads sharing the service, each capturing and recalling in turn, as that
//!    many agents (or people) writing one store: the aggregate rate and the latency each saw.
//!
//! Only the calls are timed, never the making of the inputs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_postgres::{PostgresStore, Settings};
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
    /// Concurrent clients in the shared-store phase.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Captures and recalls each client makes in the shared-store phase.
    #[arg(long, default_value_t = 50)]
    client_operations: usize,
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
    pub recall: Summary,
    pub concurrent: ConcurrentFigures,
    pub store_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct ConcurrentFigures {
    pub clients: usize,
    pub seconds: f64,
    pub captures_per_second: f64,
    pub recalls_per_second: f64,
    pub capture: Summary,
    pub recall: Summary,
}

pub fn run(args: &OrgArgs) -> Result<OrgReport> {
    ensure!(args.memories > 0 && args.queries > 0 && args.bulk_batch > 0 && args.clients > 0, "every count must be at least 1");
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let loaded = args.embedder.load()?;
    let corpus = Corpus::new(args.seed);

    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |time| time.subsec_nanos());
    let schema = format!("bench_{}_{nanos}", std::process::id());
    let settings = Settings { schema: schema.clone(), max_connections: args.clients.max(4), ..Settings::new(args.url.clone()) };
    let postgres = Arc::new(PostgresStore::open(&settings)?);
    postgres.check().with_context(|| format!("connecting to {}", postgres.location()))?;
    let dir = tempfile::tempdir().context("creating a temporary directory for the SQLite store")?;
    let sqlite_path = dir.path().join("user.db");
    let sqlite = Arc::new(SqliteStore::open(&sqlite_path)?);

    let mut backends = Vec::new();
    let org = Domain::Org("bench".to_owned());
    backends.push(measure(args, "postgres", org, postgres.clone(), &corpus, loaded.embedder.clone())?);
    backends.push(measure(args, "sqlite", Domain::User, sqlite.clone(), &corpus, loaded.embedder.clone())?);
    if !args.keep_schema {
        postgres.drop_schema().context("dropping the benchmark's schema")?;
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

fn measure(
    args: &OrgArgs,
    backend: &'static str,
    domain: Domain,
    store: Arc<dyn MemoryStore>,
    corpus: &Corpus,
    embedder: Option<Arc<dyn kenning_core::Embedder>>,
) -> Result<BackendFigures> {
    eprintln!("{backend}: loading {} memories", args.memories);
    let service = Arc::new(MemoryService::new(vec![DomainStore { domain, store: store.clone() }], embedder));
    let single_count = args.memories.min(args.single_captures);
    let mut single = Vec::with_capacity(single_count);
    for index in 0..single_count {
        let input = corpus.memory(index);
        let started = Instant::now();
        service.capture(input, None)?;
        single.push(started.elapsed());
    }
    let mut bulk_time = Duration::ZERO;
    for first in (single_count..args.memories).step_by(args.bulk_batch) {
        let end = (first + args.bulk_batch).min(args.memories);
        let batch: Vec<_> = (first..end).map(|index| corpus.memory(index)).collect();
        let started = Instant::now();
        service.capture_many(batch, None)?;
        bulk_time += started.elapsed();
    }
    let bulk_count = args.memories - single_count;

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

    eprintln!("{backend}: {} clients", args.clients);
    let concurrent = concurrent(args, &service, corpus, &queries)?;
    let store_bytes = store.stats()?.size_bytes;
    Ok(BackendFigures {
        backend,
        single_capture: Summary::of(&single).context("no single captures")?,
        bulk_capture_per_second: if bulk_time.is_zero() { 0.0 } else { round(bulk_count as f64 / bulk_time.as_secs_f64()) },
        bulk_seconds: round(bulk_time.as_secs_f64()),
        recall: Summary::of(&recall).context("no recalls")?,
        concurrent,
        store_bytes,
    })
}

/// Every client alternates a capture of a new memory and a recall, `client_operations` times.
fn concurrent(args: &OrgArgs, service: &Arc<MemoryService>, corpus: &Corpus, queries: &[String]) -> Result<ConcurrentFigures> {
    let started = Instant::now();
    let results: Vec<Result<(Vec<Duration>, Vec<Duration>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..args.clients)
            .map(|client| {
                let service = service.clone();
                scope.spawn(move || -> Result<(Vec<Duration>, Vec<Duration>)> {
                    let mut captures = Vec::with_capacity(args.client_operations);
                    let mut recalls = Vec::with_capacity(args.client_operations);
                    for operation in 0..args.client_operations {
                        let index = args.memories + client * args.client_operations + operation;
                        let input = corpus.memory(index);
                        let at = Instant::now();
                        service.capture(input, None)?;
                        captures.push(at.elapsed());
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
        capture: Summary::of(&captures).context("no concurrent captures")?,
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
    let _ = writeln!(
        out,
        "{:<9} {:>14} {:>14} {:>11} {:>11} {:>15} {:>13} {:>13}",
        "backend", "capture p50 ms", "bulk mem/s", "recall p50", "recall p95", "16x capture/s", "16x recall/s", "16x recall p95"
    );
    for backend in &report.backends {
        let _ = writeln!(
            out,
            "{:<9} {:>14} {:>14} {:>11} {:>11} {:>15} {:>13} {:>13}",
            backend.backend,
            backend.single_capture.p50_ms,
            backend.bulk_capture_per_second,
            backend.recall.p50_ms,
            backend.recall.p95_ms,
            backend.concurrent.captures_per_second,
            backend.concurrent.recalls_per_second,
            backend.concurrent.recall.p95_ms
        );
    }
    out
}
