//! The `logging` capability: a client sets the least severe level it wants with
//! `logging/setLevel`, and the server then tells it about each tool call at or above that level
//! with `notifications/message`: a failed or refused call as a warning, every call as debug.
//!
//! Nothing is sent until the client asks (an agent's context is not filled with logs it did not
//! request). MCP's 2026-07-28 revision deprecates logging; clients that negotiate an earlier
//! revision, where it is part of the protocol, still use it.
#![allow(deprecated, reason = "logging is part of the MCP revisions before 2026-07-28, which clients still negotiate")]

use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{CallToolResponse, LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

/// The name notifications give as their logger.
const LOGGER: &str = "kenning";

/// One session's logging level, `None` until the client sets one.
#[derive(Debug, Default)]
pub(crate) struct ClientLog {
    level: Mutex<Option<LoggingLevel>>,
}

/// RFC 5424 severities in MCP's order, least severe first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl ClientLog {
    pub(crate) fn set_level(&self, level: LoggingLevel) {
        *self.level.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(level);
    }

    fn wants(&self, level: LoggingLevel) -> bool {
        let wanted = *self.level.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        wanted.is_some_and(|wanted| severity(level) >= severity(wanted))
    }

    /// Sends `data` at `level` when the client asked for that level; a client that went away is
    /// not an error of the call being logged.
    pub(crate) async fn send(&self, peer: &Peer<RoleServer>, level: LoggingLevel, data: Value) {
        if !self.wants(level) {
            return;
        }
        let message = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
        if let Err(error) = peer.notify_logging_message(message).await {
            tracing::debug!(%error, "could not send a log notification");
        }
    }

    /// Logs one finished tool call: refused (a JSON-RPC error) or failed (an `isError` result) as
    /// a warning with the error, else as debug with its duration.
    pub(crate) async fn tool_call(
        &self,
        peer: &Peer<RoleServer>,
        tool: &str,
        elapsed: Duration,
        outcome: &Result<CallToolResponse, McpError>,
    ) {
        let elapsed_ms = elapsed.as_secs_f64() * 1000.0;
        let (level, data) = match outcome {
            Err(error) => (
                LoggingLevel::Warning,
                json!({"message": format!("{tool} was refused: {}", error.message), "tool": tool, "code": error.code.0, "data": error.data}),
            ),
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => (
                LoggingLevel::Warning,
                json!({"message": format!("{tool} failed"), "tool": tool, "error": result.structured_content}),
            ),
            Ok(_) => (
                LoggingLevel::Debug,
                json!({"message": format!("{tool} answered in {elapsed_ms:.1} ms"), "tool": tool, "elapsed_ms": elapsed_ms}),
            ),
        };
        self.send(peer, level, data).await;
    }
}
