//! The `org` toolset: sharing what one repository or one person learnt with the organisation.

use rmcp::Json;
use rmcp::tool;
use rmcp::tool_router;

use kenning_engine::views::CaptureOutcome;

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{PromoteArgs, Strict, input_schema};

#[tool_router(router = org_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "memory_promote",
        title = "Promote a memory",
        description = "Copy a project or user memory into the organisation's shared memory, linked back to the original, and return the copy's URN.",
        input_schema = input_schema::<PromoteArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_promote(&self, Strict(args): Strict<PromoteArgs>) -> Result<Json<CaptureOutcome>, ToolError> {
        let memory = self.memory.clone();
        let to = args.to.unwrap_or_else(|| "org".to_owned());
        blocking(move || memory.promote(&args.urn, &to)).await.map(Json)
    }
}
