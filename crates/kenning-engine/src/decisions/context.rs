//! Warnings and decision context for a proposed decision: calibration, similar decisions,
//! applicable skills, red flags with a firewall verdict, and the same as a markdown block.

use std::fmt::Write;

use kenning_core::calibration::{CalibrationStatus, calibrate, guidance};
use kenning_core::decision::RiskLevel;
use kenning_core::decision::mining::{SkillKind, applicability, mine};
use kenning_core::decision::similarity::{DecisionWords, relate};
use kenning_core::decision::warnings::{Assessment, Proposal, assess};
use kenning_core::FieldError;

use super::calibration::{evidence, recommendation};
use super::skills::skill_view;
use super::views::{CalibrationContext, CausalContext, ContextView, SkillView, WarningView, WarningsView, round};
use super::DecisionService;
use crate::error::Result;

/// How much context to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Calibration and the warnings with the firewall verdict.
    Minimal,
    /// Also 3 similar decisions and 2 applicable skills.
    Standard,
    /// Also up to 10 of each, and the failures and lessons around the proposal.
    Full,
}

impl Depth {
    pub fn parse(text: &str) -> Result<Depth, FieldError> {
        match text.trim() {
            "minimal" => Ok(Depth::Minimal),
            "standard" => Ok(Depth::Standard),
            "full" => Ok(Depth::Full),
            other => Err(FieldError::new("depth", "is not an allowed value", other, "use minimal, standard (default) or full")),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Depth::Minimal => "minimal",
            Depth::Standard => "standard",
            Depth::Full => "full",
        }
    }

    /// How many similar decisions and applicable skills this depth returns.
    fn limits(self) -> (usize, usize) {
        match self {
            Depth::Minimal => (0, 0),
            Depth::Standard => (3, 2),
            Depth::Full => (10, 10),
        }
    }
}

/// A proposed decision to give context or warnings for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextQuery {
    pub statement: String,
    /// Its module; all modules' records when absent.
    pub module: Option<String>,
    pub confidence: Option<f64>,
    pub alternatives: Option<Vec<String>>,
    pub risk_level: Option<String>,
    /// minimal, standard (default) or full.
    pub depth: Option<String>,
    pub domain: Option<String>,
}

impl DecisionService {
    /// The red flags of a proposed decision with its risk score and firewall verdict: the
    /// warnings part of its [`context`](Self::context) at minimal depth.
    pub fn warnings(&self, query: ContextQuery) -> Result<WarningsView> {
        let view = self.context(ContextQuery { depth: Some(Depth::Minimal.as_str().to_owned()), ..query })?;
        Ok(WarningsView {
            decision_statement: view.decision_statement,
            module: view.calibration_context.module,
            warnings: view.warnings,
            risk_score: view.risk_score,
            firewall_status: view.firewall_status,
        })
    }

    /// Everything kenning knows that bears on a proposed decision.
    pub fn context(&self, query: ContextQuery) -> Result<ContextView> {
        let (domain, module) = self.module_given_as_domain(query.domain.clone(), query.module.clone());
        let query = ContextQuery { domain, module, ..query };
        let statement = query.statement.trim();
        if statement.is_empty() {
            return Err(FieldError::new("statement", "is empty", query.statement.as_str(), "describe the decision you are considering").into());
        }
        let depth = query.depth.as_deref().map(Depth::parse).transpose()?.unwrap_or(Depth::Standard);
        if let Some(confidence) = query.confidence
            && !(confidence.is_finite() && (0.0..=1.0).contains(&confidence))
        {
            return Err(FieldError::new("confidence", "must be between 0 and 1", confidence.to_string(), "use e.g. confidence: 0.75").into());
        }
        let risk_level = query.risk_level.as_deref().map(|risk| RiskLevel::parse(risk.trim())).transpose()?;
        let entry = self.entry(query.domain.as_deref())?;
        let (module, outcomes) = self.module_outcomes(entry, query.module.as_deref())?;
        let calibration = calibrate(&evidence(&outcomes));
        let mined = mine(&outcomes);
        let alternatives = query.alternatives.clone().unwrap_or_default();
        let proposal = Proposal {
            statement,
            confidence: query.confidence,
            alternatives: query.alternatives.as_deref(),
            risk_level,
        };
        let Assessment { warnings, risk_score, firewall } = assess(&proposal, &calibration, &mined, &outcomes);
        let (similar_limit, skill_limit) = depth.limits();
        let similar = self.similar(entry, statement, &alternatives, query.confidence, None, similar_limit)?;

        let words = DecisionWords::new(statement, &alternatives);
        let mut skills: Vec<(f64, SkillView)> = mined
            .iter()
            .filter(|skill| skill.kind == SkillKind::Skill)
            .map(|skill| (applicability(skill, &words), skill))
            .filter(|(applies, _)| *applies > 0.0)
            .map(|(applies, skill)| (applies, skill_view(&entry.domain, skill, Some(applies))))
            .collect();
        skills.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.confidence.total_cmp(&a.1.confidence)));
        let applicable_skills: Vec<SkillView> = skills.into_iter().take(skill_limit).map(|(_, view)| view).collect();

        let advice = query.confidence.map(|confidence| guidance(&calibration, confidence));
        let calibration_context = CalibrationContext {
            module: module.clone(),
            sample_size: calibration.sample_size,
            team_success_rate: calibration.mean_success,
            team_confidence: calibration.mean_confidence,
            status: calibration.status.to_string(),
            your_confidence: query.confidence,
            gap: query.confidence.map(|confidence| confidence - calibration.mean_success),
            suggested_confidence: advice.as_ref().and_then(|advice| advice.suggested_confidence),
            credible_interval_95: [calibration.credible_interval_95.0, calibration.credible_interval_95.1],
            recommendation: match &advice {
                Some(advice) => advice.recommendation.clone(),
                None => recommendation(&calibration),
            },
        };
        let causal_context = (depth == Depth::Full).then(|| {
            let antipattern_lessons = mined
                .iter()
                .filter(|skill| skill.kind == SkillKind::Antipattern && relate(&skill.words, &words).same_pattern())
                .flat_map(|skill| &skill.lessons);
            let mut lessons: Vec<String> = Vec::new();
            for lesson in similar.iter().flat_map(|decision| &decision.lessons).chain(antipattern_lessons) {
                if !lessons.contains(lesson) {
                    lessons.push(lesson.clone());
                }
            }
            CausalContext {
                previous_failed_decisions: similar
                    .iter()
                    .filter(|decision| decision.success_rate.is_some_and(|score| score < 0.5))
                    .map(|decision| decision.statement.clone())
                    .collect(),
                lessons_learned: lessons,
            }
        });
        let warnings: Vec<WarningView> = warnings
            .into_iter()
            .map(|warning| WarningView {
                kind: warning.kind.as_str().to_owned(),
                severity: warning.severity.as_str().to_owned(),
                message: warning.message,
                evidence: warning.evidence,
                recommendation: warning.recommendation,
            })
            .collect();
        let mut view = ContextView {
            decision_statement: statement.to_owned(),
            depth: depth.as_str().to_owned(),
            calibration_context,
            similar_decisions: similar,
            applicable_skills,
            warnings,
            risk_score: round(risk_score),
            firewall_status: firewall.as_str().to_owned(),
            causal_context,
            markdown: String::new(),
        };
        view.markdown = markdown(&view);
        Ok(view)
    }
}

fn percent(value: f64) -> String {
    format!("{:.0}%", value * 100.0)
}

fn status_words(status: &str) -> &'static str {
    match status {
        "well_calibrated" => "Well calibrated",
        "overconfident" => "Overconfident",
        "underconfident" => "Underconfident",
        "miscalibrated" => "Miscalibrated",
        _ => "Insufficient data",
    }
}

/// The context as the markdown block of seed 000's "Message Formats", for a system prompt.
pub fn markdown(view: &ContextView) -> String {
    let calibration = &view.calibration_context;
    let mut out = String::from("## kenning decision context\n\n");
    let _ = writeln!(out, "**Module:** {}", calibration.module);
    let _ = writeln!(out, "**Team Success Rate:** {} ({} decisions)", percent(calibration.team_success_rate), calibration.sample_size);
    match (calibration.your_confidence, calibration.team_confidence) {
        (Some(yours), Some(team)) => {
            let _ = writeln!(out, "**Your Confidence:** {} vs Team Average: {}", percent(yours), percent(team));
        }
        (Some(yours), None) => {
            let _ = writeln!(out, "**Your Confidence:** {} (no outcomes recorded yet)", percent(yours));
        }
        (None, _) => {}
    }
    let gap = calibration.team_confidence.map(|team| team - calibration.team_success_rate);
    let status = status_words(&calibration.status);
    match gap.filter(|_| calibration.status != CalibrationStatus::InsufficientData.as_str()) {
        Some(gap) => {
            let _ = writeln!(out, "**Status:** {status} (gap: {gap:.2})");
        }
        None => {
            let _ = writeln!(out, "**Status:** {status}");
        }
    }
    if let Some(suggested) = calibration.suggested_confidence {
        let _ = writeln!(out, "**Suggested Confidence:** {}", percent(suggested));
    }
    let _ = writeln!(out, "**Firewall:** {} (risk {:.2})", view.firewall_status, view.risk_score);
    if !view.applicable_skills.is_empty() {
        out.push_str("\n### Applicable Skills:\n");
        for (number, skill) in view.applicable_skills.iter().enumerate() {
            let _ = writeln!(
                out,
                "{}. {} ({} confidence, {} of {} succeeded)",
                number + 1,
                skill.statement,
                percent(skill.confidence),
                skill.evidence.successes,
                skill.evidence.total_outcomes
            );
        }
    }
    if !view.similar_decisions.is_empty() {
        out.push_str("\n### Similar Decisions:\n");
        for decision in &view.similar_decisions {
            let line = match decision.success_rate {
                Some(score) if score >= 0.5 => format!("- ✅ {} ({} success)", decision.statement, percent(score)),
                Some(score) => format!("- ❌ {} ({} success)", decision.statement, percent(score)),
                None => format!("- ⏳ {} (no outcome yet)", decision.statement),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push_str("\n### Warnings:\n");
    if view.warnings.is_empty() {
        out.push_str("- none\n");
    }
    for warning in &view.warnings {
        let _ = writeln!(out, "- ⚠️ {} ({} severity)", warning.message, warning.severity);
    }
    if let Some(causal) = &view.causal_context
        && !causal.lessons_learned.is_empty()
    {
        out.push_str("\n### Lessons:\n");
        for lesson in &causal.lessons_learned {
            let _ = writeln!(out, "- {lesson}");
        }
    }
    out
}
