//! The seam to a language model: what the engine asks of one (a completion of a short
//! conversation), what it gets back, and how a response tells the caller whether a model was used.
//!
//! Language models are optional. The engine holds an `Option<Arc<dyn LanguageModel>>`; a feature
//! that can use one (consolidation writing a principle, resolving a contradiction, rewriting a
//! query) does its work without one by a documented rule and reports which path it took as an
//! [`LlmUse`]. Providers (Anthropic, OpenAI, Ollama, LM Studio) implement the trait in
//! `kenning-llm`; this crate only names the contract.

use serde::Serialize;

/// Who speaks a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Message {
        Message { role: Role::User, content: content.into() }
    }
}

/// One request: a system instruction, the conversation so far, and bounds on the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    pub system: Option<String>,
    pub messages: Vec<Message>,
    /// The most tokens the answer may take.
    pub max_tokens: u32,
    /// `None` leaves the provider's default.
    pub temperature: Option<f32>,
    /// Asks for a JSON object as the whole answer, where the provider can enforce it.
    pub json: bool,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completion {
    pub text: String,
    /// The provider that answered (`anthropic`, `openai`, `ollama`, `lmstudio`).
    pub provider: String,
    /// The model that answered, as the provider named it.
    pub model: String,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

/// What a provider can do, as far as kenning uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    pub streaming: bool,
    pub tools: bool,
    pub json_mode: bool,
    /// The context window in tokens, as configured or documented for the model.
    pub max_context: usize,
    pub vision: bool,
}

/// Why a request to a model did not give an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{provider}: {kind}: {message}")]
pub struct LlmError {
    pub provider: String,
    pub kind: LlmErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmErrorKind {
    /// No answer within the configured time.
    Timeout,
    /// The provider said to slow down (HTTP 429) and retries did not get through.
    RateLimited,
    /// The provider failed (HTTP 5xx, a dropped connection) and retries did not get through.
    Unavailable,
    /// The key is missing, wrong or not allowed (HTTP 401/403).
    Unauthorized,
    /// The provider refused the request as malformed (another HTTP 4xx).
    Rejected,
    /// The answer did not have the documented shape.
    Malformed,
}

impl std::fmt::Display for LlmErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LlmErrorKind::Timeout => "timed out",
            LlmErrorKind::RateLimited => "rate limited",
            LlmErrorKind::Unavailable => "unavailable",
            LlmErrorKind::Unauthorized => "unauthorized",
            LlmErrorKind::Rejected => "request rejected",
            LlmErrorKind::Malformed => "malformed answer",
        })
    }
}

/// A language model, or an ordered chain of them that falls back from one to the next.
///
/// Calls block; an implementation bounds each by its own timeout and retries transient failures
/// (429, 5xx) with backoff before it gives up with an [`LlmError`].
pub trait LanguageModel: Send + Sync {
    /// A label for responses and logs, e.g. `anthropic/claude-sonnet-4-5`.
    fn name(&self) -> String;

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError>;

    /// Whether the provider answers now (a cheap request such as listing its models).
    fn health_check(&self) -> Result<(), LlmError>;

    fn capabilities(&self) -> Capabilities;
}

/// How a response that could use a model came about: it is part of every such response, so an
/// agent can tell a model's judgement from a rule's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LlmUse {
    /// A model answered.
    Used { model: String },
    /// No provider is configured; `fallback` names the rule that did the work instead.
    NotConfigured { fallback: String },
    /// Every configured provider failed; `fallback` names the rule that did the work instead.
    Failed { error: String, fallback: String },
}

impl LlmUse {
    /// The model was asked and answered.
    pub fn used(&self) -> bool {
        matches!(self, LlmUse::Used { .. })
    }
}
