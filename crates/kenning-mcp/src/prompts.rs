//! The `prompts` capability: three prompts that help an agent use kenning well.
//!
//! - `session_start` recalls what kenning remembers about the task at hand and puts it in front
//!   of the agent before it starts.
//! - `capture_decision` turns a decision into a memory (or a tracked decision) later sessions
//!   follow, after a check for an earlier one it replaces.
//! - `summarise_learnings` asks the agent to look back over the session and keep what a later
//!   session would need.
//!
//! `--read-only` lists only `session_start`, since the other two ask for writes.

use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::Value;

use kenning_core::{FieldError, closest};
use kenning_engine::{MemoryService, RecallRequest};

use crate::error::{invalid_params, quoted};

/// One prompt as `prompts/list` describes it.
struct PromptSpec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    /// Name, description and whether it is required, for each argument.
    arguments: &'static [(&'static str, &'static str, bool)],
    /// Whether following the prompt writes to memory (left out under `--read-only`).
    writes: bool,
}

const PROMPTS: &[PromptSpec] = &[
    PromptSpec {
        name: "session_start",
        title: "Start a session with what kenning remembers",
        description: "Recall the memories relevant to the task at hand, to read before starting on it.",
        arguments: &[
            ("task", "What you are about to work on, in a sentence.", true),
            ("limit", "How many memories to include, 1 to 20; default 8.", false),
        ],
        writes: false,
    },
    PromptSpec {
        name: "capture_decision",
        title: "Capture a decision",
        description: "Record a decision with its reason and alternatives so that later sessions follow it.",
        arguments: &[
            ("decision", "What was decided.", true),
            ("reason", "Why: the constraint, evidence or trade-off behind it.", false),
            ("alternatives", "The options considered and why they lost.", false),
        ],
        writes: true,
    },
    PromptSpec {
        name: "summarise_learnings",
        title: "Summarise what we learnt",
        description: "Look back over the session and keep in memory what a later session would need.",
        arguments: &[("topic", "What the session was about; narrows the check for memories kenning already has.", false)],
        writes: true,
    },
];

/// The default and the largest number of memories `session_start` includes.
const SESSION_START_LIMIT: usize = 8;
const SESSION_START_MAX: usize = 20;

/// The prompts a server with these options lists, in a fixed order.
pub fn list(read_only: bool) -> Vec<Prompt> {
    PROMPTS
        .iter()
        .filter(|spec| !(read_only && spec.writes))
        .map(|spec| {
            let arguments = spec
                .arguments
                .iter()
                .map(|(name, description, required)| PromptArgument::new(*name).with_description(*description).with_required(*required))
                .collect();
            Prompt::new(spec.name, Some(spec.description), Some(arguments)).with_title(spec.title)
        })
        .collect()
}

/// A prompt's arguments, checked against its spec: every value a string, no unknown names, the
/// required ones present and not blank.
struct Arguments<'a> {
    spec: &'a PromptSpec,
    values: JsonObject,
}

impl Arguments<'_> {
    fn check(spec: &PromptSpec, values: Option<JsonObject>) -> Result<Arguments<'_>, FieldError> {
        let values = values.unwrap_or_default();
        let names = || spec.arguments.iter().map(|(name, _, _)| *name);
        for (name, value) in &values {
            if !names().any(|known| known == name) {
                let known = names().collect::<Vec<_>>().join(", ");
                let suggestion = match closest(name, names()) {
                    Some(near) => format!("did you mean `{near}`? `{}` takes: {known}", spec.name),
                    None => format!("`{}` takes: {known}", spec.name),
                };
                return Err(FieldError::new(name.clone(), "is not an argument of this prompt", quoted(value), suggestion));
            }
            if !value.is_string() {
                return Err(FieldError::new(name.clone(), "must be a string (prompt arguments are strings)", quoted(value), "pass the value as text"));
            }
        }
        for (name, description, required) in spec.arguments {
            let blank = values.get(*name).and_then(Value::as_str).is_none_or(|text| text.trim().is_empty());
            if *required && blank {
                return Err(FieldError::new(*name, "is required", values.get(*name).cloned().unwrap_or(Value::Null), *description));
            }
        }
        Ok(Arguments { spec, values })
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(Value::as_str).map(str::trim).filter(|text| !text.is_empty())
    }

    fn required(&self, name: &str) -> &str {
        // `check` refused a blank or missing required argument, so this is never empty.
        self.text(name).unwrap_or_default()
    }
}

/// Renders the named prompt. `decision_tools` says whether the `decisions` toolset is enabled,
/// which `capture_decision` mentions.
pub fn get(
    memory: &MemoryService,
    name: &str,
    arguments: Option<JsonObject>,
    read_only: bool,
    decision_tools: bool,
) -> Result<GetPromptResult, McpError> {
    let available: Vec<&PromptSpec> = PROMPTS.iter().filter(|spec| !(read_only && spec.writes)).collect();
    let Some(spec) = available.iter().find(|spec| spec.name == name) else {
        let known = available.iter().map(|spec| spec.name).collect::<Vec<_>>().join(", ");
        let problem = if PROMPTS.iter().any(|spec| spec.name == name) { "asks for writes, which this read-only server refuses" } else { "names no prompt of this server" };
        let suggestion = match closest(name, available.iter().map(|spec| spec.name)) {
            Some(near) if near != name => format!("did you mean `{near}`? prompts: {known}"),
            _ => format!("prompts: {known}"),
        };
        return Err(invalid_params(&FieldError::new("name", problem, name, suggestion)));
    };
    let arguments = Arguments::check(spec, arguments).map_err(|error| invalid_params(&error))?;
    let text = match spec.name {
        "session_start" => session_start(memory, &arguments)?,
        "capture_decision" => capture_decision(&arguments, decision_tools),
        _ => summarise_learnings(&arguments),
    };
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(arguments.spec.description))
}

fn session_start(memory: &MemoryService, arguments: &Arguments<'_>) -> Result<String, McpError> {
    let task = arguments.required("task");
    let limit = match arguments.text("limit") {
        None => SESSION_START_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(limit) if (1..=SESSION_START_MAX).contains(&limit) => limit,
            _ => {
                return Err(invalid_params(&FieldError::new(
                    "limit",
                    format!("must be a whole number from 1 to {SESSION_START_MAX}"),
                    text,
                    format!("leave it out for {SESSION_START_LIMIT}"),
                )));
            }
        },
    };
    let request = RecallRequest { query: task.to_owned(), limit: Some(limit), detail: Some("light".to_owned()), ..RecallRequest::default() };
    let page = memory.recall(request).map_err(|error| match error {
        // The prompt's `task` is the recall's query.
        kenning_engine::Error::Invalid(error) if error.field == "query" => invalid_params(&FieldError { field: "task".to_owned(), ..error }),
        kenning_engine::Error::Invalid(error) => invalid_params(&error),
        other => McpError::internal_error(format!("recall failed: {other}"), None),
    })?;
    let mut text = format!("I am about to work on: {task}\n\n");
    if page.results.is_empty() {
        text.push_str(
            "kenning has no memories about this yet. As you work, capture the decisions, conventions and lessons \
             a later session would need with memory_capture.",
        );
        return Ok(text);
    }
    text.push_str("kenning remembers these about it, most relevant first:\n");
    for hit in &page.results {
        text.push_str(&format!("\n- {} ({}, {}) {}", hit.title, hit.namespace, hit.domain, hit.urn));
        if let Some(snippet) = hit.snippet.as_deref().filter(|snippet| !snippet.is_empty()) {
            text.push_str(&format!("\n  {}", snippet.replace('\n', " ")));
        }
    }
    text.push_str(
        "\n\nRead the ones that bear on the task with memory_get before you start, and follow the decisions and \
         conventions among them. When you learn something worth keeping, capture it with memory_capture.",
    );
    Ok(text)
}

fn capture_decision(arguments: &Arguments<'_>, decision_tools: bool) -> String {
    let mut text = format!("Record this decision in kenning so that later sessions follow it.\n\nDecision: {}", arguments.required("decision"));
    if let Some(reason) = arguments.text("reason") {
        text.push_str(&format!("\nReason: {reason}"));
    }
    if let Some(alternatives) = arguments.text("alternatives") {
        text.push_str(&format!("\nAlternatives considered: {alternatives}"));
    }
    text.push_str(
        "\n\nFirst call memory_recall with the decision's subject to find an earlier decision it replaces; if there \
         is one, change it with memory_update and give the reason, rather than capturing a duplicate. Otherwise call \
         memory_capture with namespace `decisions`, a short title naming the choice, the decision with its reason \
         and the alternatives in the content, and tags for the components it touches.",
    );
    if decision_tools {
        text.push_str(
            " If it is a technical decision whose outcome you want to learn from, use decision_context and then \
             decision_capture instead, with the alternatives and an honest confidence.",
        );
    }
    text
}

fn summarise_learnings(arguments: &Arguments<'_>) -> String {
    let about = arguments.text("topic").map(|topic| format!(" (about: {topic})")).unwrap_or_default();
    format!(
        "Look back over this session{about} and list what we learnt that a later session would need: decisions \
         and their reasons, conventions, fixes to problems that took effort, and dead ends to avoid. Leave out what \
         the code or its history already says.\n\nFor each item, call memory_recall first to check whether kenning \
         already has it: if it does and it changed, update it with memory_update; if it is new, capture it with \
         memory_capture, one idea per memory, in a fitting namespace (learnings, decisions, patterns, blockers, \
         standards, ...) with tags. Finish with a short summary that lists the URNs you captured or updated."
    )
}
