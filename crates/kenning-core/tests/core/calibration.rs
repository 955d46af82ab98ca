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
    serde_json::from_str(include_str!("../fixtures/calibration_reference.json")).unwrap()
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
