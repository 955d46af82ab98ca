//! Resources of the code toolsets: `repo://structure`, `repo://readme`, `repo://conventions`,
//! `repo://recent-changes` (with `repo`); `test://status`, `test://recent-failures`,
//! `test://coverage` (with `test`); `docs://project`, `docs://api`, `docs://changelog` (with
//! `docs`). Each is listed only with its toolset enabled and a repository.

use rmcp::ErrorData as McpError;
use rmcp::model::Resource;
use serde_json::json;

use kenning_engine::CodeService;

use crate::toolset::Toolset;

const JSON: &str = "application/json";
/// Commits `repo://recent-changes` lists.
const RECENT_COMMITS: usize = 20;

const RESOURCES: &[(Toolset, &str, &str, &str)] = &[
    (Toolset::Repo, "repo://structure", "Repository structure", "Top-level directories, files per language and the project's manifests."),
    (Toolset::Repo, "repo://readme", "README", "The repository's README."),
    (Toolset::Repo, "repo://conventions", "Coding conventions", "Naming, documentation and layout conventions observed per language."),
    (Toolset::Repo, "repo://recent-changes", "Recent changes", "The latest commits with their authors and changed files."),
    (Toolset::Test, "test://status", "Test status", "Detected runners and the test runs since the server started."),
    (Toolset::Test, "test://recent-failures", "Recent test failures", "Failed, broken and timed-out test runs since the server started."),
    (Toolset::Test, "test://coverage", "Test coverage", "Coverage, where a runner reports it."),
    (Toolset::Docs, "docs://project", "Project documentation", "The project's documentation files with their titles."),
    (Toolset::Docs, "docs://api", "Project API", "Each documented source file with the first line of its documentation."),
    (Toolset::Docs, "docs://changelog", "Changelog", "The project's changelog, or its recent commits when it keeps none."),
];

/// The resources of the enabled code toolsets.
pub fn catalogue(toolsets: &[Toolset]) -> Vec<Resource> {
    RESOURCES
        .iter()
        .filter(|(toolset, ..)| toolsets.contains(toolset))
        .map(|(_, uri, title, description)| {
            Resource::new(*uri, uri.split("://").nth(1).unwrap_or(uri)).with_title(*title).with_description(*description).with_mime_type(JSON)
        })
        .collect()
}

/// Whether `uri` is one of these resources.
pub fn owns(uri: &str) -> bool {
    uri.starts_with("repo://") || uri.starts_with("test://") || uri.starts_with("docs://")
}

/// Reads a code resource as JSON text.
pub fn read(code: Option<&CodeService>, toolsets: &[Toolset], uri: &str) -> Result<String, McpError> {
    let known = RESOURCES.iter().find(|(_, known, ..)| *known == uri);
    let Some((toolset, ..)) = known.filter(|(toolset, ..)| toolsets.contains(toolset)) else {
        return Err(McpError::resource_not_found(
            format!("no resource at {uri}"),
            Some(json!({"uri": uri, "suggestion": "list resources; code resources need their toolset (repo, test, docs) enabled"})),
        ));
    };
    let Some(code) = code else {
        return Err(McpError::resource_not_found(
            format!("{uri} needs a repository, and kenning is not running inside one"),
            Some(json!({"uri": uri, "toolset": toolset.name(), "suggestion": "start kenning from inside a git repository"})),
        ));
    };
    let failed = |error: kenning_engine::Error| McpError::internal_error(error.to_string(), None);
    let value = match uri {
        "repo://structure" => serde_json::to_value(code.structure().map_err(failed)?),
        "repo://readme" => Ok(json!({"content": code.readme().map_err(failed)?})),
        "repo://conventions" => serde_json::to_value(code.conventions().map_err(failed)?),
        "repo://recent-changes" => serde_json::to_value(code.recent_changes(RECENT_COMMITS)),
        "test://status" => serde_json::to_value(code.status()),
        "test://recent-failures" => serde_json::to_value(code.recent_failures()),
        "docs://project" => Ok(json!({"files": code.project_docs().map_err(failed)?})),
        "docs://api" => Ok(json!({"modules": code.api_overview().map_err(failed)?})),
        "docs://changelog" => Ok(code.changelog().map_err(failed)?),
        _ => Ok(json!({"coverage": null, "reason": "none of the supported runners reports coverage in the output kenning reads"})),
    };
    value.map(|value| value.to_string()).map_err(|error| McpError::internal_error(error.to_string(), None))
}
