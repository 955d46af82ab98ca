//! Tool-call metrics in the Prometheus text exposition format (version 0.0.4), written by hand:
//! a few counters and one histogram family do not justify a metrics crate and its registry.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::audit::Outcome;

/// Upper bounds, in seconds, of the latency histogram's buckets: from a cached read (well under
/// a millisecond) to a slow embedding or a large calibration.
pub const LATENCY_BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The label calls to a tool the server does not have are counted under, so that clients
/// cannot grow the metrics without bound by inventing names.
const UNKNOWN_TOOL: &str = "unknown";

/// Why a request was refused before it reached a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    Unauthorized,
    RateLimited,
}

impl Rejection {
    const ALL: [Rejection; 2] = [Rejection::Unauthorized, Rejection::RateLimited];

    fn as_str(self) -> &'static str {
        match self {
            Rejection::Unauthorized => "unauthorized",
            Rejection::RateLimited => "rate_limited",
        }
    }
}

#[derive(Debug, Default)]
struct ToolSeries {
    /// Cumulative counts are computed when rendering; each slot counts calls in its own bucket,
    /// the last slot those above every bound.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
    errors: AtomicU64,
}

/// Counters shared by every session of a server. The set of tools is fixed at start, so
/// recording a call takes no lock.
#[derive(Debug)]
pub struct Metrics {
    tools: BTreeMap<String, ToolSeries>,
    rejections: [AtomicU64; Rejection::ALL.len()],
    started: Instant,
}

impl Metrics {
    pub fn new(tool_names: impl IntoIterator<Item = impl Into<String>>) -> Metrics {
        let mut tools: BTreeMap<String, ToolSeries> = tool_names.into_iter().map(|name| (name.into(), ToolSeries::default())).collect();
        tools.entry(UNKNOWN_TOOL.to_owned()).or_default();
        Metrics { tools, rejections: Default::default(), started: Instant::now() }
    }

    /// Records a call that reached the server's tool dispatch.
    pub fn observe(&self, tool: &str, duration: Duration, outcome: Outcome) {
        let Some(series) = self.tools.get(tool).or_else(|| self.tools.get(UNKNOWN_TOOL)) else { return };
        let seconds = duration.as_secs_f64();
        let slot = LATENCY_BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(LATENCY_BUCKETS.len());
        series.buckets[slot].fetch_add(1, Ordering::Relaxed);
        series.count.fetch_add(1, Ordering::Relaxed);
        series.sum_nanos.fetch_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        if outcome != Outcome::Ok {
            series.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn reject(&self, reason: Rejection) {
        self.rejections[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The metrics as Prometheus text (`Content-Type: text/plain; version=0.0.4`).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096 + self.tools.len() * 1024);
        out.push_str("# HELP kenning_tool_call_duration_seconds Time from a tool call's arrival to its result.\n");
        out.push_str("# TYPE kenning_tool_call_duration_seconds histogram\n");
        for (tool, series) in &self.tools {
            let tool = escape(tool);
            let mut cumulative = 0;
            for (bound, count) in LATENCY_BUCKETS.iter().zip(&series.buckets) {
                cumulative += count.load(Ordering::Relaxed);
                let _ = writeln!(out, "kenning_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {cumulative}");
            }
            cumulative += series.buckets[LATENCY_BUCKETS.len()].load(Ordering::Relaxed);
            let _ = writeln!(out, "kenning_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {cumulative}");
            let sum = series.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "kenning_tool_call_duration_seconds_sum{{tool=\"{tool}\"}} {sum}");
            let _ = writeln!(out, "kenning_tool_call_duration_seconds_count{{tool=\"{tool}\"}} {cumulative}");
        }
        out.push_str("# HELP kenning_tool_call_errors_total Tool calls that failed: an error result or a refused request.\n");
        out.push_str("# TYPE kenning_tool_call_errors_total counter\n");
        for (tool, series) in &self.tools {
            let _ = writeln!(out, "kenning_tool_call_errors_total{{tool=\"{}\"}} {}", escape(tool), series.errors.load(Ordering::Relaxed));
        }
        out.push_str("# HELP kenning_http_rejected_requests_total Requests refused before reaching a tool, by reason.\n");
        out.push_str("# TYPE kenning_http_rejected_requests_total counter\n");
        for reason in Rejection::ALL {
            let _ = writeln!(
                out,
                "kenning_http_rejected_requests_total{{reason=\"{}\"}} {}",
                reason.as_str(),
                self.rejections[reason as usize].load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP kenning_uptime_seconds Seconds since the server started.\n");
        out.push_str("# TYPE kenning_uptime_seconds gauge\n");
        let _ = writeln!(out, "kenning_uptime_seconds {}", self.started.elapsed().as_secs_f64());
        out
    }
}

/// Escapes a label value: backslash, double quote and newline, as the format requires.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_land_in_cumulative_buckets_and_errors_are_counted_per_tool() {
        let metrics = Metrics::new(["memory_recall", "memory_capture"]);
        metrics.observe("memory_recall", Duration::from_micros(300), Outcome::Ok);
        metrics.observe("memory_recall", Duration::from_millis(3), Outcome::Ok);
        metrics.observe("memory_capture", Duration::from_secs(30), Outcome::ToolError);
        metrics.observe("made_up", Duration::from_millis(1), Outcome::Invalid);
        metrics.reject(Rejection::RateLimited);
        let text = metrics.render();
        for line in [
            "kenning_tool_call_duration_seconds_bucket{tool=\"memory_recall\",le=\"0.0005\"} 1",
            "kenning_tool_call_duration_seconds_bucket{tool=\"memory_recall\",le=\"0.0025\"} 1",
            "kenning_tool_call_duration_seconds_bucket{tool=\"memory_recall\",le=\"0.005\"} 2",
            "kenning_tool_call_duration_seconds_bucket{tool=\"memory_recall\",le=\"+Inf\"} 2",
            "kenning_tool_call_duration_seconds_count{tool=\"memory_recall\"} 2",
            "kenning_tool_call_duration_seconds_bucket{tool=\"memory_capture\",le=\"10\"} 0",
            "kenning_tool_call_duration_seconds_bucket{tool=\"memory_capture\",le=\"+Inf\"} 1",
            "kenning_tool_call_errors_total{tool=\"memory_capture\"} 1",
            "kenning_tool_call_errors_total{tool=\"memory_recall\"} 0",
            "kenning_tool_call_errors_total{tool=\"unknown\"} 1",
            "kenning_http_rejected_requests_total{reason=\"rate_limited\"} 1",
            "kenning_http_rejected_requests_total{reason=\"unauthorized\"} 0",
        ] {
            assert!(text.lines().any(|candidate| candidate == line), "missing `{line}` in:\n{text}");
        }
        assert!(!text.contains("made_up"));
    }
}
