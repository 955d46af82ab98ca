//! The workflow resources, served with the `workflows` toolset: `kenning://workflows` (every
//! workflow, newest first, paginated by `?cursor=`) and `kenning://workflows/{workflow_id}`.

use rmcp::model::{Resource, ResourceTemplate};
use serde::Serialize;

use kenning_core::FieldError;
use kenning_engine::{WorkflowQuery, WorkflowService};

use crate::resources::ReadError;

const LIST_URI: &str = "kenning://workflows";
const JSON: &str = "application/json";

/// Whether `uri` is a workflow resource's address.
pub fn claims(uri: &str) -> bool {
    uri == LIST_URI || uri.starts_with("kenning://workflows/") || uri.starts_with("kenning://workflows?")
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("kenning://workflows/{workflow_id}", "workflow")
            .with_title("Workflow")
            .with_description("One workflow: its steps, the ready set and the next step.")
            .with_mime_type(JSON),
    ]
}

pub fn catalogue() -> Vec<Resource> {
    vec![Resource::new(LIST_URI, "workflows").with_title("Workflows").with_description("Workflows, newest first, paginated.").with_mime_type(JSON)]
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string_pretty(value).expect("views serialise")
}

/// Reads a workflow resource as JSON text.
pub fn read(workflows: &WorkflowService, uri: &str) -> Result<String, ReadError> {
    if let Some(id) = uri.strip_prefix("kenning://workflows/") {
        return match workflows.status(Some(id)) {
            Ok(view) => Ok(to_json(&view)),
            Err(kenning_engine::Error::Invalid(error)) if error.field == "workflow_id" => Err(ReadError::NotFound(uri.to_owned())),
            Err(error) => Err(ReadError::from(error)),
        };
    }
    let query = uri.strip_prefix(LIST_URI).unwrap_or("");
    let mut cursor = None;
    for pair in query.trim_start_matches('?').split('&').filter(|pair| !pair.is_empty()) {
        match pair.split_once('=') {
            Some(("cursor", value)) => cursor = Some(value.to_owned()),
            _ => {
                return Err(ReadError::Invalid(FieldError::new("uri", "has an unknown query parameter", pair, "use `?cursor={next_cursor}` only")));
            }
        }
    }
    Ok(to_json(&workflows.list(WorkflowQuery { cursor, ..WorkflowQuery::default() })?))
}
