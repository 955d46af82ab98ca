//! One recall across a project store (SQLite), the user store (SQLite) and the organisation
//! store (PostgreSQL), through the engine as the server runs it.

use std::sync::Arc;

use kenning_core::{CaptureInput, Domain, Embedder, MemoryStore};
use kenning_embed::StaticEmbedder;
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;
use tempfile::TempDir;

use super::*;

/// A memory service over a project, the user and `org`, in that order, with kenning's built-in
/// embedder (384 dimensions): recall is hybrid, and the org leg searches PostgreSQL's HNSW index.
pub(crate) fn three_domains(org: PostgresStore) -> (MemoryService, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = |name: &str| -> Arc<dyn MemoryStore> { Arc::new(SqliteStore::open(&dir.path().join(name)).unwrap()) };
    let domains = vec![
        DomainStore { domain: Domain::Project("app".to_owned()), store: sqlite("project.db") },
        DomainStore { domain: Domain::User, store: sqlite("user.db") },
        DomainStore { domain: Domain::Org("acme".to_owned()), store: Arc::new(org) },
    ];
    let embedder: Arc<dyn Embedder> = Arc::new(StaticEmbedder::builtin().unwrap());
    (MemoryService::new(domains, Some(embedder)), dir)
}

pub(crate) fn capture(service: &MemoryService, domain: &str, content: &str) -> String {
    let input = CaptureInput { content: content.to_owned(), namespace: Some("learnings".to_owned()), ..CaptureInput::default() };
    service.capture(input, Some(domain)).unwrap().urn
}

pub(crate) fn recall(service: &MemoryService, query: &str) -> kenning_engine::views::RecallPage {
    service.recall(RecallRequest { query: query.to_owned(), limit: Some(10), ..RecallRequest::default() }).unwrap()
}

#[test]
fn one_recall_spans_project_user_and_org() {
    if !servers(&[PG_URL]) {
        return;
    }
    let (service, _dir) = three_domains(fresh_store("domains"));
    let project = capture(&service, "project", "The connection pool of this app is capped at 20 connections.");
    let user = capture(&service, "user", "I prefer to size a connection pool from the database's max_connections.");
    let org = capture(&service, "org", "Company standard: every service sizes its connection pool below 50.");
    assert!(org.starts_with("kenning://org:acme/learnings/"), "{org}");

    let page = recall(&service, "connection pool size");
    let urns: Vec<&str> = page.results.iter().map(|hit| hit.urn.as_str()).collect();
    for expected in [&project, &user, &org] {
        assert!(urns.contains(&expected.as_str()), "{expected} missing from {urns:?}");
    }
    assert_eq!(page.mode, "hybrid");
    assert!(page.unavailable.is_empty());

    // A recall limited to the org domain reads only the org store.
    let org_only = service
        .recall(RecallRequest { query: "connection pool".to_owned(), domains: vec!["org".to_owned()], ..RecallRequest::default() })
        .unwrap();
    assert_eq!(org_only.results.iter().map(|hit| hit.urn.as_str()).collect::<Vec<_>>(), [org.as_str()]);
}

/// Every org memory records who wrote it, the decision's memory and its lessons included: the
/// configured user of the service that captured them.
#[test]
fn org_decision_memories_carry_the_configured_author() {
    if !servers(&[PG_URL]) {
        return;
    }
    use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList, OutcomeInput};
    use kenning_engine::{DecisionDomain, DecisionService};

    let dir = tempfile::tempdir().unwrap();
    let project = Arc::new(SqliteStore::open(&dir.path().join("project.db")).unwrap());
    let org = Arc::new(fresh_store("decision_author"));
    let (project_domain, org_domain) = (Domain::Project("app".to_owned()), Domain::Org("acme".to_owned()));
    let memory = MemoryService::new(
        vec![
            DomainStore { domain: project_domain.clone(), store: project.clone() as Arc<dyn MemoryStore> },
            DomainStore { domain: org_domain.clone(), store: org.clone() as Arc<dyn MemoryStore> },
        ],
        None,
    )
    .with_author(Some("ada@acme.example".to_owned()));
    let decisions = DecisionService::new(
        Arc::new(memory),
        vec![
            DecisionDomain { domain: project_domain, store: project as Arc<dyn DecisionStore> },
            DecisionDomain { domain: org_domain, store: org as Arc<dyn DecisionStore> },
        ],
        ModuleList::default(),
    );
    let input = CaptureDecision {
        statement: "Every service talks to PostgreSQL through PgBouncer".into(),
        alternatives: Some(vec!["Direct connections".into()]),
        confidence: Some(0.8),
        module: Some("database".into()),
        ..CaptureDecision::default()
    };
    let captured = decisions.capture(input, Some("org")).unwrap();
    assert!(captured.urn.starts_with("kenning://org:acme/decisions/"), "{}", captured.urn);
    let outcome = OutcomeInput {
        final_status: "success".into(),
        lessons_learned: vec!["Transaction pooling breaks session-level advisory locks".into()],
        ..OutcomeInput::default()
    };
    let finished = decisions.record_outcome(&captured.decision_id, outcome).unwrap();
    for urn in [&captured.urn, &finished.lesson_urns[0]] {
        let memory = decisions.memory().get(urn).unwrap();
        assert_eq!(memory.author.as_deref(), Some("ada@acme.example"), "{urn}");
    }
}

/// The org store keeps a change mark, so front ends that poll it (the web view's live updates)
/// see writes made by any process on the database, and not reads.
#[test]
fn the_org_store_keeps_a_change_mark() {
    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("change_mark");
    let (service, _dir) = three_domains(PostgresStore::open(&settings(&schema)).unwrap());
    // Another handle on the same database, as another process would hold.
    let org = PostgresStore::open(&settings(&schema)).unwrap();
    let before = org.change_mark().unwrap().expect("PostgreSQL keeps a change mark");
    let urn = capture(&service, "org", "Company standard: every service exports Prometheus metrics.");
    let captured = org.change_mark().unwrap().unwrap();
    assert_ne!(captured, before);
    service.get(&urn).unwrap();
    recall(&service, "Prometheus metrics");
    assert_eq!(org.change_mark().unwrap().unwrap(), captured, "reads leave the mark alone");
}
