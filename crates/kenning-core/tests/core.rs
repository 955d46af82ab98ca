//! The core's behaviour: URNs, validation errors, version history, duplicate keys and the
//! calibration statistics (against a SciPy reference and hand-worked examples); the claim rule
//! in `core/claim.rs`.

#[path = "core/claim.rs"]
mod claim;

use chrono::{TimeZone, Utc};
use kenning_core::input::{apply_update, build_memory, change_status};
use kenning_core::{CaptureInput, Domain, MemoryId, MemoryUrn, Namespace, Status, UpdateInput, Urn};
use proptest::prelude::*;

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 8, 13, 56, 0).unwrap()
}

fn capture(content: &str) -> CaptureInput {
    CaptureInput { content: content.to_owned(), namespace: Some("learnings".into()), ..CaptureInput::default() }
}

fn memory(content: &str) -> kenning_core::Memory {
    build_memory(capture(content), Domain::User, MemoryId::parse("m1").unwrap(), now()).unwrap()
}

fn domain_strategy() -> impl Strategy<Value = Domain> {
    prop_oneof![
        Just(Domain::User),
        "[A-Za-z0-9._-]{1,40}".prop_map(Domain::Project),
        "[A-Za-z0-9._-]{1,40}".prop_map(Domain::Org),
    ]
}

proptest! {
    #[test]
    fn memory_urns_round_trip(
        domain in domain_strategy(),
        namespace in "[a-z0-9][a-z0-9-]{0,30}",
        id in "[A-Za-z0-9._:-]{1,60}",
    ) {
        let urn = MemoryUrn::new(domain, Namespace::parse(&namespace).unwrap(), MemoryId::parse(&id).unwrap());
        let text = urn.to_string();
        prop_assert_eq!(MemoryUrn::parse("urn", &text).unwrap(), urn.clone());
        prop_assert_eq!(Urn::parse("urn", &text).unwrap().to_string(), text.clone());
        let legacy = text.replacen("kenning://", "subcog://", 1);
        prop_assert_eq!(MemoryUrn::parse("urn", &legacy).unwrap(), urn);
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in ".{0,80}") {
        let _ = Urn::parse("urn", &text);
        let _ = Namespace::parse(&text);
    }
}

#[test]
fn urn_levels_parse_to_domain_namespace_and_memory() {
    assert_eq!(Urn::parse("uri", "kenning://user").unwrap(), Urn::Domain(Domain::User));
    assert_eq!(
        Urn::parse("uri", "kenning://org:acme-corp/standards").unwrap(),
        Urn::Namespace(Domain::Org("acme-corp".into()), Namespace::parse("standards").unwrap())
    );
    let Urn::Memory(urn) = Urn::parse("uri", "subcog://project:my-app/decisions/abc1234:0").unwrap() else {
        panic!("expected a memory URN");
    };
    assert_eq!(urn.to_string(), "kenning://project:my-app/decisions/abc1234:0");
}

#[test]
fn bad_urns_name_the_problem() {
    let cases = [
        ("http://user/learnings/x", "does not start with `kenning://` (or `subcog://`)", "http://user/learnings/x"),
        ("kenning://team/learnings/x", "is not a known domain", "team"),
        ("kenning://project:/learnings/x", "has an id that is empty or holds characters other than [A-Za-z0-9._-]", "project:"),
        ("kenning://user/Learnings/x", "must be lower-case letters, digits and hyphens (1-64 characters, not starting with a hyphen)", "Learnings"),
        ("kenning://user/learnings/x/y", "has too many path segments", "kenning://user/learnings/x/y"),
    ];
    for (text, problem, received) in cases {
        let error = Urn::parse("urn", text).unwrap_err();
        assert_eq!((error.field.as_str(), error.problem.as_str()), ("urn", problem), "{text}");
        assert_eq!(error.received, serde_json::json!(received), "{text}");
    }
    let error = MemoryUrn::parse("uri", "kenning://user/learnings").unwrap_err();
    assert_eq!(error.problem, "addresses a domain or namespace, not one memory");
}

#[test]
fn validation_errors_carry_field_problem_received_and_suggestion() {
    let cases: Vec<(CaptureInput, &str, &str, serde_json::Value, &str)> = vec![
        (capture(""), "content", "is empty", "".into(), "write the knowledge"),
        (CaptureInput { confidence: Some(1.5), ..capture("x") }, "confidence", "must be between 0 and 1", 1.5.into(), "use confidence: 1.0"),
        (CaptureInput { salience: Some(-0.1), ..capture("x") }, "salience", "must be between 0 and 1", (-0.1).into(), "use salience: 0.0"),
        (CaptureInput { kind: Some("semantc".into()), ..capture("x") }, "kind", "is not an allowed value", "semantc".into(), "did you mean `semantic`?"),
        (CaptureInput { source: Some("user".into()), ..capture("x") }, "source", "is not an allowed value", "user".into(), "use one of: direct-observation"),
        (CaptureInput { namespace: Some("Tech Debt".into()), ..capture("x") }, "namespace", "must be lower-case", "Tech Debt".into(), "`tech-debt`"),
        (CaptureInput { namespace: Some("Learnigs".into()), ..capture("x") }, "namespace", "must be lower-case", "Learnigs".into(), "did you mean `learnings`?"),
        (CaptureInput { tags: vec!["two words".into()], ..capture("x") }, "tags", "holds a tag", "two words".into(), "`two-words`"),
        (CaptureInput { event_time: Some("last May".into()), ..capture("x") }, "event_time", "is not an RFC 3339", "last May".into(), "2026-05-08"),
        (
            CaptureInput { links: vec![kenning_core::LinkInput { target: "nope".into(), relation: None }], ..capture("x") },
            "links.target", "does not start with", "nope".into(), "kenning://",
        ),
    ];
    for (input, field, problem, received, suggestion) in cases {
        let error = build_memory(input, Domain::User, MemoryId::parse("m1").unwrap(), now()).unwrap_err();
        assert_eq!(error.field, field);
        assert!(error.problem.starts_with(problem), "{field}: {}", error.problem);
        assert_eq!(error.received, received, "{field}");
        assert!(error.suggestion.contains(suggestion), "{field}: {}", error.suggestion);
    }
}

#[test]
fn user_defined_namespaces_are_valid_but_near_misses_are_spotted() {
    assert_eq!(Namespace::parse("learnigs").unwrap().near_built_in(), Some("learnings"));
    assert_eq!(Namespace::parse("release-notes").unwrap().near_built_in(), None);
    assert_eq!(Namespace::parse("learnings").unwrap().near_built_in(), None);
}

#[test]
fn capture_defaults_follow_namespace_and_source() {
    let memory = build_memory(
        CaptureInput { content: "# Pool size\nUse 20 connections".into(), source: Some("told-by-user".into()), namespace: Some("patterns".into()), tags: vec![" DB ".into(), "db".into()], ..CaptureInput::default() },
        Domain::User,
        MemoryId::parse("m1").unwrap(),
        now(),
    )
    .unwrap();
    assert_eq!(memory.title, "Pool size");
    assert_eq!(memory.kind, kenning_core::MemoryKind::Procedural);
    assert_eq!(memory.confidence, 0.9);
    assert_eq!(memory.tags, ["db"]);
    assert_eq!((memory.version, memory.status), (1, Status::Active));
}

#[test]
fn every_update_keeps_the_previous_version_with_its_reason() {
    let first = memory("Use 10 connections");
    let later = now() + chrono::Duration::hours(1);
    let (second, v1) = apply_update(
        &first,
        UpdateInput { content: Some("Use 20 connections".into()), reason: "load test showed 10 is too few".into(), ..UpdateInput::default() },
        later,
    )
    .unwrap();
    assert_eq!((second.version, second.content.as_str(), second.updated_at), (2, "Use 20 connections", later));
    assert_eq!((v1.version, v1.reason.as_str(), v1.superseded_at), (1, "load test showed 10 is too few", later));
    assert_eq!(v1.memory, first);

    let (third, v2) = change_status(&second, Status::Forgotten, "pool removed", later).unwrap().unwrap();
    assert_eq!((third.version, third.status, v2.version), (3, Status::Forgotten, 2));
    assert!(change_status(&third, Status::Forgotten, "again", later).unwrap().is_none());
}

#[test]
fn updates_need_a_reason_and_a_change() {
    let first = memory("Use 10 connections");
    let error = apply_update(&first, UpdateInput { content: Some("x".into()), ..UpdateInput::default() }, now()).unwrap_err();
    assert_eq!(error.field, "reason");
    let error = apply_update(&first, UpdateInput { content: Some(first.content.clone()), reason: "no-op".into(), ..UpdateInput::default() }, now()).unwrap_err();
    assert_eq!(error.field, "update");
}

#[test]
fn duplicate_key_depends_on_namespace_and_trimmed_content_only() {
    let a = memory("Use 10 connections");
    let mut b = memory("  Use 10 connections\n");
    b.title = "different title".into();
    b.tags = vec!["other".into()];
    assert_eq!(a.content_hash(), b.content_hash());
    b.namespace = Namespace::parse("patterns").unwrap();
    assert_ne!(a.content_hash(), b.content_hash());
}

#[test]
fn memories_serialise_with_urn_friendly_fields() {
    let memory = memory("Use 10 connections");
    let json = serde_json::to_value(&memory).unwrap();
    assert_eq!(json["domain"], "user");
    assert_eq!(json["namespace"], "learnings");
    assert_eq!(json["kind"], "semantic");
    assert_eq!(json["source"], "model-generated");
    let back: kenning_core::Memory = serde_json::from_value(json).unwrap();
    assert_eq!(back, memory);
}

mod calibration {
    use chrono::{DateTime, Duration, TimeZone, Utc};
    use kenning_core::calibration::{reliability, SHRINKAGE_OUTCOMES};
    use kenning_core::{
        CalibrationStatus, Evidence, Trend, beta_cdf, beta_quantile, brier_score, calibrate, guidance,
        lower_credible_bound,
    };
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Reference {
        start: DateTime<Utc>,
        beta_cdf: Vec<CdfCase>,
        beta_quantile: Vec<QuantileCase>,
        brier_score: Vec<BrierCase>,
        lower_credible_bound: Vec<BoundCase>,
        calibrations: Vec<CalibrationCase>,
    }
    #[derive(Deserialize)]
    struct CdfCase {
        x: f64,
        a: f64,
        b: f64,
        cdf: f64,
    }
    #[derive(Deserialize)]
    struct QuantileCase {
        p: f64,
        a: f64,
        b: f64,
        quantile: f64,
    }
    #[derive(Deserialize)]
    struct BrierCase {
        pairs: Vec<(f64, f64)>,
        brier: Option<f64>,
    }
    #[derive(Deserialize)]
    struct BoundCase {
        successes: f64,
        total: f64,
        level: f64,
        bound: f64,
    }
    #[derive(Deserialize)]
    struct CalibrationCase {
        name: String,
        pattern: Vec<(f64, f64)>,
        repeat: usize,
        expected: serde_json::Value,
    }

    fn reference() -> Reference {
        serde_json::from_str(include_str!("fixtures/calibration_reference.json")).unwrap()
    }

    /// Relative error, with values below 1e-290 (where SciPy and we both underflow) compared absolutely.
    fn relative_error(got: f64, want: f64) -> f64 {
        (got - want).abs() / want.abs().max(1e-290)
    }

    #[test]
    fn beta_functions_match_the_scipy_reference() {
        let reference = reference();
        let mut worst_cdf = (0.0, String::new());
        for case in &reference.beta_cdf {
            let error = relative_error(beta_cdf(case.x, case.a, case.b), case.cdf);
            if error > worst_cdf.0 {
                worst_cdf = (error, format!("I_{}({}, {})", case.x, case.a, case.b));
            }
        }
        let mut worst_quantile = (0.0, String::new());
        for case in &reference.beta_quantile {
            let error = relative_error(beta_quantile(case.p, case.a, case.b), case.quantile);
            if error > worst_quantile.0 {
                worst_quantile = (error, format!("quantile {} of Beta({}, {})", case.p, case.a, case.b));
            }
        }
        eprintln!(
            "worst relative error: cdf {:.1e} at {} ({} cases), quantile {:.1e} at {} ({} cases)",
            worst_cdf.0,
            worst_cdf.1,
            reference.beta_cdf.len(),
            worst_quantile.0,
            worst_quantile.1,
            reference.beta_quantile.len()
        );
        assert!(worst_cdf.0 < 1e-10, "cdf: {worst_cdf:?}");
        assert!(worst_quantile.0 < 1e-10, "quantile: {worst_quantile:?}");

        for case in &reference.lower_credible_bound {
            let bound = lower_credible_bound(case.successes, case.total, case.level);
            assert!(relative_error(bound, case.bound) < 1e-12, "{} of {} at {}", case.successes, case.total, case.level);
        }
        for case in &reference.brier_score {
            match (brier_score(&case.pairs), case.brier) {
                (Some(got), Some(want)) => assert!((got - want).abs() < 1e-15, "{:?}", case.pairs),
                (got, want) => assert_eq!(got, want),
            }
        }
    }

    #[test]
    fn calibrations_match_the_scipy_reference() {
        let reference = reference();
        for case in &reference.calibrations {
            let evidence: Vec<Evidence> = (0..case.repeat)
                .flat_map(|_| case.pattern.iter())
                .enumerate()
                .map(|(i, &(stated_confidence, score))| Evidence {
                    stated_confidence,
                    score,
                    at: reference.start + Duration::hours(i as i64),
                })
                .collect();
            let got = serde_json::to_value(calibrate(&evidence)).unwrap();
            let want = &case.expected;
            let name = &case.name;
            for field in ["sample_size", "status", "trend"] {
                assert_eq!(got[field], want[field], "{name}: {field}");
            }
            let close = |got: &serde_json::Value, want: &serde_json::Value, tolerance: f64, what: &str| match want.as_f64() {
                Some(want) => {
                    let got = got.as_f64().unwrap_or_else(|| panic!("{name}: {what} is {got}"));
                    assert!(relative_error(got, want) < tolerance, "{name}: {what} is {got}, SciPy says {want}");
                }
                None => assert!(got.is_null(), "{name}: {what} is {got}, expected null"),
            };
            for field in ["alpha", "beta", "mean_success", "variance", "mean_confidence", "brier_score"] {
                close(&got[field], &want[field], 1e-12, field);
            }
            // Differences of nearly equal sums lose relative precision to cancellation (a 2-point
            // gap over 10,000 outcomes): they are compared absolutely.
            for field in ["confidence_gap", "expected_calibration_error", "excess_calibration_error"] {
                match (got[field].as_f64(), want[field].as_f64()) {
                    (Some(got), Some(want)) => assert!((got - want).abs() < 1e-12, "{name}: {field} is {got}, SciPy says {want}"),
                    (got, want) => assert_eq!(got, want, "{name}: {field}"),
                }
            }
            close(&got["credible_interval_95"][0], &want["credible_interval_95"][0], 1e-12, "interval low");
            close(&got["credible_interval_95"][1], &want["credible_interval_95"][1], 1e-12, "interval high");
            // Tanh-sinh quadrature against SciPy's adaptive quadrature.
            close(&got["trend_detail"]["probability_recent_better"], &want["probability_recent_better"], 1e-10, "trend probability");
            let bins = got["reliability"].as_array().unwrap();
            assert_eq!(bins.len(), 10);
            for (i, (got, want)) in bins.iter().zip(want["reliability"].as_array().unwrap()).enumerate() {
                assert_eq!(got["count"], want["count"], "{name}: bin {i}");
                for field in ["lower", "upper", "mean_confidence", "observed_success"] {
                    close(&got[field], &want[field], 1e-12, &format!("bin {i} {field}"));
                }
            }
        }
    }

    fn at(hour: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap() + Duration::hours(hour)
    }

    /// Twelve database decisions, worked by hand: confidences sum to 9.8, scores to 9.
    fn twelve_database_outcomes() -> Vec<Evidence> {
        let outcomes = [
            (0.9, 1.0),
            (0.8, 0.0),
            (0.85, 1.0),
            (0.7, 0.5),
            (0.9, 0.0),
            (0.8, 1.0),
            (0.75, 1.0),
            (0.8, 1.0),
            (0.9, 0.5),
            (0.85, 1.0),
            (0.7, 1.0),
            (0.85, 1.0),
        ];
        // Given newest first, to show that the trend orders by time and not by position.
        outcomes
            .iter()
            .enumerate()
            .rev()
            .map(|(hour, &(stated_confidence, score))| Evidence { stated_confidence, score, at: at(hour as i64) })
            .collect()
    }

    fn assert_close(got: f64, want: f64, what: &str) {
        assert!((got - want).abs() < 1e-12, "{what}: got {got}, want {want}");
    }

    #[test]
    fn twelve_outcomes_worked_by_hand() {
        let calibration = calibrate(&twelve_database_outcomes());
        assert_eq!(calibration.sample_size, 12);
        // Prior Beta(1, 1) plus 9 (8 successes and two halves) and 3 (two failures and two halves).
        assert_eq!((calibration.alpha, calibration.beta), (10.0, 4.0));
        assert_close(calibration.mean_success, 10.0 / 14.0, "mean success");
        assert_close(calibration.variance, 40.0 / (14.0 * 14.0 * 15.0), "variance");
        // Beta(10, 4) quantiles (SciPy: 0.46186846, 0.90907961).
        let (low, high) = calibration.credible_interval_95;
        assert!((low - 0.46186846).abs() < 1e-8 && (high - 0.90907961).abs() < 1e-8, "{low}, {high}");
        assert_close(calibration.mean_confidence.unwrap(), 9.8 / 12.0, "mean confidence");
        // The gap is not zero: 0.8167 stated against 0.7143 achieved.
        assert_close(calibration.confidence_gap.unwrap(), 9.8 / 12.0 - 10.0 / 14.0, "gap");
        assert!(calibration.confidence_gap.unwrap() > 0.1);
        // 0.8167 lies inside [0.4619, 0.9091].
        assert_eq!(calibration.status, CalibrationStatus::WellCalibrated);
        // Squared differences sum to 1.96.
        assert_close(calibration.brier_score.unwrap(), 1.96 / 12.0, "brier");
        // Earlier half (hours 0-5) scores 3.5 of 6, recent half 5.5 of 6: better, but with
        // P(recent > earlier) = 0.881 (SciPy quadrature) not clearly so.
        let detail = calibration.trend_detail.unwrap();
        assert_eq!((detail.earlier.count, detail.recent.count), (6, 6));
        assert_close(detail.earlier.mean_success, 4.5 / 8.0, "earlier");
        assert_close(detail.recent.mean_success, 6.5 / 8.0, "recent");
        assert!((detail.probability_recent_better - 0.8811872489689825).abs() < 1e-10, "{detail:?}");
        assert_eq!(calibration.trend, Trend::Stable);

        let occupied: Vec<(f64, usize, f64, f64)> = calibration
            .reliability
            .iter()
            .filter(|bin| bin.count > 0)
            .map(|bin| (bin.lower, bin.count, bin.mean_confidence.unwrap(), bin.observed_success.unwrap()))
            .collect();
        let want = [(0.7, 3, 2.15 / 3.0, 2.5 / 3.0), (0.8, 6, 4.95 / 6.0, 5.0 / 6.0), (0.9, 3, 0.9, 0.5)];
        assert_eq!(occupied.len(), want.len());
        for (got, want) in occupied.iter().zip(want) {
            assert_eq!((got.0, got.1), (want.0, want.1));
            assert_close(got.2, want.2, "bin confidence");
            assert_close(got.3, want.3, "bin success");
        }

        // Bin by bin, only the 0.9 bin (1.5 of 3, Beta(2.5, 2.5)) has its stated confidence a
        // little above its own interval: an excess far under the margin.
        let excess = calibration.excess_calibration_error.unwrap();
        assert!(excess > 0.0 && excess < 0.01, "{excess}");
        assert_close(calibration.expected_calibration_error.unwrap(), (0.35 + 0.05 + 1.2) / 12.0, "ece");

        // Proposing 0.9: the record supports the observed 9/12 - 0.9 = -0.15, shrunk once by
        // 12 / (12 + 10); the posterior mean 10/14, already pulled toward 0.5, is not used.
        assert_eq!(SHRINKAGE_OUTCOMES, 10.0);
        let advice = guidance(&calibration, 0.9);
        assert_close(advice.shrinkage, 12.0 / 22.0, "shrinkage");
        assert_close(advice.adjustment.unwrap(), 12.0 / 22.0 * (0.75 - 0.9), "adjustment");
        assert_close(advice.suggested_confidence.unwrap(), 0.9 + 12.0 / 22.0 * (0.75 - 0.9), "suggestion");
        assert_eq!(advice.status, CalibrationStatus::WellCalibrated);
        assert_eq!(
            advice.recommendation,
            "12 decisions succeeded at 71% (95% credible interval 46%-91%) while stated confidence averaged 82%: \
             well calibrated (within the interval or the 5-point margin). For this decision consider 0.82 instead of 0.90 \
             (-0.08: the observed success of 75% minus 0.90, weighted 0.55 for 12 outcomes)."
        );
        // A proposal at the observed success needs no change.
        let advice = guidance(&calibration, 0.75);
        assert!(advice.adjustment.unwrap().abs() < 0.005);
        assert!(advice.recommendation.ends_with("0.75 fits the record; keep it."), "{}", advice.recommendation);
    }

    #[test]
    fn overconfidence_is_named_and_corrected_downwards() {
        let evidence: Vec<Evidence> = [0.0, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 1.0]
            .iter()
            .enumerate()
            .map(|(hour, &score)| Evidence { stated_confidence: 0.9, score, at: at(hour as i64) })
            .collect();
        let calibration = calibrate(&evidence);
        // Beta(3.5, 6.5): mean 0.35, interval well below 0.9.
        assert_close(calibration.mean_success, 0.35, "mean");
        assert_eq!(calibration.status, CalibrationStatus::Overconfident);
        assert_close(calibration.confidence_gap.unwrap(), 0.55, "gap");
        let advice = guidance(&calibration, 0.95);
        // 8 / 18 of (2.5 / 8 - 0.95).
        assert_close(advice.adjustment.unwrap(), (0.3125 - 0.95) * 8.0 / 18.0, "adjustment");
        assert!(advice.recommendation.contains("overconfident by 55 points"), "{}", advice.recommendation);
        assert!(advice.recommendation.contains("consider 0.67 instead of 0.95"), "{}", advice.recommendation);
    }

    /// Regression: with the status decided by the average alone, 0.95 stated on every failure
    /// and 0.05 on every success, at 50% success, was "well calibrated" with a Brier score of 0.9.
    #[test]
    fn confidence_wrong_both_ways_is_miscalibrated_though_right_on_average() {
        let evidence: Vec<Evidence> = (0..50)
            .map(|i| {
                let failure = i % 2 == 0;
                Evidence { stated_confidence: if failure { 0.95 } else { 0.05 }, score: if failure { 0.0 } else { 1.0 }, at: at(i) }
            })
            .collect();
        let calibration = calibrate(&evidence);
        assert_close(calibration.confidence_gap.unwrap(), 0.0, "the averages agree");
        assert!(calibration.brier_score.unwrap() > 0.9);
        assert_eq!(calibration.status, CalibrationStatus::Miscalibrated);
        assert!(calibration.excess_calibration_error.unwrap() > 0.8, "{calibration:?}");
        let advice = guidance(&calibration, 0.95);
        assert!(advice.recommendation.contains("miscalibrated decision by decision"), "{}", advice.recommendation);
    }

    /// Regression: with no practical margin, a 2-point gap became "overconfident" once enough
    /// outcomes made it certain, though no decision would change for it.
    #[test]
    fn a_small_gap_with_many_outcomes_is_well_calibrated() {
        let evidence: Vec<Evidence> =
            (0..10_000).map(|i| Evidence { stated_confidence: 0.72, score: if i % 10 < 7 { 1.0 } else { 0.0 }, at: at(i) }).collect();
        let calibration = calibrate(&evidence);
        assert!(calibration.credible_interval_95.1 < 0.72, "the gap is certain: {:?}", calibration.credible_interval_95);
        assert_eq!(calibration.status, CalibrationStatus::WellCalibrated);
    }

    #[test]
    fn fewer_than_three_outcomes_give_facts_but_no_judgement() {
        let none = calibrate(&[]);
        assert_eq!((none.alpha, none.beta, none.mean_success), (1.0, 1.0, 0.5));
        assert_close(none.variance, 1.0 / 12.0, "prior variance");
        assert_close(none.credible_interval_95.0, 0.025, "prior interval");
        assert_close(none.credible_interval_95.1, 0.975, "prior interval");
        assert_eq!((none.mean_confidence, none.confidence_gap, none.brier_score), (None, None, None));
        assert_eq!((none.status, none.trend, none.trend_detail), (CalibrationStatus::InsufficientData, Trend::InsufficientData, None));
        assert!(none.reliability.iter().all(|bin| bin.count == 0 && bin.observed_success.is_none()));

        let two = calibrate(&[
            Evidence { stated_confidence: 0.9, score: 0.0, at: at(0) },
            Evidence { stated_confidence: 0.7, score: 0.0, at: at(1) },
        ]);
        assert_eq!(two.status, CalibrationStatus::InsufficientData);
        assert_close(two.confidence_gap.unwrap(), 0.8 - 0.25, "plain facts are still reported");
        let advice = guidance(&two, 0.8);
        assert_eq!((advice.adjustment, advice.suggested_confidence, advice.shrinkage), (None, None, 0.0));
        assert_eq!(advice.status, CalibrationStatus::InsufficientData);
        assert!(advice.recommendation.starts_with("Only 2 outcomes are recorded (3 are needed"), "{}", advice.recommendation);
        let json = serde_json::to_value(&advice).unwrap();
        assert_eq!(json["status"], "insufficient_data");
    }

    #[test]
    fn a_clear_change_over_time_is_a_trend() {
        let scores = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0];
        let forwards: Vec<Evidence> = scores
            .iter()
            .enumerate()
            .map(|(hour, &score)| Evidence { stated_confidence: 0.6, score, at: at(hour as i64) })
            .collect();
        // Beta(1, 5) earlier against Beta(5, 1) recent.
        let improving = calibrate(&forwards);
        assert_eq!(improving.trend, Trend::Improving);
        let backwards: Vec<Evidence> =
            forwards.iter().map(|e| Evidence { at: at(100) - (e.at - at(0)), ..*e }).collect();
        assert_eq!(calibrate(&backwards).trend, Trend::Declining);
        assert_eq!(calibrate(&forwards[..5]).trend, Trend::InsufficientData);
        let json = serde_json::to_value(&improving).unwrap();
        assert_eq!((json["trend"].as_str(), json["credible_interval_95"].as_array().map(Vec::len)), (Some("improving"), Some(2)));
    }

    #[test]
    fn skill_confidence_distrusts_short_records() {
        let short = lower_credible_bound(3.0, 3.0, 0.95);
        let long = lower_credible_bound(30.0, 30.0, 0.95);
        // Beta(4, 1) and Beta(31, 1) have closed-form quantiles: p^(1/a).
        assert_close(short, 0.05f64.powf(1.0 / 4.0), "3 of 3");
        assert_close(long, 0.05f64.powf(1.0 / 31.0), "30 of 30");
        assert!(short < 0.5 && long > 0.9);
    }

    #[test]
    fn beta_functions_invert_each_other_and_handle_the_edges() {
        for &(a, b) in &[(0.3, 0.7), (2.5, 40.0), (1e-3, 1.0), (5000.0, 20000.5), (1.0, 1.0)] {
            for &p in &[1e-9, 0.01, 0.5, 0.99, 1.0 - 1e-9] {
                let x = beta_quantile(p, a, b);
                let back = beta_cdf(x, a, b);
                assert!(relative_error(back, p) < 1e-9 || x == 0.0, "Beta({a}, {b}) at {p}: x = {x}, back {back}");
            }
        }
        assert_eq!((beta_cdf(0.0, 2.0, 3.0), beta_cdf(1.0, 2.0, 3.0), beta_cdf(-1.0, 2.0, 3.0)), (0.0, 1.0, 0.0));
        assert_eq!((beta_quantile(0.0, 2.0, 3.0), beta_quantile(1.0, 2.0, 3.0)), (0.0, 1.0));
        assert!(beta_cdf(0.5, 0.0, 1.0).is_nan() && beta_quantile(0.5, 1.0, -1.0).is_nan() && beta_quantile(f64::NAN, 1.0, 1.0).is_nan());
        // Beta(1, 1) is uniform; Beta(2, 1) has F(x) = x^2.
        assert_close(beta_quantile(0.3, 1.0, 1.0), 0.3, "uniform");
        assert_close(beta_cdf(0.3, 2.0, 1.0), 0.09, "x^2");
        let bins = reliability(&[(0.95, 1.0), (1.0, 0.0), (0.05, 0.0)]);
        assert_eq!((bins[9].count, bins[0].count), (2, 1));
    }
}

/// Decisions: transitions, modules, patterns, mined skills and the firewall's arithmetic.
mod decisions {
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
}

mod fusion {
    use kenning_core::search::{FUSION_SCALE_DEPTH, FusionList, score_fusion};

    type Scored = Vec<(&'static str, f64)>;
    /// A case: what it shows, the lists as (weight, hits, unlisted score), the fused result.
    type Case = (&'static str, Vec<(f64, Scored, Option<f64>)>, Scored);

    fn fused(lists: &[(f64, Scored, Option<f64>)]) -> Scored {
        let lists: Vec<FusionList<&str>> = lists
            .iter()
            .map(|(weight, hits, unlisted_score)| FusionList { weight: *weight, hits: hits.clone(), unlisted_score: *unlisted_score })
            .collect();
        score_fusion(&lists).into_iter().map(|(item, score)| (item, (score * 1000.0).round() / 1000.0)).collect()
    }

    #[test]
    fn scores_are_scaled_per_list_and_combined_by_weight() {
        let cases: &[Case] = &[
            (
                "a short list scales from its best down to its last, whatever its score range",
                vec![(0.5, vec![("a", 12.0), ("b", 9.0), ("c", 3.0)], None), (0.5, vec![("b", 0.71), ("c", 0.70), ("d", 0.61)], None)],
                vec![("b", 0.833), ("a", 0.5), ("c", 0.45), ("d", 0.0)],
            ),
            (
                "or down to the score of what it left out, when that is known",
                vec![(0.5, vec![("a", 12.0), ("b", 9.0), ("c", 3.0)], Some(0.0)), (0.5, vec![("b", 0.71), ("c", 0.70), ("d", 0.61)], None)],
                vec![("b", 0.875), ("c", 0.575), ("a", 0.5), ("d", 0.0)],
            ),
            (
                "a clear winner stays clear, where rank fusion would put it one step ahead",
                vec![(0.5, vec![("a", 20.0), ("b", 2.0), ("c", 1.0)], None), (0.5, vec![("b", 0.9), ("a", 0.2), ("c", 0.1)], None)],
                vec![("a", 0.563), ("b", 0.526), ("c", 0.0)],
            ),
            (
                "a list of one, or of equal scores, scales to 1",
                vec![(1.0, vec![("a", 3.0)], None), (0.5, vec![("b", 2.0), ("c", 2.0)], None)],
                vec![("a", 1.0), ("b", 0.5), ("c", 0.5)],
            ),
            ("empty lists add nothing", vec![(0.5, vec![], Some(0.0)), (0.5, vec![("a", 0.3), ("b", 0.1)], None)], vec![("a", 0.5), ("b", 0.0)]),
        ];
        for (name, lists, expected) in cases {
            assert_eq!(fused(lists), *expected, "{name}");
        }
    }

    #[test]
    fn the_scale_ends_at_a_fixed_depth_so_longer_lists_keep_the_same_top_scores() {
        let list = |length: usize| FusionList {
            weight: 1.0,
            hits: (0..length).map(|rank| (rank, 1000.0 - rank as f64)).collect(),
            unlisted_score: Some(0.0),
        };
        let short = score_fusion(&[list(FUSION_SCALE_DEPTH)]);
        let long = score_fusion(&[list(FUSION_SCALE_DEPTH * 3)]);
        assert_eq!(short, long[..FUSION_SCALE_DEPTH]);
        assert!(long[FUSION_SCALE_DEPTH..].iter().all(|(_, score)| *score == 0.0), "deeper hits are held at 0");
        let order: Vec<usize> = long.iter().map(|(item, _)| *item).collect();
        assert_eq!(order, (0..FUSION_SCALE_DEPTH * 3).collect::<Vec<_>>(), "ties keep first-seen order");
    }
}

mod when {
    use chrono::{DateTime, Utc};
    use kenning_core::when::find_time_expression;

    fn time(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn time_expressions_name_the_span_they_mean() {
        let now = time("2023-08-16T12:00:00Z");
        // (query, needs a "now", span start, span end); `None` when the query names no time.
        type Case = (&'static str, Option<(bool, &'static str, &'static str)>);
        let cases: &[Case] = &[
            ("What painting did Melanie show on October 13, 2023?", Some((false, "2023-10-13", "2023-10-14"))),
            ("What did Gina find on 1 February, 2023?", Some((false, "2023-02-01", "2023-02-02"))),
            ("Which book did Tim finish on 8th December, 2023?", Some((false, "2023-12-08", "2023-12-09"))),
            ("the forest picture shared on December 1,2023", Some((false, "2023-12-01", "2023-12-02"))),
            ("deploy notes from 2023-03-07 please", Some((false, "2023-03-07", "2023-03-08"))),
            ("What did Maria donate in December 2023?", Some((false, "2023-12-01", "2024-01-01"))),
            ("Which tournament did Nate win in the beginning of November 2022?", Some((false, "2022-11-01", "2022-12-01"))),
            ("What happened on 13 Oct", Some((true, "2022-10-13", "2022-10-14"))),
            ("What happened on August 3", Some((true, "2023-08-03", "2023-08-04"))),
            ("When did Melanie go camping in June?", Some((true, "2023-06-01", "2023-07-01"))),
            ("Which outdoor spot did Joanna visit in September?", Some((true, "2022-09-01", "2022-10-01"))),
            ("What did we decide last August?", Some((true, "2022-08-01", "2022-09-01"))),
            ("Where was Tim in the second week of August?", Some((true, "2023-08-01", "2023-09-01"))),
            ("How many times has Melanie gone to the beach in 2023?", Some((false, "2023-01-01", "2024-01-01"))),
            ("What did I break yesterday?", Some((true, "2023-08-15", "2023-08-16"))),
            ("flaky tests today", Some((true, "2023-08-16", "2023-08-17"))),
            ("what changed this week", Some((true, "2023-08-10", "2023-08-17"))),
            ("what did we ship last week", Some((true, "2023-08-03", "2023-08-10"))),
            ("incidents last month", Some((true, "2023-07-01", "2023-08-01"))),
            ("migrations this year", Some((true, "2023-01-01", "2024-01-01"))),
            ("Where did John explore on a road trip last year?", Some((true, "2022-01-01", "2023-01-01"))),
            ("flaky tests in the past year", Some((true, "2022-08-17", "2023-08-17"))),
            ("what failed over the past month", Some((true, "2023-07-17", "2023-08-17"))),
            ("deploys in the past week", Some((true, "2023-08-10", "2023-08-17"))),
            ("What has changed since March?", Some((true, "2023-03-01", "2023-08-17"))),
            ("incidents since 2022", Some((true, "2022-01-01", "2023-08-17"))),
            ("what broke since 2023-08-01", Some((true, "2023-08-01", "2023-08-17"))),
            ("what did we learn since last week", Some((true, "2023-08-03", "2023-08-17"))),
            ("Since the build failed in May we pin the toolchain", Some((true, "2023-05-01", "2023-06-01"))),
            ("It may rain, so the build may fail", None),
            ("this may break the build", None),
            ("port 2023 on localhost", None),
            ("bump to version 10.2023.1", None),
            ("serial 12023-10-130", None),
            ("a march through the deps", None),
        ];
        for (query, expected) in cases {
            let found = find_time_expression(query);
            let got = found.map(|expression| {
                let span = expression.span(Some(now)).unwrap();
                assert_eq!(expression.span(None).is_none(), expression.needs_now(), "{query}: needs now");
                (expression.needs_now(), span.start.format("%Y-%m-%d").to_string(), span.end.format("%Y-%m-%d").to_string())
            });
            let want = expected.map(|(needs_now, start, end)| (needs_now, start.to_owned(), end.to_owned()));
            assert_eq!(got, want, "{query}");
        }
    }

    #[test]
    fn spans_are_half_open_and_impossible_dates_name_none() {
        let span = find_time_expression("in May 2022").unwrap().span(None).unwrap();
        assert!(span.contains(time("2022-05-01T00:00:00Z")) && span.contains(time("2022-05-31T23:59:59Z")));
        assert!(!span.contains(time("2022-06-01T00:00:00Z")) && !span.contains(time("2022-04-30T23:59:59Z")));
        assert_eq!(find_time_expression("on 30 February 2023").unwrap().span(None), None);
        let leap = find_time_expression("on 29 February").unwrap();
        assert_eq!(leap.span(Some(time("2025-03-01T00:00:00Z"))).unwrap().start, time("2024-02-29T00:00:00Z"), "the latest 29 February");
    }
}

mod secrets {
    use std::collections::BTreeMap;

    use kenning_core::secrets::{Named, Redactor, SecretKind, redact, redact_record};
    use serde::Deserialize;

    use super::capture;

    #[derive(Deserialize)]
    struct Corpus {
        positives: Vec<Positive>,
        benign: Vec<Benign>,
    }

    #[derive(Deserialize)]
    struct Positive {
        format: String,
        class: String,
        text: String,
        kinds: Vec<SecretKind>,
        /// Parts of the text that must be gone after redaction.
        secrets: Vec<String>,
    }

    #[derive(Deserialize)]
    struct Benign {
        class: String,
        text: String,
        why: String,
    }

    /// The corpus, with each positive's text and secrets decoded: the file holds them in base64
    /// so that no secret scanner stops a push of the repository on them.
    fn corpus() -> Corpus {
        use base64::Engine as _;
        let decoded = |text: &str| String::from_utf8(base64::engine::general_purpose::STANDARD.decode(text).unwrap()).unwrap();
        let mut corpus: Corpus = serde_json::from_str(include_str!("fixtures/secrets.json")).unwrap();
        for case in &mut corpus.positives {
            case.text = decoded(&case.text);
            for secret in &mut case.secrets {
                *secret = decoded(secret);
            }
        }
        corpus
    }

    #[test]
    fn the_corpus_covers_sixty_formats_and_a_hundred_look_alikes() {
        let corpus = corpus();
        let formats: std::collections::BTreeSet<&str> = corpus.positives.iter().map(|case| case.format.as_str()).collect();
        assert!(corpus.positives.len() >= 150, "the corpus holds {} secrets", corpus.positives.len());
        assert!(formats.len() >= 60, "the corpus holds {} formats", formats.len());
        assert!(corpus.benign.len() >= 100, "the corpus holds {} benign look-alikes", corpus.benign.len());
    }

    #[test]
    fn every_secret_of_the_corpus_is_redacted_under_its_kind() {
        let corpus = corpus();
        let mut failures = Vec::new();
        for case in &corpus.positives {
            let redacted = redact(&case.text);
            let mut kinds = redacted.kinds.clone();
            kinds.sort();
            kinds.dedup();
            let mut expected = case.kinds.clone();
            expected.sort();
            let leaked: Vec<&String> = case.secrets.iter().filter(|secret| redacted.text.contains(secret.as_str())).collect();
            let markers_missing = case.kinds.iter().any(|kind| !redacted.text.contains(&kind.marker()));
            if kinds != expected || !leaked.is_empty() || markers_missing {
                failures.push(format!(
                    "{} ({}): {:?}\n  -> {:?}\n  kinds {kinds:?}, expected {expected:?}",
                    case.format, case.class, case.text, redacted.text
                ));
            }
        }
        assert!(failures.is_empty(), "{} of {} positives failed:\n{}", failures.len(), corpus.positives.len(), failures.join("\n"));
    }

    #[test]
    fn benign_look_alikes_survive_unchanged() {
        let failures: Vec<String> = corpus()
            .benign
            .iter()
            .filter_map(|case| {
                let redacted = redact(&case.text);
                (redacted.text != case.text || !redacted.kinds.is_empty())
                    .then(|| format!("{} ({}): {:?}\n  -> {:?}", case.why, case.class, case.text, redacted.text))
            })
            .collect();
        assert!(failures.is_empty(), "{} benign strings were changed:\n{}", failures.len(), failures.join("\n"));
    }

    #[test]
    fn redaction_is_idempotent() {
        for case in corpus().positives {
            let once = redact(&case.text).text.into_owned();
            let twice = redact(&once);
            assert_eq!(twice.text, once, "a second pass changed {once:?}");
            assert!(twice.kinds.is_empty(), "a second pass found {:?} in {once:?}", twice.kinds);
        }
    }

    #[test]
    fn every_kind_is_named_as_it_serialises() {
        for kind in SecretKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str(), "{kind:?}");
        }
    }

    #[test]
    fn a_capture_reports_each_field_and_kind_it_redacted() {
        let mut input = capture(concat!("Deploy with GITHUB_TOKEN=ghp", "_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5 and password=Sup3r-s3cret!"));
        input.title = Some(concat!("token ghp", "_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5").into());
        input.tags = vec!["deploy".into(), concat!("AKI", "A29326ML64LG2TJF8").into()];
        input.category = Some(concat!("glr", "t-aB3dE5gH7jK9mN1pQ3sT").into());
        input.metadata.insert("auth".into(), "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXNpZw".into());
        input.metadata.insert(concat!("xox", "b-82263596777-34119653240-In3OIOnHn2INL2io6VOZw5lu").into(), "slack".into());
        let found = redact_record(&mut input);
        let summary: Vec<(String, &str, usize)> = found.iter().map(|r| (r.field.clone(), r.kind.as_str(), r.count)).collect();
        assert_eq!(
            summary,
            [
                ("content".to_owned(), "github-token", 1),
                ("content".to_owned(), "password", 1),
                ("title".to_owned(), "github-token", 1),
                ("tags[1]".to_owned(), "aws-access-key-id", 1),
                ("category".to_owned(), "gitlab-token", 1),
                ("metadata.auth".to_owned(), "jwt", 1),
                ("metadata".to_owned(), "slack-token", 1),
            ]
        );
        assert_eq!(input.content, "Deploy with GITHUB_TOKEN=[REDACTED:github-token] and password=[REDACTED:password]");
        assert_eq!(input.metadata["auth"], "Bearer [REDACTED:jwt]");
        assert_eq!(input.metadata["[REDACTED:slack-token]"], "slack");
    }

    #[test]
    fn a_redacted_key_that_collides_keeps_both_values() {
        let mut metadata: BTreeMap<String, String> = BTreeMap::new();
        metadata.insert(concat!("ghp", "_XNQ6Fq5axtjRNmHkW5vQ7CF5puzQqmOBZZW6").into(), "first".into());
        metadata.insert(concat!("ghp", "_m4nyoL6uniiFw152cTe8r0khCEr7n1AyOHFR").into(), "second".into());
        let mut redactor = Redactor::new();
        redactor.map("metadata", &mut metadata);
        let values: Vec<&str> = metadata.values().map(String::as_str).collect();
        assert_eq!(metadata.len(), 2);
        assert!(values.contains(&"first") && values.contains(&"second"), "{metadata:?}");
        assert!(metadata.keys().all(|key| key.starts_with("[REDACTED:github-token]")), "{metadata:?}");
    }

    #[test]
    fn json_keys_and_nested_values_are_redacted() {
        let mut value = serde_json::json!({"steps": [{"note": "DB_PASS=Winter2024"}], concat!("sk_", "live_u9MymrCQ23bqlxGSMmI2qmyJ"): 1});
        let found = redact_record(&mut Named("value", &mut value));
        assert_eq!(value, serde_json::json!({"steps": [{"note": "DB_PASS=[REDACTED:password]"}], "[REDACTED:stripe-key]": 1}));
        let fields: Vec<&str> = found.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(fields, ["value", "value.steps[0].note"]);
    }

    /// Each secret the trust review found stored verbatim, or a benign string it found
    /// redacted, by name: the corpus holds them among others, and these keep them in sight.
    #[test]
    fn the_misses_and_false_positives_of_the_trust_review_stay_fixed() {
        let stored_verbatim = [
            concat!("glr", "t-aB3dE5gH7jK9mN1pQ3sT"),
            concat!("xap", "p-1-A0123ABCDEF-1234567890123-0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"),
            "whsec_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE",
            "DB_PASS=Winter2024",
            "AZURE_CLIENT_SECRET=Vx_3rd.party~secret",
            "//registry.npmjs.org/:_authToken=7f3d9a2e-1b4c-4e8f-9a6d-2c5b8e1f4a7d",
            "VAULT_TOKEN=hvs.CAESIJ2x9Ql0wB7aLmN3pQ7rS9tU2vW4",
            "data:\n  password: cGFzc3dvcmQxMjM=\n",
            "DB_PASSWORD=CorrectHorseBatteryStaple",
            "password: TrustNoOne",
            "SENDGRID_API_KEY=SG.x1Yz2.w3Vu4",
            "AccountKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY3ODkwQUJDREVGR0g=;",
            "SharedAccessKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=",
            "?sv=2022-11-02&sig=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY%3D",
            "curl -u admin:Hunter2Hunter2 https://ci.acme.io",
            "https://0123456789abcdef0123456789abcdef@o4505123.ingest.sentry.io/4505123456",
            concat!("pyp", "i-AgEIcHlwaS5vcmcCJDAxMjM0NTY3LTg5YWItY2RlZi0wMTIzLTQ1Njc4OWFiY2RlZgACKlszLCI5YjM2ZDQ3Ny0xYjA0LTRkMWMtOTI"),
            concat!("hf_", "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"),
            concat!("SG.", "aB3dE5gH7jK9mN1pQ3sT5v.W7yZ9bC1dE3fG5hJ7kL9mN1pQ3sT5vW7yZ9bC1dE3fG"),
            concat!("shp", "at_0123456789abcdef0123456789abcdef"),
            concat!("dop", "_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
            "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQP",
            "MTA4NzY1NDMyMTA5ODc2NTQzMjE.GaBcDe.aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG",
            "1234567890:AAaB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3",
            "key-0123456789abcdef0123456789abcdef",
            "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",
        ];
        for text in stored_verbatim {
            let redacted = redact(text);
            assert!(!redacted.kinds.is_empty(), "stored verbatim: {text:?} -> {:?}", redacted.text);
        }
        let putty = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ada\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIOGlM0JzWvXh\nAAAA\nPrivate-Lines: 1\nAAAAIGVkMjU1MTk5c2VjcmV0a2V5bWF0ZXJpYWw=\nPrivate-MAC: 5f4dcc3b5aa765d61d8327deb882cf99\n";
        assert!(!redact(putty).text.contains("AAAAIGVkMjU1MTk5c2VjcmV0a2V5bWF0ZXJpYWw="));
        for text in ["PWD=/home/ada/src/app", "pwd: /srv/app", "next_page_token: CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA3EAE", "csrf_token=formfield"] {
            assert_eq!(redact(text).text, text, "a false positive");
        }
    }
}

mod contradiction_corpus {
    use kenning_core::contradiction::{ContradictionKind, detect};

    #[derive(serde::Deserialize)]
    struct Corpus {
        conflicts: Vec<Conflict>,
        near_misses: Vec<NearMiss>,
    }

    #[derive(serde::Deserialize)]
    struct Conflict {
        older: String,
        newer: String,
        kind: String,
    }

    #[derive(serde::Deserialize)]
    struct NearMiss {
        older: String,
        newer: String,
        why: String,
    }

    fn corpus() -> Corpus {
        serde_json::from_str(include_str!("fixtures/contradictions.json")).unwrap()
    }

    #[test]
    fn every_true_conflict_is_found_with_its_kind_and_evidence() {
        let corpus = corpus();
        assert!(corpus.conflicts.len() >= 20);
        let mut missed = Vec::new();
        for case in &corpus.conflicts {
            let expected = ContradictionKind::parse(&case.kind).unwrap();
            match detect(&case.older, &case.newer, None) {
                Some(found) if found.kind == expected => {
                    assert!(!(found.older.is_empty() && found.newer.is_empty()), "no evidence for {:?}", case.newer);
                }
                other => missed.push(format!("{:?} / {:?}: expected {expected}, got {:?}", case.older, case.newer, other.map(|found| found.kind))),
            }
        }
        assert!(missed.is_empty(), "missed:\n{}", missed.join("\n"));
    }

    #[test]
    fn no_near_miss_is_reported() {
        let corpus = corpus();
        assert!(corpus.near_misses.len() >= 25);
        let reported: Vec<String> = corpus
            .near_misses
            .iter()
            .filter_map(|case| {
                // Either order: a near-miss conflicts in neither direction.
                let found = detect(&case.older, &case.newer, None).or_else(|| detect(&case.newer, &case.older, None))?;
                Some(format!("{:?} / {:?} ({}): {found:?}", case.older, case.newer, case.why))
            })
            .collect();
        assert!(reported.is_empty(), "false conflicts:\n{}", reported.join("\n"));
    }
}
