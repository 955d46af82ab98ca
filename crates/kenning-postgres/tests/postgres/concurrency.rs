//! Eight processes capture the same contents and update the same memories at once: every update
//! lands (compare-and-swap, retried), and every content is stored once (the unique index).

use std::collections::HashMap;

use kenning_conformance::fixtures::{id, memory, supersede};
use kenning_core::{Error, Inserted, MemoryStore, Namespace, SearchFilter};

use super::*;

const WRITERS: usize = 8;
/// Memories every writer updates.
const SHARED: usize = 4;
/// Updates each writer makes to each shared memory.
const ROUNDS: usize = 12;
/// Contents every writer captures, each under an id of its own.
const CAPTURES: usize = 40;

fn shared_id(n: usize) -> String {
    format!("shared-{n}")
}

fn standard(n: usize) -> String {
    format!("Shared standard number {n}: every migration is reviewed by two people.")
}

/// One writer: captures every content, then appends a line to each shared memory per round,
/// re-reading and trying again whenever another writer got in first.
#[test]
#[ignore = "a child process that another test starts; it is not a test of its own"]
fn child_org_writer() {
    assert_eq!(child_mode().as_deref(), Some("org-writer"), "started by another test, with the child mode set");
    let store = child_store();
    let me = child_index();
    let mut created = 0;
    for n in 0..CAPTURES {
        let capture = memory(&format!("capture-{me}-{n}"), "standards", &standard(n));
        if store.insert(&[(capture, None)]).unwrap() == [Inserted::Created] {
            created += 1;
        }
    }
    println!("OUT created {created}");
    let mut conflicts = 0;
    for round in 0..ROUNDS {
        for n in 0..SHARED {
            loop {
                let current = store.get(&id(&shared_id(n))).unwrap().unwrap();
                let (next, previous) =
                    supersede(&current, "appended", |m| m.content.push_str(&format!("\nwriter {me} round {round}")));
                match store.replace(&next, &previous, None) {
                    Ok(()) => break,
                    Err(Error::Conflict { .. }) => conflicts += 1,
                    Err(other) => panic!("writer {me}: {other}"),
                }
            }
        }
    }
    println!("OUT conflicts {conflicts}");
}

#[test]
fn eight_processes_lose_no_update_and_store_no_duplicate() {
    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("writers");
    let store = PostgresStore::open(&settings(&schema)).unwrap();
    for n in 0..SHARED {
        let shared = memory(&shared_id(n), "progress", &format!("Shared log {n}."));
        assert_eq!(store.insert(&[(shared, None)]).unwrap(), [Inserted::Created]);
    }

    let outputs = run_children("concurrency::child_org_writer", "org-writer", &schema, WRITERS);

    let figure = |lines: &[String], name: &str| -> usize {
        lines.iter().find_map(|line| line.strip_prefix(&format!("OUT {name} "))).unwrap().parse().unwrap()
    };
    let created: usize = outputs.iter().map(|lines| figure(lines, "created")).sum();
    let conflicts: usize = outputs.iter().map(|lines| figure(lines, "conflicts")).sum();
    assert_eq!(created, CAPTURES, "each content is created by exactly one writer");
    let standards = SearchFilter { namespaces: vec![Namespace::parse("standards").unwrap()], ..SearchFilter::active() };
    assert_eq!(store.count(&standards).unwrap(), CAPTURES as u64, "0 duplicate memories");

    for n in 0..SHARED {
        let stored = store.get(&id(&shared_id(n))).unwrap().unwrap();
        let mut lines: HashMap<&str, usize> = HashMap::new();
        for line in stored.content.lines().skip(1) {
            *lines.entry(line).or_default() += 1;
        }
        for writer in 0..WRITERS {
            for round in 0..ROUNDS {
                let line = format!("writer {writer} round {round}");
                assert_eq!(lines.get(line.as_str()), Some(&1), "shared-{n} lost or repeated `{line}`");
            }
        }
        assert_eq!(lines.len(), WRITERS * ROUNDS, "0 lost updates");
        assert_eq!(stored.version as usize, 1 + WRITERS * ROUNDS);
        assert_eq!(store.history(&stored.id).unwrap().len(), WRITERS * ROUNDS, "every superseded version is kept");
    }
    // Not a requirement, but a sign that the writers really raced.
    eprintln!("{conflicts} compare-and-swap conflicts were retried");
}

/// Two batches, each on its own connections, whose captures contradict the same stored memories
/// in opposite orders: each batch marks them all superseded in one transaction, so both must
/// come through (a deadlock between them was broken by the server after a second and retried),
/// and every contradiction is recorded and every mark kept.
#[test]
fn two_batches_contradicting_the_same_memories_at_once_record_every_contradiction() {
    use std::sync::Arc;

    use kenning_core::{CaptureInput, Domain, Embedder};
    use kenning_engine::{DomainStore, MemoryService};

    if !servers(&[PG_URL]) {
        return;
    }
    let schema = fresh_schema("batches");
    let embedder: Arc<dyn Embedder> = Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap());
    let service = || {
        let store: Arc<dyn MemoryStore> = Arc::new(PostgresStore::open(&settings(&schema)).unwrap());
        MemoryService::new(vec![DomainStore { domain: Domain::Org("acme".to_owned()), store }], Some(embedder.clone()))
    };
    let syllables = ["ka", "lo", "mi", "nu", "pe", "ri", "so", "tu"];
    let names: Vec<String> = (0..48).map(|at| format!("{}{}{}", syllables[at % 8], syllables[at / 8], ["x", "v", "q", "z"][at % 4])).collect();
    let fact = |name: &str, minutes: u32| CaptureInput {
        content: format!("The {name} cache keeps its {name} entries for {minutes} minutes."),
        namespace: Some("config".to_owned()),
        ..CaptureInput::default()
    };
    let first = service();
    let older: Vec<String> = first.capture_many(names.iter().map(|name| fact(name, 30)).collect(), None).unwrap().into_iter().map(|outcome| outcome.urn).collect();

    let batches = std::thread::scope(|scope| {
        let forward = scope.spawn(|| service().capture_many(names.iter().map(|name| fact(name, 45)).collect(), None).unwrap());
        let backward = scope.spawn(|| service().capture_many(names.iter().rev().map(|name| fact(name, 60)).collect(), None).unwrap());
        [forward.join().unwrap(), backward.join().unwrap().into_iter().rev().collect::<Vec<_>>()]
    });
    for batch in &batches {
        for (at, outcome) in batch.iter().enumerate() {
            assert!(outcome.created && outcome.warnings.is_empty(), "{outcome:?}");
            assert!(outcome.contradictions.iter().any(|note| note.with == older[at]), "capture {at} reports its contradiction: {outcome:?}");
        }
    }
    let recorded: usize = batches.iter().flatten().map(|outcome| outcome.contradictions.len()).sum();
    assert_eq!(first.contradiction_counts(None).unwrap().open as usize, recorded, "every contradiction reported is recorded");
    for urn in &older {
        let stale = first.get(urn).unwrap();
        assert_eq!(stale.version, 3, "marked superseded by a capture of each batch: {stale:?}");
        assert_eq!(first.history(urn).unwrap().versions.len(), 2);
    }
}
