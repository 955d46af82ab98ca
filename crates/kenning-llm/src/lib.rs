//! Language model providers behind `kenning_core::llm::LanguageModel`.
//!
//! The main types:
//! - [`Anthropic`] (the Messages API), [`OpenAi`] (Chat Completions; also LM Studio's
//!   OpenAI-compatible server, as [`OpenAi::lmstudio`]) and [`Ollama`] (its native `/api/chat`).
//!   Each sends one non-streaming request per completion through a shared transport, which
//!   bounds it by a timeout, waits for the provider's client-side rate limit (a token bucket of
//!   requests per minute), and retries 429, 5xx, 529 and dropped connections with exponential
//!   backoff and full jitter, honouring `retry-after` up to a bound.
//! - [`Provider`]: one configured provider of any of these kinds, built by [`connect`].
//! - [`Configured`]: a provider with the request settings of its entry: the temperature of its
//!   requests, a cap on an answer's tokens, and a limit on tokens a minute.
//! - [`Fallback`]: an ordered chain of models, itself a `LanguageModel`: the first that answers
//!   wins, and when none does the error names every provider's failure.
//! - [`ProviderSettings`]: what configures a provider (kind, model, base URL, the environment
//!   variable holding its key, timeout, retries, rate, context window), checked from the
//!   `[[llm.providers]]` entries of `kenning.toml` by [`ProviderSettings::from_json`].
//! - [`ApiKey`]: a key read from the environment; its `Debug` hides it, and every error message a
//!   provider builds has it scrubbed, so a key never reaches a log or a response.
//!
//! This is the only crate that talks to a language model over the network. Calls block, as the
//! engine does; no provider streams (kenning reads whole answers), and each says so in its
//! capabilities.

mod anthropic;
mod fallback;
mod limiter;
mod ollama;
mod openai;
mod settings;
mod transport;

use std::sync::Arc;
use std::time::Duration;

pub use anthropic::Anthropic;
pub use fallback::Fallback;
pub use kenning_core::llm::{Capabilities, Completion, CompletionRequest, LanguageModel, LlmError, LlmErrorKind, Message, Role};
pub use ollama::Ollama;
pub use openai::OpenAi;
pub use settings::{ApiKey, ProviderKind, ProviderSettings};

/// Why a provider could not be set up from its settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The environment variable that should hold a provider's key is unset or empty.
    #[error(
        "the {provider} provider needs an API key in the environment variable {variable}, which is not set \
         (keys are read from the environment only, never from kenning.toml): export {variable}, or name \
         another variable with `api_key_env`"
    )]
    MissingKey { provider: &'static str, variable: String },
}

/// One configured provider, whichever its kind.
#[derive(Debug)]
pub enum Provider {
    Anthropic(Anthropic),
    OpenAi(OpenAi),
    Ollama(Ollama),
}

impl Provider {
    fn model(&self) -> &dyn LanguageModel {
        match self {
            Provider::Anthropic(provider) => provider,
            Provider::OpenAi(provider) => provider,
            Provider::Ollama(provider) => provider,
        }
    }
}

impl LanguageModel for Provider {
    fn name(&self) -> String {
        self.model().name()
    }
    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        self.model().complete(request)
    }
    fn health_check(&self) -> Result<(), LlmError> {
        self.model().health_check()
    }
    fn capabilities(&self) -> Capabilities {
        self.model().capabilities()
    }
}

/// Builds a provider from its settings, reading its key from the environment through `env` (the
/// process environment in the binary, a closure in tests).
pub fn connect(settings: &ProviderSettings, env: &dyn Fn(&str) -> Option<String>) -> Result<Provider, Error> {
    let key = settings.api_key(env)?;
    Ok(match settings.kind {
        ProviderKind::Anthropic => Provider::Anthropic(Anthropic::new(settings, key)),
        ProviderKind::OpenAi => Provider::OpenAi(OpenAi::new(settings, key)),
        ProviderKind::LmStudio => Provider::OpenAi(OpenAi::lmstudio(settings, key)),
        ProviderKind::Ollama => Provider::Ollama(Ollama::new(settings, key)),
    })
}

/// A provider with the request settings of its `[llm]` entry: `temperature` sent with every
/// request in place of kenning's own (which asks for 0, answers that must parse, wherever it
/// asks at all), `max_tokens` as a cap on every answer, and `tokens_per_minute` as a client-side
/// limit on the tokens a request can use (its prompt, estimated at four characters a token, and
/// its answer's cap), waited for like the request rate.
#[derive(Debug)]
pub struct Configured {
    provider: Provider,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    tokens: Option<limiter::TokenBucket>,
    /// How long a request may wait for the token limit: the provider's timeout.
    patience: Duration,
}

impl Configured {
    pub fn new(provider: Provider, settings: &ProviderSettings) -> Configured {
        Configured {
            provider,
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            tokens: settings.tokens_per_minute.map(limiter::TokenBucket::new),
            patience: settings.timeout,
        }
    }

    /// The request as this provider's settings shape it.
    pub fn shape(&self, request: &CompletionRequest) -> CompletionRequest {
        let mut shaped = request.clone();
        shaped.temperature = self.temperature.or(shaped.temperature);
        if let Some(cap) = self.max_tokens {
            shaped.max_tokens = shaped.max_tokens.min(cap);
        }
        shaped
    }
}

/// The tokens a request can use: its prompt at four characters a token, and its answer's cap.
fn estimated_tokens(request: &CompletionRequest) -> f64 {
    let characters = request.system.as_deref().map_or(0, str::len) + request.messages.iter().map(|message| message.content.len()).sum::<usize>();
    (characters as f64 / 4.0).ceil() + f64::from(request.max_tokens)
}

impl LanguageModel for Configured {
    fn name(&self) -> String {
        self.provider.name()
    }
    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let request = self.shape(request);
        if let Some(tokens) = &self.tokens {
            tokens.acquire(estimated_tokens(&request), self.patience).map_err(|wait| LlmError {
                provider: self.provider.name(),
                kind: LlmErrorKind::RateLimited,
                message: format!(
                    "kenning's own limit for this provider is reached (tokens_per_minute); the request may go in {:.1} s, later than the {} s timeout",
                    wait.as_secs_f64(),
                    self.patience.as_secs_f64()
                ),
            })?;
        }
        self.provider.complete(&request)
    }
    fn health_check(&self) -> Result<(), LlmError> {
        self.provider.health_check()
    }
    fn capabilities(&self) -> Capabilities {
        self.provider.capabilities()
    }
}

/// Builds every configured provider, in order, into one fallback chain. A missing key of any of
/// them is an error: a chain that silently lost a member would hide a broken configuration until
/// the providers before it failed.
pub fn chain(settings: &[ProviderSettings], env: &dyn Fn(&str) -> Option<String>) -> Result<Fallback, Error> {
    let providers = settings
        .iter()
        .map(|settings| connect(settings, env).map(|provider| Arc::new(Configured::new(provider, settings)) as Arc<dyn LanguageModel>))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Fallback::new(providers))
}
