//! Memory that judges by meaning, through the engine with the built-in embedder: a different
//! claim is never merged into an older one (swapped roles, numbers, order, negation, scope),
//! the same claim in other words is merged (its wording kept, the merge reversible), and a
//! changed fact's newer statement wins a question about the present while the older one still
//! answers a question about the past.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::views::CaptureOutcome;
use kenning_engine::{Clock, DomainStore, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;
use proptest::prelude::*;

/// A clock the test sets, in days after its start.
struct TestClock(AtomicI64);

impl TestClock {
    fn at(days: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 2, 9, 0, 0).unwrap() + TimeDelta::days(days)
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        TestClock::at(self.0.load(Ordering::Relaxed))
    }
}

fn service(dir: &tempfile::TempDir) -> (MemoryService, Arc<TestClock>) {
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let clock = Arc::new(TestClock(AtomicI64::new(0)));
    let memory = MemoryService::new(vec![DomainStore { domain: Domain::User, store }], super::builtin_embedder()).with_clock(clock.clone());
    (memory, clock)
}

fn capture(memory: &MemoryService, content: &str) -> CaptureOutcome {
    memory.capture(CaptureInput { content: content.into(), namespace: Some("learnings".into()), ..CaptureInput::default() }, None).unwrap()
}

fn first(memory: &MemoryService, query: &str) -> String {
    let page = memory.recall(RecallRequest { query: query.into(), ..RecallRequest::default() }).unwrap();
    page.results.first().map(|hit| hit.urn.clone()).unwrap_or_default()
}

/// Regression: each of these was merged into the older memory (`created: false, reinforced:
/// true`), the new claim lost and the old one confirmed.
#[test]
fn a_different_claim_is_stored_as_its_own_memory_and_linked() {
    let cases = [
        ("Retry 3 times with a 5 s backoff.", "Retry 5 times with a 3 s backoff."),
        ("The auth service calls the billing service.", "The billing service calls the auth service."),
        ("Enable caching in production, disable it in staging.", "Disable caching in production, enable it in staging."),
        ("Postgres listens on port 5432 and Redis on port 6379.", "Postgres listens on port 6379 and Redis on port 5432."),
        ("Alice owns the billing service and Bob owns the search service.", "Bob owns the billing service and Alice owns the search service."),
        ("Deploy to staging before production.", "Deploy to production before staging."),
        ("Write to the primary and read from the replica.", "Write to the replica and read from the primary."),
        ("The parser is thread-safe.", "The parser is not thread-safe."),
        ("All integration tests need Docker.", "Some integration tests need Docker."),
    ];
    for (older, newer) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (memory, _) = service(&dir);
        let first = capture(&memory, older);
        let second = capture(&memory, newer);
        assert!(second.created && !second.reinforced, "{newer:?} after {older:?}: {second:?}");
        assert!(second.linked.iter().any(|link| link.target == first.urn && link.relation == "related-to"), "{newer:?}: {:?}", second.linked);
    }
}

/// Regression: among 400 org captures, "User 1 org standard 0: … timeout 0 ms" was merged into
/// "User 0 org standard 1: … timeout 1 ms".
#[test]
fn four_hundred_standards_that_differ_in_their_numbers_are_all_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = service(&dir);
    let inputs: Vec<CaptureInput> = (0..400)
        .map(|n| CaptureInput {
            content: format!("User {} org standard {}: requests to the billing API use a timeout of {} ms.", n % 20, n / 20, n / 20),
            namespace: Some("standards".into()),
            ..CaptureInput::default()
        })
        .collect();
    for chunk in inputs.chunks(20) {
        let outcomes = memory.capture_many(chunk.to_vec(), None).unwrap();
        assert!(outcomes.iter().all(|outcome| outcome.created), "{outcomes:?}");
    }
}

/// Regression: each of these was stored twice.
#[test]
fn the_same_claim_in_other_words_is_merged_and_its_wording_kept() {
    let cases = [
        ("Always run cargo fmt before committing Rust code.", "Always run cargo fmt before you commit Rust code."),
        ("The CI pipeline uses GitHub Actions.", "Our CI pipeline runs on GitHub Actions."),
        ("Tests must not hit the network.", "Tests must never hit the network."),
    ];
    for (older, newer) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (memory, _) = service(&dir);
        let first = capture(&memory, older);
        let second = capture(&memory, newer);
        assert!(!second.created && second.reinforced && second.urn == first.urn, "{newer:?} after {older:?}: {second:?}");
        let kept = second.kept_as.clone().expect("the wording is kept");
        let kept_view = memory.history(&kept).unwrap().current;
        assert_eq!((kept_view.status.as_str(), kept_view.content.as_str()), ("forgotten", newer));
        assert!(kept_view.links.iter().any(|link| link.relation == "merged-into" && link.target == first.urn));
        let history = memory.history(&first.urn).unwrap();
        assert!(history.versions[0].reason.contains(&kept) && history.versions[0].reason.contains(newer), "{:?}", history.versions[0].reason);
        assert!(memory.recall(RecallRequest { query: newer.into(), ..RecallRequest::default() }).unwrap().results.iter().all(|hit| hit.urn != kept));
    }
}

#[test]
fn restoring_the_kept_wording_undoes_the_merge_and_resending_it_confirms_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = service(&dir);
    let first = capture(&memory, "The CI pipeline uses GitHub Actions.");
    let merged = capture(&memory, "Our CI pipeline runs on GitHub Actions.");
    let again = capture(&memory, "Our CI pipeline runs on GitHub Actions.");
    assert!(!again.created && !again.reinforced && again.kept_as == merged.kept_as, "{again:?}");
    assert_eq!(memory.get(&first.urn).unwrap().metadata.get("evidence_supporting").map(String::as_str), Some("1"));

    let kept = merged.kept_as.unwrap();
    let restored = memory.restore(&kept, "two separate statements after all").unwrap();
    assert!(restored.changed, "{restored:?}");
    let view = memory.get(&kept).unwrap();
    assert_eq!(view.status, "active");
    assert!(view.links.iter().any(|link| link.relation == "possibly-duplicate-of" && link.target == first.urn), "{:?}", view.links);
    assert!(!memory.get(&first.urn).unwrap().metadata.contains_key("evidence_supporting"), "the confirmation is withdrawn");
}

/// Regression: after each change, recall of the present ranked the older statement first.
#[test]
fn a_changed_fact_newer_statement_wins_the_present_and_the_older_answers_the_past() {
    let cases = [
        ("The orders service stores its data in MySQL 5.7.", "We switched the orders service to PostgreSQL 16 last week.", "what database does the orders service use", "what database did the orders service use before"),
        ("We lint Python code with flake8.", "We replaced flake8 with ruff.", "which linter do we use for Python code", "which Python linter did we use before"),
        ("Deploys happen on Thursdays.", "Deploys moved to Tuesdays.", "which day do deploys happen", "which day did deploys happen before"),
        ("Alice is the platform team lead.", "Bob took over from Alice as the platform team lead.", "who leads the platform team", "who led the platform team before"),
        ("Feature flags are stored in LaunchDarkly.", "Feature flags moved from LaunchDarkly to our own flags table.", "where are feature flags stored", "where were feature flags stored previously"),
    ];
    for (older, newer, present, past) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (memory, clock) = service(&dir);
        let old = capture(&memory, older);
        clock.0.store(7, Ordering::Relaxed);
        let new = capture(&memory, newer);
        assert!(new.created, "{new:?}");
        assert_eq!(first(&memory, present), new.urn, "{present:?} after {newer:?}");
        assert_eq!(memory.get(&old.urn).unwrap().superseded_by.as_deref(), Some(new.urn.as_str()), "{older:?}");
        assert_eq!(first(&memory, past), old.urn, "{past:?} after {newer:?}");
    }
}

#[test]
fn a_question_about_a_past_year_finds_the_statement_of_that_year() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, clock) = service(&dir);
    let old = capture(&memory, "The orders service stores its data in MySQL 5.7.");
    clock.0.store(240, Ordering::Relaxed);
    let new = capture(&memory, "We switched the orders service to PostgreSQL 16.");
    assert_eq!(first(&memory, "what database does the orders service use"), new.urn);
    assert_eq!(first(&memory, "what database did the orders service use in 2025"), old.urn);
}

/// Captures in one batch larger than the checked size are judged by the same rule.
#[test]
fn a_bulk_load_merges_the_same_claim_and_keeps_different_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = service(&dir);
    let stored = capture(&memory, "The CI pipeline uses GitHub Actions.");
    let mut inputs: Vec<CaptureInput> =
        (0..40).map(|n| CaptureInput { content: format!("Service {n} writes its logs to bucket logs-{n}."), namespace: Some("learnings".into()), ..CaptureInput::default() }).collect();
    inputs.push(CaptureInput { content: "Our CI pipeline runs on GitHub Actions.".into(), namespace: Some("learnings".into()), ..CaptureInput::default() });
    inputs.push(CaptureInput { content: "Retry 3 times with a 5 s backoff.".into(), namespace: Some("learnings".into()), ..CaptureInput::default() });
    inputs.push(CaptureInput { content: "Retry 5 times with a 3 s backoff.".into(), namespace: Some("learnings".into()), ..CaptureInput::default() });
    inputs.push(CaptureInput { content: "Retry three times with a 5 second backoff.".into(), namespace: Some("learnings".into()), ..CaptureInput::default() });
    let outcomes = memory.capture_many(inputs, None).unwrap();
    assert!(outcomes[..40].iter().all(|outcome| outcome.created));
    assert!(outcomes[40].reinforced && outcomes[40].urn == stored.urn, "{:?}", outcomes[40]);
    assert!(outcomes[41].created && outcomes[42].created, "swapped numbers are two claims");
    assert!(!outcomes[43].created && outcomes[43].reinforced && outcomes[43].urn == outcomes[41].urn, "{:?}", outcomes[43]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// No capture that differs from a stored one in a number, a negation or the order of two
    /// named things is merged into it.
    #[test]
    fn a_capture_differing_in_a_number_a_negation_or_an_order_is_never_merged(
        (first, second) in ("[A-Z][a-z]{3,8}", "[A-Z][a-z]{3,8}").prop_filter("two names", |(a, b)| a != b),
        (number, other) in (1u32..999, 1u32..999).prop_filter("two numbers", |(a, b)| a != b),
        change in 0usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (memory, _) = service(&dir);
        let statement = |a: &str, b: &str, n: u32, negated: bool| {
            format!("{a} {} requests to {b} within {n} ms.", if negated { "does not send" } else { "sends" })
        };
        capture(&memory, &statement(&first, &second, number, false));
        let changed = match change {
            0 => statement(&first, &second, other, false),
            1 => statement(&first, &second, number, true),
            _ => statement(&second, &first, number, false),
        };
        let outcome = capture(&memory, &changed);
        prop_assert!(outcome.created && !outcome.reinforced, "{:?}: {:?}", changed, outcome);
    }
}

/// What a hook asks before it captures a transcript's findings again: only a finding stored
/// word for word (an active memory of its namespace) is held. One in other words, one in
/// another namespace, a forgotten one's wording and one holding a secret (whose stored copy is
/// redacted) are not, and capturing the held one again stores nothing new, as it did before.
#[test]
fn held_already_is_exactly_what_a_capture_would_report_as_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = service(&dir);
    let stored = capture(&memory, "Run the integration suite before merging.");
    let forgotten = capture(&memory, "Deploy on Fridays after lunch.");
    memory.forget(&forgotten.urn, "no longer true").unwrap();
    let secret = format!("The staging token is ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
    let with_secret = capture(&memory, &secret);
    assert!(!with_secret.redacted.is_empty(), "the token was redacted");

    let input = |content: &str, namespace: &str| CaptureInput { content: content.into(), namespace: Some(namespace.into()), ..CaptureInput::default() };
    let asked = [
        input("  Run the integration suite before merging.\n", "learnings"),
        input("Run the integration tests before merging.", "learnings"),
        input("Run the integration suite before merging.", "decisions"),
        input("Deploy on Fridays after lunch.", "learnings"),
        input(&secret, "learnings"),
        input("", "learnings"),
    ];
    assert_eq!(memory.held_already(&asked, None).unwrap(), [true, false, false, false, false, false]);
    let again = memory.capture(asked[0].clone(), None).unwrap();
    assert!(!again.created);
    assert_eq!(again.urn, stored.urn);
}

/// What a memory's words were judged as is kept between captures; once its words change, a
/// capture is judged against the new words, not the kept reading of the old ones.
#[test]
fn a_memory_changed_after_it_was_read_is_judged_by_its_new_words() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = service(&dir);
    let stored = capture(&memory, "The request timeout is 30 seconds.");
    let other = capture(&memory, "The request timeout is 30000 milliseconds.");
    assert!(!other.created && other.reinforced && other.urn == stored.urn, "the same claim is merged: {other:?}");
    let update = kenning_core::UpdateInput {
        reason: "raised".into(),
        content: Some("The request timeout is 60 seconds.".into()),
        ..kenning_core::UpdateInput::default()
    };
    memory.update(&stored.urn, update).unwrap();
    let same_as_now = capture(&memory, "The request timeout is 60 s.");
    assert!(!same_as_now.created && same_as_now.reinforced && same_as_now.urn == stored.urn, "{same_as_now:?}");
    let same_as_before = capture(&memory, "The request timeout is 30 s.");
    assert!(same_as_before.created && !same_as_before.reinforced, "{same_as_before:?}");
}
