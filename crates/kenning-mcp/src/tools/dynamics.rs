//! The `dynamics` toolset: memory that reorganises itself on request. `memory_consolidate`
//! groups related episodes into semantic principles and rolls a run back. Kept out of the
//! default tools because it writes in bulk and an agent needs it now and then, not every turn.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_core::FieldError;
use kenning_engine::{ConsolidateRequest, ConsolidationRun};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Strict, input_schema};

#[tool_router(router = dynamics_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "memory_consolidate",
        title = "Consolidate episodes into principles",
        description = "Group related episodic memories by meaning into semantic principles linked to their episodes and record the run, or undo a run with `rollback`.",
        input_schema = input_schema::<ConsolidateArgs>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn memory_consolidate(&self, Strict(args): Strict<ConsolidateArgs>) -> Result<Json<ConsolidationRun>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || match args.rollback {
            Some(run_id) => {
                if args.min_cluster_size.is_some() || args.similarity_threshold.is_some() || args.namespace.is_some() || args.limit.is_some() || args.dry_run {
                    return Err(FieldError::new(
                        "rollback",
                        "cannot be combined with the parameters of a new run",
                        run_id,
                        "pass `rollback` alone to undo that run, or leave it out to start a new one",
                    )
                    .into());
                }
                memory.rollback_consolidation(&run_id)
            }
            None => memory.consolidate(
                ConsolidateRequest {
                    domain: args.domain,
                    namespace: args.namespace,
                    min_cluster_size: args.min_cluster_size,
                    similarity_threshold: args.similarity_threshold,
                    limit: args.limit,
                    dry_run: args.dry_run,
                },
                &mut |_| {},
            ),
        })
        .await
        .map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsolidateArgs {
    /// Fewest episodes that make a principle (default 3).
    #[serde(default)]
    pub min_cluster_size: Option<usize>,
    /// Cosine similarity an episode needs to its cluster's centroid, above 0 and at most 1 (default 0.80).
    #[serde(default)]
    pub similarity_threshold: Option<f64>,
    /// Only episodes of this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `project`, `user` or `org`; default the first configured domain.
    #[serde(default)]
    pub domain: Option<String>,
    /// Most episodes to look at, newest first (default and most 10000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Show the clusters without writing anything.
    #[serde(default)]
    pub dry_run: bool,
    /// A run's `runId` to undo: its principles are forgotten and its episodes unmarked.
    #[serde(default)]
    pub rollback: Option<String>,
}
