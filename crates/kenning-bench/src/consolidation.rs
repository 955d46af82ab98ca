//! The `consolidation` benchmark: how long grouping episodes into principles takes.
//!
//! A fresh SQLite store is loaded with `--episodes` episodic memories of the synthetic corpus
//! (its look-alike notes, the same templates with other values, are what groups form from),
//! then a dry run of `MemoryService::consolidate` plans the principles: it lists the episodes,
//! embeds them and clusters them, and writes nothing. The run's stages are timed from its
//! progress reports; `--clusters-out` writes each cluster's episodes, so that two builds'
//! groupings can be compared line by line.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::consolidation::{MAX_EPISODES, Progress, Stage};
use kenning_engine::{ConsolidateRequest, DomainStore, MemoryService};
use kenning_sqlite::{Durability, SqliteStore};
use serde::Serialize;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::stats::round;

#[derive(Debug, Args)]
pub struct ConsolidationArgs {
    /// How many episodes to store and consolidate (at most the engine's limit for one run).
    #[arg(long, default_value_t = 10_000)]
    episodes: usize,
    /// Seed of the synthetic corpus; the same seed gives the same episodes.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Write each cluster's episodes (their positions in the corpus, most central first), one
    /// cluster a line.
    #[arg(long)]
    clusters_out: Option<PathBuf>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct ConsolidationReport {
    benchmark: &'static str,
    kenning_version: &'static str,
    machine: Machine,
    episodes: usize,
    seed: u64,
    embedder: &'static str,
    load_seconds: f64,
    /// The whole dry run: listing, embedding and clustering the episodes.
    consolidate_seconds: f64,
    embedding_seconds: f64,
    clustering_seconds: f64,
    /// How many progress reports the run gave, and the longest wait between two.
    progress_reports: usize,
    longest_silence_seconds: f64,
    episodes_evaluated: usize,
    clusters_found: usize,
    episodes_in_clusters: usize,
}

pub fn run(args: &ConsolidationArgs) -> Result<ConsolidationReport> {
    ensure!((1..=MAX_EPISODES).contains(&args.episodes), "--episodes must be between 1 and {MAX_EPISODES}");
    let machine = Machine::detect();
    let loaded = args.embedder.load()?;
    ensure!(loaded.embedder.is_some(), "consolidation groups episodes by their vectors: pass --embedder builtin or transformer");
    let dir = tempfile::tempdir().context("creating a temporary directory for the store")?;
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(&dir.path().join("user.db"), Durability::ProcessCrash)?);
    let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], loaded.embedder.clone());
    let corpus = Corpus::new(args.seed);

    let started = Instant::now();
    let mut positions: HashMap<String, usize> = HashMap::with_capacity(args.episodes);
    for first in (0..args.episodes).step_by(1000) {
        let batch = (first..(first + 1000).min(args.episodes))
            .map(|index| {
                let mut input = corpus.memory(index);
                input.kind = Some("episodic".to_owned());
                input
            })
            .collect();
        for (index, outcome) in (first..).zip(service.capture_many(batch, None)?) {
            if outcome.created {
                positions.insert(outcome.urn, index);
            }
        }
    }
    let load = started.elapsed();

    let started = Instant::now();
    let mut stage_began: Vec<(Stage, Instant)> = Vec::new();
    let mut reports = 0;
    let mut last_report = started;
    let mut longest_silence = Duration::ZERO;
    let run = service.consolidate(
        ConsolidateRequest { limit: Some(args.episodes), dry_run: true, ..ConsolidateRequest::default() },
        &mut |progress: &Progress| {
            let now = Instant::now();
            reports += 1;
            longest_silence = longest_silence.max(now - last_report);
            last_report = now;
            if stage_began.last().is_none_or(|(stage, _)| *stage != progress.stage) {
                stage_began.push((progress.stage, now));
            }
        },
    )?;
    let finished = Instant::now();
    let stage_time = |wanted: Stage| {
        let at = stage_began.iter().position(|(stage, _)| *stage == wanted)?;
        let end = stage_began.get(at + 1).map_or(finished, |(_, began)| *began);
        Some(end - stage_began[at].1)
    };
    // The first report of a stage comes after its first step, so each stage is timed from the
    // end of the one before: embedding from the start of the run.
    let embedding = stage_began.iter().position(|(stage, _)| *stage == Stage::Clustering).map_or(Duration::ZERO, |at| stage_began[at].1 - started);
    let clustering = stage_time(Stage::Clustering).unwrap_or_default();

    if let Some(path) = &args.clusters_out {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?);
        for cluster in &run.clusters {
            let members: Vec<String> =
                cluster.episodes.iter().map(|urn| positions.get(urn).map_or_else(|| urn.clone(), usize::to_string)).collect();
            writeln!(out, "{}", members.join(" "))?;
        }
        out.flush()?;
    }
    Ok(ConsolidationReport {
        benchmark: "consolidation",
        kenning_version: env!("CARGO_PKG_VERSION"),
        machine,
        episodes: args.episodes,
        seed: args.seed,
        embedder: args.embedder.embedder.name(),
        load_seconds: round(load.as_secs_f64()),
        consolidate_seconds: round((finished - started).as_secs_f64()),
        embedding_seconds: round(embedding.as_secs_f64()),
        clustering_seconds: round(clustering.as_secs_f64()),
        progress_reports: reports,
        longest_silence_seconds: round(longest_silence.as_secs_f64()),
        episodes_evaluated: run.episodes_evaluated,
        clusters_found: run.clusters_found,
        episodes_in_clusters: run.clusters.iter().map(|cluster| cluster.episodes.len()).sum(),
    })
}

pub fn table(report: &ConsolidationReport) -> String {
    format!(
        "consolidation: {} episodes, seed {}, embedder {}, {} CPUs, load average {}\n\
         load {:.2} s; dry run {:.2} s (embedding {:.2} s, clustering {:.2} s), {} progress reports, longest silence {:.2} s\n\
         {} clusters holding {} of {} episodes\n",
        report.episodes,
        report.seed,
        report.embedder,
        report.machine.cpus,
        report.machine.load_average.map_or("unknown".to_owned(), |load| format!("{load:.1}")),
        report.load_seconds,
        report.consolidate_seconds,
        report.embedding_seconds,
        report.clustering_seconds,
        report.progress_reports,
        report.longest_silence_seconds,
        report.clusters_found,
        report.episodes_in_clusters,
        report.episodes_evaluated,
    )
}
