//! Claude Code hooks: what kenning answers when Claude Code starts a session, receives a prompt,
//! has run a tool, is about to compact its context, or stops.
//!
//! - [`HookEvent`] names the five events (`session-start`, `user-prompt`, `post-tool`,
//!   `pre-compact`, `stop`); [`HookInput`] is the JSON Claude Code writes on the hook's stdin.
//! - [`Hooks`] answers an event over the engine's services: [`Hooks::run`] returns the JSON to
//!   print (`hookSpecificOutput.additionalContext`), or `None` when there is nothing to say.
//!   - session-start: the project's standing context ([`context`]): recent decisions, open
//!     blockers, preferences and calibration warnings, as a `<memory_context>` block cut to a
//!     token budget;
//!   - user-prompt: memories relevant to the prompt, only above a relevance floor ([`relevance`]);
//!   - post-tool: after a failed test run or command ([`failure`]), the learnings that match it;
//!   - pre-compact and stop: what the session learnt, read from the transcript by rules that
//!     need no language model ([`transcript`]), captured with `source: hook` in the metadata.
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
    PreCompact,
    Stop,
}

impl HookEvent {
    pub const ALL: [HookEvent; 5] =
        [HookEvent::SessionStart, HookEvent::UserPrompt, HookEvent::PostTool, HookEvent::PreCompact, HookEvent::Stop];

    /// The name on kenning's command line: `kenning hook session-start`.
    pub fn command_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session-start",
            HookEvent::UserPrompt => "user-prompt",
            HookEvent::PostTool => "post-tool",
            HookEvent::PreCompact => "pre-compact",
            HookEvent::Stop => "stop",
        }
    }

    /// The event's name in Claude Code's settings and in `hook_event_name`.
    pub fn claude_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPrompt => "UserPromptSubmit",
            HookEvent::PostTool => "PostToolUse",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Stop => "Stop",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|event| event.command_name() == name || event.claude_name() == name)
    }

    /// Whether Claude Code reads `hookSpecificOutput.additionalContext` from this event.
    pub fn takes_context(self) -> bool {
        matches!(self, HookEvent::SessionStart | HookEvent::UserPrompt | HookEvent::PostTool)
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
    /// UserPromptSubmit: what the user typed.
    #[serde(default)]
    pub prompt: Option<String>,
    /// PostToolUse: the tool, its input and its response.
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input: Option<Value>,
    #[serde(default)]
    pub tool_response: Option<Value>,
    /// SessionStart: `startup`, `resume`, `clear` or `compact`.
    #[serde(default)]
    pub source: Option<String>,
    /// PreCompact: `manual` or `auto`.
    #[serde(default)]
    pub trigger: Option<String>,
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
            HookEvent::SessionStart => context::session_start(self)?,
            HookEvent::UserPrompt => relevance::user_prompt(self, input.prompt.as_deref().unwrap_or_default())?,
            HookEvent::PostTool => failure::post_tool(self, input)?,
            HookEvent::PreCompact | HookEvent::Stop => {
                transcript::capture_session(self, event, input)?;
                None
            }
        };
        Ok(context.map(|text| additional_context(event, &text)))
    }
}

/// The output Claude Code reads for events that take context.
pub fn additional_context(event: HookEvent, text: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": event.claude_name(),
            "additionalContext": text,
        }
    })
}
