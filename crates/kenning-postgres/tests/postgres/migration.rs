//! Schema migrations: an empty database gets the whole schema on the first call; a schema left
//! at the first version by an older build is upgraded in place through every later migration,
//! its memories kept.

use kenning_conformance::fixtures::{id, memory};
use kenning_core::decision::{DecisionStore, Node, NodeKind};
use kenning_core::{Link, MemoryStore, MemoryUrn, SearchFilter};
use kenning_postgres::migrate_to;

use super::*;

#[test]
fn an_empty_database_gets_the_latest_schema() {
    if !servers(&[PG_URL]) {
        return;
    }
    let store = fresh_store("empty");
    assert_eq!(store.schema_version().unwrap(), PostgresStore::latest_schema_version());
    assert_eq!(store.count(&SearchFilter::default()).unwrap(), 0);
}

#[test]
fn an_older_schema_is_upgraded_with_its_memories() {
    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("upgrade");
    let previous = 1;
    migrate_to(&settings(&schema), previous as usize).unwrap();

    // A memory as the first schema holds it, written the way that build wrote it.
    let mut old = memory("written-before-the-upgrade", "learnings", "Index foreign keys before the nightly import in db/import.sql.");
    old.metadata.insert(kenning_core::provenance::BRANCH_KEY.to_owned(), "main".to_owned());
    old.links = vec![Link {
        target: MemoryUrn::parse("links.target", "kenning://user/learnings/older-note").unwrap(),
        relation: "relates-to".to_owned(),
    }];
    let mut client = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    client
        .execute(
            &format!(
                "INSERT INTO {schema}.memories (id, namespace, kind, status, confidence, created_at, occurred_at, \
                 content_hash, version, tags, search, body) \
                 VALUES ($1, 'learnings', 'semantic', 'active', 0.8, 0, 0, $2, 1, '{{}}', to_tsvector('english', $3), $4)"
            ),
            &[&old.id.as_str(), &old.content_hash(), &old.search_text(), &serde_json::to_string(&old).unwrap()],
        )
        .unwrap();
    let version: i64 = client.query_one(&format!("SELECT version FROM {schema}.schema_migrations"), &[]).unwrap().get(0);
    assert_eq!(version, previous);

    let store = PostgresStore::open(&settings(&schema)).unwrap();
    assert_eq!(store.get(&id("written-before-the-upgrade")).unwrap(), Some(old.clone()));
    assert_eq!(store.schema_version().unwrap(), PostgresStore::latest_schema_version());
    let hits = store.search_text("foreign keys", &SearchFilter::active(), 10).unwrap();
    assert_eq!(hits.first().map(|hit| hit.id.as_str()), Some("written-before-the-upgrade"));
    // The upgrade copied the memory's link into the graph.
    let target = Node { kind: NodeKind::Urn, id: "kenning://user/learnings/older-note".to_owned() };
    let edges = store.edges_to(&target).unwrap();
    assert_eq!(edges.len(), 1, "{edges:?}");
    assert_eq!(edges[0].from, Node::memory(&old.id));
    // The upgrade gave the memory its provenance facets (migration 3).
    let about = SearchFilter { branch: Some("main".to_owned()), file: Some("db".to_owned()), ..SearchFilter::active() };
    assert_eq!(store.count(&about).unwrap(), 1);
}

/// Contradiction records written before the records had subjects (migration 8) are found by
/// their memories once the schema is upgraded; a record of another kind, or one whose body
/// names no memories, gets none.
#[test]
fn contradiction_records_stored_before_subjects_are_found_by_their_memories() {
    use kenning_core::contradiction::{Contradiction, ContradictionKind, Detection};
    use kenning_core::state::StateKind;
    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("subjects");
    migrate_to(&settings(&schema), 7).unwrap();
    let detection = Detection { kind: ContradictionKind::ChangedValue, older: Vec::new(), newer: Vec::new(), newer_states_change: false };
    let body = |id: &str, a: &str, b: &str| Contradiction::open(id.into(), a.into(), b.into(), &detection, "found", kenning_conformance::fixtures::at(0)).to_body();
    let rows = [
        ("contradiction", "ct_1", body("ct_1", "kenning://org/learnings/m1", "kenning://org/learnings/m2"), 1_i64),
        ("contradiction", "ct_2", body("ct_2", "kenning://org/learnings/m2", "kenning://org/learnings/m3"), 2),
        ("contradiction", "ct_3", "not json".to_owned(), 3),
        ("workflow", "wf_1", r#"{"a":"kenning://org/learnings/m1","b":"kenning://org/learnings/m2"}"#.to_owned(), 4),
    ];
    let mut client = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    for (kind, id, body, updated) in rows {
        client
            .execute(&format!("INSERT INTO {schema}.state (kind, id, revision, updated_us, body) VALUES ($1, $2, 1, $3, $4)"), &[&kind, &id, &updated, &body])
            .unwrap();
    }

    let store = PostgresStore::open(&settings(&schema)).unwrap();
    let state = store.state().unwrap();
    let found = |kind, subject: &str| -> Vec<String> { state.state_about(kind, &[subject]).unwrap().into_iter().map(|record| record.id).collect() };
    assert_eq!(found(StateKind::Contradiction, "kenning://org/learnings/m2"), ["ct_2", "ct_1"]);
    assert_eq!(found(StateKind::Contradiction, "kenning://org/learnings/m1"), ["ct_1"]);
    assert!(found(StateKind::Workflow, "kenning://org/learnings/m1").is_empty(), "only contradictions are about memories");
    assert!(state.get_state(StateKind::Contradiction, "ct_3").unwrap().unwrap().subjects.is_empty());
    assert_eq!(state.get_state(StateKind::Contradiction, "ct_1").unwrap().unwrap().subjects, ["kenning://org/learnings/m1", "kenning://org/learnings/m2"]);
}
