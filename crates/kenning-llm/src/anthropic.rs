//! Anthropic's Messages API: `POST /v1/messages`, non-streaming.

use kenning_core::llm::{Capabilities, Completion, CompletionRequest, LanguageModel, LlmError, LlmErrorKind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::settings::{ApiKey, ProviderSettings};
use crate::transport::Transport;

/// The API version every request names; the response shapes read here are this version's.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

#[derive(Debug)]
pub struct Anthropic {
    transport: Transport,
    model: String,
    max_context: usize,
}

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    model: Option<String>,
    content: Vec<ContentBlock>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl Anthropic {
    pub fn new(settings: &ProviderSettings, key: Option<ApiKey>) -> Anthropic {
        Anthropic { transport: Transport::new(settings, key, read_error), model: settings.model.clone(), max_context: settings.max_context }
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = self.transport.key() {
            headers.push(("x-api-key", key.to_owned()));
        }
        headers
    }
}

impl LanguageModel for Anthropic {
    fn name(&self) -> String {
        format!("anthropic/{}", self.model)
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        });
        if let Some(system) = &request.system {
            body["system"] = Value::from(system.as_str());
        }
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        // The Messages API has no JSON mode; a caller that asks for JSON says so in its prompt
        // and parses the text, as `capabilities().json_mode` tells it.
        let text = self.transport.post("/v1/messages", &self.headers(), &body)?;
        let response: MessagesResponse = serde_json::from_str(&text)
            .map_err(|error| self.transport.error(LlmErrorKind::Malformed, format!("the answer is not a Messages API response: {error}")))?;
        let answer: String = response.content.iter().filter(|block| block.kind == "text").filter_map(|block| block.text.as_deref()).collect();
        if answer.is_empty() {
            let reason = response.stop_reason.as_deref().unwrap_or("none given");
            return Err(self.transport.error(LlmErrorKind::Malformed, format!("the answer has no text block (stop reason: {reason})")));
        }
        if response.stop_reason.as_deref() == Some("max_tokens") {
            tracing::debug!(model = %self.model, "the answer stopped at max_tokens");
        }
        Ok(Completion {
            text: answer,
            provider: "anthropic".to_owned(),
            model: response.model.unwrap_or_else(|| self.model.clone()),
            input_tokens: response.usage.as_ref().and_then(|usage| usage.input_tokens),
            output_tokens: response.usage.as_ref().and_then(|usage| usage.output_tokens),
        })
    }

    fn health_check(&self) -> Result<(), LlmError> {
        self.transport.get("/v1/models", &self.headers()).map(drop)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { streaming: false, tools: false, json_mode: false, max_context: self.max_context, vision: false }
    }
}

/// `{"type":"error","error":{"type":"rate_limit_error","message":"…"}}`.
fn read_error(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    let message = error.get("message")?.as_str()?;
    Some(match error.get("type").and_then(Value::as_str) {
        Some(kind) => format!("{kind}: {message}"),
        None => message.to_owned(),
    })
}
