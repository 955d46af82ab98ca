//! Turns a [`SearchFilter`] into a SQL condition over the `memories` table aliased as `m`, so
//! that every filter is answered by the database, next to the search itself.

use kenning_core::{FilterCondition, SearchFilter};

use crate::codec::nanos;
use crate::sql::Params;

pub(crate) fn condition(filter: &SearchFilter, params: &mut Params) -> String {
    condition_on("m", filter, params)
}

/// The condition over the `memories` table aliased as `alias`.
pub(crate) fn condition_on(alias: &str, filter: &SearchFilter, params: &mut Params) -> String {
    let mut clauses: Vec<String> = vec!["true".to_owned()];
    for condition in filter.conditions() {
        clauses.push(match condition {
            FilterCondition::Kinds(kinds) => {
                let kinds: Vec<String> = kinds.iter().map(|kind| kind.as_str().to_owned()).collect();
                format!("{alias}.kind = ANY({})", params.push(kinds))
            }
            FilterCondition::Namespaces(namespaces) => {
                let namespaces: Vec<String> = namespaces.iter().map(|namespace| namespace.as_str().to_owned()).collect();
                format!("{alias}.namespace = ANY({})", params.push(namespaces))
            }
            // Containment, answered by the GIN index on tags: every tag must be there.
            FilterCondition::Tags(tags) => format!("{alias}.tags @> {}", params.push(tags.to_vec())),
            FilterCondition::Since(since) => format!("{alias}.occurred_at >= {}", params.push(nanos(since))),
            FilterCondition::Until(until) => format!("{alias}.occurred_at <= {}", params.push(nanos(until))),
            FilterCondition::MinConfidence(min_confidence) => format!("{alias}.confidence >= {}", params.push(min_confidence)),
            // Containment, answered by the GIN index on facets, as for tags.
            FilterCondition::Facets(facets) => format!("{alias}.facets @> {}", params.push(facets)),
            FilterCondition::Status(status) => format!("{alias}.status = {}", params.push(status.as_str().to_owned())),
        });
    }
    clauses.join(" AND ")
}
