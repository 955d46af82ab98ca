//! [`KenningServer`]: the MCP handler, its toolset selection and its resources.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ResultType, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool_handler};

use kenning_core::{Cursor, Domain, FieldError};
use kenning_engine::{CodeService, DecisionService, MemoryService, ProtocolService, WorkflowService};
use kenning_gateway::Outcome;

use crate::access::{CallObserver, Caller, OutOfScope, PROMPTS_GET, RESOURCES_LIST, RESOURCES_READ, TOOLS_CALL, caller};
use crate::client_log::ClientLog;
use crate::decision_resources::{self, Change, DecisionUri};
use crate::error::{deadline_of, interruptible, invalid_params, refused_argument};
use crate::resources;
use crate::subscriptions::Subscriptions;
use crate::toolset::Toolset;

/// Which tools a server exposes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerOptions {
    /// Toolsets to enable by name (`all` for every one); `None` enables [`Toolset::DEFAULT`].
    pub toolsets: Option<Vec<String>>,
    /// Drop every tool that writes.
    pub read_only: bool,
}

impl ServerOptions {
    /// The toolsets these options enable; the one reading of their names.
    pub fn selected_toolsets(&self) -> Result<Vec<Toolset>, FieldError> {
        Toolset::parse_list(self.toolsets.as_deref())
    }
}

const INSTRUCTIONS: &str = "kenning is your long-term memory for this project and this user. \
Before you work out something from scratch, call memory_recall; when you learn something worth keeping \
(a decision and its reason, a lesson, a convention, a fix), call memory_capture with a fitting namespace. \
Every memory has a URN (kenning://{domain}/{namespace}/{id}) usable with memory_get and as a resource.";

/// Added to [`INSTRUCTIONS`] when the `decisions` toolset is enabled.
const DECISION_INSTRUCTIONS: &str = " For a technical decision that matters, call decision_context first \
(it warns about antipatterns and overconfidence and suggests a confidence), then decision_capture with the \
alternatives and an honest confidence; record signals (PR, CI, incidents) with decision_record_signal and the \
result with decision_record_outcome, which calibrates your confidence and mines skills. decision_calibration \
shows how far your confidence can be trusted per module.";

#[derive(Clone)]
pub struct KenningServer {
    pub(crate) memory: Arc<MemoryService>,
    pub(crate) decisions: Arc<DecisionService>,
    pub(crate) workflows: Arc<WorkflowService>,
    pub(crate) protocols: Arc<ProtocolService>,
    tool_router: Arc<ToolRouter<KenningServer>>,
    /// The tools a read-only key may call: those of `tool_router` that do not write.
    read_only_router: Arc<ToolRouter<KenningServer>>,
    /// Whether the decision resources are served (with the `decisions` toolset).
    decision_resources: bool,
    /// Whether the workflow resources are served (with the `workflows` toolset).
    workflow_resources: bool,
    /// Whether tools and prompts that write are left out.
    read_only: bool,
    /// This session's `logging/setLevel` choice; each session has its own.
    log: Arc<ClientLog>,
    pub(crate) subscriptions: Arc<Subscriptions>,
    /// Tells this session's subscriptions from other sessions' in the shared registry.
    session: u64,
    /// This session's id, recorded as the `session_id` of the memories it captures, so that
    /// recall relates memories of one session only (see `kenning_core::provenance`).
    pub(crate) session_id: Arc<str>,
    /// Times, counts and audits tool calls; set by the HTTP transport.
    observer: Option<Arc<CallObserver>>,
    /// The code toolsets' service, when kenning runs inside a repository.
    code: Option<Arc<CodeService>>,
    /// The code toolsets enabled (`repo`, `test`, `docs`), whose resources are served.
    code_toolsets: Vec<Toolset>,
}

fn new_session_id() -> Arc<str> {
    kenning_engine::ids::new_session_id("mcp", chrono::Utc::now()).into()
}

impl KenningServer {
    /// `decisions` must be built on `memory`.
    pub fn new(memory: Arc<MemoryService>, decisions: Arc<DecisionService>, options: &ServerOptions) -> Result<Self, FieldError> {
        let selected = options.selected_toolsets()?;
        let tool_router = Arc::new(Self::router(&selected, options.read_only));
        let read_only_router = if options.read_only { tool_router.clone() } else { Arc::new(Self::router(&selected, true)) };
        let subscriptions = Arc::new(Subscriptions::default());
        let session = subscriptions.next_number();
        Ok(KenningServer {
            workflows: Arc::new(WorkflowService::new(memory.clone())),
            protocols: Arc::new(ProtocolService::loading(decisions.clone(), kenning_protocol::Library::shipped)),
            memory,
            decisions,
            tool_router,
            read_only_router,
            decision_resources: selected.contains(&Toolset::Decisions),
            workflow_resources: selected.contains(&Toolset::Workflows),
            read_only: options.read_only,
            log: Arc::default(),
            subscriptions,
            session,
            session_id: new_session_id(),
            observer: None,
            code: None,
            code_toolsets: selected.iter().copied().filter(|toolset| toolset.is_code()).collect(),
        })
    }

    /// The same server with the code toolsets' service (`None` outside a repository, where
    /// their tools answer `no_repository`).
    pub fn with_code(self, code: Option<Arc<CodeService>>) -> KenningServer {
        KenningServer { code, ..self }
    }

    /// The code service, or the error a code tool returns without a repository.
    pub(crate) fn code(&self) -> Result<Arc<CodeService>, crate::error::ToolError> {
        self.code.clone().ok_or_else(|| {
            crate::error::ToolError::Failed(serde_json::json!({
                "error": "no_repository",
                "message": "kenning is not running inside a repository, so there is no code to inspect or test",
                "suggestion": "start kenning from inside a git repository",
            }))
        })
    }

    /// The same server running `protocols` (the shipped protocols and the project's and user's
    /// folders, as the binary loaded them) in place of the shipped ones alone.
    pub fn with_protocols(self, protocols: ProtocolService) -> KenningServer {
        KenningServer { protocols: Arc::new(protocols), ..self }
    }

    /// The same server for another client session, sharing stores and subscriptions.
    pub fn for_session(&self) -> KenningServer {
        KenningServer { session: self.subscriptions.next_number(), session_id: new_session_id(), log: Arc::default(), ..self.clone() }
    }

    /// This server as `caller`'s key may use it: for a key limited to some domains, every
    /// service over those domains alone (a memory of another domain is not found, another
    /// domain cannot be named); for a read-only key, the tools and prompts that do not write. A
    /// key with full access, or no key (stdio, a loopback server without keys), sees it whole.
    pub(crate) fn seen_by(&self, caller: Option<&Caller>) -> Result<KenningServer, OutOfScope> {
        let mut view = self.clone();
        let Some(caller) = caller.filter(|caller| !caller.scope.is_full()) else { return Ok(view) };
        let scope = &caller.scope;
        if let Some(domains) = &scope.domains {
            let decisions = self.decisions.restricted(|domain| scope.allows(domain)).map(Arc::new).ok_or_else(|| OutOfScope::NoDomain {
                key: caller.key_name.clone(),
                domains: domains.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            })?;
            let memory = decisions.memory().clone();
            view.workflows = Arc::new(WorkflowService::new(memory.clone()));
            view.protocols = Arc::new(self.protocols.with_decisions(decisions.clone()));
            view.code = self.code.as_ref().map(|code| Arc::new(code.with_services(memory.clone(), decisions.clone())));
            view.memory = memory;
            view.decisions = decisions;
        }
        if scope.read_only {
            view.tool_router = self.read_only_router.clone();
            view.read_only = true;
        }
        Ok(view)
    }

    /// [`KenningServer::seen_by`] the caller of a request, refusing with a JSON-RPC error.
    fn for_request(&self, context: &RequestContext<RoleServer>) -> Result<KenningServer, McpError> {
        self.seen_by(caller(context).as_ref()).map_err(|refusal| refusal.rpc_error())
    }

    /// Audits a call that is not a tool call (a resource listing or read, a prompt) when the
    /// HTTP transport asks.
    fn audited<T>(&self, method: &str, name: &str, context: &RequestContext<RoleServer>, started: std::time::Instant, result: &Result<T, McpError>) {
        let Some(observer) = &self.observer else { return };
        let outcome = match result {
            Ok(_) => Outcome::Ok,
            Err(error) if error.data.as_ref().and_then(|data| data.get("error")).is_some_and(|code| code == "forbidden") => Outcome::Forbidden,
            Err(error) if error.code == rmcp::model::ErrorCode::INVALID_PARAMS => Outcome::Invalid,
            Err(_) => Outcome::ToolError,
        };
        observer.record(method, name, context, started.elapsed(), outcome);
    }

    /// Reads one resource through this server's services.
    async fn read(&self, uri: String) -> Result<ReadResourceResponse, McpError> {
        let memory = self.memory.clone();
        let decisions = self.decision_resources.then(|| self.decisions.clone());
        let (code, code_toolsets) = (self.code.clone(), self.code_toolsets.clone());
        let workflows = self.workflow_resources.then(|| self.workflows.clone());
        let text = {
            let uri = uri.clone();
            read_off_the_runtime(move || {
                if crate::code_resources::owns(&uri) {
                    return crate::code_resources::read(code.as_deref(), &code_toolsets, &uri);
                }
                if let Some(workflows) = workflows.filter(|_| crate::workflow_resources::claims(&uri)) {
                    return crate::workflow_resources::read(&workflows, &uri).map_err(McpError::from);
                }
                match decisions.as_deref().and_then(|decisions| Some((decisions, decision_resources::parse(&uri)?))) {
                    Some((decisions, parsed)) => {
                        let parsed = parsed.map_err(|error| invalid_params(&error))?;
                        decision_resources::read(decisions, &uri, &parsed).map_err(McpError::from)
                    }
                    None => resources::read(&memory, &uri).map_err(McpError::from),
                }
            })
            .await?
        };
        let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    /// One page of resources through this server's services.
    async fn list_page(&self, request: Option<PaginatedRequestParams>) -> Result<ListResourcesResult, McpError> {
        let offset = cursor_offset(request.as_ref())?;
        let memory = self.memory.clone();
        let mut extra = if self.decision_resources { decision_resources::catalogue(&self.decisions) } else { Vec::new() };
        extra.extend(crate::code_resources::catalogue(&self.code_toolsets));
        if self.workflow_resources {
            extra.extend(crate::workflow_resources::catalogue());
        }
        let (page, next) = read_off_the_runtime(move || {
            resources::list_page(&memory, &extra, offset).map_err(|error| McpError::internal_error(error.to_string(), None))
        })
        .await?;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next.map(|offset| Cursor { offset }.encode());
        Ok(result)
    }

    /// The same server with every tool call timed, counted and audited by `observer`.
    pub(crate) fn observed(self, observer: CallObserver) -> KenningServer {
        KenningServer { observer: Some(Arc::new(observer)), ..self }
    }

    fn router(selected: &[Toolset], read_only: bool) -> ToolRouter<KenningServer> {
        let mut router = ToolRouter::new();
        for toolset in selected {
            router += match toolset {
                Toolset::Memory => Self::memory_tools(),
                Toolset::Decisions => Self::decision_tools(),
                Toolset::Sync => Self::sync_tools(),
                Toolset::Org => Self::org_tools(),
                Toolset::Workflows => Self::workflow_tools(),
                Toolset::Protocols => Self::protocol_tools(),
                Toolset::Repo => Self::repo_tools(),
                Toolset::Test => Self::test_tools(),
                Toolset::Docs => Self::docs_tools(),
                Toolset::Dynamics => Self::dynamics_tools(),
            };
        }
        if read_only {
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
        for route in router.map.values_mut() {
            let tool = &mut route.attr;
            crate::schema::keep_standard_formats(Arc::make_mut(&mut tool.input_schema));
            if let Some(output) = tool.output_schema.as_mut() {
                crate::schema::keep_standard_formats(Arc::make_mut(output));
            }
        }
        router
    }

    /// Every enabled tool as `tools/list` describes it, sorted by name.
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.tool_router.list_all()
    }

    /// Every prompt as `prompts/list` describes it.
    pub fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        crate::prompts::list(self.read_only)
    }

    /// Tells the subscribers of the resources `change` made stale in `domain`.
    pub(crate) async fn notify(&self, domain: &str, change: Change<'_>) {
        match Domain::parse("domain", domain) {
            Ok(domain) => self.subscriptions.changed(&domain, &decision_resources::changed_by(&change)).await,
            Err(error) => tracing::warn!(%error, "a decision view named a domain that does not parse"),
        }
    }

    /// A decision resource a client may subscribe to, with its path and domain.
    fn subscribable(&self, uri: &str) -> Result<(String, Domain), McpError> {
        let not_subscribable = || {
            invalid_params(&FieldError::new(
                "uri",
                "is not a resource this server sends updates for",
                uri,
                if self.decision_resources {
                    "subscribe to kenning://calibration[/{module}], kenning://skills[/{module}], kenning://anomalies or kenning://decisions[/{id}]"
                } else {
                    "updates are sent for decision resources, which need the `decisions` toolset"
                },
            ))
        };
        if !self.decision_resources {
            return Err(not_subscribable());
        }
        let parsed: DecisionUri = match decision_resources::parse(uri) {
            Some(parsed) => parsed.map_err(|error| invalid_params(&error))?,
            None => return Err(not_subscribable()),
        };
        let domain = self.decisions.domain(parsed.domain.as_deref()).map_err(|error| match error {
            kenning_engine::Error::Invalid(field) => invalid_params(&field),
            other => McpError::internal_error(other.to_string(), None),
        })?;
        Ok((parsed.path(), domain))
    }
}

fn cursor_offset(request: Option<&PaginatedRequestParams>) -> Result<usize, McpError> {
    match request.and_then(|request| request.cursor.as_deref()) {
        None => Ok(0),
        Some(text) => Cursor::decode(text).map(|cursor| cursor.offset).map_err(|error| invalid_params(&error)),
    }
}

/// Reads a resource or a prompt where it may block, as tools run their engine work (see
/// [`crate::error::off_the_runtime`]).
async fn read_off_the_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, McpError> + Send + 'static,
) -> Result<T, McpError> {
    crate::error::off_the_runtime(work)
        .await
        .map_err(|failure| McpError::internal_error(format!("resource task failed: {failure}"), None))?
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KenningServer {
    #[allow(deprecated, reason = "logging is part of the MCP revisions before 2026-07-28, which clients still negotiate")]
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder().enable_tools().enable_resources().enable_prompts().enable_logging().build();
        // Updates are sent for the decision resources only.
        if let Some(resources) = capabilities.resources.as_mut() {
            resources.subscribe = self.decision_resources.then_some(true);
        }
        let instructions = if self.decision_resources { format!("{INSTRUCTIONS}{DECISION_INSTRUCTIONS}") } else { INSTRUCTIONS.to_owned() };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("kenning", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let started = std::time::Instant::now();
        let result = match self.for_request(&context) {
            Ok(view) => view.list_page(request).await,
            Err(refusal) => Err(refusal),
        };
        self.audited(RESOURCES_LIST, RESOURCES_LIST, &context, started, &result);
        result
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut templates = resources::templates();
        if self.decision_resources {
            templates.extend(decision_resources::templates());
        }
        if self.workflow_resources {
            templates.extend(crate::workflow_resources::templates());
        }
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let started = std::time::Instant::now();
        let uri = request.uri;
        let result = match self.for_request(&context) {
            Ok(view) => view.read(uri.clone()).await,
            Err(refusal) => Err(refusal),
        };
        self.audited(RESOURCES_READ, &uri, &context, started, &result);
        result
    }

    /// Every tool call goes through the router of the caller's key (see
    /// [`KenningServer::seen_by`]); a refused argument becomes an `isError` result. Its outcome
    /// is reported to the client's log level (see [`ClientLog`]) and, over HTTP, timed into the
    /// metrics and written to the audit log.
    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let tool = request.name.to_string();
        let peer = context.peer.clone();
        let audit_context = self.observer.is_some().then(|| context.clone());
        let started = std::time::Instant::now();
        let caller = caller(&context);
        let view = self.seen_by(caller.as_ref()).and_then(|view| match caller {
            // A tool this server has but the key's router left out writes.
            Some(caller) if view.tool_router.get(&tool).is_none() && self.tool_router.get(&tool).is_some() => {
                Err(OutOfScope::Writes { key: caller.key_name, tool: tool.clone() })
            }
            _ => Ok(view),
        });
        let response = match &view {
            Ok(view) => {
                let cancelled = context.ct.clone();
                interruptible(
                    view.tool_router.call(ToolCallContext::new(view, request, context)),
                    async move { cancelled.cancelled().await },
                    deadline_of(&tool),
                )
                .await
            }
            Err(refusal) => Ok(refusal.tool_result().into()),
        };
        let elapsed = started.elapsed();
        let outcome = match &response {
            _ if view.is_err() => Outcome::Forbidden,
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => Outcome::ToolError,
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Invalid,
        };
        // A listed tool's -32602 is a refused argument, which the model must see to correct
        // its call; an unknown tool's stays a JSON-RPC error (see `crate::error`).
        let response = match response {
            Err(error) if error.code == ErrorCode::INVALID_PARAMS && self.tool_router.has_route(&tool) => {
                Ok(refused_argument(error).into())
            }
            other => other,
        };
        if let (Some(observer), Some(audit_context)) = (&self.observer, &audit_context) {
            observer.record(TOOLS_CALL, &tool, audit_context, elapsed, outcome);
        }
        self.log.tool_call(&peer, &tool, elapsed, &response).await;
        response
    }

    /// The tools the caller's key may call. With keys the list differs by key, so only the
    /// caller's own client may cache it.
    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListToolsResult, McpError> {
        let view = self.for_request(&context)?;
        let cache_hints = context.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let mut result = ListToolsResult::with_all_items(view.tool_router.list_all());
        result.result_type = Some(ResultType::COMPLETE);
        result.ttl_ms = cache_hints.then_some(0);
        result.cache_scope = cache_hints.then_some(if caller(&context).is_some() { CacheScope::Private } else { CacheScope::Public });
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_router.get(name).cloned()
    }

    #[allow(deprecated, reason = "logging is part of the MCP revisions before 2026-07-28, which clients still negotiate")]
    async fn set_level(&self, request: rmcp::model::SetLevelRequestParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.log.set_level(request.level);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(self.for_request(&context)?.prompts()))
    }

    async fn get_prompt(&self, request: GetPromptRequestParams, context: RequestContext<RoleServer>) -> Result<GetPromptResponse, McpError> {
        let started = std::time::Instant::now();
        let name = request.name.clone();
        let result = match self.for_request(&context) {
            Ok(view) => {
                let memory = view.memory.clone();
                let (read_only, decision_tools) = (view.read_only, view.decision_resources);
                read_off_the_runtime(move || crate::prompts::get(&memory, &request.name, request.arguments, read_only, decision_tools))
                    .await
                    .map(GetPromptResponse::from)
            }
            Err(refusal) => Err(refusal),
        };
        self.audited(PROMPTS_GET, &name, &context, started, &result);
        result
    }

    /// A request rmcp could not read into its method's type: -32602 for a method of the
    /// specification (its params did not fit), -32601 for any other.
    async fn on_custom_request(&self, request: CustomRequest, _context: RequestContext<RoleServer>) -> Result<CustomResult, McpError> {
        Err(crate::unparsed::answer(&request.method, request.params.as_ref()))
    }

    #[allow(deprecated, reason = "clients that negotiate a 2025 protocol subscribe with resources/subscribe")]
    async fn subscribe(&self, request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        let (path, domain) = self.for_request(&context)?.subscribable(&request.uri)?;
        self.subscriptions.subscribe(self.session, request.uri, path, domain, context.peer);
        Ok(())
    }

    #[allow(deprecated, reason = "clients that negotiate a 2025 protocol unsubscribe with resources/unsubscribe")]
    async fn unsubscribe(&self, request: UnsubscribeRequestParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(self.session, &request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let uris: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| self.subscribable(uri).is_ok())
            .cloned()
            .collect();
        Some(SubscriptionFilter::builder().resource_subscriptions(uris).build())
    }

    /// Streams updates of the accepted resources the caller's key may read.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let view = self.for_request(context.request_context())?;
        let stream = self.subscriptions.next_number();
        let uris = context
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
            .filter_map(|uri| view.subscribable(uri).ok().map(|(path, domain)| (uri.clone(), path, domain)))
            .collect();
        self.subscriptions.listen(self.session, stream, uris, context.sink().clone());
        context.cancelled().await;
        self.subscriptions.end_stream(stream);
        Ok(())
    }
}
