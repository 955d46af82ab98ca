//! Turns a [`SearchFilter`] into a SQL condition over the `memories` table aliased as `m`.

use kenning_core::{FilterCondition, SearchFilter};
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
    for condition in filter.conditions() {
        match condition {
            FilterCondition::Kinds(kinds) => {
                clauses.push(format!("m.kind IN ({})", placeholders(kinds.len())));
                params.extend(kinds.iter().map(|kind| Value::Text(kind.as_str().to_owned())));
            }
            FilterCondition::Namespaces(namespaces) => {
                // The unary plus keeps SQLite off the duplicate-detection index; see `Status` below.
                clauses.push(format!("+m.namespace IN ({})", placeholders(namespaces.len())));
                params.extend(namespaces.iter().map(|namespace| Value::Text(namespace.as_str().to_owned())));
            }
            FilterCondition::Tags(tags) => {
                for tag in tags {
                    clauses.push("EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id AND t.tag = ?)".to_owned());
                    params.push(Value::Text(tag.clone()));
                }
            }
            FilterCondition::Since(since) => {
                clauses.push("m.occurred_at >= ?".to_owned());
                params.push(Value::Text(time_key(since)));
            }
            FilterCondition::Until(until) => {
                clauses.push("m.occurred_at <= ?".to_owned());
                params.push(Value::Text(time_key(until)));
            }
            FilterCondition::MinConfidence(min_confidence) => {
                clauses.push("m.confidence >= ?".to_owned());
                params.push(Value::Real(min_confidence));
            }
            FilterCondition::Facets(facets) => {
                for facet in facets {
                    // Facets are stored one per line: a whole line must match.
                    clauses.push("instr(char(10) || m.facets || char(10), char(10) || ? || char(10)) > 0".to_owned());
                    params.push(Value::Text(facet));
                }
            }
            FilterCondition::Status(status) => {
                // The unary plus keeps SQLite from answering this through the partial index on
                // active rows, which exists for duplicate detection: without statistics the
                // planner prefers it, but walking it and then seeking every row it names is about
                // four times slower than scanning the table.
                clauses.push("+m.status = ?".to_owned());
                params.push(Value::Text(status.as_str().to_owned()));
            }
        }
    }
    Condition { sql: clauses.join(" AND "), params }
}

fn placeholders(count: usize) -> String {
    vec!["?"; count].join(", ")
}
