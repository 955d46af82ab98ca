//! The HTTP side every provider shares: one blocking client per provider, the timeout, the rate
//! limit, retries with backoff, and errors classified and scrubbed of the key.

use std::sync::OnceLock;
use std::time::Duration;

use kenning_core::llm::{LlmError, LlmErrorKind};
use ureq::http::Response;
use ureq::{Agent, Body};

use crate::limiter::TokenBucket;
use crate::settings::{ApiKey, ProviderSettings};

/// How much of an unparsed error body an error message quotes.
const QUOTED_BODY: usize = 300;

/// Reads a provider's error body into a message, when it has the provider's error shape.
pub(crate) type ErrorReader = fn(&str) -> Option<String>;

pub(crate) struct Transport {
    /// Made on the first request: loading the system's roots costs a few milliseconds that a
    /// command which never asks the model (most of them) should not pay.
    agent: OnceLock<Agent>,
    provider: &'static str,
    base_url: String,
    key: Option<ApiKey>,
    timeout: Duration,
    max_retries: u32,
    backoff_base: Duration,
    max_backoff: Duration,
    limiter: TokenBucket,
    read_error: ErrorReader,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("base_url", &self.base_url)
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("limiter", &self.limiter)
            .finish()
    }
}

/// What one attempt gave: an answer with its status, or a failure before one arrived.
enum Attempt {
    Answer { status: u16, retry_after: Option<Duration>, body: String },
    TimedOut,
    Dropped(String),
}

impl Transport {
    pub(crate) fn new(settings: &ProviderSettings, key: Option<ApiKey>, read_error: ErrorReader) -> Transport {
        Transport {
            agent: OnceLock::new(),
            provider: settings.kind.name(),
            base_url: settings.base_url.clone(),
            key,
            timeout: settings.timeout,
            max_retries: settings.max_retries,
            backoff_base: settings.backoff_base,
            max_backoff: settings.max_backoff,
            limiter: TokenBucket::new(settings.requests_per_minute),
            read_error,
        }
    }

    fn agent(&self) -> &Agent {
        self.agent.get_or_init(|| {
            Agent::config_builder()
                // Error statuses are answers to classify (and retry), not transport failures.
                .http_status_as_error(false)
                .timeout_global(Some(self.timeout))
                .user_agent(format!("kenning/{}", env!("CARGO_PKG_VERSION")))
                .tls_config(ureq::tls::TlsConfig::builder().root_certs(root_certs()).build())
                .build()
                .new_agent()
        })
    }

    pub(crate) fn key(&self) -> Option<&str> {
        self.key.as_ref().map(ApiKey::expose)
    }

    /// Posts a JSON body to `path` and returns the body of the 2xx answer, retrying what is
    /// transient: 429, 5xx (529 among them) and dropped connections. A timeout is not retried,
    /// so that a call takes at most about `timeout` plus the waits; other 4xx are final.
    pub(crate) fn post(&self, path: &str, headers: &[(&str, String)], body: &serde_json::Value) -> Result<String, LlmError> {
        let payload = serde_json::to_vec(body).map_err(|error| self.error(LlmErrorKind::Rejected, format!("the request could not be written as JSON: {error}")))?;
        let url = format!("{}{path}", self.base_url);
        let mut retries = 0;
        loop {
            self.acquire()?;
            let mut request = self.agent().post(&url).header("content-type", "application/json");
            for (name, value) in headers {
                request = request.header(*name, value.as_str());
            }
            let attempt = read(request.send(&payload[..]));
            let (error, retryable, asked) = match attempt {
                Attempt::Answer { status, body, .. } if (200..300).contains(&status) => return Ok(body),
                Attempt::Answer { status, retry_after, body } => {
                    let kind = classify(status);
                    let retryable = matches!(kind, LlmErrorKind::RateLimited | LlmErrorKind::Unavailable);
                    (self.error(kind, self.describe(status, &body)), retryable, retry_after)
                }
                Attempt::TimedOut => return Err(self.timed_out(retries)),
                Attempt::Dropped(reason) => (self.error(LlmErrorKind::Unavailable, format!("no answer: {reason}")), true, None),
            };
            if !retryable || retries >= self.max_retries {
                return Err(self.final_error(error, retries));
            }
            let wait = match asked {
                Some(asked) if asked > self.max_backoff => {
                    let message = format!(
                        "{}; it asked to retry after {} s, longer than the {} s kenning waits",
                        error.message,
                        asked.as_secs_f64().ceil(),
                        self.max_backoff.as_secs()
                    );
                    return Err(self.final_error(LlmError { message, ..error }, retries));
                }
                Some(asked) => asked,
                None => self.backoff(retries),
            };
            tracing::debug!(provider = self.provider, error = %error, wait_ms = wait.as_millis() as u64, "retrying a language model request");
            std::thread::sleep(wait);
            retries += 1;
        }
    }

    /// One GET with no retries, for the health check: it asks whether the provider answers now.
    pub(crate) fn get(&self, path: &str, headers: &[(&str, String)]) -> Result<String, LlmError> {
        let mut request = self.agent().get(format!("{}{path}", self.base_url));
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        match read(request.call()) {
            Attempt::Answer { status, body, .. } if (200..300).contains(&status) => Ok(body),
            Attempt::Answer { status, body, .. } => Err(self.error(classify(status), self.describe(status, &body))),
            Attempt::TimedOut => Err(self.timed_out(0)),
            Attempt::Dropped(reason) => Err(self.error(LlmErrorKind::Unavailable, format!("no answer: {reason}"))),
        }
    }

    /// An error of this provider, with the key scrubbed from the message: a provider or a proxy
    /// may quote the request's headers back.
    pub(crate) fn error(&self, kind: LlmErrorKind, message: impl Into<String>) -> LlmError {
        let mut message = message.into();
        if let Some(key) = self.key()
            && !key.is_empty()
        {
            message = message.replace(key, "[REDACTED]");
        }
        LlmError { provider: self.provider.to_owned(), kind, message }
    }

    fn acquire(&self) -> Result<(), LlmError> {
        self.limiter.acquire(1.0, self.timeout).map_err(|wait| {
            self.error(
                LlmErrorKind::RateLimited,
                format!(
                    "kenning's own limit for this provider is reached (requests_per_minute); the next request may go in {:.1} s, later than the {} s timeout",
                    wait.as_secs_f64(),
                    self.timeout.as_secs_f64()
                ),
            )
        })
    }

    fn describe(&self, status: u16, body: &str) -> String {
        match (self.read_error)(body) {
            Some(message) => format!("HTTP {status}: {message}"),
            None => {
                let quoted: String = body.trim().chars().take(QUOTED_BODY).collect();
                if quoted.is_empty() { format!("HTTP {status} with an empty body") } else { format!("HTTP {status}: {quoted}") }
            }
        }
    }

    fn timed_out(&self, retries: u32) -> LlmError {
        let error = self.error(LlmErrorKind::Timeout, format!("no complete answer within {} s", self.timeout.as_secs_f64()));
        self.final_error(error, retries)
    }

    fn final_error(&self, error: LlmError, retries: u32) -> LlmError {
        match retries {
            0 => error,
            1 => LlmError { message: format!("{} (after 1 retry)", error.message), ..error },
            n => LlmError { message: format!("{} (after {n} retries)", error.message), ..error },
        }
    }

    /// Exponential backoff with full jitter: a uniform wait between zero and the bound, which
    /// doubles with each retry up to `max_backoff`, so that clients that failed together do not
    /// retry together.
    fn backoff(&self, retries: u32) -> Duration {
        let bound = self.backoff_base.saturating_mul(1u32 << retries.min(20)).min(self.max_backoff);
        let millis = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(fastrand::u64(0..=millis))
    }
}

fn read(result: Result<Response<Body>, ureq::Error>) -> Attempt {
    match result {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let retry_after = retry_after(&response);
            match response.body_mut().read_to_string() {
                Ok(body) => Attempt::Answer { status, retry_after, body },
                Err(error) => failure(error),
            }
        }
        Err(error) => failure(error),
    }
}

fn failure(error: ureq::Error) -> Attempt {
    match error {
        ureq::Error::Timeout(_) => Attempt::TimedOut,
        ureq::Error::Io(ref io) if matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => Attempt::TimedOut,
        other => Attempt::Dropped(other.to_string()),
    }
}

/// The wait a 429 or 503 asks for: `retry-after-ms` (OpenAI sends it, finer than seconds), else
/// `retry-after` in seconds. The HTTP-date form is not used by these providers; it falls back to
/// backoff.
fn retry_after(response: &Response<Body>) -> Option<Duration> {
    let header = |name: &str| response.headers().get(name).and_then(|value| value.to_str().ok()).and_then(|text| text.trim().parse::<f64>().ok());
    let seconds = header("retry-after-ms").map(|millis| millis / 1000.0).or_else(|| header("retry-after"))?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)))
}

fn classify(status: u16) -> LlmErrorKind {
    match status {
        401 | 403 => LlmErrorKind::Unauthorized,
        429 => LlmErrorKind::RateLimited,
        500..=599 => LlmErrorKind::Unavailable,
        _ => LlmErrorKind::Rejected,
    }
}

/// The system's trusted roots (as PostgreSQL's TLS uses), or Mozilla's when the system has none,
/// as in a bare container.
fn root_certs() -> ureq::tls::RootCerts {
    let found = rustls_native_certs::load_native_certs();
    let certs: Vec<ureq::tls::Certificate<'static>> = found.certs.iter().map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned()).collect();
    if certs.is_empty() { ureq::tls::RootCerts::WebPki } else { ureq::tls::RootCerts::new_with_certs(&certs) }
}
