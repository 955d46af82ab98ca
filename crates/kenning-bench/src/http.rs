//! The `http` benchmark: recall throughput of the real `kenning serve --http` under concurrent
//! clients, as a shared service sees it.
//!
//! A fresh SQLite store is loaded with the synthetic corpus (`capture_many` in batches), then
//! the binary serves it over streamable HTTP on loopback, by default with an API key (so every
//! request pays for the key check, the rate limiter and the audit log line, as a service does;
//! the limits are raised so that none is refused). Each client thread opens its own connection
//! and MCP session ([`crate::http_client`]), waits for the others, then sends recalls one after
//! another for the set duration. Reported: recalls per second over all clients, and the
//! latency each recall had as its client saw it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::{DomainStore, MemoryService};
use kenning_sqlite::SqliteStore;
use serde::Serialize;
use serde_json::{Value, json};

use crate::corpus::Corpus;
use crate::embedder::{EmbedderArgs, EmbedderChoice};
use crate::http_client::HttpMcpClient;
use crate::latency::StoreDir;
use crate::report::{Machine, status_kib};
use crate::stats::{Summary, round};

#[derive(Debug, Args)]
pub struct HttpArgs {
    /// How many memories to store.
    #[arg(long)]
    memories: usize,
    /// Concurrent clients, each with its own connection and session.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// How long the clients send recalls, in seconds.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Distinct queries, cycled through by every client from a different starting point.
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Seed of the synthetic corpus and queries.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Memories per `capture_many` call while loading.
    #[arg(long, default_value_t = 1000)]
    bulk_batch: usize,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Serve without API keys (loopback only): no key check, rate limiter or identity.
    #[arg(long)]
    no_auth: bool,
    /// The kenning binary to serve with; relative to the repository root by default.
    #[arg(long, default_value = "target/release/kenning")]
    kenning_bin: PathBuf,
    /// Keep the store in this directory rather than a temporary one. A directory that already
    /// holds a store (`user.db`, left by an earlier run with the same `--memories` and `--seed`,
    /// or by `latency --store`) is not loaded again, so that two builds' servers can be compared
    /// on one store without paying the load twice.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct HttpReport {
    benchmark: &'static str,
    kenning_version: &'static str,
    started_at: String,
    machine: Machine,
    memories: usize,
    seed: u64,
    embedder: &'static str,
    clients: usize,
    authenticated: bool,
    seconds: f64,
    recalls: usize,
    recalls_per_second: f64,
    /// Each recall as its client saw it, from writing the request to reading the answer.
    latency: Summary,
    mean_results: f64,
    /// Lines the server's audit log gained: one per tool call.
    audit_lines: usize,
    server_peak_rss_bytes: Option<u64>,
    load_seconds: f64,
}

pub fn run(args: &HttpArgs) -> Result<HttpReport> {
    ensure!(args.memories > 0 && args.clients > 0 && args.queries > 0 && args.bulk_batch > 0, "--memories, --clients, --queries and --bulk-batch must be at least 1");
    ensure!(args.seconds > 0.0, "--seconds must be positive");
    ensure!(args.embedder.static_model.is_none(), "--static-model applies in process only; the server embeds with its compiled-in model");
    ensure!(
        args.kenning_bin.is_file(),
        "{} does not exist: build it with `cargo build --release -p kenning` or pass --kenning-bin",
        args.kenning_bin.display()
    );
    let binary = args.kenning_bin.canonicalize().with_context(|| format!("resolving {}", args.kenning_bin.display()))?;
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let dir = StoreDir::new(args.store.as_deref())?;
    let db_path = dir.path().join("user.db");
    let load_started = Instant::now();
    if !db_path.exists() {
        load(args, &db_path)?;
    }
    let load_seconds = round(load_started.elapsed().as_secs_f64());

    // The server's own directories (keys, audit log, configuration) are new for every run,
    // also when the store is kept.
    let server_dir = tempfile::tempdir().context("creating a temporary directory for the server")?;
    let server = Server::start(args, &binary, server_dir.path(), &db_path)?;
    let corpus = Corpus::new(args.seed);
    let queries: Arc<Vec<String>> = Arc::new((0..args.queries).map(|index| corpus.query(index, args.memories)).collect());

    // One pass over the queries first, so that the timed part measures a store in use rather
    // than the first touches of the file and the index.
    let mut warm = HttpMcpClient::connect(server.address, server.key.as_deref())?;
    for query in queries.iter() {
        warm.call_tool("memory_recall", json!({"query": query}))?;
    }
    drop(warm);
    let audit_before = count_lines(&server.audit_path);

    let barrier = Arc::new(Barrier::new(args.clients + 1));
    let duration = Duration::from_secs_f64(args.seconds);
    let mut threads = Vec::with_capacity(args.clients);
    let clients = args.clients;
    for client_index in 0..args.clients {
        let (barrier, queries, key, address) = (barrier.clone(), queries.clone(), server.key.clone(), server.address);
        threads.push(std::thread::spawn(move || -> Result<(Vec<Duration>, usize)> {
            let connected = HttpMcpClient::connect(address, key.as_deref());
            barrier.wait();
            let mut client = connected?;
            let deadline = Instant::now() + duration;
            let (mut latencies, mut results) = (Vec::new(), 0);
            let mut next = client_index * queries.len() / clients;
            while Instant::now() < deadline {
                let query = &queries[next % queries.len()];
                next += 1;
                let started = Instant::now();
                let page = client.call_tool("memory_recall", json!({"query": query}))?;
                latencies.push(started.elapsed());
                results += page.get("results").and_then(Value::as_array).map_or(0, Vec::len);
            }
            Ok((latencies, results))
        }));
    }
    barrier.wait();
    let measured = Instant::now();
    let mut latencies = Vec::new();
    let mut results = 0;
    for thread in threads {
        let (client_latencies, client_results) = thread.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        latencies.extend(client_latencies);
        results += client_results;
    }
    let wall = measured.elapsed().as_secs_f64();
    let server_peak_rss_bytes = server.peak_rss_bytes();
    let audit_lines = count_lines(&server.audit_path).saturating_sub(audit_before);
    drop(server);

    let recalls = latencies.len();
    Ok(HttpReport {
        benchmark: "http",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        machine,
        memories: args.memories,
        seed: args.seed,
        embedder: args.embedder.embedder.name(),
        clients: args.clients,
        authenticated: !args.no_auth,
        seconds: round(wall),
        recalls,
        recalls_per_second: round(recalls as f64 / wall),
        latency: Summary::of(&latencies).context("no recall completed in the time given")?,
        mean_results: round(results as f64 / recalls.max(1) as f64),
        audit_lines,
        server_peak_rss_bytes,
        load_seconds,
    })
}

pub fn table(report: &HttpReport) -> String {
    format!(
        "http recall, {} memories, {} clients{}, {} s: {} recalls, {:.0}/s\n  latency p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms; audit lines {}; server peak RSS {} MiB\n",
        report.memories,
        report.clients,
        if report.authenticated { " with an API key" } else { " without keys" },
        report.seconds,
        report.recalls,
        report.recalls_per_second,
        report.latency.p50_ms,
        report.latency.p95_ms,
        report.latency.p99_ms,
        report.latency.max_ms,
        report.audit_lines,
        report.server_peak_rss_bytes.map_or_else(|| "?".to_owned(), |bytes| (bytes / (1024 * 1024)).to_string()),
    )
}

fn load(args: &HttpArgs, db_path: &Path) -> Result<()> {
    let loaded = args.embedder.load()?;
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(db_path)?);
    let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], loaded.embedder);
    let corpus = Corpus::new(args.seed);
    for first in (0..args.memories).step_by(args.bulk_batch) {
        let end = (first + args.bulk_batch).min(args.memories);
        service.capture_many((first..end).map(|index| corpus.memory(index)).collect(), None)?;
        if args.memories >= 100_000 && end % (args.memories / 10).max(1) < args.bulk_batch {
            eprintln!("  loaded {end} of {} memories", args.memories);
        }
    }
    Ok(())
}

fn count_lines(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |bytes| bytes.iter().filter(|&&byte| byte == b'\n').count())
}

/// A running `kenning serve --http` on the benchmark's store.
struct Server {
    child: Child,
    address: std::net::SocketAddr,
    key: Option<String>,
    audit_path: PathBuf,
}

impl Server {
    fn start(args: &HttpArgs, binary: &Path, dir: &Path, db_path: &Path) -> Result<Server> {
        let (data, config, work) = (dir.join("data"), dir.join("config"), dir.join("work"));
        for folder in [&data, &config, &work] {
            std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
        }
        // Limits high enough that no recall of the run is refused: the benchmark measures the
        // cost of checking them, not the limit.
        std::fs::write(config.join("kenning.toml"), "[server.rate_limits]\nqueries = 4000000000\n")?;
        let embedder = args.embedder.embedder;
        // The server runs in another directory, where a relative path would not resolve.
        let model_dir = args.embedder.model_dir.canonicalize().unwrap_or_else(|_| args.embedder.model_dir.clone());
        let command = |arguments: &[&str]| {
            let mut command = Command::new(binary);
            command.args(arguments).current_dir(&work);
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("KENNING_") {
                    command.env_remove(key);
                }
            }
            command
                .env("KENNING_USER_DB", db_path)
                .env("KENNING_DATA_DIR", &data)
                .env("KENNING_CONFIG_DIR", &config)
                .env("KENNING_PROJECT", "false")
                .env("KENNING_EMBEDDER", embedder.name())
                .env("KENNING_LOG", "warn");
            if embedder == EmbedderChoice::Transformer {
                command.env("KENNING_MODEL_DIR", &model_dir);
            }
            command
        };
        let key = if args.no_auth {
            None
        } else {
            let output = command(&["--json", "keys", "create", "--name", "bench"]).output().context("running `kenning keys create`")?;
            ensure!(output.status.success(), "kenning keys create failed: {}", String::from_utf8_lossy(&output.stderr));
            let created: Value = serde_json::from_slice(&output.stdout).context("reading the created key")?;
            Some(created.get("key").and_then(Value::as_str).context("the created key has no `key`")?.to_owned())
        };
        let mut child = command(&["serve", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stderr = child.stderr.take().context("stderr is piped")?;
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
        let mut seen = Vec::new();
        let address = loop {
            let Some(line) = lines.next() else {
                let _ = child.wait();
                bail!("the server exited before announcing its address:\n{}", seen.join("\n"));
            };
            let line = line?;
            if let Some(rest) = line.split("serving MCP at http://").nth(1) {
                break rest.trim_end_matches("/mcp").parse().with_context(|| format!("reading the address in `{line}`"))?;
            }
            seen.push(line);
        };
        // Keep draining the server's log so that it never blocks writing to a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Server { child, address, key, audit_path: data.join("audit.jsonl") })
    }

    fn peak_rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status_kib(&status, "VmHWM:")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
