//! The `protocols` toolset: guided protocols that ask one question at a time and write linked
//! memories when the dialogue completes. Each tool unpacks its arguments, calls one
//! protocol-service method on the blocking pool and returns the view as structured content.

use std::collections::BTreeMap;

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_engine::protocols::{AbortView, ProtocolList, SessionView};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{NoArgs, Strict, input_schema};

#[tool_router(router = protocol_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "protocol_list",
        title = "List protocols",
        description = "List the guided protocols (capture a decision, record work, investigate, resolve a blocker, add an invariant, explore) with their inputs.",
        input_schema = input_schema::<NoArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn protocol_list(&self, Strict(_args): Strict<NoArgs>) -> Result<Json<ProtocolList>, ToolError> {
        let protocols = self.protocols.clone();
        blocking(move || Ok(protocols.list())).await.map(Json)
    }

    #[tool(
        name = "protocol_start",
        title = "Start a protocol",
        description = "Start a guided protocol and get its first question with the skill that helps answer it.",
        input_schema = input_schema::<StartArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn protocol_start(&self, Strict(args): Strict<StartArgs>) -> Result<Json<SessionView>, ToolError> {
        let protocols = self.protocols.clone();
        blocking(move || protocols.start(&args.protocol, args.inputs.unwrap_or_default())).await.map(Json)
    }

    #[tool(
        name = "protocol_continue",
        title = "Answer a protocol step",
        description = "Answer the current step of a protocol session (a wrong answer returns the step with what was wrong), or omit the answer to see the step again.",
        input_schema = input_schema::<ContinueArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn protocol_continue(&self, Strict(args): Strict<ContinueArgs>) -> Result<Json<SessionView>, ToolError> {
        let protocols = self.protocols.clone();
        blocking(move || match args.answer {
            Some(answer) => protocols.answer(&args.session_id, answer),
            None => protocols.current(&args.session_id),
        })
        .await
        .map(Json)
    }

    #[tool(
        name = "protocol_abort",
        title = "Abort a protocol",
        description = "End a protocol session and discard its answers without writing anything.",
        input_schema = input_schema::<SessionArgs>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn protocol_abort(&self, Strict(args): Strict<SessionArgs>) -> Result<Json<AbortView>, ToolError> {
        let protocols = self.protocols.clone();
        blocking(move || protocols.abort(&args.session_id)).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// A name from protocol_list.
    #[serde(alias = "protocol_name")]
    pub protocol: String,
    /// Values of the protocol's inputs.
    pub inputs: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueArgs {
    pub session_id: String,
    /// Text, a number, or a list, as the step's `expects` says.
    pub answer: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    pub session_id: String,
}
