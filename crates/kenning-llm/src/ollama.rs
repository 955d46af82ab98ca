//! Ollama's native chat API: `POST /api/chat` with `stream: false`.

use kenning_core::llm::{Capabilities, Completion, CompletionRequest, LanguageModel, LlmError, LlmErrorKind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::settings::{ApiKey, ProviderSettings};
use crate::transport::Transport;

#[derive(Debug)]
pub struct Ollama {
    transport: Transport,
    model: String,
    max_context: usize,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    model: Option<String>,
    message: ChatMessage,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
}

#[derive(Deserialize)]
struct ChatMessage {
    content: String,
}

impl Ollama {
    pub fn new(settings: &ProviderSettings, key: Option<ApiKey>) -> Ollama {
        Ollama { transport: Transport::new(settings, key, read_error), model: settings.model.clone(), max_context: settings.max_context }
    }

    /// A key only when one is configured: a local server needs none; a hosted one or a proxy in
    /// front of it takes a bearer token.
    fn headers(&self) -> Vec<(&'static str, String)> {
        self.transport.key().map(|key| ("authorization", format!("Bearer {key}"))).into_iter().collect()
    }
}

impl LanguageModel for Ollama {
    fn name(&self) -> String {
        format!("ollama/{}", self.model)
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.extend(request.messages.iter().map(|message| json!(message)));
        let mut options = json!({"num_predict": request.max_tokens});
        if let Some(temperature) = request.temperature {
            options["temperature"] = json!(temperature);
        }
        let mut body = json!({"model": self.model, "messages": messages, "stream": false, "options": options});
        if request.json {
            body["format"] = json!("json");
        }
        let text = self.transport.post("/api/chat", &self.headers(), &body)?;
        let response: ChatResponse = serde_json::from_str(&text)
            .map_err(|error| self.transport.error(LlmErrorKind::Malformed, format!("the answer is not an /api/chat response: {error}")))?;
        if !response.done {
            return Err(self.transport.error(LlmErrorKind::Malformed, "the answer is not done although streaming was off"));
        }
        if response.message.content.is_empty() {
            return Err(self.transport.error(LlmErrorKind::Malformed, "the answer's message is empty"));
        }
        Ok(Completion {
            text: response.message.content,
            provider: "ollama".to_owned(),
            model: response.model.unwrap_or_else(|| self.model.clone()),
            input_tokens: response.prompt_eval_count,
            output_tokens: response.eval_count,
        })
    }

    fn health_check(&self) -> Result<(), LlmError> {
        self.transport.get("/api/tags", &self.headers()).map(drop)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { streaming: false, tools: false, json_mode: true, max_context: self.max_context, vision: false }
    }
}

/// `{"error": "…"}`.
fn read_error(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    value.get("error")?.as_str().map(str::to_owned)
}
