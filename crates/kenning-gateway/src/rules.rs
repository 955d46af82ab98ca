//! The rules every HTTP front end (the MCP endpoint, the web view) applies to a request, so
//! that they are written once: which browser origins may reach the server, and whether a
//! request needs an API key and has a valid one.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::error::Error;
use crate::keys::{Authenticator, Verdict};
use crate::limits::RateLimiter;

/// What an HTTP server enforces and records beyond the Origin check: the API keys, the
/// per-key rate limits and the audit log. The binary builds it from the key file, the
/// configured limits and the audit file.
#[derive(Debug, Clone)]
pub struct Access {
    pub authenticator: Arc<Authenticator>,
    pub limiter: Arc<RateLimiter>,
    pub audit: Option<Arc<AuditLog>>,
}

impl Access {
    /// `None` while requests need no key (a loopback server for which no key was ever
    /// created); otherwise the verdict on the secret presented, a missing one being unknown.
    /// A key file that cannot be read is an error: the caller refuses the request.
    pub fn verdict(&self, presented: Option<&str>) -> Result<Option<Verdict>, Error> {
        let (keys, required) = self.authenticator.current()?;
        if !required {
            return Ok(None);
        }
        Ok(Some(match presented {
            Some(secret) => keys.check(secret),
            None => Verdict::Unknown,
        }))
    }

    /// [`Access::verdict`] for a credential bound to a key by its public id (a web view
    /// session): the key as it is now, so that revoking it ends the session too.
    pub fn verdict_of_id(&self, key_id: &str) -> Result<Option<Verdict>, Error> {
        let (keys, required) = self.authenticator.current()?;
        Ok(required.then(|| keys.by_id(key_id)))
    }
}

/// Whether a browser's `Origin` is a page on this machine: `http://localhost[:port]`,
/// `http://127.0.0.1[:port]` or `http://[::1][:port]`. Any other origin is refused, so that a
/// web page cannot reach a loopback server through DNS rebinding.
pub fn is_loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin.strip_prefix("http://") else { return false };
    let host = match authority.strip_prefix("[::1]") {
        Some(rest) => return rest.is_empty() || rest.strip_prefix(':').is_some_and(|port| port.parse::<u16>().is_ok()),
        None => authority,
    };
    let (name, port) = host.split_once(':').map_or((host, None), |(name, port)| (name, Some(port)));
    matches!(name, "localhost" | "127.0.0.1") && port.is_none_or(|port| port.parse::<u16>().is_ok())
}

/// Whether a request's `Host` names this machine's loopback interface (`localhost`,
/// `127.0.0.1` or `[::1]`, with or without a port). A page served by DNS rebinding reaches a
/// loopback server under its own host name, so a loopback server that answers browsers refuses
/// any other `Host`.
pub fn is_loopback_host(host: &str) -> bool {
    is_loopback_origin(&format!("http://{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        for origin in ["http://localhost", "http://localhost:5173", "http://127.0.0.1:8080", "http://[::1]:3000", "http://[::1]"] {
            assert!(is_loopback_origin(origin), "{origin}");
        }
        for origin in ["null", "http://evil.example", "https://localhost:1", "http://localhost.evil.example", "http://127.0.0.1:x", "http://[::1]x"] {
            assert!(!is_loopback_origin(origin), "{origin}");
        }
        assert!(is_loopback_host("127.0.0.1:7777") && is_loopback_host("localhost") && is_loopback_host("[::1]:80"));
        assert!(!is_loopback_host("evil.example:7777") && !is_loopback_host("127.0.0.1.evil.example"));
    }
}
