//! `notes`: the project domain's git-notes store beside the SQLite-only user domain, in one run.
//!
//! Both stores are filled with the same synthetic memories; then, for each, single captures and
//! recalls are timed through the engine (so the project figures include the notes commit, the
//! ref update and the index catch-up a capture pays, and the ref check a recall pays). Then a
//! bare remote and a second clone measure sync: new memories sent one way, then both ways at
//! once, then received; a second index of the first clone measures the catch-up after a sync
//! that brought memories; and the first clone's index is rebuilt from its notes alone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore, SearchFilter};
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_git::GitNotesStore;
use kenning_sqlite::{Durability, SqliteStore};
use serde::Serialize;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::stats::{Summary, round};

#[derive(Debug, Args)]
pub struct NotesArgs {
    /// Memories in each store before the timed captures.
    #[arg(long, default_value_t = 10_000)]
    memories: usize,
    /// Single captures timed in each store.
    #[arg(long, default_value_t = 200)]
    captures: usize,
    /// Recalls timed in each store.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// New memories on each side before each timed sync.
    #[arg(long, default_value_t = 1_000)]
    sync_memories: usize,
    /// Memories per capture call while filling the stores.
    #[arg(long, default_value_t = 500)]
    bulk_batch: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct NotesReport {
    pub benchmark: &'static str,
    pub started_at: String,
    pub machine: Machine,
    pub memories: usize,
    pub embedder: &'static str,
    pub durability: &'static str,
    /// Single captures into the project domain (git notes, then the index).
    pub project_capture: Summary,
    /// Single captures into the user domain (SQLite only), for comparison.
    pub user_capture: Summary,
    pub project_recall: Summary,
    pub user_recall: Summary,
    /// Project recall p50 over user recall p50: 1.0 means notes cost recall nothing.
    pub recall_p50_ratio: f64,
    /// `sync` of one clone that captured `sync_memories` new memories: they go out.
    pub sync_send_ms: f64,
    /// `sync` of the other clone, which captured as many: its go out, the first clone's come in.
    pub sync_both_ways_ms: f64,
    /// `sync` of the first clone again: the second clone's memories come in.
    pub sync_receive_ms: f64,
    pub sync_memories: usize,
    /// A second index of the first clone reading after the receiving sync: the catch-up of
    /// what that sync brought (`catch_up_memories`).
    pub catch_up_ms: f64,
    pub catch_up_memories: u64,
    /// The first clone's index rebuilt from its notes alone.
    pub reindex_ms: f64,
    pub reindex_memories: u64,
}

pub fn run(args: &NotesArgs) -> Result<NotesReport> {
    ensure!(args.memories > 0 && args.captures > 0 && args.queries > 0, "--memories, --captures and --queries must be at least 1");
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let loaded = args.embedder.load()?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let corpus = Corpus::new(args.seed);

    let seed_repo = dir.path().join("seed");
    git(dir.path(), &["init", "-q", "-b", "main", path_text(&seed_repo)?])?;
    git(&seed_repo, &["commit", "-q", "--allow-empty", "-m", "first"])?;
    let remote = dir.path().join("remote.git");
    git(dir.path(), &["clone", "-q", "--bare", path_text(&seed_repo)?, path_text(&remote)?])?;
    let url = format!("file://{}", remote.display());
    let left_repo = dir.path().join("left");
    git(dir.path(), &["clone", "-q", &url, path_text(&left_repo)?])?;

    let project = Domain::Project("bench".into());
    let left = Arc::new(GitNotesStore::open(&left_repo, &left_repo.join(".git/kenning/project.db"), Durability::PowerLoss)?);
    let user = Arc::new(SqliteStore::open_with(&dir.path().join("user.db"), Durability::PowerLoss)?);
    let project_service = MemoryService::new(vec![DomainStore { domain: project, store: left.clone() }], loaded.embedder.clone());
    let user_service = MemoryService::new(vec![DomainStore { domain: Domain::User, store: user.clone() }], loaded.embedder.clone());

    let fill = args.memories.saturating_sub(args.captures);
    for service in [&project_service, &user_service] {
        for first in (0..fill).step_by(args.bulk_batch.max(1)) {
            let end = (first + args.bulk_batch).min(fill);
            service.capture_many((first..end).map(|index| corpus.memory(index)).collect(), None)?;
        }
        eprintln!("filled a store with {fill} memories");
    }
    let time_captures = |service: &MemoryService| -> Result<Summary> {
        let mut samples = Vec::with_capacity(args.captures);
        for index in fill..args.memories {
            let input = corpus.memory(index);
            let started = Instant::now();
            service.capture(input, None)?;
            samples.push(started.elapsed());
        }
        Ok(Summary::of(&samples).context("no captures")?)
    };
    let project_capture = time_captures(&project_service)?;
    let user_capture = time_captures(&user_service)?;

    let queries: Vec<String> = (0..args.queries).map(|index| corpus.query(index, args.memories)).collect();
    let time_recalls = |service: &MemoryService| -> Result<Summary> {
        for query in &queries {
            service.recall(RecallRequest { query: query.clone(), ..RecallRequest::default() })?;
        }
        let mut samples = Vec::with_capacity(queries.len());
        for query in &queries {
            let started = Instant::now();
            service.recall(RecallRequest { query: query.clone(), ..RecallRequest::default() })?;
            samples.push(started.elapsed());
        }
        Ok(Summary::of(&samples).context("no queries")?)
    };
    // Interleaved rounds, so that whatever else the machine does weighs on both alike.
    let mut project_recalls = Vec::new();
    let mut user_recalls = Vec::new();
    for _ in 0..2 {
        project_recalls.push(time_recalls(&project_service)?);
        user_recalls.push(time_recalls(&user_service)?);
    }
    let best = |summaries: Vec<Summary>| summaries.into_iter().min_by(|a, b| a.p50_ms.total_cmp(&b.p50_ms)).expect("two rounds");
    let (project_recall, user_recall) = (best(project_recalls), best(user_recalls));

    // Sync: the first clone publishes its notes, a second clone takes them (untimed), then each
    // side captures new memories and syncs.
    left.sync_with("origin")?;
    let right_repo = dir.path().join("right");
    git(dir.path(), &["clone", "-q", &url, path_text(&right_repo)?])?;
    let right = GitNotesStore::open(&right_repo, &right_repo.join(".git/kenning/project.db"), Durability::PowerLoss)?;
    right.sync_with("origin")?;
    let watcher = GitNotesStore::open(&left_repo, &dir.path().join("watcher.db"), Durability::PowerLoss)?;

    let base = args.memories * 2;
    let add = |store: &GitNotesStore, offset: usize| -> Result<()> {
        let memories: Vec<_> = (0..args.sync_memories)
            .map(|n| {
                let input = corpus.memory(base + offset + n);
                let id = kenning_core::MemoryId::parse(&format!("sync-{offset}-{n}")).expect("valid id");
                kenning_core::input::build_memory(input, Domain::Project("bench".into()), id, chrono::Utc::now()).map(|memory| (memory, None))
            })
            .collect::<Result<_, kenning_core::FieldError>>()
            .map_err(kenning_core::Error::from)?;
        for batch in memories.chunks(args.bulk_batch.max(1)) {
            store.insert(batch)?;
        }
        Ok(())
    };
    add(&left, 0)?;
    let sync_send = timed(|| Ok(left.sync_with("origin").map(drop)?))?;
    // The watcher sees the first clone's own captures now, so that its timed catch-up below is
    // what the receiving sync brought alone.
    let before = watcher.count(&SearchFilter::default())?;
    add(&right, args.sync_memories)?;
    let sync_both_ways = timed(|| Ok(right.sync_with("origin").map(drop)?))?;
    let sync_receive = timed(|| Ok(left.sync_with("origin").map(drop)?))?;
    let catch_up = timed(|| Ok(watcher.count(&SearchFilter::default()).map(drop)?))?;
    let catch_up_memories = watcher.count(&SearchFilter::default())? - before;

    let mut reindex_memories = 0;
    let reindex = timed(|| {
        reindex_memories = left.rebuild_index()?;
        Ok(())
    })?;

    Ok(NotesReport {
        benchmark: "notes",
        started_at,
        machine,
        memories: args.memories,
        embedder: args.embedder.embedder.name(),
        durability: "power-loss",
        recall_p50_ratio: round(project_recall.p50_ms / user_recall.p50_ms.max(1e-9)),
        project_capture,
        user_capture,
        project_recall,
        user_recall,
        sync_send_ms: ms(sync_send),
        sync_both_ways_ms: ms(sync_both_ways),
        sync_receive_ms: ms(sync_receive),
        sync_memories: args.sync_memories,
        catch_up_ms: ms(catch_up),
        catch_up_memories,
        reindex_ms: ms(reindex),
        reindex_memories,
    })
}

fn timed(work: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let started = Instant::now();
    work()?;
    Ok(started.elapsed())
}

fn ms(duration: Duration) -> f64 {
    round(duration.as_secs_f64() * 1000.0)
}

fn path_text(path: &Path) -> Result<&str> {
    path.to_str().context("the temporary directory's path is not UTF-8")
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .context("running git")?;
    ensure!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}

pub fn table(report: &NotesReport) -> String {
    let row = |name: &str, summary: &Summary| format!("  {name:<16} p50 {:>8.3} ms  p95 {:>8.3} ms  ({} samples)\n", summary.p50_ms, summary.p95_ms, summary.samples);
    let mut out = format!(
        "notes: {} memories per store, embedder {}, durability {}, {} CPUs, load average {}\n",
        report.memories,
        report.embedder,
        report.durability,
        report.machine.cpus,
        report.machine.load_average.map_or("unknown".to_owned(), |load| format!("{load:.1}"))
    );
    out += &row("project capture", &report.project_capture);
    out += &row("user capture", &report.user_capture);
    out += &row("project recall", &report.project_recall);
    out += &row("user recall", &report.user_recall);
    out += &format!("  recall p50 project/user: {:.2}\n", report.recall_p50_ratio);
    out += &format!(
        "  sync of {} new memories: send {:.0} ms, both ways {:.0} ms, receive {:.0} ms\n",
        report.sync_memories, report.sync_send_ms, report.sync_both_ways_ms, report.sync_receive_ms
    );
    out += &format!("  catch-up of another index after the sync: {} memories in {:.0} ms\n", report.catch_up_memories, report.catch_up_ms);
    out += &format!("  reindex from notes: {} memories in {:.0} ms\n", report.reindex_memories, report.reindex_ms);
    out
}
