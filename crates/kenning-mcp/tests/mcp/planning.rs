//! The `workflows` and `protocols` toolsets in process (their snapshots are with the others in
//! `mcp.rs`), and the workflow service over a real SQLite store, reopened as a restarted server
//! would.

use std::sync::Arc;

use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::workflow::{CreateWorkflow, StepInput, StepUpdate};
use kenning_core::{CaptureInput, Domain, MemoryStore, PurgeMode};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService, WorkflowQuery, WorkflowService};
use kenning_mcp::{KenningServer, ServerOptions};
use kenning_sqlite::SqliteStore;

fn memory(dir: &tempfile::TempDir) -> Arc<MemoryService> {
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    Arc::new(MemoryService::new(vec![DomainStore { domain: Domain::User, store }], None))
}

fn server(dir: &tempfile::TempDir, options: &ServerOptions) -> KenningServer {
    let store = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let memory_store: Arc<dyn MemoryStore> = store.clone();
    let memory = Arc::new(MemoryService::new(vec![DomainStore { domain: Domain::User, store: memory_store }], None));
    let decision_store: Arc<dyn DecisionStore> = store;
    let decisions = DecisionService::new(memory.clone(), vec![DecisionDomain { domain: Domain::User, store: decision_store }], ModuleList::default());
    KenningServer::new(memory, Arc::new(decisions), options).unwrap()
}

#[test]
fn the_protocols_toolset_is_not_in_the_default_list_and_read_only_keeps_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let names = |options: ServerOptions| server(&dir, &options).tools().into_iter().map(|tool| tool.name.into_owned()).collect::<Vec<_>>();
    assert!(!names(ServerOptions::default()).iter().any(|name| name.starts_with("protocol_")));
    assert_eq!(names(ServerOptions { toolsets: Some(vec!["protocols".into()]), read_only: true }), ["protocol_list"]);
}

#[test]
fn the_workflows_toolset_is_not_in_the_default_list_and_read_only_keeps_the_readers() {
    let dir = tempfile::tempdir().unwrap();
    let names = |server: KenningServer| server.tools().into_iter().map(|tool| tool.name.into_owned()).collect::<Vec<_>>();
    assert!(!names(server(&dir, &ServerOptions::default())).iter().any(|name| name.starts_with("workflow_")));
    let read_only = ServerOptions { toolsets: Some(vec!["workflows".into()]), read_only: true };
    assert_eq!(names(server(&dir, &read_only)), ["workflow_list", "workflow_status"]);
}

fn step(id: &str, dependencies: &[&str]) -> StepInput {
    StepInput {
        id: id.into(),
        description: format!("do {id}"),
        dependencies: dependencies.iter().map(|d| (*d).to_owned()).collect(),
        verification: Some("tests pass".into()),
    }
}

fn set(service: &WorkflowService, id: &str, step: &str, status: &str, produced: Vec<String>) -> kenning_engine::workflows::WorkflowView {
    let update = StepUpdate { step_id: step.into(), status: status.into(), notes: Some(format!("{step} {status}")), produced };
    service.update_step(id, update).unwrap()
}

#[test]
fn a_workflow_resumes_after_a_restart_and_ends_as_a_linked_memory() {
    let dir = tempfile::tempdir().unwrap();
    let input = CreateWorkflow {
        name: "add caching".into(),
        goal: "cache the user lookups".into(),
        steps: vec![step("design", &[]), step("build", &["design"]), step("docs", &["design"]), step("ship", &["build", "docs"])],
        author: None,
    };
    let (id, produced) = {
        let memory = memory(&dir);
        let service = WorkflowService::new(memory.clone());
        let created = service.create(input, None).unwrap();
        assert_eq!(created.ready, ["design"]);
        let note = CaptureInput { content: "Cache entries expire after 60 s".into(), namespace: Some("decisions".into()), ..CaptureInput::default() };
        let produced = memory.capture(note, None).unwrap().urn;
        set(&service, &created.workflow_id, "design", "completed", vec![produced.clone()]);
        let view = set(&service, &created.workflow_id, "build", "in_progress", Vec::new());
        assert_eq!(view.in_progress, ["build"]);
        (created.workflow_id, produced)
    };
    // A new service over the reopened file: what a restarted server sees.
    let memory = memory(&dir);
    let service = WorkflowService::new(memory.clone());
    let view = service.status(None).unwrap();
    assert_eq!(view.workflow_id, id, "the active workflow is found without its id");
    assert_eq!((view.in_progress.clone(), view.ready.clone(), view.blocked.clone()), (vec!["build".to_owned()], vec!["docs".to_owned()], vec!["ship".to_owned()]));
    assert_eq!(view.next_step.unwrap().id, "build", "the step in progress comes first after a crash");
    let error = service.update_step(&id, StepUpdate { step_id: "ship".into(), status: "in_progress".into(), ..StepUpdate::default() }).unwrap_err();
    assert!(error.to_string().contains("`build` (in_progress)"), "{error}");

    set(&service, &id, "build", "completed", Vec::new());
    set(&service, &id, "docs", "skipped", Vec::new());
    let done = set(&service, &id, "ship", "completed", Vec::new());
    assert_eq!(done.status, "completed");
    let urn = done.memory.expect("a completed workflow is written up as a memory");
    let written = memory.get(&urn).unwrap();
    assert_eq!((written.namespace.as_str(), written.kind.as_str()), ("progress", "episodic"));
    assert!(written.content.contains("cache the user lookups") && written.content.contains("[skipped] `docs`"), "{}", written.content);
    assert_eq!(written.links.len(), 1);
    assert_eq!((written.links[0].target.as_str(), written.links[0].relation.as_str()), (produced.as_str(), "produced"));
    assert_eq!(written.metadata.get("workflow_id"), Some(&id));
    assert!(service.update_step(&id, StepUpdate { step_id: "ship".into(), status: "pending".into(), ..StepUpdate::default() }).is_err());
    assert_eq!(service.status(Some(&id)).unwrap().memory, Some(urn), "the closing memory is written once");
}

#[test]
fn abandoned_workflows_are_written_up_and_listed_by_status() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory(&dir);
    let service = WorkflowService::new(memory.clone());
    let make = |name: &str| {
        let input = CreateWorkflow { name: name.into(), goal: format!("{name} goal"), steps: vec![step("only", &[])], author: None };
        service.create(input, None).unwrap().workflow_id
    };
    let first = make("first");
    let second = make("second");
    let abandoned = service.abandon(&first, "superseded by the second plan").unwrap();
    assert_eq!(abandoned.status, "abandoned");
    let written = memory.get(&abandoned.memory.unwrap()).unwrap();
    assert!(written.content.contains("superseded by the second plan"));
    assert!(service.abandon(&first, "again").is_err());

    let active = service.list(WorkflowQuery { status: Some("active".into()), ..WorkflowQuery::default() }).unwrap();
    assert_eq!(active.workflows.iter().map(|w| w.workflow_id.as_str()).collect::<Vec<_>>(), [second.as_str()]);
    let page = service.list(WorkflowQuery { limit: Some(1), ..WorkflowQuery::default() }).unwrap();
    assert_eq!(page.workflows.len(), 1);
    let rest = service.list(WorkflowQuery { cursor: page.next_cursor, ..WorkflowQuery::default() }).unwrap();
    assert_eq!(rest.workflows.len(), 1);
    assert!(rest.next_cursor.is_none());
    assert!(service.list(WorkflowQuery { status: Some("done".into()), ..WorkflowQuery::default() }).is_err());
}

#[test]
fn bad_workflows_and_ids_are_refused_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let service = WorkflowService::new(memory(&dir));
    let cycle = CreateWorkflow { name: "n".into(), goal: "g".into(), steps: vec![step("a", &["b"]), step("b", &["a"])], author: None };
    match service.create(cycle, None) {
        Err(kenning_engine::Error::Invalid(error)) => assert!(error.problem.contains("a -> b -> a"), "{error}"),
        other => panic!("a cycle was not refused: {other:?}"),
    }
    assert!(service.list(WorkflowQuery::default()).unwrap().workflows.is_empty(), "nothing is stored for a refused workflow");
    for id in ["wf_missing", "not-a-workflow"] {
        match service.status(Some(id)) {
            Err(kenning_engine::Error::Invalid(error)) => assert_eq!(error.field, "workflow_id"),
            other => panic!("{other:?}"),
        }
    }
    let input = CreateWorkflow { name: "n".into(), goal: "g".into(), steps: vec![step("a", &[])], author: None };
    let id = service.create(input, None).unwrap().workflow_id;
    let missing = StepUpdate { step_id: "a".into(), status: "completed".into(), produced: vec!["kenning://user/progress/nothere".into()], ..StepUpdate::default() };
    match service.update_step(&id, missing) {
        Err(kenning_engine::Error::Invalid(error)) => assert_eq!(error.field, "produced[0]"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn purging_an_author_removes_their_workflows() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory(&dir);
    let service = WorkflowService::new(memory.clone());
    for author in ["alice", "bob"] {
        let input = CreateWorkflow { name: format!("{author}'s plan"), goal: "g".into(), steps: vec![step("only", &[])], author: Some(author.into()) };
        service.create(input, None).unwrap();
    }
    let dry = memory.purge_authored("alice", None, PurgeMode::DryRun).unwrap();
    assert_eq!(dry[0].counts.workflows, 1);
    assert_eq!(service.list(WorkflowQuery::default()).unwrap().workflows.len(), 2, "a dry run removes nothing");
    let purged = memory.purge_authored("alice", None, PurgeMode::Apply).unwrap();
    assert_eq!(purged[0].counts.workflows, 1);
    let left = service.list(WorkflowQuery::default()).unwrap().workflows;
    assert_eq!(left.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["bob's plan"]);
}
