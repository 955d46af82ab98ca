//! The checks of the [`DecisionStore`] contract. Each opens its own stores from the factory and
//! panics on the first violation.

use chrono::{DateTime, Utc};
use kenning_core::decision::input::{build_decision, build_outcome, build_signal, decision_memory_input, lesson_memory_input};
use kenning_core::decision::{
    CaptureDecision, Decision, DecisionChange, DecisionFilter, DecisionId, DecisionRecord, DecisionStatus, DecisionStore,
    Edge, MemoryChange, ModuleList, Node, NodeKind, OutcomeInput, SignalInput, SkillSync,
};
use kenning_core::relation;
use kenning_core::input::{apply_update, build_memory};
use kenning_core::{
    Domain, Embedding, Error, Inserted, Link, Memory, MemoryUrn, Namespace, PurgeMode, SearchFilter, Status, UpdateInput,
};

use crate::MakeDecisionStore;
use crate::fixtures::{at, id, memory};

fn domain() -> Domain {
    Domain::Project("conformance".to_owned())
}

fn decision_id(text: &str) -> DecisionId {
    DecisionId::parse(text).unwrap()
}

/// A pending decision captured `minutes` after the base time, and its memory.
fn new_decision(id_text: &str, module: &str, statement: &str, files: &[&str], minutes: i64) -> (Decision, Memory) {
    let input = CaptureDecision {
        statement: statement.to_owned(),
        alternatives: Some(vec!["Do nothing".to_owned()]),
        confidence: Some(0.7),
        module: Some(module.to_owned()),
        file_path: files.first().map(|file| (*file).to_owned()),
        related_files: files.iter().skip(1).map(|file| (*file).to_owned()).collect(),
        ..CaptureDecision::default()
    };
    let decision = build_decision(input, &ModuleList::default(), decision_id(id_text), at(minutes)).unwrap();
    let memory = build_memory(decision_memory_input(&decision, None), domain(), decision.id.memory_id(), at(minutes)).unwrap();
    (decision, memory)
}

fn insert(store: &dyn DecisionStore, id_text: &str, module: &str, files: &[&str], minutes: i64) -> Decision {
    let (decision, memory) = new_decision(id_text, module, &format!("Decision {id_text} about the {module} layer"), files, minutes);
    store.insert_decision(&decision, &memory, None).unwrap();
    decision
}

fn record(store: &dyn DecisionStore, id_text: &str) -> DecisionRecord {
    store.get_decision(&decision_id(id_text)).unwrap().unwrap_or_else(|| panic!("{id_text} is missing"))
}

/// The next revision of `current` with `status`, and its memory's next version.
fn moved(store: &dyn DecisionStore, current: &Decision, status: DecisionStatus, now: DateTime<Utc>) -> DecisionChange {
    let mut next = current.clone();
    next.status = status;
    next.revision += 1;
    next.updated_at = now;
    let memory = store.get(&current.id.memory_id()).unwrap().unwrap();
    let (next_memory, previous) = kenning_core::decision::input::refresh_decision_memory(&memory, &next, None, "status changed", now).unwrap().unwrap();
    DecisionChange {
        next,
        expected_revision: current.revision,
        memory: Some(MemoryChange { next: next_memory, previous, embedding: None }),
    }
}

fn ids(records: &[DecisionRecord]) -> Vec<String> {
    records.iter().map(|record| record.decision.id.to_string()).collect()
}

pub fn decision_and_its_memory_are_written_together(make: MakeDecisionStore) {
    let store = make();
    let (decision, memory) = new_decision("dec_a1", "database", "Use PostgreSQL for the orders service", &["src/db/schema.sql"], 0);
    store.insert_decision(&decision, &memory, Some(&Embedding { model: "m".into(), vector: vec![1.0, 0.0] })).unwrap();

    let stored = record(&*store, "dec_a1");
    assert_eq!(stored.decision, decision);
    assert!(stored.signals.is_empty() && stored.outcome.is_none());
    assert_eq!(store.get(&memory.id).unwrap(), Some(memory.clone()));
    assert_eq!(store.get(&memory.id).unwrap().unwrap().namespace.as_str(), "decisions");
    assert_eq!(store.search_vector(&[1.0, 0.0], "m", &SearchFilter::active(), 5).unwrap()[0].id, memory.id);
    let found = store.search_text("PostgreSQL orders", &SearchFilter::active(), 5).unwrap();
    assert_eq!(found[0].id, memory.id, "a decision's memory is found by full-text search");

    // A second decision with the same id is refused and leaves nothing behind.
    let (again, again_memory) = new_decision("dec_a1", "auth", "Use sessions instead of tokens here", &[], 5);
    assert!(store.insert_decision(&again, &again_memory, None).is_err());
    assert_eq!(record(&*store, "dec_a1").decision, decision);
    assert_eq!(store.count(&SearchFilter::default()).unwrap(), 1);
    assert_eq!(store.count_decisions(&DecisionFilter::default()).unwrap(), 1);
    assert_eq!(store.get_decision(&decision_id("dec_absent")).unwrap(), None);
}

pub fn update_decision_is_compare_and_swap(make: MakeDecisionStore) {
    let store = make();
    let first = insert(&*store, "dec_b1", "api", &[], 0);
    let change = moved(&*store, &first, DecisionStatus::Executed, at(1));
    store.update_decision(&change).unwrap();
    let stored = record(&*store, "dec_b1");
    assert_eq!((stored.decision.status, stored.decision.revision), (DecisionStatus::Executed, 2));
    let memory = store.get(&first.id.memory_id()).unwrap().unwrap();
    assert_eq!(memory.version, 2);
    assert_eq!(memory.metadata["status"], "executed");
    assert_eq!(store.history(&memory.id).unwrap()[0].reason, "status changed");

    // The same change again expects revision 1, which has moved on.
    assert!(matches!(store.update_decision(&change), Err(Error::Conflict { .. })));
    let mut ghost = change.clone();
    ghost.next.id = decision_id("dec_ghost");
    ghost.memory = None;
    assert!(matches!(store.update_decision(&ghost), Err(Error::NotFound(_))));
}

pub fn a_stale_memory_version_rolls_the_decision_back(make: MakeDecisionStore) {
    let store = make();
    let first = insert(&*store, "dec_c1", "api", &[], 0);
    let change = moved(&*store, &first, DecisionStatus::Executed, at(1));
    // Someone edits the decision's memory by hand in between.
    let memory = store.get(&first.id.memory_id()).unwrap().unwrap();
    let input = UpdateInput { reason: "hand edit".into(), content: Some("Edited by hand.".into()), ..UpdateInput::default() };
    let (edited, previous) = apply_update(&memory, input, at(1)).unwrap();
    store.replace(&edited, &previous, None).unwrap();

    assert!(matches!(store.update_decision(&change), Err(Error::Conflict { .. })));
    let stored = record(&*store, "dec_c1");
    assert_eq!((stored.decision.status, stored.decision.revision), (DecisionStatus::Pending, 1), "the decision row moved without its memory");
}

pub fn list_and_count_filter_decisions(make: MakeDecisionStore) {
    let store = make();
    insert(&*store, "dec_d1", "database", &["src/db/schema.sql", "src/db/pool.rs"], 0);
    insert(&*store, "dec_d2", "database", &["./src/dbx/other.rs"], 1);
    let third = insert(&*store, "dec_d3", "auth", &["src/db/"], 2);
    insert(&*store, "dec_d4", "auth", &["src/auth/login_page.rs"], 3);
    store.update_decision(&moved(&*store, &third, DecisionStatus::Executed, at(4))).unwrap();

    let list = |filter: DecisionFilter| ids(&store.list_decisions(&filter, 0, 100).unwrap());
    assert_eq!(list(DecisionFilter::default()), ["dec_d4", "dec_d3", "dec_d2", "dec_d1"], "newest first");
    assert_eq!(list(DecisionFilter { module: Some("database".into()), ..DecisionFilter::default() }), ["dec_d2", "dec_d1"]);
    assert_eq!(list(DecisionFilter { status: Some(DecisionStatus::Executed), ..DecisionFilter::default() }), ["dec_d3"]);
    // A folder matches the files under it and itself, but not a folder that only starts alike.
    assert_eq!(list(DecisionFilter { file: Some("src/db".into()), ..DecisionFilter::default() }), ["dec_d3", "dec_d1"]);
    assert_eq!(list(DecisionFilter { file: Some("src/db/pool.rs".into()), ..DecisionFilter::default() }), ["dec_d1"]);
    assert_eq!(list(DecisionFilter { file: Some("src/dbx/other.rs".into()), ..DecisionFilter::default() }), ["dec_d2"]);
    // LIKE wildcards in a path are plain characters.
    assert!(list(DecisionFilter { file: Some("src/auth/login%".into()), ..DecisionFilter::default() }).is_empty());
    assert!(list(DecisionFilter { file: Some("src/auth/login_page.r_".into()), ..DecisionFilter::default() }).is_empty());
    let chosen = DecisionFilter { ids: Some(vec![decision_id("dec_d1"), decision_id("dec_d4")]), ..DecisionFilter::default() };
    assert_eq!(list(chosen), ["dec_d4", "dec_d1"]);
    assert!(list(DecisionFilter { ids: Some(Vec::new()), ..DecisionFilter::default() }).is_empty());
    assert!(list(DecisionFilter { has_outcome: Some(true), ..DecisionFilter::default() }).is_empty());
    assert_eq!(list(DecisionFilter { has_outcome: Some(false), ..DecisionFilter::default() }).len(), 4);

    assert_eq!(ids(&store.list_decisions(&DecisionFilter::default(), 1, 2).unwrap()), ["dec_d3", "dec_d2"]);
    assert_eq!(store.count_decisions(&DecisionFilter { module: Some("auth".into()), ..DecisionFilter::default() }).unwrap(), 2);
    assert_eq!(store.count_decisions(&DecisionFilter { file: Some("src".into()), ..DecisionFilter::default() }).unwrap(), 4);
}

pub fn signals_are_kept_in_order_with_their_edges(make: MakeDecisionStore) {
    let store = make();
    let first = insert(&*store, "dec_e1", "infra", &[], 0);
    let signal = |id: &str, kind: &str, valence: &str, minutes: i64| {
        let input = SignalInput { signal_type: kind.into(), valence: valence.into(), ..SignalInput::default() };
        build_signal(input, &first.id, id.to_owned(), at(minutes)).unwrap()
    };
    store.add_signal(&signal("sig_2", "ci_passed", "positive", 2)).unwrap();
    store.add_signal(&signal("sig_1", "pr_created", "neutral", 1)).unwrap();
    let stored = record(&*store, "dec_e1");
    let order: Vec<&str> = stored.signals.iter().map(|signal| signal.id.as_str()).collect();
    assert_eq!(order, ["sig_1", "sig_2"], "signals come back oldest first");
    assert_eq!(stored.signals[1], signal("sig_2", "ci_passed", "positive", 2));

    let mut orphan = signal("sig_3", "incident", "negative", 3);
    orphan.decision_id = decision_id("dec_missing");
    assert!(matches!(store.add_signal(&orphan), Err(Error::NotFound(_))));

    let chain = store.causal_chain(&Node::decision(&first.id), 4).unwrap();
    let targets: Vec<&str> = chain.iter().map(|hop| hop.edge.to.id.as_str()).collect();
    assert_eq!(targets, ["sig_1", "sig_2"]);
    assert!(chain.iter().all(|hop| hop.depth == 1 && hop.edge.relation == relation::OBSERVED));
}

pub fn an_outcome_stores_lessons_and_edges_once(make: MakeDecisionStore) {
    let store = make();
    let first = insert(&*store, "dec_f1", "database", &[], 0);
    let input = SignalInput { signal_type: "ci_failed".into(), valence: "negative".into(), ..SignalInput::default() };
    let signal = build_signal(input, &first.id, "sig_f".to_owned(), at(1)).unwrap();
    store.add_signal(&signal).unwrap();
    // An existing lesson with the same text as one of the new ones: stored once, linked twice.
    let decision_urn = MemoryUrn::new(domain(), Namespace::parse("decisions").unwrap(), first.id.memory_id());
    let lesson_input = |text: &str| lesson_memory_input(&first, &decision_urn, kenning_core::decision::OutcomeStatus::Failure, text);
    let existing = build_memory(lesson_input("Benchmark before migrating"), domain(), id("lesson-old"), at(1)).unwrap();
    store.insert(&[(existing.clone(), None)]).unwrap();

    let outcome_input = OutcomeInput {
        final_status: "failure".into(),
        final_score: Some(0.2),
        lessons_learned: vec!["Benchmark before migrating".into(), "Keep a rollback script".into()],
        ..OutcomeInput::default()
    };
    let (mut outcome, next) = build_outcome(outcome_input, &record(&*store, "dec_f1"), "out_f1".into(), at(2)).unwrap();
    assert_eq!(next.status, DecisionStatus::Failed);
    let lessons: Vec<(Memory, Option<Embedding>)> = outcome
        .lessons
        .iter()
        .enumerate()
        .map(|(n, text)| (build_memory(lesson_input(text), domain(), id(&format!("lesson-{n}")), at(2)).unwrap(), None))
        .collect();
    outcome.lesson_ids = lessons.iter().map(|(memory, _)| memory.id.clone()).collect();
    let memory = store.get(&first.id.memory_id()).unwrap().unwrap();
    let (next_memory, previous) =
        kenning_core::decision::input::refresh_decision_memory(&memory, &next, Some(&outcome), "outcome", at(2)).unwrap().unwrap();
    let change = DecisionChange { next, expected_revision: 1, memory: Some(MemoryChange { next: next_memory, previous, embedding: None }) };
    let edges = vec![
        Edge { from: Node::decision(&first.id), relation: relation::RESULTED_IN.into(), to: Node::outcome("out_f1"), created_at: at(2) },
        Edge { from: Node::signal("sig_f"), relation: relation::PRECEDED.into(), to: Node::outcome("out_f1"), created_at: at(2) },
    ];
    let inserted = store.record_outcome(&change, &outcome, &lessons, &edges).unwrap();
    assert_eq!(inserted, [Inserted::Duplicate(existing.id.clone()), Inserted::Created]);

    let stored = record(&*store, "dec_f1");
    let stored_outcome = stored.outcome.clone().expect("the outcome is stored");
    assert_eq!(stored_outcome.lesson_ids, [existing.id.clone(), id("lesson-1")], "a duplicate lesson points at the memory that holds it");
    assert_eq!((stored_outcome.status, stored_outcome.score), (outcome.status, 0.2));
    assert_eq!(stored.decision.status, DecisionStatus::Failed);
    let lesson = store.get(&id("lesson-1")).unwrap().unwrap();
    assert_eq!(lesson.namespace.as_str(), "learnings");
    assert_eq!(lesson.links, [Link { target: decision_urn.clone(), relation: "derived-from".into() }]);
    assert_eq!(store.get(&first.id.memory_id()).unwrap().unwrap().metadata["outcome"], "failure");

    // decision -> signal -> outcome -> lessons, each at its shortest distance.
    let chain = store.causal_chain(&Node::decision(&first.id), 5).unwrap();
    let hops: Vec<(u32, &str, &str)> = chain.iter().map(|hop| (hop.depth, hop.edge.relation.as_str(), hop.edge.to.id.as_str())).collect();
    assert!(hops.contains(&(1, relation::OBSERVED, "sig_f")), "{hops:?}");
    assert!(hops.contains(&(1, relation::RESULTED_IN, "out_f1")), "{hops:?}");
    assert!(hops.contains(&(2, relation::PRECEDED, "out_f1")), "{hops:?}");
    assert!(hops.contains(&(2, relation::TAUGHT, "lesson-old")) && hops.contains(&(2, relation::TAUGHT, "lesson-1")), "{hops:?}");
    // The lessons' links back to the decision are edges too, towards its URN.
    assert!(hops.contains(&(3, "derived-from", decision_urn.to_string().as_str())), "{hops:?}");
    assert!(chain.windows(2).all(|pair| pair[0].depth <= pair[1].depth), "hops are ordered by distance");
    assert!(store.causal_chain(&Node::decision(&first.id), 1).unwrap().iter().all(|hop| hop.depth == 1));

    // A second outcome is refused and changes nothing.
    let again = store.record_outcome(&change, &outcome, &[], &[]);
    assert!(matches!(again, Err(Error::Conflict { .. })), "{again:?}");
    assert_eq!(record(&*store, "dec_f1").outcome, Some(stored_outcome.clone()));
    assert_eq!(store.count(&SearchFilter { namespaces: vec![Namespace::parse("learnings").unwrap()], ..SearchFilter::default() }).unwrap(), 2);

    let outcomes = store.outcomes(Some("database")).unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!((outcomes[0].0.id.as_str(), &outcomes[0].1), ("dec_f1", &stored_outcome));
    assert!(store.outcomes(Some("auth")).unwrap().is_empty());
    let filtered = store.list_decisions(&DecisionFilter { has_outcome: Some(true), ..DecisionFilter::default() }, 0, 10).unwrap();
    assert_eq!(ids(&filtered), ["dec_f1"]);
}

pub fn outcomes_come_oldest_first_across_modules(make: MakeDecisionStore) {
    let store = make();
    for (n, module, minutes) in [(1, "api", 30), (2, "auth", 10), (3, "api", 20)] {
        let decision = insert(&*store, &format!("dec_g{n}"), module, &[], n);
        let input = OutcomeInput { final_status: "success".into(), ..OutcomeInput::default() };
        let (outcome, next) = build_outcome(input, &record(&*store, decision.id.as_str()), format!("out_g{n}"), at(minutes)).unwrap();
        assert_eq!(outcome.score, 1.0, "a success without a score counts fully");
        let change = DecisionChange { next, expected_revision: 1, memory: None };
        store.record_outcome(&change, &outcome, &[], &[]).unwrap();
    }
    let order = |module: Option<&str>| -> Vec<String> { store.outcomes(module).unwrap().iter().map(|(d, _)| d.id.to_string()).collect() };
    assert_eq!(order(None), ["dec_g2", "dec_g3", "dec_g1"]);
    assert_eq!(order(Some("api")), ["dec_g3", "dec_g1"]);
}

pub fn the_causal_chain_survives_cycles(make: MakeDecisionStore) {
    let store = make();
    let first = insert(&*store, "dec_h1", "api", &[], 0);
    let edge = |from: Node, to: Node| Edge { from, relation: "next".into(), to, created_at: at(1) };
    let (a, b, c) = (Node::decision(&first.id), Node::outcome("out_h"), Node::memory(&id("skill-h")));
    let sync = SkillSync { edges_to: vec![(id("skill-h"), vec![edge(b.clone(), c.clone())])], ..SkillSync::default() };
    store.sync_skills(&sync).unwrap();
    let change = DecisionChange { next: first.clone(), expected_revision: 1, memory: None };
    let mut next = change.next.clone();
    next.revision = 2;
    let outcome = build_outcome(OutcomeInput { final_status: "partial".into(), ..OutcomeInput::default() }, &record(&*store, "dec_h1"), "out_h".into(), at(1)).unwrap().0;
    store.record_outcome(&DecisionChange { next, ..change }, &outcome, &[], &[edge(a.clone(), b.clone()), edge(c.clone(), a.clone())]).unwrap();

    let chain = store.causal_chain(&a, 50).unwrap();
    let hops: Vec<(u32, &str, &str)> = chain.iter().map(|hop| (hop.depth, hop.edge.from.id.as_str(), hop.edge.to.id.as_str())).collect();
    assert_eq!(hops, [(1, "dec_h1", "out_h"), (2, "out_h", "skill-h"), (3, "skill-h", "dec_h1")]);
    assert_eq!(chain[1].edge.to.kind, NodeKind::Memory);
}

pub fn memory_links_are_mirrored_as_edges(make: MakeDecisionStore) {
    let store = make();
    let target = MemoryUrn::parse("links.target", "kenning://user/learnings/target-1").unwrap();
    let other = MemoryUrn::parse("links.target", "kenning://org:acme/patterns/target-2").unwrap();
    let mut source = memory("source-1", "learnings", "The pool must be sized per service.");
    source.links = vec![Link { target: target.clone(), relation: "relates-to".into() }];
    store.insert(&[(source.clone(), None)]).unwrap();
    let urn_node = |urn: &MemoryUrn| Node { kind: NodeKind::Urn, id: urn.to_string() };
    let incoming = store.edges_to(&urn_node(&target)).unwrap();
    assert_eq!(incoming.len(), 1);
    assert_eq!((incoming[0].from.clone(), incoming[0].relation.as_str()), (Node::memory(&source.id), "relates-to"));

    let (next, previous) = crate::fixtures::supersede(&source, "relinked", |memory| {
        memory.links = vec![Link { target: other.clone(), relation: "supersedes".into() }];
    });
    store.replace(&next, &previous, None).unwrap();
    assert!(store.edges_to(&urn_node(&target)).unwrap().is_empty(), "a removed link leaves the graph");
    assert_eq!(store.edges_to(&urn_node(&other)).unwrap()[0].relation, "supersedes");
    store.rebuild_index().unwrap();
    assert_eq!(store.edges_to(&urn_node(&other)).unwrap().len(), 1, "rebuilding the index keeps the links");
}

pub fn skills_sync_inserts_replaces_and_rewires(make: MakeDecisionStore) {
    let store = make();
    let skill = memory("sk_1", "patterns", "Skill: pooled connections work.");
    let edge = |from: &str| Edge { from: Node::outcome(from), relation: relation::SUPPORTS.into(), to: Node::memory(&skill.id), created_at: at(1) };
    store
        .sync_skills(&SkillSync {
            inserts: vec![(skill.clone(), None)],
            replaces: Vec::new(),
            edges_to: vec![(skill.id.clone(), vec![edge("out_1"), edge("out_2")])],
        })
        .unwrap();
    assert_eq!(store.get(&skill.id).unwrap(), Some(skill.clone()));
    assert_eq!(store.edges_to(&Node::memory(&skill.id)).unwrap().len(), 2);

    let (retired, previous) = crate::fixtures::supersede(&skill, "pattern dissolved", |memory| memory.status = Status::Forgotten);
    let change = MemoryChange { next: retired.clone(), previous, embedding: None };
    store
        .sync_skills(&SkillSync { inserts: Vec::new(), replaces: vec![change.clone()], edges_to: vec![(skill.id.clone(), vec![edge("out_3")])] })
        .unwrap();
    assert_eq!(store.get(&skill.id).unwrap().unwrap().status, Status::Forgotten);
    let sources: Vec<String> = store.edges_to(&Node::memory(&skill.id)).unwrap().into_iter().map(|edge| edge.from.id).collect();
    assert_eq!(sources, ["out_3"]);

    // A stale replace fails as a whole: the new skill in the same sync is not written either.
    let fresh = memory("sk_2", "patterns", "Skill: feature flags for auth changes.");
    let stale = store.sync_skills(&SkillSync { inserts: vec![(fresh.clone(), None)], replaces: vec![change], edges_to: Vec::new() });
    assert!(matches!(stale, Err(Error::Conflict { .. })), "{stale:?}");
    assert_eq!(store.get(&fresh.id).unwrap(), None);
}

pub fn purge_removes_decisions_with_their_signals_and_outcomes(make: MakeDecisionStore) {
    let store = make();
    let (decision, mut memory) = new_decision("dec_p1", "backend", "Adopt the ledger table for billing", &["src/billing"], 0);
    memory.author = Some("ada".to_owned());
    store.insert_decision(&decision, &memory, None).unwrap();
    let kept = insert(&*store, "dec_p2", "backend", &[], 1);
    let input = SignalInput { signal_type: "ci_failed".into(), valence: "negative".into(), ..SignalInput::default() };
    store.add_signal(&build_signal(input, &decision.id, "sig_p".to_owned(), at(2)).unwrap()).unwrap();
    let outcome_input = OutcomeInput {
        final_status: "failure".into(),
        final_score: Some(0.1),
        lessons_learned: vec!["Shadow-write the ledger first".into()],
        ..OutcomeInput::default()
    };
    let (mut outcome, next) = build_outcome(outcome_input, &record(&*store, "dec_p1"), "out_p1".into(), at(3)).unwrap();
    let decision_urn = MemoryUrn::new(domain(), Namespace::parse("decisions").unwrap(), decision.id.memory_id());
    let lesson_input = lesson_memory_input(&decision, &decision_urn, kenning_core::decision::OutcomeStatus::Failure, &outcome.lessons[0]);
    let lesson = build_memory(lesson_input, domain(), id("lesson-p"), at(3)).unwrap();
    outcome.lesson_ids = vec![lesson.id.clone()];
    let current = store.get(&decision.id.memory_id()).unwrap().unwrap();
    let (next_memory, previous) =
        kenning_core::decision::input::refresh_decision_memory(&current, &next, Some(&outcome), "outcome", at(3)).unwrap().unwrap();
    let change = DecisionChange { next, expected_revision: 1, memory: Some(MemoryChange { next: next_memory, previous, embedding: None }) };
    let edges = vec![
        Edge { from: Node::decision(&decision.id), relation: relation::RESULTED_IN.into(), to: Node::outcome("out_p1"), created_at: at(3) },
        Edge { from: Node::signal("sig_p"), relation: relation::PRECEDED.into(), to: Node::outcome("out_p1"), created_at: at(3) },
    ];
    store.record_outcome(&change, &outcome, &[(lesson.clone(), None)], &edges).unwrap();
    // decision -> signal, decision -> outcome, signal -> outcome, outcome -> lesson.
    let chain = store.causal_chain(&Node::decision(&decision.id), 1).unwrap();
    assert!(chain.len() >= 2, "{chain:?}");

    let dry = store.purge_author("ada", PurgeMode::DryRun).unwrap();
    assert_eq!((dry.memories, dry.versions, dry.decisions, dry.signals, dry.outcomes), (1, 1, 1, 1, 1), "{dry:?}");
    assert!(dry.edges >= 4, "observed, resulted-in, preceded and taught at least: {dry:?}");
    assert!(store.get_decision(&decision.id).unwrap().is_some(), "a dry run removes nothing");

    let purged = store.purge_author("ada", PurgeMode::Apply).unwrap();
    assert_eq!(purged, dry, "the purge removes what the dry run counted");
    assert_eq!(store.get_decision(&decision.id).unwrap(), None);
    assert_eq!(store.get(&decision.id.memory_id()).unwrap(), None);
    assert!(store.causal_chain(&Node::decision(&decision.id), 5).unwrap().is_empty());
    assert!(store.edges_to(&Node::outcome("out_p1")).unwrap().is_empty());
    assert!(store.edges_to(&Node::memory(&lesson.id)).unwrap().is_empty(), "the outcome's edge to its lesson is gone");
    assert!(store.outcomes(None).unwrap().is_empty());
    assert_eq!(ids(&store.list_decisions(&DecisionFilter::default(), 0, 10).unwrap()), [kept.id.to_string()]);
    assert_eq!(store.count_decisions(&DecisionFilter { file: Some("src/billing".into()), ..DecisionFilter::default() }).unwrap(), 0);
    // The lesson has no author of its own here, so it stays, as do other authors' decisions.
    assert!(store.get(&lesson.id).unwrap().is_some());
    assert!(store.get_decision(&kept.id).unwrap().is_some());
}
