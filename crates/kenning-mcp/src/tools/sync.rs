//! The `sync` toolset: exchange the project's memories with its git remote. Kept out of the
//! default tools because it reaches the network and most sessions never need it.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_engine::views::SyncView;

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Strict, input_schema};

#[tool_router(router = sync_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "memory_sync",
        title = "Sync project memories",
        description = "Fetch the project's memories from its git remote, merge them with yours without losing any version, and push the result.",
        input_schema = input_schema::<SyncArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    async fn memory_sync(&self, Strict(args): Strict<SyncArgs>) -> Result<Json<SyncView>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.sync(args.domain.as_deref(), args.remote.as_deref())).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncArgs {
    /// The git remote's name or URL; default `origin`.
    #[serde(default)]
    pub remote: Option<String>,
    /// The domain to sync; default the project domain (the only one kept in git).
    #[serde(default)]
    pub domain: Option<String>,
}
