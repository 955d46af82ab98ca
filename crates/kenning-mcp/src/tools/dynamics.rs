//! The `dynamics` toolset: memory that reorganises itself and settles what conflicts.
//! `memory_consolidate` groups related episodes into semantic principles and rolls a run back;
//! contradictions between memories are found at capture (the capture's answer names them), and
//! `memory_contradictions` lists them and `memory_resolve_truth` settles one; `memory_introspect`
//! counts what the memory holds and how it has aged. Kept out of the
//! default tools because an agent needs them now and then, not every turn.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_core::FieldError;
use kenning_engine::{ConsolidateRequest, ConsolidationRun};
use kenning_engine::introspect::Introspection;
use kenning_engine::views::{ContradictionPage, ResolutionView};

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

    #[tool(
        name = "memory_introspect",
        title = "Inspect memory health",
        description = "Count a domain's memories by kind, the dormant ones, links, evidence, contradictions by state and consolidation runs.",
        input_schema = input_schema::<IntrospectArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_introspect(&self, Strict(args): Strict<IntrospectArgs>) -> Result<Json<Introspection>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.introspect(args.domain.as_deref())).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectArgs {
    /// `project`, `user` or `org`; default the first configured domain.
    #[serde(default)]
    pub domain: Option<String>,
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
    /// Most episodes to look at, newest first (default 10000, at most 100000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Show the clusters without writing anything.
    #[serde(default)]
    pub dry_run: bool,
    /// A run's `runId` to undo: its principles are forgotten and its episodes unmarked.
    #[serde(default)]
    pub rollback: Option<String>,
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
