//! Turns a [`SearchFilter`] into a SQL condition over the `memories` table aliased as `m`.

use kenning_core::SearchFilter;
use rusqlite::types::Value;

use crate::codec::time_key;

/// A SQL boolean expression with positional `?` placeholders, and the values they bind, in order.
pub(crate) struct Condition {
    pub sql: String,
    pub params: Vec<Value>,
}

pub(crate) fn condition(filter: &SearchFilter) -> Condition {
    let mut clauses: Vec<String> = vec!["1".to_owned()];
    let mut params: Vec<Value> = Vec::new();
    if !filter.kinds.is_empty() {
        clauses.push(format!("m.kind IN ({})", placeholders(filter.kinds.len())));
        params.extend(filter.kinds.iter().map(|kind| Value::Text(kind.as_str().to_owned())));
    }
    if !filter.namespaces.is_empty() {
        // The unary plus keeps SQLite off the duplicate-detection index; see `status` below.
        clauses.push(format!("+m.namespace IN ({})", placeholders(filter.namespaces.len())));
        params.extend(filter.namespaces.iter().map(|namespace| Value::Text(namespace.as_str().to_owned())));
    }
    for tag in &filter.tags {
        clauses.push("EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id AND t.tag = ?)".to_owned());
        params.push(Value::Text(tag.clone()));
    }
    if let Some(since) = filter.since {
        clauses.push("m.occurred_at >= ?".to_owned());
        params.push(Value::Text(time_key(since)));
    }
    if let Some(until) = filter.until {
        clauses.push("m.occurred_at <= ?".to_owned());
        params.push(Value::Text(time_key(until)));
    }
    if let Some(min_confidence) = filter.min_confidence {
        clauses.push("m.confidence >= ?".to_owned());
        params.push(Value::Real(min_confidence));
    }
    for facet in filter.facets() {
        // Facets are stored one per line: a whole line must match.
        clauses.push("instr(char(10) || m.facets || char(10), char(10) || ? || char(10)) > 0".to_owned());
        params.push(Value::Text(facet));
    }
    if let Some(status) = filter.status {
        // The unary plus keeps SQLite from answering this through the partial index on active
        // rows, which exists for duplicate detection: without statistics the planner prefers it,
        // but walking it and then seeking every row it names is about four times slower than
        // scanning the table.
        clauses.push("+m.status = ?".to_owned());
        params.push(Value::Text(status.as_str().to_owned()));
    }
    Condition { sql: clauses.join(" AND "), params }
}

fn placeholders(count: usize) -> String {
    vec!["?"; count].join(", ")
}
