//! Turns a [`SearchFilter`] into a SQL condition over the `memories` table aliased as `m`, so
//! that every filter is answered by the database, next to the search itself.

use kenning_core::SearchFilter;

use crate::codec::nanos;
use crate::sql::Params;

pub(crate) fn condition(filter: &SearchFilter, params: &mut Params) -> String {
    condition_on("m", filter, params)
}

/// The condition over the `memories` table aliased as `alias`.
pub(crate) fn condition_on(alias: &str, filter: &SearchFilter, params: &mut Params) -> String {
    let mut clauses: Vec<String> = vec!["true".to_owned()];
    if !filter.kinds.is_empty() {
        let kinds: Vec<String> = filter.kinds.iter().map(|kind| kind.as_str().to_owned()).collect();
        clauses.push(format!("{alias}.kind = ANY({})", params.push(kinds)));
    }
    if !filter.namespaces.is_empty() {
        let namespaces: Vec<String> = filter.namespaces.iter().map(|namespace| namespace.as_str().to_owned()).collect();
        clauses.push(format!("{alias}.namespace = ANY({})", params.push(namespaces)));
    }
    if !filter.tags.is_empty() {
        // Containment, answered by the GIN index on tags: every tag must be there.
        clauses.push(format!("{alias}.tags @> {}", params.push(filter.tags.clone())));
    }
    if let Some(since) = filter.since {
        clauses.push(format!("{alias}.occurred_at >= {}", params.push(nanos(since))));
    }
    if let Some(until) = filter.until {
        clauses.push(format!("{alias}.occurred_at <= {}", params.push(nanos(until))));
    }
    if let Some(min_confidence) = filter.min_confidence {
        clauses.push(format!("{alias}.confidence >= {}", params.push(min_confidence)));
    }
    let facets = filter.facets();
    if !facets.is_empty() {
        // Containment, answered by the GIN index on facets, as for tags.
        clauses.push(format!("{alias}.facets @> {}", params.push(facets)));
    }
    if let Some(status) = filter.status {
        clauses.push(format!("{alias}.status = {}", params.push(status.as_str().to_owned())));
    }
    clauses.join(" AND ")
}
