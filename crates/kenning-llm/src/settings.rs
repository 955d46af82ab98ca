//! What configures a provider, and the checks that turn a `[[llm.providers]]` entry into it.

use std::time::Duration;

use kenning_core::{FieldError, closest};
use serde_json::{Map, Value};

use crate::Error;

/// The kinds of provider kenning speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    Anthropic,
    OpenAi,
    Ollama,
    LmStudio,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 4] = [ProviderKind::Anthropic, ProviderKind::OpenAi, ProviderKind::Ollama, ProviderKind::LmStudio];

    /// The name in `kenning.toml`, in errors and in [`kenning_core::llm::Completion::provider`].
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Ollama => "ollama",
            ProviderKind::LmStudio => "lmstudio",
        }
    }

    pub fn parse(text: &str) -> Option<ProviderKind> {
        ProviderKind::ALL.into_iter().find(|kind| kind.name() == text.trim())
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::OpenAi => "https://api.openai.com",
            ProviderKind::Ollama => "http://localhost:11434",
            ProviderKind::LmStudio => "http://localhost:1234",
        }
    }

    /// The variable the key is read from when `api_key_env` names none. The local servers need
    /// no key; one is sent to them only when `api_key_env` names a variable.
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Ollama | ProviderKind::LmStudio => None,
        }
    }

    /// The context window assumed when `max_context` is not set: what the cloud providers'
    /// current models offer, and the local servers' default context length (4096 tokens for both
    /// Ollama and LM Studio unless the model is loaded with more).
    pub fn default_max_context(self) -> usize {
        match self {
            ProviderKind::Anthropic => 200_000,
            ProviderKind::OpenAi => 128_000,
            ProviderKind::Ollama | ProviderKind::LmStudio => 4_096,
        }
    }

    /// The model of an `[llm]` entry that names none. The seed configuration's defaults
    /// (`claude-3-5-sonnet-20241022`, `llama3`) name models since retired or superseded; these
    /// are current ones.
    pub fn default_model(self) -> &'static str {
        self.example_model()
    }

    fn example_model(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::OpenAi => "gpt-4o-mini",
            ProviderKind::Ollama => "llama3.2",
            ProviderKind::LmStudio => "qwen2.5-7b-instruct",
        }
    }
}

/// A key read from the environment. Its `Debug` shows only that it is there.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([hidden])")
    }
}

/// One provider's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    pub model: String,
    /// Scheme, host and port (and any path prefix of a proxy), without `/v1`.
    pub base_url: String,
    /// The environment variable holding the key; `None` sends no key.
    pub api_key_env: Option<String>,
    /// The bound on one HTTP request, from connecting to the last byte of the answer.
    pub timeout: Duration,
    /// Retries after the first attempt, for 429, 5xx, 529 and dropped connections.
    pub max_retries: u32,
    /// The client-side rate limit, per provider.
    pub requests_per_minute: u32,
    pub max_context: usize,
    /// The bound on the first retry's wait; each later retry doubles it. Not in the file: the
    /// tests shorten it so that retries take milliseconds.
    pub backoff_base: Duration,
    /// The longest wait before a retry, whether from backoff or `retry-after`. A provider that
    /// asks for a longer wait is not retried: the caller learns at once that it is rate limited.
    pub max_backoff: Duration,
    /// The temperature of every request, in place of the one kenning asks for; `None` keeps it.
    pub temperature: Option<f32>,
    /// The most tokens any answer may take: a request asking for more is cut to this.
    pub max_tokens: Option<u32>,
    /// The client-side limit on tokens a minute (the prompt, estimated, and the answer's cap).
    pub tokens_per_minute: Option<u32>,
}

pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
pub const DEFAULT_MAX_RETRIES: u32 = 2;
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 60;
const MAX_TIMEOUT_SECS: u64 = 600;
const MAX_RETRIES: u32 = 10;
const FIELDS: [&str; 14] = [
    "provider",
    "model",
    "base_url",
    "port",
    "api_key_env",
    "timeout_secs",
    "timeout_seconds",
    "max_retries",
    "retry_delay_ms",
    "requests_per_minute",
    "tokens_per_minute",
    "max_context",
    "temperature",
    "max_tokens",
];

impl ProviderSettings {
    /// The defaults of a kind, for a model.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> ProviderSettings {
        ProviderSettings {
            kind,
            model: model.into(),
            base_url: kind.default_base_url().to_owned(),
            api_key_env: kind.default_key_env().map(str::to_owned),
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            max_retries: DEFAULT_MAX_RETRIES,
            requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            temperature: None,
            max_tokens: None,
            tokens_per_minute: None,
            max_context: kind.default_max_context(),
            backoff_base: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }

    /// Checks one `[[llm.providers]]` entry (as JSON; `field` is its place, e.g.
    /// `llm.providers[0]`). Every unknown key and bad value is a [`FieldError`] naming the field.
    pub fn from_json(field: &str, entry: &Value) -> Result<ProviderSettings, FieldError> {
        let Some(table) = entry.as_object() else {
            return Err(FieldError::new(field, "is not a table", entry.clone(), "write each provider as a [[llm.providers]] table"));
        };
        if let Some(unknown) = table.keys().find(|key| !FIELDS.contains(&key.as_str())) {
            let suggestion = match closest(unknown, FIELDS) {
                Some(near) => format!("did you mean `{near}`? The fields are {}", FIELDS.join(", ")),
                None => format!("the fields are {}", FIELDS.join(", ")),
            };
            return Err(FieldError::new(format!("{field}.{unknown}"), "is not a known field", table[unknown].clone(), suggestion));
        }
        let names = ProviderKind::ALL.map(ProviderKind::name);
        let kind_text = required_string(table, field, "provider", &format!("one of {}", names.join(", ")))?;
        let kind = ProviderKind::parse(&kind_text).ok_or_else(|| {
            let near = closest(&kind_text, names).map(|near| format!("did you mean `{near}`? ")).unwrap_or_default();
            FieldError::new(format!("{field}.provider"), "is not a known provider", kind_text.as_str(), format!("{near}use one of {}", names.join(", ")))
        })?;
        let model = optional_string(table, field, "model")?.unwrap_or_else(|| kind.default_model().to_owned());
        let mut settings = ProviderSettings::new(kind, model);
        if let Some(url) = optional_string(table, field, "base_url")? {
            settings.base_url = base_url(&format!("{field}.base_url"), &url)?;
        }
        if let Some(port) = integer(table, field, "port", 1, 65_535, "port")? {
            if table.contains_key("base_url") || !matches!(kind, ProviderKind::LmStudio | ProviderKind::Ollama) {
                return Err(FieldError::new(
                    format!("{field}.port"),
                    "applies only to a local server (lmstudio, ollama) given without base_url",
                    port,
                    "give the whole address as base_url, e.g. `http://localhost:1234`",
                ));
            }
            settings.base_url = format!("http://localhost:{port}");
        }
        if let Some(variable) = optional_string(table, field, "api_key_env")? {
            let valid = !variable.is_empty() && variable.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !variable.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(FieldError::new(
                    format!("{field}.api_key_env"),
                    "is not the name of an environment variable",
                    variable.as_str(),
                    "name the variable holding the key (letters, digits and `_`), e.g. `ANTHROPIC_API_KEY`; never the key itself",
                ));
            }
            settings.api_key_env = Some(variable);
        }
        if table.contains_key("timeout_secs") && table.contains_key("timeout_seconds") {
            return Err(FieldError::new(format!("{field}.timeout_seconds"), "repeats timeout_secs", table["timeout_seconds"].clone(), "give the timeout once"));
        }
        for key in ["timeout_secs", "timeout_seconds"] {
            if let Some(secs) = integer(table, field, key, 1, MAX_TIMEOUT_SECS, "seconds")? {
                settings.timeout = Duration::from_secs(secs);
            }
        }
        if let Some(millis) = integer(table, field, "retry_delay_ms", 1, 60_000, "milliseconds of the first retry's wait")? {
            settings.backoff_base = Duration::from_millis(millis);
        }
        if let Some(value) = table.get("temperature") {
            match value.as_f64() {
                Some(temperature) if (0.0..=2.0).contains(&temperature) => settings.temperature = Some(temperature as f32),
                _ => {
                    return Err(FieldError::new(format!("{field}.temperature"), "is not a number from 0 to 2", value.clone(), "write e.g. `temperature = 0.3`"));
                }
            }
        }
        if let Some(tokens) = integer(table, field, "max_tokens", 1, 1_000_000, "tokens")? {
            settings.max_tokens = Some(tokens as u32);
        }
        if let Some(rate) = integer(table, field, "tokens_per_minute", 1, 1_000_000_000, "tokens a minute")? {
            settings.tokens_per_minute = Some(rate as u32);
        }
        if let Some(retries) = integer(table, field, "max_retries", 0, u64::from(MAX_RETRIES), "retries after the first attempt")? {
            settings.max_retries = retries as u32;
        }
        if let Some(rate) = integer(table, field, "requests_per_minute", 1, 1_000_000, "requests a minute")? {
            settings.requests_per_minute = rate as u32;
        }
        if let Some(tokens) = integer(table, field, "max_context", 1, 100_000_000, "tokens")? {
            settings.max_context = tokens as usize;
        }
        Ok(settings)
    }

    /// `provider/model`, the label of the provider in names and errors.
    pub fn label(&self) -> String {
        format!("{}/{}", self.kind.name(), self.model)
    }

    /// The key from the environment, when this provider sends one.
    pub(crate) fn api_key(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<ApiKey>, Error> {
        let Some(variable) = &self.api_key_env else { return Ok(None) };
        match env(variable).map(|key| key.trim().to_owned()).filter(|key| !key.is_empty()) {
            Some(key) => Ok(Some(ApiKey(key))),
            None => Err(Error::MissingKey { provider: self.kind.name(), variable: variable.clone() }),
        }
    }
}

fn required_string(table: &Map<String, Value>, field: &str, key: &str, suggestion: &str) -> Result<String, FieldError> {
    match optional_string(table, field, key)? {
        Some(text) => Ok(text),
        None => Err(FieldError::new(format!("{field}.{key}"), "is missing", Value::Null, suggestion)),
    }
}

fn optional_string(table: &Map<String, Value>, field: &str, key: &str) -> Result<Option<String>, FieldError> {
    match table.get(key) {
        None => Ok(None),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Some(other) => Err(FieldError::new(format!("{field}.{key}"), "is not a non-empty string", other.clone(), format!("write `{key} = \"…\"`"))),
    }
}

fn integer(table: &Map<String, Value>, field: &str, key: &str, min: u64, max: u64, unit: &str) -> Result<Option<u64>, FieldError> {
    let Some(value) = table.get(key) else { return Ok(None) };
    match value.as_u64() {
        Some(number) if (min..=max).contains(&number) => Ok(Some(number)),
        _ => Err(FieldError::new(
            format!("{field}.{key}"),
            format!("is not a whole number from {min} to {max}"),
            value.clone(),
            format!("give the {unit} as a whole number from {min} to {max}"),
        )),
    }
}

/// The base URL without a trailing slash or `/v1`: the providers add the API's own path, and a
/// URL copied from an SDK's documentation often carries `/v1` already.
fn base_url(field: &str, text: &str) -> Result<String, FieldError> {
    let trimmed = text.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    let rest = trimmed.strip_prefix("https://").or_else(|| trimmed.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) && !host.contains('@') => Ok(trimmed.to_owned()),
        _ => Err(FieldError::new(
            field,
            "is not an http:// or https:// URL without credentials",
            text,
            "give scheme, host and port, e.g. `http://localhost:11434`; keys go in the variable `api_key_env` names",
        )),
    }
}
