//! `kenning consolidate`: a consolidation run (or its plan, or the rollback of one), its
//! progress on standard error and its summary on standard output; `--list` shows the runs.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use kenning_engine::consolidation::{ConsolidationRun, Progress};
use kenning_engine::{ConsolidateRequest, MemoryService};

use crate::print;

#[derive(Debug, Args)]
pub struct ConsolidateArgs {
    /// Fewest episodes that make a principle (default 3).
    #[arg(long)]
    pub min_cluster_size: Option<usize>,
    /// Cosine similarity an episode needs to its cluster's centroid, above 0 and at most 1 (default 0.80).
    #[arg(long)]
    pub similarity_threshold: Option<f64>,
    /// Only episodes of this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// The domain to consolidate (`project`, `user`, `org`); default the project inside a git repository, else user.
    #[arg(long)]
    pub domain: Option<String>,
    /// At most this many episodes, the newest (default 10,000, at most 100,000).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Show the clusters and the principles' titles; write nothing.
    #[arg(long, conflicts_with_all = ["rollback", "list"])]
    pub dry_run: bool,
    /// Undo the run with this id: forget its principles and unmark its episodes.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["min_cluster_size", "similarity_threshold", "namespace", "limit", "list"])]
    pub rollback: Option<String>,
    /// List the recorded runs, newest first.
    #[arg(long, conflicts_with_all = ["min_cluster_size", "similarity_threshold", "namespace", "limit"])]
    pub list: bool,
}

/// The most runs `--list` shows.
const LISTED_RUNS: usize = 50;
/// The least time between two progress lines of one stage.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

pub fn run(memory: &MemoryService, json: bool, args: ConsolidateArgs) -> Result<()> {
    if args.list {
        let runs = memory.consolidation_runs(args.domain.as_deref(), LISTED_RUNS)?;
        return print(json, &runs, |runs| list(runs));
    }
    let run = match &args.rollback {
        Some(run_id) => memory.rollback_consolidation(run_id)?,
        None => {
            let request = ConsolidateRequest {
                domain: args.domain,
                namespace: args.namespace,
                min_cluster_size: args.min_cluster_size,
                similarity_threshold: args.similarity_threshold,
                limit: args.limit,
                dry_run: args.dry_run,
            };
            let mut last: Option<(Progress, Instant)> = None;
            memory.consolidate(request, &mut |progress| {
                let due = match last {
                    Some((before, at)) => before.stage != progress.stage || progress.done == progress.total || at.elapsed() >= PROGRESS_EVERY,
                    None => true,
                };
                if due {
                    eprintln!("{progress}…");
                    last = Some((*progress, Instant::now()));
                }
            })?
        }
    };
    print(json, &run, summary)
}

fn summary(run: &ConsolidationRun) -> String {
    let mut text = String::new();
    let id = run.run_id.as_deref().unwrap_or("(dry run, not recorded)");
    let _ = writeln!(text, "run {id}: {} in {}", run.status, run.domain);
    let _ = writeln!(
        text,
        "{} episodes evaluated, {} clusters found, {} principles extracted",
        run.episodes_evaluated, run.clusters_found, run.principles_extracted
    );
    for cluster in &run.clusters {
        let _ = writeln!(text, "  [{}] {} ({} episodes, cohesion {:.2})", cluster.namespace, cluster.title, cluster.episodes.len(), cluster.cohesion);
        if let Some(principle) = &cluster.principle {
            let _ = writeln!(text, "      {principle}");
        }
    }
    if let Some(llm) = &run.llm {
        let how = match (llm.model.as_deref(), llm.error.as_deref(), llm.fallback.as_deref()) {
            (Some(model), _, _) => format!("written by {model}"),
            (None, Some(error), Some(fallback)) => format!("the model failed ({error}); {fallback}"),
            (None, _, Some(fallback)) => format!("no model configured; {fallback}"),
            _ => llm.status.clone(),
        };
        let _ = writeln!(text, "principles: {how}");
    }
    for warning in &run.warnings {
        let _ = writeln!(text, "warning: {warning}");
    }
    if let Some(error) = &run.error {
        let _ = writeln!(text, "error: {error}");
    }
    if run.status == "completed" {
        let _ = writeln!(text, "undo with: kenning consolidate --rollback {id}");
    }
    text
}

fn list(runs: &[ConsolidationRun]) -> String {
    if runs.is_empty() {
        return "no consolidation runs recorded\n".to_owned();
    }
    let mut text = String::new();
    for run in runs {
        let _ = writeln!(
            text,
            "{}  {:<11}  {}  {}  {} episodes, {} principles",
            run.run_id.as_deref().unwrap_or("-"),
            run.status,
            run.started_at,
            run.domain,
            run.episodes_evaluated,
            run.principles_extracted
        );
    }
    text
}
