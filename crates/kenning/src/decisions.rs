//! `kenning decisions …` and `kenning calibration`: the decision service at the command line,
//! with tables for people and `--json` for programs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use kenning_chart::{ReliabilityChart, Series, reliability_png, reliability_svg};
use kenning_core::decision::{CaptureDecision, OutcomeInput, SignalInput, UpdateDecision};
use kenning_engine::decisions::views::{
    CaptureDecisionResult, ContextView, DecisionDetail, DecisionPage, OutcomeResult, SignalResult, SkillsView,
    UpdateDecisionResult, WarningsView,
};
use kenning_engine::decisions::{ALL_MODULES, CalibrationQuery, ContextQuery, SkillsQuery};
use kenning_engine::{ChainAnalysis, DecisionQuery, DecisionService};
use serde::Serialize;

use crate::print;

#[derive(Debug, Subcommand)]
pub enum DecisionCommand {
    /// Record a decision with its alternatives and your confidence.
    Capture(CaptureArgs),
    /// Move a decision's status, revise its confidence, add a note or link a PR or commit.
    Update(UpdateArgs),
    /// Show one decision with its signals, outcome and similar decisions.
    Get { decision_id: String },
    /// List or search past decisions.
    List(ListArgs),
    /// Record a signal (pr_created, pr_merged, ci_passed, ci_failed, incident, performance).
    Signal(SignalArgs),
    /// Record how a decision turned out.
    Outcome(OutcomeArgs),
    /// Show the skills and antipatterns mined from outcomes.
    Skills(SkillsArgs),
    /// Show the warnings, risk score and firewall verdict for a proposed decision.
    Warnings(ProposalArgs),
    /// Show the context for a proposed decision, with the markdown block for prompts.
    Context(ContextArgs),
    /// Show a decision's causal chain: signals, outcome, lessons, skills.
    Analyze { decision_id: String },
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// What was decided, 10 to 500 characters.
    pub statement: String,
    /// An option considered and rejected; repeatable, at least one.
    #[arg(long = "alternative", short = 'a')]
    pub alternatives: Vec<String>,
    /// How likely it is to work out, 0 to 1.
    #[arg(long)]
    pub confidence: Option<f64>,
    /// The configured module it belongs to.
    #[arg(long, short)]
    pub module: Option<String>,
    /// What must hold for it to work; repeatable.
    #[arg(long = "assumption")]
    pub assumptions: Vec<String>,
    /// low, medium or high.
    #[arg(long = "risk")]
    pub risk_level: Option<String>,
    #[arg(long)]
    pub rationale: Option<String>,
    /// The main file it concerns.
    #[arg(long = "file")]
    pub file_path: Option<String>,
    /// Another file it concerns; repeatable.
    #[arg(long = "related")]
    pub related_files: Vec<String>,
    #[arg(long = "session")]
    pub session_id: Option<String>,
    /// Who decided; default `human`.
    #[arg(long = "by")]
    pub created_by: Option<String>,
    /// `project`, `user`, ...; default the project inside a git repository, else user.
    #[arg(long)]
    pub domain: Option<String>,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    pub decision_id: String,
    /// pending -> executed -> completed | failed | reworked.
    #[arg(long)]
    pub status: Option<String>,
    #[arg(long)]
    pub confidence: Option<f64>,
    #[arg(long = "note")]
    pub notes: Option<String>,
    #[arg(long = "pr")]
    pub linked_pr: Option<String>,
    #[arg(long = "commit")]
    pub linked_commit: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Words to search for.
    #[arg(long, short)]
    pub query: Option<String>,
    #[arg(long, short)]
    pub module: Option<String>,
    #[arg(long)]
    pub status: Option<String>,
    /// Only decisions about this file or folder.
    #[arg(long)]
    pub file: Option<String>,
    #[arg(long)]
    pub domain: Option<String>,
    #[arg(long, short)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Args)]
pub struct SignalArgs {
    pub decision_id: String,
    /// pr_created, pr_merged, ci_passed, ci_failed, incident or performance.
    pub signal_type: String,
    /// positive, negative or neutral.
    pub valence: String,
    #[arg(long)]
    pub description: Option<String>,
    /// A figure as KEY=VALUE (numbers stay numbers); repeatable.
    #[arg(long = "metric", value_name = "KEY=VALUE")]
    pub metrics: Vec<String>,
}

#[derive(Debug, Args)]
pub struct OutcomeArgs {
    pub decision_id: String,
    /// success, partial or failure.
    pub final_status: String,
    /// 0 to 1; default 1 for success, 0.5 for partial, 0 for failure.
    #[arg(long = "score")]
    pub final_score: Option<f64>,
    /// A lesson learned; repeatable. Each becomes a `learnings` memory.
    #[arg(long = "lesson")]
    pub lessons: Vec<String>,
    /// An observation as KEY=VALUE, e.g. ci_passed=true; repeatable.
    #[arg(long = "observed", value_name = "KEY=VALUE")]
    pub observations: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SkillsArgs {
    #[arg(long, short)]
    pub module: Option<String>,
    /// A proposed decision, to rank skills by applicability.
    #[arg(long)]
    pub statement: Option<String>,
    #[arg(long)]
    pub min_confidence: Option<f64>,
    #[arg(long, short)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub domain: Option<String>,
}

#[derive(Debug, Args)]
pub struct ProposalArgs {
    /// The decision being considered.
    pub statement: String,
    #[arg(long, short)]
    pub module: Option<String>,
    #[arg(long)]
    pub confidence: Option<f64>,
    /// An alternative considered; repeatable.
    #[arg(long = "alternative", short = 'a')]
    pub alternatives: Vec<String>,
    /// low, medium or high.
    #[arg(long = "risk")]
    pub risk_level: Option<String>,
    #[arg(long)]
    pub domain: Option<String>,
}

#[derive(Debug, Args)]
pub struct ContextArgs {
    #[command(flatten)]
    pub proposal: ProposalArgs,
    /// minimal, standard or full.
    #[arg(long)]
    pub depth: Option<String>,
}

#[derive(Debug, Args)]
pub struct CalibrationArgs {
    /// Only this module; default all outcomes and every module.
    #[arg(long, short)]
    pub module: Option<String>,
    /// Where to write the reliability diagram (SVG and PNG); default the current folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub domain: Option<String>,
}

pub fn run(decisions: &DecisionService, json: bool, command: DecisionCommand) -> Result<()> {
    match command {
        DecisionCommand::Capture(args) => {
            let input = CaptureDecision {
                statement: args.statement,
                alternatives: Some(args.alternatives),
                confidence: args.confidence,
                module: args.module,
                assumptions: args.assumptions,
                risk_level: args.risk_level,
                rationale: args.rationale,
                session_id: args.session_id,
                file_path: args.file_path,
                related_files: args.related_files,
                created_by: Some(args.created_by.unwrap_or_else(|| "human".to_owned())),
                ..CaptureDecision::default()
            };
            print(json, &decisions.capture(input, args.domain.as_deref())?, captured)
        }
        DecisionCommand::Update(args) => {
            let input = UpdateDecision {
                status: args.status,
                confidence: args.confidence,
                notes: args.notes,
                linked_pr: args.linked_pr,
                linked_commit: args.linked_commit,
            };
            print(json, &decisions.update(&args.decision_id, input)?, updated)
        }
        DecisionCommand::Get { decision_id } => print(json, &decisions.get(&decision_id, ChainAnalysis::Omitted)?, detail),
        DecisionCommand::Analyze { decision_id } => print(json, &decisions.get(&decision_id, ChainAnalysis::Included)?, detail),
        DecisionCommand::List(args) => {
            let query = DecisionQuery {
                text: args.query,
                module: args.module,
                status: args.status,
                file: args.file,
                domain: args.domain,
                cursor: args.cursor,
                limit: args.limit,
            };
            print(json, &decisions.query(query)?, page)
        }
        DecisionCommand::Signal(args) => {
            let input = SignalInput {
                signal_type: args.signal_type,
                valence: args.valence,
                description: args.description,
                metrics: key_values("--metric", &args.metrics)?,
            };
            print(json, &decisions.record_signal(&args.decision_id, input)?, signal)
        }
        DecisionCommand::Outcome(args) => {
            let input = OutcomeInput {
                final_status: args.final_status,
                final_score: args.final_score,
                signals: key_values("--observed", &args.observations)?,
                lessons_learned: args.lessons,
                ..OutcomeInput::default()
            };
            print(json, &decisions.record_outcome(&args.decision_id, input)?, outcome)
        }
        DecisionCommand::Skills(args) => {
            let query = SkillsQuery {
                module: args.module,
                statement: args.statement,
                min_confidence: args.min_confidence,
                limit: args.limit,
                domain: args.domain,
            };
            print(json, &decisions.skills(query)?, skills)
        }
        DecisionCommand::Warnings(args) => print(json, &decisions.warnings(context_query(args, None))?, render_warnings),
        DecisionCommand::Context(args) => {
            let view = decisions.context(context_query(args.proposal, args.depth))?;
            print(json, &view, |view: &ContextView| view.markdown.clone())
        }
    }
}

fn context_query(args: ProposalArgs, depth: Option<String>) -> ContextQuery {
    ContextQuery {
        statement: args.statement,
        module: args.module,
        confidence: args.confidence,
        alternatives: (!args.alternatives.is_empty()).then_some(args.alternatives),
        risk_level: args.risk_level,
        depth,
        domain: args.domain,
    }
}

/// `KEY=VALUE` pairs; a value that parses as JSON (a number, `true`) keeps that type.
fn key_values(flag: &str, pairs: &[String]) -> Result<BTreeMap<String, serde_json::Value>> {
    pairs
        .iter()
        .map(|pair| {
            let (key, value) = pair.split_once('=').ok_or_else(|| anyhow!("{flag} `{pair}` is not KEY=VALUE; write e.g. {flag} latency_ms=120"))?;
            let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
            Ok((key.trim().to_owned(), value))
        })
        .collect()
}


/// A confidence that may not have been stated.
fn stated(confidence: Option<f64>) -> String {
    confidence.map_or_else(|| "not stated".to_owned(), |confidence| confidence.to_string())
}

fn captured(result: &CaptureDecisionResult) -> String {
    let mut out = format!("captured {} ({}, confidence {})\n  {}\n", result.decision_id, result.module, stated(result.confidence), result.urn);
    for warning in &result.warnings {
        out.push_str(&format!("  note: {warning}\n"));
    }
    out
}

fn updated(result: &UpdateDecisionResult) -> String {
    format!(
        "{} is {} (was {}), confidence {}, revision {}\n",
        result.decision_id, result.new_status, result.previous_status, stated(result.confidence), result.revision
    )
}

fn detail(view: &DecisionDetail) -> String {
    let decision = &view.decision;
    let mut out = format!("{}\n{}\n\n", decision.urn, decision.statement);
    let rows = [
        ("module", decision.module.clone()),
        ("status", decision.status.clone()),
        ("risk", decision.risk_level.clone()),
        ("confidence", format!("{} (now {})", stated(decision.confidence), stated(decision.current_confidence))),
        ("estimated", format!("{:.2} chance of success", view.estimated_success)),
        ("alternatives", decision.alternatives.join("; ")),
        ("rationale", decision.rationale.clone().unwrap_or_default()),
        ("created", format!("{} by {}", decision.created_at, decision.created_by)),
    ];
    for (label, value) in rows.iter().filter(|(_, value)| !value.is_empty()) {
        let _ = writeln!(out, "{label:>12}  {value}");
    }
    for signal in &decision.signals {
        let _ = writeln!(out, "{:>12}  {} {} {}", "signal", signal.signal_type, signal.valence, signal.description.clone().unwrap_or_default());
    }
    if let Some(outcome) = &decision.outcome {
        let _ = writeln!(out, "{:>12}  {} (score {})", "outcome", outcome.final_status, outcome.final_score);
        for lesson in &outcome.lessons_learned {
            let _ = writeln!(out, "{:>12}  {lesson}", "lesson");
        }
    }
    for similar in &view.similar_decisions {
        let success = similar.success_rate.map_or_else(|| "no outcome".to_owned(), |score| format!("success {score}"));
        let _ = writeln!(out, "{:>12}  {:.2} {} ({}, {success})", "similar", similar.similarity, similar.statement, similar.relation);
    }
    for antipattern in &view.antipatterns_triggered {
        let _ = writeln!(out, "{:>12}  {} ({} severity, success {:.2})", "antipattern", antipattern.pattern, antipattern.severity, antipattern.success_rate);
    }
    if let Some(analysis) = &view.analysis {
        let chain = &analysis.causal_chain;
        out.push_str("\ncausal chain\n");
        let _ = writeln!(out, "  decision  {}", chain.decision);
        for signal in &chain.signals {
            let _ = writeln!(out, "  signal    {signal}");
        }
        if let Some(outcome) = &chain.outcome {
            let _ = writeln!(out, "  outcome   {outcome}");
        }
        for lesson in &chain.lessons {
            let _ = writeln!(out, "  lesson    {} ({})", lesson.title, lesson.urn);
        }
        for skill in &chain.skills {
            let _ = writeln!(out, "  skill     {} [{}] ({})", skill.title, skill.status, skill.urn);
        }
    }
    out
}

fn page(page: &DecisionPage) -> String {
    if page.decisions.is_empty() {
        return "no decisions match\n".to_owned();
    }
    let mut out = String::new();
    for decision in &page.decisions {
        let outcome = match (&decision.outcome, decision.score) {
            (Some(outcome), Some(score)) => format!("{outcome} {score}"),
            _ => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{}  {:<9} {:<10} conf {:<4}  {:<12} {}",
            decision.decision_id,
            decision.module,
            decision.status,
            decision.confidence.map_or_else(|| "-".to_owned(), |confidence| format!("{confidence:.2}")),
            outcome,
            decision.statement
        );
    }
    let _ = writeln!(out, "({} of {} in {})", page.decisions.len(), page.total, page.domain);
    if let Some(cursor) = &page.next_cursor {
        let _ = writeln!(out, "more: --cursor {cursor}");
    }
    out
}

fn signal(result: &SignalResult) -> String {
    format!(
        "recorded {} on {}: estimated success {:.2} (from {} {:.2}, {} signals)\n",
        result.signal_id, result.decision_id, result.estimated_success, result.prior_source, result.prior, result.signals_counted
    )
}

fn outcome(result: &OutcomeResult) -> String {
    let impact = &result.calibration_impact;
    let mut out = format!(
        "recorded {} for {} ({}, score {}); the decision is {}\n",
        result.outcome_id, result.decision_id, result.final_status, result.final_score, result.decision_status
    );
    let _ = writeln!(
        out,
        "  {}: success rate {:.3} -> {:.3} over {} outcomes, {}",
        impact.module, impact.previous_success_rate, impact.new_success_rate, impact.sample_size, impact.status
    );
    for lesson in &result.lesson_urns {
        let _ = writeln!(out, "  lesson  {lesson}");
    }
    for skill in &result.skills {
        let _ = writeln!(out, "  {} {} {} (confidence {:.2})", skill.kind, skill.change, skill.skill_id, skill.confidence);
    }
    let _ = writeln!(out, "  {}", result.recommendation);
    out
}

fn skills(view: &SkillsView) -> String {
    let mut out = String::new();
    if view.skills.is_empty() && view.antipatterns.is_empty() {
        let _ = writeln!(out, "no skills or antipatterns yet in {} (a pattern needs 3 outcomes)", view.module);
    }
    for skill in &view.skills {
        let _ = writeln!(
            out,
            "skill        {:.2}  {} of {}  {}  [{}]",
            skill.confidence, skill.evidence.successes, skill.evidence.total_outcomes, skill.statement, skill.module
        );
    }
    for antipattern in &view.antipatterns {
        let _ = writeln!(
            out,
            "antipattern  {:.2}  {} of {}  {}  [{}, {} severity]",
            antipattern.confidence,
            antipattern.evidence.successes,
            antipattern.evidence.total_outcomes,
            antipattern.pattern,
            antipattern.module,
            antipattern.severity
        );
    }
    out
}

fn render_warnings(warnings: &WarningsView) -> String {
    let mut out = format!("firewall: {} (risk {:.2})\n", warnings.firewall_status, warnings.risk_score);
    if warnings.warnings.is_empty() {
        out.push_str("no warnings\n");
    }
    for warning in &warnings.warnings {
        let _ = writeln!(out, "- {} [{}, {}]\n  {}\n  {}", warning.message, warning.kind, warning.severity, warning.evidence, warning.recommendation);
    }
    out
}

/// What `kenning calibration --json` prints.
#[derive(Serialize)]
struct CalibrationRun {
    calibrations: Vec<CalibrationRow>,
    svg: PathBuf,
    png: PathBuf,
}

#[derive(Serialize)]
struct CalibrationRow {
    module: String,
    #[serde(flatten)]
    calibration: kenning_core::Calibration,
}

/// Prints the calibration table and writes the reliability diagram.
pub fn calibration(decisions: &DecisionService, json: bool, args: CalibrationArgs) -> Result<()> {
    // Validates the module and domain with field errors before anything is written.
    decisions.calibration(CalibrationQuery {
        mode: Some("module".to_owned()),
        module: args.module.clone(),
        domain: args.domain.clone(),
        ..CalibrationQuery::default()
    })?;
    let calibrations = decisions.calibrations(args.module.as_deref(), args.domain.as_deref())?;
    let domain = decisions.domain(args.domain.as_deref())?;
    let chart = ReliabilityChart {
        title: match &args.module {
            Some(module) => format!("Calibration of {module} decisions ({domain})"),
            None => format!("Calibration of decisions ({domain})"),
        },
        series: calibrations
            .iter()
            .map(|(module, calibration)| Series::from_calibration(if module == ALL_MODULES { "overall" } else { module }, calibration))
            .collect(),
    };
    let dir = args.out.unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stem = match &args.module {
        Some(module) => format!("kenning-calibration-{module}"),
        None => "kenning-calibration".to_owned(),
    };
    let svg = write(&dir.join(format!("{stem}.svg")), reliability_svg(&chart).as_bytes())?;
    let png = write(&dir.join(format!("{stem}.png")), &reliability_png(&chart))?;
    let run = CalibrationRun {
        calibrations: calibrations.into_iter().map(|(module, calibration)| CalibrationRow { module, calibration }).collect(),
        svg,
        png,
    };
    print(json, &run, calibration_table)
}

fn write(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(std::path::absolute(path).unwrap_or_else(|_| path.to_owned()))
}

fn calibration_table(run: &CalibrationRun) -> String {
    let mut out = format!(
        "{:<10} {:>8} {:>8} {:>15} {:>7} {:>7} {:<17} {:<17} {:>6}\n",
        "module", "outcomes", "success", "95% interval", "stated", "gap", "status", "trend", "brier"
    );
    for row in &run.calibrations {
        let calibration = &row.calibration;
        let (low, high) = calibration.credible_interval_95;
        let optional = |value: Option<f64>, signed: bool| match value {
            Some(value) if signed => format!("{value:+.3}"),
            Some(value) => format!("{value:.3}"),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>8.3} {:>15} {:>7} {:>7} {:<17} {:<17} {:>6}",
            if row.module == ALL_MODULES { "overall" } else { &row.module },
            calibration.sample_size,
            calibration.mean_success,
            format!("{low:.3}-{high:.3}"),
            optional(calibration.mean_confidence, false),
            optional(calibration.confidence_gap, true),
            calibration.status.as_str(),
            calibration.trend.as_str(),
            optional(calibration.brier_score, false),
        );
    }
    let _ = writeln!(out, "\nreliability diagram:\n  {}\n  {}", run.svg.display(), run.png.display());
    out
}
