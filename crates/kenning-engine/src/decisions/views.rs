//! What the decision service hands back: serialisable views with JSON schemas, in the shapes of
//! seed 000's tool returns where it gives one.

use std::collections::BTreeMap;

use kenning_core::decision::{Decision, DecisionRecord, Outcome, Signal};
use kenning_core::{Domain, MemoryUrn, Namespace};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::views::{RedactionView, timestamp};

/// The URN of a decision's memory.
pub(crate) fn decision_urn(domain: &Domain, decision: &Decision) -> String {
    MemoryUrn::new(domain.clone(), Namespace::parse("decisions").expect("valid namespace"), decision.id.memory_id()).to_string()
}

/// Rounds a figure for display in views: four decimals is finer than any of our inputs.
pub(crate) fn round(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

/// The result of `decision_capture`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaptureDecisionResult {
    pub decision_id: String,
    /// The domain that keeps the decision.
    pub domain: String,
    /// The decision's memory: `kenning://{domain}/decisions/{decision_id}`.
    pub urn: String,
    pub created_at: String,
    pub status: String,
    /// Absent when none was stated: the decision does not count toward calibration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    pub module: String,
    pub message: String,
    /// Secrets replaced by `[REDACTED:kind]` before anything was stored, per field and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<RedactionView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The result of `decision_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateDecisionResult {
    pub decision_id: String,
    /// The domain that keeps the decision.
    pub domain: String,
    pub urn: String,
    pub previous_status: String,
    pub new_status: String,
    /// The latest confidence; absent when none was ever stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    pub updated_at: String,
    /// Grows by one with every change.
    pub revision: u32,
    /// Secrets replaced by `[REDACTED:kind]` before anything was stored, per field and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<RedactionView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A signal as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SignalView {
    pub signal_id: String,
    pub signal_type: String,
    pub valence: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub metrics: BTreeMap<String, serde_json::Value>,
    pub recorded_at: String,
}

impl From<&Signal> for SignalView {
    fn from(signal: &Signal) -> Self {
        SignalView {
            signal_id: signal.id.clone(),
            signal_type: signal.signal_type.to_string(),
            valence: signal.valence.to_string(),
            description: signal.description.clone(),
            metrics: signal.metrics.clone(),
            recorded_at: timestamp(signal.recorded_at),
        }
    }
}

/// The result of `decision_record_signal`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SignalResult {
    pub signal_id: String,
    pub decision_id: String,
    /// The domain that keeps the decision.
    pub domain: String,
    pub recorded_at: String,
    /// The chance the decision works out given every signal so far (a Beta posterior mean).
    pub estimated_success: f64,
    /// Where the estimate started: the module's calibrated success rate, or the decision's
    /// confidence while the module has fewer than 3 outcomes, or without a stated confidence
    /// the module's record so far (0.5 with no outcomes).
    pub prior: f64,
    /// `module_calibration`, `stated_confidence` or `module_record`.
    pub prior_source: String,
    pub signals_counted: usize,
    /// Secrets replaced by `[REDACTED:kind]` before anything was stored, per field and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<RedactionView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An outcome as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutcomeView {
    pub outcome_id: String,
    pub final_status: String,
    pub final_score: f64,
    pub completed_at: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub signals: BTreeMap<String, serde_json::Value>,
    pub lessons_learned: Vec<String>,
    /// The `learnings` memories the lessons became.
    pub lesson_urns: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl OutcomeView {
    pub(crate) fn new(domain: &Domain, outcome: &Outcome) -> OutcomeView {
        let learnings = Namespace::parse("learnings").expect("valid namespace");
        OutcomeView {
            outcome_id: outcome.id.clone(),
            final_status: outcome.status.to_string(),
            final_score: outcome.score,
            completed_at: timestamp(outcome.completed_at),
            signals: outcome.observations.clone(),
            lessons_learned: outcome.lessons.clone(),
            lesson_urns: outcome
                .lesson_ids
                .iter()
                .map(|id| MemoryUrn::new(domain.clone(), learnings.clone(), id.clone()).to_string())
                .collect(),
            notes: outcome.notes.clone(),
        }
    }
}

/// A whole decision record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionView {
    pub decision_id: String,
    pub urn: String,
    pub domain: String,
    pub statement: String,
    pub alternatives: Vec<String>,
    /// The confidence stated at capture, which calibration uses; absent when none was stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The latest confidence after updates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_confidence: Option<f64>,
    pub module: String,
    pub risk_level: String,
    pub status: String,
    pub assumptions: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Why the decision was needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub risks: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub related_files: Vec<String>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<NoteView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linked_pr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linked_commit: Option<String>,
    /// SHA-256 of what was known when the decision was made.
    pub context_hash: String,
    pub revision: u32,
    pub signals: Vec<SignalView>,
    /// Absent until the outcome is recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NoteView {
    pub at: String,
    pub text: String,
}

impl DecisionView {
    pub(crate) fn new(domain: &Domain, record: &DecisionRecord) -> DecisionView {
        let decision = &record.decision;
        DecisionView {
            decision_id: decision.id.to_string(),
            urn: decision_urn(domain, decision),
            domain: domain.to_string(),
            statement: decision.statement.clone(),
            alternatives: decision.alternatives.clone(),
            confidence: decision.confidence,
            current_confidence: decision.current_confidence,
            module: decision.module.clone(),
            risk_level: decision.risk_level.to_string(),
            status: decision.status.to_string(),
            assumptions: decision.assumptions.clone(),
            rationale: decision.rationale.clone(),
            problem: decision.problem.clone(),
            risks: decision.risks.clone(),
            session_id: decision.context.session_id.clone(),
            file_path: decision.context.file_path.clone(),
            related_files: decision.context.related_files.clone(),
            created_by: decision.created_by.clone(),
            created_at: timestamp(decision.created_at),
            updated_at: timestamp(decision.updated_at),
            notes: decision.notes.iter().map(|note| NoteView { at: timestamp(note.at), text: note.text.clone() }).collect(),
            linked_pr: decision.linked_pr.clone(),
            linked_commit: decision.linked_commit.clone(),
            context_hash: decision.context_hash.clone(),
            revision: decision.revision,
            signals: record.signals.iter().map(SignalView::from).collect(),
            outcome: record.outcome.as_ref().map(|outcome| OutcomeView::new(domain, outcome)),
        }
    }
}

/// A decision in a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionSummary {
    pub decision_id: String,
    pub urn: String,
    pub statement: String,
    pub module: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    pub risk_level: String,
    pub created_at: String,
    /// success, partial or failure, once recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    pub signal_count: usize,
}

impl DecisionSummary {
    pub(crate) fn new(domain: &Domain, record: &DecisionRecord) -> DecisionSummary {
        let decision = &record.decision;
        DecisionSummary {
            decision_id: decision.id.to_string(),
            urn: decision_urn(domain, decision),
            statement: decision.statement.clone(),
            module: decision.module.clone(),
            status: decision.status.to_string(),
            confidence: decision.confidence,
            risk_level: decision.risk_level.to_string(),
            created_at: timestamp(decision.created_at),
            outcome: record.outcome.as_ref().map(|outcome| outcome.status.to_string()),
            score: record.outcome.as_ref().map(|outcome| outcome.score),
            signal_count: record.signals.len(),
        }
    }
}

/// A page of decisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionPage {
    pub domain: String,
    pub total: u64,
    pub decisions: Vec<DecisionSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A past decision like the one at hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SimilarDecision {
    pub decision_id: String,
    pub urn: String,
    pub statement: String,
    pub module: String,
    pub status: String,
    /// Word overlap of the statements (Dice coefficient), 0 to 1.
    pub similarity: f64,
    /// `alike`, or `contrast` when one chose what the other rejected.
    pub relation: String,
    /// Its outcome's score, once recorded: 1 is full success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The confidence at hand minus the confidence that decision stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_difference: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub lessons: Vec<String>,
}

/// The result of `decision_get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionDetail {
    #[serde(flatten)]
    pub decision: DecisionView,
    /// The chance it works out given its signals; the outcome's score once recorded.
    pub estimated_success: f64,
    pub similar_decisions: Vec<SimilarDecision>,
    /// Antipatterns (mined from past failures) this decision matches.
    pub antipatterns_triggered: Vec<AntipatternMatch>,
    /// The decision's causal chain, when analysis was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
}

/// An antipattern a decision resembles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AntipatternMatch {
    pub antipattern_id: String,
    pub pattern: String,
    pub success_rate: f64,
    pub similarity: f64,
    pub severity: String,
}

/// Everything reachable from a decision in the graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Analysis {
    /// decision -> signals -> outcome -> lessons -> skills, in one line each.
    pub causal_chain: CausalChain,
    /// Every edge walked, nearest first.
    pub edges: Vec<EdgeView>,
    /// What the decision's outcome did for the similar decisions made after it was recorded;
    /// absent until it has an outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prevention_effectiveness: Option<PreventionEffectiveness>,
    /// Antipatterns of its module (mined from failures) that it went against: it rejected what
    /// they chose, or chose what they rejected.
    pub antipatterns_avoided: Vec<AntipatternMatch>,
}

/// How a decision's outcome steered the similar decisions made after it was recorded: a failed
/// one should be chosen differently, a successful one should not be reversed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PreventionEffectiveness {
    /// What the outcome warns against: the failed choice itself, or the alternatives a
    /// successful decision rejected.
    pub prevented_issue: String,
    /// Later similar decisions that went the way the outcome points: away from a failed choice
    /// (they rejected it or chose against it), or along a successful one.
    pub prevented_decisions: usize,
    /// Later similar decisions that went against it: the failed choice again, or an alternative
    /// the successful decision rejected.
    pub repeated_decisions: usize,
    /// prevented / (prevented + repeated); absent when there are neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effectiveness: Option<f64>,
    /// The decisions counted, prevented first (at most 20 of each).
    pub prevented_ids: Vec<String>,
    pub repeated_ids: Vec<String>,
}

/// The causal chain of a decision, stage by stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CausalChain {
    pub decision: String,
    pub signals: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    pub lessons: Vec<ChainMemory>,
    pub skills: Vec<ChainMemory>,
}

/// A memory reached in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChainMemory {
    pub urn: String,
    pub title: String,
    /// active, or forgotten (a retired skill).
    pub status: String,
}

/// One edge of the graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EdgeView {
    pub depth: u32,
    /// `kind:id`, e.g. `memory:dec_01…`, `signal:sig_…`, `outcome:out_…`, `urn:kenning://…`.
    pub from: String,
    pub relation: String,
    pub to: String,
}

/// The result of `decision_record_outcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutcomeResult {
    pub outcome_id: String,
    pub decision_id: String,
    /// The domain that keeps the decision.
    pub domain: String,
    pub final_status: String,
    pub final_score: f64,
    pub completed_at: String,
    /// The decision's status after the outcome.
    pub decision_status: String,
    /// The `learnings` memories the lessons became.
    pub lesson_urns: Vec<String>,
    pub calibration_impact: CalibrationImpact,
    /// Skills and antipatterns the outcome created, updated, revived or retired.
    pub skills: Vec<SkillChange>,
    pub recommendation: String,
    /// Secrets replaced by `[REDACTED:kind]` before anything was stored, per field and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<RedactionView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The calibration of one module, or of all of them (`module: "all"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CalibrationView {
    /// The module, or `all`.
    pub module: String,
    pub domain: String,
    /// Outcomes counted.
    pub sample_size: usize,
    /// Posterior mean success rate alpha / (alpha + beta) under a Beta(1, 1) prior, each outcome adding its score.
    pub success_rate: f64,
    /// Mean confidence stated at capture; absent with no outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_confidence: Option<f64>,
    /// mean_confidence - success_rate: positive means overconfident.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_gap: Option<f64>,
    /// insufficient_data (under 3 outcomes), well_calibrated, overconfident, underconfident (the average beyond its interval and a 5-point margin) or miscalibrated (the reliability bins beyond theirs).
    pub status: String,
    pub alpha: f64,
    pub beta: f64,
    pub variance: f64,
    /// Exact 2.5% and 97.5% quantiles of the posterior; left out when `include_credible_interval` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credible_interval_95: Option<[f64; 2]>,
    /// improving, stable, declining or insufficient_data (under 6 outcomes); left out when `include_trend` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend_detail: Option<TrendView>,
    /// Mean of (stated confidence - score)^2; 0 is perfect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brier_score: Option<f64>,
    /// Mean |stated confidence - observed success| over the reliability bins, weighted by their outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_calibration_error: Option<f64>,
    /// The same distance counted only outside each bin's own 95% credible interval; above 0.05 is miscalibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excess_calibration_error: Option<f64>,
    /// Stated-confidence bins against observed success.
    pub reliability: Vec<ReliabilityRow>,
    pub recommendation: String,
    /// When the latest outcome counted was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<String>,
}

/// The two halves the trend compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrendView {
    pub earlier_outcomes: usize,
    pub earlier_success_rate: f64,
    pub recent_outcomes: usize,
    pub recent_success_rate: f64,
    /// Posterior probability that the recent success rate exceeds the earlier one.
    pub probability_recent_better: f64,
}

/// One bin of the reliability table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReliabilityRow {
    pub lower: f64,
    pub upper: f64,
    pub count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_success: Option<f64>,
}

/// One module in the list of all calibrations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CalibrationSummary {
    pub module: String,
    pub sample_size: usize,
    pub success_rate: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_gap: Option<f64>,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend: Option<String>,
    pub variance: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credible_interval_95: Option<[f64; 2]>,
}

impl CalibrationReport {
    /// Leaves the trend out of every view in the report.
    pub(crate) fn drop_trend(&mut self) {
        for view in self.calibration.iter_mut().chain(self.all.iter_mut().map(|all| &mut all.overall)) {
            view.trend = None;
            view.trend_detail = None;
        }
        for summary in self.all.iter_mut().flat_map(|all| &mut all.modules) {
            summary.trend = None;
        }
    }

    /// Leaves the 95% credible interval out of every view in the report.
    pub(crate) fn drop_credible_interval(&mut self) {
        for view in self.calibration.iter_mut().chain(self.all.iter_mut().map(|all| &mut all.overall)) {
            view.credible_interval_95 = None;
        }
        for summary in self.all.iter_mut().flat_map(|all| &mut all.modules) {
            summary.credible_interval_95 = None;
        }
        if let Some(guidance) = self.guidance.as_mut() {
            guidance.credible_interval_95 = None;
        }
    }
}

/// Every module's calibration and the overall one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AllCalibrations {
    pub domain: String,
    pub modules: Vec<CalibrationSummary>,
    pub overall: CalibrationView,
    /// good (well calibrated overall), overconfident, underconfident or insufficient_data.
    pub overall_calibration: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<String>,
}

/// Advice on a proposed confidence from a module's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GuidanceView {
    pub module: String,
    /// data_available, or no_data with fewer than 3 outcomes.
    pub status: String,
    pub sample_size: usize,
    pub actual_success_rate: f64,
    pub your_confidence: f64,
    /// your_confidence - actual_success_rate.
    pub confidence_gap: f64,
    /// The module's calibration status.
    pub calibration_status: String,
    /// your_confidence + adjustment; absent with no data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested_confidence: Option<f64>,
    /// The gap to the record, shrunk by n / (n + 10); absent with no data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjustment: Option<f64>,
    pub shrinkage: f64,
    pub recommendation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credible_interval_95: Option<[f64; 2]>,
    /// Mined skills and antipatterns like the statement, when one was given.
    pub similar_patterns: Vec<PatternMatch>,
}

/// A mined pattern like a proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PatternMatch {
    pub pattern: String,
    /// skill or antipattern.
    pub kind: String,
    pub success_rate: f64,
    pub confidence: f64,
    pub applicability: f64,
    pub recommendation: String,
}

/// What `decision_calibration` returns: one section, by mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CalibrationReport {
    /// module, all or guidance.
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all: Option<AllCalibrations>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guidance: Option<GuidanceView>,
}

/// How many of a pattern's outcomes went well.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillEvidence {
    /// Outcomes with status success.
    pub successes: usize,
    pub total_outcomes: usize,
    /// Summed scores, partial outcomes counting as their score.
    pub weighted_successes: f64,
}

/// A mined skill: a pattern of decisions that worked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillView {
    pub skill_id: String,
    /// Its procedural memory in the `patterns` namespace.
    pub urn: String,
    pub module: String,
    pub statement: String,
    /// 95% lower credible bound of the success rate.
    pub confidence: f64,
    pub success_rate: f64,
    pub evidence: SkillEvidence,
    /// Word overlap with the statement asked about, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applicability_score: Option<f64>,
    pub recommendation: String,
    pub decision_ids: Vec<String>,
}

/// A mined antipattern: a pattern of decisions that mostly failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AntipatternView {
    pub antipattern_id: String,
    pub urn: String,
    pub module: String,
    pub pattern: String,
    /// high or medium.
    pub severity: String,
    pub success_rate: f64,
    /// 95% lower credible bound of the failure rate.
    pub confidence: f64,
    pub evidence: SkillEvidence,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applicability_score: Option<f64>,
    pub recommendation: String,
    pub decision_ids: Vec<String>,
}

/// What `decision_skills` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillsView {
    /// The module, or `all`.
    pub module: String,
    pub domain: String,
    pub skills: Vec<SkillView>,
    pub antipatterns: Vec<AntipatternView>,
}

/// One red flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WarningView {
    /// antipattern, similar_failure, overconfidence, single_alternative or high_risk_little_evidence.
    #[serde(rename = "type")]
    pub kind: String,
    /// low, medium or high.
    pub severity: String,
    pub message: String,
    pub evidence: String,
    pub recommendation: String,
}

/// The calibration a proposal is judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CalibrationContext {
    /// The module, or `all`.
    pub module: String,
    pub sample_size: usize,
    pub team_success_rate: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team_confidence: Option<f64>,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub your_confidence: Option<f64>,
    /// your_confidence - team_success_rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested_confidence: Option<f64>,
    pub credible_interval_95: [f64; 2],
    pub recommendation: String,
}

/// Past failures and lessons around a proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CausalContext {
    pub previous_failed_decisions: Vec<String>,
    pub lessons_learned: Vec<String>,
}

/// What `decision_context` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextView {
    pub decision_statement: String,
    /// minimal, standard or full.
    pub depth: String,
    pub calibration_context: CalibrationContext,
    pub similar_decisions: Vec<SimilarDecision>,
    pub applicable_skills: Vec<SkillView>,
    /// Most severe first.
    pub warnings: Vec<WarningView>,
    /// 0 to 1: 1 - product of (1 - weight) over warnings, weights high 0.5, medium 0.3, low 0.1.
    pub risk_score: f64,
    /// ok, caution (risk 0.3+) or block (risk 0.7+).
    pub firewall_status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causal_context: Option<CausalContext>,
    /// The same context as a markdown block for a system prompt.
    pub markdown: String,
}

/// What `decision_warnings` returns: the red flags of a proposed decision, its risk score and
/// the firewall verdict (seed 000's `get_warnings`), without the rest of its context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WarningsView {
    pub decision_statement: String,
    /// The module whose record the proposal was judged against, or `all`.
    pub module: String,
    /// Most severe first.
    pub warnings: Vec<WarningView>,
    /// 0 to 1: 1 - product of (1 - weight) over warnings, weights high 0.5, medium 0.3, low 0.1.
    pub risk_score: f64,
    /// ok, caution (risk 0.3+) or block (risk 0.7+).
    pub firewall_status: String,
}

/// Something in the record that needs attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Anomaly {
    /// The module, or `all`.
    pub module: String,
    /// success_rate_dropped or overconfident.
    pub kind: String,
    pub message: String,
}

/// Current anomalies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AnomaliesView {
    pub domain: String,
    pub anomalies: Vec<Anomaly>,
}

/// How an outcome moved its module's calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CalibrationImpact {
    pub module: String,
    pub previous_success_rate: f64,
    pub new_success_rate: f64,
    pub sample_size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_gap: Option<f64>,
    pub status: String,
    pub trend: String,
}

/// A skill or antipattern memory written because of an outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillChange {
    pub skill_id: String,
    pub urn: String,
    /// skill or antipattern.
    pub kind: String,
    /// created, updated, revived or retired.
    pub change: String,
    pub confidence: f64,
}
