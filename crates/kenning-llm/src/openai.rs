//! OpenAI's Chat Completions API (`POST /v1/chat/completions`, non-streaming), and LM Studio's
//! OpenAI-compatible server, which speaks the same wire format with two differences noted below.

use kenning_core::llm::{Capabilities, Completion, CompletionRequest, LanguageModel, LlmError, LlmErrorKind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::settings::{ApiKey, ProviderSettings};
use crate::transport::Transport;

#[derive(Debug)]
pub struct OpenAi {
    transport: Transport,
    model: String,
    max_context: usize,
    flavour: Flavour,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    OpenAi,
    LmStudio,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Flavour::OpenAi => "openai",
            Flavour::LmStudio => "lmstudio",
        }
    }
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl OpenAi {
    pub fn new(settings: &ProviderSettings, key: Option<ApiKey>) -> OpenAi {
        OpenAi::with_flavour(settings, key, Flavour::OpenAi)
    }

    /// LM Studio's local server: no key unless one is configured, health by its model list.
    pub fn lmstudio(settings: &ProviderSettings, key: Option<ApiKey>) -> OpenAi {
        OpenAi::with_flavour(settings, key, Flavour::LmStudio)
    }

    fn with_flavour(settings: &ProviderSettings, key: Option<ApiKey>, flavour: Flavour) -> OpenAi {
        OpenAi { transport: Transport::new(settings, key, read_error), model: settings.model.clone(), max_context: settings.max_context, flavour }
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        self.transport.key().map(|key| ("authorization", format!("Bearer {key}"))).into_iter().collect()
    }
}

impl LanguageModel for OpenAi {
    fn name(&self) -> String {
        format!("{}/{}", self.flavour.name(), self.model)
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.extend(request.messages.iter().map(|message| json!(message)));
        let mut body = json!({"model": self.model, "messages": messages});
        // OpenAI documents `max_tokens` as deprecated in favour of `max_completion_tokens` (which
        // its reasoning models require); LM Studio documents `max_tokens`.
        let limit = match self.flavour {
            Flavour::OpenAi => "max_completion_tokens",
            Flavour::LmStudio => "max_tokens",
        };
        body[limit] = json!(request.max_tokens);
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        // LM Studio enforces JSON only through a JSON schema, which the request does not carry.
        if request.json && self.flavour == Flavour::OpenAi {
            body["response_format"] = json!({"type": "json_object"});
        }
        let text = self.transport.post("/v1/chat/completions", &self.headers(), &body)?;
        let response: ChatResponse = serde_json::from_str(&text)
            .map_err(|error| self.transport.error(LlmErrorKind::Malformed, format!("the answer is not a chat completion: {error}")))?;
        let Some(choice) = response.choices.into_iter().next() else {
            return Err(self.transport.error(LlmErrorKind::Malformed, "the answer has no choices"));
        };
        if let Some(refusal) = choice.message.refusal.filter(|refusal| !refusal.is_empty()) {
            return Err(self.transport.error(LlmErrorKind::Rejected, format!("the model refused: {refusal}")));
        }
        let Some(answer) = choice.message.content.filter(|content| !content.is_empty()) else {
            let reason = choice.finish_reason.as_deref().unwrap_or("none given");
            return Err(self.transport.error(LlmErrorKind::Malformed, format!("the answer has no content (finish reason: {reason})")));
        };
        Ok(Completion {
            text: answer,
            provider: self.flavour.name().to_owned(),
            model: response.model.unwrap_or_else(|| self.model.clone()),
            input_tokens: response.usage.as_ref().and_then(|usage| usage.prompt_tokens),
            output_tokens: response.usage.as_ref().and_then(|usage| usage.completion_tokens),
        })
    }

    fn health_check(&self) -> Result<(), LlmError> {
        self.transport.get("/v1/models", &self.headers()).map(drop)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { streaming: false, tools: false, json_mode: self.flavour == Flavour::OpenAi, max_context: self.max_context, vision: false }
    }
}

/// `{"error":{"message":"…","type":"…","code":"…"}}`; LM Studio sends `{"error":"…"}` for some
/// failures, which is read too.
fn read_error(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    if let Some(message) = error.as_str() {
        return Some(message.to_owned());
    }
    let message = error.get("message")?.as_str()?;
    let labels: Vec<&str> = ["type", "code"].iter().filter_map(|field| error.get(*field).and_then(Value::as_str)).collect();
    Some(if labels.is_empty() { message.to_owned() } else { format!("{message} ({})", labels.join(", ")) })
}
