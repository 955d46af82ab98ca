//! kenning's MCP front end: the only crate that knows the Model Context Protocol.
//!
//! - [`KenningServer`] implements rmcp's `ServerHandler`: tools grouped in toolsets (see
//!   [`Toolset`]; `memory` by default, `decisions` on request) and selected by
//!   [`ServerOptions`], plus memories, namespaces and domains as resources ([`resources`]).
//! - Tool functions live in [`tools`], one module per toolset; each unpacks its arguments
//!   ([`params`]), calls one engine method on the blocking pool and returns the engine's view
//!   as structured content.
//! - [`prompts`] are the `prompts` capability (session start, capture a decision, summarise
//!   what we learnt); `client_log` is the `logging` capability (tool calls reported to a client
//!   that set a level).
//! - [`schema`] keeps only the standard JSON Schema formats in tool schemas.
//! - [`error`] maps engine errors onto the protocol: invalid input becomes JSON-RPC -32602 with
//!   `{field, problem, received, suggestion}`, a failed tool becomes an `isError` result.
//! - [`code_resources`] serves `repo://` and `test://` resources with the `repo` and `test`
//!   toolsets (tools in [`tools::repo`] and [`tools::test`], served by the engine's `CodeService`).
//! - [`decision_resources`] serves decisions, calibration, skills and anomalies as resources
//!   (with the `decisions` toolset); clients may subscribe to them and are notified when a
//!   decision tool changes them.
//! - [`transport`] serves over stdio or streamable HTTP with a loopback-only Origin check,
//!   `/healthz` and Prometheus `/metrics`, and answers messages that cannot be read with the
//!   JSON-RPC errors rmcp does not send; [`access`] puts API keys, per-key rate limits and the
//!   audit log (from `kenning-gateway`) in front of the HTTP tools.

pub mod access;
mod client_log;
pub mod code_resources;
pub mod decision_resources;
pub mod error;
pub mod params;
pub mod prompts;
pub mod resources;
pub mod schema;
mod server;
mod subscriptions;
mod toolset;
pub mod tools;
pub mod transport;
mod unparsed;
pub mod workflow_resources;

pub use server::{KenningServer, ServerOptions};
pub use toolset::{ALL_TOOLSETS, DEFAULT_TOOLSETS, TOOLSETS, Toolset};
pub use access::{Caller, HttpAccess};
pub use transport::{ServeError, serve_http, serve_http_with, serve_lines, serve_stdio};
