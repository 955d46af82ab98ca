//! Claude Code hooks: what kenning answers when Claude Code starts (or resumes, or compacts) a
//! session, receives a prompt, has seen a tool call fail, is about to compact its context,
//! stops after a turn, or ends the session.
//!
//! - [`HookEvent`] names the events (`session-start`, `user-prompt`, `post-tool`,
//!   `post-tool-failure`, `pre-compact`, `stop`, `session-end`); [`HookInput`] is the JSON
//!   Claude Code writes on the hook's stdin.
//! - [`Hooks`] answers an event over the engine's services: [`Hooks::run`] returns the JSON to
//!   print (`hookSpecificOutput.additionalContext`), or `None` when there is nothing to say.
//!   - session-start: the project's standing context ([`context`]): recent decisions, open
//!     blockers, preferences and calibration warnings with their text, as a `<memory_context>`
//!     block cut to a token budget; after a compaction, also what this session captured;
//!   - user-prompt: memories relevant to the prompt, with their text, only above a relevance
//!     floor ([`relevance`]);
//!   - post-tool-failure: after a command failed (the client says so, with its exit code), the
//!     learnings that match the failure and its output ([`failure`]); post-tool answers only
//!     tool results that flag themselves as errors;
//!   - stop, pre-compact and session-end: what the session learnt ([`transcript`]): the turn's
//!     final answer as the client hands it over, and the transcript for what came before,
//!     captured with `source: hook` in the metadata.
//!
//! The crate knows the hook protocol and nothing of MCP; the binary reads stdin, prints, and
//! makes sure a hook never blocks the agent (every error is logged, never shown).

pub mod context;
pub mod failure;
pub mod relevance;
pub mod transcript;

use std::fmt;
use std::sync::Arc;

use kenning_engine::{DecisionService, MemoryService};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The hook events kenning answers, by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    SessionStart,
    UserPrompt,
    PostTool,
    PostToolFailure,
    PreCompact,
    Stop,
    SessionEnd,
}

impl HookEvent {
    pub const ALL: [HookEvent; 7] = [
        HookEvent::SessionStart,
        HookEvent::UserPrompt,
        HookEvent::PostTool,
        HookEvent::PostToolFailure,
        HookEvent::PreCompact,
        HookEvent::Stop,
        HookEvent::SessionEnd,
    ];

    /// The events `kenning init` registers. PostToolUse is left out: Claude Code fires it only
    /// after a tool call succeeded, which teaches nothing and would cost a process per call.
    pub const INSTALLED: [HookEvent; 6] = [
        HookEvent::SessionStart,
        HookEvent::UserPrompt,
        HookEvent::PostToolFailure,
        HookEvent::PreCompact,
        HookEvent::Stop,
        HookEvent::SessionEnd,
    ];

    /// The name on kenning's command line: `kenning hook session-start`.
    pub fn command_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session-start",
            HookEvent::UserPrompt => "user-prompt",
            HookEvent::PostTool => "post-tool",
            HookEvent::PostToolFailure => "post-tool-failure",
            HookEvent::PreCompact => "pre-compact",
            HookEvent::Stop => "stop",
            HookEvent::SessionEnd => "session-end",
        }
    }

    /// The event's name in Claude Code's settings and in `hook_event_name`.
    pub fn claude_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPrompt => "UserPromptSubmit",
            HookEvent::PostTool => "PostToolUse",
            HookEvent::PostToolFailure => "PostToolUseFailure",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Stop => "Stop",
            HookEvent::SessionEnd => "SessionEnd",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|event| event.command_name() == name || event.claude_name() == name)
    }

    /// Whether Claude Code reads `hookSpecificOutput.additionalContext` from this event.
    pub fn takes_context(self) -> bool {
        matches!(self, HookEvent::SessionStart | HookEvent::UserPrompt | HookEvent::PostTool | HookEvent::PostToolFailure)
    }

    /// The names of every event, for messages: `session-start, user-prompt, ...`.
    pub fn command_names() -> String {
        HookEvent::ALL.map(HookEvent::command_name).join(", ")
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.command_name())
    }
}

/// What Claude Code writes on a hook's stdin. Every field is optional: each event carries its
/// own, and a hook must cope with a field missing rather than fail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookInput {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub transcript_path: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub hook_event_name: Option<String>,
    /// UserPromptSubmit: what the user typed (also in Gemini CLI's AfterAgent, with the answer).
    #[serde(default)]
    pub prompt: Option<String>,
    /// PostToolUse and PostToolUseFailure: the tool and its input; PostToolUse: its response.
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input: Option<Value>,
    #[serde(default)]
    pub tool_response: Option<Value>,
    /// PostToolUseFailure: what the tool reported, for a shell command `Exit code N` and its
    /// output on the lines after.
    #[serde(default)]
    pub error: Option<String>,
    /// PostToolUseFailure: whether the user interrupted the call (not a failure of the command).
    #[serde(default)]
    pub is_interrupt: Option<bool>,
    /// Stop: the text of the turn's final answer, which the transcript may not hold yet
    /// (Gemini CLI's AfterAgent calls it `prompt_response`).
    #[serde(default, alias = "prompt_response")]
    pub last_assistant_message: Option<String>,
    /// SessionStart: `startup`, `resume`, `clear` or `compact`.
    #[serde(default)]
    pub source: Option<String>,
    /// PreCompact: `manual` or `auto`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// SessionEnd: why the session ended (`clear`, `logout`, `prompt_input_exit`, `other`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Token budgets of the context each event adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    pub session_start: usize,
    pub user_prompt: usize,
    pub post_tool: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets { session_start: 1500, user_prompt: 600, post_tool: 400 }
    }
}

/// What went wrong answering a hook; the binary logs it and prints nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] kenning_engine::Error),
    #[error("reading the transcript {path}: {message}")]
    Transcript { path: String, message: String },
}

/// Answers hook events over the engine's services.
pub struct Hooks {
    pub memory: Arc<MemoryService>,
    pub decisions: Arc<DecisionService>,
    /// The project's id, shown in the context block.
    pub project: Option<String>,
    pub budgets: Budgets,
}

impl Hooks {
    /// The JSON to print for `event`, or `None` when there is nothing to add.
    pub fn run(&self, event: HookEvent, input: &HookInput) -> Result<Option<Value>, Error> {
        let context = match event {
            HookEvent::SessionStart => context::session_start(self, input)?,
            HookEvent::UserPrompt => relevance::user_prompt(self, input.prompt.as_deref().unwrap_or_default())?,
            HookEvent::PostTool => failure::post_tool(self, input)?,
            HookEvent::PostToolFailure => failure::post_tool_failure(self, input)?,
            HookEvent::PreCompact | HookEvent::Stop | HookEvent::SessionEnd => {
                transcript::capture_session(self, event, input)?;
                None
            }
        };
        let name = input.hook_event_name.as_deref().filter(|name| !name.is_empty()).unwrap_or(event.claude_name());
        Ok(context.map(|text| additional_context(name, &text)))
    }
}

/// The output a client reads for events that take context, under the event's name as the
/// client gave it (Claude Code's `UserPromptSubmit`, Gemini CLI's `BeforeAgent`).
pub fn additional_context(event_name: &str, text: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": event_name,
            "additionalContext": text,
        }
    })
}
