//! Reading one incoming JSON-RPC message, and the error the JSON-RPC 2.0 specification says to
//! answer when it cannot be read.
//!
//! rmcp 3.9 does not answer these by the specification: over stdio it ignores input that is not
//! JSON and answers an invalid request without its id (so the client waits for its timeout), and
//! over HTTP it refuses both with 415 Unsupported Media Type. Both transports read messages
//! through [`read_message`] instead.

use rmcp::model::{ClientJsonRpcMessage, ErrorData};
use serde_json::{Map, Value, json};

use kenning_core::FieldError;

use crate::error::quoted;

/// A UTF-8 byte order mark, which RFC 8259 allows a reader to skip.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// What to do with one incoming message.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A message rmcp can handle.
    Message(Box<ClientJsonRpcMessage>),
    /// A notification or a response that does not parse: JSON-RPC never answers those, so it is
    /// logged and dropped.
    Ignored(String),
    /// Not a message: answer this JSON-RPC error response. Its `id` is the request's when it
    /// could be read, else null as JSON-RPC 2.0 requires (rmcp would leave the field out).
    Refused(Value),
}

/// Reads one message: a JSON-RPC request, notification or response, or the error to answer.
pub(crate) fn read_message(bytes: &[u8]) -> Incoming {
    let bytes = bytes.strip_prefix(BYTE_ORDER_MARK).unwrap_or(bytes);
    let typed_error = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(message) => return Incoming::Message(Box::new(message)),
        Err(error) => error,
    };
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(error) => {
            let error = ErrorData::parse_error(format!("Parse error: the message is not valid JSON ({error})"), None);
            return Incoming::Refused(error_response(error, None));
        }
    };
    let Value::Object(object) = value else {
        let suggestion = if value.is_array() {
            "send one message at a time: MCP has no JSON-RPC batches"
        } else {
            "send a JSON object with jsonrpc \"2.0\", an id, a method and params"
        };
        return invalid_request(None, FieldError::new("message", "is not a JSON object", quoted(&value), suggestion));
    };
    let has = |key: &str| object.contains_key(key);
    if has("method") && !has("id") {
        return Incoming::Ignored(format!("a notification that does not parse: {typed_error}"));
    }
    if !has("method") && (has("result") || has("error")) {
        return Incoming::Ignored(format!("a response that does not parse: {typed_error}"));
    }
    let id = request_id(&object);
    match problem(&object) {
        Some(problem) => invalid_request(id, problem),
        // A well-formed request whose params do not fit its method.
        None => {
            let method = object.get("method").and_then(Value::as_str).unwrap_or_default();
            let error = crate::unparsed::answer(method, object.get("params"));
            tracing::debug!("a request's params do not parse: {typed_error}");
            Incoming::Refused(error_response(error, id))
        }
    }
}

/// The request's id when it is one JSON-RPC allows (a string or an integer), so that the error
/// reaches the request that caused it.
fn request_id(object: &Map<String, Value>) -> Option<Value> {
    match object.get("id")? {
        id @ Value::String(_) => Some(id.clone()),
        id @ Value::Number(number) if number.is_i64() || number.is_u64() => Some(id.clone()),
        _ => None,
    }
}

/// What is wrong with the envelope of a JSON object that is not a request, if anything.
fn problem(object: &Map<String, Value>) -> Option<FieldError> {
    const SHAPE: &str = "a request is {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\", \"params\": {}}";
    let problem = match (object.get("jsonrpc"), object.get("id"), object.get("method")) {
        (version, _, _) if version != Some(&Value::String("2.0".to_owned())) => {
            FieldError::new("jsonrpc", "must be \"2.0\"", version.map_or(Value::Null, quoted), SHAPE)
        }
        (_, Some(id), _) if request_id(object).is_none() => FieldError::new("id", "must be a string or an integer", quoted(id), SHAPE),
        (_, _, None) => FieldError::new("method", "is missing", Value::Null, SHAPE),
        (_, _, Some(method)) if !method.is_string() => FieldError::new("method", "must be a string", quoted(method), SHAPE),
        _ => return None,
    };
    Some(problem)
}

/// The error for a notification or response that does not parse, where a transport must answer
/// one (HTTP); id null.
pub(crate) fn unreadable_notification(reason: &str) -> Value {
    let problem = FieldError::new("message", format!("is {reason}"), Value::Null, "check the notification's params against the MCP schema");
    invalid_request_response(None, problem)
}

fn invalid_request(id: Option<Value>, problem: FieldError) -> Incoming {
    Incoming::Refused(invalid_request_response(id, problem))
}

fn invalid_request_response(id: Option<Value>, problem: FieldError) -> Value {
    let message = format!("Invalid Request: `{}` {}", problem.field, problem.problem);
    let data = serde_json::to_value(&problem).ok();
    error_response(ErrorData::invalid_request(message, data), id)
}

fn error_response(error: ErrorData, id: Option<Value>) -> Value {
    json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": error})
}
