//! The PostgreSQL store against a real PostgreSQL server with pgvector: the shared conformance
//! suites, over a TCP connection, the server's Unix socket, pgbouncer in transaction pooling
//! mode and with a streaming read replica; and what only a shared server shows: eight processes
//! writing the same memories at once, the database going away mid-run and coming back, one
//! recall across project, user and org domains, schema upgrades, bulk loads, every form of
//! connection string and every `sslmode` against servers with and without TLS.
//!
//! The servers' URLs come from `KENNING_TEST_PG_*` variables, which `scripts/test` sets after
//! starting throwaway servers (`scripts/pg-server`). Every store gets a schema of its own, so
//! tests run side by side on one server. Each test first checks that the variables it needs are
//! set ([`servers`]): without one, a plain `cargo test` skips it with a notice saying how to get
//! the server, while `scripts/test` fails it, so there an org test never passes without having run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kenning_conformance::services;
use kenning_core::MemoryStore;
use kenning_postgres::{PostgresStore, Settings, VectorIndex};

#[path = "postgres/bulk.rs"]
mod bulk;
#[path = "postgres/concurrency.rs"]
mod concurrency;
#[path = "postgres/connections.rs"]
mod connections;
#[path = "postgres/domains.rs"]
mod domains;
#[path = "postgres/hnsw.rs"]
mod hnsw;
#[path = "postgres/migration.rs"]
mod migration;
#[path = "postgres/outage.rs"]
mod outage;
#[path = "postgres/pgbouncer.rs"]
mod pgbouncer;
#[path = "postgres/relay.rs"]
mod relay;
#[path = "postgres/replica.rs"]
mod replica;
#[path = "postgres/text.rs"]
mod text;

const PG_URL: &str = "KENNING_TEST_PG_URL";
const SOCKET_URL: &str = "KENNING_TEST_PG_SOCKET_URL";
const REPLICA_URL: &str = "KENNING_TEST_PG_REPLICA_URL";
const BOUNCER_URL: &str = "KENNING_TEST_PG_BOUNCER_URL";
const TLS_URL: &str = "KENNING_TEST_PG_TLS_URL";
const TLS_CA: &str = "KENNING_TEST_PG_TLS_CA";
const TLS_CLIENT_CERT: &str = "KENNING_TEST_PG_TLS_CLIENT_CERT";
const TLS_CLIENT_KEY: &str = "KENNING_TEST_PG_TLS_CLIENT_KEY";

/// Each server variable `scripts/test` sets: what it names, and how to start that by hand.
const SERVERS: [(&str, &str); 8] = [
    (PG_URL, "a PostgreSQL server with pgvector (`scripts/pg-server start /tmp/kenning-pg` starts one)"),
    (SOCKET_URL, "the pgvector server's Unix socket (`scripts/pg-server start /tmp/kenning-pg` starts one)"),
    (REPLICA_URL, "a streaming replica of the pgvector server (`scripts/pg-server start-replica /tmp/kenning-pg /tmp/kenning-pg-replica`)"),
    (BOUNCER_URL, "pgbouncer in transaction pooling mode in front of the pgvector server (`scripts/pg-server start-pgbouncer /tmp/kenning-pg /tmp/kenning-pgbouncer`)"),
    (TLS_URL, "a PostgreSQL server with ssl=on (`scripts/pg-server start-tls /tmp/kenning-pg-tls`)"),
    (TLS_CA, "the TLS server's CA certificate (`scripts/pg-server start-tls /tmp/kenning-pg-tls` writes it)"),
    (TLS_CLIENT_CERT, "a client certificate for the TLS server (`scripts/pg-server start-tls /tmp/kenning-pg-tls` writes it)"),
    (TLS_CLIENT_KEY, "the client certificate's key (`scripts/pg-server start-tls /tmp/kenning-pg-tls` writes it)"),
];

/// Whether every server variable in `names` is set. A test calls it first and returns at once
/// when it is false: without `scripts/test` that test is skipped with a notice, under it a
/// missing server fails the test (`kenning_conformance::services`).
#[track_caller]
fn servers(names: &[&str]) -> bool {
    // Every name is looked at, so that the notice names each one that is missing.
    let mut all_set = true;
    for name in names {
        let (_, what) = SERVERS.iter().find(|(variable, _)| variable == name).expect("a server variable");
        all_set &= services::variable(name, what).is_some();
    }
    all_set
}

/// The value of a server variable the test checked with [`servers`] first.
fn test_variable(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set, and the test did not check `servers(&[{name}])` first"))
}

/// The test server's URL.
fn server_url() -> String {
    test_variable(PG_URL)
}

/// A schema name no other store of any test run uses.
fn fresh_schema(label: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |time| time.subsec_nanos());
    format!("t_{label}_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn settings(schema: &str) -> Settings {
    settings_for(server_url(), schema)
}

/// Settings with the default vector index, HNSW. The vectors of bulk loads join the index
/// only when a test asks, so that what a test sees does not depend on how fast it runs.
fn settings_for(url: String, schema: &str) -> Settings {
    Settings { schema: schema.to_owned(), catch_up_after: None, ..Settings::new(url) }
}

fn fresh_store(label: &str) -> PostgresStore {
    PostgresStore::open(&settings(&fresh_schema(label))).unwrap()
}

mod conformance {
    use super::*;

    kenning_conformance::conformance_tests!({
        if !servers(&[PG_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> { Box::new(fresh_store("conformance")) }
    });
}

/// The same suite with `vector_index = "exact"`, the configuration that compares every vector.
mod conformance_exact {
    use super::*;

    kenning_conformance::conformance_tests!({
        if !servers(&[PG_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> {
            let settings = Settings { vector_index: VectorIndex::Exact, ..settings(&fresh_schema("exact")) };
            Box::new(PostgresStore::open(&settings).unwrap())
        }
    });
}

mod state_conformance {
    use super::*;

    kenning_conformance::state_conformance_tests!({
        if !servers(&[PG_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> { Box::new(fresh_store("state")) }
    });
}

mod decision_conformance {
    use super::*;
    use kenning_core::decision::DecisionStore;

    kenning_conformance::decision_conformance_tests!({
        if !servers(&[PG_URL]) {
            return;
        }
        || -> Box<dyn DecisionStore> { Box::new(fresh_store("decisions")) }
    });
}

/// Child processes are this test binary again, running one `child_*` test with the mode in
/// this variable; without it those tests return at once.
const CHILD_MODE: &str = "KENNING_TEST_CHILD";
const CHILD_SCHEMA: &str = "KENNING_TEST_SCHEMA";
const CHILD_INDEX: &str = "KENNING_TEST_CHILD_INDEX";

fn child_mode() -> Option<String> {
    std::env::var(CHILD_MODE).ok()
}

/// Runs `count` children of `test` in `mode` at once on `schema`, and returns each one's stdout
/// lines once all have finished successfully.
fn run_children(test: &str, mode: &str, schema: &str, count: usize) -> Vec<Vec<String>> {
    let children: Vec<_> = (0..count)
        .map(|index| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1"])
                .env(CHILD_MODE, mode)
                .env(CHILD_SCHEMA, schema)
                .env(CHILD_INDEX, index.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|mut child| {
            // The harness prints `test NAME ... ` before the test runs, so an output line may
            // start mid-line.
            let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
                .lines()
                .map_while(Result::ok)
                .filter_map(|line| line.find("OUT ").map(|start| line[start..].to_owned()))
                .collect();
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "a child failed: {}", String::from_utf8_lossy(&output.stderr));
            lines
        })
        .collect()
}

fn child_store() -> Arc<PostgresStore> {
    Arc::new(PostgresStore::open(&settings(&std::env::var(CHILD_SCHEMA).unwrap())).unwrap())
}

fn child_index() -> usize {
    std::env::var(CHILD_INDEX).unwrap().parse().unwrap()
}
