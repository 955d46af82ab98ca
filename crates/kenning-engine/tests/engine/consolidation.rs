//! Consolidation over a real SQLite store with the built-in embedder: episodes of three topics
//! and some noise become three principles linked to their episodes; a second run leaves them
//! alone; the run record survives a reopen; a rollback restores everything, and only once.

use std::sync::Arc;

use kenning_core::state::{StateKind, StateRecord};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::consolidation::{CONSOLIDATED_INTO_KEY, CONSOLIDATION_RUN_KEY, Progress, Stage};
use kenning_engine::{ConsolidateRequest, DomainStore, Error, MemoryService};
use kenning_sqlite::SqliteStore;

const LOGIN: [&str; 4] = [
    "The login integration test failed on CI because the session cookie was not set before the redirect.",
    "Flaky login test again: the session cookie arrived after the redirect assertion.",
    "Fixed the flaky login test by waiting for the session cookie before checking the redirect.",
    "The login test on CI timed out waiting for the session cookie after the redirect.",
];
const POOL: [&str; 4] = [
    "The PostgreSQL connection pool was exhausted under load and API requests failed.",
    "PostgreSQL connection pool exhausted again: API requests failed during the nightly batch job.",
    "The PostgreSQL connection pool was exhausted under load again, so the pool size was raised.",
    "Leaked PostgreSQL connections left the connection pool exhausted and requests failed.",
];
const DOCKER: [&str; 4] = [
    "The Docker image build took 20 minutes because the Docker layer cache was invalidated by copying the whole repository first.",
    "The Docker image build was slow again because the Docker layer cache missed after copying the repository.",
    "Slow Docker image builds on CI were fixed by ordering the Dockerfile so the dependency layer is cached.",
    "The Docker layer cache was busted again by a changed lockfile, making the Docker image build slow.",
];
const NOISE: [&str; 3] = [
    "Met with the design team about the onboarding screens.",
    "Alice prefers tabs over spaces in Makefiles.",
    "The quarterly roadmap review moved to Thursday.",
];

fn service(path: &std::path::Path) -> MemoryService {
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(path).unwrap());
    MemoryService::new(vec![DomainStore { domain: Domain::User, store }], super::builtin_embedder())
}

fn episode(content: &str, namespace: &str) -> CaptureInput {
    CaptureInput { content: content.into(), namespace: Some(namespace.into()), kind: Some("episodic".into()), ..CaptureInput::default() }
}

/// Captures the topics and the noise; returns each topic's URNs, sorted, and the noise's.
fn capture_topics(memory: &MemoryService) -> (Vec<Vec<String>>, Vec<String>) {
    let capture = |content: &str, namespace: &str| memory.capture(episode(content, namespace), None).unwrap().urn;
    let mut login: Vec<String> = LOGIN.iter().map(|text| capture(text, "testing")).collect();
    // One pool episode sits in another namespace, so its principle goes to `learnings`.
    let mut pool: Vec<String> = POOL.iter().enumerate().map(|(n, text)| capture(text, if n == 0 { "progress" } else { "blockers" })).collect();
    let mut docker: Vec<String> = DOCKER.iter().map(|text| capture(text, "progress")).collect();
    let noise = NOISE.iter().map(|text| capture(text, "context")).collect();
    for topic in [&mut login, &mut pool, &mut docker] {
        topic.sort();
    }
    (vec![login, pool, docker], noise)
}

fn sorted(mut urns: Vec<String>) -> Vec<String> {
    urns.sort();
    urns
}

fn consolidate(memory: &MemoryService, request: ConsolidateRequest) -> (kenning_engine::ConsolidationRun, Vec<Progress>) {
    let mut heard = Vec::new();
    let run = memory.consolidate(request, &mut |progress| heard.push(*progress)).unwrap();
    (run, heard)
}

fn field_error<T: std::fmt::Debug>(result: Result<T, Error>) -> kenning_core::FieldError {
    match result {
        Err(Error::Invalid(error)) => error,
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn three_topics_become_three_linked_principles_and_a_rollback_restores_everything_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("user.db");
    let memory = service(&path);
    let (topics, noise) = capture_topics(&memory);

    let (plan, _) = consolidate(&memory, ConsolidateRequest { dry_run: true, ..ConsolidateRequest::default() });
    assert_eq!((plan.status.as_str(), plan.run_id.as_deref(), plan.clusters_found, plan.principles_extracted), ("dry_run", None, 3, 0));
    assert!(plan.created.is_empty() && plan.clusters.iter().all(|cluster| cluster.principle.is_none()));
    assert!(memory.consolidation_runs(None, 10).unwrap().is_empty(), "a dry run records nothing");
    let (only_progress, _) = consolidate(&memory, ConsolidateRequest { namespace: Some("progress".into()), dry_run: true, ..ConsolidateRequest::default() });
    assert_eq!((only_progress.episodes_evaluated, only_progress.clusters_found), (5, 1), "{only_progress:#?}");

    let (run, heard) = consolidate(&memory, ConsolidateRequest::default());
    let run_id = run.run_id.clone().expect("a recorded run has an id");
    assert!(run_id.starts_with("cr_"));
    assert_eq!(
        (run.status.as_str(), run.episodes_evaluated, run.clusters_found, run.principles_extracted),
        ("completed", 15, 3, 3),
        "{run:#?}"
    );
    let llm = serde_json::to_value(&run.llm).unwrap();
    assert_eq!(llm["status"], "not_configured");
    assert!(llm["fallback"].as_str().unwrap().starts_with("extractive"), "{llm}");
    assert!(heard.contains(&Progress { stage: Stage::Clustering, done: 15, total: 15 }), "{heard:?}");
    assert!(heard.contains(&Progress { stage: Stage::Writing, done: 3, total: 3 }), "{heard:?}");

    let mut found: Vec<(Vec<String>, String)> = run.clusters.iter().map(|cluster| (sorted(cluster.episodes.clone()), cluster.namespace.clone())).collect();
    found.sort();
    let mut expected: Vec<(Vec<String>, String)> =
        topics.iter().cloned().zip(["testing", "learnings", "progress"].map(String::from)).collect();
    expected.sort();
    assert_eq!(found, expected, "each topic is one cluster, the noise none");
    assert_eq!(sorted(run.changed.clone()), sorted(topics.concat()));
    assert_eq!(run.created.len(), 3);

    for cluster in &run.clusters {
        let principle = memory.get(cluster.principle.as_deref().unwrap()).unwrap();
        assert_eq!((principle.kind.as_str(), principle.source.as_str(), principle.status.as_str()), ("semantic", "inference", "active"));
        assert_eq!(principle.namespace, cluster.namespace);
        assert!(principle.content.starts_with("Extractive summary of 4 related episodes"), "{}", principle.content);
        assert_eq!(principle.metadata[CONSOLIDATION_RUN_KEY], run_id);
        let mut linked: Vec<String> = principle.links.iter().filter(|link| link.relation == "derived-from").map(|link| link.target.clone()).collect();
        linked.sort();
        assert_eq!(linked, sorted(cluster.episodes.clone()));
        for source in &cluster.episodes {
            let source = memory.get(source).unwrap();
            assert_eq!(source.metadata[CONSOLIDATED_INTO_KEY], principle.urn);
            assert_eq!(source.metadata[CONSOLIDATION_RUN_KEY], run_id);
        }
    }
    for urn in &noise {
        assert!(!memory.get(urn).unwrap().metadata.contains_key(CONSOLIDATED_INTO_KEY));
    }

    let (again, _) = consolidate(&memory, ConsolidateRequest::default());
    assert_eq!((again.episodes_evaluated, again.clusters_found, again.principles_extracted), (3, 0, 0), "consolidated episodes are not grouped again");

    // The run record lives in the store's working state: a restarted process finds both runs.
    drop(memory);
    let memory = service(&path);
    let runs = memory.consolidation_runs(None, 10).unwrap();
    assert_eq!(runs.iter().map(|run| run.run_id.clone().unwrap()).collect::<Vec<_>>(), [again.run_id.clone().unwrap(), run_id.clone()]);
    assert_eq!(memory.consolidation_run(&run_id).unwrap(), run);
    let report = memory.introspect(None).unwrap();
    assert_eq!(report.total_consolidation_runs, 2);
    assert_eq!(report.last_consolidation, again.finished_at, "the newest completed run, though it found nothing to do");
    assert_eq!(report.semantic, 3, "the three principles");
    assert_eq!(report.links_by_relation.get("derived-from"), Some(&12), "four episodes per principle");

    let rolled = memory.rollback_consolidation(&run_id).unwrap();
    assert_eq!(rolled.status, "rolled_back");
    assert!(rolled.rolled_back_at.is_some());
    for urn in &run.created {
        let principle = memory.history(urn).unwrap();
        assert_eq!(principle.current.status, "forgotten");
        assert!(principle.versions[0].reason.contains(&run_id), "{:?}", principle.versions[0].reason);
    }
    for urn in topics.concat() {
        let source = memory.get(&urn).unwrap();
        assert!(!source.metadata.contains_key(CONSOLIDATED_INTO_KEY) && !source.metadata.contains_key(CONSOLIDATION_RUN_KEY), "{source:?}");
        assert_eq!(source.status, "active");
    }
    let twice = field_error(memory.rollback_consolidation(&run_id));
    assert_eq!(twice.field, "rollback");
    assert!(twice.problem.contains("already rolled back"), "{twice:?}");
    let unknown = field_error(memory.rollback_consolidation("cr_00000000000000000000000000"));
    assert!(unknown.problem.contains("names no consolidation run"), "{unknown:?}");
    assert_eq!(field_error(memory.rollback_consolidation("wf_1")).field, "rollback");

    let (redo, _) = consolidate(&memory, ConsolidateRequest::default());
    assert_eq!((redo.episodes_evaluated, redo.clusters_found, redo.principles_extracted), (15, 3, 3), "rolled back episodes are grouped again");
}

/// Clustering looks through each episode's neighbours in the vector index; episodes captured
/// without an embedder have no vectors there, and are compared with every cluster instead.
#[test]
fn episodes_captured_without_vectors_are_grouped_all_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let text_only = MemoryService::new(vec![DomainStore { domain: Domain::User, store: store.clone() }], None);
    let (mut topics, _) = capture_topics(&text_only);
    let memory = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], super::builtin_embedder());
    let (plan, _) = consolidate(&memory, ConsolidateRequest { dry_run: true, ..ConsolidateRequest::default() });
    let mut found: Vec<Vec<String>> = plan.clusters.iter().map(|cluster| sorted(cluster.episodes.clone())).collect();
    found.sort();
    topics.sort();
    assert_eq!(found, topics);
}

#[test]
fn a_run_that_stopped_midway_is_rolled_back_from_what_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("user.db");
    let memory = service(&path);
    capture_topics(&memory);
    let (run, _) = consolidate(&memory, ConsolidateRequest::default());
    let run_id = run.run_id.clone().unwrap();

    // As a crash would leave it: still `running`, and naming a principle it never stored.
    let store = SqliteStore::open(&path).unwrap();
    let state = store.state().unwrap();
    let record = state.get_state(StateKind::ConsolidationRun, &run_id).unwrap().unwrap();
    let mut body: serde_json::Value = serde_json::from_str(&record.body).unwrap();
    body["status"] = "running".into();
    body["created"].as_array_mut().unwrap().push("kenning://user/learnings/01jnever0stored0000000000000".into());
    state.put_state(&StateRecord { revision: record.revision + 1, body: body.to_string(), ..record }).unwrap();
    assert_eq!(memory.consolidation_run(&run_id).unwrap().status, "running");

    let rolled = memory.rollback_consolidation(&run_id).unwrap();
    assert_eq!(rolled.status, "rolled_back");
    for urn in &run.created {
        assert_eq!(memory.get(urn).unwrap().status, "forgotten");
    }
    let (redo, _) = consolidate(&memory, ConsolidateRequest::default());
    assert_eq!(redo.clusters_found, 3);
}

#[test]
fn bad_parameters_and_a_missing_embedder_are_field_errors() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir.path().join("user.db"));
    let mut quiet = |_: &Progress| {};
    for (request, field) in [
        (ConsolidateRequest { similarity_threshold: Some(1.5), ..ConsolidateRequest::default() }, "similarity_threshold"),
        (ConsolidateRequest { min_cluster_size: Some(1), ..ConsolidateRequest::default() }, "min_cluster_size"),
        (ConsolidateRequest { namespace: Some("Not Valid".into()), ..ConsolidateRequest::default() }, "namespace"),
        (ConsolidateRequest { limit: Some(0), ..ConsolidateRequest::default() }, "limit"),
        (ConsolidateRequest { domain: Some("org".into()), ..ConsolidateRequest::default() }, "domain"),
    ] {
        assert_eq!(field_error(memory.consolidate(request, &mut quiet)).field, field);
    }
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join("plain.db")).unwrap());
    let text_only = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], None);
    assert_eq!(field_error(text_only.consolidate(ConsolidateRequest::default(), &mut quiet)).field, "embedder");
}

