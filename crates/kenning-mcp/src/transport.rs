//! Serving a [`KenningServer`] over stdio or streamable HTTP.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::stdio;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use axum::http::header;
use axum::response::IntoResponse;
use kenning_service::Metrics;

use crate::access::{self, CallObserver, Guard, HttpAccess, limit_classes};
use crate::server::KenningServer;

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("MCP session failed to start: {0}")]
    Start(String),
    #[error("MCP session ended abnormally: {0}")]
    Session(String),
    #[error("HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves one client on stdin/stdout until it closes its end.
pub async fn serve_stdio(server: KenningServer) -> Result<(), ServeError> {
    let running = server.serve(stdio()).await.map_err(|error| ServeError::Start(error.to_string()))?;
    running.waiting().await.map_err(|error| ServeError::Session(error.to_string()))?;
    Ok(())
}

/// Origins a browser on this machine sends; any other Origin is refused with 403 so that a web
/// page cannot reach the server through DNS rebinding.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// The largest request body accepted, the same as rmcp's own limit.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Serves streamable HTTP at `/mcp`, with `/healthz` and `/metrics`, on an already bound
/// listener until `shutdown` resolves.
///
/// Every request to `/mcp` passes the Origin check; with keys configured (always, off
/// loopback) it also needs a valid API key and is held to the key's rate limits. Every tool
/// call is timed into the metrics and, with an audit log, written to it.
pub async fn serve_http(
    server: KenningServer,
    listener: tokio::net::TcpListener,
    access: HttpAccess,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let address: SocketAddr = listener.local_addr()?;
    let tools = server.tools();
    let metrics = Arc::new(Metrics::new(tools.iter().map(|tool| tool.name.to_string())));
    let server = server.observed(CallObserver { metrics: metrics.clone(), audit: access.audit.clone() });
    let guard = Arc::new(Guard { classes: limit_classes(&tools), access, metrics: metrics.clone(), max_body_bytes: MAX_BODY_BYTES });

    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(LOOPBACK_ORIGINS)
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    if !address.ip().is_loopback() {
        // Off loopback every request needs an API key, which a page reached by DNS rebinding
        // does not have, and clients name the server by whatever host or address reaches it.
        config = config.disable_allowed_hosts();
    }
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mcp = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(guard.clone(), access::guard_mcp));
    let metrics_route = axum::Router::new()
        .route("/metrics", axum::routing::get(move || render_metrics(metrics.clone())))
        .layer(axum::middleware::from_fn_with_state(guard, access::guard_key));
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(health))
        .merge(metrics_route)
        .layer(axum::middleware::from_fn(access::loopback_origin))
        .merge(mcp);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            cancel.cancel();
        })
        .await?;
    Ok(())
}

/// Liveness: the process is up and answering HTTP.
async fn health() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], format!("{{\"status\":\"ok\",\"version\":\"{}\"}}", env!("CARGO_PKG_VERSION")))
}

async fn render_metrics(metrics: Arc<Metrics>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], metrics.render())
}
