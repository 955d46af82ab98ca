//! Hook speed: how long `kenning hook EVENT` takes from spawn to its answer (the process has
//! written its output and exited), on a store of the synthetic corpus. A hook is a process
//! Claude Code starts for every session, prompt and tool call, so this is the delay it adds.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::{DomainStore, MemoryService};
use kenning_sqlite::SqliteStore;
use serde::Serialize;
use serde_json::json;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::stats::Summary;

#[derive(Debug, Args)]
pub struct HooksArgs {
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Memories in the store the hooks read.
    #[arg(long, default_value_t = 10_000)]
    pub memories: usize,
    /// Spawns timed per event, after one untimed warm-up spawn.
    #[arg(long, default_value_t = 40)]
    pub runs: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The kenning binary to time.
    #[arg(long, default_value = "target/release/kenning")]
    pub kenning_bin: PathBuf,
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct HooksReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub machine: Machine,
    pub memories: usize,
    pub embedder: &'static str,
    pub events: Vec<EventFigures>,
}

#[derive(Debug, Serialize)]
pub struct EventFigures {
    pub event: &'static str,
    /// Spawn to exit, the answer written.
    pub spawn_to_output: Option<Summary>,
    /// How many of the timed runs printed context (the others had nothing above the floor).
    pub answered: usize,
}

/// The hook inputs timed: a session start, a prompt about a topic of the corpus, a failed test run.
fn inputs(corpus: &Corpus, memories: usize) -> Vec<(&'static str, serde_json::Value)> {
    let session = "0f7d1c2e-5a4b-4c3d-8e9f-1a2b3c4d5e6f";
    vec![
        ("session-start", json!({"session_id": session, "hook_event_name": "SessionStart", "source": "startup"})),
        ("user-prompt", json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": corpus.query(7, memories)})),
        (
            "post-tool",
            json!({"session_id": session, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                "tool_input": {"command": "cargo test -p billing"},
                "tool_response": {"stdout": format!("test result: FAILED. 3 passed; 1 failed\n{}", corpus.query(11, memories)), "stderr": "error: test failed"}}),
        ),
    ]
}

pub fn run(args: &HooksArgs) -> Result<HooksReport> {
    ensure!(args.runs > 0, "--runs must be at least 1");
    ensure!(
        args.kenning_bin.is_file(),
        "{} does not exist: build it with `cargo build --release -p kenning` or pass --kenning-bin",
        args.kenning_bin.display()
    );
    let binary = args.kenning_bin.canonicalize().with_context(|| format!("resolving {}", args.kenning_bin.display()))?;
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let loaded = args.embedder.load()?;
    let dir = tempfile::tempdir().context("creating a temporary directory for the store")?;
    let db_path = dir.path().join("user.db");
    let corpus = Corpus::new(args.seed);
    {
        let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&db_path)?);
        let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], loaded.embedder.clone());
        for first in (0..args.memories).step_by(1000) {
            let batch: Vec<_> = (first..(first + 1000).min(args.memories)).map(|index| corpus.memory(index)).collect();
            service.capture_many(batch, None)?;
        }
    }
    let work = dir.path().join("work");
    let config = dir.path().join("config");
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&config)?;
    let mut events = Vec::new();
    for (event, input) in inputs(&corpus, args.memories) {
        let payload = input.to_string();
        let mut samples = Vec::with_capacity(args.runs);
        let mut answered = 0;
        for run in 0..=args.runs {
            let mut command = Command::new(&binary);
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("KENNING_") {
                    command.env_remove(key);
                }
            }
            command
                .args(["hook", event])
                .current_dir(&work)
                .env("KENNING_USER_DB", &db_path)
                .env("KENNING_CONFIG_DIR", &config)
                .env("KENNING_DATA_DIR", &work)
                .env("KENNING_PROJECT", "false")
                .env("KENNING_EMBEDDER", args.embedder.embedder.name())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let started = Instant::now();
            let mut child = command.spawn().with_context(|| format!("starting {}", binary.display()))?;
            child.stdin.take().context("no stdin")?.write_all(payload.as_bytes())?;
            let output = child.wait_with_output()?;
            let elapsed: Duration = started.elapsed();
            ensure!(output.status.success(), "kenning hook {event} exited with {}", output.status);
            if run > 0 {
                samples.push(elapsed);
                answered += usize::from(!output.stdout.is_empty());
            }
        }
        events.push(EventFigures { event, spawn_to_output: Summary::of(&samples), answered });
    }
    let log = work.join("hooks.log");
    ensure!(!log.exists(), "a hook failed: {}", std::fs::read_to_string(&log).unwrap_or_default());
    Ok(HooksReport {
        benchmark: "hooks",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        machine,
        memories: args.memories,
        embedder: args.embedder.embedder.name(),
        events,
    })
}

pub fn table(report: &HooksReport) -> String {
    let mut text = format!("hook spawn to output at {} memories ({} embedder)\n", report.memories, report.embedder);
    text.push_str("event          p50 ms   p95 ms   answered\n");
    for event in &report.events {
        let (p50, p95) = event.spawn_to_output.as_ref().map_or((0.0, 0.0), |summary| (summary.p50_ms, summary.p95_ms));
        let runs = event.spawn_to_output.as_ref().map_or(0, |summary| summary.samples);
        text.push_str(&format!("{:<14} {p50:>7.2}  {p95:>7.2}   {}/{runs}\n", event.event, event.answered));
    }
    text
}
