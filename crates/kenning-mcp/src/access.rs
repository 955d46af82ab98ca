//! Who may call the HTTP transport and how often: the API-key check, the per-key rate limits,
//! and the refusals they produce (401, 429), each counted in the metrics and written to the
//! audit log. Calls that get through are timed, counted and audited by [`CallObserver`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde::Deserialize;

use kenning_service::{AuditEntry, AuditLog, LimitClass, Metrics, Outcome, Rejection, Verdict};

/// The authenticated caller of a request, put in the request's extensions by the key check
/// and read by tools (as the author of what they write) and by the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub identity: String,
    pub key_id: String,
}

/// The caller of a tool call, when the HTTP transport authenticated one; `None` over stdio and
/// on a loopback server without keys.
pub(crate) fn caller(context: &RequestContext<RoleServer>) -> Option<Caller> {
    context.extensions.get::<axum::http::request::Parts>()?.extensions.get::<Caller>().cloned()
}

fn session(context: &RequestContext<RoleServer>) -> Option<String> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    parts.headers.get("mcp-session-id")?.to_str().ok().map(str::to_owned)
}

/// What `serve_http` enforces and records beyond the Origin check (the same rules the web
/// view applies).
pub use kenning_service::Access as HttpAccess;

/// Tools whose calls count against the calibration limit: each computes over a module's
/// whole record of outcomes.
const CALIBRATION_TOOLS: &[&str] = &["decision_calibration", "decision_skills", "decision_context"];

/// The limit class of each tool: calibration tools by name, then writers (not read-only) as
/// captures and readers as queries.
pub(crate) fn limit_classes(tools: &[rmcp::model::Tool]) -> HashMap<String, LimitClass> {
    tools
        .iter()
        .map(|tool| {
            let name = tool.name.to_string();
            let class = if CALIBRATION_TOOLS.contains(&name.as_str()) {
                LimitClass::Calibration
            } else if tool.annotations.as_ref().and_then(|annotations| annotations.read_only_hint) == Some(true) {
                LimitClass::Query
            } else {
                LimitClass::Capture
            };
            (name, class)
        })
        .collect()
}

/// Times, counts and audits every tool call that reaches the server's dispatch.
#[derive(Debug)]
pub(crate) struct CallObserver {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) audit: Option<Arc<AuditLog>>,
}

impl CallObserver {
    pub(crate) fn record(&self, tool: &str, context: &RequestContext<RoleServer>, duration: Duration, outcome: Outcome) {
        self.metrics.observe(tool, duration, outcome);
        if let Some(audit) = &self.audit {
            let caller = caller(context);
            let session = session(context);
            audit.record(&AuditEntry {
                time: now_text(),
                identity: caller.as_ref().map(|caller| caller.identity.as_str()),
                key: caller.as_ref().map(|caller| caller.key_id.as_str()),
                tool: audit_tool_name(tool),
                outcome,
                duration_ms: duration.as_secs_f64() * 1000.0,
                session: session.as_deref(),
            });
        }
    }
}

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A tool name as the client sent it, cut short: a made-up name is worth recording, a
/// kilobyte of one is not.
fn audit_tool_name(name: &str) -> &str {
    match name.char_indices().nth(64) {
        Some((end, _)) => &name[..end],
        None => name,
    }
}

/// The state the key check and the rate limits share across requests.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) access: HttpAccess,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) classes: HashMap<String, LimitClass>,
    pub(crate) max_body_bytes: usize,
}

/// Only the fields of a JSON-RPC message the guard needs; serde skips the rest unread.
#[derive(Deserialize)]
struct Probe {
    method: Option<String>,
    params: Option<ProbeParams>,
}

#[derive(Deserialize)]
struct ProbeParams {
    name: Option<String>,
}

/// What a request asks for, as far as limits and the audit care.
struct Asked {
    tool: Option<String>,
    class: Option<LimitClass>,
}

impl Guard {
    fn asked(&self, body: &[u8]) -> Asked {
        let Ok(probe) = serde_json::from_slice::<Probe>(body) else { return Asked { tool: None, class: None } };
        match probe.method.as_deref() {
            Some("tools/call") => {
                let tool = probe.params.and_then(|params| params.name);
                let class = Some(tool.as_deref().and_then(|tool| self.classes.get(tool).copied()).unwrap_or(LimitClass::Query));
                Asked { tool, class }
            }
            Some("resources/read") => Asked { tool: None, class: Some(LimitClass::Query) },
            _ => Asked { tool: None, class: None },
        }
    }

    fn audit_refusal(&self, tool: Option<&str>, key: Option<&kenning_service::ApiKey>, outcome: Outcome) {
        let (Some(audit), Some(tool)) = (&self.access.audit, tool) else { return };
        audit.record(&AuditEntry {
            time: now_text(),
            identity: key.map(|key| key.identity.as_str()),
            key: key.map(|key| key.id.as_str()),
            tool: audit_tool_name(tool),
            outcome,
            duration_ms: 0.0,
            session: None,
        });
    }

    /// Whether requests need a key now, and the verdict on the one presented.
    fn verdict(&self, headers: &HeaderMap) -> Result<Option<Verdict>, Response> {
        self.access.verdict(bearer(headers)).map_err(|error| {
            tracing::error!(%error, "refusing requests: the key file cannot be read");
            plain_error(StatusCode::INTERNAL_SERVER_ERROR, "the server's key file cannot be read; its log says why", None)
        })
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, secret) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(secret.trim())
}

fn plain_error(status: StatusCode, message: &str, suggestion: Option<&str>) -> Response {
    let body = serde_json::json!({ "error": status.canonical_reason().unwrap_or("error"), "message": message, "suggestion": suggestion });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn unauthorized(verdict: &Verdict, presented: bool) -> Response {
    let (message, header_value) = match verdict {
        Verdict::Revoked(key) => (format!("the API key `{}` ({}) was revoked", key.name, key.id), r#"Bearer realm="kenning", error="invalid_token""#),
        _ if presented => ("the API key is not known to this server".to_owned(), r#"Bearer realm="kenning", error="invalid_token""#),
        _ => ("this server requires an API key".to_owned(), r#"Bearer realm="kenning""#),
    };
    let mut response = plain_error(
        StatusCode::UNAUTHORIZED,
        &message,
        Some("send `Authorization: Bearer kenning_…`; create a key with `kenning keys create --name NAME` on the server's machine"),
    );
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(header_value));
    response
}

fn too_many(key: &kenning_service::ApiKey, class: LimitClass, per_minute: u32, wait: Duration) -> Response {
    let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
    let body = serde_json::json!({
        "error": "Too Many Requests",
        "message": format!("the API key `{}` is over its limit of {per_minute} {} calls a minute", key.name, class.as_str()),
        "suggestion": format!("retry after {seconds} s; limits are set in kenning.toml [server.rate_limits]"),
        "retry_after_seconds": seconds,
    });
    let mut response = (StatusCode::TOO_MANY_REQUESTS, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// The key check and the rate limits in front of `/mcp`. Without keys on a loopback server
/// requests pass untouched; otherwise each needs a valid key, and a tool call or resource read
/// takes one call from the key's bucket for its class.
pub(crate) async fn guard_mcp(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let verdict = match guard.verdict(request.headers()) {
        Ok(None) => return next.run(request).await,
        Ok(Some(verdict)) => verdict,
        Err(response) => return response,
    };
    let presented = bearer(request.headers()).is_some();
    let (mut parts, body) = request.into_parts();
    let bytes = if parts.method == Method::POST {
        match axum::body::to_bytes(body, guard.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(_) => return plain_error(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than the server accepts", None),
        }
    } else {
        Bytes::new()
    };
    let asked = guard.asked(&bytes);
    let key = match verdict {
        Verdict::Valid(key) => key,
        refused => {
            guard.metrics.reject(Rejection::Unauthorized);
            guard.audit_refusal(asked.tool.as_deref(), None, Outcome::Unauthorized);
            return unauthorized(&refused, presented);
        }
    };
    if let Some(class) = asked.class
        && let Err(wait) = guard.access.limiter.take(&key.id, class, Instant::now())
    {
        guard.metrics.reject(Rejection::RateLimited);
        guard.audit_refusal(asked.tool.as_deref(), Some(&key), Outcome::RateLimited);
        return too_many(&key, class, guard.access.limiter.limits().per_minute(class), wait);
    }
    parts.extensions.insert(Caller { identity: key.identity, key_id: key.id });
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// The key check alone, for `/metrics`: a scraper needs a key when callers do, but is not
/// rate limited.
pub(crate) async fn guard_key(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.verdict(request.headers()) {
        Ok(None) | Ok(Some(Verdict::Valid(_))) => next.run(request).await,
        Ok(Some(refused)) => {
            guard.metrics.reject(Rejection::Unauthorized);
            let presented = bearer(request.headers()).is_some();
            unauthorized(&refused, presented)
        }
        Err(response) => response,
    }
}

/// Refuses requests whose `Origin` is not a loopback origin, as the MCP endpoint does, for the
/// routes rmcp does not guard; requests without an Origin (non-browser clients) pass.
pub(crate) async fn loopback_origin(request: Request, next: Next) -> Response {
    match request.headers().get(header::ORIGIN) {
        None => next.run(request).await,
        Some(origin) if origin.to_str().is_ok_and(kenning_service::is_loopback_origin) => next.run(request).await,
        Some(_) => plain_error(StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed", None),
    }
}

