//! After a tool call failed: what was learnt the last times something like it failed.
//!
//! Whether a call failed is the client's word, never a guess from the output's words: Claude
//! Code fires PostToolUseFailure for a failed call, with `error` holding `Exit code N` and the
//! command's output on the lines after; PostToolUse fires for calls that succeeded, and only a
//! response that flags itself as an error (an MCP tool's `isError`, a non-zero exit code field,
//! the `error` of Gemini CLI's AfterTool) counts as a failure there. A `git log` or a `grep "Error:"` that exits 0 is a success, whatever
//! it prints.

use serde_json::Value;

use crate::relevance::recall_block;
use crate::{Error, HookInput, Hooks};

/// Namespaces where the reasons for past failures are kept.
const LESSON_NAMESPACES: &[&str] = &["learnings", "blockers", "testing"];
/// The most output lines that go into the query.
const MAX_FAILURE_LINES: usize = 6;
const MAX_LINE_CHARS: usize = 200;

/// A failed tool call: the command, its exit code when the client gave one, and the lines of its
/// output that say most about the failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub command: Option<String>,
    pub exit_code: Option<i64>,
    pub lines: Vec<String>,
}

/// Markers of the lines that name a failure in a failed command's output, matched
/// case-sensitively. They choose which lines of a failure's output go into the query; they never
/// decide whether a call failed.
const MARKERS: &[&str] = &[
    "FAILED", "FAIL:", "FAIL ", "panicked at", "error[", "error:", "Error:", "ERROR", "Traceback (most recent call last)",
    "npm ERR!", "AssertionError", "Exception", "failures:", "command not found", "No such file or directory",
    "Segmentation fault",
];

/// The failure a PostToolUseFailure input reports; `None` when the user interrupted the call.
pub fn from_failure_event(input: &HookInput) -> Option<Failure> {
    if input.is_interrupt == Some(true) {
        return None;
    }
    let error = input.error.as_deref().unwrap_or_default();
    let (exit_code, output) = match error.split_once('\n') {
        Some((first, rest)) if exit_code_line(first).is_some() => (exit_code_line(first), rest),
        _ if exit_code_line(error).is_some() => (exit_code_line(error), ""),
        _ => (None, error),
    };
    Some(Failure { command: command(input), exit_code, lines: telling_lines(output) })
}

/// The failure a PostToolUse input reports: only a response that flags itself as an error.
pub fn from_tool_response(input: &HookInput) -> Option<Failure> {
    let response = input.tool_response.as_ref()?;
    let flag = |name: &str| response.get(name).and_then(Value::as_bool) == Some(true);
    let exit_code =
        ["exit_code", "exitCode", "returncode"].iter().find_map(|name| response.get(*name).and_then(Value::as_i64)).filter(|code| *code != 0);
    // Gemini CLI's tool results carry an `error` object only when the call failed.
    let error = response.get("error").is_some_and(|error| !error.is_null() && error != "" && error.as_object().is_none_or(|fields| !fields.is_empty()));
    let failed = flag("is_error")
        || flag("isError")
        || exit_code.is_some()
        || error
        || response.get("success").and_then(Value::as_bool) == Some(false);
    failed.then(|| Failure { command: command(input), exit_code, lines: telling_lines(&response_text(response)) })
}

/// `Exit code 3` → 3.
fn exit_code_line(line: &str) -> Option<i64> {
    line.trim().strip_prefix("Exit code ")?.trim().parse().ok()
}

fn command(input: &HookInput) -> Option<String> {
    input
        .tool_input
        .as_ref()
        .and_then(|tool_input| tool_input.get("command"))
        .and_then(Value::as_str)
        .map(|command| truncate(command.trim(), MAX_LINE_CHARS))
}

/// The lines of a failure's output that name it (see [`MARKERS`]), else its last lines: a
/// command says why it failed at the end.
fn telling_lines(output: &str) -> Vec<String> {
    let nonempty: Vec<&str> = output.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let mut lines: Vec<String> = Vec::new();
    for line in &nonempty {
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
    if lines.is_empty() {
        let tail = nonempty.len().saturating_sub(2);
        lines.extend(nonempty[tail..].iter().map(|line| truncate(line, MAX_LINE_CHARS)));
    }
    lines
}

/// `3 failed` or `failed: 2`, with a count above zero (`0 failed` names no failure).
fn counts_failures(line: &str) -> bool {
    let words: Vec<&str> = line.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '.').filter(|w| !w.is_empty()).collect();
    words.windows(2).any(|pair| {
        let count = |text: &str| text.parse::<u64>().is_ok_and(|n| n > 0);
        (count(pair[0]) && (pair[1] == "failed" || pair[1] == "failing" || pair[1] == "errors"))
            || (pair[0] == "failed:" && count(pair[1]))
    })
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

/// PostToolUse: a call the client reports as successful gets nothing unless its response flags
/// an error.
pub fn post_tool(hooks: &Hooks, input: &HookInput) -> Result<Option<String>, Error> {
    match from_tool_response(input) {
        Some(failure) => lessons(hooks, &failure),
        None => Ok(None),
    }
}

/// PostToolUseFailure: the learnings that match the failure and its output.
pub fn post_tool_failure(hooks: &Hooks, input: &HookInput) -> Result<Option<String>, Error> {
    match from_failure_event(input) {
        Some(failure) => lessons(hooks, &failure),
        None => Ok(None),
    }
}

fn lessons(hooks: &Hooks, failure: &Failure) -> Result<Option<String>, Error> {
    let mut query = failure.command.clone().unwrap_or_default();
    for line in &failure.lines {
        query.push('\n');
        query.push_str(line);
    }
    let how = failure.exit_code.map(|code| format!(" (exit code {code})")).unwrap_or_default();
    let note = match &failure.command {
        Some(command) => format!("`{command}` failed{how}. What kenning learnt when something like it failed before:"),
        None => format!("The tool call failed{how}. What kenning learnt when something like it failed before:"),
    };
    let namespaces = LESSON_NAMESPACES.iter().map(|name| (*name).to_owned()).collect();
    recall_block(hooks, &query, namespaces, &note, hooks.budgets.post_tool)
}
