//! Runner detection, the commands of each scope, and real runs of cargo and pytest on the
//! fixtures: passing, failing, not building, and running past the timeout.

use std::path::PathBuf;
use std::time::Duration;

use kenning_code::runner::{Check, RunnerKind, Scope, Toolchain, detect, run_check, run_tests};

use super::common::{index, repository};

/// The Python with pytest that `scripts/test` provides, else the machine's `python3`.
fn toolchain() -> Toolchain {
    Toolchain { python: Some(std::env::var_os("KENNING_TEST_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)), ..Toolchain::default() }
}

const LONG: Duration = Duration::from_secs(300);

#[test]
fn each_fixture_has_its_runner_detected() {
    let found = |name: &str| {
        let repo = repository(name);
        detect(repo.path(), &toolchain()).into_iter().map(|runner| (runner.kind, runner.linter, runner.typechecker)).collect::<Vec<_>>()
    };
    assert_eq!(found("rust"), vec![(RunnerKind::Cargo, Some("clippy".into()), Some("cargo check".into()))]);
    assert_eq!(found("python"), vec![(RunnerKind::Pytest, None, None)]);
    assert_eq!(found("typescript"), vec![(RunnerKind::Vitest, None, Some("tsc".into()))]);
    assert_eq!(found("javascript"), vec![(RunnerKind::Jest, None, None)]);
    assert_eq!(found("go"), vec![(RunnerKind::Go, Some("go vet".into()), Some("go build".into()))]);
    let empty = tempfile::tempdir().unwrap();
    assert!(detect(empty.path(), &toolchain()).is_empty());
}

#[test]
fn a_runner_named_in_package_json_but_not_installed_is_reported() {
    let repo = repository("typescript");
    let index = index(repo.path());
    let error = run_tests(&index, &toolchain(), None, &Scope::All, LONG).unwrap_err();
    assert_eq!(error.code(), "not_available");
    assert!(error.to_string().contains("vitest"), "{error}");
}

#[test]
fn cargo_results_are_parsed_pass_fail_compile_error_and_timeout() {
    let repo = repository("rust");
    let root = repo.path();
    let index = index(root);
    let tools = toolchain();

    let passed = run_tests(&index, &tools, None, &Scope::File("tests/checkout.rs".into()), LONG).unwrap();
    assert_eq!(passed.commands, vec!["cargo test --no-fail-fast -p shop --test checkout"]);
    assert_eq!((passed.status.as_str(), passed.passed, passed.failed, passed.skipped), ("passed", 3, 0, 1), "{}", passed.output_tail);

    let unit = run_tests(&index, &tools, None, &Scope::File("src/price.rs".into()), LONG).unwrap();
    assert_eq!(unit.commands, vec!["cargo test --no-fail-fast -p shop --lib -- price::"]);
    assert_eq!((unit.passed, unit.failed), (1, 0));

    // Affected by a change to prices: their own unit tests and the checkout tests, through cart.rs.
    let affected = run_tests(&index, &tools, None, &Scope::Affected(vec!["src/price.rs".into()]), LONG).unwrap();
    let selected: Vec<(&str, &str)> = affected.selected.iter().map(|link| (link.test_file.as_str(), link.reason.as_str())).collect();
    assert_eq!(selected, vec![("src/price.rs", "same_file"), ("tests/checkout.rs", "imports")]);
    assert_eq!(affected.commands, vec!["cargo test --no-fail-fast -p shop --test checkout", "cargo test --no-fail-fast -p shop --lib -- price::"]);
    assert_eq!((affected.status.as_str(), affected.passed), ("passed", 4));

    std::fs::write(
        root.join("tests/checkout.rs"),
        std::fs::read_to_string(root.join("tests/checkout.rs")).unwrap().replace("assert_eq!(cart.total(), 775);", "assert_eq!(cart.total(), 700, \"wrong total\");"),
    )
    .unwrap();
    let failed = run_tests(&index, &tools, None, &Scope::Name("adds_items".into()), LONG).unwrap();
    assert_eq!((failed.status.as_str(), failed.failed), ("failed", 1), "{}", failed.output_tail);
    let failure = &failed.failures[0];
    assert_eq!((failure.name.as_str(), failure.file.as_deref(), failure.line), ("adds_items", Some("tests/checkout.rs"), Some(8)));
    assert!(failure.message.contains("wrong total"), "{}", failure.message);

    std::fs::write(root.join("src/price.rs"), "pub fn format_price(cents: u64) -> String { cents }\n").unwrap();
    let broken = run_tests(&index, &tools, None, &Scope::File("tests/checkout.rs".into()), LONG).unwrap();
    assert_eq!(broken.status, "error", "{}", broken.output_tail);
    let error = broken.failures.iter().find(|failure| failure.name == "error[E0308]").expect("the type error is reported");
    assert_eq!((error.file.as_deref(), error.line), (Some("src/price.rs"), Some(1)));
    assert_eq!(error.message, "mismatched types");
}

#[test]
fn cargo_run_past_its_timeout_is_killed() {
    let repo = repository("rust");
    let index = index(repo.path());
    let tools = toolchain();
    // Build first, so that the timeout falls on the hanging test rather than on compilation.
    let built = run_tests(&index, &tools, None, &Scope::File("tests/checkout.rs".into()), LONG).unwrap();
    assert_eq!(built.status, "passed");
    let started = std::time::Instant::now();
    let slow = run_tests(&index, &tools, None, &Scope::Name("slow_checkout".into()), Duration::from_secs(20)).unwrap();
    assert_eq!(slow.status, "timeout", "{}", slow.output_tail);
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn pytest_results_are_parsed_pass_fail_collection_error_and_timeout() {
    let Some(python) = kenning_conformance::services::python(&["pytest"]) else { return };
    let tools = Toolchain { python: Some(python), ..Toolchain::default() };
    let repo = repository("python");
    let root = repo.path();
    let index = index(root);

    let passed = run_tests(&index, &tools, None, &Scope::All, LONG).unwrap();
    assert_eq!((passed.status.as_str(), passed.passed, passed.failed, passed.skipped), ("passed", 3, 0, 1), "{}", passed.output_tail);
    assert!(!root.join(".pytest_cache").exists(), "a run leaves no cache in the repository");

    let affected = run_tests(&index, &tools, None, &Scope::Affected(vec!["inventory/models.py".into()]), LONG).unwrap();
    assert_eq!(affected.selected.iter().map(|link| link.test_file.as_str()).collect::<Vec<_>>(), vec!["tests/test_stock.py"]);
    assert_eq!(affected.passed, 3);

    // Regression: the tests a name selection leaves out were reported as skipped.
    let named = run_tests(&index, &tools, None, &Scope::Name("restock".into()), LONG).unwrap();
    assert_eq!((named.status.as_str(), named.passed, named.skipped, named.deselected), ("passed", 1, 0, 3), "{}", named.output_tail);

    std::fs::write(root.join("tests/test_prices.py"), "def test_price():\n    value = 2\n    assert value == 3, \"price is off\"\n").unwrap();
    let failed = run_tests(&index, &tools, None, &Scope::File("tests/test_prices.py".into()), LONG).unwrap();
    assert_eq!((failed.status.as_str(), failed.failed, failed.passed), ("failed", 1, 0), "{}", failed.output_tail);
    let failure = &failed.failures[0];
    assert_eq!(failure.name, "tests/test_prices.py::test_price");
    assert_eq!((failure.file.as_deref(), failure.line), (Some("tests/test_prices.py"), Some(3)), "{}", failed.output_tail);
    assert!(failure.message.contains("price is off"), "{}", failure.message);

    std::fs::write(root.join("tests/test_broken.py"), "def test_broken(:\n    pass\n").unwrap();
    let broken = run_tests(&index, &tools, None, &Scope::File("tests/test_broken.py".into()), LONG).unwrap();
    assert_eq!(broken.status, "error", "{}", broken.output_tail);
    assert_eq!(broken.failures[0].file.as_deref(), Some("tests/test_broken.py"), "{:?}", broken.failures);
    std::fs::remove_file(root.join("tests/test_broken.py")).unwrap();

    let slow = run_tests(&index, &tools, None, &Scope::Name("slow".into()), Duration::from_secs(5)).unwrap();
    assert_eq!(slow.status, "timeout", "{}", slow.output_tail);
}

/// Regression: `test_lint` and `test_typecheck` said `runner: pytest` when ruff or mypy ran.
#[test]
fn a_check_names_the_tool_that_ran() {
    let repo = repository("python");
    let root = repo.path();
    let pyproject = std::fs::read_to_string(root.join("pyproject.toml")).unwrap();
    std::fs::write(root.join("pyproject.toml"), format!("{pyproject}\n[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nstrict = true\n")).unwrap();
    let index = index(root);
    for (check, tool) in [(Check::Lint { fix: false }, "ruff"), (Check::Typecheck, "mypy")] {
        // Whether or not the tool is installed, the result names it (an uninstalled one is an error).
        let result = run_check(&index, &toolchain(), check, &[], LONG).unwrap();
        assert_eq!(result.runner, tool, "{}", result.output_tail);
        assert!(result.commands[0].contains(&format!("-m {tool}")), "{:?}", result.commands);
    }
}

#[test]
fn a_test_name_that_looks_like_an_option_is_refused() {
    let repo = repository("rust");
    let index = index(repo.path());
    let error = run_tests(&index, &toolchain(), None, &Scope::Name("--nocapture".into()), LONG).unwrap_err();
    assert_eq!(error.code(), "invalid");
}

/// Whether process `pid` is still running (a zombie waiting to be reaped is not).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

fn shell(dir: &std::path::Path, script: &str, timeout: Duration) -> kenning_code::run::Output {
    kenning_code::run::run(dir, &kenning_code::run::Invocation::new("sh", &["-c", script]), timeout).unwrap()
}

/// A test that leaves a process holding the output pipes (`sleep 45` in the background) made a
/// 5 s run last 45 s: the run now ends with its tool, and what it left behind is killed.
#[test]
fn a_run_ends_with_its_tool_and_kills_what_it_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let output = shell(dir.path(), "sleep 45 & echo $! > left.pid; echo started", LONG);
    assert_eq!((output.exit_code, output.timed_out, output.stdout.as_str()), (Some(0), false, "started\n"));
    let left = std::fs::read_to_string(dir.path().join("left.pid")).unwrap();
    assert!(!running(&left), "the process the run left behind ({left}) is still running");
}

/// A daemon that left the run's session on purpose cannot be followed, but it does not hold
/// the run open either: the pipes are closed on it.
#[test]
fn a_daemon_that_left_the_session_does_not_hold_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // The run ends only once the daemon has left the session (it writes its pid from inside).
    let output = shell(dir.path(), "setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' & while [ ! -s daemon.pid ]; do sleep 0.05; done; echo started", LONG);
    let daemon = std::fs::read_to_string(dir.path().join("daemon.pid")).unwrap();
    let still_there = running(&daemon);
    let _ = std::process::Command::new("kill").arg("-9").arg(daemon.trim()).status();
    assert_eq!((output.exit_code, output.stdout.as_str()), (Some(0), "started\n"));
    assert!(still_there, "the run waited for its daemon ({daemon}) to end instead of closing the pipes on it");
}

#[test]
fn a_run_past_its_timeout_is_killed_with_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let output = shell(dir.path(), "sleep 60 & echo $! > sleeper.pid; echo waiting; wait", Duration::from_secs(1));
    assert!(output.timed_out && output.exit_code.is_none(), "{output:?}");
    assert_eq!(output.stdout, "waiting\n");
    let sleeper = std::fs::read_to_string(dir.path().join("sleeper.pid")).unwrap();
    assert!(!running(&sleeper), "the timed-out run's child ({sleeper}) is still running");
}

/// The repository's own interpreter runs the tests, and the result says so.
#[test]
fn the_interpreter_that_ran_is_the_one_reported() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    git2::Repository::init(root).unwrap();
    std::fs::write(root.join("test_shop.py"), "def test_shop():\n    pass\n").unwrap();
    std::fs::create_dir_all(root.join(".venv/bin")).unwrap();
    let interpreter = root.join(".venv/bin/python");
    std::fs::write(&interpreter, "#!/bin/sh\necho \"$@\" > ran-with.txt\necho 'test_shop.py::test_shop PASSED'\necho '1 passed in 0.01s'\n").unwrap();
    std::fs::set_permissions(&interpreter, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let index = index(root);
    let result = run_tests(&index, &Toolchain::default(), None, &Scope::All, LONG).unwrap();
    assert_eq!((result.status.as_str(), result.passed), ("passed", 1), "{}", result.output_tail);
    assert!(result.commands[0].starts_with(".venv/bin/python -m pytest "), "{:?}", result.commands);
    assert!(std::fs::read_to_string(root.join("ran-with.txt")).unwrap().starts_with("-m pytest"));
}
