//! The `test` toolset: run the repository's tests, linter and type checker as detected, with
//! results parsed into passes and failures. A failing run is remembered; a run for a decision
//! is recorded on it. Off by default; `test_run`, `test_lint` and `test_typecheck` run the
//! project's own code, so `--read-only` drops them.

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_code::runner::{Check, CheckResult};
use kenning_engine::code::{SuggestView, TestRunRequest, TestRunView};

use crate::KenningServer;
use crate::error::{ToolError, blocking};
use crate::params::{Strict, input_schema};

/// The tools that run the project's code, whose calls may last as long as the run they ask for
/// (see `crate::error::RUN_DEADLINE`).
pub(crate) const RUNS_PROJECT_CODE: &[&str] = &["test_run", "test_lint", "test_typecheck"];

#[tool_router(router = test_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "test_run",
        title = "Run tests",
        description = "Run the repository's tests, which executes its code on this machine (all, a file, a test by name, or those affected by changed files), and get passes and failures with file, line and message.",
        input_schema = input_schema::<TestRunArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn test_run(&self, Strict(args): Strict<TestRunArgs>) -> Result<Json<TestRunView>, ToolError> {
        let code = self.code()?;
        blocking(move || {
            code.run_tests(TestRunRequest {
                scope: &args.scope,
                target: args.target.as_deref(),
                changed_files: &args.changed_files.unwrap_or_default(),
                runner: args.runner.as_deref(),
                timeout_seconds: args.timeout_seconds,
                decision_id: args.decision_id.as_deref(),
            })
        })
        .await
        .map(Json)
    }

    #[tool(
        name = "test_lint",
        title = "Lint",
        description = "Run the repository's linter (clippy, ruff or flake8, eslint, go vet), which can execute the repository's own code and plugins, and get its problems by file and line.",
        input_schema = input_schema::<LintArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    async fn test_lint(&self, Strict(args): Strict<LintArgs>) -> Result<Json<CheckResult>, ToolError> {
        let code = self.code()?;
        let check = Check::Lint { fix: args.fix.unwrap_or(false) };
        blocking(move || code.check(check, &args.files.unwrap_or_default(), args.timeout_seconds)).await.map(Json)
    }

    #[tool(
        name = "test_typecheck",
        title = "Type check",
        description = "Run the repository's type checker (cargo check, mypy, tsc, go build), which can execute the repository's own code such as build scripts, and get its errors by file and line.",
        input_schema = input_schema::<TypecheckArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    async fn test_typecheck(&self, Strict(args): Strict<TypecheckArgs>) -> Result<Json<CheckResult>, ToolError> {
        let code = self.code()?;
        blocking(move || code.check(Check::Typecheck, &args.files.unwrap_or_default(), args.timeout_seconds)).await.map(Json)
    }

    #[tool(
        name = "test_suggest",
        title = "Suggest tests",
        description = "For changed files, list the tests to run, the definitions no test mentions, and where a new test belongs.",
        input_schema = input_schema::<SuggestArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn test_suggest(&self, Strict(args): Strict<SuggestArgs>) -> Result<Json<SuggestView>, ToolError> {
        let code = self.code()?;
        blocking(move || code.suggest(&args.changed_files)).await.map(Json)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRunArgs {
    /// `all`, `file` (target: a test file), `function` (target: a test name) or `affected` (changed_files).
    pub scope: String,
    /// The file or test name for `file` and `function`.
    pub target: Option<String>,
    /// The files you changed, for `affected`.
    pub changed_files: Option<Vec<String>>,
    /// cargo, pytest, vitest, jest or go; default the first detected.
    pub runner: Option<String>,
    /// Stop the run after this many seconds, 1 to 600; default 25.
    pub timeout_seconds: Option<u64>,
    /// The decision this run checks: records ci_passed or ci_failed on it.
    pub decision_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LintArgs {
    /// Files to lint; default the whole project.
    pub files: Option<Vec<String>>,
    /// Let the linter fix what it can (changes files).
    pub fix: Option<bool>,
    /// Stop after this many seconds, 1 to 600; default 25.
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypecheckArgs {
    /// Files whose errors to report; default the whole project.
    pub files: Option<Vec<String>>,
    /// Stop after this many seconds, 1 to 600; default 25.
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SuggestArgs {
    /// The files you changed, relative to the repository root.
    pub changed_files: Vec<String>,
}
