//! After a tool ran: did it fail (a red test run, a command with a non-zero exit, a tool error),
//! and what was learnt the last times something like it failed.

use serde_json::Value;

use crate::relevance::recall_block;
use crate::{Error, HookInput, Hooks};

/// Namespaces where the reasons for past failures are kept.
const LESSON_NAMESPACES: &[&str] = &["learnings", "blockers", "testing"];
/// The most failure lines that go into the query.
const MAX_FAILURE_LINES: usize = 6;
const MAX_LINE_CHARS: usize = 200;

/// What a failed tool call says about itself: the command and the lines that name the failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub command: Option<String>,
    pub lines: Vec<String>,
}

/// Markers of a failure in a command's output, matched case-sensitively.
const MARKERS: &[&str] = &[
    "FAILED", "FAIL:", "FAIL ", "panicked at", "error[", "error:", "Error:", "ERROR", "Traceback (most recent call last)",
    "npm ERR!", "AssertionError", "Exception", "failures:", "command not found", "No such file or directory",
    "Segmentation fault",
];

/// The failure a tool call reports, if it failed.
pub fn detect(input: &HookInput) -> Option<Failure> {
    let response = input.tool_response.as_ref()?;
    let command = input
        .tool_input
        .as_ref()
        .and_then(|tool_input| tool_input.get("command"))
        .and_then(Value::as_str)
        .map(|command| truncate(command.trim(), MAX_LINE_CHARS));
    let flagged = flagged_as_error(response);
    let text = response_text(response);
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if MARKERS.iter().any(|marker| line.contains(marker)) || counts_failures(line) {
            let line = truncate(line, MAX_LINE_CHARS);
            if !lines.contains(&line) {
                lines.push(line);
            }
            if lines.len() == MAX_FAILURE_LINES {
                break;
            }
        }
    }
    if !flagged && lines.is_empty() {
        return None;
    }
    if lines.is_empty() {
        lines.extend(text.lines().map(str::trim).filter(|line| !line.is_empty()).take(2).map(|line| truncate(line, MAX_LINE_CHARS)));
    }
    Some(Failure { command, lines })
}

/// `3 failed` or `failed: 2`, with a count above zero (`0 failed` is a green run).
fn counts_failures(line: &str) -> bool {
    let words: Vec<&str> = line.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '.').filter(|w| !w.is_empty()).collect();
    words.windows(2).any(|pair| {
        let count = |text: &str| text.parse::<u64>().is_ok_and(|n| n > 0);
        (count(pair[0]) && (pair[1] == "failed" || pair[1] == "failing" || pair[1] == "errors"))
            || (pair[0] == "failed:" && count(pair[1]))
    })
}

/// Claude Code's tool responses differ per tool; these fields say a call failed.
fn flagged_as_error(response: &Value) -> bool {
    let flag = |name: &str| response.get(name).and_then(Value::as_bool).unwrap_or(false);
    let exit = ["exit_code", "exitCode", "returncode", "code"]
        .iter()
        .filter_map(|name| response.get(*name).and_then(Value::as_i64))
        .any(|code| code != 0);
    flag("is_error") || flag("isError") || flag("interrupted") || exit || response.get("success").and_then(Value::as_bool) == Some(false)
}

/// The text of a response: a string, or its stdout, stderr, error, output and content fields.
fn response_text(response: &Value) -> String {
    match response {
        Value::String(text) => text.clone(),
        Value::Object(fields) => ["stderr", "stdout", "error", "output", "content", "result"]
            .iter()
            .filter_map(|name| fields.get(*name))
            .map(|value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn truncate(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// After a failure, the learnings that match it.
pub fn post_tool(hooks: &Hooks, input: &HookInput) -> Result<Option<String>, Error> {
    let Some(failure) = detect(input) else { return Ok(None) };
    let mut query = failure.command.clone().unwrap_or_default();
    for line in &failure.lines {
        query.push('\n');
        query.push_str(line);
    }
    let note = match &failure.command {
        Some(command) => format!("`{command}` failed. This failed before; what kenning learnt then:"),
        None => "The tool call failed. This failed before; what kenning learnt then:".to_owned(),
    };
    let namespaces = LESSON_NAMESPACES.iter().map(|name| (*name).to_owned()).collect();
    recall_block(hooks, &query, namespaces, &note, hooks.budgets.post_tool)
}
