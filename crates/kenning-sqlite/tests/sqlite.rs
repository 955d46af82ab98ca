//! The SQLite store against the shared conformance suite, and what only a real file and real
//! processes can show: acknowledged writes survive SIGKILL, two processes can write one store at
//! once, and the index and ranking behave as SQLite-specific choices promise.
//!
//! Tests that need other processes spawn this test binary again, running one `child_*` test
//! with an environment variable that tells it what to do. Without that variable those tests
//! return at once, so in a normal run they pass trivially.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::TimeDelta;
use kenning_conformance::fixtures::{at, embedding, hit_ids, id, insert_all, memory, sorted, supersede, unit};
use kenning_core::{Embedding, Error, Inserted, Memory, MemoryRecord, MemoryStore, PurgeMode, SearchFilter};
use kenning_sqlite::{Durability, SqliteStore};

mod conformance {
    use super::*;

    kenning_conformance::conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        move || -> Box<dyn MemoryStore> {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Box::new(SqliteStore::open(&dir.path().join(format!("store-{n}.db"))).unwrap())
        }
    });
}

mod state_conformance {
    use super::*;

    kenning_conformance::state_conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        move || -> Box<dyn MemoryStore> {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Box::new(SqliteStore::open(&dir.path().join(format!("state-{n}.db"))).unwrap())
        }
    });
}

mod decision_conformance {
    use super::*;
    use kenning_core::decision::DecisionStore;

    kenning_conformance::decision_conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        move || -> Box<dyn DecisionStore> {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Box::new(SqliteStore::open(&dir.path().join(format!("decisions-{n}.db"))).unwrap())
        }
    });
}

const CHILD_MODE: &str = "KENNING_TEST_CHILD";
const CHILD_STORE: &str = "KENNING_TEST_STORE";
const CHILD_PREFIX: &str = "KENNING_TEST_PREFIX";
const CHILD_DURABILITY: &str = "KENNING_TEST_DURABILITY";
const CRASH_MODEL: &str = "crash-model";
/// Memories each child writes in the two-writer test; every fifth is then updated.
const PAIR_WRITES: usize = 500;

fn child_mode() -> Option<String> {
    std::env::var(CHILD_MODE).ok()
}

fn spawn_child(test: &str, mode: &str, store: &Path, settings: &[(&str, &str)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env(CHILD_STORE, store)
        .envs(settings.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn child_store() -> SqliteStore {
    let durability = match std::env::var(CHILD_DURABILITY).as_deref() {
        Ok("process-crash") => Durability::ProcessCrash,
        _ => Durability::PowerLoss,
    };
    SqliteStore::open_with(&PathBuf::from(std::env::var(CHILD_STORE).unwrap()), durability).unwrap()
}

/// The `n`th memory the crash writer captures, with its vector; deterministic so that the
/// parent can check every acknowledged one field by field.
fn crash_memory(n: u64) -> (Memory, Embedding) {
    let mut m =
        memory(&format!("crash-{n}"), "progress", &format!("Crash-test memory number {n}. {}", "Padding. ".repeat(20)));
    m.tags = vec!["crash".into(), format!("n{}", n % 7)];
    m.created_at = at(n as i64);
    m.updated_at = m.created_at;
    let angle = n as f32;
    (m, embedding(CRASH_MODEL, &[angle.sin(), angle.cos(), 0.5]))
}

/// Captures memories one transaction at a time, printing each id only once `insert` returned,
/// until the parent kills it.
#[test]
#[ignore = "a child process that another test starts; it is not a test of its own"]
fn child_crash_writer() {
    assert_eq!(child_mode().as_deref(), Some("crash-writer"), "started by another test, with the child mode set");
    let store = child_store();
    let mut stdout = std::io::stdout().lock();
    for n in 0.. {
        let (m, vector) = crash_memory(n);
        assert_eq!(store.insert(&[(m, Some(vector))]).unwrap(), [Inserted::Created]);
        writeln!(stdout, "ACK {n}").unwrap();
        stdout.flush().unwrap();
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    kill_a_writer_and_check_every_acknowledged_write("power-loss");
}

/// Without a disk flush per commit, the commits still reach the OS before they are
/// acknowledged, which is all that killing the process can take away.
#[test]
fn acknowledged_writes_survive_sigkill_without_disk_flushes() {
    kill_a_writer_and_check_every_acknowledged_write("process-crash");
}

fn kill_a_writer_and_check_every_acknowledged_write(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let mut child = spawn_child("child_crash_writer", "crash-writer", &path, &[(CHILD_DURABILITY, durability)]);
    let mut acknowledged: Vec<u64> = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if let Some(n) = line.unwrap().strip_prefix("ACK ") {
            acknowledged.push(n.parse().unwrap());
            if acknowledged.len() >= 300 {
                break;
            }
        }
    }
    // `Child::kill` sends SIGKILL: the writer gets no chance to finish or clean up.
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(acknowledged.len() >= 300, "the writer stopped early: {}", String::from_utf8_lossy(&output.stderr));

    let store = SqliteStore::open(&path).unwrap();
    let records: HashMap<String, MemoryRecord> =
        store.export(0, usize::MAX).unwrap().into_iter().map(|record| (record.memory.id.to_string(), record)).collect();
    for &n in &acknowledged {
        let (memory, vector) = crash_memory(n);
        let expected = MemoryRecord { memory, history: Vec::new(), embedding: Some(vector) };
        assert_eq!(store.get(&expected.memory.id).unwrap().as_ref(), Some(&expected.memory), "acknowledged memory {n}");
        assert_eq!(records.get(expected.memory.id.as_str()), Some(&expected), "acknowledged record {n}");
    }
    let stats = store.stats().unwrap();
    assert!(stats.total >= acknowledged.len() as u64);
    assert_eq!(stats.text_index_entries, stats.total, "text index out of step after the crash");
    assert_eq!(stats.vectors_by_model.get(CRASH_MODEL).copied(), Some(stats.total), "a memory lost its vector");
    let found = store.search_text("crash test memory", &SearchFilter::active(), 10).unwrap();
    assert_eq!(found.len(), 10);
}

fn pair_memory(prefix: &str, n: usize) -> Memory {
    let mut m = memory(&format!("{prefix}-{n}"), "learnings", &format!("Writer {prefix} captured memory {n}."));
    m.created_at = at(n as i64);
    m.updated_at = m.created_at;
    m
}

fn pair_updated_content(prefix: &str, n: usize) -> String {
    format!("Writer {prefix} revised memory {n}.")
}

/// Writes its share of the two-writer test: one transaction per capture, and an update of every
/// fifth memory right after capturing it.
#[test]
#[ignore = "a child process that another test starts; it is not a test of its own"]
fn child_pair_writer() {
    assert_eq!(child_mode().as_deref(), Some("pair-writer"), "started by another test, with the child mode set");
    let prefix = std::env::var(CHILD_PREFIX).unwrap();
    let store = child_store();
    for n in 0..PAIR_WRITES {
        let m = pair_memory(&prefix, n);
        assert_eq!(store.insert(&[(m.clone(), None)]).unwrap(), [Inserted::Created]);
        if n % 5 == 0 {
            let (next, previous) = supersede(&m, "revised", |m| m.content = pair_updated_content(&prefix, n));
            store.replace(&next, &previous, None).unwrap();
        }
    }
}

#[test]
fn two_processes_write_one_store_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Both children open a store that does not exist yet, so they also race to create it.
    let path = dir.path().join("nested").join("shared.db");
    let prefixes = ["left", "right"];
    let children: Vec<Child> =
        prefixes.iter().map(|prefix| spawn_child("child_pair_writer", "pair-writer", &path, &[(CHILD_PREFIX, prefix)])).collect();
    // Each child's output is drained on its own thread so neither blocks on a full pipe.
    let outputs: Vec<Output> = std::thread::scope(|scope| {
        let waits: Vec<_> =
            children.into_iter().map(|child| scope.spawn(|| child.wait_with_output().unwrap())).collect();
        waits.into_iter().map(|wait| wait.join().unwrap()).collect()
    });
    for (prefix, output) in prefixes.iter().zip(&outputs) {
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "writer {prefix} failed:\n{text}");
        assert!(!text.contains("locked") && !text.contains("busy"), "writer {prefix} saw contention:\n{text}");
    }

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.count(&SearchFilter::default()).unwrap(), 2 * PAIR_WRITES as u64);
    for prefix in prefixes {
        for n in 0..PAIR_WRITES {
            let stored = store.get(&id(&format!("{prefix}-{n}"))).unwrap().expect("every write is present");
            if n % 5 == 0 {
                assert_eq!(stored.version, 2);
                assert_eq!(stored.content, pair_updated_content(prefix, n));
                assert_eq!(store.history(&stored.id).unwrap().len(), 1);
            } else {
                assert_eq!(stored, pair_memory(prefix, n));
            }
        }
    }
    assert_eq!(store.stats().unwrap().text_index_entries, 2 * PAIR_WRITES as u64);
}

#[test]
fn threads_share_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("threads.db")).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let store = &store;
            scope.spawn(move || {
                for n in 0..50 {
                    let m = memory(&format!("t{thread}-{n}"), "learnings", &format!("Thread {thread} wrote note {n}."));
                    assert_eq!(store.insert(&[(m, None)]).unwrap(), [Inserted::Created]);
                    store.search_text("thread note", &SearchFilter::active(), 5).unwrap();
                }
            });
        }
    });
    assert_eq!(store.count(&SearchFilter::active()).unwrap(), 200);
}

#[test]
fn bm25_prefers_a_rare_term() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("rank.db")).unwrap();
    let mut memories: Vec<Memory> = (0..30)
        .map(|n| {
            memory(&format!("common-{n}"), "learnings", &format!("Database migration {n} ran against the database."))
        })
        .collect();
    memories.push(memory("repeats", "learnings", "Database, database, database: the database of databases."));
    memories.push(memory("rare", "learnings", "Notes on zymurgy, which mentions a database once."));
    insert_all(&store, &memories);

    let hits = store.search_text("database zymurgy", &SearchFilter::active(), 5).unwrap();
    assert_eq!(hits[0].id.as_str(), "rare", "{hits:?}");
    assert!(hits.iter().all(|hit| hit.score > 0.0), "scores are positive, higher is better: {hits:?}");
    assert!(hits[0].score > hits[1].score);
}

#[test]
fn open_creates_directories_and_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("memories.db");
    let m = memory("persisted", "context", "Written before the store was closed.");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.insert(&[(m.clone(), Some(embedding("model", &[1.0, 2.0])))]).unwrap();
        assert_eq!(store.path(), path);
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.get(&m.id).unwrap(), Some(m));
    let stats = store.stats().unwrap();
    assert_eq!(stats.backend, "sqlite");
    assert_eq!(stats.location, path.display().to_string());
    assert!(stats.size_bytes.unwrap() > 0);
    assert_eq!(stats.text_index_entries, 1);
}

#[test]
fn a_store_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    drop(SqliteStore::open(&path).unwrap());
    rusqlite::Connection::open(&path).unwrap().execute_batch("PRAGMA user_version = 999").unwrap();
    let error = SqliteStore::open(&path).err().expect("a newer schema must not be opened");
    assert!(error.to_string().contains("upgrade kenning"), "{error}");
}

#[test]
fn rebuild_index_repairs_damaged_search_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.db");
    let store = SqliteStore::open(&path).unwrap();
    insert_all(
        &store,
        &[memory("one", "learnings", "Flaky test in the parser."), memory("two", "learnings", "Parser rewrite plan.")],
    );
    rusqlite::Connection::open(&path).unwrap().execute_batch("UPDATE memories SET search_text = ''").unwrap();
    // A store opened afterwards builds its index from the damaged rows.
    let store = SqliteStore::open(&path).unwrap();
    assert!(store.search_text("parser", &SearchFilter::active(), 10).unwrap().is_empty());
    assert_eq!(store.stats().unwrap().text_index_entries, 0);

    assert_eq!(store.rebuild_index().unwrap(), 2);
    assert_eq!(store.search_text("parser", &SearchFilter::active(), 10).unwrap().len(), 2);
    assert_eq!(store.stats().unwrap().text_index_entries, 2);
}

#[test]
fn a_replace_that_would_duplicate_active_content_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("dup.db")).unwrap();
    let keep = memory("keep", "learnings", "Use cargo nextest in CI.");
    let other = memory("other", "learnings", "Use cargo test in CI.");
    insert_all(&store, &[keep.clone(), other.clone()]);
    let (next, previous) = supersede(&other, "copy", |m| m.content = keep.content.clone());
    match store.replace(&next, &previous, None) {
        Err(Error::Invalid(error)) => assert!(error.problem.contains("keep"), "{error}"),
        result => panic!("expected a rejection, got {result:?}"),
    }
    assert_eq!(store.get(&other.id).unwrap(), Some(other));
}

#[test]
fn an_insert_batch_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("atomic.db")).unwrap();
    let first = memory("taken", "learnings", "The first memory with this id.");
    insert_all(&store, &[first]);
    let fresh = memory("fresh", "learnings", "Would be written, but its batch fails.");
    let clash = memory("taken", "learnings", "Different content under an id that is taken.");
    let result = store.insert(&[(fresh.clone(), None), (clash, None)]);
    assert!(matches!(result, Err(Error::Storage(ref message)) if message.contains("already exists")), "{result:?}");
    assert_eq!(store.get(&fresh.id).unwrap(), None);
}

#[test]
fn record_access_keeps_the_latest_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("access.db")).unwrap();
    let m = memory("read", "learnings", "Read by two processes.");
    insert_all(&store, std::slice::from_ref(&m));
    store.record_access(std::slice::from_ref(&m.id), at(30)).unwrap();
    store.record_access(std::slice::from_ref(&m.id), at(30) - TimeDelta::minutes(5)).unwrap();
    let read = store.get(&m.id).unwrap().unwrap();
    assert_eq!((read.access_count, read.last_accessed_at), (2, Some(at(30))));
}

/// Each store handle keeps its own search index; a handle must see what another handle (as
/// another process would) wrote after its index was built: inserts, edits, status changes, new
/// vectors, and vectors dropped when the text changed.
#[test]
fn searches_see_writes_made_through_another_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let reader = SqliteStore::open(&path).unwrap();
    let writer = SqliteStore::open(&path).unwrap();
    let model = "shared-model";
    reader.warm_up(Some(model)).unwrap();
    let pool = memory("pool", "config", "The connection pool holds twenty connections.");
    writer.insert(&[(pool.clone(), Some(embedding(model, &[1.0, 0.0, 0.0])))]).unwrap();
    let search = |query: &str| hit_ids(&reader.search_text(query, &SearchFilter::active(), 10).unwrap());
    let nearest = |vector: &[f32]| hit_ids(&reader.search_vector(&unit(vector), model, &SearchFilter::active(), 10).unwrap());
    assert_eq!(search("connection pool"), ["pool"]);
    assert_eq!(nearest(&[1.0, 0.0, 0.0]), ["pool"]);

    let cache = memory("cache", "config", "Redis caches sessions for an hour.");
    writer.insert(&[(cache.clone(), None)]).unwrap();
    assert_eq!(search("redis sessions"), ["cache"]);
    writer.set_embeddings(&[(cache.id.clone(), embedding(model, &[0.0, 1.0, 0.0]))]).unwrap();
    assert_eq!(nearest(&[0.0, 1.0, 0.0])[0], "cache");

    let pool = kenning_conformance::fixtures::update(&writer, &pool, |m| {
        m.title = "Pool size".into();
        m.content = "The pool holds forty sockets.".into();
    });
    assert!(search("connection").is_empty());
    assert_eq!(search("sockets"), ["pool"]);
    assert_eq!(nearest(&[1.0, 0.0, 0.0]), ["cache"], "the edit dropped the pool's stale vector");

    kenning_conformance::fixtures::update(&writer, &pool, |m| m.status = kenning_core::Status::Forgotten);
    assert!(search("sockets").is_empty());
    let forgotten = SearchFilter { status: Some(kenning_core::Status::Forgotten), ..SearchFilter::default() };
    assert_eq!(hit_ids(&reader.search_text("sockets", &forgotten, 10).unwrap()), ["pool"]);
}

/// A purge deletes rows, which change numbers cannot announce: another handle's index, built
/// before, and the index file written before, must both stop finding what was purged.
#[test]
fn a_purge_reaches_other_handles_and_the_index_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("purged.db");
    let model = "purge-model";
    let reader = SqliteStore::open(&path).unwrap();
    let writer = SqliteStore::open(&path).unwrap();
    let mut secret = memory("ada-note", "context", "Ada's quokka phone number is in the wiki.");
    secret.author = Some("ada".into());
    let kept = memory("bob-note", "context", "Bob's quokka notes on the build.");
    writer.insert(&[(secret.clone(), Some(embedding(model, &[1.0, 0.0]))), (kept.clone(), Some(embedding(model, &[0.8, 0.6])))]).unwrap();
    let search = |store: &SqliteStore| sorted(hit_ids(&store.search_text("quokka", &SearchFilter::active(), 10).unwrap()));
    let nearest = |store: &SqliteStore| hit_ids(&store.search_vector(&unit(&[1.0, 0.0]), model, &SearchFilter::active(), 10).unwrap());
    reader.warm_up(Some(model)).unwrap();
    assert_eq!(search(&reader), ["ada-note", "bob-note"]);
    reader.persist_index().unwrap();

    let counts = writer.purge_author("ada", PurgeMode::Apply).unwrap();
    assert_eq!((counts.memories, counts.vectors), (1, 1));
    assert_eq!(search(&reader), ["bob-note"], "the other handle's index still finds the purged memory");
    assert_eq!(nearest(&reader), ["bob-note"]);
    // A new process finds the file of the old identity, refuses it and builds afresh.
    let fresh = SqliteStore::open(&path).unwrap();
    assert_eq!(search(&fresh), ["bob-note"]);
    fresh.persist_index().unwrap();
    drop(fresh);
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(search(&reopened), ["bob-note"]);
    assert_eq!(reopened.purge_author("ada", PurgeMode::Apply).unwrap(), kenning_core::PurgeCounts::default());
}

/// A store written by the first schema, whose text index was an FTS5 table, keeps its search
/// text through the migrations, and its memories' links become edges of the graph.
#[test]
fn a_first_schema_store_keeps_its_search_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let mut m = memory("old", "learnings", "Rotate the signing keys every quarter.");
    let target = kenning_core::MemoryUrn::parse("links.target", "kenning://user/decisions/dec_1").unwrap();
    m.links = vec![kenning_core::Link { target: target.clone(), relation: "derived-from".into() }];
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE memories (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, namespace TEXT NOT NULL, \
         kind TEXT NOT NULL, status TEXT NOT NULL, confidence REAL NOT NULL, created_at TEXT NOT NULL, \
         occurred_at TEXT NOT NULL, content_hash TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL);
         CREATE UNIQUE INDEX memories_active_content ON memories (namespace, content_hash) WHERE status = 'active';
         CREATE INDEX memories_created ON memories (created_at, id);
         CREATE INDEX memories_occurred ON memories (occurred_at);
         CREATE TABLE memory_tags (memory_id TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (memory_id, tag)) WITHOUT ROWID;
         CREATE TABLE memory_versions (memory_id TEXT NOT NULL, version INTEGER NOT NULL, superseded_at TEXT NOT NULL, \
         reason TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (memory_id, version)) WITHOUT ROWID;
         CREATE TABLE embeddings (memory_id TEXT NOT NULL, model TEXT NOT NULL, dim INTEGER NOT NULL, \
         vector BLOB NOT NULL, PRIMARY KEY (memory_id, model));
         CREATE INDEX embeddings_model ON embeddings (model, dim);
         CREATE VIRTUAL TABLE memories_fts USING fts5 (text, tokenize = 'porter unicode61 remove_diacritics 2');
         PRAGMA user_version = 1;",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO memories VALUES (7, ?, ?, 'semantic', 'active', 0.9, '2026-01-01T00:00:00.000000000Z', \
         '2026-01-01T00:00:00.000000000Z', ?, 1, ?)",
        rusqlite::params![m.id.as_str(), m.namespace.as_str(), m.content_hash(), serde_json::to_string(&m).unwrap()],
    )
    .unwrap();
    conn.execute("INSERT INTO memories_fts (rowid, text) VALUES (7, ?)", [m.search_text()]).unwrap();
    drop(conn);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(hit_ids(&store.search_text("signing key rotation", &SearchFilter::active(), 10).unwrap()), ["old"]);
    let incoming = kenning_core::decision::DecisionStore::edges_to(
        &store,
        &kenning_core::decision::Node { kind: kenning_core::decision::NodeKind::Urn, id: target.to_string() },
    )
    .unwrap();
    assert_eq!(incoming.len(), 1, "the migration copies existing links into the graph");
    assert_eq!((incoming[0].from.id.as_str(), incoming[0].relation.as_str()), ("old", "derived-from"));
    assert_eq!(store.stats().unwrap().text_index_entries, 1);
    let fresh = memory("new", "learnings", "Signing keys live in the vault.");
    insert_all(&store, std::slice::from_ref(&fresh));
    assert_eq!(sorted(hit_ids(&store.search_text("signing keys", &SearchFilter::active(), 10).unwrap())), ["new", "old"]);
}

/// The search index persisted beside the database: opened in place when it is sound and
/// brought up to date with what changed since it was written, and rebuilt, with the same
/// answers, when it is missing, damaged, foreign or of another format.
mod persisted_index {
    use super::*;
    use kenning_core::{ScoredId, Status};
    use kenning_index::SearchIndex;

    const MODEL: &str = "persisted-model";
    const TOPICS: &[&str] = &["connection pool", "redis cache", "schema migration", "deploy pipeline", "signing keys"];

    fn note(n: usize) -> (Memory, Option<Embedding>) {
        let topic = TOPICS[n % TOPICS.len()];
        let namespace = ["learnings", "config", "decisions"][n % 3];
        let mut m = memory(&format!("note-{n:04}"), namespace, &format!("Note {n} about the {topic}: step {}.", n / 7));
        m.tags = vec![format!("t{}", n % 4)];
        m.created_at = at(n as i64);
        m.updated_at = m.created_at;
        let vector = [(n % 5) as f32 + 0.5, (n % 7) as f32 - 3.0, (n % 3) as f32, 1.0];
        (m, Some(embedding(MODEL, &vector)))
    }

    fn fill(store: &SqliteStore, notes: std::ops::Range<usize>) {
        store.insert(&notes.map(note).collect::<Vec<_>>()).unwrap();
    }

    /// Writes after the index file: new notes, edited text, a status change and a new vector.
    fn write_more(store: &SqliteStore) {
        fill(store, 300..360);
        for n in [3, 10, 42] {
            let current = store.get(&id(&format!("note-{n:04}"))).unwrap().unwrap();
            kenning_conformance::fixtures::update(store, &current, |m| m.content = format!("Rewritten note {n} on the redis cache."));
        }
        let current = store.get(&id("note-0005")).unwrap().unwrap();
        kenning_conformance::fixtures::update(store, &current, |m| m.status = Status::Forgotten);
        store.set_embeddings(&[(id("note-0007"), embedding(MODEL, &[1.0, 0.0, 0.0, 0.0]))]).unwrap();
    }

    /// What a store answers: text and vector searches, with and without filters.
    fn answers(store: &SqliteStore) -> Vec<Vec<ScoredId>> {
        let filters = [SearchFilter::active(), SearchFilter { tags: vec!["t1".into()], ..SearchFilter::active() }, SearchFilter::default()];
        let mut found = Vec::new();
        for filter in &filters {
            for query in ["connection pool", "redis cache", "step 3 migration", "signing keys", "rewritten"] {
                found.push(store.search_text(query, filter, 20).unwrap());
            }
            for vector in [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0], [3.0, -2.0, 1.0, 1.0]] {
                found.push(store.search_vector(&unit(&vector), MODEL, filter, 20).unwrap());
            }
        }
        found
    }

    fn assert_same_answers(found: &[Vec<ScoredId>], expected: &[Vec<ScoredId>], context: &str) {
        assert_eq!(found.len(), expected.len());
        for (search, (found, expected)) in found.iter().zip(expected).enumerate() {
            assert_eq!(hit_ids(found), hit_ids(expected), "{context}: search {search}");
            for (hit, reference) in found.iter().zip(expected) {
                assert!((hit.score - reference.score).abs() < 1e-6, "{context}: search {search} scores {hit:?} vs {reference:?}");
            }
        }
    }

    /// A store of 300 notes whose index file was written, then 60 more notes and some changes
    /// the file does not reflect. Returns the sound file's bytes and the answers of an index
    /// built from scratch over the final store.
    fn stale_file_and_fresh_answers(path: &Path) -> (Vec<u8>, Vec<Vec<ScoredId>>) {
        let store = SqliteStore::open(path).unwrap();
        fill(&store, 0..300);
        store.warm_up(Some(MODEL)).unwrap();
        store.persist_index().unwrap();
        let image = std::fs::read(store.index_path()).unwrap();
        assert!(SearchIndex::image_stamp(&image).is_ok());
        write_more(&store);
        drop(store);
        std::fs::remove_file(kenning_index_path(path)).unwrap();
        let fresh = SqliteStore::open(path).unwrap();
        let expected = answers(&fresh);
        drop(fresh);
        (image, expected)
    }

    fn kenning_index_path(db: &Path) -> PathBuf {
        let mut name = db.as_os_str().to_owned();
        name.push(".index");
        PathBuf::from(name)
    }

    /// Puts `bytes` in place as the index file, opens the store, and checks its answers; then
    /// that the store wrote a sound file of its own, which a further process reads back.
    fn check_with_file(path: &Path, bytes: Option<&[u8]>, expected: &[Vec<ScoredId>], context: &str) {
        let index = kenning_index_path(path);
        let _ = std::fs::remove_file(&index);
        if let Some(bytes) = bytes {
            std::fs::write(&index, bytes).unwrap();
        }
        let store = SqliteStore::open(path).unwrap();
        assert_same_answers(&answers(&store), expected, context);
        store.persist_index().unwrap();
        drop(store);
        let written = std::fs::read(&index).unwrap();
        assert!(SearchIndex::image_stamp(&written).is_ok(), "{context}: the rewritten file is not sound");
        let reopened = SqliteStore::open(path).unwrap();
        assert_same_answers(&answers(&reopened), expected, &format!("{context}, reopened"));
    }

    #[test]
    fn a_stale_file_is_caught_up_and_answers_like_a_fresh_build() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stale.db");
        let (image, expected) = stale_file_and_fresh_answers(&path);
        check_with_file(&path, Some(&image), &expected, "stale file");
    }

    #[test]
    fn a_damaged_file_is_rebuilt_with_the_same_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("damaged.db");
        let (image, expected) = stale_file_and_fresh_answers(&path);
        let mut corrupted = image.clone();
        let middle = corrupted.len() / 2;
        corrupted[middle] ^= 0x55;
        check_with_file(&path, Some(&corrupted), &expected, "corrupted");
        check_with_file(&path, Some(&image[..image.len() / 2]), &expected, "truncated");
        check_with_file(&path, Some(&image[..10]), &expected, "truncated in the header");
        check_with_file(&path, Some(b""), &expected, "empty");
        check_with_file(&path, None, &expected, "deleted");
        let mut older = image.clone();
        older[8..12].copy_from_slice(&(kenning_index::FORMAT_VERSION - 1).to_le_bytes());
        check_with_file(&path, Some(&older), &expected, "older format");
    }

    #[test]
    fn another_stores_file_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.db");
        let (_, expected) = stale_file_and_fresh_answers(&path);
        let other_path = dir.path().join("other.db");
        let other = SqliteStore::open(&other_path).unwrap();
        fill(&other, 100..400);
        other.persist_index().unwrap();
        let foreign = std::fs::read(other.index_path()).unwrap();
        check_with_file(&path, Some(&foreign), &expected, "another store's file");
    }

    /// The file is really read: a change made behind the store's back, without a change
    /// number, is invisible to an index opened from the file, and seen by one built afresh.
    #[test]
    fn a_sound_file_is_opened_rather_than_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sound.db");
        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..50);
        store.persist_index().unwrap();
        drop(store);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute("UPDATE memories SET search_text = 'zeppelin' WHERE id = 'note-0001'", []).unwrap();
        drop(conn);
        let zeppelin = |store: &SqliteStore| hit_ids(&store.search_text("zeppelin", &SearchFilter::active(), 5).unwrap());
        let store = SqliteStore::open(&path).unwrap();
        assert!(zeppelin(&store).is_empty(), "the file was not used");
        drop(store);
        std::fs::remove_file(kenning_index_path(&path)).unwrap();
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(zeppelin(&store), ["note-0001"]);
        store.rebuild_index().unwrap();
        assert!(!store.index_path().exists(), "rebuilding the index drops its file");
        assert_eq!(store.search_text("note", &SearchFilter::active(), 5).unwrap().len(), 5);
    }

    /// A file that reflects every change number but lacks a row the store holds (one written
    /// behind the store's back, with no change number past the file's) is not trusted: the
    /// index is built afresh and finds the row.
    #[test]
    fn a_file_lacking_a_row_of_the_store_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lacking.db");
        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..50);
        store.persist_index().unwrap();
        drop(store);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO memories (id, namespace, kind, status, confidence, created_at, occurred_at, content_hash, version, body, \
             change_seq, search_text, facets) \
             SELECT 'note-9999', namespace, kind, status, confidence, created_at, occurred_at, 'unseen', version, \
             replace(body, 'note-0001', 'note-9999'), 1, 'zeppelin', facets FROM memories WHERE id = 'note-0001'",
            [],
        )
        .unwrap();
        drop(conn);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(hit_ids(&store.search_text("zeppelin", &SearchFilter::active(), 5).unwrap()), ["note-9999"]);
    }

    /// A purge leaves gaps in the rows' numbers, so the largest number no longer says how many
    /// rows there are: a sound file of such a store is still opened rather than rebuilt (a
    /// change made behind the store's back stays unseen), and still finds every row.
    #[test]
    fn a_sound_file_of_a_store_with_purged_rows_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gaps.db");
        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..50);
        let mut authored = memory("ada-note", "learnings", "Ada's note on the quokka enclosure.");
        authored.author = Some("ada".into());
        store.insert(&[(authored, None)]).unwrap();
        fill(&store, 50..60);
        assert_eq!(store.purge_author("ada", PurgeMode::Apply).unwrap().memories, 1);
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        store.persist_index().unwrap();
        drop(store);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute("UPDATE memories SET search_text = 'zeppelin' WHERE id = 'note-0001'", []).unwrap();
        drop(conn);
        let store = SqliteStore::open(&path).unwrap();
        assert!(store.search_text("zeppelin", &SearchFilter::active(), 5).unwrap().is_empty(), "the file was not used");
        assert_eq!(store.search_text("note", &SearchFilter::default(), 100).unwrap().len(), 60);
    }

    /// A store of more vectors than its graph threshold (set low here) links them in a graph
    /// when it writes its index file, and from then on searches that graph itself (its index is opened
    /// again from the file), with a vector added since searched beside it. Another process
    /// opening the file answers as this one does, and both find nearly all of the exact ten
    /// nearest.
    #[test]
    fn a_large_store_searches_the_graph_its_index_file_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.db");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut random_vector = move || {
            let components: Vec<f32> = (0..16)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            unit(&components)
        };
        let notes: Vec<(Memory, Option<Embedding>)> = (0..6000)
            .map(|n| {
                let mut m = memory(&format!("note-{n:05}"), "learnings", &format!("Note {n}."));
                m.created_at = at(n as i64);
                m.updated_at = m.created_at;
                (m, Some(embedding(MODEL, &random_vector())))
            })
            .collect();
        let store = SqliteStore::open(&path).unwrap().with_graph_rows(4096);
        store.insert(&notes).unwrap();
        store.warm_up(Some(MODEL)).unwrap();
        store.persist_index().unwrap();
        let image = std::fs::read(store.index_path()).unwrap();
        let (index, _) = SearchIndex::read_image(std::sync::Arc::new(image), kenning_index::BodyCheck::Checksum).unwrap();
        assert_eq!(index.linked_vectors(MODEL), 6000);

        let newcomer = random_vector();
        let mut late = memory("note-late", "learnings", "A note captured after the file was written.");
        late.created_at = at(7000);
        late.updated_at = late.created_at;
        store.insert(&[(late, Some(Embedding { model: MODEL.to_owned(), vector: newcomer.clone() }))]).unwrap();
        assert_eq!(hit_ids(&store.search_vector(&newcomer, MODEL, &SearchFilter::active(), 1).unwrap()), ["note-late"]);

        let other = SqliteStore::open(&path).unwrap().with_graph_rows(4096);
        let (mut found, mut possible) = (0, 0);
        for probe in 0..40 {
            let query = random_vector();
            let hits = store.search_vector(&query, MODEL, &SearchFilter::active(), 10).unwrap();
            assert_eq!(hits, other.search_vector(&query, MODEL, &SearchFilter::active(), 10).unwrap(), "probe {probe}");
            let mut exact: Vec<(f32, &str)> = notes
                .iter()
                .map(|(m, e)| (e.as_ref().unwrap().vector.iter().zip(&query).map(|(a, b)| a * b).sum(), m.id.as_str()))
                .chain([(newcomer.iter().zip(&query).map(|(a, b)| a * b).sum(), "note-late")])
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            possible += 10;
            found += exact[..10].iter().filter(|(_, id)| hits.iter().any(|hit| hit.id.as_str() == *id)).count();
        }
        assert!(found * 100 >= possible * 95, "found {found} of the exact {possible} nearest");
    }

    /// Linking thousands of vectors takes a while, so a process letting its store go (a hook)
    /// cuts short the linking it started and writes the file with what it linked, and the next
    /// process that searches links the rest in the background, though the file reflects every
    /// change.
    #[test]
    fn vectors_a_leaving_process_left_unlinked_are_linked_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("unlinked.db");
        let linked_in_file = || {
            let image = std::fs::read(kenning_index_path(&path)).unwrap();
            SearchIndex::read_image(std::sync::Arc::new(image), kenning_index::BodyCheck::Checksum).unwrap().0.linked_vectors(MODEL)
        };
        let notes: Vec<(Memory, Option<Embedding>)> = (0..5000)
            .map(|n| {
                let mut m = memory(&format!("note-{n:05}"), "learnings", &format!("Note {n}."));
                m.created_at = at(n as i64);
                m.updated_at = m.created_at;
                let angle = n as f32 * 0.7;
                (m, Some(embedding(MODEL, &[angle.cos(), angle.sin(), (n % 13) as f32 / 13.0, 1.0])))
            })
            .collect();
        let store = SqliteStore::open(&path).unwrap().with_graph_rows(4096);
        store.insert(&notes).unwrap();
        let query = unit(&[1.0, 0.2, 0.5, 1.0]);
        let expected = hit_ids(&store.search_vector(&query, MODEL, &SearchFilter::active(), 5).unwrap());
        drop(store);
        assert!(kenning_index_path(&path).exists(), "the leaving process wrote the file");

        let store = SqliteStore::open(&path).unwrap().with_graph_rows(4096);
        assert_eq!(hit_ids(&store.search_vector(&query, MODEL, &SearchFilter::active(), 5).unwrap()), expected);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while linked_in_file() < 5000 {
            assert!(std::time::Instant::now() < deadline, "the vectors were not linked in the background");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(hit_ids(&store.search_vector(&query, MODEL, &SearchFilter::active(), 5).unwrap()), expected);
    }

    /// Regression: a process that opened a file written without a model's vectors loaded them
    /// from the database and never wrote them back, so every hook process (which recalls once
    /// and exits) loaded all of them again. The file now gains them, and a later process
    /// searches by vector without reading the embeddings table.
    #[test]
    fn vectors_loaded_after_opening_the_file_are_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.db");
        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..60);
        store.persist_index().unwrap();
        drop(store);
        let text_only = std::fs::read(kenning_index_path(&path)).unwrap();
        let (index, _) = SearchIndex::read_image(std::sync::Arc::new(text_only), kenning_index::BodyCheck::Checksum).unwrap();
        assert!(!index.has_model(MODEL), "the first file holds no vectors");

        let query = unit(&[1.0, 0.0, 0.0, 0.0]);
        let store = SqliteStore::open(&path).unwrap();
        let expected = hit_ids(&store.search_vector(&query, MODEL, &SearchFilter::active(), 10).unwrap());
        assert_eq!(expected.len(), 10);
        drop(store);

        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute("DELETE FROM embeddings", []).unwrap();
        drop(conn);
        let store = SqliteStore::open(&path).unwrap();
        let found = hit_ids(&store.search_vector(&query, MODEL, &SearchFilter::active(), 10).unwrap());
        assert_eq!(found, expected, "the vectors did not come from the index file");
    }

    /// Regression: the index file was rewritten only once the index had moved 1,000 changes
    /// (or a tenth of the store) past it, so the rows every stop hook captured were reloaded
    /// from the database by every later hook process until then (about 9 ms of a 26 ms
    /// user-prompt hook at 10,000 memories). A store let go by a process that searched now
    /// leaves the file current; one that never searched writes nothing.
    #[test]
    fn a_store_let_go_after_a_search_leaves_the_index_file_current() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current.db");
        let rows_in_file = || {
            let image = std::fs::read(kenning_index_path(&path)).unwrap();
            SearchIndex::read_image(std::sync::Arc::new(image), kenning_index::BodyCheck::Checksum).unwrap().0.len()
        };
        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..60);
        store.persist_index().unwrap();
        drop(store);
        assert_eq!(rows_in_file(), 60);

        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 60..70);
        drop(store);
        assert_eq!(rows_in_file(), 60, "a process that never searched leaves the file alone");

        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.search_text("note", &SearchFilter::active(), 100).unwrap().len(), 70);
        fill(&store, 70..75);
        drop(store);
        assert_eq!(rows_in_file(), 75, "the rows caught up on and the rows written since are in the file");
    }

    /// A short-lived process (a hook) leaves a small write-ahead log for the next one instead of
    /// paying a merge and its flushes at every close, and the next process reads what it holds;
    /// a log grown large is merged at close, so that no process has megabytes of it to index.
    #[test]
    fn a_store_closed_with_a_small_log_leaves_it_and_a_large_one_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.db");
        let mut log = path.as_os_str().to_owned();
        log.push("-wal");
        let log_size = || std::fs::metadata(&log).map(|metadata| metadata.len()).unwrap_or(0);

        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..3);
        drop(store);
        assert!(log_size() > 0, "the few commits stay in the log");
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.search_text("note", &SearchFilter::active(), 100).unwrap().len(), 3, "read back from the log");

        for batch in 0..40 {
            fill(&store, 3 + batch * 10..13 + batch * 10);
        }
        drop(store);
        assert_eq!(log_size(), 0, "a log past the bound is merged into the database at close");
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.search_text("note", &SearchFilter::active(), 1000).unwrap().len(), 403);
    }

    /// A file that claims changes the store does not have (the database was restored from an
    /// older copy, say) is not trusted.
    #[test]
    fn a_file_ahead_of_the_store_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("restored.db");
        let store = SqliteStore::open(&path).unwrap();
        fill(&store, 0..150);
        store.persist_index().unwrap();
        let ahead = std::fs::read(store.index_path()).unwrap();
        drop(store);
        // The store goes back to its first 100 rows, as a restored copy would.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DELETE FROM memories WHERE seq > 100; DELETE FROM memory_tags WHERE memory_id >= 'note-0100'; \
             DELETE FROM embeddings WHERE memory_id >= 'note-0100';",
        )
        .unwrap();
        drop(conn);
        std::fs::remove_file(kenning_index_path(&path)).unwrap();
        let fresh = SqliteStore::open(&path).unwrap();
        let expected = answers(&fresh);
        assert_eq!(expected[0].len(), 20);
        drop(fresh);
        check_with_file(&path, Some(&ahead), &expected, "a file ahead of the store");
    }
}

/// A store holds someone's memories: its folder, database, write-ahead log and index file are
/// its owner's alone, and a store an earlier version left readable by others is made private.
#[cfg(unix)]
#[test]
fn the_store_and_its_files_are_readable_by_their_owner_alone() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("data").join("kenning");
    let path = folder.join("user.db");
    let store = SqliteStore::open(&path).unwrap();
    store.insert(&[(memory("note", "context", "The pool holds 20 connections."), None)]).unwrap();
    store.warm_up(None).unwrap();
    store.persist_index().unwrap();
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(mode(&dir.path().join("data")), 0o700, "every folder it made");
    for file in [path.clone(), PathBuf::from(format!("{}-wal", path.display())), store.index_path()] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    drop(store);

    // Closing the store folded the write-ahead log back into the database and removed it.
    let left = [path.clone(), store_file(&path, ".index")];
    for file in &left {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let reopened = SqliteStore::open(&path).unwrap();
    for file in &left {
        assert_eq!(mode(file), 0o600, "{} made private again", file.display());
    }
    assert_eq!(reopened.get(&id("note")).unwrap().map(|memory| memory.content).as_deref(), Some("The pool holds 20 connections."));
}

fn store_file(db: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", db.display()))
}

/// The body of a contradiction record as the engine writes it, naming memories `a` and `b`.
fn contradiction_body(id: &str, a: &str, b: &str) -> String {
    let detection = kenning_core::contradiction::Detection {
        kind: kenning_core::contradiction::ContradictionKind::ChangedValue,
        older: Vec::new(),
        newer: Vec::new(),
        newer_states_change: false,
    };
    kenning_core::contradiction::Contradiction::open(id.into(), a.into(), b.into(), &detection, "found", at(0)).to_body()
}

/// Contradiction records written before the records had subjects are found by their memories
/// once the store is upgraded: the migration takes the subjects from the records' bodies, and
/// leaves a record of another kind, or one whose body names no memories, without any.
#[test]
fn contradiction_records_stored_before_subjects_are_found_by_their_memories() {
    use kenning_core::state::StateKind;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v7.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    // Back to the seventh schema, then rows as the build of that schema wrote them.
    conn.execute_batch("DROP TABLE state_subjects; ALTER TABLE state DROP COLUMN subjects; PRAGMA user_version = 7;").unwrap();
    let rows = [
        ("contradiction", "ct_1", contradiction_body("ct_1", "kenning://user/learnings/m1", "kenning://user/learnings/m2"), 1),
        ("contradiction", "ct_2", contradiction_body("ct_2", "kenning://user/learnings/m2", "kenning://user/learnings/m3"), 2),
        ("contradiction", "ct_3", "not json".to_owned(), 3),
        ("workflow", "wf_1", r#"{"a":"kenning://user/learnings/m1","b":"kenning://user/learnings/m2"}"#.to_owned(), 4),
    ];
    for (kind, id, body, updated) in rows {
        conn.execute("INSERT INTO state (kind, id, revision, updated_us, body) VALUES (?, ?, 1, ?, ?)", rusqlite::params![kind, id, updated, body]).unwrap();
    }
    drop(conn);

    let store = SqliteStore::open(&path).unwrap();
    let state = store.state().unwrap();
    let found = |kind, subject: &str| -> Vec<String> { state.state_about(kind, &[subject]).unwrap().into_iter().map(|record| record.id).collect() };
    assert_eq!(found(StateKind::Contradiction, "kenning://user/learnings/m2"), ["ct_2", "ct_1"]);
    assert_eq!(found(StateKind::Contradiction, "kenning://user/learnings/m1"), ["ct_1"]);
    assert!(found(StateKind::Workflow, "kenning://user/learnings/m1").is_empty(), "only contradictions are about memories");
    let unreadable = state.get_state(StateKind::Contradiction, "ct_3").unwrap().unwrap();
    assert!(unreadable.subjects.is_empty());
    assert_eq!(state.get_state(StateKind::Contradiction, "ct_1").unwrap().unwrap().subjects, ["kenning://user/learnings/m1", "kenning://user/learnings/m2"]);
}
