//! Contradictions over real SQLite stores with the built-in embedder: found and reported at
//! capture, settled by the rule, superseded facts ranked below their replacement, reopened, and
//! kept across a reopen of the store.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kenning_core::confidence::evidence_counts;
use kenning_core::{CaptureInput, Domain, Embedder, MemoryStore};
use kenning_engine::{Clock, DomainStore, Error, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;

/// A clock that moves on by a minute each time it is read, so captures are ordered.
struct Ticking(AtomicI64);

impl Clock for Ticking {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp(1_780_000_000 + 60 * self.0.fetch_add(1, Ordering::SeqCst), 0).unwrap()
    }
}

fn service(dir: &tempfile::TempDir) -> MemoryService {
    let embedder: Arc<dyn Embedder> = Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap());
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join("project.db")).unwrap());
    MemoryService::new(vec![DomainStore { domain: Domain::Project("app".into()), store }], Some(embedder)).with_clock(Arc::new(Ticking(AtomicI64::new(0))))
}

fn input(content: &str, source: &str) -> CaptureInput {
    CaptureInput { content: content.into(), namespace: Some("config".into()), source: Some(source.into()), ..CaptureInput::default() }
}

fn capture(memory: &MemoryService, content: &str, source: &str) -> kenning_engine::views::CaptureOutcome {
    memory.capture(input(content, source), None).unwrap()
}

/// Two pool sizes, the newer settled the winner: the winning capture and the contradiction's id.
fn settled_pool_sizes(memory: &MemoryService) -> (kenning_engine::views::CaptureOutcome, String) {
    capture(memory, "The worker pool size is 4.", "inference");
    let second = capture(memory, "The worker pool size is 8.", "tool-result");
    let first_id = second.contradictions[0].id.clone();
    assert_eq!(memory.resolve_truth(&first_id).unwrap().resolution, "b_wins");
    (second, first_id)
}

fn contradicting(memory: &MemoryService, urn: &str) -> (u32, u32) {
    let view = memory.get(urn).unwrap();
    let counts = evidence_counts(&view.metadata);
    (view.version, counts.contradicting)
}

#[test]
fn a_capture_reports_the_contradiction_it_finds_and_keeps_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let old = capture(&memory, "The billing API request timeout is 30s.", "told-by-user");
    let unrelated = capture(&memory, "The parser keeps comments as trivia tokens.", "inference");
    assert!(old.contradictions.is_empty() && unrelated.contradictions.is_empty());
    let new = capture(&memory, "The billing API request timeout is 60s.", "tool-result");
    assert_eq!(new.contradictions.len(), 1, "{new:?}");
    let note = &new.contradictions[0];
    assert_eq!((note.kind.as_str(), note.with.as_str(), note.state.as_str()), ("changed_value", old.urn.as_str(), "open"));
    assert!(note.id.starts_with("ctr_"));
    let json = serde_json::to_value(&new).unwrap();
    assert_eq!(json["contradictions"][0]["kind"], "changed_value");
    assert!(serde_json::to_value(&unrelated).unwrap().get("contradictions").is_none(), "no empty list in a capture's answer");

    let record = memory.contradiction(&note.id).unwrap();
    assert_eq!((record.a.as_str(), record.b.as_str(), record.state.as_str()), (old.urn.as_str(), new.urn.as_str(), "open"));
    assert_eq!((record.evidence.a.clone(), record.evidence.b.clone()), (vec!["timeout".to_owned(), "30s".to_owned()], vec!["timeout".to_owned(), "60s".to_owned()]));
    assert_eq!(record.history.len(), 1);
    let open = memory.contradictions(Some("open"), None, None).unwrap();
    assert_eq!((open.total, open.contradictions[0].id.as_str()), (1, note.id.as_str()));
    assert_eq!(memory.contradictions(Some("resolved"), None, None).unwrap().total, 0);
    assert_eq!(memory.contradiction_counts(None).unwrap().open, 1);
    assert_eq!(memory.contradiction_counts(Some("project")).unwrap().open, 1);
    assert_eq!(memory.introspect(None).unwrap().contradictions.open, 1);
    let Err(Error::Invalid(error)) = memory.contradictions(Some("closed"), None, None) else { panic!("an unknown state was accepted") };
    assert_eq!(error.field, "state");
}

#[test]
fn without_a_model_the_newer_statement_wins_by_recency() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let old = capture(&memory, "The cache TTL is 5 minutes.", "inference");
    let new = capture(&memory, "The cache TTL is 10 minutes.", "tool-result");
    let id = new.contradictions[0].id.clone();
    let resolved = memory.resolve_truth(&id).unwrap();
    assert_eq!((resolved.resolution.as_str(), resolved.decided_by.as_str(), resolved.state.as_str()), ("b_wins", "rule:recency", "resolved"));
    assert_eq!((resolved.llm.status.as_str(), resolved.llm.fallback.as_deref()), ("not_configured", Some("rule")));
    assert_eq!(resolved.penalised.as_deref(), Some(old.urn.as_str()));
    assert_eq!(resolved.conditions, None);
    assert_eq!(contradicting(&memory, &old.urn), (3, 1), "marked superseded at capture, the loser then gets a version with contradicting evidence");
    assert_eq!(memory.get(&old.urn).unwrap().superseded_by.as_deref(), Some(new.urn.as_str()));
    assert_eq!(contradicting(&memory, &new.urn), (1, 0));
    let history = memory.history(&old.urn).unwrap();
    assert!(history.versions[0].reason.contains(&id), "{:?}", history.versions[0].reason);

    let Err(Error::Invalid(error)) = memory.resolve_truth(&id) else { panic!("a settled contradiction was settled again") };
    assert_eq!(error.field, "contradiction_id");
    assert!(error.problem.contains("from `resolved`"), "{error:?}");
    let Err(Error::Invalid(error)) = memory.resolve_truth("ctr_nothing") else { panic!("an unknown id was accepted") };
    assert_eq!(error.field, "contradiction_id");
    let Err(Error::Invalid(error)) = memory.resolve_truth("dec_1") else { panic!("a malformed id was accepted") };
    assert!(error.problem.contains("not a contradiction id"));
    assert_eq!(memory.contradiction_counts(None).unwrap().resolved, 1);
}

#[test]
fn without_a_model_a_much_more_reliable_older_source_wins() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let observed = capture(&memory, "The staging database port is 5432.", "direct-observation");
    let guessed = capture(&memory, "The staging database port is 5433.", "model-generated");
    let resolved = memory.resolve_truth(&guessed.contradictions[0].id).unwrap();
    assert_eq!((resolved.resolution.as_str(), resolved.decided_by.as_str()), ("a_wins", "rule:source_reliability"));
    assert!(resolved.explanation.contains("direct-observation"), "{}", resolved.explanation);
    assert_eq!(contradicting(&memory, &guessed.urn), (2, 1));
    assert_eq!(contradicting(&memory, &observed.urn), (3, 0), "marked superseded at capture, unmarked when it won");
    assert_eq!(memory.get(&observed.urn).unwrap().superseded_by, None);
}

#[test]
fn a_superseded_fact_ranks_below_its_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let query = RecallRequest { query: "orders service database MySQL".into(), detail: Some("full".into()), ..RecallRequest::default() };
    let old = capture(&memory, "The orders service keeps its data in a MySQL database.", "told-by-user");
    capture(&memory, "The search service indexes products nightly.", "inference");
    let new = capture(&memory, "We moved the orders service database from MySQL to PostgreSQL.", "told-by-user");
    let note = &new.contradictions[0];
    assert_eq!((note.kind.as_str(), note.state.as_str(), note.with.as_str()), ("superseded", "resolved", old.urn.as_str()));
    let record = memory.contradiction(&note.id).unwrap();
    assert_eq!(record.settlement.as_ref().map(|settlement| settlement.decided_by.as_str()), Some("rule:supersession"));
    assert_eq!(record.history.len(), 2);

    let stale = memory.get(&old.urn).unwrap();
    assert_eq!(evidence_counts(&stale.metadata).contradicting, 1);
    assert!(stale.links.iter().any(|link| link.relation == "superseded-by" && link.target == new.urn), "{:?}", stale.links);
    let page = memory.recall(query).unwrap();
    let order: Vec<&str> = page.results.iter().map(|hit| hit.urn.as_str()).collect();
    let (new_at, old_at) = (order.iter().position(|urn| *urn == new.urn).unwrap(), order.iter().position(|urn| *urn == old.urn).unwrap());
    assert!(new_at < old_at, "the replacement comes first: {order:?}");
    // The old statement is closer in words to the query; the replacement is lent its relevance.
    assert_eq!(page.results[old_at].relevance, page.results[new_at].relevance, "{:?}", page.results);
    assert!(page.results[old_at].confidence < page.results[new_at].confidence, "its contradicting evidence counts");
}

#[test]
fn a_new_conflict_with_the_winner_reopens_the_settled_contradiction() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let (second, first_id) = settled_pool_sizes(&memory);
    let third = capture(&memory, "The worker pool size is 16.", "tool-result");
    assert!(third.contradictions.iter().any(|note| note.with == second.urn), "{third:?}");
    let reopened = memory.contradiction(&first_id).unwrap();
    assert_eq!(reopened.state, "reopened");
    let last = reopened.history.last().unwrap();
    assert_eq!((last.from.as_deref(), last.to.as_str()), (Some("resolved"), "reopened"));
    assert!(last.reason.contains(&third.urn), "{last:?}");
    assert_eq!(memory.contradiction_counts(None).unwrap().reopened, 1);
    let again = memory.resolve_truth(&first_id).unwrap();
    assert_eq!(again.state, "resolved");
    assert_eq!(memory.contradiction(&first_id).unwrap().history.len(), 4);
}

#[test]
fn a_batch_of_conflicts_with_the_winner_reopens_the_settled_contradiction_once() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let (second, first_id) = settled_pool_sizes(&memory);
    let inputs = vec![input("The worker pool size is 16.", "tool-result"), input("The worker pool size is 32.", "tool-result")];
    let batch = memory.capture_many(inputs, None).unwrap();
    for outcome in &batch {
        assert!(outcome.contradictions.iter().any(|note| note.with == second.urn), "each capture of the batch reports its conflict: {outcome:?}");
    }
    let reopened = memory.contradiction(&first_id).unwrap();
    assert_eq!(reopened.state, "reopened");
    assert_eq!(reopened.history.len(), 3, "opened, resolved, reopened by the first of the batch only: {:?}", reopened.history);
    assert!(reopened.history.last().unwrap().reason.contains(&batch[0].urn));
}

/// Regression: the records a conflict may reopen were looked for among the 10,000 most
/// recently changed of the domain only, so a settled contradiction older than that many others
/// stayed settled when its winner was contradicted again.
#[test]
fn a_settled_contradiction_older_than_ten_thousand_others_is_reopened() {
    use kenning_core::contradiction::{Contradiction, ContradictionKind, Detection, Resolution, Verdict};
    use kenning_core::state::{StateKind, StateRecord};
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap());
    let store = Arc::new(SqliteStore::open(&dir.path().join("project.db")).unwrap());
    let domain = DomainStore { domain: Domain::Project("app".into()), store: store.clone() };
    let memory = MemoryService::new(vec![domain], Some(embedder)).with_clock(Arc::new(Ticking(AtomicI64::new(0))));
    let (second, first_id) = settled_pool_sizes(&memory);

    let detection = Detection { kind: ContradictionKind::ChangedValue, older: Vec::new(), newer: Vec::new(), newer_states_change: false };
    let later = DateTime::from_timestamp(1_790_000_000, 0).unwrap();
    let others: Vec<StateRecord> = (0..10_000)
        .map(|n| {
            let (a, b) = (format!("kenning://project/app/config/older-{n}"), format!("kenning://project/app/config/newer-{n}"));
            let mut record = Contradiction::open(format!("ctr_other_{n:05}"), a.clone(), b.clone(), &detection, "found", later);
            let resolution = Resolution { verdict: Verdict::BWins, conditions: None, explanation: "newer".into(), decided_by: "rule:recency".into() };
            record.settle(resolution, later).unwrap();
            StateRecord { kind: StateKind::Contradiction, id: record.id.clone(), revision: 2, updated_at: later, body: record.to_body(), subjects: vec![a, b] }
        })
        .collect();
    let state = store.state().unwrap();
    for chunk in others.chunks(1_000) {
        let creations: Vec<StateRecord> = chunk.iter().map(|record| StateRecord { revision: 1, ..record.clone() }).collect();
        assert!(state.put_states(&creations).unwrap().into_iter().chain(state.put_states(chunk).unwrap()).all(|written| written));
    }

    let third = capture(&memory, "The worker pool size is 16.", "tool-result");
    assert!(third.contradictions.iter().any(|note| note.with == second.urn), "{third:?}");
    assert_eq!(memory.contradiction(&first_id).unwrap().state, "reopened");
}

#[test]
fn two_captures_of_a_batch_contradicting_one_memory_each_mark_it() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let old = capture(&memory, "The worker pool size is 4.", "inference");
    let inputs = vec![input("The worker pool size is 16.", "tool-result"), input("The queue retry limit is 3.", "inference"), input("The worker pool size is 32.", "tool-result")];
    let batch = memory.capture_many(inputs, None).unwrap();
    for at in [0, 2] {
        let notes = &batch[at].contradictions;
        assert_eq!(notes.len(), 1, "{:?}", batch[at]);
        assert_eq!((notes[0].with.as_str(), notes[0].kind.as_str(), notes[0].state.as_str()), (old.urn.as_str(), "changed_value", "open"));
        assert!(memory.contradiction(&notes[0].id).is_ok(), "the record is kept");
    }
    assert!(batch[1].contradictions.is_empty() && batch.iter().all(|outcome| outcome.warnings.is_empty()), "{batch:?}");
    assert_eq!(memory.contradiction_counts(None).unwrap().open, 2);
    // The second change starts from the version the first one wrote: both are kept, newest first.
    let history = memory.history(&old.urn).unwrap();
    assert_eq!(history.versions.len(), 2, "{history:?}");
    assert!(history.versions[0].reason.contains(&batch[2].urn) && history.versions[1].reason.contains(&batch[0].urn), "{history:?}");
    let stale = memory.get(&old.urn).unwrap();
    assert_eq!(stale.version, 3);
    assert_eq!(stale.superseded_by.as_deref(), Some(batch[2].urn.as_str()), "the latest statement supersedes it");
}

#[test]
fn each_capture_of_a_large_batch_reports_its_own_contradiction() {
    // Enough captures for their contradictions to be looked for on every core: each must still
    // be reported by the capture that makes it.
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let syllables = ["ka", "lo", "mi", "nu", "pe", "ri", "so", "tu"];
    let names: Vec<String> = (0..64).map(|at| format!("{}{}{}", syllables[at % 8], syllables[at / 8], ["x", "v", "q", "z"][at % 4])).collect();
    let fact = |name: &str, minutes: u32| format!("The {name} cache keeps its {name} entries for {minutes} minutes.");
    let older: Vec<String> = names.iter().map(|name| capture(&memory, &fact(name, 30), "inference").urn).collect();
    let batch = memory.capture_many(names.iter().map(|name| input(&fact(name, 45), "tool-result")).collect(), None).unwrap();
    for (at, outcome) in batch.iter().enumerate() {
        assert!(outcome.created, "{outcome:?}");
        assert!(
            outcome.contradictions.iter().any(|note| note.with == older[at] && note.kind == "changed_value"),
            "capture {at} reports its own contradiction: {outcome:?}"
        );
    }
}

#[test]
fn a_contradiction_survives_a_reopen_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (id, before) = {
        let memory = service(&dir);
        capture(&memory, "The default branch is main.", "told-by-user");
        let new = capture(&memory, "The default branch is master.", "told-by-user");
        let id = new.contradictions[0].id.clone();
        memory.resolve_truth(&id).unwrap();
        (id.clone(), memory.contradiction(&id).unwrap())
    };
    let memory = service(&dir);
    assert_eq!(memory.contradiction(&id).unwrap(), before);
    assert_eq!(before.state, "resolved");
    let counts = memory.contradiction_counts(None).unwrap();
    assert_eq!((counts.open, counts.resolved), (0, 1));
}

#[test]
fn a_negated_claim_is_a_contradiction_not_a_near_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let old = capture(&memory, "The API gateway uses JWT for authentication.", "told-by-user");
    let new = capture(&memory, "The API gateway does not use JWT for authentication.", "told-by-user");
    assert!(new.created && !new.reinforced, "{new:?}");
    assert_eq!(new.contradictions.len(), 1, "{new:?}");
    assert_eq!((new.contradictions[0].kind.as_str(), new.contradictions[0].with.as_str()), ("negation", old.urn.as_str()));
}

#[test]
fn a_bulk_load_is_checked_like_a_single_capture() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    capture(&memory, "The export job timeout is 6 hours.", "told-by-user");
    let mut batch: Vec<CaptureInput> = (0..40)
        .map(|index| CaptureInput { content: format!("Note {index} about the release checklist item {index}."), ..CaptureInput::default() })
        .collect();
    batch.push(CaptureInput { content: "The export job timeout is 12 hours.".into(), ..CaptureInput::default() });
    let outcomes = memory.capture_many(batch, None).unwrap();
    assert!(outcomes[..40].iter().all(|outcome| outcome.contradictions.is_empty()));
    assert_eq!(outcomes[40].contradictions.len(), 1, "{:?}", outcomes[40]);
    let single = memory.capture(CaptureInput { content: "The export job timeout is 3 hours.".into(), ..CaptureInput::default() }, None).unwrap();
    assert!(!single.contradictions.is_empty(), "{single:?}");
}

/// Regression: the data-rights purge left the contradiction records of the author's memories,
/// whose evidence quotes the memories' words. A dry run counts them; the purge removes them and
/// no other.
#[test]
fn purging_an_author_removes_the_contradictions_of_their_memories() {
    let dir = tempfile::tempdir().unwrap();
    let memory = service(&dir);
    let by = |content: &str, author: &str| memory.capture(CaptureInput { author: Some(author.into()), ..input(content, "tool-result") }, None).unwrap();
    by("The checkout queue backend is rabbitmq.", "bob");
    let theirs = by("The checkout queue backend is zephyrquill.", "ada");
    by("The cache TTL is 5 minutes.", "bob");
    let kept = by("The cache TTL is 10 minutes.", "carol");
    let (theirs, kept) = (theirs.contradictions[0].id.clone(), kept.contradictions[0].id.clone());
    let evidence = memory.contradiction(&theirs).unwrap().evidence;
    assert!(evidence.b.iter().any(|word| word.contains("zephyrquill")), "the record quotes ada's words: {evidence:?}");

    let dry = memory.purge_authored("ada", None, kenning_core::PurgeMode::DryRun).unwrap();
    assert_eq!((dry[0].counts.memories, dry[0].counts.contradictions), (1, 1));
    assert!(memory.contradiction(&theirs).is_ok(), "a dry run removes nothing");
    let purged = memory.purge_authored("ada", None, kenning_core::PurgeMode::Apply).unwrap();
    assert_eq!(purged[0].counts.contradictions, 1);
    assert!(matches!(memory.contradiction(&theirs), Err(Error::Invalid(_))), "the record of ada's memory is gone");
    assert!(memory.contradiction(&kept).is_ok(), "another author's record stays");
    assert_eq!(memory.contradiction_counts(None).unwrap().open, 1);
}
