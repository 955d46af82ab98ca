//! The `embed` benchmark: how fast an embedder turns memories and queries into vectors, one
//! text per call on one thread, as capture and recall call it.
//!
//! The texts are the synthetic corpus's memories and queries ([`crate::corpus`]), so a run is
//! repeatable on any machine. Every text is embedded once to warm up, then timed one call at a
//! time over several rounds; throughput is texts per second of the median round.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::stats::{Summary, round};

#[derive(Debug, Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// How many memories of the synthetic corpus to embed (and as many queries).
    #[arg(long, default_value_t = 2000)]
    texts: usize,
    /// Timed passes over all the texts; the median pass gives the throughput.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also write the JSON record to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct EmbedReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub embedder: &'static str,
    pub model: Option<String>,
    pub dimensions: Option<usize>,
    pub model_load_ms: Option<f64>,
    pub texts: usize,
    pub mean_text_chars: f64,
    pub rounds: usize,
    /// Texts per second, one text per call on one thread, in the median round.
    pub texts_per_second: f64,
    /// Time per call over every round.
    pub per_text: Option<Summary>,
    pub machine: Machine,
}

pub fn run(args: &EmbedArgs) -> Result<EmbedReport> {
    let loaded = args.embedder.load()?;
    let embedder = loaded.embedder.context("the embed benchmark needs an embedder: pass --embedder builtin or transformer")?;
    let corpus = Corpus::new(args.seed);
    let texts: Vec<String> = (0..args.texts)
        .flat_map(|index| [corpus.memory(index).content, corpus.query(index, args.texts)])
        .collect();
    for text in &texts {
        embedder.embed(&[text])?;
    }
    let mut samples = Vec::with_capacity(texts.len() * args.rounds);
    let mut round_times = Vec::with_capacity(args.rounds);
    for _ in 0..args.rounds.max(1) {
        let round_started = Instant::now();
        for text in &texts {
            let started = Instant::now();
            embedder.embed(&[text])?;
            samples.push(started.elapsed());
        }
        round_times.push(round_started.elapsed());
    }
    round_times.sort();
    let median: Duration = round_times[round_times.len() / 2];
    Ok(EmbedReport {
        benchmark: "embed",
        kenning_version: env!("CARGO_PKG_VERSION"),
        embedder: args.embedder.embedder.name(),
        model: loaded.model,
        dimensions: Some(embedder.dimensions()),
        model_load_ms: loaded.load_ms,
        texts: texts.len(),
        mean_text_chars: round(texts.iter().map(|text| text.chars().count()).sum::<usize>() as f64 / texts.len().max(1) as f64),
        rounds: round_times.len(),
        texts_per_second: (texts.len() as f64 / median.as_secs_f64()).round(),
        per_text: Summary::of(&samples),
        machine: Machine::detect(),
    })
}

pub fn table(report: &EmbedReport) -> String {
    let mut out = String::new();
    let model = report.model.as_deref().unwrap_or("-");
    let _ = writeln!(out, "embed: {} ({model}), {} texts of {:.0} characters on average", report.embedder, report.texts, report.mean_text_chars);
    if let Some(per_text) = &report.per_text {
        let _ = writeln!(
            out,
            "  {:.0} texts/s on one thread; per text p50 {:.1} µs, p95 {:.1} µs, p99 {:.1} µs; model opened in {:.2} ms",
            report.texts_per_second,
            per_text.p50_ms * 1000.0,
            per_text.p95_ms * 1000.0,
            per_text.p99_ms * 1000.0,
            report.model_load_ms.unwrap_or(0.0)
        );
    }
    out
}
