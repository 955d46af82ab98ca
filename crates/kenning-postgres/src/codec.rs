//! How records, times and query parameters are represented.

use chrono::{DateTime, Datelike, Utc};
use kenning_core::Memory;
use tokio_postgres::Row;

use crate::error::{Error, Result};

/// A time as nanoseconds since the epoch, for the columns filters and ordering use: exact and
/// ordered. Times outside the years 1677-2262 (which `i64` nanoseconds cannot hold) are held at
/// the nearest end, so they still sort before or after every other.
pub(crate) fn nanos(time: DateTime<Utc>) -> i64 {
    time.timestamp_nanos_opt().unwrap_or(if time.year() < 1970 { i64::MIN } else { i64::MAX })
}

pub(crate) use kenning_core::time_key;

pub(crate) fn parse_time_key(text: &str) -> Result<DateTime<Utc>> {
    kenning_core::parse_time_key(text).map_err(Error::Corrupt)
}

pub(crate) fn encode_memory(memory: &Memory) -> Result<String> {
    Ok(serde_json::to_string(memory)?)
}

/// A memory from its row: `body`, then the read statistics kept outside it.
pub(crate) fn decode_row(row: &Row, body: usize) -> Result<Memory> {
    let mut memory: Memory = serde_json::from_str(row.get::<_, &str>(body))?;
    let count: i64 = row.get(body + 1);
    memory.access_count = u64::try_from(count).unwrap_or(0);
    memory.last_accessed_at = row.get::<_, Option<&str>>(body + 2).map(parse_time_key).transpose()?;
    Ok(memory)
}

/// The columns [`decode_row`] reads, for a `memories` table aliased `m`.
pub(crate) const MEMORY_COLUMNS: &str = "m.body, m.access_count, m.last_accessed_at";

/// PostgreSQL text cannot hold NUL characters; the search text drops them (a record keeps
/// them, JSON-escaped, in its body).
pub(crate) fn searchable(text: &str) -> String {
    text.replace('\0', " ")
}

/// Converts a count or offset for binding; values beyond `i64::MAX` mean "no limit" anyway.
pub(crate) fn sql_count(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
