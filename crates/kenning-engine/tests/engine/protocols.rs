//! Guided protocol sessions over a real SQLite store: every step type, answers refused and
//! asked again, the call stack and its returns, a restart in the middle, abort, expiry, and the
//! shipped capture_decision ending in a decision that calibration counts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chrono::TimeDelta;
use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::{CaptureInput, Domain, MemoryStore, SearchFilter};
use kenning_engine::protocols::SessionView;
use kenning_engine::{DecisionDomain, DecisionQuery, DecisionService, DomainStore, MemoryService, ProtocolService};
use kenning_protocol::Library;
use kenning_sqlite::SqliteStore;
use serde_json::{Value, json};

struct Setup {
    store: Arc<SqliteStore>,
    decisions: Arc<DecisionService>,
}

fn open(dir: &Path) -> Setup {
    let store = Arc::new(SqliteStore::open(&dir.join("user.db")).unwrap());
    let memory_store: Arc<dyn MemoryStore> = store.clone();
    let memory = Arc::new(MemoryService::new(vec![DomainStore { domain: Domain::User, store: memory_store }], None));
    let decision_store: Arc<dyn DecisionStore> = store.clone();
    let decisions = Arc::new(DecisionService::new(memory, vec![DecisionDomain { domain: Domain::User, store: decision_store }], ModuleList::default()));
    Setup { store, decisions }
}

impl Setup {
    fn protocols(&self, folder: Option<&Path>) -> ProtocolService {
        let mut library = Library::shipped();
        if let Some(folder) = folder {
            library.load_dir(folder);
        }
        assert!(library.problems.is_empty(), "{:?}", library.problems);
        ProtocolService::new(self.decisions.clone(), library)
    }

    fn count(&self) -> u64 {
        self.store.count(&SearchFilter::default()).unwrap()
    }

    fn capture(&self, content: &str, namespace: &str) -> String {
        let input = CaptureInput { content: content.into(), namespace: Some(namespace.into()), ..CaptureInput::default() };
        self.decisions.memory().capture(input, None).unwrap().urn
    }
}

const OUTER: &str = r#"
name: outer
description: Exercises every step type.
steps:
  - id: topic
    type: ask
    question: "What topic?"
    expects: {type: string, min_length: 5, pattern: "[a-z ]+"}
    examples: {good: ["cache expiry"], bad: ["X"]}
  - id: known
    type: query
    query: {recall: "{topic}", limit: 3}
  - id: any_known
    type: branch
    if: {var: known, count_at_least: 1}
    then: pick
    else: level
  - id: pick
    type: ask
    question: "Which one? {known.urns}"
    expects: {type: id, namespace: learnings}
  - id: level
    type: ask
    question: "How deep?"
    expects: {type: enum, options: [shallow, deep]}
  - id: route
    type: branch
    on: level
    cases: {deep: dig}
    default: note
  - id: dig
    type: call_protocol
    protocol: middle
    with: {subject: "{topic | slugify}"}
    store_as: found
  - id: note
    type: create
    memories:
      - as: main
        namespace: learnings
        title: "{topic | truncate(40)}"
        content: "Topic {topic}, depth {level}, found {found.answer} ({found.depth_seen})."
        tags: ["{topic | slugify}"]
        links:
          - {to: "{pick}", relation: refines}
      - namespace: progress
        title: "Explored {topic}"
        content: "Explored {topic} on {now | timestamp(date)}."
        links:
          - {to: "@main", relation: derived-from}
  - id: has_pick
    type: branch
    if: {var: pick, present: true}
    then: touch
    else: end
  - id: touch
    type: update
    memory: "{pick}"
    content: "Refined by the exploration of {topic}."
    reason: "refined while exploring {topic}"
"#;

const MIDDLE: &str = r#"
name: middle
description: Called by outer, calls inner.
inputs: [subject]
returns: [answer, depth_seen]
steps:
  - id: deeper
    type: call_protocol
    protocol: inner
    with: {subject: "{subject}"}
    store_as: inner
  - id: answer
    type: ask
    question: "Middle question about {subject} (inner said {inner.reply})"
    expects: {type: number, min: 1, max: 10}
  - id: depth_seen
    type: ask
    question: "Tags for {subject}?"
    expects: {type: string_list, min_count: 1, max_count: 2}
"#;

const INNER: &str = r#"
name: inner
description: The deepest protocol.
inputs: [subject]
returns: [reply]
steps:
  - id: reply
    type: ask
    question: "Inner question about {subject}"
    expects: {type: string, min_length: 2}
"#;

fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("outer", OUTER), ("middle", MIDDLE), ("inner", INNER)] {
        std::fs::write(dir.path().join(format!("{name}.yaml")), text).unwrap();
    }
    dir
}

fn step(view: &SessionView) -> &str {
    &view.step.as_ref().expect("the session waits on a step").step
}

fn answer(service: &ProtocolService, view: &SessionView, value: Value) -> SessionView {
    let next = service.answer(&view.session_id, value).unwrap();
    assert!(next.problem.is_none(), "the answer was refused: {:?}", next.problem);
    next
}

#[test]
fn every_step_type_runs_and_writes_only_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let protocols_dir = folder();
    let setup = open(dir.path());
    let lesson = setup.capture("Cache expiry must be shorter than the token lifetime", "learnings");
    let other = setup.capture("Cache sizes are set per tenant", "context");
    let service = setup.protocols(Some(protocols_dir.path()));
    let before = setup.count();

    let view = service.start("outer", BTreeMap::new()).unwrap();
    assert_eq!(step(&view), "topic");
    assert!(view.skill.is_none());
    let refused = service.answer(&view.session_id, json!("X")).unwrap();
    assert_eq!(step(&refused), "topic", "a wrong answer returns the same step");
    assert!(refused.problem.as_deref().unwrap().contains("shorter than the 5"), "{:?}", refused.problem);
    let refused = service.answer(&view.session_id, json!("Cache Expiry")).unwrap();
    assert!(refused.problem.as_deref().unwrap().contains("pattern"), "{:?}", refused.problem);

    let view = answer(&service, &view, json!("cache expiry"));
    assert_eq!(step(&view), "pick", "the query found the lesson, so the branch asks which");
    assert!(view.step.as_ref().unwrap().question.contains(&lesson));
    let refused = service.answer(&view.session_id, json!(other)).unwrap();
    assert!(refused.problem.as_deref().unwrap().contains("rather than `learnings`"), "{:?}", refused.problem);
    let refused = service.answer(&view.session_id, json!("kenning://user/learnings/nothere")).unwrap();
    assert!(refused.problem.as_deref().unwrap().contains("not a memory"), "{:?}", refused.problem);
    let view = answer(&service, &view, json!(lesson));
    assert_eq!(step(&view), "level");
    let refused = service.answer(&view.session_id, json!("medium")).unwrap();
    assert!(refused.problem.as_deref().unwrap().contains("shallow, deep"));
    let view = answer(&service, &view, json!("DEEP"));

    // Two calls deep: outer -> middle -> inner, then the returns come back up.
    let inner = view.step.as_ref().unwrap();
    assert_eq!((inner.protocol.as_str(), inner.step.as_str(), inner.depth), ("inner", "reply", 3));
    assert_eq!(inner.question, "Inner question about cache-expiry");
    let view = answer(&service, &view, json!("ok"));
    let middle = view.step.as_ref().unwrap();
    assert_eq!((middle.protocol.as_str(), middle.depth), ("middle", 2));
    assert!(middle.question.ends_with("(inner said ok)"), "{}", middle.question);
    assert!(service.answer(&view.session_id, json!(11)).unwrap().problem.unwrap().contains("above the maximum 10"));
    let view = answer(&service, &view, json!("7"));
    assert!(service.answer(&view.session_id, json!(["a", "b", "c"])).unwrap().problem.unwrap().contains("more than the 2"));
    assert_eq!(setup.count(), before, "nothing is written before the protocol completes");
    let done = answer(&service, &view, json!("alpha, beta"));

    assert_eq!(done.status, "complete");
    let kinds: Vec<&str> = done.written.iter().map(|written| written.kind.as_str()).collect();
    assert_eq!(kinds, ["memory", "memory", "update"]);
    let main = setup.decisions.memory().get(&done.written[0].urn).unwrap();
    assert_eq!(main.content, "Topic cache expiry, depth deep, found 7.0 (alpha, beta).");
    assert_eq!(main.tags, ["cache-expiry"]);
    assert_eq!((main.links[0].target.as_str(), main.links[0].relation.as_str()), (lesson.as_str(), "refines"));
    let progress = setup.decisions.memory().get(&done.written[1].urn).unwrap();
    assert_eq!(progress.links[0].target, done.written[0].urn, "`@main` links to the memory written before");
    assert!(progress.content.starts_with("Explored cache expiry on 20"), "{}", progress.content);
    assert_eq!(setup.decisions.memory().get(&lesson).unwrap().content, "Refined by the exploration of cache expiry.");
    assert!(service.answer(&done.session_id, json!("more")).is_err(), "a completed session is gone");
}

#[test]
fn a_session_survives_a_restart_and_abort_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let protocols_dir = folder();
    let id = {
        let setup = open(dir.path());
        let service = setup.protocols(Some(protocols_dir.path()));
        let view = service.start("outer", BTreeMap::new()).unwrap();
        let view = answer(&service, &view, json!("plain topic"));
        assert_eq!(step(&view), "level", "nothing was found, so the else branch asks the level");
        view.session_id
    };
    let setup = open(dir.path());
    let service = setup.protocols(Some(protocols_dir.path()));
    let resumed = service.current(&id).unwrap();
    assert_eq!(step(&resumed), "level");
    let view = answer(&service, &resumed, json!("shallow"));
    assert_eq!(view.status, "complete", "the shallow case skips the call");
    assert_eq!(setup.count(), 2);

    let before = setup.count();
    let started = service.start("outer", BTreeMap::new()).unwrap();
    let view = answer(&service, &started, json!("another topic"));
    let aborted = service.abort(&view.session_id).unwrap();
    assert!(aborted.aborted);
    assert_eq!(setup.count(), before, "an aborted session leaves no memory behind");
    assert!(service.answer(&view.session_id, json!("shallow")).is_err());
    assert!(service.abort(&view.session_id).is_err());
}

/// A server reads its protocols when one is first listed or run, not when it starts: parsing
/// them was a tenth of a server's start. Then they are read once.
#[test]
fn protocols_are_read_on_first_use_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let setup = open(dir.path());
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reads.clone();
    let service = ProtocolService::loading(setup.decisions.clone(), move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Library::shipped()
    });
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 0, "read before any use");
    let listed = service.list();
    assert!(listed.protocols.iter().any(|protocol| protocol.name == "capture_decision"), "{listed:?}");
    service.list();
    service.with_decisions(setup.decisions.clone()).list();
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn idle_sessions_expire_and_inputs_are_required() {
    let dir = tempfile::tempdir().unwrap();
    let protocols_dir = folder();
    let setup = open(dir.path());
    let service = setup.protocols(Some(protocols_dir.path())).with_idle_timeout(TimeDelta::zero());
    let view = service.start("outer", BTreeMap::new()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    match service.answer(&view.session_id, json!("late topic")) {
        Err(kenning_engine::Error::Invalid(error)) => assert!(error.problem.contains("expired"), "{error}"),
        other => panic!("an idle session was answered: {other:?}"),
    }
    match service.start("middle", BTreeMap::new()) {
        Err(kenning_engine::Error::Invalid(error)) => assert_eq!(error.field, "inputs.subject"),
        other => panic!("{other:?}"),
    }
    match service.start("captur_decision", BTreeMap::new()) {
        Err(kenning_engine::Error::Invalid(error)) => assert!(error.suggestion.contains("capture_decision"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn capture_decision_ends_in_a_decision_that_calibration_counts() {
    let dir = tempfile::tempdir().unwrap();
    let setup = open(dir.path());
    let service = setup.protocols(None);
    let view = service.start("capture_decision", BTreeMap::new()).unwrap();
    assert!(view.skill.as_deref().unwrap().contains("Capturing a decision"), "the skill comes with the first step");
    let view = answer(&service, &view, json!("Use PostgreSQL advisory locks for the refund scheduler"));
    let view = answer(&service, &view, json!(["Redis locks", "A cron job on one node"]));
    let view = answer(&service, &view, json!("Advisory locks need no new infrastructure and release when the session dies."));
    assert_eq!(step(&view), "confidence", "no past decisions, so nothing is asked about them");
    let view = answer(&service, &view, json!(0.7));
    let module = view.step.as_ref().unwrap();
    assert_eq!(module.expects["options"], json!(ModuleList::DEFAULT), "the options come from the configured modules");
    let done = answer(&service, &view, json!("database"));
    assert_eq!(done.written.len(), 1);
    assert_eq!(done.written[0].kind, "decision");
    let page = setup.decisions.query(DecisionQuery::default()).unwrap();
    assert_eq!(page.decisions.len(), 1);
    assert_eq!(page.decisions[0].module, "database");
}

const LINKS: &str = r#"
name: links
description: Walks the graph around a memory.
steps:
  - id: start
    type: ask
    question: "Which memory?"
    expects: {type: id}
  - id: around
    type: query
    query: {graph: "{start}", depth: 2}
  - id: write
    type: create
    memories:
      - namespace: context
        title: "Around {start}"
        content: "{around.count} linked:\n{around.titles | format_list}"
        links:
          - {to: "{around.urns}", relation: relates-to}
"#;

#[test]
fn a_graph_query_finds_the_memories_linked_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("links.yaml"), LINKS).unwrap();
    let setup = open(dir.path());
    let target = setup.capture("The queue drops payloads above 64 KB", "learnings");
    let memory = setup.decisions.memory();
    let pointing = memory
        .capture(
            CaptureInput {
                content: "Split large refund batches before queueing".into(),
                namespace: Some("patterns".into()),
                links: vec![kenning_core::LinkInput { target: target.clone(), relation: Some("derived-from".into()) }],
                ..CaptureInput::default()
            },
            None,
        )
        .unwrap()
        .urn;
    let service = setup.protocols(Some(folder.path()));
    let view = service.start("links", BTreeMap::new()).unwrap();
    let done = answer(&service, &view, json!(pointing));
    let written = memory.get(&done.written[0].urn).unwrap();
    assert!(written.content.starts_with("1 linked:"), "{}", written.content);
    assert!(written.content.contains("derived-from"), "{}", written.content);
    assert_eq!(written.links[0].target, target, "outgoing links are walked");

    let first = done.written[0].urn.clone();

    // The target is linked to by `pointing` and by the memory the first run wrote.
    let view = service.start("links", BTreeMap::new()).unwrap();
    let done = answer(&service, &view, json!(target));
    let written = memory.get(&done.written[0].urn).unwrap();
    let mut linked: Vec<&str> = written.links.iter().map(|link| link.target.as_str()).collect();
    linked.sort_unstable();
    let mut expected = [pointing.as_str(), first.as_str()];
    expected.sort_unstable();
    assert_eq!(linked, expected, "incoming links are walked");
}

const NOTE: &str = r#"
name: note
description: Asks twice, then writes a note.
inputs: [subject]
steps:
  - id: first
    type: ask
    question: "What about {subject}?"
    expects: {type: string, min_length: 2}
  - id: second
    type: ask
    question: "Anything else?"
    expects: {type: string, min_length: 2}
  - id: write
    type: create
    memories:
      - namespace: learnings
        title: "About {subject}"
        content: "{first} / {second}"
"#;

/// A protocol's inputs and answers are kept in its session while it runs, and what it writes
/// at the end comes from them: secrets in either never reach the store's files.
#[test]
fn secrets_in_inputs_and_answers_never_reach_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let protocols_dir = tempfile::tempdir().unwrap();
    std::fs::write(protocols_dir.path().join("note.yaml"), NOTE).unwrap();
    let setup = open(dir.path());
    let service = setup.protocols(Some(protocols_dir.path()));
    let secrets = [concat!("ghp", "_Zr8kLm2Qp9Xv4Tn6Bw1Yc3Hd5Fj7Gs0Ka2Ue"), "Pw9Zr8kLm2Qp9Xv4", concat!("xox", "b-82263596777-34119653240-In3OIOnHn2INL2io6VOZw5lu")];
    let inputs = BTreeMap::from([("subject".to_owned(), json!(format!("the release token {}", secrets[0])))]);
    let view = service.start("note", inputs).unwrap();
    assert!(view.warnings.iter().any(|warning| warning.contains("[REDACTED:kind]")), "{:?}", view.warnings);
    let view = answer(&service, &view, json!(format!("DB_PASSWORD={} in the runner", secrets[1])));
    assert!(view.warnings.iter().any(|warning| warning.contains("answer")), "{:?}", view.warnings);
    let stored_while_running = store_bytes(dir.path());
    answer(&service, &view, json!(format!("the bot posts with {}", secrets[2])));
    let stored_at_the_end = store_bytes(dir.path());
    for bytes in [stored_while_running, stored_at_the_end] {
        let marker = b"[REDACTED:";
        assert!(bytes.windows(marker.len()).any(|window| window == marker), "the session was not stored");
        for secret in secrets {
            assert!(!bytes.windows(secret.len()).any(|window| window == secret.as_bytes()), "{secret} reached the store");
        }
    }
}

fn store_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read_dir(dir).unwrap().flat_map(|entry| std::fs::read(entry.unwrap().path()).unwrap()).collect()
}
