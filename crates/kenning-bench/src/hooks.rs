//! Hook speed: how long `kenning hook EVENT` takes from spawn to its answer (the process has
//! written its output and exited), in the normal case: inside a git repository whose project
//! domain (git notes, indexed beside them) and the user domain each hold `--memories` memories
//! of the synthetic corpus. A hook is a process Claude Code starts for every session, prompt,
//! failed command and turn, so this is the delay it adds.
//!
//! Every event kenning answers is timed with the input Claude Code sends: a session start, a
//! prompt about a topic of the corpus, a failed test run (PostToolUseFailure) and a command that
//! succeeded (PostToolUse), the stop of a turn whose findings are already stored (as at every
//! stop after the first reading), and a compaction and a session end that read a long
//! transcript written the way the client writes it (conversation lines among larger bookkeeping
//! entries). Timing starts after one spawn of every event, so that the stores hold what the
//! session's earlier stops and compaction wrote, as they do for every hook after a session's
//! first turn. Each timed failure is a new one (another test, other output), as in a session
//! where every failure is news: a repeated one would be found stored and skip the capture.
//!
//! Every event is timed twice: alone, as when no server runs for the session (a client without
//! kenning's MCP server, or before it has started), and beside the session's server, which an
//! agent starts on stdio and which answers the quick events over its socket.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::{DomainStore, MemoryService};
use kenning_git::GitNotesStore;
use kenning_sqlite::{Durability, SqliteStore};
use serde::Serialize;
use serde_json::{Value, json};

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::notes::git;
use crate::report::Machine;
use crate::stats::Summary;

/// The project the repository's `origin` remote names.
const PROJECT: &str = "hook-bench";
/// Turns in the long transcript a compaction and a session end read.
const TRANSCRIPT_TURNS: usize = 120;

#[derive(Debug, Args)]
pub struct HooksArgs {
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Memories in each of the project and the user domain.
    #[arg(long, default_value_t = 10_000)]
    pub memories: usize,
    /// Spawns timed per event, after one untimed spawn of every event.
    #[arg(long, default_value_t = 40)]
    pub runs: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The kenning binary to time.
    #[arg(long, default_value = "target/release/kenning")]
    pub kenning_bin: PathBuf,
    #[arg(long)]
    pub json_out: Option<PathBuf>,
    /// Build the repository and stores in this empty folder and keep them, to run a hook by hand
    /// under a profiler (the hook's environment is written to `hook.env` there).
    #[arg(long)]
    pub keep_in: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct HooksReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub machine: Machine,
    /// Memories in each of the project and the user domain.
    pub memories_per_domain: usize,
    pub embedder: &'static str,
    /// The size of the transcript pre-compact and session-end read.
    pub transcript_bytes: u64,
    pub events: Vec<EventFigures>,
}

#[derive(Debug, Serialize)]
pub struct EventFigures {
    pub event: &'static str,
    /// Spawn to exit, the answer written, with no server running.
    pub spawn_to_output: Option<Summary>,
    /// The same beside the session's `kenning serve`.
    pub beside_server: Option<Summary>,
    /// How many of the timed runs printed context (the others had nothing above the floor),
    /// alone and beside the server.
    pub answered: [usize; 2],
}

/// The hook inputs timed, each as Claude Code sends it; `run` numbers the spawn, so that each
/// failure is a new one.
fn inputs(corpus: &Corpus, memories: usize, repo: &Path, transcript: &Path, run: usize) -> Vec<(&'static str, Value)> {
    let session = "0f7d1c2e-5a4b-4c3d-8e9f-1a2b3c4d5e6f";
    let base = |event: &str| {
        json!({"session_id": session, "transcript_path": transcript, "cwd": repo, "hook_event_name": event, "permission_mode": "default"})
    };
    let with = |event: &str, fields: Value| {
        let mut input = base(event);
        input.as_object_mut().expect("an object").extend(fields.as_object().expect("an object").clone());
        input
    };
    let failure = format!(
        "Exit code 101\nrunning 4 tests\ntest billing::webhook_{run} ... FAILED\n{}\ntest result: FAILED. 3 passed; 1 failed",
        corpus.query(11 + run, memories)
    );
    vec![
        ("session-start", with("SessionStart", json!({"source": "startup"}))),
        ("user-prompt", with("UserPromptSubmit", json!({"prompt": corpus.query(7, memories)}))),
        (
            "post-tool-failure",
            with("PostToolUseFailure", json!({"tool_name": "Bash", "tool_input": {"command": "cargo test -p billing"}, "error": failure, "is_interrupt": false})),
        ),
        (
            "post-tool",
            with("PostToolUse", json!({"tool_name": "Bash", "tool_input": {"command": "git log --oneline -5"},
                "tool_response": {"stdout": "a1b2c3 Fix: handle Error: in the parser", "stderr": "", "interrupted": false}})),
        ),
        ("stop", with("Stop", json!({"stop_hook_active": false, "last_assistant_message": last_answer(TRANSCRIPT_TURNS - 1)}))),
        ("pre-compact", with("PreCompact", json!({"trigger": "auto", "custom_instructions": null}))),
        ("session-end", with("SessionEnd", json!({"reason": "other"}))),
    ]
}

/// The final answer of turn `turn` of the synthetic session: one finding and some chatter.
fn last_answer(turn: usize) -> String {
    format!(
        "I ran the suite again and looked at the logs. The root cause of failure {turn} was a stale cache entry in shard {}. \
         I'll keep an eye on it.",
        turn % 17
    )
}

/// A long session's transcript as Claude Code writes it: each turn a prompt, an assistant
/// message with a tool call, the tool's result, the final answer, and the client's bookkeeping
/// (request snapshots of a few kilobytes) between them.
fn write_transcript(path: &Path, corpus: &Corpus, memories: usize) -> Result<u64> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let snapshot = "x".repeat(6_000);
    for turn in 0..TRANSCRIPT_TURNS {
        let lines = [
            json!({"type": "user", "isSidechain": false, "message": {"role": "user", "content": corpus.query(turn, memories)}}),
            json!({"type": "attachment", "attachment": {"type": "prompt_snapshot", "systemPrompt": [snapshot]}}),
            json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant", "content": [
                {"type": "text", "text": "Let me run the tests first."},
                {"type": "tool_use", "id": format!("toolu_{turn}"), "name": "Bash", "input": {"command": "cargo test"}}]}}),
            json!({"type": "user", "isSidechain": false, "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{turn}"), "content": "test result: ok. 40 passed", "is_error": false}]}}),
            json!({"type": "api-request-blob", "message": {"role": "system", "content": [snapshot]}}),
            json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant", "content": [{"type": "text", "text": last_answer(turn)}]}}),
            json!({"type": "system", "subtype": "stop_hook_summary", "hookCount": 1}),
        ];
        for line in lines {
            serde_json::to_writer(&mut file, &line)?;
            file.write_all(b"\n")?;
        }
    }
    file.flush()?;
    Ok(std::fs::metadata(path)?.len())
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
    let temporary = tempfile::tempdir().context("creating a temporary directory for the stores")?;
    let root = match &args.keep_in {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            ensure!(std::fs::read_dir(dir)?.next().is_none(), "--keep-in {} is not empty", dir.display());
            dir.canonicalize()?
        }
        None => temporary.path().to_path_buf(),
    };
    let dir = root.as_path();
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["remote", "add", "origin", &format!("https://example.com/acme/{PROJECT}.git")])?;
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "first"])?;
    let user_db = dir.join("user.db");
    let corpus = Corpus::new(args.seed);
    {
        let project: Arc<dyn MemoryStore> =
            Arc::new(GitNotesStore::open(&repo, &repo.join(".git").join("kenning").join("project.db"), Durability::PowerLoss)?);
        let user: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&user_db)?);
        let domains = [(Domain::Project(PROJECT.into()), project, 0), (Domain::User, user, args.memories)];
        for (domain, store, offset) in domains {
            let service = MemoryService::new(vec![DomainStore { domain, store }], loaded.embedder.clone());
            for first in (0..args.memories).step_by(1000) {
                let batch: Vec<_> = (first..(first + 1000).min(args.memories)).map(|index| corpus.memory(offset + index)).collect();
                service.capture_many(batch, None)?;
            }
        }
    }
    // Hooks read a transcript only inside an agent's transcript folder, so the session is
    // written where Claude Code would write it, under a client folder of the benchmark's own.
    let claude = dir.join("claude");
    let transcript_folder = claude.join("projects").join(PROJECT);
    std::fs::create_dir_all(&transcript_folder)?;
    let transcript = transcript_folder.join("session.jsonl");
    let transcript_bytes = write_transcript(&transcript, &corpus, args.memories)?;
    let data = dir.join("data");
    let config = dir.join("config");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&config)?;
    if args.keep_in.is_some() {
        let environment = format!(
            "KENNING_USER_DB={}\nKENNING_CONFIG_DIR={}\nKENNING_DATA_DIR={}\nKENNING_EMBEDDER={}\nCLAUDE_CONFIG_DIR={}\n",
            user_db.display(),
            config.display(),
            data.display(),
            args.embedder.embedder.name(),
            claude.display()
        );
        std::fs::write(dir.join("hook.env"), environment)?;
    }
    // kenning as the session runs it: in the repository, with the benchmark's stores.
    let kenning = |words: &[&str]| {
        let mut command = Command::new(&binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("KENNING_") {
                command.env_remove(key);
            }
        }
        command
            .args(words)
            .current_dir(&repo)
            .env("KENNING_USER_DB", &user_db)
            .env("KENNING_CONFIG_DIR", &config)
            .env("KENNING_DATA_DIR", &data)
            .env("KENNING_EMBEDDER", args.embedder.embedder.name())
            .env("CLAUDE_CONFIG_DIR", &claude)
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    };
    // One spawn of a hook: how long it took, and whether it printed context.
    let spawn = |event: &str, payload: &str| -> Result<(Duration, bool)> {
        let mut command = kenning(&["hook", event]);
        let started = Instant::now();
        let mut child = command.spawn().with_context(|| format!("starting {}", binary.display()))?;
        child.stdin.take().context("no stdin")?.write_all(payload.as_bytes())?;
        let output = child.wait_with_output()?;
        let elapsed: Duration = started.elapsed();
        ensure!(output.status.success(), "kenning hook {event} exited with {}", output.status);
        Ok((elapsed, !output.stdout.is_empty()))
    };
    let payloads = |run: usize| -> Vec<(&'static str, String)> {
        inputs(&corpus, args.memories, &repo, &transcript, run).into_iter().map(|(event, input)| (event, input.to_string())).collect()
    };
    // One untimed spawn of every event first, as a session gets to the hooks timed: its stops
    // and compaction have stored the transcript's findings, so the stores hold the writes of
    // those hooks (which a later prompt's hook must see) and every timed stop finds its
    // findings stored.
    for (event, payload) in payloads(0) {
        if args.keep_in.is_some() {
            std::fs::write(dir.join(format!("{event}.json")), &payload)?;
        }
        spawn(event, &payload)?;
    }
    // Every event's runs, numbered from `first` so that no two spawns share a failure.
    let time_all = |first: usize| -> Result<Vec<(Option<Summary>, usize)>> {
        let mut figures = Vec::new();
        for (index, (event, _)) in payloads(0).into_iter().enumerate() {
            let mut samples = Vec::with_capacity(args.runs);
            let mut answered = 0;
            for run in first..first + args.runs {
                let payload = &payloads(run)[index].1;
                let (elapsed, printed) = spawn(event, payload)?;
                samples.push(elapsed);
                answered += usize::from(printed);
            }
            figures.push((Summary::of(&samples), answered));
        }
        Ok(figures)
    };
    let alone = time_all(1)?;
    let server = SessionServer::start(kenning(&["serve"]))?;
    // The server's first answer reads its indexes, as it does once a session.
    for (event, payload) in payloads(0) {
        spawn(event, &payload)?;
    }
    let beside = time_all(1 + args.runs)?;
    server.stop()?;
    let events = payloads(0)
        .into_iter()
        .zip(alone.into_iter().zip(beside))
        .map(|((event, _), ((spawn_to_output, answered_alone), (beside_server, answered_beside)))| EventFigures {
            event,
            spawn_to_output,
            beside_server,
            answered: [answered_alone, answered_beside],
        })
        .collect();
    let log = data.join("hooks.log");
    ensure!(!log.exists(), "a hook failed: {}", std::fs::read_to_string(&log).unwrap_or_default());
    Ok(HooksReport {
        benchmark: "hooks",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        machine,
        memories_per_domain: args.memories,
        embedder: args.embedder.embedder.name(),
        transcript_bytes,
        events,
    })
}

pub fn table(report: &HooksReport) -> String {
    let mut text = format!(
        "hook spawn to output in a git repository, {} project + {} user memories ({} embedder; transcript {} KiB)\n",
        report.memories_per_domain,
        report.memories_per_domain,
        report.embedder,
        report.transcript_bytes / 1024
    );
    text.push_str("                    alone                       beside the session's server\n");
    text.push_str("event               p50 ms   p95 ms   answered   p50 ms   p95 ms   answered\n");
    for event in &report.events {
        let figures = |summary: &Option<Summary>| summary.as_ref().map_or((0.0, 0.0, 0), |summary| (summary.p50_ms, summary.p95_ms, summary.samples));
        let (p50, p95, runs) = figures(&event.spawn_to_output);
        let (server_p50, server_p95, server_runs) = figures(&event.beside_server);
        let [answered, answered_beside] = event.answered;
        text.push_str(&format!(
            "{:<19} {p50:>7.2}  {p95:>7.2}   {:>8}  {server_p50:>7.2}  {server_p95:>7.2}   {:>8}\n",
            event.event,
            format!("{answered}/{runs}"),
            format!("{answered_beside}/{server_runs}")
        ));
    }
    text
}

/// `kenning serve` on stdio, as an agent starts it for a session: running once it has answered
/// the MCP handshake (its hook socket is made before it reads the first request), stopped by
/// closing its input, as the agent does at the session's end.
struct SessionServer {
    child: std::process::Child,
}

impl SessionServer {
    fn start(mut command: Command) -> Result<SessionServer> {
        let mut child = command.spawn().context("starting kenning serve")?;
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "kenning-bench", "version": "1"}}});
        let stdin = child.stdin.as_mut().context("no stdin")?;
        writeln!(stdin, "{initialize}")?;
        stdin.flush()?;
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().context("no stdout")?), &mut line)?;
        ensure!(line.contains("\"result\""), "kenning serve did not answer the handshake: {line}");
        Ok(SessionServer { child })
    }

    fn stop(mut self) -> Result<()> {
        drop(self.child.stdin.take());
        let status = self.child.wait()?;
        ensure!(status.success(), "kenning serve exited with {status}");
        Ok(())
    }
}
