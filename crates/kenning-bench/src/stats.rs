//! Summaries of latency samples.
//!
//! Percentiles are read off the sorted samples by the nearest-rank method: every reported figure
//! is a latency that was actually measured, never an interpolation between two, and the p99 of a
//! hundred samples is the second-worst one.

use std::time::Duration;

use serde::Serialize;

/// The distribution of one operation's latency, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub samples: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    /// `None` for no samples, which a phase that had nothing to do produces.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut ms: Vec<f64> = samples.iter().map(|sample| sample.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        Some(Summary {
            samples: ms.len(),
            mean_ms: round(ms.iter().sum::<f64>() / ms.len() as f64),
            p50_ms: round(percentile(&ms, 50.0)),
            p95_ms: round(percentile(&ms, 95.0)),
            p99_ms: round(percentile(&ms, 99.0)),
            max_ms: round(ms[ms.len() - 1]),
        })
    }
}

/// The nearest-rank `p`th percentile of ascending, non-empty `sorted`: the smallest sample with
/// at least `p` percent of the samples at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Microsecond resolution is finer than run-to-run noise; more digits only clutter the report.
pub fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_one_to_a_hundred() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 50.0), 50.0);
        assert_eq!(percentile(&sorted, 95.0), 95.0);
        assert_eq!(percentile(&sorted, 99.0), 99.0);
        assert_eq!(percentile(&sorted, 100.0), 100.0);
        assert_eq!(percentile(&sorted, 0.0), 1.0);
    }

    #[test]
    fn small_samples_round_up_to_a_measured_value() {
        assert_eq!(percentile(&[10.0, 20.0, 30.0], 50.0), 20.0);
        assert_eq!(percentile(&[10.0, 20.0, 30.0], 95.0), 30.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    #[test]
    fn summary_sorts_its_samples() {
        let samples: Vec<Duration> = [5, 1, 4, 2, 3].into_iter().map(Duration::from_millis).collect();
        let summary = Summary::of(&samples).unwrap();
        assert_eq!((summary.samples, summary.p50_ms, summary.max_ms, summary.mean_ms), (5, 3.0, 5.0, 3.0));
        assert_eq!(Summary::of(&[]), None);
    }
}
