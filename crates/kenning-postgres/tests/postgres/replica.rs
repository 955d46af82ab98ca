//! A store with a read replica (`read_url`): a streaming standby of the test server, made by
//! `pg_basebackup` (`scripts/pg-server start-replica`). The conformance suite passes with reads
//! on the replica; reads that other processes' writes have not reached yet are answered by the
//! replica, while a process's own writes are read back from the primary until the replica has
//! replayed them; and a replica that goes away leaves recall to the primary, which recall and
//! status say, until it comes back.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kenning_conformance::fixtures::memory;
use kenning_core::{MemoryStore, SearchFilter};

use super::domains::{capture, recall, three_domains};
use super::relay::Relay;
use super::*;

fn replica_url() -> String {
    test_variable(REPLICA_URL)
}

fn replicated(schema: &str) -> Settings {
    Settings { read_url: Some(replica_url()), ..settings(schema) }
}

mod conformance_replica {
    use super::*;

    kenning_conformance::conformance_tests!({
        if !servers(&[PG_URL, REPLICA_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> { Box::new(PostgresStore::open(&replicated(&fresh_schema("replica"))).unwrap()) }
    });
}

/// The replica's replay is paused by one test at a time, and always resumed.
static REPLAY: Mutex<()> = Mutex::new(());

struct PausedReplay<'a> {
    replica: postgres::Client,
    _one_at_a_time: MutexGuard<'a, ()>,
}

impl PausedReplay<'_> {
    fn pause() -> PausedReplay<'static> {
        let guard = REPLAY.lock().unwrap_or_else(PoisonError::into_inner);
        wait_for_replay();
        let mut replica = postgres::Client::connect(&replica_url(), postgres::NoTls).unwrap();
        replica.execute("SELECT pg_wal_replay_pause()", &[]).unwrap();
        PausedReplay { replica, _one_at_a_time: guard }
    }
}

impl Drop for PausedReplay<'_> {
    fn drop(&mut self) {
        let _ = self.replica.execute("SELECT pg_wal_replay_resume()", &[]);
    }
}

/// Waits until the replica has replayed everything the primary has written so far.
fn wait_for_replay() {
    let mut primary = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    let mut replica = postgres::Client::connect(&replica_url(), postgres::NoTls).unwrap();
    let _ = replica.execute("SELECT pg_wal_replay_resume()", &[]);
    let written: String = primary.query_one("SELECT pg_current_wal_insert_lsn()::text", &[]).unwrap().get(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let caught_up: bool =
            replica.query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&written]).unwrap().get(0);
        if caught_up {
            return;
        }
        assert!(Instant::now() < deadline, "the replica did not replay {written} within a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn reads_go_to_the_replica_and_a_process_reads_its_own_writes_from_the_primary() {
    if !servers(&[PG_URL, REPLICA_URL]) {
        return;
    }
    let schema = fresh_schema("read_your_writes");
    let reader = PostgresStore::open(&replicated(&schema)).unwrap();
    reader.insert(&[(memory("first", "learnings", "The first note, written before the pause."), None)]).unwrap();
    let other_process = PostgresStore::open(&settings(&schema)).unwrap();
    let count = || reader.count(&SearchFilter::active()).unwrap();

    {
        let _paused = PausedReplay::pause();
        // Another process's write, which the replica has not replayed: the reader does not see
        // it, since its reads go to the replica.
        other_process.insert(&[(memory("second", "learnings", "Written by another process meanwhile."), None)]).unwrap();
        assert_eq!(count(), 1, "a read reached the primary though the replica could answer it");
        // The reader's own write: the replica is behind it, so the primary answers, and the
        // reader sees both its write and the other process's.
        reader.insert(&[(memory("third", "learnings", "The reader's own note."), None)]).unwrap();
        assert_eq!(count(), 3, "the reader did not read its own write");
        assert!(reader.get_many(&[kenning_conformance::fixtures::id("third")]).unwrap().len() == 1);
    }
    wait_for_replay();
    assert_eq!(count(), 3);
    assert!(reader.degraded().is_none());
    reader.drop_schema().unwrap();
}

#[test]
fn a_replica_that_goes_away_leaves_recall_to_the_primary_which_says_so() {
    if !servers(&[PG_URL, REPLICA_URL]) {
        return;
    }
    let _one_at_a_time = REPLAY.lock().unwrap_or_else(PoisonError::into_inner);
    let (relay, relayed) = Relay::to(&replica_url());
    let settings = Settings { read_url: Some(relayed), connect_timeout: Duration::from_secs(2), ..settings(&fresh_schema("replica_down")) };
    let (service, _dir) = three_domains(PostgresStore::open(&settings).unwrap());
    let org = capture(&service, "org", "Releases are cut from the main branch every Thursday.");
    wait_for_replay();
    let page = recall(&service, "releases Thursday");
    assert!(page.results.iter().any(|hit| hit.urn == org), "{page:?}");
    assert!(page.degraded.is_empty(), "{page:?}");

    relay.down();
    let page = recall(&service, "releases Thursday");
    assert!(page.results.iter().any(|hit| hit.urn == org), "the primary did not answer: {page:?}");
    assert!(page.unavailable.is_empty(), "{page:?}");
    assert_eq!(page.degraded.len(), 1, "{page:?}");
    assert_eq!(page.degraded[0].domain, "org:acme");
    assert!(page.degraded[0].message.contains("read replica") && page.degraded[0].message.contains("unreachable"), "{}", page.degraded[0].message);
    let status = service.status().unwrap();
    assert!(status.notes.iter().any(|note| note.contains("read replica") && note.contains("primary answered")), "{:?}", status.notes);
    // Writes go on to the primary.
    capture(&service, "org", "Hotfixes are cut from the release branch.");

    relay.up();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = recall(&service, "releases Thursday");
        if page.degraded.is_empty() {
            assert!(page.results.iter().any(|hit| hit.urn == org));
            break;
        }
        assert!(Instant::now() < deadline, "the replica was not used again after it came back");
        std::thread::sleep(Duration::from_millis(200));
    }
}
