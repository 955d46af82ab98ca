//! The `redaction` benchmark: how many secrets redaction finds, how many benign strings it
//! changes, and what it costs a capture.
//!
//! Quality is measured on the committed corpus `crates/kenning-core/tests/fixtures/secrets.json`
//! (secrets of many formats in the contexts a coding agent meets them, and benign strings that
//! look like secrets). A secret counts as redacted when none of the parts the corpus names is
//! left in the text; a benign string counts as changed when redaction altered it at all.
//! Figures are given per class of format. Cost is the time to redact every field of a capture
//! (what each write pays) over the synthetic corpus of [`crate::corpus`], which holds no secret,
//! as most captures do not.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use base64::Engine as _;
use clap::Args;
use kenning_core::CaptureInput;
use kenning_core::secrets::{redact, redact_record};
use serde::{Deserialize, Serialize};

use crate::corpus::Corpus;
use crate::report::Machine;
use crate::stats::{Summary, round};

const CORPUS: &str = include_str!("../../kenning-core/tests/fixtures/secrets.json");

#[derive(Debug, Args)]
pub struct RedactionArgs {
    /// Synthetic captures whose fields are redacted to measure the cost.
    #[arg(long, default_value_t = 2000)]
    captures: usize,
    /// Timed passes over the captures; the median pass gives the cost per capture.
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also write the JSON record to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Deserialize)]
struct SecretsCorpus {
    positives: Vec<Positive>,
    benign: Vec<Benign>,
}

#[derive(Deserialize)]
struct Positive {
    format: String,
    class: String,
    text: String,
    secrets: Vec<String>,
}

#[derive(Deserialize)]
struct Benign {
    class: String,
    text: String,
}

#[derive(Debug, Serialize)]
pub struct RedactionReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub secrets: usize,
    pub formats: usize,
    pub benign: usize,
    /// Per class of format: secrets, how many were redacted, recall.
    pub recall_by_class: BTreeMap<String, Tally>,
    /// Every class but `assignment`: the formats that name themselves or sit in a known place.
    pub named_formats: Tally,
    /// `KEY=value` and its kin, with a secret-looking value.
    pub assignments: Tally,
    /// Per class of benign string: strings, how many redaction changed, the rate.
    pub false_positives_by_class: BTreeMap<String, Tally>,
    pub false_positives: Tally,
    /// Formats with a secret left in the text, and classes of benign strings changed, with the text.
    pub misses: Vec<String>,
    pub changed: Vec<String>,
    pub cost: Cost,
    pub machine: Machine,
}

/// `hits` of `cases`, and their share.
#[derive(Debug, Default, Serialize)]
pub struct Tally {
    pub cases: usize,
    pub hits: usize,
    pub rate: f64,
}

impl Tally {
    fn add(&mut self, hit: bool) {
        self.cases += 1;
        self.hits += usize::from(hit);
        self.rate = (self.hits as f64 / self.cases as f64 * 10_000.0).round() / 10_000.0;
    }
}

#[derive(Debug, Serialize)]
pub struct Cost {
    pub captures: usize,
    pub mean_capture_bytes: f64,
    pub rounds: usize,
    /// Microseconds to redact every field of one capture, in the median round.
    pub per_capture_us: f64,
    /// Each capture's time over every round.
    pub per_capture: Option<Summary>,
    /// The first redaction of the process, which compiles the rules.
    pub first_call_ms: f64,
}

/// The corpus, with each positive's text and secrets decoded: the file holds them in base64 so
/// that no secret scanner stops a push of the repository on them.
fn secrets_corpus() -> Result<SecretsCorpus> {
    let decoded = |text: &str| -> Result<String> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).context("a positive of the secrets corpus is not base64")?;
        Ok(String::from_utf8(bytes)?)
    };
    let mut corpus: SecretsCorpus = serde_json::from_str(CORPUS).context("reading the secrets corpus")?;
    for case in &mut corpus.positives {
        case.text = decoded(&case.text)?;
        for secret in &mut case.secrets {
            *secret = decoded(secret)?;
        }
    }
    Ok(corpus)
}

pub fn run(args: &RedactionArgs) -> Result<RedactionReport> {
    // Timed first, before anything else compiles the rules.
    let started = Instant::now();
    redact("warm up");
    let first_call = started.elapsed();
    let corpus = secrets_corpus()?;
    let mut recall_by_class: BTreeMap<String, Tally> = BTreeMap::new();
    let (mut named_formats, mut assignments) = (Tally::default(), Tally::default());
    let mut misses = Vec::new();
    for case in &corpus.positives {
        let text = redact(&case.text).text;
        let redacted = case.secrets.iter().all(|secret| !text.contains(secret.as_str()));
        recall_by_class.entry(case.class.clone()).or_default().add(redacted);
        if case.class == "assignment" { &mut assignments } else { &mut named_formats }.add(redacted);
        if !redacted {
            misses.push(format!("{} ({}): {}", case.format, case.class, case.text));
        }
    }
    let mut false_positives_by_class: BTreeMap<String, Tally> = BTreeMap::new();
    let mut false_positives = Tally::default();
    let mut changed = Vec::new();
    for case in &corpus.benign {
        let text = redact(&case.text).text;
        let altered = text != case.text;
        false_positives_by_class.entry(case.class.clone()).or_default().add(altered);
        false_positives.add(altered);
        if altered {
            changed.push(format!("{}: {} -> {text}", case.class, case.text));
        }
    }
    let formats = corpus.positives.iter().map(|case| case.format.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    Ok(RedactionReport {
        benchmark: "redaction",
        kenning_version: env!("CARGO_PKG_VERSION"),
        secrets: corpus.positives.len(),
        formats,
        benign: corpus.benign.len(),
        recall_by_class,
        named_formats,
        assignments,
        false_positives_by_class,
        false_positives,
        misses,
        changed,
        cost: cost(args, first_call),
        machine: Machine::detect(),
    })
}

/// Redacts every field of each synthetic capture, `rounds` times; the capture is cloned
/// outside the timing.
fn cost(args: &RedactionArgs, first_call: Duration) -> Cost {
    let corpus = Corpus::new(args.seed);
    let captures: Vec<CaptureInput> = (0..args.captures).map(|index| corpus.memory(index)).collect();
    let bytes: usize = captures.iter().map(capture_bytes).sum();
    let mut samples = Vec::with_capacity(captures.len() * args.rounds);
    let mut round_times = Vec::with_capacity(args.rounds);
    for _ in 0..args.rounds.max(1) {
        let mut round_time = Duration::ZERO;
        for capture in &captures {
            let mut capture = capture.clone();
            let started = Instant::now();
            std::hint::black_box(redact_record(&mut capture));
            let elapsed = started.elapsed();
            samples.push(elapsed);
            round_time += elapsed;
        }
        round_times.push(round_time);
    }
    round_times.sort();
    let median = round_times[round_times.len() / 2];
    Cost {
        captures: captures.len(),
        mean_capture_bytes: round(bytes as f64 / captures.len().max(1) as f64),
        rounds: round_times.len(),
        per_capture_us: round(median.as_secs_f64() * 1e6 / captures.len().max(1) as f64),
        per_capture: Summary::of(&samples),
        first_call_ms: round(first_call.as_secs_f64() * 1000.0),
    }
}

fn capture_bytes(capture: &CaptureInput) -> usize {
    capture.content.len()
        + capture.title.as_ref().map_or(0, String::len)
        + capture.tags.iter().map(String::len).sum::<usize>()
        + capture.category.as_ref().map_or(0, String::len)
        + capture.metadata.iter().map(|(key, value)| key.len() + value.len()).sum::<usize>()
}

pub fn table(report: &RedactionReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "redaction: {} secrets in {} formats, {} benign look-alikes (crates/kenning-core/tests/fixtures/secrets.json)",
        report.secrets, report.formats, report.benign
    );
    let _ = writeln!(out, "  {:<20} {:>7} {:>9} {:>8}", "class", "secrets", "redacted", "recall");
    for (class, tally) in &report.recall_by_class {
        let _ = writeln!(out, "  {:<20} {:>7} {:>9} {:>7.1}%", class, tally.cases, tally.hits, tally.rate * 100.0);
    }
    let line = |name: &str, tally: &Tally| format!("  {name}: {} of {} ({:.1}%)\n", tally.hits, tally.cases, tally.rate * 100.0);
    out.push_str(&line("named formats redacted", &report.named_formats));
    out.push_str(&line("assignments redacted", &report.assignments));
    let _ = writeln!(out, "  {:<20} {:>7} {:>9} {:>8}", "benign class", "strings", "changed", "rate");
    for (class, tally) in &report.false_positives_by_class {
        let _ = writeln!(out, "  {:<20} {:>7} {:>9} {:>7.1}%", class, tally.cases, tally.hits, tally.rate * 100.0);
    }
    out.push_str(&line("benign strings changed", &report.false_positives));
    for miss in &report.misses {
        let _ = writeln!(out, "  missed: {miss}");
    }
    for change in &report.changed {
        let _ = writeln!(out, "  changed: {change}");
    }
    let cost = &report.cost;
    let _ = writeln!(
        out,
        "  cost: {:.2} µs per capture ({} synthetic captures of {:.0} bytes, median of {} rounds); first call {:.2} ms",
        cost.per_capture_us, cost.captures, cost.mean_capture_bytes, cost.rounds, cost.first_call_ms
    );
    if let Some(per) = &cost.per_capture {
        let _ = writeln!(out, "  per capture p50 {:.1} µs, p95 {:.1} µs, p99 {:.1} µs", per.p50_ms * 1000.0, per.p95_ms * 1000.0, per.p99_ms * 1000.0);
    }
    out
}
