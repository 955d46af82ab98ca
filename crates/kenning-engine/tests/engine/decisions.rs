//! The decision service over real SQLite stores: validation with field errors, status
//! transitions, signals and the estimate they move, outcomes with lessons, queries, the causal
//! chain, and concurrent updates.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeZone, Utc};
use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList, OutcomeInput, SignalInput, UpdateDecision};
use kenning_core::{Domain, FieldError, MemoryStore};
use kenning_engine::{Clock, DecisionDomain, DecisionQuery, DecisionService, DomainStore, Error, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;

/// A clock that moves one minute on every reading, so creation order is unambiguous.
struct Steps(AtomicI64);

impl Clock for Steps {
    fn now(&self) -> DateTime<Utc> {
        let minutes = self.0.fetch_add(1, Ordering::Relaxed);
        Utc.with_ymd_and_hms(2026, 5, 1, 9, 0, 0).unwrap() + chrono::TimeDelta::minutes(minutes)
    }
}

/// A project and a user domain, each one SQLite file keeping memories and decisions.
fn service(dir: &tempfile::TempDir) -> DecisionService {
    let open = |name: &str| Arc::new(SqliteStore::open(&dir.path().join(name)).unwrap());
    let (project, user) = (open("project.db"), open("user.db"));
    let project_domain = Domain::Project("my-app".into());
    let memory = MemoryService::new(
        vec![
            DomainStore { domain: project_domain.clone(), store: project.clone() as Arc<dyn MemoryStore> },
            DomainStore { domain: Domain::User, store: user.clone() as Arc<dyn MemoryStore> },
        ],
        None,
    )
    .with_clock(Arc::new(Steps(AtomicI64::new(0))));
    DecisionService::new(
        Arc::new(memory),
        vec![
            DecisionDomain { domain: project_domain, store: project as Arc<dyn DecisionStore> },
            DecisionDomain { domain: Domain::User, store: user as Arc<dyn DecisionStore> },
        ],
        ModuleList::default(),
    )
}

fn capture(statement: &str, module: &str, confidence: f64, alternatives: &[&str]) -> CaptureDecision {
    CaptureDecision {
        statement: statement.into(),
        alternatives: Some(alternatives.iter().map(|a| (*a).to_owned()).collect()),
        confidence: Some(confidence),
        module: Some(module.into()),
        ..CaptureDecision::default()
    }
}

fn invalid<T: std::fmt::Debug>(result: Result<T, Error>) -> FieldError {
    match result {
        Err(Error::Invalid(error)) => error,
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn capture_refuses_bad_input_with_field_errors() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);

    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "database", 1.5, &["MongoDB"]), None));
    assert_eq!((error.field.as_str(), error.received.clone()), ("confidence", serde_json::json!(1.5)));
    assert!(error.problem.contains("between 0 and 1"));

    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "database", 0.7, &[]), None));
    assert_eq!(error.field, "alternatives");
    assert_eq!(error.received, serde_json::json!([]));

    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "databse", 0.7, &["MongoDB"]), None));
    assert_eq!((error.field.as_str(), error.received.clone()), ("module", serde_json::json!("databse")));
    assert!(error.suggestion.contains("did you mean `database`"), "{}", error.suggestion);
    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "payments", 0.7, &["MongoDB"]), None));
    assert!(error.suggestion.contains("database, auth, api, frontend, backend, infra"), "{}", error.suggestion);

    let error = invalid(decisions.capture(capture("Use PG", "database", 0.7, &["MongoDB"]), None));
    assert!(error.field == "statement" && error.problem.contains("fewer than 10"), "{error:?}");
    let error = invalid(decisions.capture(capture(&"x".repeat(501), "database", 0.7, &["MongoDB"]), None));
    assert!(error.field == "statement" && error.problem.contains("more than 500"), "{error:?}");

    let error = invalid(decisions.capture(CaptureDecision { confidence: None, ..capture("Use PostgreSQL for orders", "database", 0.7, &["x"]) }, None));
    assert_eq!(error.field, "confidence");
    let mut risky = capture("Use PostgreSQL for orders", "database", 0.7, &["MongoDB"]);
    risky.risk_level = Some("extreme".into());
    assert_eq!(invalid(decisions.capture(risky, None)).field, "risk_level");
    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "database", 0.7, &["MongoDB"]), Some("org")));
    assert_eq!(error.field, "domain");

    for bad in ["dec-1", "DEC_1", "dec_", "dec_ABC", "abc"] {
        let error = invalid(decisions.get(bad, false));
        assert_eq!((error.field.as_str(), error.received.clone()), ("decision_id", serde_json::json!(bad)));
    }
    assert!(matches!(decisions.get("dec_0000000000", false), Err(Error::DecisionNotFound { .. })));
    assert_eq!(decisions.query(DecisionQuery::default()).unwrap().total, 0, "nothing was stored");
}

#[test]
fn a_decision_is_a_memory_that_recall_finds() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let mut input = capture("Use PostgreSQL for the orders service", "Database", 0.8, &["MongoDB", "MongoDB", " SQLite "]);
    input.rationale = Some("We need transactions across order lines.".into());
    input.file_path = Some("src/orders/db.rs".into());
    let captured = decisions.capture(input, None).unwrap();
    assert!(captured.decision_id.starts_with("dec_"));
    assert_eq!(captured.urn, format!("kenning://project:my-app/decisions/{}", captured.decision_id));
    assert_eq!((captured.status.as_str(), captured.module.as_str()), ("pending", "database"));

    let page = decisions.memory().recall(RecallRequest { query: "orders transactions".into(), ..RecallRequest::default() }).unwrap();
    assert_eq!(page.results[0].urn, captured.urn);
    assert_eq!(page.results[0].namespace, "decisions");
    let memory = decisions.memory().get(&captured.urn).unwrap();
    assert!(memory.content.contains("MongoDB; SQLite"), "alternatives are trimmed and deduplicated: {}", memory.content);
    assert_eq!(memory.metadata["module"], "database");

    let detail = decisions.get(&captured.urn, false).unwrap();
    assert_eq!(detail.decision.decision_id, captured.decision_id, "a decision can be named by its URN");
    assert_eq!(detail.decision.alternatives, ["MongoDB", "SQLite"]);
    assert_eq!(detail.estimated_success, 0.8);

    let user = decisions.capture(capture("Prefer small pull requests for reviews", "backend", 0.6, &["Large PRs"]), Some("user")).unwrap();
    assert!(user.urn.starts_with("kenning://user/decisions/dec_"));
    assert_eq!(decisions.get(&user.decision_id, false).unwrap().decision.domain, "user", "get looks in every domain");
}

#[test]
fn status_moves_only_along_the_allowed_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let id = decisions.capture(capture("Split the API gateway into two services", "api", 0.6, &["Keep one gateway"]), None).unwrap().decision_id;
    let status = |status: &str| UpdateDecision { status: Some(status.into()), ..UpdateDecision::default() };

    let error = invalid(decisions.update(&id, status("completed")));
    assert_eq!((error.field.as_str(), error.received.clone()), ("status", serde_json::json!("completed")));
    assert!(error.suggestion.contains("executed"), "{}", error.suggestion);
    let error = invalid(decisions.update(&id, status("done")));
    assert!(error.suggestion.contains("pending, executed, completed, failed, reworked"), "{}", error.suggestion);

    let moved = decisions.update(&id, status("executed")).unwrap();
    assert_eq!((moved.previous_status.as_str(), moved.new_status.as_str(), moved.revision), ("pending", "executed", 2));
    let error = invalid(decisions.update(&id, status("pending")));
    assert!(error.suggestion.contains("completed, failed, reworked"), "{}", error.suggestion);
    decisions.update(&id, status("reworked")).unwrap();
    let error = invalid(decisions.update(&id, status("executed")));
    assert!(error.suggestion.contains("final"), "{}", error.suggestion);

    let revised = UpdateDecision {
        confidence: Some(0.4),
        notes: Some("Latency doubled after the split.".into()),
        linked_pr: Some("https://github.com/acme/app/pull/7".into()),
        linked_commit: Some("3F2A9C1".into()),
        ..UpdateDecision::default()
    };
    let updated = decisions.update(&id, revised.clone()).unwrap();
    assert_eq!((updated.confidence, updated.revision), (0.4, 4));
    let detail = decisions.get(&id, false).unwrap().decision;
    assert_eq!((detail.confidence, detail.current_confidence), (0.6, 0.4), "calibration keeps the stated confidence");
    assert_eq!(detail.linked_commit.as_deref(), Some("3f2a9c1"));
    assert_eq!(detail.notes.len(), 1);
    assert_eq!(invalid(decisions.update(&id, UpdateDecision { linked_commit: Some("not-a-sha".into()), ..UpdateDecision::default() })).field, "linked_commit");
    assert_eq!(invalid(decisions.update(&id, UpdateDecision { confidence: Some(0.4), ..UpdateDecision::default() })).field, "update");

    // Every change is a version of the decision's memory.
    let history = decisions.memory().history(&detail.urn).unwrap();
    assert_eq!(history.versions.len(), 3);
    assert!(history.versions.iter().any(|version| version.reason == "decision moved from pending to executed"));
    assert!(matches!(decisions.update("dec_0000000000", status("executed")), Err(Error::DecisionNotFound { .. })));
}

#[test]
fn signals_move_the_estimated_success() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let id = decisions.capture(capture("Cache product pages in Redis for an hour", "backend", 0.8, &["No cache"]), None).unwrap().decision_id;
    let signal = |kind: &str, valence: &str| SignalInput { signal_type: kind.into(), valence: valence.into(), ..SignalInput::default() };

    // Prior 0.8 with the weight of 2 observations; a passing CI run adds 1 success: (1.6 + 1) / 3.
    let passed = decisions.record_signal(&id, signal("ci_passed", "positive")).unwrap();
    assert_eq!((passed.estimated_success, passed.prior, passed.prior_source.as_str()), (0.8667, 0.8, "stated_confidence"));
    // An incident weighs 2 failures: (1.6 + 1) / (3 + 2).
    let incident = decisions.record_signal(&id, signal("incident", "negative")).unwrap();
    assert_eq!((incident.estimated_success, incident.signals_counted), (0.52, 2));
    let neutral = decisions.record_signal(&id, signal("pr_created", "neutral")).unwrap();
    assert_eq!(neutral.estimated_success, 0.52);
    assert_eq!(decisions.get(&id, false).unwrap().estimated_success, 0.52);

    assert_eq!(invalid(decisions.record_signal(&id, signal("deployed", "positive"))).field, "signal_type");
    assert_eq!(invalid(decisions.record_signal(&id, signal("ci_passed", "good"))).field, "valence");
    assert!(matches!(decisions.record_signal("dec_0000000000", signal("ci_passed", "positive")), Err(Error::DecisionNotFound { .. })));
}

#[test]
fn an_outcome_closes_the_decision_and_keeps_its_lessons() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let id = decisions.capture(capture("Move sessions from cookies to Redis", "auth", 0.7, &["Signed cookies"]), None).unwrap().decision_id;
    decisions.record_signal(&id, SignalInput { signal_type: "ci_failed".into(), valence: "negative".into(), ..SignalInput::default() }).unwrap();

    let outcome = OutcomeInput {
        final_status: "failure".into(),
        final_score: Some(0.1),
        signals: [("incident_found".to_owned(), serde_json::json!(true))].into(),
        lessons_learned: vec!["Redis outages log everyone out".into()],
    };
    let recorded = decisions.record_outcome(&id, outcome.clone()).unwrap();
    assert_eq!((recorded.decision_status.as_str(), recorded.final_score), ("failed", 0.1));
    assert_eq!(recorded.outcome_id, format!("out_{}", &id[4..]));
    assert_eq!(recorded.lesson_urns.len(), 1);
    let lesson = decisions.memory().get(&recorded.lesson_urns[0]).unwrap();
    assert_eq!(lesson.namespace, "learnings");
    assert_eq!(lesson.links[0].relation, "derived-from");
    assert!(lesson.links[0].target.ends_with(&id));

    let error = invalid(decisions.record_outcome(&id, outcome));
    assert_eq!(error.field, "decision_id");
    assert!(error.problem.contains("already has an outcome"), "{}", error.problem);

    let detail = decisions.get(&id, true).unwrap();
    assert_eq!(detail.estimated_success, 0.1, "once the outcome is known it is the estimate");
    let analysis = detail.analysis.expect("analysis was asked for");
    assert_eq!(analysis.causal_chain.signals, ["ci_failed (negative)"]);
    assert_eq!(analysis.causal_chain.outcome.as_deref(), Some("failure (score 0.1)"));
    assert_eq!(analysis.causal_chain.lessons[0].urn, recorded.lesson_urns[0]);
    let relations: Vec<&str> = analysis.edges.iter().map(|edge| edge.relation.as_str()).collect();
    assert!(["observed", "resulted-in", "preceded", "taught"].iter().all(|relation| relations.contains(relation)), "{relations:?}");

    let partial = decisions.capture(capture("Rotate session keys weekly", "auth", 0.7, &["Monthly"]), None).unwrap().decision_id;
    let error = invalid(decisions.record_outcome(&partial, OutcomeInput { final_status: "great".into(), ..OutcomeInput::default() }));
    assert_eq!(error.field, "final_status");
    let error = invalid(decisions.record_outcome(&partial, OutcomeInput { final_status: "success".into(), final_score: Some(-0.5), ..OutcomeInput::default() }));
    assert_eq!(error.field, "final_score");
    let recorded = decisions.record_outcome(&partial, OutcomeInput { final_status: "partial".into(), ..OutcomeInput::default() }).unwrap();
    assert_eq!((recorded.final_score, recorded.decision_status.as_str()), (0.5, "completed"));
    assert!(matches!(decisions.record_outcome("dec_0000000000", OutcomeInput::default()), Err(Error::DecisionNotFound { .. })));
}

#[test]
fn queries_filter_by_text_module_status_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let mut ids = Vec::new();
    for (statement, module, file) in [
        ("Use PostgreSQL for the orders service", "database", "src/orders/db.rs"),
        ("Add a read replica for reporting queries", "database", "src/reports/db.rs"),
        ("Issue JWTs with a fifteen minute expiry", "auth", "src/auth/token.rs"),
        ("Rate limit the public API per token", "api", "src/api/limits.rs"),
    ] {
        let mut input = capture(statement, module, 0.7, &["Something else"]);
        input.file_path = Some(file.into());
        ids.push(decisions.capture(input, None).unwrap().decision_id);
    }
    decisions.update(&ids[1], UpdateDecision { status: Some("executed".into()), ..UpdateDecision::default() }).unwrap();

    let page = |query: DecisionQuery| -> Vec<String> { decisions.query(query).unwrap().decisions.into_iter().map(|d| d.decision_id).collect() };
    assert_eq!(page(DecisionQuery::default()), [ids[3].clone(), ids[2].clone(), ids[1].clone(), ids[0].clone()]);
    assert_eq!(page(DecisionQuery { module: Some("database".into()), ..DecisionQuery::default() }), [ids[1].clone(), ids[0].clone()]);
    assert_eq!(page(DecisionQuery { status: Some("executed".into()), ..DecisionQuery::default() }), [ids[1].clone()]);
    assert_eq!(page(DecisionQuery { file: Some("src/auth".into()), ..DecisionQuery::default() }), [ids[2].clone()]);
    assert_eq!(page(DecisionQuery { text: Some("PostgreSQL orders".into()), ..DecisionQuery::default() }), [ids[0].clone()]);
    assert_eq!(page(DecisionQuery { text: Some("token".into()), module: Some("api".into()), ..DecisionQuery::default() }), [ids[3].clone()]);
    assert_eq!(invalid(decisions.query(DecisionQuery { module: Some("billing".into()), ..DecisionQuery::default() })).field, "module");
    assert_eq!(invalid(decisions.query(DecisionQuery { status: Some("open".into()), ..DecisionQuery::default() })).field, "status");

    let first = decisions.query(DecisionQuery { limit: Some(3), ..DecisionQuery::default() }).unwrap();
    assert_eq!((first.total, first.decisions.len()), (4, 3));
    let rest = decisions.query(DecisionQuery { limit: Some(3), cursor: first.next_cursor, ..DecisionQuery::default() }).unwrap();
    assert_eq!(rest.decisions.iter().map(|d| d.decision_id.clone()).collect::<Vec<_>>(), [ids[0].clone()]);
    assert_eq!(rest.next_cursor, None);
}

#[test]
fn similar_decisions_come_with_their_success_and_contrasts_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let orders = decisions.capture(capture("Use PostgreSQL for the orders service", "database", 0.9, &["MongoDB"]), None).unwrap().decision_id;
    decisions.record_outcome(&orders, OutcomeInput { final_status: "success".into(), final_score: Some(0.9), ..OutcomeInput::default() }).unwrap();
    let mongo = decisions.capture(capture("Use MongoDB for the orders service", "database", 0.6, &["PostgreSQL"]), None).unwrap().decision_id;
    decisions.capture(capture("Render invoices as PDF on the client", "frontend", 0.5, &["Server-side PDF"]), None).unwrap();
    let billing = decisions.capture(capture("Use PostgreSQL for the billing service", "database", 0.8, &["MySQL"]), None).unwrap().decision_id;

    let similar = decisions.get(&billing, false).unwrap().similar_decisions;
    let found: Vec<(&str, &str, Option<f64>)> =
        similar.iter().map(|s| (s.decision_id.as_str(), s.relation.as_str(), s.success_rate)).collect();
    // {postgresql, billing, service} against {postgresql, order, service}: Dice 4/6; against
    // {mongodb, order, service}: 2/6, above the 0.3 threshold, and a contrast because that
    // decision rejected PostgreSQL; the invoice shares nothing.
    assert_eq!(found, [(orders.as_str(), "alike", Some(0.9)), (mongo.as_str(), "contrast", None)]);
    assert_eq!((similar[0].similarity, similar[1].similarity), (0.6667, 0.3333));
    assert_eq!(similar[0].confidence_difference, Some(-0.1));
    let from_mongo = decisions.get(&mongo, false).unwrap().similar_decisions;
    assert_eq!((from_mongo[0].decision_id.as_str(), from_mongo[0].relation.as_str()), (orders.as_str(), "contrast"));
}

#[test]
fn concurrent_updates_of_one_decision_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = Arc::new(service(&dir));
    let id = decisions.capture(capture("Run database migrations in CI before deploys", "infra", 0.7, &["Manual"]), None).unwrap().decision_id;
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let (decisions, id) = (decisions.clone(), id.clone());
            std::thread::spawn(move || {
                for note in 0..10 {
                    decisions.update(&id, UpdateDecision { notes: Some(format!("writer {writer} note {note}")), ..UpdateDecision::default() }).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let detail = decisions.get(&id, false).unwrap().decision;
    assert_eq!((detail.notes.len(), detail.revision), (40, 41));
}
