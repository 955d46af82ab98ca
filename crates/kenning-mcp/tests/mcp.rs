//! The MCP surface in process: the tools/list snapshot, toolset selection and resource reads;
//! the planning and dynamics toolsets (`mcp/planning.rs`, `mcp/consolidation.rs`) and the fuzz
//! test (`mcp/fuzz.rs`) through one client session (`mcp/session.rs`). End-to-end tests with a
//! real client live in the `kenning` crate.

use std::sync::Arc;

use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_mcp::resources;
use kenning_mcp::{KenningServer, ServerOptions};
use kenning_sqlite::SqliteStore;

#[path = "mcp/consolidation.rs"]
mod consolidation;
#[path = "mcp/fuzz.rs"]
mod fuzz;
#[path = "mcp/planning.rs"]
mod planning;
#[path = "mcp/session.rs"]
mod session;

fn service(dir: &tempfile::TempDir) -> Arc<MemoryService> {
    services(dir).0
}

/// The memory and decision services over one user store in `dir`.
fn services(dir: &tempfile::TempDir) -> (Arc<MemoryService>, Arc<DecisionService>) {
    let store = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let memory_store: Arc<dyn MemoryStore> = store.clone();
    let memory = Arc::new(MemoryService::new(vec![DomainStore { domain: Domain::User, store: memory_store }], None));
    let decision_store: Arc<dyn DecisionStore> = store;
    let decisions = DecisionService::new(memory.clone(), vec![DecisionDomain { domain: Domain::User, store: decision_store }], ModuleList::default());
    (memory, Arc::new(decisions))
}

fn server(dir: &tempfile::TempDir, options: &ServerOptions) -> Result<KenningServer, kenning_core::FieldError> {
    let (memory, decisions) = services(dir);
    KenningServer::new(memory, decisions, options)
}

fn tool_names(server: &KenningServer) -> Vec<String> {
    server.tools().into_iter().map(|tool| tool.name.into_owned()).collect()
}

/// The tools/list policy (ARCHITECTURE.md, "The tools/list policy"): what a model sees of a tool
/// is its name, description and input schema (the Anthropic and OpenAI tool formats carry no
/// output schema), and that is what an agent's context pays for, every turn of every session.
/// Every tool's model-visible part stays under this.
const MOST_VISIBLE_PER_TOOL: usize = 2_500;
/// The default toolset's model-visible part stays under this: room for about three more tools
/// of the memory tools' size before the default must be split.
const MOST_VISIBLE_BY_DEFAULT: usize = 12_000;
/// The default tools/list as sent, output schemas included, stays under this.
const MOST_BYTES_BY_DEFAULT: usize = 32_000;

/// The bytes of each tool's model-visible part (name, description, input schema), by name.
fn model_visible(tools: &serde_json::Value) -> Vec<(String, usize)> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            let visible = serde_json::json!({"name": tool["name"], "description": tool["description"], "inputSchema": tool["inputSchema"]});
            (tool["name"].as_str().unwrap_or_default().to_owned(), serde_json::to_string(&visible).unwrap().len())
        })
        .collect()
}

/// Every tool whose model-visible part is over [`MOST_VISIBLE_PER_TOOL`], with its size.
fn over_the_tool_budget(visible: &[(String, usize)]) -> Vec<&(String, usize)> {
    visible.iter().filter(|(_, bytes)| *bytes >= MOST_VISIBLE_PER_TOOL).collect()
}

#[test]
fn tools_list_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(&dir, &ServerOptions::default()).unwrap();
    let tools = serde_json::to_value(server.tools()).unwrap();
    let bytes = serde_json::to_string(&tools).unwrap().len();
    insta::assert_json_snapshot!("tools_list", tools);
    // The default tool list goes into every agent's context: keep it lean.
    let visible = model_visible(&tools);
    let visible_bytes: usize = visible.iter().map(|(_, bytes)| bytes).sum();
    println!("default: tools/list {bytes} bytes, model-visible {visible_bytes} bytes");
    assert!(over_the_tool_budget(&visible).is_empty(), "tools over the per-tool budget: {:?}", over_the_tool_budget(&visible));
    assert!(visible_bytes < MOST_VISIBLE_BY_DEFAULT, "the default tools' model-visible part grew to {visible_bytes} bytes");
    assert!(bytes < MOST_BYTES_BY_DEFAULT, "tools/list grew to {bytes} bytes");
}

#[test]
fn prompts_list_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = serde_json::to_value(server(&dir, &ServerOptions::default()).unwrap().prompts()).unwrap();
    insta::assert_json_snapshot!("prompts_list", prompts);
    let read_only = server(&dir, &ServerOptions { read_only: true, ..ServerOptions::default() }).unwrap().prompts();
    let names: Vec<&str> = read_only.iter().map(|prompt| prompt.name.as_str()).collect();
    assert_eq!(names, ["session_start"], "read-only lists only the prompt that does not write");
}

fn every_toolset() -> ServerOptions {
    ServerOptions { toolsets: Some(kenning_mcp::TOOLSETS.iter().map(|name| (*name).to_owned()).collect()), ..ServerOptions::default() }
}

/// Every toolset enabled on request: its tools/list as a snapshot, and bounds on its size. A
/// model sees each tool's name, description and input schema (the Anthropic and OpenAI tool
/// formats carry no output schema): that part is what an agent's context pays for. The output
/// schemas describe every returned field for clients that validate them. The sizes are printed
/// with `--nocapture`.
#[test]
fn toolset_tools_list_snapshots() {
    // (toolset, tools, most bytes of tools/list, most bytes a model sees)
    const TOOLSETS: &[(&str, usize, usize, usize)] = &[
        ("decisions", 10, 44_000, 12_500),
        ("sync", 1, 8_000, 2_000),
        ("org", 1, 8_000, 2_000),
        ("repo", 4, 24_000, 6_000),
        ("test", 4, 24_000, 6_000),
        ("docs", 2, 24_000, 3_000),
        ("workflows", 5, 16_000, 4_000),
        ("protocols", 4, 12_000, 3_000),
        ("dynamics", 4, 14_000, 4_500),
    ];
    let covered: Vec<&str> = TOOLSETS.iter().map(|(toolset, ..)| *toolset).chain(kenning_mcp::DEFAULT_TOOLSETS.iter().copied()).collect();
    assert!(kenning_mcp::TOOLSETS.iter().all(|toolset| covered.contains(toolset)), "a toolset without a snapshot");
    let dir = tempfile::tempdir().unwrap();
    for &(toolset, count, most_bytes, most_visible) in TOOLSETS {
        assert!(!kenning_mcp::DEFAULT_TOOLSETS.contains(&toolset), "{toolset} is enabled by default");
        let options = ServerOptions { toolsets: Some(vec![toolset.into()]), ..ServerOptions::default() };
        let tools = serde_json::to_value(server(&dir, &options).unwrap().tools()).unwrap();
        assert_eq!(tools.as_array().unwrap().len(), count, "{toolset}");
        insta::assert_json_snapshot!(format!("tools_list_{toolset}"), tools);
        let bytes = serde_json::to_string(&tools).unwrap().len();
        let visible: Vec<serde_json::Value> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| serde_json::json!({"name": tool["name"], "description": tool["description"], "inputSchema": tool["inputSchema"]}))
            .collect();
        let visible_bytes = serde_json::to_string(&visible).unwrap().len();
        let per_tool = model_visible(&tools);
        assert!(over_the_tool_budget(&per_tool).is_empty(), "{toolset}: tools over the per-tool budget: {:?}", over_the_tool_budget(&per_tool));
        println!("{toolset}: tools/list {bytes} bytes, model-visible {visible_bytes} bytes");
        assert!(bytes < most_bytes, "the {toolset} toolset grew to {bytes} bytes");
        assert!(visible_bytes < most_visible, "the {toolset} toolset's model-visible part grew to {visible_bytes} bytes");
    }
}

#[test]
fn every_tool_has_title_one_sentence_description_schemas_and_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(&dir, &every_toolset()).unwrap();
    for tool in server.tools() {
        let name = tool.name.as_ref();
        assert!(tool.title.is_some(), "{name} has no title");
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.ends_with('.') && description.matches(". ").count() == 0, "{name}: `{description}` is not one sentence");
        assert!(tool.output_schema.is_some(), "{name} has no output schema");
        let annotations = tool.annotations.as_ref().unwrap_or_else(|| panic!("{name} has no annotations"));
        assert!(annotations.read_only_hint.is_some() && annotations.destructive_hint.is_some() && annotations.idempotent_hint.is_some(), "{name}");
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name} must use underscores");
    }
}

/// Every `format` keyword in a schema, with its JSON pointer. A property named `format` holds a
/// schema, not a string, and is walked into rather than reported.
fn formats(schema: &serde_json::Value, pointer: &str, found: &mut Vec<(String, String)>) {
    match schema {
        serde_json::Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("format", serde_json::Value::String(format)) => found.push((format!("{pointer}/format"), format.clone())),
                    _ => formats(value, &format!("{pointer}/{key}"), found),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                formats(item, &format!("{pointer}/{index}"), found);
            }
        }
        _ => {}
    }
}

/// Regression: output schemas carried schemars' `uint`, `uint32`, `uint64` and `double`, which
/// JSON Schema does not define (188 validator warnings in a conformance run).
#[test]
fn tool_schemas_use_standard_json_schema_formats_only() {
    // JSON Schema 2020-12, Validation section 7.3.
    const STANDARD: &[&str] = &[
        "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6", "uri",
        "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex",
    ];
    let dir = tempfile::tempdir().unwrap();
    let tools = server(&dir, &every_toolset()).unwrap().tools();
    assert!(tools.len() > 8, "every toolset is walked");
    let mut refused = Vec::new();
    for tool in &tools {
        let schemas = [("inputSchema", Some(&tool.input_schema)), ("outputSchema", tool.output_schema.as_ref())];
        for (kind, schema) in schemas {
            let Some(schema) = schema else { continue };
            let mut found = Vec::new();
            formats(&serde_json::Value::Object(schema.as_ref().clone()), "", &mut found);
            refused.extend(
                found.into_iter().filter(|(_, format)| !STANDARD.contains(&format.as_str())).map(|(at, format)| format!("{} {kind}{at}: {format}", tool.name)),
            );
        }
    }
    assert!(refused.is_empty(), "non-standard formats:\n{}", refused.join("\n"));
}

#[test]
fn read_only_drops_every_tool_that_writes() {
    let dir = tempfile::tempdir().unwrap();
    let memory_only = server(&dir, &ServerOptions { read_only: true, ..ServerOptions::default() }).unwrap();
    assert_eq!(tool_names(&memory_only), ["memory_get", "memory_history", "memory_recall", "memory_status"]);
    let everything = server(&dir, &ServerOptions { read_only: true, ..every_toolset() }).unwrap();
    let names = tool_names(&everything);
    assert!(names.iter().all(|name| !name.contains("capture") && !name.contains("record") && !name.contains("update")), "{names:?}");
    assert!(names.contains(&"decision_get".to_owned()) && names.contains(&"decision_query".to_owned()), "{names:?}");
}

#[test]
fn unknown_toolsets_are_refused_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let options = ServerOptions { toolsets: Some(vec!["memroy".into()]), ..ServerOptions::default() };
    let Err(error) = server(&dir, &options) else { panic!("an unknown toolset was accepted") };
    assert_eq!((error.field.as_str(), error.received.clone()), ("toolsets", serde_json::json!("memroy")));
    assert!(error.suggestion.contains("did you mean `memory`"), "{}", error.suggestion);
}

#[test]
fn resources_read_memories_namespaces_domains_and_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let capture = |content: &str, namespace: &str, kind: &str| {
        memory
            .capture(
                CaptureInput { content: content.into(), namespace: Some(namespace.into()), kind: Some(kind.into()), ..CaptureInput::default() },
                None,
            )
            .unwrap()
            .urn
    };
    let decision = capture("Use PostgreSQL", "decisions", "episodic");
    capture("Pool size 20", "learnings", "semantic");

    let read = |uri: &str| -> serde_json::Value { serde_json::from_str(&resources::read(&memory, uri).unwrap()).unwrap() };
    assert_eq!(read(&decision)["content"], "Use PostgreSQL");
    let namespace = read("kenning://user/decisions");
    assert_eq!((namespace["total"].as_u64(), namespace["memories"][0]["urn"].as_str()), (Some(1), Some(decision.as_str())));
    let domain = read("kenning://user");
    assert_eq!(domain["namespaces"].as_array().unwrap().len(), 2);
    let semantic = read("kenning://user?kind=semantic");
    assert_eq!(semantic["memories"][0]["title"], "Pool size 20");
    assert_eq!(read(resources::STATS_URI)["total_memories"], 2);
    // Seed 003's cross-domain listings by kind, and kenning's own form of them.
    let listed = read("memory://semantic/list");
    assert_eq!((listed["uri"].as_str(), listed["total"].as_u64(), listed["memories"][0]["title"].as_str()), (Some("kenning://semantic"), Some(1), Some("Pool size 20")));
    assert_eq!(read("kenning://episodic")["memories"][0]["urn"], decision.as_str());
    assert_eq!(read("kenning://procedural")["total"], 0);
    assert_eq!(read("memory://stats")["total_memories"], 2);

    for (uri, expected) in [
        ("kenning://user/decisions/nope", "NotFound"),
        ("kenning://org:acme", "NotFound"),
        ("kenning://user?kind=feelings", "Invalid"),
        ("kenning://user?page=2", "Invalid"),
        ("memory://feelings/list", "Invalid"),
        ("kenning://semantic?kind=episodic", "Invalid"),
    ] {
        let error = resources::read(&memory, uri).unwrap_err();
        assert!(format!("{error:?}").starts_with(expected), "{uri}: {error:?}");
    }

    let (page, next) = resources::list_page(&memory, &[], 0).unwrap();
    let uris: Vec<&str> = page.iter().map(|resource| resource.uri.as_str()).collect();
    assert!(uris.contains(&"kenning://stats") && uris.contains(&"kenning://user/decisions") && uris.contains(&decision.as_str()), "{uris:?}");
    assert!(uris.contains(&"kenning://semantic") && uris.contains(&"kenning://episodic") && !uris.contains(&"kenning://procedural"), "{uris:?}");
    assert_eq!(next, None);
}

#[test]
fn resource_listing_pages_cover_every_memory_once() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let inputs = (0..250).map(|i| CaptureInput { content: format!("note {i}"), ..CaptureInput::default() }).collect();
    memory.capture_many(inputs, None).unwrap();
    let mut seen = Vec::new();
    let mut offset = Some(0);
    while let Some(start) = offset {
        let (page, next) = resources::list_page(&memory, &[], start).unwrap();
        assert!(page.len() <= resources::PAGE_SIZE);
        seen.extend(page.into_iter().map(|resource| resource.uri.clone()));
        offset = next;
    }
    let memories = seen.iter().filter(|uri| uri.matches('/').count() == 4).count();
    assert_eq!(memories, 250);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "a resource was listed twice");
}

/// Regression: a cancelled request kept a core busy until its work ended (75 s after
/// `notifications/cancelled`). Work started by `blocking` inside `interruptible` sees the
/// interrupt when the client cancels, and stops.
#[test]
fn a_cancelled_call_stops_its_blocking_work() {
    use kenning_mcp::error::{ToolError, blocking, interruptible};
    use std::time::{Duration, Instant};

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
        let started = Instant::now();
        let work = blocking(move || {
            // A loop that would run for a minute unless called off.
            while started.elapsed() < Duration::from_secs(60) {
                if kenning_core::interrupt::interrupted() {
                    return Err(kenning_engine::Error::Interrupted);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        });
        let call = tokio::spawn(interruptible(
            work,
            async move {
                let _ = cancelled.await;
            },
            kenning_mcp::error::REQUEST_DEADLINE,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.send(()).unwrap();
        // The loop returns `Interrupted` only when it saw the interrupt; left to run, it ends
        // with `Ok`, which fails below: no wall-clock bound is needed to tell the two apart.
        let outcome = call.await.unwrap();
        match outcome {
            Err(ToolError::Failed(body)) => assert_eq!(body["error"], "interrupted", "{body}"),
            other => panic!("expected an interrupted result, got {other:?}"),
        }
    });
}

/// Regression: `test_run`, `test_lint` and `test_typecheck` accept runs of up to ten minutes,
/// yet every call was cut off at the 30 s request deadline.
#[test]
fn runs_of_the_project_code_outlast_their_longest_timeout() {
    use kenning_mcp::error::{REQUEST_DEADLINE, deadline_of};
    for tool in ["test_run", "test_lint", "test_typecheck"] {
        assert!(deadline_of(tool) > kenning_engine::code::MAX_TIMEOUT, "{tool}");
    }
    for tool in ["memory_recall", "test_suggest", "repo_search_patterns", "docs_search"] {
        assert_eq!(deadline_of(tool), REQUEST_DEADLINE, "{tool}");
    }
}
