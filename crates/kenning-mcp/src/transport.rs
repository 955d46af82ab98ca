//! Serving a [`KenningServer`] over stdio or streamable HTTP.
//!
//! rmcp carries the protocol on both transports, with two corrections of ours for messages that
//! cannot be read (see [`jsonrpc`]): over stdio kenning's own [`stdio::LineTransport`] replaces
//! rmcp's, and over HTTP a layer in front of rmcp's service turns its 415 for an unreadable JSON
//! body into 400 with the JSON-RPC error.

mod jsonrpc;
#[cfg(unix)]
mod pipe;
pub mod stdio;

use std::future::Future;
#[cfg(unix)]
use std::os::fd::AsFd;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;

use kenning_gateway::Metrics;

use crate::access::{self, CallObserver, Guard, HttpAccess, SessionOwners, limit_classes};
use crate::server::KenningServer;
use jsonrpc::{Incoming, read_message};

/// The largest HTTP request body read (rmcp's default, stated here because the layer in front of
/// rmcp reads the body too).
pub const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

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
///
/// When both are pipes or sockets, as an MCP client makes them, they are polled by the runtime
/// (see [`pipe`]); otherwise tokio's streams read and write them on its blocking pool.
pub async fn serve_stdio(server: KenningServer) -> Result<(), ServeError> {
    #[cfg(unix)]
    if let (Some(read), Some(write)) = (pipe::Polled::reader(std::io::stdin().as_fd()), pipe::Polled::writer(std::io::stdout().as_fd())) {
        return serve_lines(server, read, write).await;
    }
    serve_lines(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves one client speaking newline-delimited JSON-RPC on `read` and `write` (stdin and
/// stdout, or any pair of byte streams) until it closes its end.
pub async fn serve_lines<R, W>(server: KenningServer, read: R, write: W) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let transport = stdio::LineTransport::new(read, write);
    let running = server.serve(transport).await.map_err(|error| ServeError::Start(error.to_string()))?;
    running.waiting().await.map_err(|error| ServeError::Session(error.to_string()))?;
    Ok(())
}

/// Origins a browser on this machine sends; any other Origin is refused with 403 so that a web
/// page cannot reach the server through DNS rebinding.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Serves streamable HTTP at `/mcp`, with `/healthz` and `/metrics`, on an already bound
/// listener until `shutdown` resolves.
///
/// Every request passes the Origin check, and on loopback the Host check; with keys configured
/// (always, off loopback) a request to `/mcp` also needs a valid API key and is held to the
/// key's rate limits, and an MCP session answers only the key that opened it. Every tool call
/// is timed into the metrics and, with an audit log, every call that reads or writes memory
/// is written to it.
pub async fn serve_http(
    server: KenningServer,
    listener: tokio::net::TcpListener,
    access: HttpAccess,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_http_with(server, listener, access, axum::Router::new(), shutdown).await
}

/// [`serve_http`] with more routes on the same listener (the web view of `serve --http --ui`),
/// which apply their own checks; they must not claim `/mcp`, `/healthz` or `/metrics`.
pub async fn serve_http_with(
    server: KenningServer,
    listener: tokio::net::TcpListener,
    access: HttpAccess,
    routes: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let address: SocketAddr = listener.local_addr()?;
    let tools = server.tools();
    let metrics = Arc::new(Metrics::new(tools.iter().map(|tool| tool.name.to_string())));
    let server = server.observed(CallObserver { metrics: metrics.clone(), audit: access.audit.clone() });
    let sessions = Arc::new(LocalSessionManager::default());
    let guard = Arc::new(Guard {
        classes: limit_classes(&tools),
        access,
        metrics: metrics.clone(),
        max_body_bytes: MAX_REQUEST_BODY_BYTES,
        sessions: SessionOwners::new(sessions.clone()),
    });

    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(LOOPBACK_ORIGINS)
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES);
    if !address.ip().is_loopback() {
        // Off loopback every request needs an API key, which a page reached by DNS rebinding
        // does not have, and clients name the server by whatever host or address reaches it.
        config = config.disable_allowed_hosts();
    }
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(move || Ok(server.for_session()), sessions, config);
    // The key check and rate limits come first (the outer layer), so that a refused request
    // costs nothing more.
    let mcp = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn(answer_unreadable_messages))
        .layer(axum::middleware::from_fn_with_state(guard.clone(), access::guard_mcp));
    let metrics_route = axum::Router::new()
        .route("/metrics", axum::routing::get(move || render_metrics(metrics.clone())))
        .layer(axum::middleware::from_fn_with_state(guard, access::guard_key));
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(health))
        .merge(metrics_route)
        .layer(axum::middleware::from_fn_with_state(address.ip().is_loopback(), access::same_machine))
        .merge(mcp)
        .layer(axum::middleware::from_fn(access::response_headers))
        .merge(routes);
    axum::serve(without_nagle(listener), app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            cancel.cancel();
        })
        .await?;
    Ok(())
}

/// `listener` with Nagle's algorithm turned off on every connection it accepts. A
/// streamable-HTTP answer is written in several small pieces (the headers, the event, the end
/// of the stream); with Nagle's algorithm each piece after the first waited until the client
/// acknowledged the one before, which on a kept-alive connection comes up to 40 ms late, so a
/// client reading each answer to its end waited 40 ms a call (a recall at 100k memories took
/// 44 ms instead of 2.8).
fn without_nagle(listener: tokio::net::TcpListener) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    listener.tap_io(|stream: &mut tokio::net::TcpStream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not turn Nagle's algorithm off on a connection");
        }
    })
}

/// Liveness: the process is up and answering HTTP.
async fn health() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], format!("{{\"status\":\"ok\",\"version\":\"{}\"}}", env!("CARGO_PKG_VERSION")))
}

async fn render_metrics(metrics: Arc<Metrics>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], metrics.render())
}

/// Lets rmcp handle a POSTed JSON body first (its Origin, Host, Accept and session checks come
/// before it reads the body), and when it refuses the body as unreadable (415 although the body is
/// declared JSON) answers by the specification instead: 400 with -32700 for text that is not JSON,
/// -32600 for JSON that is not a message, with the request's id when it has one.
async fn answer_unreadable_messages(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !declares_json(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: the request body exceeds {MAX_REQUEST_BODY_BYTES} bytes, or could not be read"),
        )
            .into_response();
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    match read_message(&bytes) {
        Incoming::Message(_) => response,
        Incoming::Refused(error) => json_error(error),
        // Over HTTP an unreadable notification or response is refused too (the specification's
        // 400 with an id-less error), since the client waits for the status.
        Incoming::Ignored(reason) => json_error(jsonrpc::unreadable_notification(&reason)),
    }
}

fn declares_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn json_error(error: Value) -> Response {
    let mut response = (StatusCode::BAD_REQUEST, Bytes::from(error.to_string())).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    use super::*;

    #[tokio::test]
    async fn an_answer_over_http_does_not_wait_for_the_clients_delayed_acknowledgement() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("the bound address");
        let mut listener = without_nagle(listener);
        let client = tokio::net::TcpStream::connect(address).await.expect("a connection");
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().expect("the option can be read"), "Nagle's algorithm is off on the server's side");
        assert!(!client.nodelay().expect("the option can be read"), "only the accepted side was changed");
    }
}
