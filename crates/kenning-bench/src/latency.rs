//! The `latency` benchmark: how fast kenning captures and recalls, in process and through the
//! real binary's MCP stdio transport.
//!
//! A fresh SQLite store in a temporary directory holds the user domain. The phases mirror how a
//! store is used:
//!
//! 1. an agent capturing memories one at a time as it works (`MemoryService::capture`);
//! 2. a bulk load of the rest (`MemoryService::capture_many` in large batches: the engine's
//!    batch capture, which validates, assigns ids, embeds and writes each batch in one
//!    transaction; `kenning import` restores finished records from an export, skipping all
//!    of that, so it would not measure capture);
//! 3. recalls against the loaded store, calling the service directly, after building its index
//!    from the database and writing the index file; then the same recalls through a second
//!    store on the same database, which opens that file instead of building the index;
//! 4. the same recalls through `kenning serve` on the same store file, over newline-delimited
//!    JSON-RPC on its stdin and stdout ([`crate::mcp_client`]);
//! 5. cold starts: spawning `kenning serve` until its `initialize` result arrives, and on to
//!    the result of a first recall; and how long each server takes to exit once its stdin
//!    closes.
//!
//! Only the calls are timed; making the synthetic inputs is not. The corpus is generated batch
//! by batch, so the benchmark's own memory stays small at a million memories.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::{Args, ValueEnum};
use kenning_core::search::FUSION_SCALE_DEPTH;
use kenning_core::{Domain, Embedder, MemoryStore, SearchFilter};
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_sqlite::{Durability, SqliteStore};
use serde_json::{Value, json};

use crate::corpus::Corpus;
use crate::embedder::{EmbedderArgs, EmbedderChoice};
use crate::mcp_client::ServerCommand;
use crate::report::{
    CorpusFigures, IndexFigures, LatencyReport, Machine, McpFigures, RecallFigures, Throughput, VectorSearchFigures, status_kib,
};
use crate::stats::{Summary, round};

#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// How many memories to store.
    #[arg(long)]
    memories: usize,
    /// Seed of the synthetic corpus and queries; the same seed gives the same workload.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// How many recall queries to time, in process and again over MCP (each after one untimed
    /// warm-up pass over the same queries).
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// How many of those queries to time again, in process and over MCP, each after the caller
    /// has been idle for `--idle-ms`, as an agent's recalls come seconds apart; 0 skips them.
    #[arg(long, default_value_t = 100)]
    idle_queries: usize,
    /// How long the caller waits, untimed, before each of the `--idle-queries` recalls.
    #[arg(long, default_value_t = 100)]
    idle_ms: u64,
    /// How many memories are captured one at a time before the bulk phase loads the rest. Each
    /// single capture is its own transaction and fsync, so a large store loads faster in bulk,
    /// and a couple of thousand samples already give a stable p95.
    #[arg(long, default_value_t = 2000)]
    single_captures: usize,
    /// Memories per `capture_many` call in the bulk phase.
    #[arg(long, default_value_t = 1000)]
    bulk_batch: usize,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// What an acknowledged capture survives, as `storage.durability` in the configuration:
    /// `power-loss` flushes the disk on every commit, `process-crash` only at checkpoints.
    #[arg(long, value_enum, default_value_t = DurabilityChoice::PowerLoss)]
    durability: DurabilityChoice,
    /// The kenning binary whose MCP stdio server is measured; the default is relative to the
    /// repository root, after `cargo build --release -p kenning`.
    #[arg(long, default_value = "target/release/kenning")]
    kenning_bin: PathBuf,
    /// How many times to spawn the server to measure cold start.
    #[arg(long, default_value_t = 20)]
    cold_starts: usize,
    /// Measure in process only, without the kenning binary.
    #[arg(long)]
    skip_mcp: bool,
    /// Keep the store in this directory rather than a temporary one. A directory that already
    /// holds a store (`user.db`, left by an earlier run with the same `--memories` and `--seed`)
    /// is not loaded again: the capture phases are skipped and recall is measured on it, so
    /// that two builds' recall can be compared on one store without paying the load twice.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

/// [`Durability`] as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityChoice {
    PowerLoss,
    ProcessCrash,
}

impl DurabilityChoice {
    pub fn name(self) -> &'static str {
        match self {
            DurabilityChoice::PowerLoss => "power-loss",
            DurabilityChoice::ProcessCrash => "process-crash",
        }
    }
}

impl From<DurabilityChoice> for Durability {
    fn from(choice: DurabilityChoice) -> Durability {
        match choice {
            DurabilityChoice::PowerLoss => Durability::PowerLoss,
            DurabilityChoice::ProcessCrash => Durability::ProcessCrash,
        }
    }
}

pub fn run(args: &LatencyArgs) -> Result<LatencyReport> {
    ensure!(args.memories > 0, "--memories must be at least 1");
    ensure!(args.queries > 0, "--queries must be at least 1");
    ensure!(args.bulk_batch > 0, "--bulk-batch must be at least 1");
    ensure!(args.skip_mcp || args.cold_starts > 0, "--cold-starts must be at least 1 (or pass --skip-mcp)");
    if !args.skip_mcp {
        ensure!(
            args.embedder.static_model.is_none(),
            "--static-model applies in process only (the server embeds with its compiled-in model): add --skip-mcp"
        );
        // Failing after loading a million memories for want of a binary would waste the load.
        ensure!(
            args.kenning_bin.is_file(),
            "{} does not exist: build it with `cargo build --release -p kenning`, pass --kenning-bin, or --skip-mcp",
            args.kenning_bin.display()
        );
    }
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let loaded = args.embedder.load()?;

    let dir = StoreDir::new(args.store.as_deref())?;
    let db_path = dir.path().join("user.db");
    let reused = db_path.exists();
    let sqlite = Arc::new(SqliteStore::open_with(&db_path, args.durability.into())?);
    if reused {
        // The index is built from the database below, as in a run that loads the store.
        let index = sqlite.index_path();
        if index.exists() {
            std::fs::remove_file(&index).with_context(|| format!("removing {}", index.display()))?;
        }
    }
    let store: Arc<dyn MemoryStore> = sqlite.clone();
    let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store: store.clone() }], loaded.embedder.clone());
    let corpus = Corpus::new(args.seed);
    let mut load = Load::default();

    let single_count = if reused { 0 } else { args.memories.min(args.single_captures) };
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
    let mut progress = Progress::new(args.memories);
    let bulk_end = if reused { 0 } else { args.memories };
    for first in (single_count..bulk_end).step_by(args.bulk_batch) {
        let end = (first + args.bulk_batch).min(args.memories);
        let batch: Vec<_> = (first..end).map(|index| corpus.memory(index)).collect();
        load.count(&batch);
        let started = Instant::now();
        let outcomes = service.capture_many(batch, None)?;
        bulk.push(started.elapsed());
        load.duplicates += outcomes.iter().filter(|outcome| !outcome.created).count();
        progress.report(end);
    }
    let store_bytes = store_bytes(&db_path);

    let queries: Vec<String> = (0..args.queries).map(|index| corpus.query(index, args.memories)).collect();
    // The index is built from the database here, as a process finding no index file does, and
    // its file written before anything is timed, so the writer does not share the CPU with them.
    let started = Instant::now();
    service.warm_up()?;
    let index_build = started.elapsed();
    let started = Instant::now();
    sqlite.persist_index()?;
    let index_write = started.elapsed();
    // The warm-up pass fills SQLite's page cache and the OS cache, so the timed pass measures a
    // store in use rather than the first touches of a freshly written file.
    for query in &queries {
        service.recall(recall_request(query))?;
    }
    // Each recall is timed as the caller sees it. Recording the access on the memories it
    // returns is queued for the engine's background writer, whose writes (a few a second) share
    // the machine with the recalls and so show in the figures without being waited on.
    let mut recall = Vec::with_capacity(queries.len());
    let mut counts = Vec::with_capacity(queries.len());
    for query in &queries {
        let request = recall_request(query);
        let started = Instant::now();
        let page = service.recall(request)?;
        recall.push(started.elapsed());
        counts.push(page.results.len());
    }
    let recall_after_idle = after_idle(args, &queries, |query| Ok(service.recall(recall_request(query))?.results.len()))?;
    let index = measure_index_file(args, &sqlite, &loaded.embedder, &queries, index_build, index_write, &recall)?;
    let peak_rss_bytes = std::fs::read_to_string("/proc/self/status").ok().and_then(|text| status_kib(&text, "VmHWM:"));
    let vector_search = match &loaded.embedder {
        Some(embedder) => Some(vector_search_accuracy(&*store, &**embedder, &queries)?),
        None => None,
    };

    let mcp = if args.skip_mcp {
        None
    } else {
        let server = ServerCommand {
            // The server runs in another directory, where a relative path would not resolve.
            binary: args.kenning_bin.canonicalize().with_context(|| format!("resolving {}", args.kenning_bin.display()))?,
            user_db: db_path.clone(),
            config_dir: empty_dir(dir.path(), "config")?,
            work_dir: empty_dir(dir.path(), "work")?,
            embedder: args.embedder.embedder.name(),
            durability: args.durability.name(),
            model_dir: (args.embedder.embedder == EmbedderChoice::Transformer).then(|| args.embedder.model_dir.clone()),
            log: dir.path().join("server.log"),
        };
        Some(measure_mcp(args, &server, &queries)?)
    };

    Ok(LatencyReport {
        benchmark: "latency",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        machine,
        memories: args.memories,
        seed: args.seed,
        vector_search,
        durability: args.durability.name(),
        queries: args.queries,
        embedder: args.embedder.embedder.name(),
        model: loaded.model,
        model_load_ms: loaded.load_ms,
        corpus: CorpusFigures {
            mean_content_bytes: round(load.content_bytes as f64 / args.memories as f64),
            duplicates: load.duplicates,
        },
        single_capture: throughput("capture", single_count, 1, &single),
        bulk_capture: throughput("capture_many", bulk_end.saturating_sub(single_count), args.bulk_batch, &bulk),
        recall: recall_figures(&recall, &counts),
        recall_after_idle,
        idle_ms: args.idle_ms,
        index,
        mcp,
        store_bytes,
        peak_rss_bytes,
    })
}

/// The index file: how long building the index from the database and writing its file took,
/// its size, how long a second store on the same database takes to open it, and recall on the
/// index opened from the file against recall on the index built in memory (`in_memory`).
fn measure_index_file(
    args: &LatencyArgs,
    sqlite: &SqliteStore,
    embedder: &Option<Arc<dyn Embedder>>,
    queries: &[String],
    build: Duration,
    write: Duration,
    in_memory: &[Duration],
) -> Result<IndexFigures> {
    let file_bytes = std::fs::metadata(sqlite.index_path()).map(|metadata| metadata.len()).ok();
    let reopened: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(sqlite.path(), args.durability.into())?);
    let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store: reopened }], embedder.clone());
    let started = Instant::now();
    service.warm_up()?;
    let open = started.elapsed();
    for query in queries {
        service.recall(recall_request(query))?;
    }
    let mut recall = Vec::with_capacity(queries.len());
    let mut counts = Vec::with_capacity(queries.len());
    for query in queries {
        let request = recall_request(query);
        let started = Instant::now();
        let page = service.recall(request)?;
        recall.push(started.elapsed());
        counts.push(page.results.len());
    }
    let recall = recall_figures(&recall, &counts);
    let in_memory = Summary::of(in_memory).expect("at least one query");
    Ok(IndexFigures {
        build_ms: round(build.as_secs_f64() * 1000.0),
        write_ms: round(write.as_secs_f64() * 1000.0),
        file_bytes,
        open_ms: round(open.as_secs_f64() * 1000.0),
        recall_p50_ratio: round(recall.latency.p50_ms / in_memory.p50_ms),
        recall,
    })
}

/// Recall through the real server's stdio transport, then cold starts.
fn measure_mcp(args: &LatencyArgs, command: &ServerCommand, queries: &[String]) -> Result<McpFigures> {
    let arguments = |query: &str| json!({"query": query});
    let (mut server, _, _) = command.start()?;
    for query in queries {
        server.call_tool("memory_recall", arguments(query))?;
    }
    let mut recall = Vec::with_capacity(queries.len());
    let mut counts = Vec::with_capacity(queries.len());
    for query in queries {
        let arguments = arguments(query);
        let started = Instant::now();
        let result = server.call_tool("memory_recall", arguments)?;
        recall.push(started.elapsed());
        counts.push(result.get("results").and_then(Value::as_array).map_or(0, Vec::len));
    }
    let recall_after_idle = after_idle(args, queries, |query| {
        let result = server.call_tool("memory_recall", arguments(query))?;
        Ok(result.get("results").and_then(Value::as_array).map_or(0, Vec::len))
    })?;
    let server_peak_rss_bytes = server.status_bytes("VmHWM:");
    let server_private_rss_bytes = server.status_bytes("RssAnon:");
    let server_mapped_rss_bytes = server.status_bytes("RssFile:");
    let mut exits = vec![server.shut_down()?];

    // Each fresh server answers one recall, as an agent's first question of a session would:
    // a server that defers work past the handshake pays for it there.
    let (mut cold_starts, mut first_recalls) = (Vec::new(), Vec::new());
    for index in 0..args.cold_starts {
        let (mut server, spawned, cold_start) = command.start()?;
        cold_starts.push(cold_start);
        server.call_tool("memory_recall", arguments(&queries[index % queries.len()]))?;
        first_recalls.push(spawned.elapsed());
        exits.push(server.shut_down()?);
    }
    Ok(McpFigures {
        kenning_bin: command.binary.display().to_string(),
        transport: "stdio",
        recall: recall_figures(&recall, &counts),
        recall_after_idle,
        cold_start: Summary::of(&cold_starts).expect("at least one cold start"),
        first_recall: Summary::of(&first_recalls).expect("at least one cold start"),
        exit: Summary::of(&exits).expect("at least one server"),
        server_peak_rss_bytes,
        server_private_rss_bytes,
        server_mapped_rss_bytes,
    })
}

/// The first `--idle-queries` of `queries` recalled by `recall` (which answers how many results
/// it returned), each timed after the caller has slept `--idle-ms`: by then the cores may have
/// gone to sleep, as between an agent's recalls, which a loop of recalls back to back never
/// shows. `None` when no idle queries are asked for.
fn after_idle(args: &LatencyArgs, queries: &[String], mut recall: impl FnMut(&str) -> Result<usize>) -> Result<Option<RecallFigures>> {
    let idle = Duration::from_millis(args.idle_ms);
    let (mut latencies, mut counts) = (Vec::new(), Vec::new());
    for query in queries.iter().take(args.idle_queries) {
        std::thread::sleep(idle);
        let started = Instant::now();
        counts.push(recall(query)?);
        latencies.push(started.elapsed());
    }
    Ok((!latencies.is_empty()).then(|| recall_figures(&latencies, &counts)))
}

/// A recall as an agent usually sends it: just the query, with the default limit and budget.
fn recall_request(query: &str) -> RecallRequest {
    RecallRequest { query: query.to_owned(), ..RecallRequest::default() }
}

fn recall_figures(latencies: &[Duration], result_counts: &[usize]) -> RecallFigures {
    RecallFigures {
        limit: kenning_engine::recall::DEFAULT_RECALL_LIMIT,
        mean_results: round(result_counts.iter().sum::<usize>() as f64 / result_counts.len() as f64),
        empty_results: result_counts.iter().filter(|&&count| count == 0).count(),
        latency: Summary::of(latencies).expect("at least one query"),
    }
}

fn empty_dir(parent: &Path, name: &str) -> Result<PathBuf> {
    let path = parent.join(name);
    if path.is_dir() {
        std::fs::remove_dir_all(&path).with_context(|| format!("emptying {}", path.display()))?;
    }
    std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(path)
}

/// Where the store lives: a temporary directory removed at the end, or one the caller keeps.
pub(crate) enum StoreDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl StoreDir {
    pub(crate) fn new(kept: Option<&Path>) -> Result<StoreDir> {
        match kept {
            Some(path) => {
                std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
                Ok(StoreDir::Kept(path.to_owned()))
            }
            None => Ok(StoreDir::Temporary(tempfile::tempdir().context("creating a temporary directory for the store")?)),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            StoreDir::Temporary(dir) => dir.path(),
            StoreDir::Kept(path) => path,
        }
    }
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

/// A line on stderr at every tenth of a large load, so a long run shows it is alive.
struct Progress {
    total: usize,
    next: usize,
    started: Instant,
}

impl Progress {
    const MIN_TOTAL: usize = 100_000;

    fn new(total: usize) -> Progress {
        Progress { total, next: total / 10, started: Instant::now() }
    }

    fn report(&mut self, done: usize) {
        if self.total < Self::MIN_TOTAL || done < self.next {
            return;
        }
        eprintln!("  loaded {done} of {} memories ({:.0} s)", self.total, self.started.elapsed().as_secs_f64());
        let step = self.total / 10;
        self.next = (done / step + 1) * step;
    }
}

fn throughput(method: &'static str, memories: usize, batch_size: usize, calls: &[Duration]) -> Option<Throughput> {
    let call_latency = Summary::of(calls)?;
    let seconds: f64 = calls.iter().map(Duration::as_secs_f64).sum();
    Some(Throughput {
        method,
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

/// How many of each query's exact ten nearest neighbours are among the first ten the store's
/// vector search returns when asked as recall's vector leg asks (recall@10 of the vector leg
/// against exact search), and how far below the exact tenth the returned ones fall. The store
/// may search approximately and ranks by 8-bit vectors; the exact answer here is a brute-force
/// scan of every stored vector in `f32`, read back through `export` in one pass for all queries.
fn vector_search_accuracy(store: &dyn MemoryStore, embedder: &dyn Embedder, queries: &[String]) -> Result<VectorSearchFigures> {
    const K: usize = 10;
    const EXPORT_PAGE: usize = 5_000;
    let started = Instant::now();
    let texts: Vec<&str> = queries.iter().map(String::as_str).collect();
    // A query with no word the model knows embeds to zero and has no nearest neighbours.
    let vectors: Vec<Vec<f32>> =
        embedder.embed(&texts).context("embedding the queries")?.into_iter().filter(|vector| vector.iter().any(|value| *value != 0.0)).collect();
    let model = embedder.model_id();
    let mut returned: Vec<HashMap<String, f32>> = Vec::with_capacity(vectors.len());
    for query in &vectors {
        // Asked for as many as recall's vector leg asks for, of which the first ten count.
        let hits = store.search_vector(query, model, &SearchFilter::active(), FUSION_SCALE_DEPTH)?;
        returned.push(hits.into_iter().take(K).map(|hit| (hit.id.as_str().to_owned(), f32::NAN)).collect());
    }
    let mut exact: Vec<Vec<(f32, String)>> = vec![Vec::with_capacity(K + 1); vectors.len()];
    let mut offset = 0;
    loop {
        let page = store.export(offset, EXPORT_PAGE)?;
        for record in &page {
            let Some(embedding) = record.embedding.as_ref().filter(|embedding| embedding.model == model) else { continue };
            let id = record.memory.id.as_str();
            for ((best, query), returned) in exact.iter_mut().zip(&vectors).zip(&mut returned) {
                let score: f32 = query.iter().zip(&embedding.vector).map(|(a, b)| a * b).sum();
                if let Some(slot) = returned.get_mut(id) {
                    *slot = score;
                }
                if best.len() < K || score > best[K - 1].0 {
                    let at = best.partition_point(|(other, _)| *other >= score);
                    best.insert(at, (score, id.to_owned()));
                    best.truncate(K);
                }
            }
        }
        if page.len() < EXPORT_PAGE {
            break;
        }
        offset += page.len();
    }
    let (mut found, mut possible, mut shortfall) = (0, 0, 0f32);
    for (best, returned) in exact.iter().zip(&returned) {
        possible += best.len();
        found += best.iter().filter(|(_, id)| returned.contains_key(id)).count();
        if let Some((tenth, _)) = best.last() {
            shortfall = returned.values().fold(shortfall, |worst, score| worst.max(tenth - score));
        }
    }
    Ok(VectorSearchFigures {
        queries: vectors.len(),
        recall_at_10: if possible == 0 { 1.0 } else { round(found as f64 / possible as f64 * 10_000.0) / 10_000.0 },
        worst_shortfall: round(f64::from(shortfall) * 10_000.0) / 10_000.0,
        seconds: round(started.elapsed().as_secs_f64()),
    })
}
