//! Linters and type checkers: which tool runs for a check, and reading the problems it reports.

use super::parse::location;
use super::*;

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
pub(super) fn parse_problems(text: &str) -> Vec<Failure> {
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
