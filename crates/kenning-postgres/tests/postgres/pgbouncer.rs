//! The store through pgbouncer in transaction pooling mode (`pool_mode = transaction`, Debian's
//! pgbouncer 1.18, which keeps no prepared statements of its own): between two transactions
//! any statement may reach another server connection. The conformance suites pass through it,
//! and many writers at once (captures one by one, bulk loads through `COPY`, recalls, updates)
//! lose nothing and meet no "prepared statement does not exist".

use std::sync::Arc;

use kenning_core::{CaptureInput, MemoryStore, SearchFilter};

use super::domains::{recall, three_domains};
use super::*;

fn bouncer_url() -> String {
    test_variable(BOUNCER_URL)
}

fn bouncer_store(label: &str) -> PostgresStore {
    PostgresStore::open(&settings_for(bouncer_url(), &fresh_schema(label))).unwrap()
}

mod conformance_pgbouncer {
    use super::*;

    kenning_conformance::conformance_tests!({
        if !servers(&[BOUNCER_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> { Box::new(bouncer_store("bouncer")) }
    });
}

mod decision_conformance_pgbouncer {
    use super::*;
    use kenning_core::decision::DecisionStore;

    kenning_conformance::decision_conformance_tests!({
        if !servers(&[BOUNCER_URL]) {
            return;
        }
        || -> Box<dyn DecisionStore> { Box::new(bouncer_store("bouncer_decisions")) }
    });
}

mod state_conformance_pgbouncer {
    use super::*;

    kenning_conformance::state_conformance_tests!({
        if !servers(&[BOUNCER_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> { Box::new(bouncer_store("bouncer_state")) }
    });
}

const WRITERS: usize = 8;
const CAPTURES: usize = 30;
const BULK: usize = 120;

#[test]
fn many_writers_through_pgbouncer_lose_nothing() {
    if !servers(&[BOUNCER_URL]) {
        return;
    }
    let schema = fresh_schema("bouncer_writers");
    // Each writer is a store of its own, as each kenning process is, all on one schema.
    let written: Vec<(usize, usize)> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let schema = schema.clone();
                scope.spawn(move || {
                    let store = PostgresStore::open(&settings_for(bouncer_url(), &schema)).unwrap();
                    let (service, _dir) = three_domains(store);
                    // Single captures pass the near-duplicate rule, which may merge two alike.
                    let mut created = 0;
                    for n in 0..CAPTURES {
                        let content = format!("Writer {writer} notes fact {n}: the queue {n} drains every {writer} minutes.");
                        let input = CaptureInput { content, ..CaptureInput::default() };
                        created += usize::from(service.capture(input, Some("org")).unwrap().created);
                        if n % 5 == 0 {
                            assert!(!recall(&service, "queue drains").results.is_empty());
                        }
                    }
                    // A bulk load: COPY inside the transaction that pgbouncer keeps on one server connection.
                    let bulk: Vec<CaptureInput> = (0..BULK)
                        .map(|n| CaptureInput {
                            content: format!("Writer {writer} bulk note {n}: service {n} owns topic {writer}-{n}."),
                            ..CaptureInput::default()
                        })
                        .collect();
                    let loaded = service.capture_many(bulk, Some("org")).unwrap().iter().filter(|outcome| outcome.created).count();
                    (created, loaded)
                })
            })
            .collect();
        writers.into_iter().map(|writer| writer.join().unwrap()).collect()
    });
    let expected: usize = written.iter().map(|(captured, bulk)| captured + bulk).sum();
    assert_eq!(written.iter().map(|(_, bulk)| bulk).sum::<usize>(), WRITERS * BULK);

    let store = Arc::new(PostgresStore::open(&settings_for(bouncer_url(), &schema)).unwrap());
    assert_eq!(store.count(&SearchFilter::active()).unwrap(), expected as u64);
    store.catch_up_vector_index().unwrap();
    let hits = store.search_text("bulk note topic", &SearchFilter::active(), 5).unwrap();
    assert_eq!(hits.len(), 5);
    store.drop_schema().unwrap();
}

/// Regression: a session that had looked for the schema before another created it kept a stale
/// catalog entry, so its `CREATE SCHEMA IF NOT EXISTS`, run after the migration lock, failed on
/// the unique index (seen first through pgbouncer, whose timing made the race likely).
#[test]
fn many_processes_creating_one_schema_at_once_all_succeed() {
    if !servers(&[BOUNCER_URL]) {
        return;
    }
    let schema = fresh_schema("bouncer_first");
    std::thread::scope(|scope| {
        let checks: Vec<_> = (0..WRITERS)
            .map(|_| scope.spawn(|| PostgresStore::open(&settings_for(bouncer_url(), &schema)).unwrap().check()))
            .collect();
        for check in checks {
            check.join().unwrap().unwrap();
        }
    });
    PostgresStore::open(&settings_for(bouncer_url(), &schema)).unwrap().drop_schema().unwrap();
}
