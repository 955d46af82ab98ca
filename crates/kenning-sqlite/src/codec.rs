//! How records and times are represented in columns.

use chrono::{DateTime, Utc};
use kenning_core::Memory;

use crate::error::{Error, Result};

pub(crate) use kenning_core::time_key;

pub(crate) fn parse_time_key(text: &str) -> Result<DateTime<Utc>> {
    kenning_core::parse_time_key(text).map_err(Error::Corrupt)
}

pub(crate) fn encode_memory(memory: &Memory) -> Result<String> {
    Ok(serde_json::to_string(memory)?)
}

pub(crate) fn decode_memory(body: &str) -> Result<Memory> {
    Ok(serde_json::from_str(body)?)
}

/// The facets column: a memory's provenance facets, one per line (none holds a line break).
pub(crate) fn encode_facets(memory: &Memory) -> String {
    kenning_core::provenance::facets(memory).join("\n")
}

pub(crate) fn decode_facets(column: &str) -> Vec<String> {
    column.lines().filter(|facet| !facet.is_empty()).map(str::to_owned).collect()
}

/// Converts a count or offset for binding; values beyond `i64::MAX` mean "no limit" anyway.
pub(crate) fn sql_count(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
