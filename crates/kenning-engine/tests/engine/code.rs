//! The code service over real stores and a real cargo run: a failing test run becomes an
//! episodic memory, and a run made for a decision records a CI signal on it.

use std::path::Path;
use std::sync::Arc;

use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList};
use kenning_core::{Domain, MemoryStore};
use kenning_engine::code::TestRunRequest;
use kenning_engine::{ChainAnalysis, CodeService, DecisionDomain, DecisionService, DomainStore, Error, MemoryService};
use kenning_sqlite::SqliteStore;

fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn setup(dir: &tempfile::TempDir) -> (Arc<MemoryService>, Arc<DecisionService>, CodeService) {
    let repository = dir.path().join("shop");
    std::fs::create_dir_all(&repository).unwrap();
    copy(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../kenning-code/tests/fixtures/rust"), &repository);
    let store = Arc::new(SqliteStore::open(&dir.path().join("project.db")).unwrap());
    let memory_store: Arc<dyn MemoryStore> = store.clone();
    let domain = Domain::Project("shop".into());
    let memory = Arc::new(MemoryService::new(vec![DomainStore { domain: domain.clone(), store: memory_store }], None).with_repository_root(Some(repository)));
    let decision_store: Arc<dyn DecisionStore> = store;
    let decisions = Arc::new(DecisionService::new(memory.clone(), vec![DecisionDomain { domain, store: decision_store }], ModuleList::default()));
    let code = CodeService::open(memory.clone(), decisions.clone(), &dir.path().join("code.db"), Default::default()).unwrap();
    (memory, decisions, code)
}

#[test]
fn a_failing_run_is_remembered_and_signals_its_decision() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, decisions, code) = setup(&dir);
    let decision = decisions
        .capture(CaptureDecision {
            statement: "Compute cart totals with integer cents".into(),
            alternatives: Some(vec!["Floating-point euros".into()]),
            confidence: Some(0.9),
            module: Some("backend".into()),
            ..CaptureDecision::default()
        }, None)
        .unwrap();
    let run = |decision_id: Option<&str>| {
        code.run_tests(TestRunRequest { scope: "file", target: Some("tests/checkout.rs"), timeout_seconds: Some(300), decision_id, ..TestRunRequest::default() })
            .unwrap()
    };

    let passed = run(Some(&decision.decision_id));
    assert_eq!(passed.result.status, "passed", "{}", passed.result.output_tail);
    assert_eq!((passed.memory_urn.as_deref(), passed.decision_signal.as_deref()), (None, Some("ci_passed")));

    let checkout = dir.path().join("shop/tests/checkout.rs");
    std::fs::write(&checkout, std::fs::read_to_string(&checkout).unwrap().replace("775", "776")).unwrap();
    let failed = run(Some(&decision.decision_id));
    assert_eq!((failed.result.status.as_str(), failed.decision_signal.as_deref()), ("failed", Some("ci_failed")));
    let remembered = memory.get(failed.memory_urn.as_deref().unwrap()).unwrap();
    assert_eq!((remembered.kind.as_str(), remembered.namespace.as_str()), ("episodic", "testing"));
    assert!(remembered.content.contains("adds_items at tests/checkout.rs:8"), "{}", remembered.content);
    assert!(remembered.tags.contains(&"test-failure".to_owned()));

    let signals: Vec<String> = decisions.get(&decision.decision_id, ChainAnalysis::Omitted).unwrap().decision.signals.into_iter().map(|signal| signal.signal_type).collect();
    assert_eq!(signals, ["ci_passed", "ci_failed"]);
    assert_eq!(code.recent_failures().len(), 1);

    // A run without a decision leaves decisions alone; an unknown decision costs no run.
    assert_eq!(run(None).decision_signal, None);
    let unknown = code.run_tests(TestRunRequest { scope: "all", decision_id: Some("dec_nope"), ..TestRunRequest::default() });
    assert!(matches!(unknown, Err(Error::DecisionNotFound { .. }) | Err(Error::Invalid(_))), "{unknown:?}");
}

#[test]
fn arguments_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, code) = setup(&dir);
    let invalid = |request: TestRunRequest<'_>| match code.run_tests(request) {
        Err(Error::Invalid(field)) => field.field,
        other => panic!("{other:?}"),
    };
    assert_eq!(invalid(TestRunRequest { scope: "everything", ..TestRunRequest::default() }), "scope");
    assert_eq!(invalid(TestRunRequest { scope: "file", ..TestRunRequest::default() }), "target");
    assert_eq!(invalid(TestRunRequest { scope: "file", target: Some("../../etc/passwd"), ..TestRunRequest::default() }), "target");
    assert_eq!(invalid(TestRunRequest { scope: "affected", ..TestRunRequest::default() }), "changed_files");
    assert_eq!(invalid(TestRunRequest { scope: "all", timeout_seconds: Some(0), ..TestRunRequest::default() }), "timeout_seconds");
    assert_eq!(invalid(TestRunRequest { scope: "all", runner: Some("maven"), ..TestRunRequest::default() }), "runner");
    let suggestion = code.suggest(&["src/price.rs".to_owned()]).unwrap();
    let file = &suggestion.files[0];
    assert_eq!(file.run.iter().map(|link| link.test_file.as_str()).collect::<Vec<_>>(), ["src/price.rs", "tests/checkout.rs"]);
    assert_eq!(file.untested, ["discounted"]);
    assert_eq!(file.suggestion, "add cases to src/price.rs");
}
