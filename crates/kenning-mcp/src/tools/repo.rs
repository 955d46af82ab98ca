//! The `repo` toolset: what the repository's code is and how it hangs together, answered from
//! a code index kept fresh at every call (see kenning-code). Off by default.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_code::views::{DependenciesView, SearchView, SimilarView, UnderstandView};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Strict, input_schema};

#[tool_router(router = repo_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "repo_understand",
        title = "Understand code",
        description = "Before changing code, learn what a file or directory is for: its imports, importers, patterns, conventions, test files and last change.",
        input_schema = input_schema::<UnderstandArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn repo_understand(&self, Strict(args): Strict<UnderstandArgs>) -> Result<Json<UnderstandView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.understand(&args.path, args.depth.as_deref())).await.map(Json)
    }

    #[tool(
        name = "repo_search_patterns",
        title = "Search code patterns",
        description = "Find how something is already done in this repository (functions and types ranked by meaning and words) before writing it again.",
        input_schema = input_schema::<PatternArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn repo_search_patterns(&self, Strict(args): Strict<PatternArgs>) -> Result<Json<SearchView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.search_patterns(&args.pattern_query, args.path.as_deref(), args.language.as_deref(), args.limit)).await.map(Json)
    }

    #[tool(
        name = "repo_find_similar",
        title = "Find similar code",
        description = "Find the files most like a given file or code snippet, to follow their conventions.",
        input_schema = input_schema::<SimilarArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn repo_find_similar(&self, Strict(args): Strict<SimilarArgs>) -> Result<Json<SimilarView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.find_similar(args.file_path.as_deref(), args.snippet.as_deref(), args.limit)).await.map(Json)
    }

    #[tool(
        name = "repo_dependencies",
        title = "Code dependencies",
        description = "List what a file or directory imports and what imports it, directly or transitively, before changing shared code.",
        input_schema = input_schema::<DependenciesArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn repo_dependencies(&self, Strict(args): Strict<DependenciesArgs>) -> Result<Json<DependenciesView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.dependencies(&args.file_path, args.direction.as_deref(), args.depth)).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnderstandArgs {
    /// A file or directory, relative to the repository root (`.` for the whole repository).
    pub path: String,
    /// `shallow` (default) or `deep` (adds imports and importers two steps away).
    pub depth: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatternArgs {
    /// What to find, in words or code, e.g. `error handling in API routes`.
    pub pattern_query: String,
    /// Only under this file or directory.
    pub path: Option<String>,
    /// Only this language: rust, python, typescript, javascript or go.
    pub language: Option<String>,
    /// Hits to return, 1 to 50; default 10.
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilarArgs {
    /// A source file of the repository to compare against.
    pub file_path: Option<String>,
    /// Code to compare against, when there is no file.
    pub snippet: Option<String>,
    /// Files to return, 1 to 50; default 10.
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DependenciesArgs {
    /// A file or directory, relative to the repository root.
    pub file_path: String,
    /// `imports`, `imported_by` or `both` (default).
    pub direction: Option<String>,
    /// How many steps to follow, 1 (default, direct) to 10.
    pub depth: Option<usize>,
}
