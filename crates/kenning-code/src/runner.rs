//! The `test` toolset's machinery: which runners a repository uses, the fixed commands each
//! scope runs, and reading their output into passed, failed and skipped tests with the
//! failure's file, line and message.
//!
//! Detection: `Cargo.toml` (cargo test, clippy, cargo check); pytest configuration or
//! `test_*.py` files (pytest; ruff or flake8 and mypy where configured); `package.json` with
//! vitest or jest (and eslint, tsc) run from `node_modules/.bin`, never through a downloader;
//! `go.mod` (go test, go vet). Only what is detected runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kenning_core::FieldError;
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::graph::Manifests;
use crate::index::CodeIndex;
use crate::lang::Language;
use crate::run::{Invocation, Output, run};
use crate::confine::Confinement;

/// Failures kept in a result; a run with more says how many it left out.
const MAX_FAILURES: usize = 50;
/// The end of the output a result quotes.
const TAIL_BYTES: usize = 3000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunnerKind {
    Cargo,
    Pytest,
    Vitest,
    Jest,
    Go,
}

impl RunnerKind {
    pub fn name(self) -> &'static str {
        match self {
            RunnerKind::Cargo => "cargo",
            RunnerKind::Pytest => "pytest",
            RunnerKind::Vitest => "vitest",
            RunnerKind::Jest => "jest",
            RunnerKind::Go => "go",
        }
    }
}

/// A detected runner and the commands it offers.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Runner {
    pub kind: RunnerKind,
    /// The linter, if one is configured (`clippy`, `ruff`, `flake8`, `eslint`, `go vet`).
    pub linter: Option<String>,
    /// The type checker, if one is configured (`cargo check`, `mypy`, `tsc`, `go build`).
    pub typechecker: Option<String>,
    #[serde(skip)]
    program: PathBuf,
}

/// What the machine offers to run tools with.
#[derive(Debug, Clone, Default)]
pub struct Toolchain {
    /// The Python interpreter for pytest, ruff, flake8 and mypy; default a virtual environment
    /// in the repository (`.venv`, `venv`), else `python3` on PATH.
    pub python: Option<PathBuf>,
    /// Where installed dependencies' documentation is read from.
    pub docs: crate::docs::DocSources,
}

/// Which tests to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    /// One file (relative, confined).
    File(String),
    /// Tests whose name matches.
    Name(String),
    /// Tests affected by these changed files (relative, confined).
    Affected(Vec<String>),
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Failure {
    /// The test's name, or the tool's error code for a compile or lint error.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub message: String,
}

/// A run's result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunResult {
    pub runner: RunnerKind,
    /// The commands run, as they would be typed (they were run as argument lists).
    pub commands: Vec<String>,
    /// `passed`, `failed`, `error` (it did not build or collect), `timeout` or `no_tests`.
    pub status: String,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Tests collected but not run because the selection (a name, `-k`) left them out;
    /// unlike skipped tests, nothing asked them to be skipped.
    pub deselected: usize,
    pub failures: Vec<Failure>,
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    /// The end of the output.
    pub output_tail: String,
    /// Output beyond the cap was dropped from the start.
    pub truncated: bool,
    /// The test files chosen (for `affected`), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selected: Vec<crate::TestLink>,
}

impl RunResult {
    pub fn runner_name(&self) -> &'static str {
        self.runner.name()
    }
}

/// Every runner the repository at `root` uses.
pub fn detect(root: &Path, toolchain: &Toolchain) -> Vec<Runner> {
    let Ok(repository) = Confinement::new(root) else { return Vec::new() };
    // Manifests are read only where they resolve inside the repository.
    let exists = |name: &str| repository.holds(name);
    let text = |name: &str| repository.read_text(name);
    let mut runners = Vec::new();
    if exists("Cargo.toml") {
        runners.push(Runner {
            kind: RunnerKind::Cargo,
            linter: Some("clippy".to_owned()),
            typechecker: Some("cargo check".to_owned()),
            program: PathBuf::from("cargo"),
        });
    }
    let pyproject = text("pyproject.toml");
    let setup_cfg = text("setup.cfg");
    let pytest = exists("pytest.ini")
        || exists("conftest.py")
        || pyproject.contains("[tool.pytest")
        || setup_cfg.contains("[tool:pytest]")
        || text("tox.ini").contains("[pytest]")
        || has_python_tests(root);
    if pytest {
        let python = toolchain.python.clone().unwrap_or_else(|| {
            [".venv/bin/python", "venv/bin/python"].iter().map(|venv| repository.root().join(venv)).find(|venv| venv.exists()).unwrap_or_else(|| PathBuf::from("python3"))
        });
        let linter = if pyproject.contains("[tool.ruff") || exists("ruff.toml") || exists(".ruff.toml") {
            Some("ruff")
        } else if exists(".flake8") || setup_cfg.contains("[flake8]") || text("tox.ini").contains("[flake8]") {
            Some("flake8")
        } else {
            None
        };
        let typechecker = (exists("mypy.ini") || exists(".mypy.ini") || pyproject.contains("[tool.mypy") || setup_cfg.contains("[mypy")).then_some("mypy");
        runners.push(Runner { kind: RunnerKind::Pytest, linter: linter.map(str::to_owned), typechecker: typechecker.map(str::to_owned), program: python });
    }
    let package = text("package.json");
    if let Ok(package) = serde_json::from_str::<serde_json::Value>(&package) {
        let has = |name: &str| ["dependencies", "devDependencies"].iter().any(|section| package.get(section).and_then(|deps| deps.get(name)).is_some());
        let kind = if has("vitest") {
            Some(RunnerKind::Vitest)
        } else if has("jest") {
            Some(RunnerKind::Jest)
        } else {
            None
        };
        if let Some(kind) = kind {
            runners.push(Runner {
                kind,
                linter: has("eslint").then(|| "eslint".to_owned()),
                typechecker: (has("typescript") && exists("tsconfig.json")).then(|| "tsc".to_owned()),
                program: repository.root().join("node_modules/.bin").join(kind.name()),
            });
        }
    }
    if exists("go.mod") {
        runners.push(Runner { kind: RunnerKind::Go, linter: Some("go vet".to_owned()), typechecker: Some("go build".to_owned()), program: PathBuf::from("go") });
    }
    runners
}

fn has_python_tests(root: &Path) -> bool {
    ignore::WalkBuilder::new(root).require_git(false).max_depth(Some(4)).build().flatten().any(|entry| {
        entry.file_name().to_str().is_some_and(|name| name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py")))
    })
}

/// An argument taken from a caller that must not be read as an option by the tool it is
/// handed to.
fn not_an_option(field: &str, value: &str) -> std::result::Result<(), FieldError> {
    if value.starts_with('-') || value.is_empty() || value.chars().any(char::is_control) {
        return Err(FieldError::new(field, "is empty, starts with `-` or holds a control character", value, "give a test name such as `parses_empty_input`"));
    }
    Ok(())
}

/// A path a tool receives: confined paths never climb out; `./` keeps one named `-x` a path.
fn path_arg(path: &str) -> String {
    format!("./{path}")
}

impl Runner {
    /// The test commands a scope runs, with the test files it selected.
    fn test_invocations(&self, index: &CodeIndex, scope: &Scope) -> Result<(Vec<Invocation>, Vec<crate::TestLink>)> {
        let program = self.program.clone();
        let base = |args: &[&str]| Invocation::new(program.clone(), args);
        let mut selected = Vec::new();
        let invocations = match (self.kind, scope) {
            (RunnerKind::Cargo, Scope::All) => vec![base(&["test", "--workspace", "--no-fail-fast"])],
            (RunnerKind::Cargo, Scope::Name(name)) => {
                not_an_option("target", name)?;
                vec![base(&["test", "--workspace", "--no-fail-fast", "--"]).arg(name.clone())]
            }
            (RunnerKind::Cargo, Scope::File(path)) => cargo_targets(index, &[path.clone()])?,
            (RunnerKind::Pytest, Scope::All) => vec![pytest(&program)],
            (RunnerKind::Pytest, Scope::Name(name)) => {
                not_an_option("target", name)?;
                vec![pytest(&program).arg("-k").arg(name.clone())]
            }
            (RunnerKind::Pytest, Scope::File(path)) => vec![pytest(&program).arg(path_arg(path))],
            (RunnerKind::Vitest, _) | (RunnerKind::Jest, _) => {
                let mut invocation = match self.kind {
                    RunnerKind::Vitest => base(&["run", "--reporter=json"]),
                    _ => base(&["--json", "--ci"]),
                };
                match scope {
                    Scope::All => {}
                    Scope::Name(name) => {
                        not_an_option("target", name)?;
                        invocation = invocation.arg("-t").arg(name.clone());
                    }
                    Scope::File(path) => invocation = invocation.arg(path_arg(path)),
                    Scope::Affected(_) => {}
                }
                vec![invocation]
            }
            (RunnerKind::Go, Scope::All) => vec![base(&["test", "-json", "./..."])],
            (RunnerKind::Go, Scope::Name(name)) => {
                not_an_option("target", name)?;
                vec![base(&["test", "-json", "-run", name, "./..."])]
            }
            (RunnerKind::Go, Scope::File(path)) => vec![base(&["test", "-json"]).arg(go_package(path))],
            (_, Scope::Affected(changed)) => {
                selected = index.tests_for(changed)?;
                let files: BTreeSet<String> = selected
                    .iter()
                    .map(|link| link.test_file.clone())
                    .filter(|file| Language::of(file).is_some_and(|language| runner_language(self.kind, language)))
                    .collect();
                selected.retain(|link| files.contains(&link.test_file));
                let files: Vec<String> = files.into_iter().collect();
                if files.is_empty() {
                    Vec::new()
                } else {
                    match self.kind {
                        RunnerKind::Cargo => cargo_targets(index, &files)?,
                        RunnerKind::Pytest => vec![files.iter().fold(pytest(&program), |invocation, file| invocation.arg(path_arg(file)))],
                        RunnerKind::Go => {
                            let packages: BTreeSet<String> = files.iter().map(|file| go_package(file)).collect();
                            vec![packages.into_iter().fold(base(&["test", "-json"]), Invocation::arg)]
                        }
                        RunnerKind::Vitest | RunnerKind::Jest => unreachable!("handled above"),
                    }
                }
            }
        };
        Ok((invocations, selected))
    }
}

fn runner_language(kind: RunnerKind, language: Language) -> bool {
    match kind {
        RunnerKind::Cargo => language == Language::Rust,
        RunnerKind::Pytest => language == Language::Python,
        RunnerKind::Vitest | RunnerKind::Jest => matches!(language, Language::TypeScript | Language::JavaScript),
        RunnerKind::Go => language == Language::Go,
    }
}

fn pytest(python: &Path) -> Invocation {
    Invocation::new(python, &["-m", "pytest", "-rA", "--tb=line", "-q", "--color=no", "-p", "no:cacheprovider"])
}

fn go_package(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, _)) => format!("./{dir}"),
        None => ".".to_owned(),
    }
}

/// The cargo commands that run the tests in `files`: an integration test file is its own
/// target (`--test name`); a source file's unit tests are the package's library tests
/// filtered by the file's module path.
fn cargo_targets(index: &CodeIndex, files: &[String]) -> Result<Vec<Invocation>> {
    let (state, _) = index.fresh()?;
    let manifests: &Manifests = &state.manifests;
    let mut per_package: BTreeMap<String, (Vec<String>, Vec<String>, bool)> = BTreeMap::new();
    for file in files {
        if Language::of(file) != Some(Language::Rust) {
            return Err(Error::Invalid(FieldError::new("target", "is not a Rust file", file.as_str(), "name a `.rs` file, e.g. `tests/api.rs`")));
        }
        let Some((dir, package)) = manifests
            .packages
            .iter()
            .filter(|(dir, _)| dir.is_empty() || file.starts_with(&format!("{dir}/")))
            .max_by_key(|(dir, _)| dir.len())
        else {
            return Err(Error::NotAvailable { what: format!("no Cargo package contains {file}"), suggestion: "run with scope `all`".to_owned() });
        };
        let inside = if dir.is_empty() { file.as_str() } else { &file[dir.len() + 1..] };
        let entry = per_package.entry(package.clone()).or_default();
        if let Some(test) = inside.strip_prefix("tests/").and_then(|rest| rest.strip_suffix(".rs")) {
            // `tests/common/mod.rs` and the like are helpers of the test targets, not targets.
            if test.contains('/') {
                entry.2 = true;
            } else {
                entry.0.push(test.to_owned());
            }
        } else if let Some(module) = inside.strip_prefix("src/").and_then(|rest| rest.strip_suffix(".rs")) {
            let module = module.trim_end_matches("/mod");
            let path = if matches!(module, "lib" | "main") { String::new() } else { module.replace('/', "::") };
            entry.1.push(path);
        } else {
            entry.2 = true;
        }
    }
    let mut invocations = Vec::new();
    for (package, (tests, modules, everything)) in per_package {
        let base = Invocation::new("cargo", &["test", "--no-fail-fast", "-p"]).arg(package.clone());
        if everything {
            invocations.push(base);
            continue;
        }
        if !tests.is_empty() {
            invocations.push(tests.iter().fold(base.clone(), |invocation, test| invocation.arg("--test").arg(test.clone())));
        }
        if !modules.is_empty() {
            let lib = base.arg("--lib");
            if modules.iter().any(String::is_empty) {
                invocations.push(lib);
            } else {
                invocations.push(modules.iter().fold(lib.arg("--"), |invocation, module| invocation.arg(format!("{module}::"))));
            }
        }
    }
    Ok(invocations)
}

/// Runs the tests of `scope` with the first detected runner (or `kind`), within `timeout`.
pub fn run_tests(index: &CodeIndex, toolchain: &Toolchain, kind: Option<RunnerKind>, scope: &Scope, timeout: Duration) -> Result<RunResult> {
    let runner = pick(index.root(), toolchain, kind)?;
    if matches!(runner.kind, RunnerKind::Vitest | RunnerKind::Jest) && !runner.program.exists() {
        return Err(Error::NotAvailable {
            what: format!("{} is in package.json but not installed in node_modules", runner.kind.name()),
            suggestion: "run `npm install` (or your package manager's install) first".to_owned(),
        });
    }
    let (invocations, selected) = runner.test_invocations(index, scope)?;
    let mut result = RunResult {
        runner: runner.kind,
        commands: invocations.iter().map(|invocation| invocation.display(index.root())).collect(),
        status: "no_tests".to_owned(),
        passed: 0,
        failed: 0,
        skipped: 0,
        deselected: 0,
        failures: Vec::new(),
        duration_ms: 0,
        exit_code: Some(0),
        output_tail: String::new(),
        truncated: false,
        selected,
    };
    let started = std::time::Instant::now();
    let mut statuses = Vec::new();
    for invocation in &invocations {
        let remaining = timeout.saturating_sub(started.elapsed());
        let output = run(index.root(), invocation, remaining)?;
        let parsed = parse_tests(runner.kind, &output);
        result.passed += parsed.passed;
        result.failed += parsed.failed;
        result.skipped += parsed.skipped;
        result.deselected += parsed.deselected;
        result.failures.extend(parsed.failures);
        result.exit_code = output.exit_code;
        result.truncated |= output.truncated;
        result.output_tail = tail(&output);
        statuses.push(parsed.status);
        if output.timed_out {
            break;
        }
    }
    result.failures.truncate(MAX_FAILURES);
    relativise(index.root(), &mut result.failures);
    result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    result.status = ["timeout", "error", "failed", "passed"]
        .into_iter()
        .find(|status| statuses.iter().any(|seen| seen == status))
        .unwrap_or("no_tests")
        .to_owned();
    Ok(result)
}

/// Failure paths relative to the repository root, as every other path kenning returns.
fn relativise(root: &Path, failures: &mut [Failure]) {
    let prefix = format!("{}/", root.display());
    for failure in failures {
        if let Some(file) = &mut failure.file {
            if let Some(inside) = file.strip_prefix(&prefix) {
                *file = inside.to_owned();
            } else if let Some(inside) = file.strip_prefix("./") {
                *file = inside.to_owned();
            }
        }
    }
}

fn pick(root: &Path, toolchain: &Toolchain, kind: Option<RunnerKind>) -> Result<Runner> {
    let runners = detect(root, toolchain);
    let names: Vec<&str> = runners.iter().map(|runner| runner.kind.name()).collect();
    match kind {
        Some(kind) => runners.iter().find(|runner| runner.kind == kind).cloned().ok_or_else(|| Error::NotAvailable {
            what: format!("no {} setup was detected in this repository", kind.name()),
            suggestion: if names.is_empty() { "no test runner was detected".to_owned() } else { format!("detected: {}", names.join(", ")) },
        }),
        None => runners.into_iter().next().ok_or_else(|| Error::NotAvailable {
            what: "no test runner was detected in this repository".to_owned(),
            suggestion: "kenning detects Cargo.toml, pytest configuration or test_*.py files, package.json with vitest or jest, and go.mod".to_owned(),
        }),
    }
}

fn tail(output: &Output) -> String {
    let combined = format!("{}{}", output.stderr, output.stdout);
    let mut start = combined.len().saturating_sub(TAIL_BYTES);
    while !combined.is_char_boundary(start) {
        start += 1;
    }
    combined[start..].to_owned()
}

/// One command's results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub status: String,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub deselected: usize,
    pub failures: Vec<Failure>,
    /// Something other than a test failed: a build, or collecting a test file.
    pub errored: bool,
}

/// Reads a test command's output.
pub fn parse_tests(kind: RunnerKind, output: &Output) -> Parsed {
    let mut parsed = match kind {
        RunnerKind::Cargo => parse_cargo(&output.stdout, &output.stderr),
        RunnerKind::Pytest => parse_pytest(&output.stdout),
        RunnerKind::Vitest | RunnerKind::Jest => parse_jest_json(&output.stdout),
        RunnerKind::Go => parse_go_json(&output.stdout),
    };
    parsed.status = if output.timed_out {
        "timeout"
    } else if parsed.failed > 0 {
        "failed"
    } else if parsed.errored {
        "error"
    } else if output.exit_code != Some(0) && !(kind == RunnerKind::Pytest && output.exit_code == Some(5)) {
        "error"
    } else if parsed.passed + parsed.skipped == 0 {
        "no_tests"
    } else {
        "passed"
    }
    .to_owned();
    if parsed.status == "error" && parsed.failures.is_empty() {
        parsed.failures.push(Failure {
            name: "run".to_owned(),
            file: None,
            line: None,
            message: format!("exited with {:?} before reporting tests", output.exit_code),
        });
    }
    parsed
}

/// `path:line:col` at the start of `text`, or after `at ` / `--> `.
fn location(text: &str) -> Option<(String, u32)> {
    let text = text.trim();
    let mut parts = text.splitn(3, ':');
    let file = parts.next()?.trim();
    let line = parts.next()?.trim().parse().ok()?;
    (!file.is_empty() && !file.contains(' ')).then(|| (file.to_owned(), line))
}

fn parse_cargo(stdout: &str, stderr: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut summary = (0, 0, 0, false);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("test ") {
            if let Some((name, outcome)) = rest.rsplit_once(" ... ") {
                match outcome.trim() {
                    "ok" => parsed.passed += 1,
                    "FAILED" => {
                        parsed.failed += 1;
                        parsed.failures.push(Failure { name: name.trim().to_owned(), file: None, line: None, message: String::new() });
                    }
                    other if other.starts_with("ignored") => parsed.skipped += 1,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("test result: ") {
            // `ok. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s`
            summary.3 = true;
            for part in rest.split(';') {
                let words: Vec<&str> = part.split_whitespace().collect();
                let number = |at: usize| words.get(at).and_then(|word| word.parse::<usize>().ok()).unwrap_or(0);
                match words.last().copied() {
                    Some("passed") => summary.0 += number(words.len() - 2),
                    Some("failed") => summary.1 += number(words.len() - 2),
                    Some("ignored") => summary.2 += number(words.len() - 2),
                    _ => {}
                }
            }
        }
    }
    // Lines dropped by the output cap leave the summaries as the count to trust.
    if summary.3 {
        (parsed.passed, parsed.failed, parsed.skipped) = (summary.0, summary.1, summary.2);
    }
    // Each failure's panic: `---- name stdout ----`, then `thread 'name' panicked at file:line:col:`
    // and the message on the next lines.
    let lines: Vec<&str> = stdout.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let Some(name) = line.strip_prefix("---- ").and_then(|rest| rest.strip_suffix(" stdout ----")) else { continue };
        let mut file_line = None;
        let mut message = Vec::new();
        for next in &lines[at + 1..] {
            if next.starts_with("---- ") || next.starts_with("failures:") || next.starts_with("note: ") {
                break;
            }
            if let Some(position) = next.find("panicked at ") {
                let rest = &next[position + "panicked at ".len()..];
                file_line = location(rest.trim_end_matches(':'));
                let inline = rest.splitn(4, ':').nth(3).map(str::trim).unwrap_or_default();
                if !inline.is_empty() {
                    message.push(inline.trim_matches('\'').to_owned());
                }
            } else if file_line.is_some() && !next.trim().is_empty() {
                message.push(next.trim().to_owned());
            }
        }
        if let Some(failure) = parsed.failures.iter_mut().find(|failure| failure.name == name) {
            if let Some((file, line)) = file_line {
                failure.file = Some(file);
                failure.line = Some(line);
            }
            failure.message = message.join("\n");
        }
    }
    // Compile errors: `error[E0308]: mismatched types` then ` --> src/lib.rs:3:5`.
    let stderr_lines: Vec<&str> = stderr.lines().collect();
    for (at, line) in stderr_lines.iter().enumerate() {
        if !line.starts_with("error") || line.starts_with("error: could not compile") || line.starts_with("error: test failed") {
            continue;
        }
        let Some((code, message)) = line.split_once(": ") else { continue };
        let place = stderr_lines[at + 1..].iter().take(3).find_map(|next| next.trim().strip_prefix("--> ").and_then(location));
        if place.is_none() && code == "error" && message.starts_with("aborting") {
            continue;
        }
        parsed.errored = true;
        parsed.failures.push(Failure {
            name: code.to_owned(),
            file: place.as_ref().map(|(file, _)| file.clone()),
            line: place.map(|(_, line)| line),
            message: message.to_owned(),
        });
    }
    parsed
}

fn parse_pytest(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    // With `--tb=line` each failure is one line, `path:line: message`, in failure order.
    let mut places: Vec<(String, u32, String)> = Vec::new();
    let mut summary_seen = false;
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("FAILED ").or_else(|| line.strip_prefix("ERROR ")) {
            parsed.errored |= line.starts_with("ERROR ");
            let (name, message) = rest.split_once(" - ").unwrap_or((rest, ""));
            parsed.failures.push(Failure { name: name.trim().to_owned(), file: None, line: None, message: message.trim().to_owned() });
        } else if line.starts_with("PASSED ") || line.starts_with("XFAIL ") || line.starts_with("XPASS ") {
        } else if line.starts_with("SKIPPED ") {
        } else if let Some((file, number)) = location(line)
            && !line.starts_with(' ')
            && (file.ends_with(".py"))
        {
            let message = line.splitn(3, ':').nth(2).unwrap_or_default().trim().to_owned();
            places.push((file, number, message));
        } else if is_pytest_summary(line) {
            summary_seen = true;
            for part in line.trim_matches('=').split(" in ").next().unwrap_or_default().split(',') {
                let words: Vec<&str> = part.split_whitespace().collect();
                let (Some(count), Some(what)) = (words.first().and_then(|word| word.parse::<usize>().ok()), words.get(1)) else { continue };
                match *what {
                    "passed" | "xpassed" => parsed.passed += count,
                    "failed" => parsed.failed += count,
                    "skipped" | "xfailed" => parsed.skipped += count,
                    "deselected" => parsed.deselected += count,
                    _ => {}
                }
            }
        }
    }
    if !summary_seen {
        parsed.failed = parsed.failures.iter().filter(|failure| failure.name.contains("::")).count();
    }
    for failure in &mut parsed.failures {
        let file = failure.name.split("::").next().unwrap_or_default();
        if let Some(position) = places.iter().position(|(place, _, _)| place.ends_with(file)) {
            let (place, number, message) = places.remove(position);
            failure.file = Some(place.strip_prefix("./").unwrap_or(&place).to_owned());
            failure.line = Some(number);
            if failure.message.is_empty() {
                failure.message = message;
            }
        } else if failure.file.is_none() && file.ends_with(".py") {
            failure.file = Some(file.to_owned());
        }
    }
    parsed
}

fn is_pytest_summary(line: &str) -> bool {
    let trimmed = line.trim_matches(|c| c == '=' || c == ' ');
    trimmed.contains(" in ")
        && trimmed.split(',').all(|part| part.split_whitespace().next().is_some_and(|word| word.parse::<usize>().is_ok()))
        && (trimmed.contains("passed") || trimmed.contains("failed") || trimmed.contains("error") || trimmed.contains("skipped") || trimmed.contains("no tests ran"))
}

fn parse_jest_json(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(start) = stdout.find('{') else { return parsed };
    let Ok(report) = serde_json::from_str::<serde_json::Value>(&stdout[start..]) else { return parsed };
    let count = |field: &str| report.get(field).and_then(serde_json::Value::as_u64).map_or(0, |n| usize::try_from(n).unwrap_or(0));
    parsed.passed = count("numPassedTests");
    parsed.failed = count("numFailedTests");
    parsed.skipped = count("numPendingTests") + count("numTodoTests");
    for file in report.get("testResults").and_then(serde_json::Value::as_array).into_iter().flatten() {
        let file_name = file.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
        for assertion in file.get("assertionResults").and_then(serde_json::Value::as_array).into_iter().flatten() {
            if assertion.get("status").and_then(serde_json::Value::as_str) != Some("failed") {
                continue;
            }
            let message = assertion
                .get("failureMessages")
                .and_then(serde_json::Value::as_array)
                .and_then(|messages| messages.first())
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let line = message
                .split(file_name)
                .nth(1)
                .and_then(|rest| rest.strip_prefix(':'))
                .and_then(|rest| rest.split(':').next())
                .and_then(|number| number.parse().ok())
                .or_else(|| assertion.get("location").and_then(|location| location.get("line")).and_then(serde_json::Value::as_u64).and_then(|n| u32::try_from(n).ok()));
            parsed.failures.push(Failure {
                name: assertion.get("fullName").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned(),
                file: Some(file_name.to_owned()),
                line,
                message: message.lines().next().unwrap_or_default().to_owned(),
            });
        }
        if file.get("status").and_then(serde_json::Value::as_str) == Some("failed")
            && file.get("assertionResults").and_then(serde_json::Value::as_array).is_none_or(Vec::is_empty)
        {
            let message = file.get("message").and_then(serde_json::Value::as_str).unwrap_or_default();
            parsed.failed += 1;
            parsed.failures.push(Failure { name: "suite".to_owned(), file: Some(file_name.to_owned()), line: None, message: message.lines().next().unwrap_or_default().to_owned() });
        }
    }
    parsed
}

fn parse_go_json(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut output: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let field = |name: &str| event.get(name).and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
        let (action, package, test) = (field("Action"), field("Package"), field("Test"));
        match action.as_str() {
            "output" => output.entry((package, test)).or_default().push(field("Output")),
            "pass" if !test.is_empty() => parsed.passed += 1,
            "skip" if !test.is_empty() => parsed.skipped += 1,
            "fail" => {
                let lines = output.get(&(package.clone(), test.clone())).cloned().unwrap_or_default();
                // `    file_test.go:12: message` inside a test; `./x.go:3:2: undefined: y` for a build.
                let place = lines.iter().find_map(|line| {
                    let trimmed = line.trim();
                    let (file, number) = location(trimmed)?;
                    file.ends_with(".go").then(|| (file, number, trimmed.splitn(3, ':').nth(2).unwrap_or_default().trim().to_owned()))
                });
                if !test.is_empty() || place.is_some() {
                    if !test.is_empty() {
                        parsed.failed += 1;
                    }
                    parsed.failures.push(Failure {
                        name: if test.is_empty() { package } else { test },
                        file: place.as_ref().map(|(file, _, _)| file.clone()),
                        line: place.as_ref().map(|(_, line, _)| *line),
                        message: place.map(|(_, _, message)| message).unwrap_or_default(),
                    });
                }
            }
            _ => {}
        }
    }
    parsed
}

/// What a lint or type check found.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckResult {
    /// The tool that ran: `clippy`, `cargo check`, `ruff`, `flake8`, `mypy`, `eslint`, `tsc`, `go vet` or `go build`.
    pub runner: String,
    pub commands: Vec<String>,
    /// `clean`, `problems`, `error` (the tool failed to run) or `timeout`.
    pub status: String,
    pub problems: Vec<Failure>,
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    pub output_tail: String,
    pub truncated: bool,
}

/// Which check to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Lint { fix: bool },
    Typecheck,
}

/// Runs the linter or type checker of the first detected runner that has one, on `files`
/// (relative, confined; empty for the whole project where the tool allows).
pub fn run_check(index: &CodeIndex, toolchain: &Toolchain, check: Check, files: &[String], timeout: Duration) -> Result<CheckResult> {
    let runners = detect(index.root(), toolchain);
    let runner = runners
        .iter()
        .find(|runner| match check {
            Check::Lint { .. } => runner.linter.is_some(),
            Check::Typecheck => runner.typechecker.is_some(),
        })
        .ok_or_else(|| Error::NotAvailable {
            what: format!("no {} is configured in this repository", if check == Check::Typecheck { "type checker" } else { "linter" }),
            suggestion: "kenning runs clippy and cargo check, ruff or flake8 and mypy where configured, eslint and tsc from node_modules, go vet".to_owned(),
        })?;
    let tool = match check {
        Check::Lint { .. } => runner.linter.clone(),
        Check::Typecheck => runner.typechecker.clone(),
    }
    .unwrap_or_default();
    let fix = matches!(check, Check::Lint { fix: true });
    let bin = |name: &str| index.root().join("node_modules/.bin").join(name);
    let python = runner.program.clone();
    let mut invocation = match tool.as_str() {
        "clippy" => Invocation::new("cargo", &["clippy", "--workspace", "--all-targets", "--message-format=short"]),
        "cargo check" => Invocation::new("cargo", &["check", "--workspace", "--all-targets", "--message-format=short"]),
        "ruff" => Invocation::new(python, &["-m", "ruff", "check", "--output-format=concise"]),
        "flake8" => Invocation::new(python, &["-m", "flake8"]),
        "mypy" => Invocation::new(python, &["-m", "mypy", "--no-error-summary", "--no-color-output"]),
        "eslint" => Invocation::new(bin("eslint"), &["--format", "unix"]),
        "tsc" => Invocation::new(bin("tsc"), &["--noEmit", "--pretty", "false"]),
        "go vet" => Invocation::new("go", &["vet"]),
        _ => Invocation::new("go", &["build", "-o", "/dev/null"]),
    };
    if fix {
        invocation = match tool.as_str() {
            "clippy" => invocation.arg("--fix").arg("--allow-dirty").arg("--allow-staged"),
            "ruff" | "eslint" => invocation.arg("--fix"),
            _ => invocation,
        };
    }
    // cargo and tsc check the whole project; the others take the files, or the project.
    let takes_files = !matches!(tool.as_str(), "clippy" | "cargo check" | "tsc");
    if takes_files {
        if files.is_empty() {
            invocation = invocation.arg(if tool.starts_with("go") { "./..." } else { "." });
        } else if tool.starts_with("go") {
            let packages: BTreeSet<String> = files.iter().map(|file| go_package(file)).collect();
            invocation = packages.into_iter().fold(invocation, Invocation::arg);
        } else {
            invocation = files.iter().fold(invocation, |invocation, file| invocation.arg(path_arg(file)));
        }
    }
    let output = run(index.root(), &invocation, timeout)?;
    let mut problems = parse_problems(&format!("{}\n{}", output.stdout, output.stderr));
    relativise(index.root(), &mut problems);
    if !files.is_empty() && !takes_files {
        problems.retain(|problem| problem.file.as_ref().is_some_and(|file| files.iter().any(|wanted| file.trim_start_matches("./") == wanted)));
    }
    let status = if output.timed_out {
        "timeout"
    } else if !problems.is_empty() {
        "problems"
    } else if output.exit_code == Some(0) {
        "clean"
    } else {
        "error"
    };
    Ok(CheckResult {
        runner: tool,
        commands: vec![invocation.display(index.root())],
        status: status.to_owned(),
        problems: problems.into_iter().take(MAX_FAILURES * 4).collect(),
        duration_ms: u64::try_from(output.elapsed.as_millis()).unwrap_or(u64::MAX),
        exit_code: output.exit_code,
        output_tail: tail(&output),
        truncated: output.truncated,
    })
}

/// `file:line:col: message` lines, the format every supported linter and checker can print.
fn parse_problems(text: &str) -> Vec<Failure> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let trimmed = line.trim();
        let Some((file, number)) = location(trimmed) else { continue };
        if !file.contains('.') || file.starts_with("http") {
            continue;
        }
        let rest = trimmed.splitn(3, ':').nth(2).unwrap_or_default();
        // Drop the column, if any.
        let message = match rest.split_once(':') {
            Some((column, message)) if column.trim().parse::<u32>().is_ok() => message.trim(),
            _ => rest.trim(),
        };
        let (name, message) = match message.split_once(": ") {
            Some((severity, message)) if severity.len() < 24 => (severity.trim().to_owned(), message.to_owned()),
            _ => ("problem".to_owned(), message.to_owned()),
        };
        if seen.insert((file.clone(), number, message.clone())) {
            problems.push(Failure { name, file: Some(file), line: Some(number), message });
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &str, stderr: &str, exit_code: Option<i32>) -> Output {
        Output { stdout: stdout.to_owned(), stderr: stderr.to_owned(), exit_code, ..Output::default() }
    }

    #[test]
    fn jest_report_is_read() {
        let report = r#"{"numPassedTests":1,"numFailedTests":1,"numPendingTests":1,"numTodoTests":0,"testResults":[{"name":"/r/src/sum.test.ts","status":"failed","message":"","assertionResults":[{"fullName":"sum adds","status":"passed","failureMessages":[]},{"fullName":"sum fails","status":"failed","failureMessages":["AssertionError: expected 3 to be 4\n    at /r/src/sum.test.ts:9:17"]}]}]}"#;
        let parsed = parse_tests(RunnerKind::Vitest, &output(report, "", Some(1)));
        assert_eq!((parsed.status.as_str(), parsed.passed, parsed.failed, parsed.skipped), ("failed", 1, 1, 1));
        assert_eq!(parsed.failures[0].line, Some(9));
        assert_eq!(parsed.failures[0].message, "AssertionError: expected 3 to be 4");
    }

    #[test]
    fn go_events_are_read() {
        let events = [
            r#"{"Action":"run","Package":"example.com/m/calc","Test":"TestAdd"}"#,
            r#"{"Action":"pass","Package":"example.com/m/calc","Test":"TestAdd"}"#,
            r#"{"Action":"output","Package":"example.com/m/calc","Test":"TestSub","Output":"    calc_test.go:14: got 1, want 2\n"}"#,
            r#"{"Action":"fail","Package":"example.com/m/calc","Test":"TestSub"}"#,
            r#"{"Action":"skip","Package":"example.com/m/calc","Test":"TestSkip"}"#,
            r#"{"Action":"fail","Package":"example.com/m/calc"}"#,
        ]
        .join("\n");
        let parsed = parse_tests(RunnerKind::Go, &output(&events, "", Some(1)));
        assert_eq!((parsed.passed, parsed.failed, parsed.skipped), (1, 1, 1));
        assert_eq!(parsed.failures[0], Failure { name: "TestSub".into(), file: Some("calc_test.go".into()), line: Some(14), message: "got 1, want 2".into() });
    }

    /// Regression: tests a `-k` selection left out were counted as skipped.
    #[test]
    fn pytest_deselected_tests_are_not_skipped_tests() {
        let stdout = "tests/test_stock.py::test_restock PASSED\n========= 1 passed, 1 skipped, 3 deselected in 0.02s =========\n";
        let parsed = parse_tests(RunnerKind::Pytest, &output(stdout, "", Some(0)));
        assert_eq!((parsed.status.as_str(), parsed.passed, parsed.skipped, parsed.deselected), ("passed", 1, 1, 3));
    }

    #[test]
    fn problems_are_read_from_file_line_column_lines() {
        let text = "src/lib.rs:3:9: warning: unused variable: `x`\napp.py:10:1: E302 expected 2 blank lines\nnoise line\n";
        let problems = parse_problems(text);
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[0].file.as_deref(), Some("src/lib.rs"));
        assert_eq!(problems[0].name, "warning");
        assert_eq!(problems[1].line, Some(10));
    }
}
