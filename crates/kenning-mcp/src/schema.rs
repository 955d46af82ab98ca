//! Tool schemas with the standard JSON Schema formats only.
//!
//! schemars marks Rust's number types with formats of its own (`uint`, `uint32`, `uint64`,
//! `int64`, `double`, …) that JSON Schema does not define; validators warn about each, and the
//! bounds they imply are stated by `minimum`/`maximum` anyway. Every tool's input and output
//! schema is cleaned of them once, when the tool router is built.

use rmcp::model::JsonObject;
use serde_json::Value;

/// The formats JSON Schema 2020-12 defines (Validation, section 7.3).
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes every `format` keyword whose value is not a standard format, at any depth. A property
/// that happens to be named `format` holds a schema (an object), not a string, and is kept.
pub fn keep_standard_formats(schema: &mut JsonObject) {
    if schema.get("format").and_then(Value::as_str).is_some_and(|format| !STANDARD_FORMATS.contains(&format)) {
        schema.remove("format");
    }
    for value in schema.values_mut() {
        clean(value);
    }
}

fn clean(value: &mut Value) {
    match value {
        Value::Object(object) => keep_standard_formats(object),
        Value::Array(items) => items.iter_mut().for_each(clean),
        _ => {}
    }
}
