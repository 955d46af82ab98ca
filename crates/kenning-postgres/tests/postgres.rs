//! The PostgreSQL store against a real PostgreSQL server with pgvector: the shared conformance
//! suites, over a TCP connection, the server's Unix socket, pgbouncer in transaction pooling
//! mode and with a streaming read replica; and what only a shared server shows: eight processes
//! writing the same memories at once, the database going away mid-run and coming back, one
//! recall across project, user and org domains, schema upgrades, bulk loads, every form of
//! connection string and every `sslmode` against servers with and without TLS.
//!
//! The servers' URLs come from `KENNING_TEST_PG_*` variables, which `scripts/test` sets after
//! starting throwaway servers (`scripts/pg-server`). Every store gets a schema of its own, so
//! tests run side by side on one server. Without a variable each test that needs it fails with
//! a message saying how to get the server: an org test never passes without having run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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

const URL_VARIABLE: &str = "KENNING_TEST_PG_URL";

/// The test server's URL, or a failure that says how to get one.
fn server_url() -> String {
    test_variable(URL_VARIABLE, "a PostgreSQL server with pgvector", "scripts/pg-server start /tmp/kenning-pg")
}

/// A `KENNING_TEST_*` variable `scripts/test` sets, or a failure that says what it is for and
/// how to get it.
fn test_variable(name: &str, what: &str, start: &str) -> String {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => value,
        _ => panic!(
            "{name} is not set: the organisation-domain tests need {what}. Run the project's test command, \
             `scripts/test`, which starts it; or start it with `{start}` and export {name} with what it prints."
        ),
    }
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

    kenning_conformance::conformance_tests!(|| -> Box<dyn MemoryStore> { Box::new(fresh_store("conformance")) });
}

/// The same suite with `vector_index = "exact"`, the configuration that compares every vector.
mod conformance_exact {
    use super::*;

    kenning_conformance::conformance_tests!(|| -> Box<dyn MemoryStore> {
        let settings = Settings { vector_index: VectorIndex::Exact, ..settings(&fresh_schema("exact")) };
        Box::new(PostgresStore::open(&settings).unwrap())
    });
}

mod state_conformance {
    use super::*;

    kenning_conformance::state_conformance_tests!(|| -> Box<dyn MemoryStore> { Box::new(fresh_store("state")) });
}

mod decision_conformance {
    use super::*;
    use kenning_core::decision::DecisionStore;

    kenning_conformance::decision_conformance_tests!(|| -> Box<dyn DecisionStore> { Box::new(fresh_store("decisions")) });
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
