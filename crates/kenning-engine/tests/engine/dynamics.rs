//! Memory dynamics over real SQLite stores and the built-in embedder, on a clock the tests move:
//! decay by kind, reinforcement by retrieval, dormancy, confidence in recall's ranking and its
//! `min_confidence`, and near-duplicate captures reinforcing what is stored.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use kenning_core::confidence::{Deduplication, evidence_counts};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::views::RecallPage;
use kenning_engine::{Clock, DomainStore, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;

/// A clock the test sets, in hours after its start.
struct TestClock(AtomicI64);

impl TestClock {
    fn start() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap()
    }

    fn set_days(&self, days: f64) {
        self.0.store((days * 24.0).round() as i64, Ordering::Relaxed);
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        TestClock::start() + TimeDelta::hours(self.0.load(Ordering::Relaxed))
    }
}

fn service(dir: &tempfile::TempDir) -> (MemoryService, Arc<TestClock>, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let clock = Arc::new(TestClock(AtomicI64::new(0)));
    let memory = MemoryService::new(
        vec![DomainStore { domain: Domain::User, store: store.clone() as Arc<dyn MemoryStore> }],
        super::builtin_embedder(),
    )
    .with_clock(clock.clone());
    (memory, clock, store)
}

fn note(content: &str, kind: &str) -> CaptureInput {
    CaptureInput {
        content: content.into(),
        kind: Some(kind.into()),
        namespace: Some("learnings".into()),
        source: Some("told-by-user".into()),
        ..CaptureInput::default()
    }
}

fn recall(memory: &MemoryService, query: &str) -> RecallPage {
    memory.recall(RecallRequest { query: query.into(), ..RecallRequest::default() }).unwrap()
}

fn confidence_of(page: &RecallPage, urn: &str) -> Option<f64> {
    page.results.iter().find(|hit| hit.urn == urn).map(|hit| hit.confidence)
}

#[test]
fn confidence_decays_by_kind_over_simulated_time() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock, _) = service(&dir);
    let episode = memory.capture(note("The nightly ingest job failed on the orders partition", "episodic"), None).unwrap().urn;
    let fact = memory.capture(note("The orders partition is rebuilt by the nightly ingest job", "semantic"), None).unwrap().urn;
    let procedure = memory.capture(note("To rerun the nightly ingest job for orders, clear the partition lock first", "procedural"), None).unwrap().urn;

    // A week on, nothing retrieved since capture: the episode has lost half, the others less.
    clock.set_days(7.0);
    let week = memory.recall(RecallRequest { query: "nightly ingest orders partition".into(), include_dormant: true, ..RecallRequest::default() }).unwrap();
    let expected = [(&episode, 0.45), (&fact, 0.9 * (-7.0f64 / 30.0).exp2()), (&procedure, 0.9 * (-7.0f64 / 90.0).exp2())];
    for (urn, confidence) in expected {
        let now = confidence_of(&week, urn).unwrap();
        assert!((now - confidence).abs() < 0.001, "{urn}: {now}, expected {confidence}");
    }
}

#[test]
fn an_unused_episode_goes_dormant_and_include_dormant_brings_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock, _) = service(&dir);
    let episode = memory.capture(note("Staging deploy blocked by an expired TLS certificate on the load balancer", "episodic"), None).unwrap().urn;
    let fact = memory.capture(note("The load balancer certificate for staging is renewed by certbot", "semantic"), None).unwrap().urn;

    clock.set_days(30.0);
    let default = recall(&memory, "staging load balancer certificate");
    assert_eq!(default.results.iter().map(|hit| hit.urn.as_str()).collect::<Vec<_>>(), [fact.as_str()]);

    let all = memory
        .recall(RecallRequest { query: "staging load balancer certificate".into(), include_dormant: true, ..RecallRequest::default() })
        .unwrap();
    let dormant = all.results.iter().find(|hit| hit.urn == episode).expect("include_dormant returns the dormant episode");
    assert!(dormant.dormant && dormant.confidence < 0.1, "{dormant:?}");
    assert!(!all.results.iter().find(|hit| hit.urn == fact).unwrap().dormant);
}

#[test]
fn a_read_shows_the_confidence_as_it_stood_and_then_reinforces_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock, _) = service(&dir);
    let episode = memory.capture(note("The nightly backup of the billing database took four hours", "episodic"), None).unwrap().urn;
    clock.set_days(30.0);
    let read = memory.get(&episode).unwrap();
    assert!(read.dormant && read.confidence_now.unwrap() < 0.1 && read.confidence == 0.9, "{read:?}");
    let again = memory.get(&episode).unwrap();
    assert!(!again.dormant && again.confidence_now == Some(0.9), "the first read restarted its clock: {again:?}");
}

#[test]
fn retrieval_reinforces_a_memory_against_decay() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock, store) = service(&dir);
    let used = memory.capture(note("Run cargo test with --test-threads 1 for the migration suite", "episodic"), None).unwrap().urn;
    let unused = memory.capture(note("Run cargo test with --release for the migration benchmarks", "episodic"), None).unwrap().urn;

    // One memory is read every five days, the other never.
    for day in [5.0, 10.0, 15.0, 20.0] {
        clock.set_days(day);
        memory.get(&used).unwrap();
    }
    // The reinforcement is persisted with the record, not kept in the process. (Read before the
    // recall below, whose own reads are recorded in the background.)
    let id = kenning_core::MemoryId::parse(used.rsplit('/').next().unwrap()).unwrap();
    assert_eq!(store.get(&id).unwrap().unwrap().access_count, 4);
    clock.set_days(25.0);
    let page = memory
        .recall(RecallRequest { query: "cargo test migration".into(), include_dormant: true, ..RecallRequest::default() })
        .unwrap();
    let (used_now, unused_now) = (confidence_of(&page, &used).unwrap(), confidence_of(&page, &unused).unwrap());
    assert!(used_now > 0.55 && unused_now < 0.1, "used {used_now}, unused {unused_now}");
    assert_eq!(page.results[0].urn, used, "the reinforced memory ranks first");
}

#[test]
fn min_confidence_applies_to_confidence_now_not_as_stated() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock, _) = service(&dir);
    let old = memory.capture(note("The search service caches query plans for ten minutes", "episodic"), None).unwrap().urn;
    clock.set_days(10.0);
    let new = memory.capture(note("The search service caches query results for one minute", "episodic"), None).unwrap().urn;
    let page = memory
        .recall(RecallRequest { query: "search service caches".into(), min_confidence: Some(0.5), ..RecallRequest::default() })
        .unwrap();
    assert_eq!(page.results.iter().map(|hit| hit.urn.as_str()).collect::<Vec<_>>(), [new.as_str()], "the older was stated at 0.9 but is at 0.34 now");
    assert!(page.results.iter().all(|hit| hit.urn != old));
}

#[test]
fn confidence_orders_memories_of_like_relevance() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _, _) = service(&dir);
    let text = "The flaky login test depends on the system timezone";
    let capture = |namespace: &str, source: &str| {
        let input = CaptureInput { namespace: Some(namespace.into()), source: Some(source.into()), ..note(text, "semantic") };
        memory.capture(input, None).unwrap().urn
    };
    let guessed = capture("learnings", "model-generated");
    let observed = capture("testing", "direct-observation");
    let page = recall(&memory, "flaky login test timezone");
    let order: Vec<&str> = page.results.iter().map(|hit| hit.urn.as_str()).collect();
    assert_eq!(order, [observed.as_str(), guessed.as_str()], "equal relevance, so the better source ranks first");
    assert_eq!(page.results[0].relevance, page.results[1].relevance);
    assert_eq!((page.results[0].confidence, page.results[1].confidence), (0.95, 0.6));
    assert_eq!((page.results[0].score, page.results[1].score), (0.975, 0.8));
}

#[test]
fn a_near_duplicate_capture_reinforces_the_stored_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _, store) = service(&dir);
    let first = memory.capture(note("The CI cache must be cleared after bumping the Rust toolchain.", "semantic"), None).unwrap();
    let again = memory.capture(note("the CI cache must be cleared after bumping the rust toolchain!", "semantic"), None).unwrap();
    assert!(!again.created && again.reinforced, "{again:?}");
    assert_eq!(again.urn, first.urn);
    assert!(again.warnings.iter().any(|warning| warning.contains("reinforced (confirmed 1 time)")), "{:?}", again.warnings);
    let third = memory.capture(note("After bumping the Rust toolchain, the CI cache must be cleared.", "semantic"), None).unwrap();
    assert!(third.reinforced && third.urn == first.urn, "{third:?}");

    let stats = store.stats().unwrap();
    assert_eq!(stats.by_status["active"], 1, "no second copy was stored");
    let id = kenning_core::MemoryId::parse(first.urn.rsplit('/').next().unwrap()).unwrap();
    let stored = store.get(&id).unwrap().unwrap();
    assert_eq!(evidence_counts(&stored.metadata).supporting, 2);
    assert_eq!(stored.version, 3, "each confirmation is a version with its reason");
    let history = store.history(&id).unwrap();
    let kept = [again.kept_as.clone().unwrap(), third.kept_as.clone().unwrap()];
    assert!(history.iter().zip(&kept).all(|(version, kept)| version.reason.starts_with(&format!("merged {kept}, a capture making the same claim"))), "{history:?}");
    let page = recall(&memory, "CI cache Rust toolchain");
    assert!(page.results[0].confidence > 0.9, "confirmed twice, stated 0.9: {}", page.results[0].confidence);
}

#[test]
fn identical_changed_and_other_namespace_captures_do_not_reinforce() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _, store) = service(&dir);
    let first = memory.capture(note("The request timeout of the billing client is 30 seconds.", "semantic"), None).unwrap();
    let resent = memory.capture(note("The request timeout of the billing client is 30 seconds.", "semantic"), None).unwrap();
    assert!(!resent.created && !resent.reinforced, "resending a capture is not a confirmation: {resent:?}");
    let changed = memory.capture(note("The request timeout of the billing client is 60 seconds.", "semantic"), None).unwrap();
    assert!(changed.created && !changed.reinforced, "a changed value is a new claim: {changed:?}");
    let negated = memory.capture(note("The request timeout of the billing client is not 30 seconds.", "semantic"), None).unwrap();
    assert!(negated.created, "a negation is a new claim");
    let elsewhere = memory
        .capture(CaptureInput { namespace: Some("config".into()), ..note("the request timeout of the billing client is 30 seconds", "semantic") }, None)
        .unwrap();
    assert!(elsewhere.created, "deduplication stays inside a namespace");
    assert_eq!(store.stats().unwrap().by_status["active"], 4);
    let id = kenning_core::MemoryId::parse(first.urn.rsplit('/').next().unwrap()).unwrap();
    assert_eq!(evidence_counts(&store.get(&id).unwrap().unwrap().metadata).supporting, 0);
}

#[test]
fn a_namespace_can_turn_deduplication_off() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _, store) = service(&dir);
    let memory = memory.with_deduplication(Deduplication { namespaces: [("learnings".to_owned(), None)].into(), ..Deduplication::default() });
    memory.capture(note("Run the linter before pushing to main.", "semantic"), None).unwrap();
    let again = memory.capture(note("run the linter before pushing to main", "semantic"), None).unwrap();
    assert!(again.created && !again.reinforced);
    assert_eq!(store.stats().unwrap().by_status["active"], 2);
}

#[test]
fn recall_widens_a_query_by_built_in_and_project_synonyms() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let memory = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], None);
    let pods = memory.capture(note("Kubernetes pods restart after every node pool upgrade", "semantic"), None).unwrap().urn;
    let ledger = memory.capture(note("The billing service rounds invoice totals half-even", "semantic"), None).unwrap().urn;
    let exact = memory.capture(note("k8s upgrade checklist: drain nodes first", "procedural"), None).unwrap().urn;

    let page = recall(&memory, "k8s upgrade");
    assert_eq!(page.expanded_with, ["kubernetes"]);
    let order: Vec<&str> = page.results.iter().map(|hit| hit.urn.as_str()).collect();
    assert_eq!(order, [exact.as_str(), pods.as_str()], "the caller's own words first, the synonym's match after");

    assert!(recall(&memory, "ledger").results.is_empty(), "no project vocabulary yet");
    let mut vocabulary = kenning_core::expansion::Vocabulary::built_in();
    vocabulary.add_group(["ledger", "billing service"]);
    let memory = memory.with_vocabulary(vocabulary);
    let page = recall(&memory, "ledger");
    assert_eq!(page.expanded_with, ["billing service"]);
    assert_eq!(page.results[0].urn, ledger);
    assert_eq!(page.query_rewrite, None, "no model, no rewrite");
}

#[test]
fn introspection_counts_kinds_dormant_links_and_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock, _) = service(&dir);
    let episode = memory.capture(note("The release train was delayed by a failing migration on Friday", "episodic"), None).unwrap().urn;
    memory.capture(note("Run migrations with --lock-timeout 5s on the primary", "procedural"), None).unwrap();
    let principle = CaptureInput {
        links: vec![kenning_core::LinkInput { target: episode.clone(), relation: Some("derived-from".into()) }],
        ..note("Migrations that rewrite large tables must run outside the release train", "semantic")
    };
    memory.capture(principle, None).unwrap();
    memory.capture(note("migrations that rewrite large tables must run outside the release train!", "semantic"), None).unwrap();

    clock.set_days(30.0);
    let report = memory.introspect(None).unwrap();
    assert_eq!((report.episodic, report.semantic, report.procedural), (1, 1, 1));
    assert_eq!(report.dormant, 1, "the unused episode has decayed");
    assert_eq!(report.causal_links, 1);
    assert_eq!(report.links_by_relation.get("derived-from"), Some(&1));
    assert_eq!((report.reinforced, report.contradicted), (1, 0));
    assert_eq!(report.domain, "user");
    assert_eq!((report.total_consolidation_runs, report.last_consolidation), (0, None));
}

/// Regression: relevance was capped at 1 before confidence weighed it, so memories lifted past
/// 1 (by a neighbour in their session, or by the time span the query names) tied, and a
/// confirmed memory outranked the one the query matched best.
#[test]
fn a_confirmed_memory_does_not_outrank_a_better_match_lifted_past_one() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _, _) = service(&dir);
    let in_session = |content: &str| CaptureInput {
        event_time: Some("2025-05-20T09:00:00Z".into()),
        metadata: [("session_id".to_owned(), "s1".to_owned())].into(),
        ..note(content, "episodic")
    };
    let captured = memory.capture_many(vec![in_session("The deploy key failed"), in_session("The deploy key failed again on the runners")], None).unwrap();
    let (best, weaker) = (captured[0].urn.clone(), captured[1].urn.clone());
    assert!(memory.capture(note("the deploy key failed again on the runners!", "episodic"), None).unwrap().reinforced);
    let page = recall(&memory, "deploy key failed");
    assert_eq!(page.results[0].urn, best, "{:?}", page.results);
    assert_eq!(page.results[1].urn, weaker);
    assert!(page.results.iter().all(|hit| hit.score <= 1.0 && hit.relevance <= 1.0), "shown scores stay within 0..1");
}
