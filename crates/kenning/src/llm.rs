//! The `[llm]` section of `kenning.toml` and the language model chain built from it.
//!
//! ```toml
//! [[llm.providers]]            # tried in this order
//! provider = "anthropic"       # anthropic | openai | ollama | lmstudio
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"
//! ```
//!
//! A single provider may also be written as the `[llm]` table itself (`[llm]` with `provider`,
//! `model`, …), the form of the seed configuration.

use std::sync::Arc;

use anyhow::Result;
use kenning_core::FieldError;
use kenning_llm::{Fallback, ProviderSettings};
use serde_json::Value;

/// Checks the `[llm]` section: a table holding only a non-empty `providers` array of tables,
/// or one provider's fields.
pub fn parse_section(section: &toml::Value) -> Result<Vec<ProviderSettings>, FieldError> {
    let as_json = |value: &toml::Value| serde_json::to_value(value).unwrap_or(Value::Null);
    let Some(table) = section.as_table() else {
        return Err(FieldError::new("llm", "is not a table", as_json(section), "write [[llm.providers]] tables, one per provider"));
    };
    if !table.contains_key("providers") && table.contains_key("provider") {
        return Ok(vec![ProviderSettings::from_json("llm", &as_json(section))?]);
    }
    if let Some((key, value)) = table.iter().find(|(key, _)| key.as_str() != "providers") {
        return Err(FieldError::new(
            format!("llm.{key}"),
            "is not a known field",
            as_json(value),
            "[llm] holds only `providers`: one [[llm.providers]] table per provider, in fallback order",
        ));
    }
    let providers = match table.get("providers") {
        Some(toml::Value::Array(providers)) if !providers.is_empty() => providers,
        other => {
            return Err(FieldError::new(
                "llm.providers",
                "lists no provider",
                other.map_or(Value::Null, as_json),
                "add a [[llm.providers]] table with `provider` and `model`, or remove [llm] to run without a language model",
            ));
        }
    };
    providers.iter().enumerate().map(|(index, entry)| ProviderSettings::from_json(&format!("llm.providers[{index}]"), &as_json(entry))).collect()
}

/// The configured chain, or `None` without an `[llm]` section. A provider whose key variable is
/// unset is an error naming the variable.
pub fn language_model(providers: Option<&[ProviderSettings]>) -> Result<Option<Arc<Fallback>>> {
    let Some(providers) = providers else { return Ok(None) };
    let chain = kenning_llm::chain(providers, &|name| std::env::var(name).ok())?;
    Ok(Some(Arc::new(chain)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_are_read_in_order_and_bad_entries_name_their_field() {
        let section: toml::Table = toml::from_str(
            "[[llm.providers]]\nprovider = \"ollama\"\nmodel = \"llama3.2\"\n[[llm.providers]]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\ntimeout_secs = 10\n",
        )
        .unwrap();
        let providers = parse_section(&section["llm"]).unwrap();
        assert_eq!(providers.iter().map(ProviderSettings::label).collect::<Vec<_>>(), ["ollama/llama3.2", "openai/gpt-4o-mini"]);

        let section: toml::Table = toml::from_str("[llm]\nprovider = \"openai\"\nproviders = []\n").unwrap();
        let error = parse_section(&section["llm"]).unwrap_err();
        assert_eq!(error.field, "llm.provider");
        let section: toml::Table = toml::from_str("[llm]\nproviders = []\n").unwrap();
        assert_eq!(parse_section(&section["llm"]).unwrap_err().field, "llm.providers");
        let section: toml::Table = toml::from_str("[[llm.providers]]\nprovider = \"openai\"\nmodel = \"m\"\nmax_retries = 99\n").unwrap();
        let error = parse_section(&section["llm"]).unwrap_err();
        assert_eq!((error.field.as_str(), &error.received), ("llm.providers[0].max_retries", &Value::from(99)));
    }

    /// The seed configuration's `[llm]` table, verbatim: one provider, its request defaults,
    /// rate limits and retry delay.
    #[test]
    fn the_single_table_form_and_its_request_options_are_read() {
        let seed = "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-3-5-sonnet-20241022\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n\
            temperature = 0.3\nmax_tokens = 1000\ntimeout_seconds = 30\nrequests_per_minute = 60\ntokens_per_minute = 100000\nmax_retries = 3\nretry_delay_ms = 1000\n";
        let section: toml::Table = toml::from_str(seed).unwrap();
        let providers = parse_section(&section["llm"]).unwrap();
        let [provider] = providers.as_slice() else { panic!("one provider: {providers:?}") };
        assert_eq!(provider.label(), "anthropic/claude-3-5-sonnet-20241022");
        assert_eq!((provider.temperature, provider.max_tokens, provider.tokens_per_minute), (Some(0.3), Some(1000), Some(100_000)));
        assert_eq!((provider.timeout.as_secs(), provider.max_retries, provider.backoff_base.as_millis()), (30, 3, 1000));

        // A model per provider when none is named, and LM Studio's port.
        let section: toml::Table = toml::from_str("[llm]\nprovider = \"lmstudio\"\nport = 4321\n").unwrap();
        let providers = parse_section(&section["llm"]).unwrap();
        assert_eq!((providers[0].label().as_str(), providers[0].base_url.as_str()), ("lmstudio/qwen2.5-7b-instruct", "http://localhost:4321"));
        let section: toml::Table = toml::from_str("[llm]\nprovider = \"openai\"\ntemperature = 3\n").unwrap();
        assert_eq!(parse_section(&section["llm"]).unwrap_err().field, "llm.temperature");
    }

    #[test]
    fn without_a_section_there_is_no_model() {
        assert!(language_model(None).unwrap().is_none());
    }
}
