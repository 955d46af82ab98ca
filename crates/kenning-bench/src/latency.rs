//! The `latency` benchmark: how fast the memory service captures and recalls, in process.
//!
//! A fresh SQLite store in a temporary directory holds the user domain, and the service is
//! called directly, the way the MCP server calls it, minus the transport. The phases mirror how
//! a store is used: an agent capturing memories one at a time as it works, an import loading
//! many at once, and recalls against the loaded store. Only the service calls are timed; making
//! the synthetic inputs is not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::{CorpusFigures, LatencyReport, Machine, RecallFigures, Throughput, status_kib};
use crate::stats::{Summary, round};

/// Single captures stop here: each is its own transaction and fsync, so a larger store is
/// loaded faster in bulk, and a couple of thousand samples already give a stable p95.
const MAX_SINGLE_CAPTURES: usize = 2000;
/// The bulk phase's batch: what `kenning import` style loading would hand the service at once.
const BULK_BATCH: usize = 1000;

#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// How many memories to store.
    #[arg(long)]
    memories: usize,
    /// Seed of the synthetic corpus and queries; the same seed gives the same workload.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// How many recall queries to time (after one untimed warm-up pass over the same queries).
    #[arg(long, default_value_t = 200)]
    queries: usize,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

pub fn run(args: &LatencyArgs) -> Result<LatencyReport> {
    ensure!(args.memories > 0, "--memories must be at least 1");
    ensure!(args.queries > 0, "--queries must be at least 1");
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let loaded = args.embedder.load()?;

    let dir = tempfile::tempdir().context("creating a temporary directory for the store")?;
    let db_path = dir.path().join("user.db");
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&db_path)?);
    let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], loaded.embedder);
    let corpus = Corpus::new(args.seed);
    let mut load = Load::default();

    let single_count = args.memories.min(MAX_SINGLE_CAPTURES);
    let mut single = Vec::with_capacity(single_count);
    for index in 0..single_count {
        let input = corpus.memory(index);
        load.count(std::slice::from_ref(&input));
        let started = Instant::now();
        let outcome = service.capture(input, None)?;
        single.push(started.elapsed());
        load.duplicates += usize::from(!outcome.created);
    }

    let mut bulk = Vec::new();
    for first in (single_count..args.memories).step_by(BULK_BATCH) {
        let batch: Vec<_> = (first..(first + BULK_BATCH).min(args.memories)).map(|index| corpus.memory(index)).collect();
        load.count(&batch);
        let started = Instant::now();
        let outcomes = service.capture_many(batch, None)?;
        bulk.push(started.elapsed());
        load.duplicates += outcomes.iter().filter(|outcome| !outcome.created).count();
    }
    let store_bytes = store_bytes(&db_path);

    let queries: Vec<String> = (0..args.queries).map(|index| corpus.query(index, args.memories)).collect();
    // The warm-up pass fills SQLite's page cache and the OS cache, so the timed pass measures a
    // store in use rather than the first touches of a freshly written file.
    for query in &queries {
        service.recall(recall_request(query))?;
    }
    // Each recall also records an access on the memories it returns, a write transaction with
    // an fsync. An agent waits for that too, so it is part of the timed call.
    let mut recall = Vec::with_capacity(queries.len());
    let (mut results, mut empty_results) = (0, 0);
    for query in &queries {
        let request = recall_request(query);
        let started = Instant::now();
        let page = service.recall(request)?;
        recall.push(started.elapsed());
        results += page.results.len();
        empty_results += usize::from(page.results.is_empty());
    }

    Ok(LatencyReport {
        benchmark: "latency",
        transport: "in-process",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        machine: Machine::detect(),
        memories: args.memories,
        seed: args.seed,
        queries: args.queries,
        embedder: args.embedder.embedder.name(),
        model: loaded.model,
        model_load_ms: loaded.load_ms,
        corpus: CorpusFigures {
            mean_content_bytes: round(load.content_bytes as f64 / args.memories as f64),
            duplicates: load.duplicates,
        },
        single_capture: throughput(single_count, 1, &single),
        bulk_capture: throughput(args.memories - single_count, BULK_BATCH, &bulk),
        recall: RecallFigures {
            limit: kenning_engine::recall::DEFAULT_RECALL_LIMIT,
            mean_results: round(results as f64 / queries.len() as f64),
            empty_results,
            latency: Summary::of(&recall).expect("at least one query"),
        },
        store_bytes,
        peak_rss_bytes: std::fs::read_to_string("/proc/self/status").ok().and_then(|text| status_kib(&text, "VmHWM:")),
    })
}

/// A recall as an agent usually sends it: just the query, with the default limit and budget.
fn recall_request(query: &str) -> RecallRequest {
    RecallRequest { query: query.to_owned(), ..RecallRequest::default() }
}

/// Running totals of what was handed to the service.
#[derive(Default)]
struct Load {
    content_bytes: usize,
    duplicates: usize,
}

impl Load {
    fn count(&mut self, inputs: &[kenning_core::CaptureInput]) {
        self.content_bytes += inputs.iter().map(|input| input.content.len()).sum::<usize>();
    }
}

fn throughput(memories: usize, batch_size: usize, calls: &[Duration]) -> Option<Throughput> {
    let call_latency = Summary::of(calls)?;
    let seconds: f64 = calls.iter().map(Duration::as_secs_f64).sum();
    Some(Throughput {
        memories,
        batch_size,
        seconds: round(seconds),
        memories_per_second: round(memories as f64 / seconds),
        call_latency,
    })
}

/// The store's files as they are. The write-ahead log is counted because it holds commits not
/// yet checkpointed into the database; a checkpoint is not reachable through `MemoryStore`.
fn store_bytes(db_path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut path = db_path.as_os_str().to_owned();
            path.push(suffix);
            std::fs::metadata(path).map_or(0, |meta| meta.len())
        })
        .sum()
}
