//! `memory_consolidate` (the `dynamics` toolset) through the real line transport, over a SQLite
//! store with the built-in embedder: a run, its record, a rollback, and the refusals.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::{CaptureInput, Domain, Embedder, MemoryStore};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_mcp::{KenningServer, ServerOptions};
use kenning_sqlite::SqliteStore;

struct Session {
    read: BufReader<ReadHalf<DuplexStream>>,
    write: WriteHalf<DuplexStream>,
    next_id: u64,
}

impl Session {
    async fn start(server: KenningServer) -> Session {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_end);
        tokio::spawn(async move {
            let _ = kenning_mcp::serve_lines(server, server_read, server_write).await;
        });
        let (read, write) = tokio::io::split(client);
        let mut session = Session { read: BufReader::new(read), write, next_id: 0 };
        let hello = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}});
        assert!(session.request("initialize", hello).await.get("result").is_some());
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        session
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        let mut line = String::new();
        loop {
            line.clear();
            let read = tokio::time::timeout(Duration::from_secs(60), self.read.read_line(&mut line)).await.expect("an answer within 60 s");
            assert!(read.unwrap() > 0, "the server closed the session");
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer.get("id") == Some(&json!(id)) {
                return answer;
            }
        }
    }

    async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.write.write_all(&line).await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// Calls `memory_consolidate`: its structured result, or the error (a JSON-RPC error, or a
    /// result marked `isError`).
    async fn consolidate(&mut self, arguments: Value) -> Result<Value, Value> {
        let answer = self.request("tools/call", json!({"name": "memory_consolidate", "arguments": arguments})).await;
        let Some(result) = answer.get("result") else { return Err(answer["error"].clone()) };
        if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
            return Err(result.clone());
        }
        Ok(result["structuredContent"].clone())
    }
}

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
fn the_dynamics_toolset_is_opt_in_and_read_only_drops_consolidation() {
    let dir = tempfile::tempdir().unwrap();
    let names = |toolsets: &[&str], read_only: bool| {
        server(&dir, None, toolsets, read_only).0.tools().into_iter().map(|tool| tool.name.into_owned()).collect::<Vec<_>>()
    };
    assert!(!names(&["memory"], false).contains(&"memory_consolidate".to_owned()));
    assert_eq!(names(&["dynamics"], false), ["memory_consolidate"]);
    assert!(names(&["dynamics"], true).is_empty(), "consolidation writes, so read-only leaves it out");
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
    let mut session = Session::start(server).await;

    let plan = session.consolidate(json!({"dry_run": true})).await.unwrap();
    assert_eq!((plan["status"].as_str(), plan.get("runId")), (Some("dry_run"), None), "{plan}");

    let run = session.consolidate(json!({"min_cluster_size": 3, "similarity_threshold": 0.8})).await.unwrap();
    assert_eq!(run["status"], "completed");
    assert_eq!((run["episodesEvaluated"].as_u64(), run["clustersFound"].as_u64(), run["principlesExtracted"].as_u64()), (Some(3), Some(1), Some(1)), "{run}");
    assert_eq!(run["llm"]["status"], "not_configured", "{run}");
    assert!(run["llm"]["fallback"].as_str().unwrap().starts_with("extractive"));
    let run_id = run["runId"].as_str().unwrap().to_owned();

    let combined = session.consolidate(json!({"rollback": run_id, "dry_run": true})).await.unwrap_err();
    assert!(combined.to_string().contains("cannot be combined"), "{combined}");

    let rolled = session.consolidate(json!({"rollback": run_id})).await.unwrap();
    assert_eq!(rolled["status"], "rolled_back");
    let principle = memory.get(run["created"][0].as_str().unwrap()).unwrap();
    assert_eq!(principle.status, "forgotten");

    let again = session.consolidate(json!({"rollback": run_id})).await.unwrap_err();
    assert!(again.to_string().contains("already rolled back"), "a second rollback is refused: {again}");
    let bad = session.consolidate(json!({"similarity_threshold": 2})).await.unwrap_err();
    assert!(bad.to_string().contains("similarity_threshold"), "{bad}");
}
