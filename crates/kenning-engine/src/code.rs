//! [`CodeService`]: the `repo`, `test` and `docs` toolsets' service. It answers from
//! kenning-code's index and runners, and ties test runs to memory: a failing run becomes an
//! episodic memory, and a run made for a decision records `ci_passed` or `ci_failed` on it, so
//! outcomes feed calibration without anyone typing them.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kenning_code::docs::{ApiView, DocScope, DocSearchView};
use kenning_code::runner::{self, Check, CheckResult, RunResult, RunnerKind, Scope, Toolchain};
use kenning_code::understand::Direction;
use kenning_code::views::{DependenciesView, SearchView, SimilarView, UnderstandView};
use kenning_code::{CodeIndex, Depth, Language, RootPath, SearchScope, Structure, TestLink};
use kenning_core::decision::SignalInput;
use kenning_core::{CaptureInput, FieldError};
use schemars::JsonSchema;
use serde::Serialize;

use crate::decisions::{ChainAnalysis, DecisionService};
use crate::error::{Error, Result};
use crate::service::MemoryService;

/// The longest a test run, lint or type check may take when the caller names no timeout,
/// and the most it may ask for. A tool call has a deadline of its own (30 s over MCP); a run
/// is stopped, its process group killed, when either passes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(25);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Runs remembered for the `test://status` and `test://recent-failures` resources.
const HISTORY: usize = 20;
/// Failures listed in a failing run's memory.
const REMEMBERED_FAILURES: usize = 20;

impl From<kenning_code::Error> for Error {
    fn from(error: kenning_code::Error) -> Self {
        match error {
            kenning_code::Error::Invalid(field) => Error::Invalid(field),
            kenning_code::Error::Interrupted => Error::Interrupted,
            other => Error::Code { error: other.code(), message: other.to_string(), suggestion: other.suggestion() },
        }
    }
}

pub struct CodeService {
    index: Arc<CodeIndex>,
    toolchain: Toolchain,
    memory: Arc<MemoryService>,
    decisions: Arc<DecisionService>,
    history: Arc<Mutex<VecDeque<TestRunView>>>,
}

/// A test run, and what it left in memory.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TestRunView {
    #[serde(flatten)]
    pub result: RunResult,
    /// The episodic memory a failing run became.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_urn: Option<String>,
    /// The signal recorded on the decision the run was made for (`ci_passed` or `ci_failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_signal: Option<String>,
}

/// Which tests a change needs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SuggestView {
    pub files: Vec<FileSuggestion>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileSuggestion {
    pub path: String,
    /// Existing tests to run (and update) for this change.
    pub run: Vec<TestLink>,
    /// Definitions of the file no linked test mentions by name.
    pub untested: Vec<String>,
    /// What to write, following the repository's conventions.
    pub suggestion: String,
}

/// What the `test` resources show.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TestStatusView {
    pub runners: Vec<runner::Runner>,
    /// Runs since this server started, newest first.
    pub runs: Vec<TestRunView>,
    /// Coverage is reported by none of the supported runners' default output.
    pub coverage: Option<String>,
}

/// One commit in `repo://recent-changes`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CommitView {
    #[serde(flatten)]
    pub change: kenning_code::views::GitChange,
    pub files: Vec<String>,
}

impl CodeService {
    /// The code service of the repository `memory` is rooted in, with its index at `index_path`.
    pub fn open(memory: Arc<MemoryService>, decisions: Arc<DecisionService>, index_path: &Path, toolchain: Toolchain) -> Result<CodeService> {
        let root = memory.repository_root().map(Path::to_owned).ok_or_else(|| Error::Code {
            error: "no_repository",
            message: "kenning is not running inside a repository".to_owned(),
            suggestion: "start kenning from inside a git repository".to_owned(),
        })?;
        let index = CodeIndex::open(&root, index_path, memory.embedder())?;
        Ok(CodeService { index: Arc::new(index), toolchain, memory, decisions, history: Arc::default() })
    }

    /// The same repository, index and run history, writing what runs leave in memory through
    /// other services (a view limited to some domains).
    pub fn with_services(&self, memory: Arc<MemoryService>, decisions: Arc<DecisionService>) -> CodeService {
        CodeService { index: self.index.clone(), toolchain: self.toolchain.clone(), memory, decisions, history: self.history.clone() }
    }

    pub fn index(&self) -> &CodeIndex {
        &self.index
    }

    fn path(&self, field: &str, text: &str, root: RootPath) -> Result<String> {
        Ok(self.index.confinement().existing(field, text, root)?)
    }

    pub fn understand(&self, path: &str, depth: Option<&str>) -> Result<UnderstandView> {
        let depth = match depth.unwrap_or("shallow") {
            "shallow" => Depth::Shallow,
            "deep" => Depth::Deep,
            other => return Err(FieldError::new("depth", "is not an allowed value", other, "use `shallow` (summary) or `deep` (with transitive dependencies)").into()),
        };
        let path = self.path("path", path, RootPath::Allowed)?;
        Ok(self.index.understand(&path, depth)?)
    }

    pub fn search_patterns(&self, query: &str, path: Option<&str>, language: Option<&str>, limit: Option<usize>) -> Result<SearchView> {
        kenning_core::search::check_query_length("pattern_query", query)?;
        if query.trim().is_empty() {
            return Err(FieldError::new("pattern_query", "is empty", query, "describe the pattern, e.g. `error handling in API routes`").into());
        }
        let scope = SearchScope {
            path: path.map(|path| self.path("path", path, RootPath::Allowed)).transpose()?,
            language: language.map(parse_language).transpose()?,
        };
        Ok(self.index.search(query, &scope, limit.unwrap_or(10))?)
    }

    pub fn find_similar(&self, file_path: Option<&str>, snippet: Option<&str>, limit: Option<usize>) -> Result<SimilarView> {
        let path = file_path.map(|path| self.path("file_path", path, RootPath::Refused)).transpose()?;
        if let Some(snippet) = snippet {
            kenning_core::search::check_query_length("snippet", snippet)?;
        }
        Ok(self.index.similar(path.as_deref(), snippet, limit.unwrap_or(10))?)
    }

    pub fn dependencies(&self, file_path: &str, direction: Option<&str>, depth: Option<usize>) -> Result<DependenciesView> {
        let direction = Direction::parse(direction.unwrap_or("both"))?;
        let depth = depth.unwrap_or(1);
        if depth == 0 || depth > kenning_code::understand::MAX_DEPTH {
            return Err(FieldError::new("depth", format!("must be 1 to {}", kenning_code::understand::MAX_DEPTH), depth, "use 1 for direct imports, more for transitive ones").into());
        }
        let path = self.path("file_path", file_path, RootPath::Allowed)?;
        Ok(self.index.dependencies(&path, direction, depth)?)
    }

    pub fn structure(&self) -> Result<Structure> {
        Ok(self.index.structure()?)
    }

    pub fn conventions(&self) -> Result<std::collections::BTreeMap<String, Vec<String>>> {
        Ok(self.index.conventions()?)
    }

    /// The repository's README (the first one at the root), up to 64 KiB; a README that is a
    /// link out of the repository reads as empty.
    pub fn readme(&self) -> Result<String> {
        let readme = std::fs::read_dir(self.index.root())
            .map_err(|error| Error::Storage(error.to_string()))?
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.to_ascii_lowercase().starts_with("readme"))
            .min();
        Ok(readme.map(|name| self.index.confinement().read_text(&name)).unwrap_or_default())
    }

    pub fn recent_changes(&self, count: usize) -> Vec<CommitView> {
        kenning_code::git::recent(self.index.root(), count).into_iter().map(|(change, files)| CommitView { change, files }).collect()
    }

    /// Runs tests: `scope` is `all`, `file` (target: a path), `function` (target: a test
    /// name) or `affected` (changed files, or the target). A failing run is captured as an
    /// episodic memory; with `decision_id`, the run is recorded on that decision as a signal.
    pub fn run_tests(&self, request: TestRunRequest<'_>) -> Result<TestRunView> {
        let scope = match request.scope {
            "all" => Scope::All,
            "file" => Scope::File(self.path("target", required(request.target, "file")?, RootPath::Refused)?),
            "function" => Scope::Name(required(request.target, "function")?.to_owned()),
            "affected" => {
                let mut changed: Vec<&str> = request.changed_files.iter().map(String::as_str).collect();
                if let Some(target) = request.target {
                    changed.push(target);
                }
                if changed.is_empty() {
                    return Err(FieldError::new("changed_files", "is empty for scope `affected`", serde_json::Value::Null, "list the files you changed, e.g. [\"src/auth.ts\"]").into());
                }
                Scope::Affected(changed.into_iter().map(|path| self.index.confinement().resolve("changed_files", path, RootPath::Refused)).collect::<std::result::Result<_, _>>()?)
            }
            other => {
                return Err(FieldError::new("scope", "is not an allowed value", other, "use `all`, `file`, `function` or `affected`").into());
            }
        };
        let runner = request.runner.map(parse_runner).transpose()?;
        let timeout = timeout(request.timeout_seconds)?;
        // The decision is checked before the run, so a typo costs no test run.
        if let Some(id) = request.decision_id {
            self.decisions.get(id, ChainAnalysis::Omitted)?;
        }
        let result = runner::run_tests(&self.index, &self.toolchain, runner, &scope, timeout)?;
        let failed = matches!(result.status.as_str(), "failed" | "error" | "timeout");
        let memory_urn = if failed { Some(self.remember_failure(&result, request.scope)?) } else { None };
        let decision_signal = match request.decision_id {
            Some(id) if failed || result.status == "passed" => {
                let (signal_type, valence) = if failed { ("ci_failed", "negative") } else { ("ci_passed", "positive") };
                let mut metrics = std::collections::BTreeMap::new();
                metrics.insert("passed".to_owned(), serde_json::json!(result.passed));
                metrics.insert("failed".to_owned(), serde_json::json!(result.failed));
                metrics.insert("skipped".to_owned(), serde_json::json!(result.skipped));
                let input = SignalInput {
                    signal_type: signal_type.to_owned(),
                    valence: valence.to_owned(),
                    description: Some(format!("{}: {}", result.commands.join("; "), summary(&result))),
                    metrics,
                };
                self.decisions.record_signal(id, input)?;
                Some(signal_type.to_owned())
            }
            _ => None,
        };
        let view = TestRunView { result, memory_urn, decision_signal };
        let mut history = self.history.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        history.push_front(view.clone());
        history.truncate(HISTORY);
        Ok(view)
    }

    fn remember_failure(&self, result: &RunResult, scope: &str) -> Result<String> {
        let mut content = format!("`{}` ({} scope): {}.\n", result.commands.join("`; `"), scope, summary(result));
        for failure in result.failures.iter().take(REMEMBERED_FAILURES) {
            let place = match (&failure.file, failure.line) {
                (Some(file), Some(line)) => format!(" at {file}:{line}"),
                (Some(file), None) => format!(" in {file}"),
                _ => String::new(),
            };
            let message = failure.message.lines().next().unwrap_or_default();
            content.push_str(&format!("\n- {}{place}: {message}", failure.name));
        }
        let input = CaptureInput {
            title: Some(format!("{} run {}: {}", result.runner_name(), result.status, summary(result))),
            content,
            kind: Some("episodic".to_owned()),
            namespace: Some("testing".to_owned()),
            tags: vec!["test-failure".to_owned(), result.runner_name().to_owned()],
            source: Some("tool-result".to_owned()),
            ..CaptureInput::default()
        };
        Ok(self.memory.capture(input, None)?.urn)
    }

    pub fn check(&self, check: Check, files: &[String], timeout_seconds: Option<u64>) -> Result<CheckResult> {
        let files = files.iter().map(|file| self.path("files", file, RootPath::Refused)).collect::<Result<Vec<_>>>()?;
        Ok(runner::run_check(&self.index, &self.toolchain, check, &files, timeout(timeout_seconds)?)?)
    }

    /// Which tests each changed file needs: the tests to run (from the import graph and naming
    /// conventions), its definitions no test mentions, and where a new test would go.
    pub fn suggest(&self, changed_files: &[String]) -> Result<SuggestView> {
        if changed_files.is_empty() {
            return Err(FieldError::new("changed_files", "is empty", serde_json::json!([]), "list the files you changed, e.g. [\"src/auth.ts\"]").into());
        }
        let mut files = Vec::new();
        for path in changed_files {
            let path = self.path("changed_files", path, RootPath::Refused)?;
            let run = self.index.tests_for(std::slice::from_ref(&path))?;
            let tested_text: String = run.iter().flat_map(|link| self.index.test_code(&link.test_file)).collect::<Vec<_>>().join("\n");
            let untested: Vec<String> = self
                .index
                .definitions(&path)
                .into_iter()
                .filter(|name| !tested_text.contains(name.rsplit([':', '.']).next().unwrap_or(name)))
                .take(50)
                .collect();
            let suggestion = new_test_location(&path, &run, &self.index.structure()?.directories.iter().map(|dir| dir.path.clone()).collect::<Vec<_>>());
            files.push(FileSuggestion { path, run, untested, suggestion });
        }
        Ok(SuggestView { files })
    }

    /// Searches the project's documentation and its installed dependencies'.
    pub fn docs_search(&self, query: &str, scope: Option<&str>, limit: Option<usize>) -> Result<DocSearchView> {
        kenning_core::search::check_query_length("query", query)?;
        if query.trim().is_empty() {
            return Err(FieldError::new("query", "is empty", query, "say what you need, e.g. `parse JSON from a string`").into());
        }
        let scope = DocScope::parse(scope.unwrap_or("all"))?;
        Ok(self.index.search_docs(query, scope, &self.toolchain.docs, limit.unwrap_or(10))?)
    }

    /// The signature, documentation, source location and version of a named item.
    pub fn docs_get_api(&self, name: &str) -> Result<ApiView> {
        let valid = !name.trim().is_empty() && name.len() <= 200 && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ':' | '.' | '$' | '@' | '/'));
        if !valid {
            return Err(FieldError::new("name", "is not an item path", name, "name an item like `serde_json::from_str`, `requests.get` or `lodash.debounce`").into());
        }
        Ok(self.index.api(name.trim(), &self.toolchain.docs)?)
    }

    /// The project's documentation files with their first heading.
    pub fn project_docs(&self) -> Result<Vec<serde_json::Value>> {
        let files = self.index.doc_files()?;
        Ok(files
            .into_iter()
            .map(|file| {
                let text = self.index.confinement().read_text(&file);
                let title = text.lines().find(|line| line.starts_with('#')).map(|line| line.trim_start_matches('#').trim().to_owned());
                serde_json::json!({"path": file, "title": title})
            })
            .collect())
    }

    /// The project's documented modules: each source file's own documentation, first line.
    pub fn api_overview(&self) -> Result<Vec<serde_json::Value>> {
        let structure = self.index.module_docs()?;
        Ok(structure.into_iter().map(|(path, doc)| serde_json::json!({"path": path, "doc": doc})).collect())
    }

    /// The changelog: CHANGELOG.md (or HISTORY/NEWS) if there is one inside the repository, else
    /// recent commits.
    pub fn changelog(&self) -> Result<serde_json::Value> {
        let confinement = self.index.confinement();
        for name in ["CHANGELOG.md", "CHANGELOG", "HISTORY.md", "NEWS.md", "CHANGES.md"] {
            if confinement.inside(Path::new(name)).is_some_and(|path| path.is_file()) {
                return Ok(serde_json::json!({"path": name, "content": confinement.read_text(name)}));
            }
        }
        Ok(serde_json::json!({"path": null, "recent_commits": self.recent_changes(30)}))
    }

    pub fn status(&self) -> TestStatusView {
        TestStatusView {
            runners: runner::detect(self.index.root(), &self.toolchain),
            runs: self.history.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect(),
            coverage: None,
        }
    }

    pub fn recent_failures(&self) -> Vec<TestRunView> {
        self.status().runs.into_iter().filter(|run| run.result.status != "passed" && run.result.status != "no_tests").collect()
    }
}

/// The arguments of [`CodeService::run_tests`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TestRunRequest<'a> {
    pub scope: &'a str,
    pub target: Option<&'a str>,
    pub changed_files: &'a [String],
    pub runner: Option<&'a str>,
    pub timeout_seconds: Option<u64>,
    pub decision_id: Option<&'a str>,
}

fn required<'a>(target: Option<&'a str>, scope: &str) -> Result<&'a str> {
    target.ok_or_else(|| {
        FieldError::new("target", format!("is required for scope `{scope}`"), serde_json::Value::Null, if scope == "file" { "name the test file, e.g. `tests/test_auth.py`" } else { "name the test, e.g. `parses_empty_input`" }).into()
    })
}

fn timeout(seconds: Option<u64>) -> Result<Duration> {
    match seconds {
        None => Ok(DEFAULT_TIMEOUT),
        Some(0) => Err(FieldError::new("timeout_seconds", "must be at least 1", 0, "leave it out for the default of 25 seconds").into()),
        Some(seconds) if Duration::from_secs(seconds) > MAX_TIMEOUT => {
            Err(FieldError::new("timeout_seconds", format!("must be at most {}", MAX_TIMEOUT.as_secs()), seconds, "run a narrower scope (a file or a test) instead").into())
        }
        Some(seconds) => Ok(Duration::from_secs(seconds)),
    }
}

fn parse_language(text: &str) -> Result<Language> {
    Language::parse_name(text).ok_or_else(|| FieldError::new("language", "is not a language the index parses", text, "use rust, python, typescript, javascript or go").into())
}

fn parse_runner(text: &str) -> Result<RunnerKind> {
    [RunnerKind::Cargo, RunnerKind::Pytest, RunnerKind::Vitest, RunnerKind::Jest, RunnerKind::Go]
        .into_iter()
        .find(|kind| kind.name() == text)
        .ok_or_else(|| FieldError::new("runner", "is not a runner kenning knows", text, "use cargo, pytest, vitest, jest or go, or leave it out to use the detected one").into())
}

fn summary(result: &RunResult) -> String {
    format!("{} passed, {} failed, {} skipped", result.passed, result.failed, result.skipped)
}

/// Where a new test for `path` belongs, by the repository's conventions.
fn new_test_location(path: &str, existing: &[TestLink], directories: &[String]) -> String {
    if let Some(link) = existing.iter().find(|link| link.reason != "imports") {
        return format!("add cases to {}", link.test_file);
    }
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let (stem, extension) = name.rsplit_once('.').unwrap_or((name, ""));
    let beside = |file: String| if dir.is_empty() { file } else { format!("{dir}/{file}") };
    match Language::of(path) {
        Some(Language::Rust) => format!("add a `#[cfg(test)] mod tests` to {path}, or an integration test in tests/{stem}.rs"),
        Some(Language::Python) if directories.iter().any(|dir| dir == "tests") => format!("create tests/test_{stem}.py"),
        Some(Language::Python) => format!("create {}", beside(format!("test_{stem}.py"))),
        Some(Language::TypeScript | Language::JavaScript) => format!("create {}", beside(format!("{stem}.test.{extension}"))),
        Some(Language::Go) => format!("create {}", beside(format!("{stem}_test.go"))),
        None => "not a source file kenning parses".to_owned(),
    }
}
