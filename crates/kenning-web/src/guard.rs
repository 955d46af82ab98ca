//! The rules every request passes, shared with `serve --http`: a loopback server answers only
//! requests addressed to loopback (Host) from pages of this machine (Origin); once any API key
//! exists, every request but the sign-in page needs a valid one (as a bearer token, or a
//! session opened by the sign-in page), and each key is held to its rate limits and its scope.
//! Every request that passes the key check, and every one refused there, is audited.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use kenning_engine::{DecisionService, MemoryService};
use kenning_gateway::{ApiKey, AuditEntry, LimitClass, Outcome, Verdict};

use crate::Web;
use crate::error::Error;
use crate::sessions;

/// Who a page is served to, and the services as that key's scope sees them.
#[derive(Clone)]
pub(crate) struct Viewer {
    pub(crate) identity: Option<String>,
    pub(crate) key_id: Option<String>,
    /// The memories the viewer may read: every domain, or those of the key's scope.
    pub(crate) memory: Arc<MemoryService>,
    pub(crate) decisions: Arc<DecisionService>,
    /// Nothing may be changed: the server or the key is read-only.
    pub(crate) read_only: bool,
}

impl Viewer {
    /// What form tokens are bound to.
    pub(crate) fn subject(&self) -> &str {
        self.key_id.as_deref().unwrap_or("local")
    }

    /// The viewer of a server that needs no key: everything, as the server allows.
    fn anyone(web: &Web) -> Viewer {
        Viewer { identity: None, key_id: None, memory: web.memory.clone(), decisions: web.decisions.clone(), read_only: web.read_only }
    }

    /// The viewer signed in with `key`, seeing what its scope allows; a key whose domains this
    /// server does not keep sees nothing.
    fn signed_in(web: &Web, key: ApiKey) -> Result<Viewer, Error> {
        let (memory, decisions) = match &key.scope.domains {
            None => (web.memory.clone(), web.decisions.clone()),
            Some(domains) => {
                let decisions = web.decisions.restricted(|domain| key.scope.allows(domain)).map(Arc::new).ok_or_else(|| {
                    let names: Vec<String> = domains.iter().map(ToString::to_string).collect();
                    Error::OutOfScope(format!("the API key `{}` may use the domains {}, none of which this server keeps", key.name, names.join(", ")))
                })?;
                (decisions.memory().clone(), decisions)
            }
        };
        Ok(Viewer { read_only: web.read_only || key.scope.read_only, identity: Some(key.identity), key_id: Some(key.id), memory, decisions })
    }
}

/// The Host and Origin rules of a loopback server, for every route.
pub(crate) async fn same_machine(request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|value| value.to_str().ok());
    if !host.is_some_and(kenning_gateway::is_loopback_host) {
        return Error::Forbidden("Forbidden: the Host is not this machine's loopback address").into_response();
    }
    match request.headers().get(header::ORIGIN) {
        None => next.run(request).await,
        Some(origin) if origin.to_str().is_ok_and(kenning_gateway::is_loopback_origin) => next.run(request).await,
        Some(_) => Error::Forbidden("Forbidden: Origin is not allowed").into_response(),
    }
}

/// What the pages allow a browser to do: load scripts, styles, images and the live-update
/// stream from this server only, submit forms to it only, and be framed by nobody.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The headers every response carries: the content policy, no framing (clickjacking), no
/// content sniffing, and no `Referer` to other sites (a page's address holds search terms and
/// URNs). `same-origin` rather than `no-referrer`: under `no-referrer` a browser sends
/// `Origin: null` with the view's own forms, which the Origin rule then refuses.
pub(crate) async fn response_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// What a request presents to be let in.
enum Credential {
    /// `Authorization: Bearer kenning_…`, as `serve --http` takes it.
    Bearer(String),
    /// The token of a session the sign-in page opened.
    Session(String),
    None,
}

fn credential(headers: &HeaderMap) -> Credential {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        && let Some((scheme, secret)) = value.trim().split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
    {
        return Credential::Bearer(secret.trim().to_owned());
    }
    session_token(headers).map_or(Credential::None, Credential::Session)
}

/// The session token the request's cookie carries, if any.
pub(crate) fn session_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == sessions::COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// The limit class of a request: writes count as captures, calibration pages as calibration
/// (each computes over every outcome), everything else as queries.
fn class(request: &Request) -> LimitClass {
    if request.method() == Method::POST {
        LimitClass::Capture
    } else if request.uri().path().starts_with("/calibration") {
        LimitClass::Calibration
    } else {
        LimitClass::Query
    }
}

/// The key check, rate limits and scope; puts the [`Viewer`] in the request's extensions and
/// writes the request to the audit log.
pub(crate) async fn authenticate(State(web): State<Arc<Web>>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let path = format!("{} {}", request.method(), request.uri().path());
    let (verdict, presented) = match credential(request.headers()) {
        Credential::Bearer(secret) => (web.access.verdict(Some(&secret)), true),
        Credential::Session(token) => match web.sessions.key_of(&token, started) {
            Some(key_id) => (web.access.verdict_of_id(&key_id), true),
            None => (web.access.verdict(None), true),
        },
        Credential::None => (web.access.verdict(None), false),
    };
    let (viewer, key) = match verdict {
        Err(error) => {
            tracing::error!(%error, "refusing requests: the key file cannot be read");
            return Error::Keys(error).into_response();
        }
        Ok(None) => (Viewer::anyone(&web), None),
        Ok(Some(Verdict::Valid(key))) => {
            let class = class(&request);
            if let Err(wait) = web.access.limiter.take(&key.id, class, started) {
                let refusal = Error::RateLimited {
                    key: key.name.clone(),
                    class: class.as_str(),
                    per_minute: web.access.limiter.limits().per_minute(class),
                    retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
                };
                return audited(&web, Some(&key), &path, started, refusal.into_response());
            }
            match Viewer::signed_in(&web, key.clone()) {
                Ok(viewer) => (viewer, Some(key)),
                Err(refusal) => return audited(&web, Some(&key), &path, started, refusal.into_response()),
            }
        }
        Ok(Some(Verdict::Revoked(key))) => {
            let refusal = Error::Unauthorized(format!("the API key `{}` was revoked", key.name));
            return audited(&web, None, &path, started, refusal.into_response());
        }
        Ok(Some(Verdict::Unknown)) => {
            let message = if presented {
                "the API key is not known to this server, or the session ended"
            } else {
                "this server requires an API key"
            };
            return audited(&web, None, &path, started, Error::Unauthorized(message.to_owned()).into_response());
        }
    };
    request.extensions_mut().insert(viewer);
    let response = next.run(request).await;
    audited(&web, key.as_ref(), &path, started, response)
}

/// Writes one request of the web view to the audit log, its outcome read from the response.
fn audited(web: &Web, key: Option<&ApiKey>, path: &str, started: Instant, response: Response) -> Response {
    record(web, "web", path, key, outcome(response.status()), started);
    response
}

/// One line of the audit log for the web view (`method` is `web` or `sign_in`).
pub(crate) fn record(web: &Web, method: &str, path: &str, key: Option<&ApiKey>, outcome: Outcome, started: Instant) {
    let Some(log) = &web.access.audit else { return };
    log.record(&AuditEntry {
        time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        identity: key.map(|key| key.identity.as_str()),
        key: key.map(|key| key.id.as_str()),
        method,
        tool: path,
        outcome,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        session: Some("web"),
    });
}

fn outcome(status: StatusCode) -> Outcome {
    match status.as_u16() {
        200..=399 => Outcome::Ok,
        401 => Outcome::Unauthorized,
        403 => Outcome::Forbidden,
        429 => Outcome::RateLimited,
        400..=499 if status != StatusCode::NOT_FOUND => Outcome::Invalid,
        _ => Outcome::ToolError,
    }
}
