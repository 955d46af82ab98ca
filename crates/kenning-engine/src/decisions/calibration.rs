//! Calibration, guidance and anomalies: the core's statistics over a domain's outcomes.

use kenning_core::calibration::{Calibration, CalibrationStatus, Evidence, MIN_OUTCOMES, Trend, calibrate, guidance};
use kenning_core::decision::mining::{applicability, mine};
use kenning_core::decision::similarity::DecisionWords;
use kenning_core::decision::{Decision, Outcome};
use kenning_core::FieldError;

use super::views::{
    AllCalibrations, AnomaliesView, Anomaly, CalibrationReport, CalibrationSummary, CalibrationView, GuidanceView,
    PatternMatch, ReliabilityRow, TrendView,
};
use super::{DecisionDomain, DecisionService};
use crate::error::Result;
use crate::views::timestamp;

/// The module name calibration views use for all modules together.
pub const ALL_MODULES: &str = "all";

/// The evidence calibration counts: the confidence stated at capture against the outcome's
/// score. A decision captured without a confidence has nothing to calibrate and is left out.
pub(crate) fn evidence(outcomes: &[(Decision, Outcome)]) -> Vec<Evidence> {
    outcomes
        .iter()
        .filter_map(|(decision, outcome)| {
            decision.confidence.map(|stated_confidence| Evidence { stated_confidence, score: outcome.score, at: outcome.completed_at })
        })
        .collect()
}

/// What a calibration means, in a sentence or two.
pub(crate) fn recommendation(calibration: &Calibration) -> String {
    let (low, high) = calibration.credible_interval_95;
    let record = format!(
        "{} decisions succeeded at {:.0}% (95% credible interval {:.0}%-{:.0}%)",
        calibration.sample_size,
        calibration.mean_success * 100.0,
        low * 100.0,
        high * 100.0
    );
    let stated = calibration.mean_confidence.unwrap_or_default() * 100.0;
    let gap = calibration.confidence_gap.unwrap_or_default();
    match calibration.status {
        CalibrationStatus::InsufficientData => format!(
            "Only {} outcome(s) recorded; {MIN_OUTCOMES} are needed before calibration is judged. Keep recording outcomes.",
            calibration.sample_size
        ),
        CalibrationStatus::WellCalibrated => format!("Well calibrated: {record} against a stated {stated:.0}%. Keep doing what you are doing."),
        CalibrationStatus::Overconfident => format!(
            "Overconfident by {:.0} points: {record} but stated confidence averaged {stated:.0}%. State lower confidence here, or find out what goes wrong.",
            gap * 100.0
        ),
        CalibrationStatus::Underconfident => format!(
            "Underconfident by {:.0} points: {record} but stated confidence averaged {stated:.0}%. You can trust your decisions here more.",
            -gap * 100.0
        ),
        CalibrationStatus::Miscalibrated => format!(
            "Miscalibrated: {record} against a stated {stated:.0}% on average, but decision by decision the stated confidence lies {:.0} points outside what its own confidence band achieved, so high and low confidence do not tell success from failure here. Compare the reliability table's bins and state confidence from what each kind of decision achieved.",
            calibration.excess_calibration_error.unwrap_or_default() * 100.0
        ),
    }
}

pub(crate) fn calibration_view(module: &str, domain: &str, outcomes: &[(Decision, Outcome)]) -> (Calibration, CalibrationView) {
    let calibration = calibrate(&evidence(outcomes));
    let view = CalibrationView {
        module: module.to_owned(),
        domain: domain.to_owned(),
        sample_size: calibration.sample_size,
        success_rate: calibration.mean_success,
        mean_confidence: calibration.mean_confidence,
        confidence_gap: calibration.confidence_gap,
        status: calibration.status.to_string(),
        alpha: calibration.alpha,
        beta: calibration.beta,
        variance: calibration.variance,
        credible_interval_95: Some([calibration.credible_interval_95.0, calibration.credible_interval_95.1]),
        trend: Some(calibration.trend.to_string()),
        trend_detail: calibration.trend_detail.map(|detail| TrendView {
            earlier_outcomes: detail.earlier.count,
            earlier_success_rate: detail.earlier.mean_success,
            recent_outcomes: detail.recent.count,
            recent_success_rate: detail.recent.mean_success,
            probability_recent_better: detail.probability_recent_better,
        }),
        brier_score: calibration.brier_score,
        expected_calibration_error: calibration.expected_calibration_error,
        excess_calibration_error: calibration.excess_calibration_error,
        reliability: calibration
            .reliability
            .iter()
            .map(|bin| ReliabilityRow {
                lower: bin.lower,
                upper: bin.upper,
                count: bin.count,
                mean_confidence: bin.mean_confidence,
                observed_success: bin.observed_success,
            })
            .collect(),
        recommendation: recommendation(&calibration),
        last_updated: outcomes.iter().map(|(_, outcome)| outcome.completed_at).max().map(timestamp),
    };
    (calibration, view)
}

/// How `decision_calibration` is asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CalibrationQuery {
    /// module, all or guidance; chosen from the other fields when absent.
    pub mode: Option<String>,
    pub module: Option<String>,
    /// The confidence to give guidance on.
    pub confidence: Option<f64>,
    /// A proposed decision, to find mined patterns like it.
    pub statement: Option<String>,
    /// For `all`: only modules with at least this many outcomes; default 1.
    pub min_sample_size: Option<usize>,
    /// For `all`: module (default), success_rate, trend or variance.
    pub sort_by: Option<String>,
    pub domain: Option<String>,
    /// Whether views carry the trend (seed 000's `include_trend`); default true.
    pub include_trend: Option<bool>,
    /// Whether views carry the 95% credible interval (seed 000's `include_credible_interval`); default true.
    pub include_credible_interval: Option<bool>,
}

impl DecisionService {
    /// A module's outcomes, or every outcome with `module` absent; the module is checked.
    pub(crate) fn module_outcomes(&self, entry: &DecisionDomain, module: Option<&str>) -> Result<(String, Vec<(Decision, Outcome)>)> {
        match module {
            Some(module) => {
                let module = self.modules().parse("module", module)?;
                let outcomes = entry.store.outcomes(Some(&module))?;
                Ok((module, outcomes))
            }
            None => Ok((ALL_MODULES.to_owned(), entry.store.outcomes(None)?)),
        }
    }

    /// Answers `decision_calibration` in one of its three modes.
    pub fn calibration(&self, query: CalibrationQuery) -> Result<CalibrationReport> {
        let (domain, module) = self.module_given_as_domain(query.domain.clone(), query.module.clone());
        let query = CalibrationQuery { domain, module, ..query };
        let mut report = self.calibration_report(&query)?;
        if query.include_trend == Some(false) {
            report.drop_trend();
        }
        if query.include_credible_interval == Some(false) {
            report.drop_credible_interval();
        }
        Ok(report)
    }

    fn calibration_report(&self, query: &CalibrationQuery) -> Result<CalibrationReport> {
        let mode = match query.mode.as_deref().map(str::trim) {
            Some(mode @ ("module" | "all" | "guidance")) => mode.to_owned(),
            Some(other) => {
                return Err(FieldError::new("mode", "is not an allowed value", other, "use `module`, `all` or `guidance`").into());
            }
            None if query.confidence.is_some() => "guidance".to_owned(),
            None if query.module.is_some() => "module".to_owned(),
            None => "all".to_owned(),
        };
        let entry = self.entry(query.domain.as_deref())?;
        let mut report = CalibrationReport { mode: mode.clone(), calibration: None, all: None, guidance: None };
        match mode.as_str() {
            "module" => {
                let (module, outcomes) = self.module_outcomes(entry, query.module.as_deref())?;
                report.calibration = Some(calibration_view(&module, &entry.domain.to_string(), &outcomes).1);
            }
            "all" => report.all = Some(self.all_calibrations(entry, query.min_sample_size, query.sort_by.as_deref())?),
            _ => {
                let Some(confidence) = query.confidence else {
                    return Err(FieldError::new(
                        "confidence",
                        "is required for guidance",
                        serde_json::Value::Null,
                        "pass the confidence you are about to state, e.g. confidence: 0.8",
                    )
                    .into());
                };
                report.guidance = Some(self.guidance(entry, query.module.as_deref(), confidence, query.statement.as_deref())?);
            }
        }
        Ok(report)
    }

    fn all_calibrations(&self, entry: &DecisionDomain, min_sample_size: Option<usize>, sort_by: Option<&str>) -> Result<AllCalibrations> {
        let domain = entry.domain.to_string();
        let outcomes = entry.store.outcomes(None)?;
        let mut modules: Vec<String> = self.modules().names().to_vec();
        for (decision, _) in &outcomes {
            if !modules.contains(&decision.module) {
                modules.push(decision.module.clone());
            }
        }
        let min_sample_size = min_sample_size.unwrap_or(1);
        let mut summaries: Vec<CalibrationSummary> = modules
            .iter()
            .map(|module| {
                let of_module: Vec<(Decision, Outcome)> =
                    outcomes.iter().filter(|(decision, _)| &decision.module == module).cloned().collect();
                let calibration = calibrate(&evidence(&of_module));
                CalibrationSummary {
                    module: module.clone(),
                    sample_size: calibration.sample_size,
                    success_rate: calibration.mean_success,
                    mean_confidence: calibration.mean_confidence,
                    confidence_gap: calibration.confidence_gap,
                    status: calibration.status.to_string(),
                    trend: Some(calibration.trend.to_string()),
                    variance: calibration.variance,
                    credible_interval_95: Some([calibration.credible_interval_95.0, calibration.credible_interval_95.1]),
                }
            })
            .filter(|summary| summary.sample_size >= min_sample_size)
            .collect();
        match sort_by.map(str::trim) {
            None | Some("module") => summaries.sort_by(|a, b| a.module.cmp(&b.module)),
            Some("success_rate") => summaries.sort_by(|a, b| b.success_rate.total_cmp(&a.success_rate)),
            Some("variance") => summaries.sort_by(|a, b| a.variance.total_cmp(&b.variance)),
            Some("trend") => summaries.sort_by_key(|summary| match summary.trend.as_deref().unwrap_or_default() {
                "declining" => 0,
                "stable" => 1,
                "improving" => 2,
                _ => 3,
            }),
            Some(other) => {
                return Err(FieldError::new("sort_by", "is not an allowed value", other, "use module, success_rate, trend or variance").into());
            }
        }
        let (overall_calibration, overall) = calibration_view(ALL_MODULES, &domain, &outcomes);
        Ok(AllCalibrations {
            domain,
            modules: summaries,
            last_updated: overall.last_updated.clone(),
            overall_calibration: match overall_calibration.status {
                CalibrationStatus::WellCalibrated => "good".to_owned(),
                other => other.to_string(),
            },
            overall,
        })
    }

    pub(crate) fn guidance(&self, entry: &DecisionDomain, module: Option<&str>, confidence: f64, statement: Option<&str>) -> Result<GuidanceView> {
        if !confidence.is_finite() || !(0.0..=1.0).contains(&confidence) {
            return Err(FieldError::new("confidence", "must be between 0 and 1", confidence.to_string(), "use e.g. confidence: 0.75").into());
        }
        let (module, outcomes) = self.module_outcomes(entry, module)?;
        let calibration = calibrate(&evidence(&outcomes));
        let advice = guidance(&calibration, confidence);
        let similar_patterns = match statement {
            Some(statement) => {
                let words = DecisionWords::new(statement, &[] as &[String]);
                let mut matches: Vec<PatternMatch> = mine(&outcomes)
                    .iter()
                    .map(|skill| (applicability(skill, &words), skill))
                    .filter(|(applies, _)| *applies > 0.0)
                    .map(|(applies, skill)| PatternMatch {
                        pattern: skill.statement.clone(),
                        kind: skill.kind.as_str().to_owned(),
                        success_rate: skill.success_rate,
                        confidence: skill.confidence,
                        applicability: super::views::round(applies),
                        recommendation: super::skills::skill_recommendation(skill),
                    })
                    .collect();
                matches.sort_by(|a, b| b.applicability.total_cmp(&a.applicability));
                matches
            }
            None => Vec::new(),
        };
        Ok(GuidanceView {
            module,
            status: if calibration.status == CalibrationStatus::InsufficientData { "no_data" } else { "data_available" }.to_owned(),
            sample_size: calibration.sample_size,
            actual_success_rate: calibration.mean_success,
            your_confidence: advice.proposed_confidence,
            confidence_gap: advice.proposed_confidence - calibration.mean_success,
            calibration_status: calibration.status.to_string(),
            suggested_confidence: advice.suggested_confidence,
            adjustment: advice.adjustment,
            shrinkage: advice.shrinkage,
            recommendation: advice.recommendation,
            credible_interval_95: Some([calibration.credible_interval_95.0, calibration.credible_interval_95.1]),
            similar_patterns,
        })
    }

    /// The calibration of one module, or of all outcomes followed by each module that has any,
    /// as the core computes it (for charts).
    pub fn calibrations(&self, module: Option<&str>, domain: Option<&str>) -> Result<Vec<(String, Calibration)>> {
        let entry = self.entry(domain)?;
        if let Some(module) = module {
            let (module, outcomes) = self.module_outcomes(entry, Some(module))?;
            return Ok(vec![(module, calibrate(&evidence(&outcomes)))]);
        }
        let outcomes = entry.store.outcomes(None)?;
        let mut modules: Vec<String> = outcomes.iter().map(|(decision, _)| decision.module.clone()).collect();
        modules.sort();
        modules.dedup();
        let mut calibrations = vec![(ALL_MODULES.to_owned(), calibrate(&evidence(&outcomes)))];
        for module in modules {
            let of_module: Vec<(Decision, Outcome)> = outcomes.iter().filter(|(decision, _)| decision.module == module).cloned().collect();
            calibrations.push((module, calibrate(&evidence(&of_module))));
        }
        Ok(calibrations)
    }

    /// Modules (and the whole record) whose success rate dropped or that are overconfident.
    pub fn anomalies(&self, domain: Option<&str>) -> Result<AnomaliesView> {
        let entry = self.entry(domain)?;
        let outcomes = entry.store.outcomes(None)?;
        let mut modules: Vec<String> = Vec::new();
        for (decision, _) in &outcomes {
            if !modules.contains(&decision.module) {
                modules.push(decision.module.clone());
            }
        }
        modules.sort();
        modules.push(ALL_MODULES.to_owned());
        let mut anomalies = Vec::new();
        for module in modules {
            let of_module: Vec<(Decision, Outcome)> =
                outcomes.iter().filter(|(decision, _)| module == ALL_MODULES || decision.module == module).cloned().collect();
            let calibration = calibrate(&evidence(&of_module));
            if let (Trend::Declining, Some(detail)) = (calibration.trend, calibration.trend_detail) {
                anomalies.push(Anomaly {
                    module: module.clone(),
                    kind: "success_rate_dropped".to_owned(),
                    message: format!(
                        "Success rate fell from {:.0}% over the earlier {} outcomes to {:.0}% over the recent {} (probability the recent rate is better: {:.3}).",
                        detail.earlier.mean_success * 100.0,
                        detail.earlier.count,
                        detail.recent.mean_success * 100.0,
                        detail.recent.count,
                        detail.probability_recent_better
                    ),
                });
            }
            if matches!(calibration.status, CalibrationStatus::Overconfident | CalibrationStatus::Miscalibrated) {
                anomalies.push(Anomaly { module: module.clone(), kind: calibration.status.to_string(), message: recommendation(&calibration) });
            }
        }
        Ok(AnomaliesView { domain: entry.domain.to_string(), anomalies })
    }
}
