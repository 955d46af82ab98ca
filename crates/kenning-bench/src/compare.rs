//! `compare`: two records of one benchmark side by side, so that a change's effect on every
//! figure (and a regression) shows at review.
//!
//! Each record is the JSON object a benchmark printed (or wrote with `--json-out`). Every
//! number in it is a figure, named by its path (`single_capture.p50_ms`, `runs[2].seconds`);
//! the figures both records hold are listed with their old and new values and the ratio new
//! over old. Whether a higher ratio is better depends on the figure (a rate or a time), so the
//! ratio is printed as it is, never judged.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use clap::Args;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The record from before the change.
    pub old: PathBuf,
    /// The record from after it.
    pub new: PathBuf,
    /// Also write the comparison's JSON record to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Comparison {
    pub benchmark: String,
    pub figures: Vec<Figure>,
    /// Figures only one of the records holds (a benchmark that gained or lost a figure).
    pub only_old: Vec<String>,
    pub only_new: Vec<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Figure {
    pub path: String,
    pub old: f64,
    pub new: f64,
    /// `new / old`; `None` when the old value is zero.
    pub ratio: Option<f64>,
}

pub fn run(args: &CompareArgs) -> Result<Comparison> {
    compare(&read(&args.old)?, &read(&args.new)?)
}

fn read(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not one benchmark's JSON record", path.display()))
}

/// The figures of two records of the same benchmark.
pub fn compare(old: &Value, new: &Value) -> Result<Comparison> {
    let name = |record: &Value| record.get("benchmark").and_then(Value::as_str).unwrap_or("unnamed").to_owned();
    let benchmark = name(old);
    ensure!(benchmark == name(new), "the records come from different benchmarks: {benchmark} and {}", name(new));
    let (mut old_figures, mut new_figures) = (Vec::new(), Vec::new());
    figures(old, String::new(), &mut old_figures);
    figures(new, String::new(), &mut new_figures);
    let mut compared = Vec::new();
    let mut only_old = Vec::new();
    for (path, old_value) in &old_figures {
        match new_figures.iter().find(|(new_path, _)| new_path == path) {
            Some((_, new_value)) => compared.push(Figure {
                path: path.clone(),
                old: *old_value,
                new: *new_value,
                ratio: (*old_value != 0.0).then(|| new_value / old_value),
            }),
            None => only_old.push(path.clone()),
        }
    }
    let only_new = new_figures.into_iter().filter(|(path, _)| !old_figures.iter().any(|(old_path, _)| old_path == path)).map(|(path, _)| path).collect();
    Ok(Comparison { benchmark, figures: compared, only_old, only_new })
}

/// Every number in `value`, with its path, in the record's order.
fn figures(value: &Value, path: String, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Number(number) => {
            if let Some(number) = number.as_f64() {
                out.push((path, number));
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                let inner = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                figures(field, inner, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                figures(item, format!("{path}[{index}]"), out);
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

pub fn table(comparison: &Comparison) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let width = comparison.figures.iter().map(|figure| figure.path.len()).max().unwrap_or(0).max("figure".len());
    let _ = writeln!(out, "compare: {} ({} figures in both records)", comparison.benchmark, comparison.figures.len());
    let _ = writeln!(out, "{:width$}  {:>14}  {:>14}  {:>8}", "figure", "old", "new", "new/old");
    for figure in &comparison.figures {
        let ratio = figure.ratio.map_or("-".to_owned(), |ratio| format!("{ratio:.3}"));
        let _ = writeln!(out, "{:width$}  {:>14}  {:>14}  {ratio:>8}", figure.path, number(figure.old), number(figure.new));
    }
    for (label, paths) in [("only in the old record", &comparison.only_old), ("only in the new record", &comparison.only_new)] {
        if !paths.is_empty() {
            let _ = writeln!(out, "{label}: {}", paths.join(", "));
        }
    }
    out
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{value:.0}") } else { format!("{value:.4}") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn figures_of_both_records_are_paired_by_path_with_their_ratio() {
        let old = json!({"benchmark": "latency", "memories": 100, "single_capture": {"p50_ms": 1.5, "per_second": 600.0}, "runs": [{"ms": 2.0}], "gone": 1});
        let new = json!({"benchmark": "latency", "memories": 100, "single_capture": {"p50_ms": 0.5, "per_second": 0.0}, "runs": [{"ms": 0.0}], "added": 3});
        let comparison = compare(&old, &new).unwrap();
        let find = |path: &str| comparison.figures.iter().find(|figure| figure.path == path).unwrap();
        assert_eq!(find("memories").ratio, Some(1.0));
        assert_eq!(find("single_capture.p50_ms").ratio, Some(0.5 / 1.5));
        assert_eq!(find("single_capture.per_second").ratio, Some(0.0));
        assert_eq!(find("runs[0].ms").ratio, Some(0.0));
        assert_eq!(comparison.only_old, vec!["gone".to_owned()]);
        assert_eq!(comparison.only_new, vec!["added".to_owned()]);
        let zero_old = compare(&json!({"benchmark": "x", "n": 0}), &json!({"benchmark": "x", "n": 4})).unwrap();
        assert_eq!(zero_old.figures[0].ratio, None);
        assert!(table(&comparison).contains("single_capture.p50_ms"));
    }

    #[test]
    fn records_of_different_benchmarks_are_refused() {
        let error = compare(&json!({"benchmark": "latency"}), &json!({"benchmark": "notes"})).unwrap_err();
        assert!(error.to_string().contains("different benchmarks"), "{error}");
    }
}
