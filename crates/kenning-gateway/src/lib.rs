//! What a shared kenning server applies at its gate, beyond the protocol: API keys, per-key
//! rate limits, an audit log and metrics. Nothing here knows MCP or HTTP; the transport in
//! `kenning-mcp` applies these to requests, and the binary creates, lists and revokes keys.
//!
//! - [`KeyStore`] keeps [`ApiKey`]s hashed in a JSON file in the user's data directory;
//!   [`KeyStore::create`] returns the secret once ([`CreatedKey`]). A key's [`Scope`] may make
//!   it read-only and limit it to some domains ([`DomainScope`]); the front ends enforce it. [`Authenticator`] answers
//!   whether a presented secret is valid, re-reading the file when it changes so that a
//!   revocation takes effect on the next request.
//! - [`RateLimiter`] holds a token bucket per key and [`LimitClass`] (capture, queries,
//!   calibration) with the per-minute [`RateLimits`].
//! - [`AuditLog`] appends one JSON line per call that reads or writes memory and per sign-in
//!   ([`AuditEntry`]: who, what, when, outcome, duration; never content).
//! - [`private_options`] and [`create_private_dir`] make the files and folders kenning keeps
//!   readable by their owner alone.
//! - [`Access`] bundles the keys, limits and audit log an HTTP server applies, and answers
//!   whether a request needs a key; [`is_loopback_origin`] is the Origin rule and
//!   [`is_loopback_host`] the Host rule of a loopback server. All three are shared
//!   by every HTTP front end (the MCP endpoint and the web view).
//! - [`Metrics`] counts tool calls into latency histograms and error counters per tool, and
//!   rejected requests per reason, and renders them in the Prometheus text format.

mod rules;
mod audit;
mod error;
mod files;
mod keys;
mod limits;
mod metrics;

pub use rules::{Access, is_loopback_host, is_loopback_origin};
pub use audit::{AuditEntry, AuditLog, Outcome};
pub use error::Error;
pub use files::{create_private_dir, private_options};
pub use keys::{ApiKey, Authenticator, CreatedKey, DomainScope, KEY_PREFIX, KeySet, KeyStore, Scope, Verdict};
pub use limits::{LimitClass, RateLimiter, RateLimits};
pub use metrics::{LATENCY_BUCKETS, Metrics, Rejection};
