//! Who may call the HTTP transport and how often: the API-key check, the per-key rate limits,
//! and the refusals they produce (401, 429), each counted in the metrics and written to the
//! audit log; which key each MCP session belongs to (a session answers only the key that opened
//! it). Calls that get through are timed, counted and audited by [`CallObserver`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::RoleServer;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;

use kenning_gateway::{AuditEntry, AuditLog, LimitClass, Metrics, Outcome, Rejection, Scope, Verdict};

/// The authenticated caller of a request, put in the request's extensions by the key check
/// and read by tools (as the author of what they write), by the server (which shows a scoped
/// key only what its scope allows) and by the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub identity: String,
    pub key_id: String,
    /// The key's name, for messages.
    pub key_name: String,
    pub scope: Scope,
}

/// Why a scoped key may not make a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OutOfScope {
    /// The key may use none of the domains this server keeps.
    NoDomain { key: String, domains: String },
    /// The key is read-only and the tool writes.
    Writes { key: String, tool: String },
}

impl OutOfScope {
    pub(crate) fn message(&self) -> String {
        match self {
            OutOfScope::NoDomain { key, domains } => {
                format!("the API key `{key}` may use the domains {domains}, none of which this server keeps")
            }
            OutOfScope::Writes { key, tool } => format!("the API key `{key}` is read-only and `{tool}` writes"),
        }
    }

    fn suggestion(&self) -> &'static str {
        match self {
            OutOfScope::NoDomain { .. } => "use a key whose --domains include one of this server's domains (`memory_status` lists them)",
            OutOfScope::Writes { .. } => "call a tool that only reads, or use a key created without --read-only",
        }
    }

    /// The call's answer: a tool result with `isError: true`, so that the agent reads why.
    pub(crate) fn tool_result(&self) -> CallToolResult {
        CallToolResult::structured_error(serde_json::json!({
            "error": "forbidden",
            "message": self.message(),
            "suggestion": self.suggestion(),
        }))
    }

    /// The answer to a request that is not a tool call (a resource read, a prompt).
    pub(crate) fn rpc_error(&self) -> rmcp::ErrorData {
        rmcp::ErrorData::invalid_request(self.message(), Some(serde_json::json!({ "error": "forbidden", "suggestion": self.suggestion() })))
    }
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
pub use kenning_gateway::Access as HttpAccess;

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

/// Times, counts and audits every call that reaches the server's dispatch and reads or writes
/// memory: tool calls (timed into the metrics too), resource reads and listings, prompts.
#[derive(Debug)]
pub(crate) struct CallObserver {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) audit: Option<Arc<AuditLog>>,
}

impl CallObserver {
    pub(crate) fn record(&self, method: &str, name: &str, context: &RequestContext<RoleServer>, duration: Duration, outcome: Outcome) {
        if method == TOOLS_CALL {
            self.metrics.observe(name, duration, outcome);
        }
        if let Some(audit) = &self.audit {
            let caller = caller(context);
            let session = session(context);
            audit.record(&AuditEntry {
                time: now_text(),
                identity: caller.as_ref().map(|caller| caller.identity.as_str()),
                key: caller.as_ref().map(|caller| caller.key_id.as_str()),
                method,
                tool: audit_name(name),
                outcome,
                duration_ms: duration.as_secs_f64() * 1000.0,
                session: session.as_deref(),
            });
        }
    }
}

/// The methods that read or write memory, each rate limited and audited.
pub(crate) const TOOLS_CALL: &str = "tools/call";
pub(crate) const RESOURCES_READ: &str = "resources/read";
pub(crate) const RESOURCES_LIST: &str = "resources/list";
pub(crate) const PROMPTS_GET: &str = "prompts/get";

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What was called (a tool or prompt name, a resource's URI) as the client sent it, cut short:
/// a made-up name is worth recording, a kilobyte of one is not.
fn audit_name(name: &str) -> &str {
    match name.char_indices().nth(256) {
        Some((end, _)) => &name[..end],
        None => name,
    }
}

/// The state the key check, the rate limits and the session owners share across requests.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) access: HttpAccess,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) classes: HashMap<String, LimitClass>,
    pub(crate) max_body_bytes: usize,
    pub(crate) sessions: SessionOwners,
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
    uri: Option<String>,
}

/// What a request asks for, as far as limits and the audit care: a method that reads or writes
/// memory, what it names, and its limit class.
struct Asked {
    method: &'static str,
    name: String,
    class: LimitClass,
}

impl Guard {
    fn asked(&self, body: &[u8]) -> Option<Asked> {
        let probe = serde_json::from_slice::<Probe>(body).ok()?;
        let params = probe.params.unwrap_or(ProbeParams { name: None, uri: None });
        let (method, name) = match probe.method.as_deref()? {
            TOOLS_CALL => (TOOLS_CALL, params.name),
            RESOURCES_READ => (RESOURCES_READ, params.uri),
            RESOURCES_LIST => (RESOURCES_LIST, Some(RESOURCES_LIST.to_owned())),
            PROMPTS_GET => (PROMPTS_GET, params.name),
            _ => return None,
        };
        let name = name.unwrap_or_default();
        let class = match method {
            TOOLS_CALL => self.classes.get(&name).copied().unwrap_or(LimitClass::Query),
            _ => LimitClass::Query,
        };
        Some(Asked { method, name, class })
    }

    fn audit_refusal(&self, asked: Option<&Asked>, key: Option<&kenning_gateway::ApiKey>, outcome: Outcome) {
        let (Some(audit), Some(asked)) = (&self.access.audit, asked) else { return };
        audit.record(&AuditEntry {
            time: now_text(),
            identity: key.map(|key| key.identity.as_str()),
            key: key.map(|key| key.id.as_str()),
            method: asked.method,
            tool: audit_name(&asked.name),
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

fn too_many(key: &kenning_gateway::ApiKey, class: LimitClass, per_minute: u32, wait: Duration) -> Response {
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

/// The key check, the rate limits and the session owners in front of `/mcp`. Without keys on a
/// loopback server requests pass unauthenticated; otherwise each needs a valid key, and a call
/// that reads or writes memory takes one call from the key's bucket for its class. Either way a
/// request naming an MCP session must come from whoever opened it.
pub(crate) async fn guard_mcp(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let request = match guard.verdict(request.headers()) {
        Ok(None) => request,
        Ok(Some(verdict)) => match authenticate(&guard, verdict, request).await {
            Ok(request) => request,
            Err(refusal) => return refusal,
        },
        Err(response) => return response,
    };
    let owner = request.extensions().get::<Caller>().map(|caller| caller.key_id.clone());
    let session = request.headers().get(SESSION_HEADER).and_then(|value| value.to_str().ok()).map(str::to_owned);
    if let Some(session) = &session
        && !guard.sessions.belongs(session, owner.as_deref())
    {
        return plain_error(
            StatusCode::NOT_FOUND,
            "there is no MCP session with this id for this key",
            Some("start a new session with `initialize`; a session answers only the key that opened it"),
        );
    }
    let closing = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    match (&session, response.headers().get(SESSION_HEADER).and_then(|value| value.to_str().ok())) {
        (None, Some(opened)) => guard.sessions.bind(opened, owner).await,
        (Some(session), _) if closing && response.status().is_success() => guard.sessions.unbind(session),
        _ => {}
    }
    // rmcp answers a session's end with 202 Accepted, which the Python SDK logs as "Session
    // termination failed: 202" at the close of every session; the session is gone at once, so
    // the answer is 204 No Content, which every client counts as done.
    if closing && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = Body::empty();
        response.headers_mut().remove(header::CONTENT_LENGTH);
    }
    response
}

/// The key check and rate limits of a server with keys: the request with its [`Caller`], or
/// the refusal (401, 429).
async fn authenticate(guard: &Guard, verdict: Verdict, request: Request) -> Result<Request, Response> {
    let presented = bearer(request.headers()).is_some();
    let (mut parts, body) = request.into_parts();
    let bytes = if parts.method == Method::POST {
        axum::body::to_bytes(body, guard.max_body_bytes)
            .await
            .map_err(|_| plain_error(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than the server accepts", None))?
    } else {
        Bytes::new()
    };
    let asked = guard.asked(&bytes);
    let key = match verdict {
        Verdict::Valid(key) => key,
        refused => {
            guard.metrics.reject(Rejection::Unauthorized);
            guard.audit_refusal(asked.as_ref(), None, Outcome::Unauthorized);
            return Err(unauthorized(&refused, presented));
        }
    };
    if let Some(asked) = &asked
        && let Err(wait) = guard.access.limiter.take(&key.id, asked.class, Instant::now())
    {
        guard.metrics.reject(Rejection::RateLimited);
        guard.audit_refusal(Some(asked), Some(&key), Outcome::RateLimited);
        return Err(too_many(&key, asked.class, guard.access.limiter.limits().per_minute(asked.class), wait));
    }
    parts.extensions.insert(Caller { identity: key.identity, key_id: key.id, key_name: key.name, scope: key.scope });
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The header that names an MCP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Which key opened each MCP session (`None`: a session opened while the server needed no key).
/// A session's notifications and answers belong to whoever opened it, so a request naming a
/// session it did not open is answered as one naming no session at all (404).
#[derive(Debug)]
pub(crate) struct SessionOwners {
    owners: Mutex<HashMap<String, Option<String>>>,
    /// rmcp's sessions, to forget the owners of sessions that ended without a DELETE (idle).
    manager: Arc<LocalSessionManager>,
    /// How many owners were kept after the last sweep; the next runs when that has doubled.
    swept: AtomicUsize,
}

/// Owners are swept of ended sessions no more often than once this many sessions were opened.
const SWEEP_AFTER: usize = 64;

impl SessionOwners {
    pub(crate) fn new(manager: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners { owners: Mutex::default(), manager, swept: AtomicUsize::new(0) }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<String>>> {
        self.owners.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn belongs(&self, session: &str, owner: Option<&str>) -> bool {
        self.owners().get(session).is_some_and(|opener| opener.as_deref() == owner)
    }

    async fn bind(&self, session: &str, owner: Option<String>) {
        let count = {
            let mut owners = self.owners();
            owners.insert(session.to_owned(), owner);
            owners.len()
        };
        if count >= SWEEP_AFTER.max(2 * self.swept.load(Ordering::Relaxed)) {
            let live: std::collections::HashSet<String> = self.manager.sessions.read().await.keys().map(ToString::to_string).collect();
            let mut owners = self.owners();
            owners.retain(|session, _| live.contains(session));
            self.swept.store(owners.len(), Ordering::Relaxed);
        }
    }

    fn unbind(&self, session: &str) {
        self.owners().remove(session);
    }
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

/// For the routes rmcp does not guard (`/healthz`, `/metrics`), the rules rmcp applies to
/// `/mcp`: requests whose `Origin` is not a loopback origin are refused (requests without one,
/// from non-browser clients, pass), and on a loopback server so are requests whose `Host` is
/// not loopback, which is how a page reached through DNS rebinding names the server.
pub(crate) async fn same_machine(State(loopback): State<bool>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|value| value.to_str().ok());
    if loopback && !host.is_some_and(kenning_gateway::is_loopback_host) {
        return plain_error(StatusCode::FORBIDDEN, "Forbidden: the Host is not this machine's loopback address", None);
    }
    match request.headers().get(header::ORIGIN) {
        None => next.run(request).await,
        Some(origin) if origin.to_str().is_ok_and(kenning_gateway::is_loopback_origin) => next.run(request).await,
        Some(_) => plain_error(StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed", None),
    }
}

/// Headers every response of the MCP endpoint, `/healthz` and `/metrics` carries, where the
/// response has not set its own: none of them is a page to render, frame or sniff.
const RESPONSE_HEADERS: [(&str, &str); 4] = [
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("content-security-policy", "default-src 'none'; frame-ancestors 'none'"),
];

pub(crate) async fn response_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    for (name, value) in RESPONSE_HEADERS {
        response.headers_mut().entry(name).or_insert(HeaderValue::from_static(value));
    }
    response
}

