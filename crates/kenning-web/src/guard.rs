//! The rules every request passes, shared with `serve --http`: a loopback server answers only
//! requests addressed to loopback (Host) from pages of this machine (Origin); once any API key
//! exists, every request but the sign-in page needs a valid one, and each key is held to its
//! rate limits.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use kenning_service::{LimitClass, Verdict};

use crate::Web;
use crate::error::Error;

/// The cookie the sign-in page sets: the API key itself, which the key check then verifies on
/// every request exactly as it verifies a bearer token (so a revoked key stops working at once).
pub(crate) const KEY_COOKIE: &str = "kenning_key";

/// Who a page is served to: the signed-in key, or nobody in particular when no key is needed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Viewer {
    pub(crate) identity: Option<String>,
    pub(crate) key_id: Option<String>,
}

impl Viewer {
    /// What form tokens are bound to.
    pub(crate) fn subject(&self) -> &str {
        self.key_id.as_deref().unwrap_or("local")
    }
}

/// The Host and Origin rules of a loopback server, for every route.
pub(crate) async fn same_machine(request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|value| value.to_str().ok());
    if !host.is_some_and(kenning_service::is_loopback_host) {
        return Error::Forbidden("Forbidden: the Host is not this machine's loopback address").into_response();
    }
    match request.headers().get(header::ORIGIN) {
        None => next.run(request).await,
        Some(origin) if origin.to_str().is_ok_and(kenning_service::is_loopback_origin) => next.run(request).await,
        Some(_) => Error::Forbidden("Forbidden: Origin is not allowed").into_response(),
    }
}

/// The secret a request presents: a bearer token, else the sign-in cookie.
pub(crate) fn presented_key(headers: &HeaderMap) -> Option<String> {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        && let Some((scheme, secret)) = value.trim().split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
    {
        return Some(secret.trim().to_owned());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == KEY_COOKIE)
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

/// The key check and rate limits; puts the [`Viewer`] in the request's extensions.
pub(crate) async fn authenticate(State(web): State<Arc<Web>>, mut request: Request, next: Next) -> Response {
    let presented = presented_key(request.headers());
    let viewer = match web.access.verdict(presented.as_deref()) {
        Err(error) => {
            tracing::error!(%error, "refusing requests: the key file cannot be read");
            return Error::Keys(error).into_response();
        }
        Ok(None) => Viewer::default(),
        Ok(Some(Verdict::Valid(key))) => {
            let class = class(&request);
            if let Err(wait) = web.access.limiter.take(&key.id, class, Instant::now()) {
                return Error::RateLimited {
                    key: key.name.clone(),
                    class: class.as_str(),
                    per_minute: web.access.limiter.limits().per_minute(class),
                    retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
                }
                .into_response();
            }
            Viewer { identity: Some(key.identity), key_id: Some(key.id) }
        }
        Ok(Some(Verdict::Revoked(key))) => return Error::Unauthorized(format!("the API key `{}` was revoked", key.name)).into_response(),
        Ok(Some(Verdict::Unknown)) => {
            let message = if presented.is_some() { "the API key is not known to this server" } else { "this server requires an API key" };
            return Error::Unauthorized(message.to_owned()).into_response();
        }
    };
    request.extensions_mut().insert(viewer);
    next.run(request).await
}
