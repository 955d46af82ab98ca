//! The `workflows` toolset: plans of several steps with dependencies, kept in the store so
//! that an agent that crashed resumes where it was. Each tool unpacks its arguments, calls one
//! workflow-service method on the blocking pool and returns the view as structured content.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_core::workflow::{CreateWorkflow, StepInput, StepUpdate};
use kenning_engine::WorkflowQuery;
use kenning_engine::workflows::{WorkflowPage, WorkflowView};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Author, Strict, input_schema};

#[tool_router(router = workflow_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "workflow_create",
        title = "Create a workflow",
        description = "Plan a multi-step task as steps with dependencies and verification, kept so that work resumes after a crash.",
        input_schema = input_schema::<CreateWorkflowArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn workflow_create(&self, Author(author): Author, Strict(args): Strict<CreateWorkflowArgs>) -> Result<Json<WorkflowView>, ToolError> {
        let workflows = self.workflows.clone();
        let domain = args.domain.clone();
        let mut input = args.into_input();
        input.author = author;
        blocking(move || workflows.create(input, domain.as_deref())).await.map(Json)
    }

    #[tool(
        name = "workflow_status",
        title = "Workflow status",
        description = "Show a workflow's ready, blocked, in-progress, done and failed steps and the next step to take.",
        input_schema = input_schema::<StatusArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn workflow_status(&self, Strict(args): Strict<StatusArgs>) -> Result<Json<WorkflowView>, ToolError> {
        let workflows = self.workflows.clone();
        blocking(move || workflows.status(args.workflow_id.as_deref())).await.map(Json)
    }

    #[tool(
        name = "workflow_update_step",
        title = "Update a workflow step",
        description = "Set a step to pending, in_progress, completed, failed or skipped with notes; a step cannot start before its dependencies are done.",
        input_schema = input_schema::<UpdateStepArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn workflow_update_step(&self, Strict(args): Strict<UpdateStepArgs>) -> Result<Json<WorkflowView>, ToolError> {
        let workflows = self.workflows.clone();
        let id = args.workflow_id.clone();
        let update = StepUpdate { step_id: args.step_id, status: args.status, notes: args.notes, produced: args.produced.unwrap_or_default() };
        blocking(move || workflows.update_step(&id, update)).await.map(Json)
    }

    #[tool(
        name = "workflow_abandon",
        title = "Abandon a workflow",
        description = "Give up an active workflow with a reason, writing what was done up as a memory.",
        input_schema = input_schema::<AbandonArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn workflow_abandon(&self, Strict(args): Strict<AbandonArgs>) -> Result<Json<WorkflowView>, ToolError> {
        let workflows = self.workflows.clone();
        blocking(move || workflows.abandon(&args.workflow_id, &args.reason)).await.map(Json)
    }

    #[tool(
        name = "workflow_list",
        title = "List workflows",
        description = "List workflows newest first, filtered by status, paginated.",
        input_schema = input_schema::<ListArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn workflow_list(&self, Strict(args): Strict<ListArgs>) -> Result<Json<WorkflowPage>, ToolError> {
        let workflows = self.workflows.clone();
        let query = WorkflowQuery { status: args.status, domain: args.domain, cursor: args.cursor, limit: args.limit };
        blocking(move || workflows.list(query)).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepArg {
    /// Short unique slug, e.g. `write-tests`.
    pub id: String,
    pub description: String,
    /// Ids of the steps that must be done first.
    pub dependencies: Option<Vec<String>>,
    /// How to check the step is done.
    pub verification: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkflowArgs {
    pub name: String,
    /// What the workflow achieves.
    pub goal: String,
    pub steps: Vec<StepArg>,
    /// `project` (default inside a git repository), `user`, or a full domain.
    pub domain: Option<String>,
}

impl CreateWorkflowArgs {
    fn into_input(self) -> CreateWorkflow {
        CreateWorkflow {
            name: self.name,
            goal: self.goal,
            steps: self
                .steps
                .into_iter()
                .map(|step| StepInput {
                    id: step.id,
                    description: step.description,
                    dependencies: step.dependencies.unwrap_or_default(),
                    verification: step.verification,
                })
                .collect(),
            author: None,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// Default: the active workflow updated last.
    pub workflow_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateStepArgs {
    pub workflow_id: String,
    pub step_id: String,
    /// pending, in_progress, completed, failed or skipped.
    pub status: String,
    pub notes: Option<String>,
    /// URNs of memories the step produced; the workflow's closing memory links them.
    pub produced: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AbandonArgs {
    pub workflow_id: String,
    pub reason: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// active, completed or abandoned.
    pub status: Option<String>,
    pub domain: Option<String>,
    pub cursor: Option<String>,
    /// 1 to 100; default 20.
    pub limit: Option<usize>,
}
