//! The `test` toolset's machinery: which runners a repository uses, the fixed commands each
//! scope runs, and reading their output into passed, failed and skipped tests with the
//! failure's file, line and message.
//!
//! Detection: `Cargo.toml` (cargo test, clippy, cargo check); pytest configuration or
//! `test_*.py` files (pytest; ruff or flake8 and mypy where configured); `package.json` with
//! vitest or jest (and eslint, tsc) run from `node_modules/.bin`, never through a downloader;
//! `go.mod` (go test, go vet). Only what is detected runs.
//!
//! Reading the output of test commands is in `parse`, lint and type checks in `check`.

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

mod check;
mod parse;

pub use check::{Check, CheckResult, run_check};
pub use parse::{Parsed, parse_tests};

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
