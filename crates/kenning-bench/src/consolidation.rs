//! The `consolidation` benchmark: how long grouping episodes into principles takes.
//!
//! A fresh SQLite store is loaded with `--episodes` episodic memories of the synthetic corpus
//! (its look-alike notes, the same templates with other values, are what groups form from),
//! then a dry run of `MemoryService::consolidate` plans the principles: it lists the episodes,
//! embeds them, finds each one's nearest episodes and clusters them, and writes nothing. The
//! run's stages are timed from its progress reports; `--clusters-out` writes each cluster's
//! episodes, so that two builds' groupings can be compared line by line. After the run, the
//! nearest episodes the run found are checked against an exact search for a sample of them.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use kenning_core::consolidation::nearest_episodes;
use kenning_core::{Domain, MemoryKind, MemoryStore, SearchFilter};
use kenning_engine::consolidation::{CLUSTER_NEIGHBOURS, MAX_EPISODES, Progress, Stage};
use kenning_engine::{ConsolidateRequest, DomainStore, MemoryService};
use kenning_sqlite::{Durability, SqliteStore};
use serde::Serialize;

use crate::corpus::Corpus;
use crate::embedder::{EmbedderArgs, LoadedEmbedder};
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
    listing_seconds: f64,
    embedding_seconds: f64,
    neighbours_seconds: f64,
    clustering_seconds: f64,
    /// Leaving out of each cluster the episodes its members contradict, and the plan.
    agreeing_seconds: f64,
    /// Of the exact ten nearest episodes of each of [`SAMPLED_EPISODES`] episodes, the share
    /// among the nearest the run compares it with.
    neighbour_recall_at_10: f64,
    /// How many progress reports the run gave, and the longest wait between two.
    progress_reports: usize,
    longest_silence_seconds: f64,
    /// The stage whose report ended the longest silence.
    longest_silence_ended_by: String,
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
    let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store: store.clone() }], loaded.embedder.clone());
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
    // When each stage sent its last report so far.
    let mut stage_ended: Vec<(Stage, Instant)> = Vec::new();
    let mut reports = 0;
    let mut last_report = started;
    let mut longest_silence = Duration::ZERO;
    // The stage whose report ended the longest silence: the work before it went unreported.
    let mut silent_stage = None;
    let run = service.consolidate(
        ConsolidateRequest { limit: Some(args.episodes), dry_run: true, ..ConsolidateRequest::default() },
        &mut |progress: &Progress| {
            let now = Instant::now();
            reports += 1;
            if now - last_report > longest_silence {
                longest_silence = now - last_report;
                silent_stage = Some(progress.stage);
            }
            last_report = now;
            match stage_ended.last_mut() {
                Some((stage, ended)) if *stage == progress.stage => *ended = now,
                _ => stage_ended.push((progress.stage, now)),
            }
        },
    )?;
    let finished = Instant::now();
    if finished - last_report > longest_silence {
        longest_silence = finished - last_report;
        silent_stage = None;
    }
    // A stage reports when it is done, so each is timed from the last report of the one before
    // to its own last; the last stage to the end of the run, since the plan comes after it.
    let ended = |wanted: Stage| stage_ended.iter().find(|(stage, _)| *stage == wanted).map_or(started, |(_, ended)| *ended);
    let listing = ended(Stage::Listing) - started;
    let embedding = ended(Stage::Embedding) - ended(Stage::Listing);
    let neighbours = ended(Stage::Neighbours) - ended(Stage::Embedding);
    let clustering = ended(Stage::Clustering) - ended(Stage::Neighbours);
    let agreeing = finished - ended(Stage::Clustering);
    let neighbour_recall_at_10 = neighbour_recall(store.as_ref(), &loaded)?;

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
        listing_seconds: round(listing.as_secs_f64()),
        embedding_seconds: round(embedding.as_secs_f64()),
        neighbours_seconds: round(neighbours.as_secs_f64()),
        clustering_seconds: round(clustering.as_secs_f64()),
        agreeing_seconds: round(agreeing.as_secs_f64()),
        neighbour_recall_at_10: round(neighbour_recall_at_10),
        progress_reports: reports,
        longest_silence_seconds: round(longest_silence.as_secs_f64()),
        longest_silence_ended_by: silent_stage.map_or_else(|| "the end of the run".to_owned(), |stage| format!("{stage:?}").to_lowercase()),
        episodes_evaluated: run.episodes_evaluated,
        clusters_found: run.clusters_found,
        episodes_in_clusters: run.clusters.iter().map(|cluster| cluster.episodes.len()).sum(),
    })
}

pub fn table(report: &ConsolidationReport) -> String {
    format!(
        "consolidation: {} episodes, seed {}, embedder {}, {} CPUs, load average {}\n\
         load {:.2} s; dry run {:.2} s (listing {:.2} s, embedding {:.2} s, nearest episodes {:.2} s, clustering {:.2} s, agreeing {:.2} s), {} progress reports, longest silence {:.2} s (ended by {})\n\
         {} clusters holding {} of {} episodes; nearest episodes found against exact search: recall@10 {:.3}\n",
        report.episodes,
        report.seed,
        report.embedder,
        report.machine.cpus,
        report.machine.load_average.map_or("unknown".to_owned(), |load| format!("{load:.1}")),
        report.load_seconds,
        report.consolidate_seconds,
        report.listing_seconds,
        report.embedding_seconds,
        report.neighbours_seconds,
        report.clustering_seconds,
        report.agreeing_seconds,
        report.progress_reports,
        report.longest_silence_seconds,
        report.longest_silence_ended_by,
        report.clusters_found,
        report.episodes_in_clusters,
        report.episodes_evaluated,
        report.neighbour_recall_at_10,
    )
}

/// How many episodes' nearest are checked against an exact search.
const SAMPLED_EPISODES: usize = 200;

/// The episodes embedded as a run embeds them, the nearest of each found as the run finds them,
/// and for [`SAMPLED_EPISODES`] of them, spread over the store, how many of their exact ten
/// nearest (by cosine over every episode) are among those found.
fn neighbour_recall(store: &dyn MemoryStore, loaded: &LoadedEmbedder) -> Result<f64> {
    let Some(embedder) = &loaded.embedder else { return Ok(0.0) };
    let filter = SearchFilter { kinds: vec![MemoryKind::Episodic], ..SearchFilter::default() };
    let mut texts = Vec::new();
    loop {
        let page = store.list(&filter, texts.len(), 1000)?;
        let read = page.len();
        texts.extend(page.iter().map(kenning_core::Memory::search_text));
        if read < 1000 {
            break;
        }
    }
    let mut vectors: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
    for batch in texts.chunks(256) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        vectors.extend(embedder.embed(&refs)?);
    }
    let found = nearest_episodes(&vectors, CLUSTER_NEIGHBOURS, &mut |_, _| true).context("the search was not stopped")?;
    let unit: Vec<Vec<f32>> = vectors
        .iter()
        .map(|vector| {
            let length = vector.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
            vector.iter().map(|x| x / length).collect()
        })
        .collect();
    let (mut hits, mut asked) = (0, 0);
    for position in (0..unit.len()).step_by(unit.len().div_ceil(SAMPLED_EPISODES).max(1)) {
        let mut exact: Vec<(f32, usize)> = (0..unit.len())
            .filter(|other| *other != position)
            .map(|other| (unit[position].iter().zip(&unit[other]).map(|(x, y)| x * y).sum(), other))
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0));
        let Some(tenth) = exact.get(9).or(exact.last()).map(|(similarity, _)| *similarity) else { continue };
        // Episodes as near as the exact tenth count, so that a tie found in place of another is a hit.
        let cosine = |other: usize| unit[position].iter().zip(&unit[other]).map(|(x, y)| x * y).sum::<f32>();
        let near = found[position].as_deref().unwrap_or_default();
        hits += near.iter().filter(|other| cosine(**other) >= tenth - 1e-6).count().min(10);
        asked += exact.len().min(10);
    }
    Ok(if asked == 0 { 1.0 } else { hits as f64 / asked as f64 })
}
