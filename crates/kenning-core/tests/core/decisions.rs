//! Decisions: transitions, modules, patterns, mined skills and the firewall's arithmetic.

use chrono::{Duration, TimeZone, Utc};
use kenning_core::calibration::{calibrate, Evidence};
use kenning_core::decision::input::{build_decision, build_outcome};
use kenning_core::decision::mining::{group_patterns, mine, Severity, SkillKind};
use kenning_core::decision::warnings::{assess, Firewall, Proposal, WarningKind};
use kenning_core::decision::{
    CaptureDecision, Decision, DecisionId, DecisionRecord, DecisionStatus, ModuleList, Outcome, OutcomeInput, RiskLevel,
};

/// A decision in `module` made `minute` minutes in, and its outcome.
fn decided(minute: i64, statement: &str, module: &str, alternative: &str, confidence: f64, score: f64) -> (Decision, Outcome) {
    let at = Utc.with_ymd_and_hms(2026, 4, 1, 9, 0, 0).unwrap() + Duration::minutes(minute);
    let input = CaptureDecision {
        statement: statement.into(),
        alternatives: Some(vec![alternative.into()]),
        confidence: Some(confidence),
        module: Some(module.into()),
        ..CaptureDecision::default()
    };
    let decision = build_decision(input, &ModuleList::default(), DecisionId::parse(&format!("dec_{minute}")).unwrap(), at).unwrap();
    let record = DecisionRecord { decision, signals: Vec::new(), outcome: None };
    let status = if score >= 1.0 { "success" } else if score <= 0.0 { "failure" } else { "partial" };
    let input = OutcomeInput { final_status: status.into(), final_score: Some(score), ..OutcomeInput::default() };
    let (outcome, decision) = build_outcome(input, &record, format!("out_{minute}"), at + Duration::minutes(1)).unwrap();
    (decision, outcome)
}

#[test]
fn statuses_move_forward_only() {
    use DecisionStatus::*;
    for (from, to, allowed) in [
        (Pending, Executed, true),
        (Pending, Completed, false),
        (Executed, Completed, true),
        (Executed, Failed, true),
        (Executed, Reworked, true),
        (Executed, Pending, false),
        (Completed, Reworked, false),
        (Failed, Failed, true),
    ] {
        assert_eq!(from.transition(to).is_ok(), allowed, "{from} -> {to}");
    }
    let error = Failed.transition(Executed).unwrap_err();
    assert_eq!((error.field.as_str(), error.received.clone()), ("status", serde_json::json!("executed")));
    assert!(error.suggestion.contains("final"), "{}", error.suggestion);
}

#[test]
fn modules_are_configured_and_near_misses_suggested() {
    let modules = ModuleList::new(["payments", "Search", "payments"]).unwrap();
    assert_eq!(modules.names(), ["payments", "search"]);
    assert_eq!(modules.parse("module", " PAYMENTS ").unwrap(), "payments");
    let error = modules.parse("module", "paymnts").unwrap_err();
    assert!(error.suggestion.starts_with("did you mean `payments`?"), "{}", error.suggestion);
    assert_eq!(ModuleList::new(["bad name"]).unwrap_err().field, "modules");
    assert_eq!(ModuleList::new(Vec::<String>::new()).unwrap_err().problem, "is empty");
    assert_eq!(ModuleList::default().names().len(), 6);
}

#[test]
fn patterns_form_around_their_first_decision_and_never_across_a_contrast() {
    let evidence = vec![
        decided(3, "Use PostgreSQL for the billing service", "database", "MySQL", 0.8, 1.0),
        decided(1, "Use PostgreSQL for the orders service", "database", "MongoDB", 0.8, 1.0),
        decided(2, "Use MongoDB for the orders service", "database", "PostgreSQL", 0.8, 0.0),
        decided(4, "Use PostgreSQL for the orders service", "api", "MongoDB", 0.8, 1.0),
        decided(5, "Use PostgreSQL for the reporting warehouse jobs", "database", "BigQuery", 0.8, 1.0),
    ];
    let groups: Vec<Vec<usize>> = group_patterns(&evidence).into_iter().map(|pattern| pattern.members).collect();
    // By time: orders (1) anchors a pattern; MongoDB for orders (2) chose what it rejected;
    // billing (3) joins orders (Dice 4/6); the api one is another module; the warehouse
    // shares only `postgresql` (Dice 2/8) with the orders anchor.
    assert_eq!(groups, [vec![1, 0], vec![2], vec![3], vec![4]]);
}

#[test]
fn mined_confidence_is_a_lower_credible_bound() {
    let pattern = |scores: &[f64]| -> Vec<(Decision, Outcome)> {
        scores.iter().enumerate().map(|(n, score)| decided(n as i64, &format!("Use PostgreSQL for the service {n}"), "database", "MongoDB", 0.8, *score)).collect()
    };
    assert!(mine(&pattern(&[1.0, 1.0])).is_empty(), "two outcomes are not a pattern");
    // 3 of 3: the 5% quantile of Beta(4, 1) is 0.05^(1/4).
    let three = mine(&pattern(&[1.0, 1.0, 1.0]));
    assert_eq!((three[0].kind, three[0].id.as_str()), (SkillKind::Skill, "sk_0"));
    assert!((three[0].confidence - 0.05f64.powf(0.25)).abs() < 1e-12);
    // Partial outcomes count as their score: 1 + 0.5 + 0.5 = 2 of 3, still a skill, Beta(3, 2).
    let partial = mine(&pattern(&[1.0, 0.5, 0.5]));
    assert_eq!((partial[0].successes, partial[0].weighted_successes), (1, 2.0));
    assert!((partial[0].confidence - kenning_core::beta_quantile(0.05, 3.0, 2.0)).abs() < 1e-12);
    // 0 of 3 fails: the failure rate's bound is 0.05^(1/4) = 0.47, not above one half: medium.
    let failed = mine(&pattern(&[0.0, 0.0, 0.0]));
    assert_eq!((failed[0].kind, failed[0].severity, failed[0].id.as_str()), (SkillKind::Antipattern, Some(Severity::Medium), "ap_0"));
    // 0 of 4: 0.05^(1/5) = 0.55, above one half: high.
    assert_eq!(mine(&pattern(&[0.0, 0.0, 0.0, 0.0]))[0].severity, Some(Severity::High));
}

#[test]
fn the_risk_score_combines_warnings_as_independent_chances() {
    let past: Vec<(Decision, Outcome)> = (0..4)
        .map(|n| decided(n, &format!("Store sessions in Redis for app {n}"), "auth", "Signed cookies", 0.9, 0.0))
        .collect();
    let evidence: Vec<Evidence> = past
        .iter()
        .map(|(decision, outcome)| Evidence { stated_confidence: decision.confidence.expect("stated"), score: outcome.score, at: outcome.completed_at })
        .collect();
    let calibration = calibrate(&evidence);
    let mined = mine(&past);
    let alternatives = vec!["Signed cookies".to_owned()];
    let redis = Proposal { statement: "Store sessions in Redis for app 9", confidence: None, alternatives: None, risk_level: None };
    // Antipattern 0 of 4 (high, 0.5) alone: caution.
    let one = assess(&redis, &calibration, &mined, &past);
    assert_eq!(one.warnings.iter().map(|w| w.kind).collect::<Vec<_>>(), [WarningKind::Antipattern]);
    assert_eq!((one.risk_score, one.firewall), (0.5, Firewall::Caution));
    // With overconfidence (high) and one alternative (low): 1 - 0.5 · 0.5 · 0.9 = 0.775, block.
    let sure = Proposal { confidence: Some(0.9), alternatives: Some(&alternatives), risk_level: Some(RiskLevel::Low), ..redis };
    let three = assess(&sure, &calibration, &mined, &past);
    assert!((three.risk_score - 0.775).abs() < 1e-12);
    assert_eq!(three.firewall, Firewall::Block);
    assert_eq!(three.warnings.last().unwrap().kind, WarningKind::SingleAlternative);
    // Something unrelated in an empty module, high risk: medium alone is 0.3, caution.
    let empty = calibrate(&[]);
    let fresh = Proposal { statement: "Adopt Bazel for builds", confidence: Some(0.7), alternatives: None, risk_level: Some(RiskLevel::High) };
    let alone = assess(&fresh, &empty, &[], &[]);
    assert_eq!((alone.warnings.len(), alone.risk_score, alone.firewall), (1, 0.3, Firewall::Caution));
    let calm = Proposal { risk_level: Some(RiskLevel::Medium), ..fresh };
    assert_eq!(assess(&calm, &empty, &[], &[]).firewall, Firewall::Ok);
}
