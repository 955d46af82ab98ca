//! Serving a [`KenningServer`] over stdio or streamable HTTP.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::stdio;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

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

/// Serves streamable HTTP at `/mcp` on an already bound listener until `shutdown` resolves.
pub async fn serve_http(
    server: KenningServer,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let address: SocketAddr = listener.local_addr()?;
    let mut config = StreamableHttpServerConfig::default().with_allowed_origins(LOOPBACK_ORIGINS);
    if !address.ip().is_loopback() {
        let host = address.ip().to_string();
        config = config.with_allowed_hosts(["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned(), host]);
    }
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().route_service("/mcp", service);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            cancel.cancel();
        })
        .await?;
    Ok(())
}
