//! The `memory` toolset. Each tool unpacks its arguments, calls one engine method on the
//! blocking pool, and returns the engine's view as structured content.

use rmcp::Json;
use rmcp::tool;
use rmcp::tool_router;

use kenning_core::provenance::{CONVERSATION_KEY, SESSION_KEY};
use kenning_engine::RecallRequest;
use kenning_engine::views::{CaptureOutcome, ChangeOutcome, HistoryView, MemoryView, RecallPage, StatusReport};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Author, CaptureArgs, NoArgs, ReasonArgs, RecallArgs, Strict, UpdateArgs, UrnArgs, input_schema};

#[tool_router(router = memory_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "memory_capture",
        title = "Capture a memory",
        description = "Store a piece of knowledge, decision or lesson in long-term memory and return its URN.",
        input_schema = input_schema::<CaptureArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_capture(&self, Author(author): Author, Strict(args): Strict<CaptureArgs>) -> Result<Json<CaptureOutcome>, ToolError> {
        let memory = self.memory.clone();
        let (mut input, domain) = args.into_input();
        input.author = author;
        if !input.metadata.contains_key(SESSION_KEY) && !input.metadata.contains_key(CONVERSATION_KEY) {
            input.metadata.insert(SESSION_KEY.to_owned(), self.session_id.to_string());
        }
        blocking(move || memory.capture(input, domain.as_deref())).await.map(Json)
    }

    #[tool(
        name = "memory_recall",
        title = "Recall memories",
        description = "Search long-term memory with full-text and semantic search, filtered and bounded by a token budget.",
        input_schema = input_schema::<RecallArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_recall(&self, Strict(args): Strict<RecallArgs>) -> Result<Json<RecallPage>, ToolError> {
        let memory = self.memory.clone();
        let request = RecallRequest::from(args);
        blocking(move || memory.recall(request)).await.map(Json)
    }

    #[tool(
        name = "memory_get",
        title = "Get a memory",
        description = "Read one memory in full by its URN.",
        input_schema = input_schema::<UrnArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_get(&self, Strict(args): Strict<UrnArgs>) -> Result<Json<MemoryView>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.get(&args.urn)).await.map(Json)
    }

    #[tool(
        name = "memory_update",
        title = "Update a memory",
        description = "Change a memory's content or fields, keeping the previous version and the reason in its history.",
        input_schema = input_schema::<UpdateArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn memory_update(&self, Strict(args): Strict<UpdateArgs>) -> Result<Json<ChangeOutcome>, ToolError> {
        let memory = self.memory.clone();
        let (urn, input) = args.into_input();
        blocking(move || memory.update(&urn, input)).await.map(Json)
    }

    #[tool(
        name = "memory_forget",
        title = "Forget a memory",
        description = "Mark a memory as obsolete so recall skips it; the record and its history are kept and can be restored.",
        input_schema = input_schema::<ReasonArgs>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_forget(&self, Strict(args): Strict<ReasonArgs>) -> Result<Json<ChangeOutcome>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.forget(&args.urn, &args.reason)).await.map(Json)
    }

    #[tool(
        name = "memory_restore",
        title = "Restore a memory",
        description = "Bring a forgotten memory back into recall.",
        input_schema = input_schema::<ReasonArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_restore(&self, Strict(args): Strict<ReasonArgs>) -> Result<Json<ChangeOutcome>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.restore(&args.urn, &args.reason)).await.map(Json)
    }

    #[tool(
        name = "memory_history",
        title = "Memory history",
        description = "List every earlier version of a memory with the reason each was changed.",
        input_schema = input_schema::<UrnArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_history(&self, Strict(args): Strict<UrnArgs>) -> Result<Json<HistoryView>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.history(&args.urn)).await.map(Json)
    }

    #[tool(
        name = "memory_status",
        title = "Memory status",
        description = "Report memory counts per domain, namespace and kind, store locations, the embedding model and index health.",
        input_schema = input_schema::<NoArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_status(&self, Strict(_args): Strict<NoArgs>) -> Result<Json<StatusReport>, ToolError> {
        let memory = self.memory.clone();
        blocking(move || memory.status()).await.map(Json)
    }
}
