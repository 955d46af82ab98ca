//! kenning's web view: what `kenning ui` serves on loopback. Server-rendered HTML pages over
//! the same engine methods the MCP tools call, readable without JavaScript.
//!
//! - [`Web`] holds the services, the access rules ([`kenning_gateway::Access`], the same keys,
//!   limits and audit log as `serve --http`), the read-only switch and the per-process CSRF
//!   secret; [`router`] builds the routes and [`serve`] runs them on a bound listener;
//!   [`routes`] are the same routes for `serve --http --ui`, beside the MCP endpoint.
//! - `guard` applies the shared rules to every request: the Host and Origin rules of a
//!   loopback server ([`kenning_gateway::is_loopback_host`],
//!   [`kenning_gateway::is_loopback_origin`]), then the API-key check (a key sent as
//!   `Authorization: Bearer`, or a session the sign-in page opened), the key's rate limits
//!   and its scope (a read-only key changes nothing, a key limited to some domains sees only
//!   their memories), and the audit log; it also sets the content policy and the headers
//!   against framing and sniffing on every response.
//! - `sessions` are the opaque, expiring sessions the sign-in cookie carries (never the key).
//! - `csrf` signs every writing form with a token bound to the form, its target and the
//!   signed-in key; `pages` are the pages and actions; `events` announces changes to the
//!   stores by server-sent events, from the stores' change marks; `html` is the layout and
//!   escaping; `params` reads query strings and form bodies with field errors.
//! - The stylesheet and script are compiled in (`assets/`): no CDN, no build step.

mod csrf;
mod error;
mod events;
mod guard;
mod html;
mod pages;
mod params;
mod sessions;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::serve::ListenerExt;
use axum::routing::{get, post};

use kenning_engine::{DecisionService, MemoryService};
use kenning_gateway::Access;

pub use error::Error;

/// How the web view is run.
#[derive(Debug, Clone, Default)]
pub struct WebOptions {
    /// Refuse every action that writes, as `serve --read-only` drops the tools that write.
    pub read_only: bool,
}

/// The web application's state, shared by every request.
pub struct Web {
    pub(crate) memory: Arc<MemoryService>,
    pub(crate) decisions: Arc<DecisionService>,
    pub(crate) access: Access,
    pub(crate) read_only: bool,
    pub(crate) csrf: csrf::CsrfKey,
    pub(crate) sessions: sessions::Sessions,
    pub(crate) changes: events::Changes,
}

impl Web {
    /// The state of one server process; its CSRF secret is drawn here and its sessions are
    /// kept here, so forms served and sessions opened by an earlier process are refused.
    pub fn new(memory: Arc<MemoryService>, decisions: Arc<DecisionService>, access: Access, options: WebOptions) -> Result<Arc<Web>, Error> {
        Ok(Arc::new(Web {
            memory,
            decisions,
            access,
            read_only: options.read_only,
            csrf: csrf::CsrfKey::random()?,
            sessions: sessions::Sessions::default(),
            changes: events::Changes::default(),
        }))
    }
}

const STYLESHEET: &str = include_str!("../assets/app.css");
const SCRIPT: &str = include_str!("../assets/app.js");
const ICON: &str = include_str!("../assets/icon.svg");

/// Every route of the web view with `/healthz`, for a server of its own ([`serve`]).
pub fn router(web: Arc<Web>) -> Router {
    routes_with(web, Router::new().route("/healthz", get(health)))
}

/// The web view's routes without `/healthz`, to serve beside the MCP endpoint (which answers
/// `/healthz` itself). Assets, the sign-in page and `/healthz` need no key; every other route
/// passes the key check. Every route passes the Host and Origin rules, and every response
/// carries the content policy; unknown paths get the view's 404.
pub fn routes(web: Arc<Web>) -> Router {
    routes_with(web, Router::new())
}

fn routes_with(web: Arc<Web>, open: Router<Arc<Web>>) -> Router {
    let signed_in = Router::new()
        .route("/", get(pages::overview::page))
        .route("/memories", get(pages::memories::search))
        .route("/memory", get(pages::memories::detail))
        .route("/memory/forget", get(pages::memories::confirm_forget).post(pages::memories::forget))
        .route("/memory/restore", get(pages::memories::confirm_restore).post(pages::memories::restore))
        .route("/decisions", get(pages::decisions::list))
        .route("/decision", get(pages::decisions::detail))
        .route("/calibration", get(pages::calibration::page))
        .route("/calibration/diagram.svg", get(pages::calibration::svg))
        .route("/calibration/diagram.png", get(pages::calibration::png))
        .route("/events", get(events::stream))
        .route("/logout", post(pages::session::logout))
        .layer(axum::middleware::from_fn_with_state(web.clone(), guard::authenticate));
    open.route("/assets/app.css", get(|| async { asset("text/css; charset=utf-8", STYLESHEET) }))
        .route("/assets/app.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", ICON) }))
        .route("/login", get(pages::session::form).post(pages::session::login))
        .merge(signed_in)
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn(guard::same_machine))
        .layer(axum::middleware::from_fn(guard::response_headers))
        .with_state(web)
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body)
}

/// Liveness, as `serve --http` answers it.
async fn health() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], format!("{{\"status\":\"ok\",\"version\":\"{}\"}}", env!("CARGO_PKG_VERSION")))
}

/// Serves the web view on an already bound listener until `shutdown` resolves.
pub async fn serve(web: Arc<Web>, listener: tokio::net::TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    // Nagle's algorithm off, as on the MCP server: a page's answer written in pieces would
    // otherwise wait on the browser's delayed acknowledgements.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not turn Nagle's algorithm off on a connection");
        }
    });
    axum::serve(listener, router(web)).with_graceful_shutdown(shutdown).await?;
    Ok(())
}
