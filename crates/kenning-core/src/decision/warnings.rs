//! Red flags for a proposed decision, an overall risk score and a firewall verdict.
//!
//! The warnings, each with a severity:
//! - `antipattern`: the proposal is the same pattern as a mined antipattern of its module
//!   (the antipattern's own severity);
//! - `similar_failure`: it is the same pattern as past failures (score below one half) that no
//!   antipattern covers yet: low for one, medium for more;
//! - `overconfidence`: its confidence lies above the 95% credible interval of the module's
//!   success rate: high when it exceeds the mean success by more than 0.25, else medium;
//! - `single_alternative`: at most one alternative was considered (low);
//! - `high_risk_little_evidence`: a high-risk decision in a module with fewer than 3 outcomes
//!   (medium).
//!
//! The risk score combines them as independent chances of trouble (noisy-OR), each severity
//! weighing [`severity_weight`]: `1 - Π (1 - w)`. One high and one medium warning give
//! `1 - 0.5 · 0.7 = 0.65`. The firewall says `block` from [`BLOCK_AT`], `caution` from
//! [`CAUTION_AT`], else `ok`.

use crate::calibration::{Calibration, CalibrationStatus, MIN_OUTCOMES, guidance};
use crate::decision::mining::{MinedSkill, Severity, SkillKind};
use crate::decision::model::{Decision, Outcome, RiskLevel};
use crate::decision::similarity::{DecisionWords, relate};

const BLOCK_AT: f64 = 0.7;
const CAUTION_AT: f64 = 0.3;
/// How far above the module's mean success a confidence must be for a high-severity warning.
const HIGH_OVERCONFIDENCE: f64 = 0.25;

/// The weight of one warning of `severity` in the risk score.
fn severity_weight(severity: Severity) -> f64 {
    match severity {
        Severity::Low => 0.1,
        Severity::Medium => 0.3,
        Severity::High => 0.5,
    }
}

/// A decision being considered.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal<'a> {
    pub statement: &'a str,
    pub confidence: Option<f64>,
    /// `None` when the caller did not say what else was considered.
    pub alternatives: Option<&'a [String]>,
    pub risk_level: Option<RiskLevel>,
}

/// What kind of red flag a warning is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    Antipattern,
    SimilarFailure,
    Overconfidence,
    SingleAlternative,
    HighRiskLittleEvidence,
}

impl WarningKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::Antipattern => "antipattern",
            WarningKind::SimilarFailure => "similar_failure",
            WarningKind::Overconfidence => "overconfidence",
            WarningKind::SingleAlternative => "single_alternative",
            WarningKind::HighRiskLittleEvidence => "high_risk_little_evidence",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub kind: WarningKind,
    pub severity: Severity,
    pub message: String,
    pub evidence: String,
    pub recommendation: String,
}

/// The firewall's verdict on a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firewall {
    Ok,
    Caution,
    Block,
}

impl Firewall {
    pub fn as_str(self) -> &'static str {
        match self {
            Firewall::Ok => "ok",
            Firewall::Caution => "caution",
            Firewall::Block => "block",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// Most severe first.
    pub warnings: Vec<Warning>,
    pub risk_score: f64,
    pub firewall: Firewall,
}

/// Assesses `proposal` against its module's calibration, the module's mined skills and
/// antipatterns, and the module's past decisions with outcomes.
pub fn assess(proposal: &Proposal, calibration: &Calibration, mined: &[MinedSkill], past: &[(Decision, Outcome)]) -> Assessment {
    let words = DecisionWords::new(proposal.statement, proposal.alternatives.unwrap_or_default());
    let mut warnings = Vec::new();

    let matched: Vec<&MinedSkill> = mined
        .iter()
        .filter(|skill| skill.kind == SkillKind::Antipattern && relate(&skill.words, &words).same_pattern())
        .collect();
    for antipattern in &matched {
        let ids: Vec<&str> = antipattern.decision_ids.iter().map(|id| id.as_str()).collect();
        warnings.push(Warning {
            kind: WarningKind::Antipattern,
            severity: antipattern.severity.unwrap_or(Severity::Medium),
            message: format!(
                "Matches the antipattern `{}`: success rate {:.2} over {} decisions",
                antipattern.statement, antipattern.success_rate, antipattern.total
            ),
            evidence: format!("{} of {} outcomes were successes: {}", antipattern.successes, antipattern.total, ids.join(", ")),
            recommendation: match antipattern.lessons.first() {
                Some(lesson) => format!("Past lesson: {lesson}"),
                None => format!("Consider what was rejected before ({}) or say why this time differs", antipattern.alternatives.join(", ")),
            },
        });
    }

    let failures: Vec<&(Decision, Outcome)> = past
        .iter()
        .filter(|(decision, outcome)| {
            outcome.score < 0.5
                && !matched.iter().any(|antipattern| antipattern.decision_ids.contains(&decision.id))
                && relate(&DecisionWords::new(&decision.statement, &decision.alternatives), &words).same_pattern()
        })
        .collect();
    if !failures.is_empty() {
        let statements: Vec<String> = failures.iter().map(|(decision, outcome)| format!("{} ({}, score {})", decision.id, outcome.status, outcome.score)).collect();
        let lesson = failures.iter().flat_map(|(_, outcome)| outcome.lessons.first()).next();
        warnings.push(Warning {
            kind: WarningKind::SimilarFailure,
            severity: if failures.len() > 1 { Severity::Medium } else { Severity::Low },
            message: format!("Like {} past decision(s) that failed: {}", failures.len(), failures[0].0.statement),
            evidence: statements.join("; "),
            recommendation: match lesson {
                Some(lesson) => format!("Past lesson: {lesson}"),
                None => "Check what went wrong there before repeating it".to_owned(),
            },
        });
    }

    if let Some(confidence) = proposal.confidence
        && calibration.status != CalibrationStatus::InsufficientData
        && confidence > calibration.credible_interval_95.1
    {
        let (low, high) = calibration.credible_interval_95;
        let advice = guidance(calibration, confidence);
        warnings.push(Warning {
            kind: WarningKind::Overconfidence,
            severity: if confidence - calibration.mean_success > HIGH_OVERCONFIDENCE { Severity::High } else { Severity::Medium },
            message: format!(
                "Confidence {confidence:.2} is above what the module's record supports (success rate {:.2}, 95% interval {low:.2}-{high:.2})",
                calibration.mean_success
            ),
            evidence: format!("{} outcomes in the module", calibration.sample_size),
            recommendation: match advice.suggested_confidence {
                Some(suggested) => format!("Consider {suggested:.2}"),
                None => advice.recommendation,
            },
        });
    }

    if let Some(alternatives) = proposal.alternatives
        && alternatives.len() <= 1
    {
        warnings.push(Warning {
            kind: WarningKind::SingleAlternative,
            severity: Severity::Low,
            message: if alternatives.is_empty() { "No alternative was considered".to_owned() } else { "Only one alternative was considered".to_owned() },
            evidence: alternatives.join(", "),
            recommendation: "Name at least two real alternatives and why each lost".to_owned(),
        });
    }

    if proposal.risk_level == Some(RiskLevel::High) && calibration.sample_size < MIN_OUTCOMES {
        warnings.push(Warning {
            kind: WarningKind::HighRiskLittleEvidence,
            severity: Severity::Medium,
            message: format!("A high-risk decision in a module with only {} recorded outcomes", calibration.sample_size),
            evidence: format!("{} of the {MIN_OUTCOMES} outcomes needed to judge calibration", calibration.sample_size),
            recommendation: "Get a review, plan a rollback, and record the outcome".to_owned(),
        });
    }

    // Most severe first; the order of the rules above breaks ties.
    warnings.sort_by_key(|warning| std::cmp::Reverse(warning.severity));
    let risk_score = 1.0 - warnings.iter().map(|warning| 1.0 - severity_weight(warning.severity)).product::<f64>();
    // Rounded well below any figure shown, so that 1 - 0.7 lands on 0.3 and not a hair beside
    // it, which would put a score exactly on a threshold on either side by chance.
    let risk_score = (risk_score * 1e12).round() / 1e12;
    let firewall = if risk_score >= BLOCK_AT {
        Firewall::Block
    } else if risk_score >= CAUTION_AT {
        Firewall::Caution
    } else {
        Firewall::Ok
    };
    Assessment { warnings, risk_score, firewall }
}
