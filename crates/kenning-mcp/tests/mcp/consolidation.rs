//! `memory_consolidate` (the `dynamics` toolset) through the real line transport, over a SQLite
//! store with the built-in embedder: a run, its record, a rollback, and the refusals.

use std::sync::Arc;

use serde_json::json;

use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::{CaptureInput, Domain, Embedder, MemoryStore};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_mcp::{KenningServer, ServerOptions};
use kenning_sqlite::SqliteStore;

use crate::session::Session;

fn server(dir: &tempfile::TempDir, embedder: Option<Arc<dyn Embedder>>, toolsets: &[&str], read_only: bool) -> (KenningServer, Arc<MemoryService>) {
    let store = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let memory_store: Arc<dyn MemoryStore> = store.clone();
    let memory = Arc::new(MemoryService::new(vec![DomainStore { domain: Domain::User, store: memory_store }], embedder));
    let decision_store: Arc<dyn DecisionStore> = store;
    let decisions = DecisionService::new(memory.clone(), vec![DecisionDomain { domain: Domain::User, store: decision_store }], ModuleList::default());
    let options = ServerOptions { toolsets: Some(toolsets.iter().map(|name| (*name).to_owned()).collect()), read_only };
    (KenningServer::new(memory.clone(), Arc::new(decisions), &options).unwrap(), memory)
}

#[test]
fn the_dynamics_toolset_is_opt_in_and_read_only_keeps_the_listing_only() {
    let dir = tempfile::tempdir().unwrap();
    let names = |toolsets: &[&str], read_only: bool| {
        server(&dir, None, toolsets, read_only).0.tools().into_iter().map(|tool| tool.name.into_owned()).collect::<Vec<_>>()
    };
    assert!(!names(&["memory"], false).contains(&"memory_consolidate".to_owned()));
    let mut dynamics = names(&["dynamics"], false);
    dynamics.sort();
    assert_eq!(dynamics, ["memory_consolidate", "memory_contradictions", "memory_introspect", "memory_resolve_truth"]);
    let mut read_only = names(&["dynamics"], true);
    read_only.sort();
    assert_eq!(read_only, ["memory_contradictions", "memory_introspect"], "consolidating and resolving write, so read-only leaves them out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_consolidate_runs_records_and_rolls_back_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap());
    let (server, memory) = server(&dir, Some(embedder), &["memory", "dynamics"], false);
    for n in 0..3 {
        let content = format!("The login integration test failed on CI because the session cookie was not set before the redirect (run {n}).");
        memory.capture(CaptureInput { content, namespace: Some("testing".into()), kind: Some("episodic".into()), ..CaptureInput::default() }, None).unwrap();
    }
    let mut session = Session::start(server, "test").await;

    let plan = session.call_tool("memory_consolidate", json!({"dry_run": true})).await.unwrap();
    assert_eq!((plan["status"].as_str(), plan.get("runId")), (Some("dry_run"), None), "{plan}");

    let run = session.call_tool("memory_consolidate", json!({"min_cluster_size": 3, "similarity_threshold": 0.8})).await.unwrap();
    assert_eq!(run["status"], "completed");
    assert_eq!((run["episodesEvaluated"].as_u64(), run["clustersFound"].as_u64(), run["principlesExtracted"].as_u64()), (Some(3), Some(1), Some(1)), "{run}");
    assert_eq!(run["llm"]["status"], "not_configured", "{run}");
    assert!(run["llm"]["fallback"].as_str().unwrap().starts_with("extractive"));
    let health = session.call_tool("memory_introspect", json!({})).await.unwrap();
    assert_eq!((health["semantic"].as_u64(), health["totalConsolidationRuns"].as_u64()), (Some(1), Some(1)), "{health}");
    assert_eq!(health["links_by_relation"]["derived-from"], 3, "{health}");
    assert!(health["lastConsolidation"].is_string(), "{health}");
    let unknown = session.call_tool("memory_introspect", json!({"domain": "orgg"})).await.unwrap_err();
    assert!(unknown.to_string().contains("domain"), "{unknown}");
    let run_id = run["runId"].as_str().unwrap().to_owned();

    let combined = session.call_tool("memory_consolidate", json!({"rollback": run_id, "dry_run": true})).await.unwrap_err();
    assert!(combined.to_string().contains("cannot be combined"), "{combined}");

    let rolled = session.call_tool("memory_consolidate", json!({"rollback": run_id})).await.unwrap();
    assert_eq!(rolled["status"], "rolled_back");
    let principle = memory.get(run["created"][0].as_str().unwrap()).unwrap();
    assert_eq!(principle.status, "forgotten");

    let again = session.call_tool("memory_consolidate", json!({"rollback": run_id})).await.unwrap_err();
    assert!(again.to_string().contains("already rolled back"), "a second rollback is refused: {again}");
    let bad = session.call_tool("memory_consolidate", json!({"similarity_threshold": 2})).await.unwrap_err();
    assert!(bad.to_string().contains("similarity_threshold"), "{bad}");
}
