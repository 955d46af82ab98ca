//! The `dynamics` toolset: memory that changes as it learns. Contradictions between memories
//! are found at capture (the capture's answer names them); these tools list them and settle
//! one. Off by default: most sessions only need the note a capture gives.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_engine::views::{ContradictionPage, ResolutionView};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Strict, input_schema};

#[tool_router(router = dynamics_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "memory_resolve_truth",
        title = "Resolve a contradiction",
        description = "Settle an open contradiction between two memories (a wins, b wins, or context-dependent with its conditions) by the configured language model or else by recency and source reliability, and lower the loser's confidence.",
        input_schema = input_schema::<ResolveTruthArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn memory_resolve_truth(&self, Strict(args): Strict<ResolveTruthArgs>) -> Result<Json<ResolutionView>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.resolve_truth(&args.contradiction_id)).await.map(Json)
    }

    #[tool(
        name = "memory_contradictions",
        title = "List contradictions",
        description = "List contradictions between memories, most recently changed first, optionally in one state.",
        input_schema = input_schema::<ContradictionsArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_contradictions(&self, Strict(args): Strict<ContradictionsArgs>) -> Result<Json<ContradictionPage>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.contradictions(args.state.as_deref(), args.cursor.as_deref(), args.limit)).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveTruthArgs {
    /// The contradiction's id (`ctr_…`), as a capture reported it or `memory_contradictions` lists it.
    pub contradiction_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContradictionsArgs {
    /// `open`, `resolved`, `context_dependent` or `reopened`; all when absent.
    #[serde(default)]
    pub state: Option<String>,
    /// The `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// At most this many (1-100, default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}
