//! [`KenningServer`]: the MCP handler, its toolset selection and its resources.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};

use kenning_core::{Cursor, FieldError, closest};
use kenning_engine::{DecisionService, MemoryService};

use crate::error::invalid_params;
use crate::resources;

/// Every toolset this server knows, in the order they are listed.
pub const TOOLSETS: &[&str] = &["memory", "decisions"];

/// The toolsets enabled when none are named. Every tool's definition sits in the agent's context
/// for the whole session, so the default stays at the memory tools; `decisions` (about as large
/// again) is enabled by naming it.
pub const DEFAULT_TOOLSETS: &[&str] = &["memory"];

/// Which tools a server exposes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerOptions {
    /// Toolsets to enable; `None` enables [`DEFAULT_TOOLSETS`].
    pub toolsets: Option<Vec<String>>,
    /// Drop every tool that writes.
    pub read_only: bool,
}

const INSTRUCTIONS: &str = "kenning is your long-term memory for this project and this user. \
Before you work out something from scratch, call memory_recall; when you learn something worth keeping \
(a decision and its reason, a lesson, a convention, a fix), call memory_capture with a fitting namespace. \
Every memory has a URN (kenning://{domain}/{namespace}/{id}) usable with memory_get and as a resource.";

#[derive(Clone)]
pub struct KenningServer {
    pub(crate) memory: Arc<MemoryService>,
    pub(crate) decisions: Arc<DecisionService>,
    tool_router: Arc<ToolRouter<KenningServer>>,
}

impl KenningServer {
    /// `decisions` must be built on `memory`.
    pub fn new(memory: Arc<MemoryService>, decisions: Arc<DecisionService>, options: &ServerOptions) -> Result<Self, FieldError> {
        let tool_router = Arc::new(Self::router(options)?);
        Ok(KenningServer { memory, decisions, tool_router })
    }

    fn router(options: &ServerOptions) -> Result<ToolRouter<KenningServer>, FieldError> {
        let selected: Vec<&str> = match &options.toolsets {
            None => DEFAULT_TOOLSETS.to_vec(),
            Some(names) => names
                .iter()
                .map(|name| {
                    let name = name.trim();
                    TOOLSETS.iter().copied().find(|known| *known == name).ok_or_else(|| {
                        let known = TOOLSETS.join(", ");
                        FieldError::new(
                            "toolsets",
                            "names an unknown toolset",
                            name,
                            match closest(name, TOOLSETS.iter().copied()) {
                                Some(near) => format!("did you mean `{near}`? known toolsets: {known}"),
                                None => format!("known toolsets: {known}"),
                            },
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let mut router = ToolRouter::new();
        for toolset in selected {
            router += match toolset {
                "memory" => Self::memory_tools(),
                "decisions" => Self::decision_tools(),
                other => unreachable!("toolset {other} is listed in TOOLSETS but has no router"),
            };
        }
        if options.read_only {
            let writers: Vec<String> = router
                .list_all()
                .into_iter()
                .filter(|tool| tool.annotations.as_ref().and_then(|a| a.read_only_hint) != Some(true))
                .map(|tool| tool.name.into_owned())
                .collect();
            for name in writers {
                router.remove_route(&name);
            }
        }
        Ok(router)
    }

    /// Every enabled tool as `tools/list` describes it, sorted by name.
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.tool_router.list_all()
    }
}

fn cursor_offset(request: Option<&PaginatedRequestParams>) -> Result<usize, McpError> {
    match request.and_then(|request| request.cursor.as_deref()) {
        None => Ok(0),
        Some(text) => Cursor::decode(text).map(|cursor| cursor.offset).map_err(|error| invalid_params(&error)),
    }
}

async fn on_blocking_pool<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, McpError> + Send + 'static,
) -> Result<T, McpError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| McpError::internal_error(format!("resource task failed: {error}"), None))?
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KenningServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("kenning", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let offset = cursor_offset(request.as_ref())?;
        let memory = self.memory.clone();
        let (page, next) = on_blocking_pool(move || {
            resources::list_page(&memory, offset).map_err(|error| McpError::internal_error(error.to_string(), None))
        })
        .await?;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next.map(|offset| Cursor { offset }.encode());
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(resources::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let memory = self.memory.clone();
        let uri = request.uri;
        let text = {
            let uri = uri.clone();
            on_blocking_pool(move || resources::read(&memory, &uri).map_err(McpError::from)).await?
        };
        let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
