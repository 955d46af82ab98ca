//! Tool arguments: the strict extractor and the argument types of every tool.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::schemars::{self, JsonSchema};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use kenning_core::{CaptureInput, FieldError, LinkInput, UpdateInput};
use kenning_engine::RecallRequest;

use crate::error::invalid_params;

/// Deserialises tool arguments, turning a type error into -32602 with the offending field's
/// path, where rmcp's own `Parameters` would return an error result without one.
pub struct Strict<T>(pub T);

impl<'a, S, T: DeserializeOwned> FromContextPart<ToolCallContext<'a, S>> for Strict<T> {
    fn from_context_part(context: &mut ToolCallContext<'a, S>) -> Result<Self, McpError> {
        let arguments = serde_json::Value::Object(context.arguments.take().unwrap_or_default());
        serde_path_to_error::deserialize(&arguments).map(Strict).map_err(|error| {
            let path = error.path().to_string();
            let field = if path == "." { "arguments".to_owned() } else { path };
            let received = pointer(&arguments, error.path()).cloned().unwrap_or(serde_json::Value::Null);
            invalid_params(&FieldError::new(
                field,
                error.inner().to_string(),
                received,
                "check the argument against the tool's inputSchema",
            ))
        })
    }
}

/// The identity of the authenticated caller (an API key's identity over HTTP), recorded as
/// the author of what a tool writes; `None` over stdio and on a loopback server without keys.
pub struct Author(pub Option<String>);

impl<'a, S> FromContextPart<ToolCallContext<'a, S>> for Author {
    fn from_context_part(context: &mut ToolCallContext<'a, S>) -> Result<Self, McpError> {
        Ok(Author(crate::access::caller(context.request_context()).map(|caller| caller.identity)))
    }
}

/// The value at a serde path inside the arguments, to report what was received.
fn pointer<'v>(value: &'v serde_json::Value, path: &serde_path_to_error::Path) -> Option<&'v serde_json::Value> {
    use serde_path_to_error::Segment;
    path.iter().try_fold(value, |current, segment| match segment {
        Segment::Map { key } => current.get(key),
        Segment::Seq { index } => current.get(index),
        Segment::Enum { .. } | Segment::Unknown => Some(current),
    })
}

/// The input schema of an argument type, for `#[tool(input_schema = ...)]`.
pub fn input_schema<T: JsonSchema + 'static>() -> Arc<rmcp::model::JsonObject> {
    rmcp::handler::server::common::schema_for_input::<T>().expect("tool arguments are JSON objects")
}

// Seed call shapes. The seed documents name some arguments differently from kenning; their names
// are read as serde aliases of kenning's own (`type` for `kind`, `types` and `memory_types` for
// `kinds`, `memory_id` for `urn`), which schemars leaves out of the schemas, so tools/list does
// not grow. The README's "Coming from another memory server" tables list them.

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkArg {
    /// URN of the linked memory.
    pub target: String,
    /// The link's meaning, e.g. `supersedes`; default `relates-to`.
    pub relation: Option<String>,
}

impl From<LinkArg> for LinkInput {
    fn from(link: LinkArg) -> Self {
        LinkInput { target: link.target, relation: link.relation }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureArgs {
    /// The knowledge to remember, as markdown. Keep one idea per memory.
    pub content: String,
    /// Short searchable title; defaults to the content's first line.
    pub title: Option<String>,
    /// `episodic` (what happened), `semantic` (facts) or `procedural` (how-to); defaults by namespace.
    #[serde(alias = "type")]
    pub kind: Option<String>,
    /// decisions, learnings, patterns, blockers, progress, context, tech-debt, apis, config, security, performance, testing, preferences, standards, or your own lower-case name; default `context`.
    pub namespace: Option<String>,
    /// Lower-case tags that help find the memory.
    pub tags: Option<Vec<String>>,
    /// Free-form category within the namespace, e.g. `debugging-lesson`.
    pub category: Option<String>,
    /// direct-observation, told-by-user, tool-result, inference or model-generated (default).
    pub source: Option<String>,
    /// How sure you are, 0 to 1; defaults by source.
    pub confidence: Option<f64>,
    /// How important it is, 0 to 1; default 0.5.
    pub salience: Option<f64>,
    /// When the remembered thing happened (RFC 3339 or YYYY-MM-DD), if not now.
    pub event_time: Option<String>,
    /// Links to related memories.
    pub links: Option<Vec<LinkArg>>,
    /// Caller metadata as string key/values.
    pub metadata: Option<BTreeMap<String, String>>,
    /// `project` (default inside a git repository), `user`, or a full domain such as `org:acme`.
    pub domain: Option<String>,
}

impl CaptureArgs {
    pub fn into_input(self) -> (CaptureInput, Option<String>) {
        let input = CaptureInput {
            content: self.content,
            title: self.title,
            kind: self.kind,
            namespace: self.namespace,
            tags: self.tags.unwrap_or_default(),
            category: self.category,
            source: self.source,
            confidence: self.confidence,
            salience: self.salience,
            event_time: self.event_time,
            links: self.links.unwrap_or_default().into_iter().map(LinkInput::from).collect(),
            metadata: self.metadata.unwrap_or_default(),
            author: None,
        };
        (input, self.domain)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// What you are looking for; a time it names ("last May", "yesterday") ranks memories from then first.
    pub query: String,
    /// Results per page, 1 to 100; default 10.
    pub limit: Option<usize>,
    /// `next_cursor` from the previous page.
    pub cursor: Option<String>,
    /// Token budget for the whole response (estimate); default 4000.
    pub max_tokens: Option<usize>,
    /// `light` (title, snippet, URN; default) or `full` (content included).
    pub detail: Option<String>,
    /// Only these kinds: episodic, semantic, procedural.
    #[serde(alias = "types", alias = "memory_types")]
    pub kinds: Option<Vec<String>>,
    /// Only these namespaces.
    pub namespaces: Option<Vec<String>>,
    /// Only memories carrying all of these tags.
    pub tags: Option<Vec<String>>,
    /// Only these domains (`project`, `user`, `org`); default all.
    pub domains: Option<Vec<String>>,
    /// Only memories that happened at or after this time (RFC 3339 or YYYY-MM-DD).
    pub since: Option<String>,
    /// Only memories that happened at or before this time.
    pub until: Option<String>,
    /// Only memories whose confidence now (after decay and evidence) is at least this, 0 to 1.
    pub min_confidence: Option<f64>,
    /// Also return dormant memories, whose confidence has decayed under the dormancy threshold.
    pub include_dormant: Option<bool>,
    /// Only memories captured on this git branch.
    pub branch: Option<String>,
    /// Only memories about this file or folder (metadata `file`/`files` or the text), relative to the repository root.
    pub file: Option<String>,
    /// Reference time for relative times in the query ("yesterday", "since March"); default now.
    pub as_of: Option<String>,
}

impl From<RecallArgs> for RecallRequest {
    fn from(args: RecallArgs) -> Self {
        RecallRequest {
            query: args.query,
            limit: args.limit,
            cursor: args.cursor,
            max_tokens: args.max_tokens,
            detail: args.detail,
            kinds: args.kinds.unwrap_or_default(),
            namespaces: args.namespaces.unwrap_or_default(),
            tags: args.tags.unwrap_or_default(),
            domains: args.domains.unwrap_or_default(),
            since: args.since,
            until: args.until,
            min_confidence: args.min_confidence,
            branch: args.branch,
            file: args.file,
            as_of: args.as_of,
            include_dormant: args.include_dormant.unwrap_or(false),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UrnArgs {
    /// The memory's URN, `kenning://{domain}/{namespace}/{id}`.
    #[serde(alias = "memory_id")]
    pub urn: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteArgs {
    /// The URN of the project or user memory to share, `kenning://{domain}/{namespace}/{id}`.
    pub urn: String,
    /// The domain to copy it into: `org` (the default) or `org:{org-id}`.
    pub to: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonArgs {
    /// The memory's URN, `kenning://{domain}/{namespace}/{id}`.
    #[serde(alias = "memory_id")]
    pub urn: String,
    /// Why, in a sentence; kept in the memory's history.
    pub reason: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    /// The memory's URN, `kenning://{domain}/{namespace}/{id}`.
    #[serde(alias = "memory_id")]
    pub urn: String,
    /// Why it changes, in a sentence; kept with the superseded version.
    pub reason: String,
    /// New title.
    pub title: Option<String>,
    /// New content (replaces the old).
    pub content: Option<String>,
    /// New kind: episodic, semantic or procedural.
    pub kind: Option<String>,
    /// New tags (replace the old).
    pub tags: Option<Vec<String>>,
    /// New category.
    pub category: Option<String>,
    /// New source.
    pub source: Option<String>,
    /// New confidence, 0 to 1.
    pub confidence: Option<f64>,
    /// New salience, 0 to 1.
    pub salience: Option<f64>,
    /// New event time (RFC 3339 or YYYY-MM-DD).
    pub event_time: Option<String>,
    /// New links (replace the old).
    pub links: Option<Vec<LinkArg>>,
    /// New metadata (replaces the old).
    pub metadata: Option<BTreeMap<String, String>>,
}

impl UpdateArgs {
    pub fn into_input(self) -> (String, UpdateInput) {
        let input = UpdateInput {
            reason: self.reason,
            title: self.title,
            content: self.content,
            kind: self.kind,
            tags: self.tags,
            category: self.category,
            source: self.source,
            confidence: self.confidence,
            salience: self.salience,
            event_time: self.event_time,
            links: self.links.map(|links| links.into_iter().map(LinkInput::from).collect()),
            metadata: self.metadata,
        };
        (self.urn, input)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}
