//! The `docs` toolset: the project's documentation and its installed dependencies', in the
//! versions the lock files name. Off by default.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_code::docs::{ApiView, DocSearchView};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Strict, input_schema};

#[tool_router(router = docs_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "docs_search",
        title = "Search documentation",
        description = "Search the project's docs and doc comments and the documentation of the dependency versions actually installed.",
        input_schema = input_schema::<DocsSearchArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn docs_search(&self, Strict(args): Strict<DocsSearchArgs>) -> Result<Json<DocSearchView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.docs_search(&args.query, args.scope.as_deref(), args.limit)).await.map(Json)
    }

    #[tool(
        name = "docs_get_api",
        title = "Get API documentation",
        description = "Get the signature, doc comment, source location and installed version of a named function, type or module.",
        input_schema = input_schema::<ApiArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn docs_get_api(&self, Strict(args): Strict<ApiArgs>) -> Result<Json<ApiView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.docs_get_api(&args.name)).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocsSearchArgs {
    /// What you want to know, e.g. `parse JSON from a string`.
    pub query: String,
    /// `project`, `dependencies` or `all` (default).
    pub scope: Option<String>,
    /// Hits to return, 1 to 50; default 10.
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiArgs {
    /// The item's path, e.g. `serde_json::from_str`, `requests.get`, `lodash.debounce`, or a name in this project.
    pub name: String,
}
