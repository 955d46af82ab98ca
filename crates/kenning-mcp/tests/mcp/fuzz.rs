//! Arbitrary JSON at every tool, resource and prompt of every toolset, through the real line
//! transport: no answer may be a panic (-32603) and every request must get a result or a
//! JSON-RPC error with its own id.
//!
//! Arguments are built from each tool's own input schema (its property names, with values of
//! any JSON type), from known-good values (URNs and decision ids that exist, cursors, times) and
//! from hostile ones (huge numbers, crafted cursors, long and non-ASCII strings), so that cases
//! get past the first check of a tool as well as fail it. `KENNING_FUZZ_CASES` sets the number of
//! cases (default 1,000).

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_mcp::{KenningServer, ServerOptions};
use kenning_sqlite::{Durability, SqliteStore};

use crate::session::Session;

/// What the cases are drawn from: each tool's argument names, and values known to exist.
struct Vocabulary {
    tools: Vec<Tool>,
    known: Vec<String>,
    /// Values that fit a property of this name, as an agent would send them.
    hints: BTreeMap<String, Vec<Value>>,
}

#[derive(Clone)]
struct Tool {
    name: String,
    /// The input schema's property names.
    keys: Vec<String>,
    required: Vec<String>,
    /// Each property's JSON type as the schema gives it (the first that is not `null`).
    types: BTreeMap<String, String>,
}

/// The JSON type a property schema names: `"string"`, or the first of `["string", "null"]`.
fn schema_type(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(name)) => name.clone(),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).find(|name| *name != "null").unwrap_or("string").to_owned(),
        _ => "string".to_owned(),
    }
}

fn start(runtime: &tokio::runtime::Runtime, dir: &tempfile::TempDir) -> (Session, Vocabulary) {
    let store = Arc::new(SqliteStore::open_with(&dir.path().join("user.db"), Durability::ProcessCrash).unwrap());
    let memory_store: Arc<dyn MemoryStore> = store.clone();
    // A small repository for the code toolsets, so that arbitrary paths meet the confinement.
    let repository = dir.path().join("repository");
    std::fs::create_dir_all(repository.join("src")).unwrap();
    std::fs::write(repository.join("README.md"), "# Fixture\n").unwrap();
    std::fs::write(repository.join("src/lib.rs"), "//! A library.\n\n/// Adds.\npub fn add(a: u8, b: u8) -> u8 { a + b }\n").unwrap();
    let memory = Arc::new(
        MemoryService::new(vec![DomainStore { domain: Domain::User, store: memory_store }], None).with_repository_root(Some(repository)),
    );
    let decision_store: Arc<dyn DecisionStore> = store;
    let decisions = Arc::new(DecisionService::new(
        memory.clone(),
        vec![DecisionDomain { domain: Domain::User, store: decision_store }],
        ModuleList::default(),
    ));
    let captured = memory
        .capture(CaptureInput { content: "Connection pool of 20 per service".into(), ..CaptureInput::default() }, None)
        .unwrap();
    let decision = decisions
        .capture(CaptureDecision {
            statement: "Use PostgreSQL for the orders service".into(),
            alternatives: Some(vec!["MongoDB".into()]),
            confidence: Some(0.8),
            module: Some("database".into()),
            ..CaptureDecision::default()
        }, None)
        .unwrap();
    let options = ServerOptions { toolsets: Some(kenning_mcp::TOOLSETS.iter().map(|name| (*name).to_owned()).collect()), read_only: false };
    let code = kenning_engine::CodeService::open(memory.clone(), decisions.clone(), &dir.path().join("code.db"), Default::default()).unwrap();
    let server = KenningServer::new(memory, decisions, &options).unwrap().with_code(Some(Arc::new(code)));
    let tools = server
        .tools()
        .into_iter()
        .map(|tool| {
            let keys = tool.input_schema.get("properties").and_then(Value::as_object).map(|properties| properties.keys().cloned().collect());
            let required = tool.input_schema.get("required").and_then(Value::as_array).map(|names| {
                names.iter().filter_map(Value::as_str).map(str::to_owned).collect()
            });
            let types = tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| properties.iter().map(|(key, schema)| (key.clone(), schema_type(schema))).collect())
                .unwrap_or_default();
            Tool { name: tool.name.into_owned(), keys: keys.unwrap_or_default(), required: required.unwrap_or_default(), types }
        })
        .collect();
    let session = runtime.block_on(async {
        let mut session = Session::start(server, "fuzz").await;
        session.request("logging/setLevel", json!({"level": "debug"})).await;
        session
    });
    let urn = captured.urn;
    let known = vec![
        urn.clone(),
        urn.replace("kenning://", "subcog://"),
        format!("{urn}/../../etc/passwd"),
        decision.decision_id.clone(),
        format!("kenning://user/decisions/{}", decision.decision_id),
        "kenning://user".into(),
        "kenning://user/decisions".into(),
        "kenning://stats".into(),
        "kenning://calibration/database".into(),
        "kenning://decisions?module=database&cursor=o5".into(),
        "kenning://anomalies".into(),
        "o0".into(),
        "o3e8".into(),
        "offffffffffffffff".into(),
        "o+1".into(),
        "2026-01-02T03:04:05Z".into(),
        "last May".into(),
        "database".into(),
        "decisions".into(),
        "semantic".into(),
        "success".into(),
        "ci_passed".into(),
        "positive".into(),
        "executed".into(),
        "full".into(),
        "org".into(),
        "user".into(),
        "module".into(),
        "guidance".into(),
        "all".into(),
        "Use Redis for the session cache of the API".into(),
        "the pool ran dry under load".into(),
        "connection pool".into(),
    ];
    let decision_id = decision.decision_id.clone();
    let hints: BTreeMap<String, Vec<Value>> = [
        ("urn", vec![json!(urn), json!(urn.replace("kenning://", "subcog://")), json!(format!("kenning://user/decisions/{decision_id}")), json!(format!("{urn}x"))]),
        ("decision_id", vec![json!(decision_id), json!("dec_0000000000000000000000000")]),
        ("module", vec![json!("database"), json!("api"), json!("payments")]),
        ("domain", vec![json!("user"), json!("org"), json!("project:app")]),
        ("domains", vec![json!(["user"]), json!(["user", "org"])]),
        ("mode", vec![json!("module"), json!("all"), json!("guidance")]),
        ("status", vec![json!("executed"), json!("completed"), json!("failed"), json!("pending")]),
        ("final_status", vec![json!("success"), json!("partial"), json!("failure")]),
        ("signal_type", vec![json!("ci_passed"), json!("incident"), json!("pr_merged")]),
        ("valence", vec![json!("positive"), json!("negative"), json!("neutral")]),
        ("alternatives", vec![json!(["MongoDB"]), json!(["A", "B"])]),
        ("statement", vec![json!("Use Redis for the session cache of the API"), json!("Retry the payment webhook with backoff")]),
        ("query", vec![json!("connection pool"), json!("redis cache"), json!("what did we decide last May"), json!("word ".repeat(5000))]),
        ("text", vec![json!("PostgreSQL orders"), json!("cache")]),
        ("content", vec![json!("The pool ran dry under load; raised it to 40."), json!("é".repeat(40000))]),
        ("notes", vec![json!("checked in staging"), json!("😀".repeat(1000))]),
        ("kinds", vec![json!(["semantic"]), json!(["episodic", "procedural"])]),
        ("namespaces", vec![json!(["decisions"]), json!(["learnings"])]),
        ("to", vec![json!("org")]),
    ]
    .into_iter()
    .map(|(key, values)| (key.to_owned(), values))
    .collect();
    (session, Vocabulary { tools, known, hints })
}

fn scalar(known: Vec<String>) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(-1.0), Just(1e308), Just(-1e-308), any::<f64>()]
            .prop_filter_map("JSON has no NaN or infinity", |number| serde_json::Number::from_f64(number).map(Value::Number)),
        any::<String>().prop_map(Value::String),
        "[a-z_]{0,12}".prop_map(Value::String),
        proptest::sample::select(known).prop_map(Value::String),
        (1usize..5000, proptest::sample::select(vec!["é", "😀", "a ", "x\u{0}", "\u{202e}", "word "])).prop_map(|(n, unit)| Value::String(unit.repeat(n))),
    ]
}

fn value(known: Vec<String>, keys: Vec<String>) -> impl Strategy<Value = Value> {
    scalar(known).prop_recursive(3, 24, 6, move |inner| {
        let keys = keys.clone();
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(proptest::sample::select(keys), inner, 0..6)
                .prop_map(|map: BTreeMap<String, Value>| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A value of the JSON type a property's schema names, from the known values where it is a
/// string: the kind of value an agent sends.
fn plausible(json_type: &str, known: Vec<String>) -> BoxedStrategy<Value> {
    let strings = proptest::sample::select(known);
    match json_type {
        "integer" => proptest::sample::select(vec![json!(0), json!(1), json!(3), json!(10), json!(100), json!(1001), json!(-1)]).boxed(),
        "number" => proptest::sample::select(vec![json!(0.0), json!(0.5), json!(0.9), json!(1.0), json!(1.5), json!(-0.1)]).boxed(),
        "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
        "array" => proptest::collection::vec(strings.prop_map(Value::String), 0..3).prop_map(Value::Array).boxed(),
        "object" => proptest::collection::btree_map("[a-z_]{1,8}", strings.prop_map(Value::String), 0..3)
            .prop_map(|map| Value::Object(map.into_iter().collect()))
            .boxed(),
        _ => prop_oneof![4 => strings.prop_map(Value::String), 1 => "[ -~]{0,40}".prop_map(Value::String)].boxed(),
    }
}

/// A tool call whose required arguments are all there, with plausible values, and some
/// optional ones: the cases that get past argument checking into the engine.
fn plausible_tool_call(tools: Vec<Tool>, known: Vec<String>, hints: BTreeMap<String, Vec<Value>>) -> impl Strategy<Value = (String, Value)> {
    (0..tools.len(), proptest::collection::vec(any::<prop::sample::Index>(), 0..4))
        .prop_flat_map(move |(tool, picks)| {
            let tool = tools[tool].clone();
            let mut keys = tool.required.clone();
            if !tool.keys.is_empty() {
                keys.extend(picks.iter().map(|pick| pick.get(&tool.keys).clone()));
            }
            keys.sort();
            keys.dedup();
            let values: Vec<BoxedStrategy<Value>> = keys
                .iter()
                .map(|key| {
                    let typed = plausible(tool.types.get(key).map_or("string", String::as_str), known.clone());
                    match hints.get(key) {
                        Some(values) => prop_oneof![3 => proptest::sample::select(values.clone()), 1 => typed].boxed(),
                        None => typed,
                    }
                })
                .collect();
            (Just(tool.name), Just(keys), values)
        })
        .prop_map(|(name, keys, values)| {
            let arguments: Map<String, Value> = keys.into_iter().zip(values).collect();
            ("tools/call".to_owned(), json!({"name": name, "arguments": arguments}))
        })
}

/// One request: a method and its params.
fn request(vocabulary: &Vocabulary) -> impl Strategy<Value = (String, Value)> {
    let known = vocabulary.known.clone();
    let mut names: Vec<String> = vocabulary.tools.iter().map(|tool| tool.name.clone()).collect();
    names.push("memory_nonexistent".into());
    let mut all_keys: Vec<String> = vocabulary.tools.iter().flat_map(|tool| tool.keys.clone()).collect();
    all_keys.extend(["query", "urn", "uri", "cursor", "name", "arguments", "x"].map(String::from));
    let tools: Vec<Tool> = vocabulary.tools.clone();
    let tool_call = (0..tools.len(), proptest::collection::vec(any::<prop::sample::Index>(), 0..8), value(known.clone(), all_keys.clone()))
        .prop_flat_map(move |(tool, picks, extra)| {
            let Tool { name, keys, .. } = tools[tool].clone();
            let chosen: Vec<String> = if keys.is_empty() { Vec::new() } else { picks.iter().map(|pick| pick.get(&keys).clone()).collect() };
            let values = proptest::collection::vec(value(known.clone(), keys.clone()), chosen.len());
            (Just(name), Just(chosen), values, Just(extra))
        })
        .prop_map(|(name, keys, values, extra)| {
            let mut arguments: Map<String, Value> = keys.into_iter().zip(values).collect();
            if let Value::Object(more) = extra {
                arguments.extend(more);
            }
            ("tools/call".to_owned(), json!({"name": name, "arguments": arguments}))
        });
    let known = vocabulary.known.clone();
    let raw_tool_call = (proptest::sample::select(names), value(known.clone(), all_keys.clone()))
        .prop_map(|(name, arguments)| ("tools/call".to_owned(), json!({"name": name, "arguments": arguments})));
    let resource = prop_oneof![
        proptest::sample::select(known.clone()).prop_map(Value::String),
        any::<String>().prop_map(|text| Value::String(format!("kenning://{text}"))),
        value(known.clone(), vec!["uri".into()]),
    ]
    .prop_map(|uri| ("resources/read".to_owned(), json!({"uri": uri})));
    let listing = (proptest::sample::select(vec!["resources/list", "resources/templates/list", "tools/list", "prompts/list"]), scalar(known.clone()))
        .prop_map(|(method, cursor)| (method.to_owned(), json!({"cursor": cursor})));
    let prompt = (
        proptest::sample::select(vec!["session_start", "capture_decision", "summarise_learnings", "nope"]),
        value(known.clone(), vec!["task".into(), "limit".into(), "decision".into(), "reason".into(), "alternatives".into(), "topic".into()]),
    )
        .prop_map(|(name, arguments)| ("prompts/get".to_owned(), json!({"name": name, "arguments": arguments})));
    let any_params = (proptest::sample::select(vec!["tools/call", "resources/read", "prompts/get", "resources/subscribe", "completion/complete"]), value(known, all_keys))
        .prop_map(|(method, params)| (method.to_owned(), params));
    let plausible = plausible_tool_call(vocabulary.tools.clone(), vocabulary.known.clone(), vocabulary.hints.clone());
    prop_oneof![6 => plausible, 4 => tool_call, 1 => raw_tool_call, 2 => resource, 1 => listing, 1 => prompt, 1 => any_params]
}

fn cases() -> u32 {
    std::env::var("KENNING_FUZZ_CASES").ok().and_then(|text| text.parse().ok()).unwrap_or(1000)
}

#[test]
fn fuzz_every_tool_resource_and_prompt_gets_an_answer_and_never_a_panic() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (session, vocabulary) = start(&runtime, &dir);
    let session = std::cell::RefCell::new(session);
    // How the answers fell out; checked below to show the cases reach past argument checking.
    let tally: std::cell::RefCell<BTreeMap<String, usize>> = std::cell::RefCell::default();
    let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
    let started = std::time::Instant::now();
    let outcome = runner.run(&request(&vocabulary), |(method, params)| {
        let answer = runtime.block_on(session.borrow_mut().request(&method, params.clone()));
        let kind = match (answer.get("result"), answer.get("error")) {
            (Some(result), _) if result.get("isError") == Some(&Value::Bool(true)) => "tool error result".to_owned(),
            (Some(_), _) => "result".to_owned(),
            (_, Some(error)) => format!("JSON-RPC error {}", error.get("code").unwrap_or(&Value::Null)),
            _ => "other".to_owned(),
        };
        *tally.borrow_mut().entry(format!("{method}: {kind}")).or_default() += 1;
        match (answer.get("result"), answer.get("error")) {
            (Some(_), None) => Ok(()),
            (None, Some(error)) => {
                let code = error.get("code").and_then(Value::as_i64);
                if code == Some(-32603) {
                    Err(TestCaseError::fail(format!("internal error for {method} {params}: {error}")))
                } else if code.is_none() {
                    Err(TestCaseError::fail(format!("an error without a code for {method} {params}: {error}")))
                } else {
                    Ok(())
                }
            }
            _ => Err(TestCaseError::fail(format!("neither a result nor an error for {method} {params}: {answer}"))),
        }
    });
    eprintln!("fuzz: {} cases in {:.1} s", cases(), started.elapsed().as_secs_f64());
    for (kind, count) in tally.borrow().iter() {
        eprintln!("fuzz:   {count:>7}  {kind}");
    }
    if let Err(error) = outcome {
        panic!("{error}");
    }
    // A tool call answered by a result, failed or not, got past argument checking into the
    // engine; the plausible calls (6 in 16 of the cases) are there to make that common.
    let reached: usize = tally.borrow().iter().filter(|(kind, _)| kind.starts_with("tools/call: ") && !kind.contains("JSON-RPC")).map(|(_, count)| count).sum();
    let total = cases() as usize;
    assert!(total < 100 || reached * 10 >= total, "only {reached} of {total} cases got past argument checking");
}
