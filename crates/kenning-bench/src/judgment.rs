//! The `judgment` benchmark: whether capture tells one claim from another, and whether recall
//! lets a changed fact's newer statement win, on a labelled set of statement pairs
//! (`crates/kenning-core/tests/fixtures/judgment-dev.jsonl`).
//!
//! Each pair is a JSON line `{id, label, domain, change, a, b}`; `label` is
//!
//! - `paraphrase`: `b` says what `a` says in other words, so capturing `b` after `a` should
//!   merge it into `a` (the capture answers `created: false`);
//! - `distinct`: `b` is another claim (roles, numbers, negation, scope, order swapped or
//!   changed), so it must be stored as its own memory;
//! - `update`: `b` changes the fact `a` states; it carries a `question` about the present and a
//!   `past_question` about the time before the change. `b` must be stored, and recall of the
//!   question should rank `b` first, recall of the past question `a`.
//!
//! Every pair gets a fresh SQLite store. `a` is captured on day 0 and `b` on day 7, both as an
//! agent would (namespace `learnings`, the default source), and the questions are asked on day 8,
//! on a clock the benchmark sets. The figures: distinct pairs wrongly merged (updates included,
//! as they are distinct claims too), paraphrases merged, changed facts whose newer statement
//! ranks first, and past questions whose older statement ranks first. With `--turns` and
//! `--queries` it also runs the `retrieval` benchmark on that LoCoMo-format data set, so that one
//! command gives the whole table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use clap::Args;
use kenning_core::claim::{ClaimRules, Judgement};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::{Clock, DomainStore, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;
use serde::{Deserialize, Serialize};

use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::retrieval::{self, RetrievalArgs};

#[derive(Debug, Args)]
pub struct JudgmentArgs {
    /// The labelled pairs, one JSON object a line: {id, label, domain, change, a, b} and, for
    /// updates, question and past_question.
    #[arg(long, default_value = "crates/kenning-core/tests/fixtures/judgment-dev.jsonl")]
    pairs: PathBuf,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// A LoCoMo-format turns file: also run the retrieval benchmark (needs --queries).
    #[arg(long, requires = "queries")]
    turns: Option<PathBuf>,
    /// A LoCoMo-format queries file for --turns.
    #[arg(long, requires = "turns")]
    queries: Option<PathBuf>,
    /// Also write the JSON record to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

/// One labelled pair.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub id: String,
    pub label: Label,
    pub domain: String,
    /// What differs between the two statements, e.g. `passive`, `numbers-swapped`, `switched`.
    pub change: String,
    pub a: String,
    pub b: String,
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    pub past_question: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Paraphrase,
    Distinct,
    Update,
}

/// A share of a count, with the pairs that make it up.
#[derive(Debug, Default, Serialize)]
pub struct Share {
    pub pairs: usize,
    pub count: usize,
    pub rate: f64,
    /// The pairs counted (for wrong merges) or not counted (for the others), as `id (domain,
    /// change)`: the ones to look at.
    pub ids: Vec<String>,
}

impl Share {
    fn add(&mut self, pair: &Pair, counted: bool, list_when_counted: bool) {
        self.pairs += 1;
        self.count += usize::from(counted);
        if counted == list_when_counted {
            self.ids.push(format!("{} ({}, {})", pair.id, pair.domain, pair.change));
        }
        self.rate = if self.pairs == 0 { 0.0 } else { (self.count as f64 / self.pairs as f64 * 1000.0).round() / 1000.0 };
    }
}

/// A pair the claim rule cannot judge by its words.
#[derive(Debug, Serialize)]
pub struct UnsurePair {
    pub id: String,
    pub label: Label,
    pub similarity: Option<f64>,
}

/// The `judgment` benchmark's result.
#[derive(Debug, Serialize)]
pub struct JudgmentReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub pairs_file: String,
    pub embedder: &'static str,
    pub model: Option<String>,
    pub pairs: usize,
    /// Distinct and update pairs whose second statement was merged into the first (`ids`: those pairs).
    pub distinct_wrongly_merged: Share,
    /// Paraphrase pairs whose second statement was merged into the first (`ids`: those not merged).
    pub paraphrases_merged: Share,
    /// Update pairs whose newer statement ranks first for the present question (`ids`: those where it does not).
    pub newer_ranks_first: Share,
    /// Update pairs whose older statement ranks first for the past question (`ids`: those where it does not).
    pub past_finds_older: Share,
    /// Links the second statement got to the first, by relation, over all pairs.
    pub links: BTreeMap<String, usize>,
    /// The pairs whose words the claim rule cannot judge (`Unsure`), with their label and the
    /// embedder's similarity of the two statements: what an embedder's paraphrase threshold
    /// (`Embedder::paraphrase_similarity`) is chosen from.
    pub unsure: Vec<UnsurePair>,
    /// recall_all@10 and recall_any@5 of the retrieval benchmark, when it was run.
    pub locomo: Option<BTreeMap<String, f64>>,
    pub machine: Machine,
}

/// The benchmark's clock: days after the start it is set to.
struct BenchClock(AtomicI64);

impl BenchClock {
    fn start() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 5, 9, 0, 0).single().expect("a valid time")
    }

    fn set_days(&self, days: i64) {
        self.0.store(days, Ordering::Relaxed);
    }

    fn at(days: i64) -> DateTime<Utc> {
        BenchClock::start() + TimeDelta::days(days)
    }
}

impl Clock for BenchClock {
    fn now(&self) -> DateTime<Utc> {
        BenchClock::at(self.0.load(Ordering::Relaxed))
    }
}

/// Day of the older statement, the newer one and the questions.
const OLDER_DAY: i64 = 0;
const NEWER_DAY: i64 = 7;
const QUESTION_DAY: i64 = 8;

pub fn read_pairs(path: &Path) -> Result<Vec<Pair>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut pairs: Vec<Pair> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let pair: Pair = serde_json::from_str(line).with_context(|| format!("{} line {}", path.display(), index + 1))?;
        if pairs.iter().any(|known| known.id == pair.id) {
            bail!("{} line {}: pair id `{}` appears twice", path.display(), index + 1, pair.id);
        }
        if pair.label == Label::Update && (pair.question.is_none() || pair.past_question.is_none()) {
            bail!("{} line {}: update `{}` needs a question and a past_question", path.display(), index + 1, pair.id);
        }
        pairs.push(pair);
    }
    Ok(pairs)
}

fn capture(memory: &MemoryService, content: &str) -> Result<kenning_engine::views::CaptureOutcome> {
    let input = CaptureInput { content: content.to_owned(), namespace: Some("learnings".to_owned()), ..CaptureInput::default() };
    Ok(memory.capture(input, None)?)
}

/// The URN recall ranks first for `question`, if any.
fn first(memory: &MemoryService, question: &str) -> Result<Option<String>> {
    let page = memory.recall(RecallRequest {
        query: question.to_owned(),
        as_of: Some(BenchClock::at(QUESTION_DAY).to_rfc3339()),
        ..RecallRequest::default()
    })?;
    Ok(page.results.first().map(|hit| hit.urn.clone()))
}

pub fn run(args: &JudgmentArgs) -> Result<JudgmentReport> {
    let started_at = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let pairs = read_pairs(&args.pairs)?;
    let loaded = args.embedder.load()?;
    let dir = tempfile::tempdir().context("creating a temporary directory for the stores")?;
    let mut report = JudgmentReport {
        benchmark: "judgment",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        pairs_file: args.pairs.display().to_string(),
        embedder: args.embedder.embedder.name(),
        model: loaded.model.clone(),
        pairs: pairs.len(),
        distinct_wrongly_merged: Share::default(),
        paraphrases_merged: Share::default(),
        newer_ranks_first: Share::default(),
        past_finds_older: Share::default(),
        links: BTreeMap::new(),
        unsure: Vec::new(),
        locomo: None,
        machine,
    };
    let rules = ClaimRules::default();
    for (index, pair) in pairs.iter().enumerate() {
        if rules.judge(&pair.a, &pair.b) == Judgement::Unsure {
            let similarity = match &loaded.embedder {
                Some(embedder) => {
                    // Every embedder returns unit vectors, so their dot product is the cosine.
                    let vectors = embedder.embed(&[pair.a.as_str(), pair.b.as_str()])?;
                    Some((vectors[0].iter().zip(&vectors[1]).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>() * 1000.0).round() / 1000.0)
                }
                None => None,
            };
            report.unsure.push(UnsurePair { id: pair.id.clone(), label: pair.label, similarity });
        }
        let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join(format!("pair-{index}.db")))?);
        let clock = Arc::new(BenchClock(AtomicI64::new(OLDER_DAY)));
        let memory = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], loaded.embedder.clone()).with_clock(clock.clone());
        let older = capture(&memory, &pair.a).with_context(|| format!("pair {}: capturing a", pair.id))?;
        clock.set_days(NEWER_DAY);
        let newer = capture(&memory, &pair.b).with_context(|| format!("pair {}: capturing b", pair.id))?;
        let merged = !newer.created;
        if newer.created {
            for link in memory.history(&newer.urn)?.current.links.iter().filter(|link| link.target == older.urn) {
                *report.links.entry(link.relation.clone()).or_default() += 1;
            }
        }
        match pair.label {
            Label::Paraphrase => report.paraphrases_merged.add(pair, merged, false),
            Label::Distinct => report.distinct_wrongly_merged.add(pair, merged, true),
            Label::Update => {
                report.distinct_wrongly_merged.add(pair, merged, true);
                clock.set_days(QUESTION_DAY);
                let question = pair.question.as_deref().expect("checked on reading");
                let past = pair.past_question.as_deref().expect("checked on reading");
                let newer_first = !merged && first(&memory, question)?.as_deref() == Some(newer.urn.as_str());
                report.newer_ranks_first.add(pair, newer_first, false);
                let older_first = !merged && first(&memory, past)?.as_deref() == Some(older.urn.as_str());
                report.past_finds_older.add(pair, older_first, false);
            }
        }
    }
    if let (Some(turns), Some(queries)) = (&args.turns, &args.queries) {
        let rankings = dir.path().join("rankings.jsonl");
        let retrieval = retrieval::run(&RetrievalArgs::new(turns.clone(), queries.clone(), args.embedder.clone(), rankings))?;
        let figures = ["recall_all@5", "recall_all@10", "recall_any@5", "session_recall_all@10"]
            .into_iter()
            .filter_map(|name| retrieval.scores.get(name).map(|value| (name.to_owned(), value)))
            .collect();
        report.locomo = Some(figures);
    }
    Ok(report)
}

/// The figures for a person.
pub fn table(report: &JudgmentReport) -> String {
    let mut out = String::new();
    let model = report.model.as_deref().map_or(String::new(), |model| format!(" ({model})"));
    let _ = writeln!(out, "judgment: {} pairs from {}; embedder {}{model}", report.pairs, report.pairs_file, report.embedder);
    let row = |out: &mut String, name: &str, share: &Share, target: &str| {
        let _ = writeln!(out, "  {name:<44} {:>4} of {:<4} {:>6.1}%   target {target}", share.count, share.pairs, share.rate * 100.0);
    };
    row(&mut out, "distinct pairs wrongly merged", &report.distinct_wrongly_merged, "0%");
    row(&mut out, "paraphrases merged", &report.paraphrases_merged, ">= 80%");
    row(&mut out, "changed facts: newer statement ranks first", &report.newer_ranks_first, ">= 90%");
    row(&mut out, "changed facts: past question finds the older", &report.past_finds_older, "-");
    let unsure = |label: Label| report.unsure.iter().filter(|pair| pair.label == label).count();
    let _ = writeln!(
        out,
        "  pairs the claim rule cannot judge by their words: {} paraphrases, {} distinct, {} updates",
        unsure(Label::Paraphrase),
        unsure(Label::Distinct),
        unsure(Label::Update)
    );
    if !report.links.is_empty() {
        let links: Vec<String> = report.links.iter().map(|(relation, count)| format!("{relation} {count}")).collect();
        let _ = writeln!(out, "  links made: {}", links.join(", "));
    }
    if let Some(locomo) = &report.locomo {
        let figures: Vec<String> = locomo.iter().map(|(name, value)| format!("{name} {value:.3}")).collect();
        let _ = writeln!(out, "  LoCoMo: {}", figures.join(", "));
    }
    out
}
