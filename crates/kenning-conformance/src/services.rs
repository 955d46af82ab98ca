//! What a test does when something it needs from outside the workspace is missing: a PostgreSQL
//! server, a Python with the MCP SDK and pytest, the MiniLM model.
//!
//! `scripts/test` sets each of them up, names it in a `KENNING_TEST_*` variable and sets
//! [`REQUIRED`]: then a missing one fails the test, so the test command and CI never count a
//! test that did not run as passed. Without [`REQUIRED`], as in a plain `cargo test` on a fresh
//! clone, a test whose service is missing returns at once, after a notice on stderr naming the
//! variable that would run it. The notice goes to the process's stderr, past the test harness's
//! capture, once per variable and test binary.
//!
//! The Python end-to-end tests follow the same rule (`service` and `missing` in
//! `tests/e2e/harness.py`).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Set (to anything but `0`) by `scripts/test`: a missing service fails a test instead of
/// skipping it.
pub const REQUIRED: &str = "KENNING_TEST_SERVICES_REQUIRED";

/// The variable naming a Python that can run the tests which need one.
pub const PYTHON: &str = "KENNING_TEST_PYTHON";

/// The variable naming the all-MiniLM-L6-v2 model folder.
pub const MODEL_DIR: &str = "KENNING_TEST_MODEL_DIR";

/// Whether a missing service fails the test ([`REQUIRED`] is set).
pub fn required() -> bool {
    std::env::var_os(REQUIRED).is_some_and(|value| !value.is_empty() && value != "0")
}

/// The value of `variable`, which names `what` a test needs (for example "a PostgreSQL server
/// with pgvector"). When it is not set: a failure if services are [`required`], else `None`
/// after the notice, and the test returns.
#[track_caller]
pub fn variable(variable: &str, what: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(value) if !value.trim().is_empty() => Some(value),
        _ => {
            missing(variable, &format!("{variable} is not set: these tests need {what}"));
            None
        }
    }
}

/// Says that what `variable` names is missing (`problem` says how): fails the test if services
/// are [`required`], else prints the notice and returns, and the caller's test returns too.
#[track_caller]
pub fn missing(variable: &str, problem: &str) {
    if required() {
        panic!(
            "{problem}. {REQUIRED} is set, so a test whose service is missing fails rather than \
             being skipped: run `scripts/test`, which sets up every service, or set {variable}"
        );
    }
    static NOTIFIED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = NOTIFIED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(variable.to_owned());
    if first {
        // Written to stderr itself: the harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {problem}. Set {variable} to run them, or run the whole suite with `scripts/test`, \
             which sets up every service (and fails when one is missing)."
        );
    }
}

/// A Python that can import every one of `modules`: the one [`PYTHON`] names (which must), else
/// the machine's `python3` when it can; else the decision of [`missing`].
#[track_caller]
pub fn python(modules: &[&str]) -> Option<PathBuf> {
    let import = format!("import {}", modules.join(", "));
    let imports = |python: &Path| Command::new(python).args(["-c", &import]).output().is_ok_and(|output| output.status.success());
    if let Some(python) = std::env::var_os(PYTHON).filter(|value| !value.is_empty()) {
        let python = PathBuf::from(python);
        assert!(imports(&python), "{PYTHON}={} cannot run `{import}`", python.display());
        return Some(python);
    }
    let python = PathBuf::from("python3");
    if imports(&python) {
        return Some(python);
    }
    missing(PYTHON, &format!("{PYTHON} is not set and `python3` cannot run `{import}`, which these tests need"));
    None
}

/// The all-MiniLM-L6-v2 model folder: the one [`MODEL_DIR`] names (which must exist), else
/// `shared/models/all-MiniLM-L6-v2` beside the repository when it is there; else the decision
/// of [`missing`].
#[track_caller]
pub fn model_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(MODEL_DIR).filter(|value| !value.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(dir.is_dir(), "{MODEL_DIR}={} is not a folder", dir.display());
        return Some(dir);
    }
    // This crate is at crates/kenning-conformance: three folders up is the one beside the repository.
    let beside_repository = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(3).expect("the repository's parent folder");
    let beside = beside_repository.join("shared/models/all-MiniLM-L6-v2");
    if beside.is_dir() {
        return Some(beside);
    }
    missing(
        MODEL_DIR,
        &format!(
            "{MODEL_DIR} is not set and there is no model at {}: these tests need the all-MiniLM-L6-v2 \
             sentence-transformers folder (config.json, tokenizer.json, model.safetensors)",
            beside.display()
        ),
    );
    None
}
