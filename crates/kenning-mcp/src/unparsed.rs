//! Requests for a method of the MCP specification whose params rmcp could not read.
//!
//! rmcp reads a request into its typed variant for the method and, when the params do not fit,
//! falls back to a custom request, which it answers with -32601 "method not found" (or, when the
//! params are not even an object, refuses the message). The method exists, so the JSON-RPC
//! answer is -32602 "invalid params", naming what does not fit.

use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;
use serde_json::Value;

use kenning_core::FieldError;

use crate::error::{invalid_params, quoted};

/// The client-to-server requests of the MCP specification (2025-11-25).
const SPECIFIED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];

/// The answer to a request rmcp could not read: -32602 for a specified method, else -32601.
pub(crate) fn answer(method: &str, params: Option<&Value>) -> McpError {
    if !SPECIFIED_METHODS.contains(&method) {
        return McpError::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None);
    }
    invalid_params(&problem(method, params))
}

fn problem(method: &str, params: Option<&Value>) -> FieldError {
    let schema = format!("see the `{method}` request in the MCP specification");
    let Some(params) = params else {
        return FieldError::new("params", "are missing", Value::Null, schema);
    };
    let Some(object) = params.as_object() else {
        return FieldError::new("params", "must be a JSON object", quoted(params), schema);
    };
    if method == "tools/call" {
        match (object.get("name"), object.get("arguments")) {
            (Some(name), _) if !name.is_string() => {
                return FieldError::new("name", "must be a string, the tool's name", quoted(name), "tools/list names the tools");
            }
            (None, _) => return FieldError::new("name", "is missing", Value::Null, "tools/list names the tools"),
            (_, Some(arguments)) if !arguments.is_object() && !arguments.is_null() => {
                return FieldError::new(
                    "arguments",
                    "must be a JSON object of the tool's arguments by name",
                    quoted(arguments),
                    "pass {\"name\": value, ...} as the tool's inputSchema in tools/list describes",
                );
            }
            _ => {}
        }
    }
    FieldError::new("params", format!("do not match the `{method}` request"), quoted(params), schema)
}
