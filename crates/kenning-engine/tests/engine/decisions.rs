//! The decision service over real SQLite stores: validation with field errors, status
//! transitions, signals and the estimate they move, outcomes with lessons, queries, the causal
//! chain, and concurrent updates.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeZone, Utc};
use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList, OutcomeInput, SignalInput, UpdateDecision};
use kenning_core::{Domain, FieldError, MemoryStore};
use kenning_engine::{ChainAnalysis, Clock, DecisionDomain, DecisionQuery, DecisionService, DomainStore, Error, MemoryService, RecallRequest};
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

/// A decision log entry (the coding-agent spec's `decision_log`) names no confidence, module or
/// alternatives: it is kept, filed under `general`, followed to its outcome, and left out of
/// calibration, which has no stated confidence to compare.
#[test]
fn a_decision_without_confidence_module_or_alternatives_is_kept_and_not_calibrated() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let entry = CaptureDecision {
        statement: "Use Redis for the session cache".into(),
        problem: Some("Sessions are lost on every deploy".into()),
        risks: vec!["Redis is one more service to run".into()],
        rationale: Some("Fast and already in the stack".into()),
        ..CaptureDecision::default()
    };
    let captured = decisions.capture(entry, None).unwrap();
    assert_eq!((captured.confidence, captured.module.as_str()), (None, "general"));
    assert_eq!(captured.warnings.len(), 3, "{:?}", captured.warnings);
    assert!(captured.warnings[0].contains("does not count toward calibration"), "{:?}", captured.warnings);
    let detail = decisions.get(&captured.decision_id, ChainAnalysis::Omitted).unwrap().decision;
    assert_eq!((detail.problem.as_deref(), detail.risks.as_slice()), (Some("Sessions are lost on every deploy"), &["Redis is one more service to run".to_owned()][..]));
    assert!(detail.alternatives.is_empty());
    let memory = decisions.memory().get(&captured.urn).unwrap();
    assert!(memory.content.contains("- problem: Sessions are lost on every deploy") && memory.content.contains("- confidence: not stated"), "{}", memory.content);

    let outcome = OutcomeInput { final_status: "problematic".into(), notes: Some("Evictions under load".into()), ..OutcomeInput::default() };
    let recorded = decisions.record_outcome(&captured.decision_id, outcome).unwrap();
    assert_eq!((recorded.final_status.as_str(), recorded.final_score), ("partial", 0.5));
    assert_eq!(recorded.calibration_impact.sample_size, 0, "no stated confidence, nothing to calibrate");
    let detail = decisions.get(&captured.decision_id, ChainAnalysis::Omitted).unwrap().decision;
    assert_eq!(detail.outcome.unwrap().notes.as_deref(), Some("Evictions under load"));

    // An empty list says nothing was weighed: seed 000's missing_alternatives.
    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "database", 0.7, &[]), None));
    assert_eq!(error.field, "alternatives");
}

/// Seed 000's `decision_domain` on an outcome must name the decision's own module.
#[test]
fn an_outcome_names_the_module_of_its_decision_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let id = decisions.capture(capture("Use PostgreSQL for orders", "database", 0.8, &["MongoDB"]), None).unwrap().decision_id;
    let wrong = OutcomeInput { final_status: "success".into(), module: Some("auth".into()), ..OutcomeInput::default() };
    let error = invalid(decisions.record_outcome(&id, wrong));
    assert_eq!((error.field.as_str(), error.received.clone()), ("decision_domain", serde_json::json!("auth")));
    let right = OutcomeInput { final_status: "success".into(), module: Some("database".into()), ..OutcomeInput::default() };
    assert_eq!(decisions.record_outcome(&id, right).unwrap().calibration_impact.module, "database");
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

    let mut risky = capture("Use PostgreSQL for orders", "database", 0.7, &["MongoDB"]);
    risky.risk_level = Some("extreme".into());
    assert_eq!(invalid(decisions.capture(risky, None)).field, "risk_level");
    let error = invalid(decisions.capture(capture("Use PostgreSQL for orders", "database", 0.7, &["MongoDB"]), Some("org")));
    assert_eq!(error.field, "domain");

    for bad in ["dec-1", "DEC_1", "dec_", "dec_ABC", "abc"] {
        let error = invalid(decisions.get(bad, ChainAnalysis::Omitted));
        assert_eq!((error.field.as_str(), error.received.clone()), ("decision_id", serde_json::json!(bad)));
    }
    assert!(matches!(decisions.get("dec_0000000000", ChainAnalysis::Omitted), Err(Error::DecisionNotFound { .. })));
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

    let detail = decisions.get(&captured.urn, ChainAnalysis::Omitted).unwrap();
    assert_eq!(detail.decision.decision_id, captured.decision_id, "a decision can be named by its URN");
    assert_eq!(detail.decision.alternatives, ["MongoDB", "SQLite"]);
    assert_eq!(detail.estimated_success, 0.8);

    let user = decisions.capture(capture("Prefer small pull requests for reviews", "backend", 0.6, &["Large PRs"]), Some("user")).unwrap();
    assert!(user.urn.starts_with("kenning://user/decisions/dec_"));
    assert_eq!(decisions.get(&user.decision_id, ChainAnalysis::Omitted).unwrap().decision.domain, "user", "get looks in every domain");
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
    assert_eq!((updated.confidence, updated.revision), (Some(0.4), 4));
    let detail = decisions.get(&id, ChainAnalysis::Omitted).unwrap().decision;
    assert_eq!((detail.confidence, detail.current_confidence), (Some(0.6), Some(0.4)), "calibration keeps the stated confidence");
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
    assert_eq!(decisions.get(&id, ChainAnalysis::Omitted).unwrap().estimated_success, 0.52);

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
        ..OutcomeInput::default()
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

    let detail = decisions.get(&id, ChainAnalysis::Included).unwrap();
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

    let similar = decisions.get(&billing, ChainAnalysis::Omitted).unwrap().similar_decisions;
    let found: Vec<(&str, &str, Option<f64>)> =
        similar.iter().map(|s| (s.decision_id.as_str(), s.relation.as_str(), s.success_rate)).collect();
    // {postgresql, billing, service} against {postgresql, order, service}: Dice 4/6; against
    // {mongodb, order, service}: 2/6, above the 0.3 threshold, and a contrast because that
    // decision rejected PostgreSQL; the invoice shares nothing.
    assert_eq!(found, [(orders.as_str(), "alike", Some(0.9)), (mongo.as_str(), "contrast", None)]);
    assert_eq!((similar[0].similarity, similar[1].similarity), (0.6667, 0.3333));
    assert_eq!(similar[0].confidence_difference, Some(-0.1));
    let from_mongo = decisions.get(&mongo, ChainAnalysis::Omitted).unwrap().similar_decisions;
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
    let detail = decisions.get(&id, ChainAnalysis::Omitted).unwrap().decision;
    assert_eq!((detail.notes.len(), detail.revision), (40, 41));
}

/// Captures a decision and records its outcome; returns its id.
fn decided(decisions: &DecisionService, statement: &str, module: &str, confidence: f64, alternative: &str, status: &str, lesson: Option<&str>) -> String {
    let id = decisions.capture(capture(statement, module, confidence, &[alternative]), None).unwrap().decision_id;
    let outcome = OutcomeInput {
        final_status: status.into(),
        lessons_learned: lesson.map(|lesson| vec![lesson.to_owned()]).unwrap_or_default(),
        ..OutcomeInput::default()
    };
    decisions.record_outcome(&id, outcome).unwrap();
    id
}

/// Seed 000's `analyze_decision`: the antipatterns a decision went against, and how an
/// outcome steered the similar decisions made after it.
#[test]
fn analysis_reports_antipatterns_avoided_and_prevention_effectiveness() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let first = decided(&decisions, "Use MongoDB for the user store", "database", 0.8, "PostgreSQL", "failure", Some("No transactions across users"));
    for service_name in ["orders", "billing"] {
        decided(&decisions, &format!("Use MongoDB for the {service_name} store"), "database", 0.8, "PostgreSQL", "failure", None);
    }
    let chosen = decisions.capture(capture("Use PostgreSQL for the user store", "database", 0.8, &["MongoDB"]), None).unwrap().decision_id;

    let analysis = decisions.get(&chosen, ChainAnalysis::Included).unwrap().analysis.unwrap();
    assert_eq!(analysis.antipatterns_avoided.len(), 1, "{:?}", analysis.antipatterns_avoided);
    assert!(analysis.antipatterns_avoided[0].pattern.contains("MongoDB"), "{:?}", analysis.antipatterns_avoided);
    assert_eq!(analysis.prevention_effectiveness, None, "no outcome yet, nothing to steer by");

    let prevention = decisions.get(&first, ChainAnalysis::Included).unwrap().analysis.unwrap().prevention_effectiveness.unwrap();
    assert!(prevention.prevented_issue.starts_with("Use MongoDB for the user store (failure"), "{}", prevention.prevented_issue);
    assert_eq!((prevention.prevented_decisions, prevention.repeated_decisions), (1, 2), "{prevention:?}");
    assert_eq!(prevention.prevented_ids, [chosen.clone()]);
    assert_eq!(prevention.effectiveness, Some(0.3333));

    // The warnings of a proposal like the failures, with seed 000's `domain` naming the module.
    let warnings = decisions
        .warnings(kenning_engine::decisions::ContextQuery {
            statement: "Use MongoDB for the audit store".into(),
            domain: Some("database".into()),
            confidence: Some(0.9),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(warnings.module, "database");
    assert!(warnings.warnings.iter().any(|warning| warning.kind == "antipattern"), "{warnings:?}");
    assert!(warnings.risk_score > 0.3 && warnings.firewall_status != "ok", "{warnings:?}");
}

#[test]
fn calibration_leaves_out_the_trend_and_interval_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    decided(&decisions, "Add a GraphQL gateway for mobile", "api", 0.8, "REST", "success", None);
    let query = |include_trend, include_credible_interval| kenning_engine::decisions::CalibrationQuery {
        domain: Some("api".into()),
        include_trend,
        include_credible_interval,
        ..Default::default()
    };
    let full = decisions.calibration(query(None, None)).unwrap().calibration.unwrap();
    assert_eq!((full.module.as_str(), full.trend.is_some(), full.credible_interval_95.is_some()), ("api", true, true));
    let bare = decisions.calibration(query(Some(false), Some(false))).unwrap().calibration.unwrap();
    assert_eq!((bare.trend, bare.trend_detail, bare.credible_interval_95), (None, None, None));
}

#[test]
fn skills_are_created_updated_and_retired_as_outcomes_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let services = ["orders", "billing", "inventory", "shipping", "returns", "search", "reviews", "payments", "refunds"];
    let mut ids = Vec::new();
    let mut changes = Vec::new();
    for (number, service_name) in services.iter().enumerate() {
        // Four successes, then five failures: 4 of 4, then 4 of 9.
        let status = if number < 4 { "success" } else { "failure" };
        let id = decisions.capture(capture(&format!("Use PostgreSQL for the {service_name} service"), "database", 0.8, &["MongoDB"]), None).unwrap().decision_id;
        let recorded = decisions.record_outcome(&id, OutcomeInput { final_status: status.into(), ..OutcomeInput::default() }).unwrap();
        changes.push(recorded.skills.iter().map(|change| format!("{} {}", change.kind, change.change)).collect::<Vec<_>>());
        ids.push(id);
    }
    let anchor = &ids[0][4..];
    assert_eq!(changes[1], Vec::<String>::new(), "two outcomes are not a pattern yet");
    assert_eq!(changes[2], ["skill created"]);
    assert_eq!(changes[3], ["skill updated"]);
    // 4 of 8 is still a skill (success rate 0.5); 4 of 9 makes it an antipattern.
    assert_eq!(changes[7], ["skill updated"]);
    assert_eq!(changes[8], ["antipattern created", "skill retired"]);

    let skill_urn = format!("kenning://project:my-app/patterns/sk_{anchor}");
    let skill = decisions.memory().get(&skill_urn).unwrap();
    assert_eq!((skill.status.as_str(), skill.kind.as_str()), ("forgotten", "procedural"));
    let history = decisions.memory().history(&skill_urn).unwrap();
    let retirement = &history.versions[0].reason;
    assert!(retirement.contains(&format!("antipattern ap_{anchor}")) && retirement.contains("0.44 over 9"), "{retirement}");
    // While it was a skill, 4 of 4 gave the 95% lower bound of Beta(5, 1): 0.05^(1/5).
    let four_of_four = history.versions.iter().find(|version| version.memory.metadata["total_outcomes"] == "4").unwrap();
    assert!((four_of_four.memory.confidence - 0.05f64.powf(1.0 / 5.0)).abs() < 1e-12);
    assert_eq!(four_of_four.memory.links.len(), 4);
    assert!(four_of_four.memory.links.iter().all(|link| link.relation == "evidenced-by"));

    let antipattern = decisions.memory().get(&format!("kenning://project:my-app/patterns/ap_{anchor}")).unwrap();
    assert_eq!(antipattern.status, "active");
    assert_eq!(antipattern.metadata["success_rate"], "0.444444");
    // The failure rate's lower bound is the 5% quantile of Beta(1 + 5, 1 + 4).
    let view = decisions.skills(kenning_engine::decisions::SkillsQuery { module: Some("database".into()), ..Default::default() }).unwrap();
    assert!(view.skills.is_empty());
    assert_eq!(view.antipatterns[0].antipattern_id, format!("ap_{anchor}"));
    let expected = kenning_core::calibration::beta_quantile(0.05, 6.0, 5.0);
    assert!((view.antipatterns[0].confidence - expected).abs() < 1e-12);
    assert_eq!(view.antipatterns[0].severity, "medium", "the upper bound of success is not below one half");

    // The first decision's chain now reaches the retired skill and the antipattern.
    let chain = decisions.get(&ids[0], ChainAnalysis::Included).unwrap().analysis.unwrap().causal_chain;
    let mut skills: Vec<(String, &str)> =
        chain.skills.iter().map(|skill| (skill.urn.rsplit('/').next().unwrap().to_owned(), skill.status.as_str())).collect();
    skills.sort();
    assert_eq!(skills, [(format!("ap_{anchor}"), "active"), (format!("sk_{anchor}"), "forgotten")]);
    // A new decision like them triggers the antipattern.
    let next = decisions.capture(capture("Use PostgreSQL for the ledger service", "database", 0.7, &["MongoDB"]), None).unwrap().decision_id;
    let triggered = decisions.get(&next, ChainAnalysis::Omitted).unwrap().antipatterns_triggered;
    assert_eq!(triggered.len(), 1);
    assert_eq!(triggered[0].antipattern_id, format!("ap_{anchor}"));
}

#[test]
fn the_estimate_starts_from_the_module_record_once_it_has_three_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    decided(&decisions, "Cache product pages in Redis", "backend", 0.9, "No cache", "success", None);
    decided(&decisions, "Queue emails through SQS", "backend", 0.9, "Send inline", "failure", None);
    let id = decisions.capture(capture("Move thumbnails to a worker", "backend", 0.9, &["Inline"]), None).unwrap().decision_id;
    let ci = || SignalInput { signal_type: "ci_passed".into(), valence: "positive".into(), ..SignalInput::default() };
    let early = decisions.record_signal(&id, ci()).unwrap();
    assert_eq!((early.prior_source.as_str(), early.prior), ("stated_confidence", 0.9));
    decided(&decisions, "Batch search indexing hourly", "backend", 0.9, "Realtime", "partial", None);
    // Three outcomes scoring 1, 0 and 0.5: Beta(1 + 1.5, 1 + 1.5), mean 0.5; with two CI passes
    // the estimate is (0.5 · 2 + 2) / (2 + 2) = 0.75.
    let later = decisions.record_signal(&id, ci()).unwrap();
    assert_eq!((later.prior_source.as_str(), later.prior, later.estimated_success), ("module_calibration", 0.5, 0.75));
}

#[test]
fn calibration_modes_and_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let query = |mode: Option<&str>, module: Option<&str>, confidence: Option<f64>| kenning_engine::decisions::CalibrationQuery {
        mode: mode.map(str::to_owned),
        module: module.map(str::to_owned),
        confidence,
        ..Default::default()
    };
    decided(&decisions, "Add a GraphQL gateway for mobile", "api", 0.8, "REST", "success", None);
    decided(&decisions, "Version the API in the URL path", "api", 0.8, "Headers", "failure", None);

    let few = decisions.calibration(query(None, Some("api"), None)).unwrap();
    let view = few.calibration.unwrap();
    assert_eq!((few.mode.as_str(), view.status.as_str(), view.sample_size), ("module", "insufficient_data", 2));
    assert!(view.recommendation.contains("3 are needed"), "{}", view.recommendation);
    let advice = decisions.calibration(query(None, Some("api"), Some(0.9))).unwrap().guidance.unwrap();
    assert_eq!((advice.status.as_str(), advice.suggested_confidence, advice.adjustment), ("no_data", None, None));

    decided(&decisions, "Paginate list endpoints with cursors", "api", 0.8, "Offsets", "success", None);
    // 2 of 3 succeeded: a proposed 0.9 moves 3/13 of the way to the observed 2/3 (shrunk once;
    // the posterior mean 0.6 of Beta(3, 2) is the gap's reference, not the guidance's).
    let advice = decisions.calibration(query(Some("guidance"), Some("api"), Some(0.9))).unwrap().guidance.unwrap();
    assert_eq!(advice.status, "data_available");
    assert!((advice.suggested_confidence.unwrap() - (0.9 + (2.0 / 3.0 - 0.9) * 3.0 / 13.0)).abs() < 1e-12);
    assert!((advice.confidence_gap - 0.3).abs() < 1e-12);

    let all = decisions.calibration(query(None, None, None)).unwrap().all.unwrap();
    assert_eq!(all.modules.iter().map(|summary| summary.module.as_str()).collect::<Vec<_>>(), ["api"]);
    assert_eq!(all.overall.sample_size, 3);

    assert_eq!(invalid(decisions.calibration(query(Some("everything"), None, None))).field, "mode");
    assert_eq!(invalid(decisions.calibration(query(Some("guidance"), Some("api"), None))).field, "confidence");
    assert_eq!(invalid(decisions.calibration(query(Some("guidance"), Some("api"), Some(2.0)))).field, "confidence");
    let error = invalid(decisions.calibration(query(None, Some("apis"), None)));
    assert!(error.field == "module" && error.suggestion.contains("did you mean `api`"), "{error:?}");
    let sorted = kenning_engine::decisions::CalibrationQuery { sort_by: Some("luck".into()), ..query(Some("all"), None, None) };
    assert_eq!(invalid(decisions.calibration(sorted)).field, "sort_by");
}

#[test]
fn warnings_weigh_into_a_risk_score_and_a_firewall_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let context = |statement: &str, module: &str, confidence: Option<f64>, alternatives: Option<Vec<&str>>, risk: Option<&str>| {
        decisions
            .context(kenning_engine::decisions::ContextQuery {
                statement: statement.into(),
                module: Some(module.into()),
                confidence,
                alternatives: alternatives.map(|alternatives| alternatives.into_iter().map(str::to_owned).collect()),
                risk_level: risk.map(str::to_owned),
                depth: Some("minimal".into()),
                domain: None,
            })
            .unwrap()
    };
    // An empty module and a high-risk proposal with one alternative: medium and low, 1 - 0.7 · 0.9.
    let view = context("Rewrite the deploy pipeline in Bazel", "infra", Some(0.6), Some(vec!["Keep Make"]), Some("high"));
    let kinds: Vec<(&str, &str)> = view.warnings.iter().map(|warning| (warning.kind.as_str(), warning.severity.as_str())).collect();
    assert_eq!(kinds, [("high_risk_little_evidence", "medium"), ("single_alternative", "low")]);
    assert_eq!((view.risk_score, view.firewall_status.as_str()), (0.37, "caution"));
    assert!(view.similar_decisions.is_empty() && view.applicable_skills.is_empty(), "minimal depth");

    // Four failed Redis-session decisions: an antipattern of high severity, since the failure
    // rate's lower bound, 0.05^(1/5) = 0.549, is above one half.
    for app in ["admin app", "mobile API", "partner portal", "support desk"] {
        decided(&decisions, &format!("Store sessions in Redis for the {app}"), "auth", 0.9, "Signed cookies", "failure", Some("Redis restarts log everyone out"));
    }
    // Four outcomes scoring 0: Beta(1, 5), whose 97.5% quantile 1 - 0.025^(1/5) = 0.522 is below
    // 0.95, and 0.95 exceeds the mean 1/6 by more than 0.25: overconfidence of high severity.
    let view = context("Store sessions in Redis for the billing app", "auth", Some(0.95), Some(vec!["Signed cookies", "JWT"]), None);
    let kinds: Vec<(&str, &str)> = view.warnings.iter().map(|warning| (warning.kind.as_str(), warning.severity.as_str())).collect();
    assert_eq!(kinds, [("antipattern", "high"), ("overconfidence", "high")]);
    assert_eq!((view.risk_score, view.firewall_status.as_str()), (0.75, "block"));
    assert!(view.warnings[0].recommendation.contains("Redis restarts log everyone out"));
    assert!(view.markdown.contains("**Firewall:** block (risk 0.75)"), "{}", view.markdown);

    // Choosing what those decisions rejected is a contrast, not the pattern.
    let view = context("Store sessions in signed cookies for the billing app", "auth", None, None, None);
    assert!(view.warnings.is_empty(), "{:?}", view.warnings);
    assert_eq!((view.risk_score, view.firewall_status.as_str()), (0.0, "ok"));

    let full = decisions
        .context(kenning_engine::decisions::ContextQuery {
            statement: "Store sessions in Redis for the billing app".into(),
            module: Some("auth".into()),
            depth: Some("full".into()),
            ..Default::default()
        })
        .unwrap();
    let causal = full.causal_context.unwrap();
    assert_eq!(causal.previous_failed_decisions.len(), 4);
    assert_eq!(causal.lessons_learned, ["Redis restarts log everyone out"]);
    // {store, session, redis, billing, app} shares four words with the admin app's: Dice 0.8, the others 0.6.
    assert!(full.markdown.contains("### Similar Decisions:\n- ❌ Store sessions in Redis for the admin app (0% success)\n"), "{}", full.markdown);
    assert!(full.markdown.contains("### Lessons:\n- Redis restarts log everyone out\n"), "{}", full.markdown);

    let error = invalid(decisions.context(kenning_engine::decisions::ContextQuery { statement: "x".repeat(20), depth: Some("deep".into()), ..Default::default() }));
    assert_eq!(error.field, "depth");
    assert_eq!(invalid(decisions.context(kenning_engine::decisions::ContextQuery { statement: "  ".into(), ..Default::default() })).field, "statement");
}

#[test]
fn anomalies_name_a_module_whose_success_rate_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    for (number, status) in ["success", "success", "success", "failure", "failure", "failure"].iter().enumerate() {
        decided(&decisions, &format!("Frontend change number {number} to the checkout page"), "frontend", 0.5, "Leave it", status, None);
    }
    // Earlier Beta(4, 1) against recent Beta(1, 4): P(recent better) = 1/70 < 0.05.
    let view = decisions.anomalies(None).unwrap();
    let found: Vec<(&str, &str)> = view.anomalies.iter().map(|anomaly| (anomaly.module.as_str(), anomaly.kind.as_str())).collect();
    assert_eq!(found, [("frontend", "success_rate_dropped"), ("all", "success_rate_dropped")]);
    assert!(view.anomalies[0].message.contains("80%") && view.anomalies[0].message.contains("20%"), "{}", view.anomalies[0].message);
}

#[test]
fn secrets_in_decision_inputs_are_redacted_before_they_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let (aws, github, slack) = (concat!("AKI", "A7QX3MZ2LP9WTR4KD"), concat!("ghp", "_Zr8kLm2Qp9Xv4Tn6Bw1Yc3Hd5Fj7Gs0Ka2Ue"), concat!("xox", "b-2048-4096-Zr8kLm2Qp9Xv4Tn6"));
    let input = CaptureDecision {
        statement: format!("Deploy with the CI user {aws}"),
        alternatives: Some(vec!["Deploy by hand".into(), "Use postgres://admin:Kx9pl4ne42@db.internal/orders".into()]),
        confidence: Some(0.7),
        module: Some("infra".into()),
        assumptions: vec![format!("The token {github} stays valid")],
        rationale: Some("DB_PASSWORD=Kx9-pl4ne-42 is already in the runner".into()),
        ..CaptureDecision::default()
    };
    let captured = decisions.capture(input, None).unwrap();
    let fields: Vec<(&str, &str)> = captured.redacted.iter().map(|r| (r.field.as_str(), r.kind.as_str())).collect();
    assert_eq!(fields.len(), 4, "{fields:?}");
    for field in ["statement", "rationale", "assumptions[0]", "alternatives[1]"] {
        assert!(fields.iter().any(|(name, _)| *name == field), "{field} not reported: {fields:?}");
    }
    assert!(captured.warnings.iter().any(|warning| warning.contains("4 secrets were replaced")), "{:?}", captured.warnings);

    let notes = UpdateDecision { notes: Some(format!("Slack bot {slack} posts the deploys")), ..UpdateDecision::default() };
    let updated = decisions.update(&captured.decision_id, notes).unwrap();
    assert_eq!(updated.redacted.iter().map(|r| r.field.as_str()).collect::<Vec<_>>(), ["notes"]);
    let signal = SignalInput {
        signal_type: "ci_failed".into(),
        valence: "negative".into(),
        description: Some(format!("CI printed {github}")),
        metrics: [("log".to_owned(), serde_json::json!(["ok", format!("key {aws}")]))].into(),
    };
    let recorded = decisions.record_signal(&captured.decision_id, signal).unwrap();
    let fields: Vec<&str> = recorded.redacted.iter().map(|r| r.field.as_str()).collect();
    assert_eq!(fields, ["description", "metrics.log[1]"]);
    let outcome = OutcomeInput {
        final_status: "failure".into(),
        lessons_learned: vec![format!("Never paste {github} into a decision")],
        signals: [("incident".to_owned(), serde_json::json!(format!("leaked {slack}")))].into(),
        ..OutcomeInput::default()
    };
    let finished = decisions.record_outcome(&captured.decision_id, outcome).unwrap();
    let fields: Vec<&str> = finished.redacted.iter().map(|r| r.field.as_str()).collect();
    assert_eq!(fields, ["lessons_learned[0]", "signals.incident"]);
    assert!(!finished.warnings.is_empty());

    // Nothing stored, in the decision, its memory, the lesson or the history, holds a secret.
    let detail = serde_json::to_string(&decisions.get(&captured.decision_id, ChainAnalysis::Included).unwrap()).unwrap();
    let history = serde_json::to_string(&decisions.memory().history(&captured.urn).unwrap()).unwrap();
    let lesson = serde_json::to_string(&decisions.memory().get(&finished.lesson_urns[0]).unwrap()).unwrap();
    for text in [&detail, &history, &lesson] {
        for secret in [aws, github, slack, "Kx9pl4ne42", "Kx9-pl4ne-42"] {
            assert!(!text.contains(secret), "{secret} was stored: {text}");
        }
    }
    assert!(detail.contains("[REDACTED:github-token]"), "{detail}");
}

/// Regression: a decision's memory was rebuilt from all its notes and hit an `expect` once that
/// passed the 64 KiB memory limit (four notes of 4,000 emoji were enough), after which neither an
/// outcome nor a confidence update could ever be recorded.
#[test]
fn a_decision_with_many_long_notes_still_takes_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let id = decisions.capture(capture("Use PostgreSQL for the orders service", "database", 0.8, &["MongoDB"]), None).unwrap().decision_id;
    // A thousand emoji are 4,000 bytes: the largest note, however it is counted.
    let long_note = |n: usize| format!("{n:02} {}", "😀".repeat(999));
    for n in 0..30 {
        decisions.update(&id, UpdateDecision { notes: Some(long_note(n)), ..UpdateDecision::default() }).unwrap();
    }
    decisions.update(&id, UpdateDecision { confidence: Some(0.6), ..UpdateDecision::default() }).unwrap();
    decisions.record_outcome(&id, OutcomeInput { final_status: "success".into(), ..OutcomeInput::default() }).unwrap();

    let memory = decisions.memory().get(&format!("kenning://project:my-app/decisions/{id}")).unwrap();
    assert!(memory.content.len() <= kenning_core::input::MAX_CONTENT_BYTES);
    assert!(memory.content.contains(&long_note(29)), "the latest note is shown");
    assert!(!memory.content.contains(&long_note(0)), "the oldest notes give way");
    assert!(memory.content.contains("earlier notes are kept in the decision record"), "{}", &memory.content[..400]);
    assert_eq!(decisions.get(&id, ChainAnalysis::Omitted).unwrap().decision.notes.len(), 30, "the record keeps every note");

    // A note longer than 4,000 bytes is refused, in bytes, not characters.
    let error = invalid(decisions.update(&id, UpdateDecision { notes: Some("😀".repeat(1001)), ..UpdateDecision::default() }));
    assert_eq!(error.field, "notes");
    assert!(error.problem.contains("4004 bytes"), "{}", error.problem);
}

#[test]
fn a_decision_keeps_at_most_a_hundred_notes() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let id = decisions.capture(capture("Cache sessions in Redis for the API", "api", 0.7, &["Memcached"]), None).unwrap().decision_id;
    for n in 0..kenning_core::decision::input::MAX_NOTES {
        decisions.update(&id, UpdateDecision { notes: Some(format!("note {n}")), ..UpdateDecision::default() }).unwrap();
    }
    let error = invalid(decisions.update(&id, UpdateDecision { notes: Some("one more".into()), ..UpdateDecision::default() }));
    assert_eq!(error.field, "notes");
    assert!(error.suggestion.contains("decision_record_outcome"), "{}", error.suggestion);
    decisions.record_outcome(&id, OutcomeInput { final_status: "partial".into(), ..OutcomeInput::default() }).unwrap();
}

/// Regression: `decision_query` text took the recall path with no bound on its size.
#[test]
fn decision_query_text_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let decisions = service(&dir);
    let query = DecisionQuery { text: Some("orders ".repeat(200_000)), ..DecisionQuery::default() };
    let error = invalid(decisions.query(query));
    assert_eq!(error.field, "text");
    assert!(error.problem.contains("16384-byte limit"), "{}", error.problem);
}
