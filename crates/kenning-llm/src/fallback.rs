//! The fallback chain: providers tried in the configured order.

use std::sync::Arc;

use kenning_core::llm::{Capabilities, Completion, CompletionRequest, LanguageModel, LlmError, LlmErrorKind};

/// An ordered chain of language models, itself one: a request goes to each in turn until one
/// answers. Any failure moves on (a wrong key at one provider says nothing about the next); when
/// all fail, the error lists every provider's.
pub struct Fallback {
    providers: Vec<Arc<dyn LanguageModel>>,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Fallback").field(&self.providers.iter().map(|provider| provider.name()).collect::<Vec<_>>()).finish()
    }
}

impl Fallback {
    pub fn new(providers: Vec<Arc<dyn LanguageModel>>) -> Fallback {
        Fallback { providers }
    }

    /// The providers in the order they are tried, for checks such as `kenning doctor`.
    pub fn providers(&self) -> &[Arc<dyn LanguageModel>] {
        &self.providers
    }

    /// One error for all the failures: the kind they share, else `Unavailable`, and each
    /// provider's own error in order.
    fn all_failed(&self, what: &str, errors: Vec<LlmError>) -> LlmError {
        let kind = match errors.first() {
            Some(first) if errors.iter().all(|error| error.kind == first.kind) => first.kind,
            _ => LlmErrorKind::Unavailable,
        };
        let message = if errors.is_empty() {
            "no provider is configured".to_owned()
        } else {
            let listed: Vec<String> = errors.iter().map(ToString::to_string).collect();
            format!("{what} of {} providers: {}", errors.len(), listed.join("; "))
        };
        LlmError { provider: "fallback".to_owned(), kind, message }
    }
}

impl LanguageModel for Fallback {
    fn name(&self) -> String {
        self.providers.iter().map(|provider| provider.name()).collect::<Vec<_>>().join(" > ")
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut errors = Vec::new();
        for provider in &self.providers {
            match provider.complete(request) {
                Ok(completion) => return Ok(completion),
                Err(error) => {
                    tracing::warn!(provider = %provider.name(), error = %error, "a language model failed; trying the next");
                    errors.push(error);
                }
            }
        }
        Err(self.all_failed("no answer from any", errors))
    }

    /// Healthy when any provider is: the chain can answer.
    fn health_check(&self) -> Result<(), LlmError> {
        let mut errors = Vec::new();
        for provider in &self.providers {
            match provider.health_check() {
                Ok(()) => return Ok(()),
                Err(error) => errors.push(error),
            }
        }
        Err(self.all_failed("no answer from any", errors))
    }

    /// What the chain can promise whichever provider answers: a feature only if all have it, the
    /// smallest context window.
    fn capabilities(&self) -> Capabilities {
        let all: Vec<Capabilities> = self.providers.iter().map(|provider| provider.capabilities()).collect();
        Capabilities {
            streaming: !all.is_empty() && all.iter().all(|c| c.streaming),
            tools: !all.is_empty() && all.iter().all(|c| c.tools),
            json_mode: !all.is_empty() && all.iter().all(|c| c.json_mode),
            max_context: all.iter().map(|c| c.max_context).min().unwrap_or(0),
            vision: !all.is_empty() && all.iter().all(|c| c.vision),
        }
    }
}
