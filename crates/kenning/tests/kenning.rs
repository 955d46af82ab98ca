//! End-to-end tests of the `kenning` binary: CLI scenarios in throw-away stores, and the MCP
//! server driven by the official Python SDK (`tests/e2e` at the workspace root).
//!
//! Every command runs with its own user data folder, an empty config folder and, for project
//! scenarios, a real git repository whose `origin` remote names the project `widget-service`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod kenning {
    mod hook_socket;
    mod stdio;
    mod trust;
}

const BIN: &str = env!("CARGO_BIN_EXE_kenning");
const REMOTE: &str = "https://github.com/acme/widget-service.git";
const PROJECT: &str = "project:widget-service";

/// A temporary home for one scenario: data and config folders, a git repository and a folder
/// outside any repository.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let sandbox = Sandbox { dir: tempfile::tempdir().expect("temp dir") };
        for folder in ["data", "config", "repo", "outside"] {
            std::fs::create_dir_all(sandbox.path(folder)).expect("create folder");
        }
        sandbox.git(&["init", "-q"]);
        sandbox.git(&["remote", "add", "origin", REMOTE]);
        sandbox
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn repo(&self) -> PathBuf {
        self.path("repo")
    }

    fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .arg("-C")
            .arg(self.repo())
            .args(args)
            .env("GIT_CEILING_DIRECTORIES", self.dir.path())
            .output()
            .expect("git must be installed to run these tests");
        assert!(output.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).expect("utf-8")
    }

    /// `kenning ARGS` in `cwd`, isolated from the caller's KENNING_* and GIT_* settings and
    /// runtime folder (so a server's hook socket goes in the sandbox's data folder); git
    /// discovery stops at the sandbox so `outside` is never inside a repository.
    fn command(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command.args(args).current_dir(cwd).stdin(Stdio::null());
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("KENNING_") || name.starts_with("GIT_") || name == "XDG_RUNTIME_DIR" {
                command.env_remove(name);
            }
        }
        command
            .env("KENNING_DATA_DIR", self.path("data"))
            .env("KENNING_CONFIG_DIR", self.path("config"))
            .env("CLAUDE_CONFIG_DIR", self.path("claude"))
            .env("GIT_CEILING_DIRECTORIES", self.dir.path());
        command
    }

    fn run(&self, cwd: &Path, args: &[&str]) -> Output {
        self.command(cwd, args).output().expect("run kenning")
    }

    /// Runs `kenning --json ARGS` in the repository, which must succeed, and parses stdout.
    fn json(&self, args: &[&str]) -> Value {
        self.json_in(&self.repo(), args)
    }

    fn json_in(&self, cwd: &Path, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let output = self.run(cwd, &all);
        assert!(
            output.status.success(),
            "kenning {all:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("kenning {all:?} printed no JSON ({error}):\n{}", String::from_utf8_lossy(&output.stdout)))
    }

    /// Runs `kenning ARGS` in the repository, which must fail; returns stderr.
    fn failure(&self, args: &[&str]) -> String {
        let output = self.run(&self.repo(), args);
        assert!(!output.status.success(), "kenning {args:?} should have failed");
        assert!(output.stdout.is_empty(), "a failed command printed to stdout: {}", String::from_utf8_lossy(&output.stdout));
        String::from_utf8(output.stderr).expect("utf-8")
    }

    fn export(&self) -> String {
        let output = self.run(&self.repo(), &["export"]);
        assert!(output.status.success(), "export failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).expect("utf-8")
    }
}

fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("no string at {pointer} in {value:#}"))
}

fn recalled_urns(page: &Value) -> Vec<String> {
    page["results"].as_array().expect("results").iter().map(|hit| text(hit, "/urn").to_owned()).collect()
}

#[test]
fn cli_memory_lifecycle() {
    let sandbox = Sandbox::new();
    let content = "We chose SQLite with WAL mode because the store must work offline.";
    let first = sandbox.json(&["capture", content, "--namespace", "decisions", "--tag", "storage"]);
    let urn = text(&first, "/urn").to_owned();
    assert!(urn.starts_with(&format!("kenning://{PROJECT}/decisions/")), "{urn}");
    assert_eq!(first["created"], true);
    let again = sandbox.json(&["capture", content, "--namespace", "decisions", "--tag", "storage"]);
    assert_eq!(again["created"], false);
    assert_eq!(again["urn"], urn.as_str());

    let user = sandbox.json(&["capture", "The user prefers small pull requests.", "--domain", "user", "-n", "preferences"]);
    assert!(text(&user, "/urn").starts_with("kenning://user/preferences/"));
    sandbox.json(&["capture", "Deploys run from the release branch every Tuesday."]);
    sandbox.json(&["capture", "The frontend is written in TypeScript.", "--kind", "semantic"]);

    let page = sandbox.json(&["recall", "why SQLite WAL offline"]);
    assert_eq!(recalled_urns(&page)[0], urn);
    assert_eq!(page["mode"], "hybrid");
    let filtered = sandbox.json(&["recall", "pull requests", "--domain", "user"]);
    assert_eq!(recalled_urns(&filtered), vec![text(&user, "/urn").to_owned()]);
    let by_kind = sandbox.json(&["recall", "frontend TypeScript SQLite", "--kind", "semantic"]);
    assert!(by_kind["results"].as_array().unwrap().iter().all(|hit| hit["kind"] == "semantic"), "{by_kind:#}");

    let got = sandbox.json(&["get", &urn]);
    assert_eq!(got["content"], content);
    assert_eq!(got["tags"], serde_json::json!(["storage"]));
    let count = got["access_count"].as_u64().unwrap();
    assert_eq!(sandbox.json(&["get", &urn])["access_count"].as_u64().unwrap(), count + 1);

    let updated = sandbox.json(&["update", &urn, "--reason", "added backups", "--content", "SQLite with WAL; backups nightly."]);
    assert_eq!(updated["version"], 2);
    assert_eq!(updated["changed"], true);
    let history = sandbox.json(&["history", &urn]);
    assert_eq!(history["current"]["content"], "SQLite with WAL; backups nightly.");
    assert_eq!(history["versions"].as_array().unwrap().len(), 1);
    assert_eq!(history["versions"][0]["reason"], "added backups");
    assert_eq!(history["versions"][0]["memory"]["content"], content);

    let forgotten = sandbox.json(&["forget", &urn, "--reason", "moved to the wiki"]);
    assert_eq!(forgotten["status"], "forgotten");
    assert!(!recalled_urns(&sandbox.json(&["recall", "SQLite WAL backups"])).contains(&urn));
    assert_eq!(sandbox.json(&["get", &urn])["status"], "forgotten");
    let restored = sandbox.json(&["restore", &urn, "--reason", "the wiki is gone"]);
    assert_eq!(restored["status"], "active");
    assert_eq!(recalled_urns(&sandbox.json(&["recall", "SQLite WAL backups"]))[0], urn);

    let status = sandbox.json(&["status"]);
    assert_eq!(status["total_memories"], 4);
    assert_eq!(status["default_domain"], PROJECT);
    let project = status["domains"].as_array().unwrap().iter().find(|d| d["domain"] == PROJECT).expect("project domain");
    assert_eq!(project["by_namespace"]["decisions"], 1);
    assert_eq!(project["total"], 3);

    // Human output is not JSON but names what happened.
    let output = sandbox.run(&sandbox.repo(), &["status"]);
    let human = String::from_utf8(output.stdout).unwrap();
    assert!(human.contains(PROJECT) && human.contains("decisions"), "{human}");
}

/// With no configuration and nothing downloaded, recall finds a memory by meaning: the built-in
/// static model is the default embedder. `KENNING_EMBEDDER=none` still gives full-text search.
#[test]
fn fresh_install_recalls_by_meaning() {
    let sandbox = Sandbox::new();
    let unrelated = [
        "Makefiles must be indented with tabs, not spaces.",
        "The billing service stores invoices in Postgres.",
        "Release notes are written in Markdown and published on Fridays.",
        "The CI pipeline caches cargo builds between runs.",
        "Our office coffee machine is descaled every month.",
    ];
    for text in &unrelated[..2] {
        sandbox.json(&["capture", text]);
    }
    let target = sandbox.json(&["capture", "The login page times out after thirty seconds.", "-n", "learnings"]);
    assert_eq!(target["embedded"], true, "{target:#}");
    for text in &unrelated[2..] {
        sandbox.json(&["capture", text]);
    }

    // The query shares no word with the memory it should find.
    let page = sandbox.json(&["recall", "authentication screen slow"]);
    assert_eq!(page["mode"], "hybrid");
    assert_eq!(recalled_urns(&page).first(), Some(&text(&target, "/urn").to_owned()), "{page:#}");

    let status = sandbox.json(&["status"]);
    assert_eq!(status["search_mode"], "hybrid");
    let model = text(&status, "/embedder/model");
    assert!(model.starts_with("all-MiniLM-L6-v2-static-"), "{model}");
    let project = status["domains"].as_array().unwrap().iter().find(|d| d["domain"] == PROJECT).expect("project domain");
    assert_eq!(project["index"]["missing_vectors"], 0);
    let human = String::from_utf8(sandbox.run(&sandbox.repo(), &["status"]).stdout).unwrap();
    assert!(human.contains(model), "{human}");

    let output = sandbox.command(&sandbox.repo(), &["--json", "recall", "authentication screen slow"]).env("KENNING_EMBEDDER", "none").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text_only: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(text_only["mode"], "text");
    assert!(recalled_urns(&text_only).is_empty(), "full-text search has no word to match: {text_only:#}");
}

#[test]
fn cli_export_then_import_into_a_fresh_store_is_lossless() {
    let source = Sandbox::new();
    let decision = source.json(&[
        "capture",
        "Timestamps are stored in UTC.\n\nLocal time only at the edges.",
        "--title",
        "UTC timestamps",
        "-n",
        "decisions",
        "--kind",
        "semantic",
        "-t",
        "time",
        "-t",
        "api",
        "--category",
        "architecture",
        "--confidence",
        "0.8",
        "--salience",
        "0.9",
        "--event-time",
        "2024-05-01",
        "--meta",
        "ticket=ENG-42",
    ]);
    let decision = text(&decision, "/urn").to_owned();
    let linked = source.json(&["capture", "Parsing local times caused the March outage.", "-n", "learnings", "--link", &decision]);
    let linked = text(&linked, "/urn").to_owned();
    let user = source.json(&["capture", "The user reads dates as YYYY-MM-DD.", "--domain", "user"]);
    let user = text(&user, "/urn").to_owned();
    source.json(&["update", &decision, "--reason", "clarified", "--content", "All timestamps are stored in UTC."]);
    source.json(&["update", &decision, "--reason", "tags", "--tag", "time"]);
    source.json(&["forget", &linked, "--reason", "written up elsewhere"]);
    source.json(&["get", &user]);

    let exported = source.export();
    assert_eq!(exported.lines().count(), 3, "{exported}");
    let decision_line: Value = exported
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("export lines are JSON"))
        .find(|line| decision.ends_with(text(line, "/memory/id")))
        .expect("the decision is exported");
    let reasons: Vec<&str> = decision_line["history"].as_array().unwrap().iter().map(|v| text(v, "/reason")).collect();
    assert_eq!(reasons.len(), 2, "{decision_line:#}");
    assert!(reasons.contains(&"clarified") && reasons.contains(&"tags"));

    let file = source.path("export.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let target = Sandbox::new();
    let report = target.json(&["import", file.to_str().unwrap()]);
    assert_eq!(report["read"], 3);
    assert_eq!(report["written"], 3);
    assert_eq!(target.export(), exported, "export → import → export changed the data");

    // Importing again changes nothing.
    let report = target.json(&["import", file.to_str().unwrap()]);
    assert_eq!(report["written"], 0);
    assert_eq!(report["skipped"], 3);
    assert_eq!(target.export(), exported);

    // The imported store answers like the original.
    assert_eq!(target.json(&["get", &linked])["status"], "forgotten");
    assert_eq!(target.json(&["history", &decision])["versions"].as_array().unwrap().len(), 2);
    assert_eq!(recalled_urns(&target.json(&["recall", "UTC timestamps"]))[0], decision);
}

#[test]
fn cli_invalid_input_names_field_problem_value_and_suggestion() {
    let sandbox = Sandbox::new();
    let stderr = sandbox.failure(&["capture", "Too sure.", "--confidence", "1.5"]);
    assert!(stderr.contains("`confidence`"), "{stderr}");
    assert!(stderr.contains("between 0 and 1"), "{stderr}");
    assert!(stderr.contains("received: 1.5"), "{stderr}");
    assert!(stderr.contains("suggestion:"), "{stderr}");

    let stderr = sandbox.failure(&["get", "not-a-urn"]);
    assert!(stderr.contains("`urn`") && stderr.contains("received: \"not-a-urn\"") && stderr.contains("suggestion:"), "{stderr}");

    let stderr = sandbox.failure(&["recall", "anything", "--limit", "0"]);
    assert!(stderr.contains("`limit`") && stderr.contains("received: 0") && stderr.contains("suggestion:"), "{stderr}");

    let stderr = sandbox.failure(&["capture", "Unknown kind.", "--kind", "episodicc"]);
    assert!(stderr.contains("`kind`") && stderr.contains("episodicc") && stderr.contains("suggestion:"), "{stderr}");

    let stderr = sandbox.failure(&["get", &format!("kenning://{PROJECT}/decisions/01jzzzzzzzzzzzzzzzzzzzzzzz")]);
    assert!(stderr.contains("no memory"), "{stderr}");

    let stderr = sandbox.failure(&["serve", "--toolsets", "bogus"]);
    assert!(stderr.contains("`toolsets`") && stderr.contains("bogus") && stderr.contains("memory"), "{stderr}");

    // Nothing was stored by the failed commands.
    assert_eq!(sandbox.json(&["status"])["total_memories"], 0);
}

#[test]
fn project_domain_exists_only_inside_a_git_repository() {
    let sandbox = Sandbox::new();
    let domains = |status: &Value| -> Vec<String> {
        status["domains"].as_array().unwrap().iter().map(|d| text(d, "/domain").to_owned()).collect()
    };

    let inside = sandbox.json(&["status"]);
    assert_eq!(inside["default_domain"], PROJECT);
    assert_eq!(domains(&inside), vec![PROJECT.to_owned(), "user".to_owned()]);

    let nested = sandbox.repo().join("src").join("deep");
    std::fs::create_dir_all(&nested).unwrap();
    let captured = sandbox.json_in(&nested, &["capture", "Captured from a subfolder of the repository."]);
    assert!(text(&captured, "/urn").starts_with(&format!("kenning://{PROJECT}/")));
    // The project store lives inside .git, so the work tree stays clean.
    assert!(sandbox.repo().join(".git/kenning/project.db").is_file());
    std::fs::remove_dir_all(sandbox.repo().join("src")).unwrap();
    assert_eq!(sandbox.git(&["status", "--porcelain", "--untracked-files=all"]), "");

    let outside_dir = sandbox.path("outside");
    let outside = sandbox.json_in(&outside_dir, &["status"]);
    assert_eq!(outside["default_domain"], "user");
    assert_eq!(domains(&outside), vec!["user".to_owned()]);
    let captured = sandbox.json_in(&outside_dir, &["capture", "Captured outside any repository."]);
    assert!(text(&captured, "/urn").starts_with("kenning://user/"));
    // The project's memories are not visible from outside; the user's are visible from inside.
    assert!(recalled_urns(&sandbox.json_in(&outside_dir, &["recall", "captured subfolder repository"]))
        .iter()
        .all(|urn| urn.starts_with("kenning://user/")));
    assert_eq!(sandbox.json(&["status"])["total_memories"], 2);

    let output = sandbox.command(&sandbox.repo(), &["--json", "status"]).env("KENNING_PROJECT", "false").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let disabled: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(disabled["default_domain"], "user");
    assert_eq!(domains(&disabled), vec!["user".to_owned()]);
}

#[test]
fn recall_by_branch_and_by_file_from_any_folder_of_the_repository() {
    let sandbox = Sandbox::new();
    sandbox.git(&["symbolic-ref", "HEAD", "refs/heads/feature"]);
    let retry = text(&sandbox.json(&["capture", "The retry loop in src/net/retry.rs backs off exponentially."]), "/urn").to_owned();
    sandbox.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    let timeouts = text(&sandbox.json(&["capture", "Network timeouts are set in config/net.toml, not in code."]), "/urn").to_owned();

    assert_eq!(recalled_urns(&sandbox.json(&["recall", "retry network timeouts", "--branch", "feature"])), [retry.clone()]);
    assert_eq!(recalled_urns(&sandbox.json(&["recall", "retry network timeouts", "--branch", "main"])), [timeouts.clone()]);
    // A path is taken from the current folder, and need not exist any more.
    let net = sandbox.repo().join("src/net");
    std::fs::create_dir_all(&net).unwrap();
    assert_eq!(recalled_urns(&sandbox.json_in(&net, &["recall", "retry network timeouts", "--file", "retry.rs"])), [retry.clone()]);
    assert_eq!(recalled_urns(&sandbox.json_in(&net, &["recall", "retry network timeouts", "--file", "../../config"])), [timeouts]);
    assert_eq!(recalled_urns(&sandbox.json(&["recall", "retry network timeouts", "--file", "src"])), [retry]);

    let stderr = sandbox.failure(&["recall", "retry", "--file", "../outside/notes.md"]);
    assert!(stderr.contains("`file`") && stderr.contains("outside the repository") && stderr.contains("suggestion:"), "{stderr}");
}

#[test]
fn a_capture_contradicting_two_memories_marks_both_in_one_notes_write() {
    let sandbox = Sandbox::new();
    let older: Vec<String> = ["8080", "9090"]
        .iter()
        .map(|port| text(&sandbox.json(&["capture", &format!("The billing service listens on port {port}.")]), "/urn").to_owned())
        .collect();
    let writes = || sandbox.git(&["rev-list", "--count", "refs/notes/kenning"]).trim().parse::<u32>().unwrap();
    let before = writes();
    let captured = sandbox.json(&["capture", "The billing service listens on port 7070."]);
    let contradicted: Vec<&str> = captured["contradictions"].as_array().unwrap().iter().map(|found| text(found, "/with")).collect();
    assert_eq!(contradicted, older, "{captured}");
    // The capture, then both older memories marked superseded together: two notes commits (and
    // two journal flushes), where a write per contradiction made three.
    assert_eq!(writes() - before, 2);
    for urn in &older {
        let memory = sandbox.json(&["get", urn]);
        let links = memory["links"].as_array().unwrap();
        assert!(links.iter().any(|link| link["relation"] == "superseded-by" && link["target"] == captured["urn"]), "{memory}");
    }
}

/// The MCP server (stdio and streamable HTTP) against the official Python SDK: see tests/e2e.
#[test]
fn python_mcp_sdk_end_to_end() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root");
    // scripts/test points KENNING_TEST_PYTHON at its virtual environment's interpreter, which has
    // the pinned SDK and pytest of tests/e2e/requirements.txt.
    let Some(python) = kenning_conformance::services::python(&["mcp", "pytest"]) else { return };

    // A folder of its own for pytest's temporary files: runs started at the same time (two
    // checkouts tested at once) would otherwise race for the same numbered folders.
    let temporary = tempfile::tempdir().expect("temp dir");
    let output = Command::new(&python)
        .args(["-m", "pytest", "tests/e2e", "-q", "-rxs", "-p", "no:cacheprovider", "--basetemp"])
        .arg(temporary.path())
        .current_dir(&workspace)
        .env("KENNING_BIN", BIN)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run pytest");
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the Python end-to-end tests failed ({}):\n{report}", output.status);
    println!("{report}");
    // Tests skipped for a missing service (pytest's `-rs` summary) say so past the harness's capture.
    for skipped in report.lines().filter(|line| line.starts_with("SKIPPED")) {
        let _ = writeln!(std::io::stderr(), "{skipped}");
    }
}

/// Runs `kenning hook EVENT` in the repository with `input` on stdin.
fn hook(sandbox: &Sandbox, event: &str, input: &[u8]) -> Output {
    hook_with(sandbox, &["hook", event], input)
}

/// Runs `kenning ARGS` in the repository with `input` on stdin.
fn hook_with(sandbox: &Sandbox, args: &[&str], input: &[u8]) -> Output {
    let mut child = sandbox
        .command(&sandbox.repo(), args)
        .env("KENNING_EMBEDDER", "none")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kenning hook");
    // A hook may stop reading early; a broken pipe here is not the test's concern.
    let _ = child.stdin.take().expect("stdin").write_all(input);
    child.wait_with_output().expect("wait for kenning hook")
}

#[test]
fn hooks_answer_claude_code_and_never_fail_on_garbage() {
    let sandbox = Sandbox::new();
    let capture = sandbox.run(&sandbox.repo(), &["capture", "Blocked: the staging certificate expired", "--namespace", "blockers"]);
    assert!(capture.status.success(), "{}", String::from_utf8_lossy(&capture.stderr));
    let input = serde_json::json!({
        "session_id": "s1", "transcript_path": "", "cwd": sandbox.repo(), "hook_event_name": "SessionStart", "source": "startup"
    });
    let answer = hook(&sandbox, "session-start", input.to_string().as_bytes());
    assert!(answer.status.success());
    let output: Value = serde_json::from_slice(&answer.stdout).expect("the answer is JSON");
    let context = text(&output, "/hookSpecificOutput/additionalContext");
    assert!(context.contains("staging certificate") && context.contains("<project>widget-service</project>"), "{context}");
    assert_eq!(text(&output, "/hookSpecificOutput/hookEventName"), "SessionStart");

    let garbage: [(&str, &[u8]); 6] = [
        ("session-start", b"{not json"),
        ("user-prompt", b"\xff\xfe\x00binary"),
        ("post-tool", b"[1, 2, 3]"),
        ("stop", br#"{"transcript_path": "/nonexistent/t.jsonl"}"#),
        ("pre-compact", b""),
        ("no-such-event", b"{}"),
    ];
    for (event, input) in garbage {
        let answer = hook(&sandbox, event, input);
        assert_eq!(answer.status.code(), Some(0), "kenning hook {event} failed on garbage");
        assert!(answer.stdout.is_empty(), "kenning hook {event} printed {:?}", String::from_utf8_lossy(&answer.stdout));
    }
    let log = std::fs::read_to_string(sandbox.path("data").join("hooks.log")).expect("failures are logged");
    assert_eq!(log.lines().count(), 6, "one line per failure: {log}");
    assert!(log.contains("no-such-event") && log.contains("/nonexistent/t.jsonl"), "{log}");
}

#[test]
fn a_hook_argument_error_does_not_block_and_is_logged() {
    let sandbox = Sandbox::new();
    let capture = sandbox.run(&sandbox.repo(), &["capture", "Blocked: the staging certificate expired", "--namespace", "blockers"]);
    assert!(capture.status.success(), "{}", String::from_utf8_lossy(&capture.stderr));
    let input = serde_json::json!({"session_id": "s1", "cwd": sandbox.repo(), "hook_event_name": "SessionStart", "source": "startup"});
    // A flag from a newer kenning named in a shared settings file, a missing event, a budget of 0.
    let cases: [&[&str]; 4] = [
        &["hook", "session-start", "--context-style", "compact"],
        &["hook"],
        &["hook", "--max-tokens", "many", "user-prompt"],
        &["hook", "session-start", "--max-tokens", "0"],
    ];
    for args in cases {
        let answer = hook_with(&sandbox, args, input.to_string().as_bytes());
        assert_eq!(answer.status.code(), Some(0), "kenning {args:?} must not block: {}", String::from_utf8_lossy(&answer.stderr));
        if args.contains(&"session-start") {
            let output: Value = serde_json::from_slice(&answer.stdout).expect("the event is still answered");
            assert!(text(&output, "/hookSpecificOutput/additionalContext").contains("staging certificate"));
        } else {
            assert!(answer.stdout.is_empty(), "{args:?} printed {:?}", String::from_utf8_lossy(&answer.stdout));
        }
    }
    let log = std::fs::read_to_string(sandbox.path("data").join("hooks.log")).expect("argument errors are logged");
    assert_eq!(log.lines().count(), 4, "{log}");
    assert!(log.contains("--context-style") && log.contains("answered with the default settings"), "{log}");
    assert!(log.contains("`--max-tokens 0` leaves no room") && log.contains("user-prompt 600"), "{log}");
    let doctor = sandbox.run(&sandbox.repo(), &["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("4 hook problem(s) logged"), "{report}");
    let help = sandbox.run(&sandbox.repo(), &["hook", "--help"]);
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("session-end"), "help is still help");
}

#[test]
fn the_hook_log_keeps_its_newest_half_when_it_grows_too_large() {
    let sandbox = Sandbox::new();
    let old_line = "2026-01-01T00:00:00+00:00 stop: an old problem\n";
    std::fs::write(sandbox.path("data").join("hooks.log"), old_line.repeat(600 * 1024 / old_line.len())).unwrap();
    let answer = hook(&sandbox, "no-such-event", b"{}");
    assert_eq!(answer.status.code(), Some(0));
    let log = std::fs::read_to_string(sandbox.path("data").join("hooks.log")).unwrap();
    assert!(log.len() < 512 * 1024 && log.starts_with("2026-01-01"), "{} bytes", log.len());
    assert!(log.lines().last().unwrap().contains("no-such-event"), "the newest line is kept");
}

#[test]
fn init_edits_the_users_files_in_place_and_a_second_run_changes_nothing() {
    let sandbox = Sandbox::new();
    let repo = sandbox.repo();
    let mcp = "{\n    \"mcpServers\": {\n        \"zeta\": {\"command\": \"zeta-mcp\", \"args\": [\"--stdio\"]},\n        \"alpha\": {\"command\": \"alpha-mcp\"}\n    },\n    \"x-team-note\": \"keep me\"\n}\n";
    std::fs::write(repo.join(".mcp.json"), mcp).unwrap();
    std::fs::create_dir_all(repo.join(".claude")).unwrap();
    let settings = "{\n\t\"permissions\": {\"allow\": [\"Bash(cargo test:*)\"]},\n\t\"hooks\": {\n\t\t\"PostToolUse\": [{\"matcher\": \"Edit|Write\", \"hooks\": [{\"type\": \"command\", \"command\": \"cargo fmt\"}]}],\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}]\n\t}\n}\n";
    std::fs::write(repo.join(".claude/settings.json"), settings).unwrap();

    let dry = sandbox.run(&repo, &["init", "--dry-run"]);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    let shown = String::from_utf8_lossy(&dry.stdout);
    assert!(shown.contains("would update") && shown.contains("  + ") && shown.contains("hook session-start"), "{shown}");
    assert_eq!(std::fs::read_to_string(repo.join(".mcp.json")).unwrap(), mcp, "--dry-run wrote");

    let first = sandbox.run(&repo, &["init"]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let mcp_after = std::fs::read_to_string(repo.join(".mcp.json")).unwrap();
    // Key order, indentation and unknown keys as they were; kenning appended after the rest.
    assert!(mcp_after.starts_with("{\n    \"mcpServers\": {\n        \"zeta\": {\"command\": \"zeta-mcp\", \"args\": [\"--stdio\"]},\n        \"alpha\": {\"command\": \"alpha-mcp\"},\n        \"kenning\": {"), "{mcp_after}");
    assert!(mcp_after.ends_with("    },\n    \"x-team-note\": \"keep me\"\n}\n"), "{mcp_after}");
    let parsed: Value = serde_json::from_str(&mcp_after).unwrap();
    assert_eq!(parsed["mcpServers"]["kenning"]["args"], serde_json::json!(["serve"]));
    let settings_after = std::fs::read_to_string(repo.join(".claude/settings.json")).unwrap();
    assert!(settings_after.starts_with("{\n\t\"permissions\": {\"allow\": [\"Bash(cargo test:*)\"]},\n\t\"hooks\": {\n\t\t\"PostToolUse\": [{\"matcher\": \"Edit|Write\", \"hooks\": [{\"type\": \"command\", \"command\": \"cargo fmt\"}]}],\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}"), "{settings_after}");
    let parsed: Value = serde_json::from_str(&settings_after).unwrap();
    for event in ["SessionStart", "UserPromptSubmit", "PostToolUseFailure", "PreCompact", "Stop", "SessionEnd"] {
        assert!(parsed["hooks"][event].to_string().contains(" hook "), "{event} has no kenning hook");
    }
    assert_eq!(parsed["hooks"]["PostToolUse"].as_array().unwrap().len(), 1, "kenning adds nothing to PostToolUse");
    assert_eq!(parsed["hooks"]["SessionStart"][0]["matcher"], "startup|resume|compact");
    assert_eq!(parsed["hooks"]["PostToolUseFailure"][0]["matcher"], "Bash");

    let before = (std::fs::read(repo.join(".mcp.json")).unwrap(), std::fs::read(repo.join(".claude/settings.json")).unwrap());
    let second = sandbox.json_in(&repo, &["init"]);
    assert!(second.as_array().unwrap().iter().all(|change| change["action"] == "unchanged"), "{second}");
    let after = (std::fs::read(repo.join(".mcp.json")).unwrap(), std::fs::read(repo.join(".claude/settings.json")).unwrap());
    assert_eq!(before, after, "a second run changed a file");

    // The approval as Claude Code records it: the folder trusted and the server enabled, in the
    // user's ~/.claude.json.
    let home = sandbox.path("outside");
    let doctor = |sandbox: &Sandbox| {
        let output = sandbox.command(&repo, &["doctor"]).env("HOME", &home).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let report = doctor(&sandbox);
    assert!(report.contains("ok   hooks") && report.contains("PostToolUseFailure") && report.contains("SessionEnd"), "{report}");
    assert!(report.contains("warn mcp") && report.contains("not yet approved"), "{report}");
    std::fs::write(repo.join(".claude/settings.local.json"), r#"{"enabledMcpjsonServers": ["kenning"]}"#).unwrap();
    assert!(doctor(&sandbox).contains("the folder is not trusted yet"));
    let root = repo.canonicalize().unwrap();
    let claude_json = serde_json::json!({"projects": {root.to_string_lossy(): {"hasTrustDialogAccepted": true}}});
    std::fs::write(home.join(".claude.json"), claude_json.to_string()).unwrap();
    let report = doctor(&sandbox);
    assert!(report.contains("ok   mcp") && report.contains("and approved"), "{report}");
}

#[test]
fn init_writes_nothing_when_a_file_it_touches_is_invalid() {
    let sandbox = Sandbox::new();
    let repo = sandbox.repo();
    std::fs::create_dir_all(repo.join(".claude")).unwrap();
    std::fs::write(repo.join(".claude/settings.json"), "{\"hooks\": {,}").unwrap();
    let output = sandbox.run(&repo, &["init"]);
    assert_eq!(output.status.code(), Some(1));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("settings.json") && error.contains("not valid JSON") && error.contains("changed nothing"), "{error}");
    assert!(!repo.join(".mcp.json").exists(), "half registered: .mcp.json was written");
    let leftovers: Vec<_> = std::fs::read_dir(repo.join(".claude")).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

#[test]
fn init_into_a_closed_pipe_still_registers_and_exits_cleanly() {
    let sandbox = Sandbox::new();
    let mut child = sandbox.command(&sandbox.repo(), &["init"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(sandbox.repo().join(".mcp.json").exists() && sandbox.repo().join(".claude/settings.json").exists());
}

#[test]
fn init_registers_with_each_client_in_its_own_format() {
    let sandbox = Sandbox::new();
    let repo = sandbox.repo();
    let home = sandbox.path("outside");
    std::fs::create_dir_all(repo.join(".codex")).unwrap();
    let codex = "# team settings\nmodel = \"o4-mini\"  # cheap\n\n[mcp_servers.github]\ncommand = \"gh-mcp\"\n";
    std::fs::write(repo.join(".codex/config.toml"), codex).unwrap();
    std::fs::create_dir_all(repo.join(".vscode")).unwrap();
    std::fs::write(repo.join(".vscode/mcp.json"), "{\n  // shared servers\n  \"servers\": {},\n}\n").unwrap();
    let init = sandbox
        .command(&repo, &["--json", "init", "--client", "codex,gemini,cursor,vscode,zed,claude-desktop,windsurf"])
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let changes: Value = serde_json::from_slice(&init.stdout).unwrap();
    let clients: Vec<&str> = changes.as_array().unwrap().iter().map(|change| change["client"].as_str().unwrap()).collect();
    assert_eq!(clients, ["codex", "codex", "gemini", "cursor", "vscode", "zed", "claude-desktop", "windsurf"]);

    let toml = std::fs::read_to_string(repo.join(".codex/config.toml")).unwrap();
    assert!(toml.starts_with(codex) && toml.contains("[mcp_servers.kenning]\ncommand = "), "{toml}");
    let codex_hooks: Value = serde_json::from_str(&std::fs::read_to_string(repo.join(".codex/hooks.json")).unwrap()).unwrap();
    assert!(codex_hooks["hooks"]["Stop"][0]["hooks"][0]["command"].as_str().unwrap().ends_with("hook stop"));
    let gemini: Value = serde_json::from_str(&std::fs::read_to_string(repo.join(".gemini/settings.json")).unwrap()).unwrap();
    assert_eq!(gemini["mcpServers"]["kenning"]["args"], serde_json::json!(["serve"]));
    assert_eq!(gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"], 10_000, "Gemini CLI counts in milliseconds");
    assert!(gemini["hooks"]["AfterAgent"][0]["hooks"][0]["command"].as_str().unwrap().ends_with("hook stop"));
    let cursor: Value = serde_json::from_str(&std::fs::read_to_string(repo.join(".cursor/mcp.json")).unwrap()).unwrap();
    assert_eq!(cursor["mcpServers"]["kenning"]["args"], serde_json::json!(["serve"]));
    let vscode = std::fs::read_to_string(repo.join(".vscode/mcp.json")).unwrap();
    assert!(vscode.contains("// shared servers") && vscode.contains("\"type\": \"stdio\""), "{vscode}");
    let zed: Value = serde_json::from_str(&std::fs::read_to_string(repo.join(".zed/settings.json")).unwrap()).unwrap();
    assert_eq!(zed["context_servers"]["kenning"]["args"], serde_json::json!(["serve"]));
    assert!(home.join(".codeium/windsurf/mcp_config.json").is_file());
    assert!(home.join(".config/Claude/claude_desktop_config.json").is_file());

    let again = sandbox.command(&repo, &["--json", "init", "--client", "codex,gemini,cursor,vscode,zed,claude-desktop,windsurf"]).env("HOME", &home).env("XDG_CONFIG_HOME", home.join(".config")).output().unwrap();
    let changes: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(changes.as_array().unwrap().iter().all(|change| change["action"] == "unchanged"), "{changes}");
    let unknown = sandbox.run(&repo, &["init", "--client", "notepad"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("one of claude, codex, gemini"), "{}", String::from_utf8_lossy(&unknown.stderr));
}

#[test]
fn doctor_says_what_to_fix_and_fails_without_hooks() {
    let sandbox = Sandbox::new();
    let doctor = sandbox.command(&sandbox.repo(), &["--json", "doctor"]).env("HOME", sandbox.path("outside")).output().unwrap();
    assert_eq!(doctor.status.code(), Some(1), "{}", String::from_utf8_lossy(&doctor.stdout));
    let checks: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let by_name = |name: &str| checks.as_array().unwrap().iter().find(|check| check["name"] == name).cloned().unwrap();
    assert_eq!(by_name("stores")["status"], "ok");
    assert_eq!(by_name("hooks")["status"], "fail");
    assert!(by_name("hooks")["fix"].as_str().unwrap().contains("kenning init"));
    assert_eq!(by_name("mcp")["status"], "fail");
}

#[test]
fn export_by_author_holds_only_what_that_author_wrote() {
    let sandbox = Sandbox::new();
    for (author, content) in [("ada", "Ada's note on the cache eviction policy"), ("bob", "Bob's note on the deploy freeze")] {
        let output = sandbox.command(&sandbox.repo(), &["capture", content]).env("KENNING_USER_ID", author).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let output = sandbox.run(&sandbox.repo(), &["export", "--author", "ada"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["memory"]["author"], "ada");
    assert!(text(&lines[0], "/memory/content").starts_with("Ada's note"));
}

#[test]
fn purge_by_author_counts_first_then_removes_everything_that_author_wrote() {
    let sandbox = Sandbox::new();
    let captures = [
        ("ada", "project", "Ada's note on the cache eviction policy"),
        ("ada", "user", "Ada prefers squash merges for the eviction work"),
        ("bob", "project", "Bob's note on the deploy freeze"),
    ];
    for (author, domain, content) in captures {
        let output = sandbox.command(&sandbox.repo(), &["capture", content, "--domain", domain]).env("KENNING_USER_ID", author).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let refused = sandbox.failure(&["purge", "--author", "ada"]);
    assert!(refused.contains("--dry-run") && refused.contains("--yes"), "{refused}");

    let memories = |report: &Value| -> Vec<(String, u64)> {
        report["domains"].as_array().unwrap().iter().map(|d| (text(d, "/domain").to_owned(), d["memories"].as_u64().unwrap())).collect()
    };
    let dry = sandbox.json(&["purge", "--author", "ada", "--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(memories(&dry), [(PROJECT.to_owned(), 1), ("user".to_owned(), 1)], "{dry:#}");
    let exported = |author: &str| String::from_utf8_lossy(&sandbox.run(&sandbox.repo(), &["export", "--author", author]).stdout).lines().count();
    assert_eq!(exported("ada"), 2, "a dry run removes nothing");

    let purged = sandbox.json(&["purge", "--author", "ada", "--yes"]);
    assert_eq!(memories(&purged), memories(&dry));
    assert_eq!(exported("ada"), 0, "nothing ada wrote is left to export");
    assert_eq!(exported("bob"), 1);
    let page = sandbox.json(&["recall", "Ada cache eviction squash merges"]);
    assert!(page["results"].as_array().unwrap().iter().all(|hit| !hit.to_string().contains("Ada")), "{page:#}");
    let again = sandbox.json(&["purge", "--author", "ada", "--yes"]);
    assert!(memories(&again).iter().all(|(_, count)| *count == 0), "{again:#}");
}

/// Regression: a purge deleted the author's rows but left their text readable in the free pages
/// of `.git/kenning/project.db` and `user.db`, in their WAL files and in the search index files.
/// After a purge, a byte search of every file kenning keeps (the data directory and the clone's
/// `.git/kenning`) finds no word the author wrote, in any version, nor in the record of a
/// contradiction between her memory and another's; the other author's are there.
#[test]
fn a_purge_leaves_no_byte_of_the_authors_text_in_any_file() {
    let sandbox = Sandbox::new();
    let capture = |author: &str, domain: &str, content: &str| -> String {
        let output = sandbox.command(&sandbox.repo(), &["--json", "capture", content, "--domain", domain]).env("KENNING_USER_ID", author).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        text(&serde_json::from_slice(&output.stdout).unwrap(), "/urn").to_owned()
    };
    let mut urns = Vec::new();
    for domain in ["project", "user"] {
        urns.push(capture("ada", domain, &format!("Ada's zephyrquill note on the {domain} cache eviction policy")));
        capture("bob", domain, &format!("Bob's marmalade note on the {domain} deploy freeze"));
        // A contradiction of bob's memory by ada's, whose record quotes her words.
        capture("bob", domain, &format!("The marmalade {domain} checkout queue backend is rabbitmq."));
        capture("ada", domain, &format!("The marmalade {domain} checkout queue backend is zephyrquill."));
    }
    for urn in &urns {
        for version in 2..=4 {
            let content = format!("Ada's zephyrquill note, version {version}: evict by frequency");
            let output = sandbox.command(&sandbox.repo(), &["update", urn, "--reason", "zephyrquill revision", "--content", &content]).env("KENNING_USER_ID", "ada").output().unwrap();
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        }
    }
    sandbox.json(&["recall", "zephyrquill eviction"]);
    sandbox.json(&["purge", "--author", "ada", "--yes"]);

    let mut files = Vec::new();
    let mut folders = vec![sandbox.path("data"), sandbox.repo().join(".git/kenning")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() { folders.push(path) } else { files.push(path) }
        }
    }
    let holding = |word: &str| -> Vec<String> {
        files
            .iter()
            .filter(|file| std::fs::read(file).unwrap().windows(word.len()).any(|window| window == word.as_bytes()))
            .map(|file| file.display().to_string())
            .collect()
    };
    assert!(files.iter().any(|file| file.ends_with("project.db")) && files.iter().any(|file| file.ends_with("user.db")), "{files:?}");
    assert!(holding("zephyrquill").is_empty(), "the purged author's text is still in {:?}", holding("zephyrquill"));
    let kept = holding("marmalade");
    assert!(["project.db", "user.db"].iter().all(|name| kept.iter().any(|file| file.ends_with(name))), "the other author's memories stay: {kept:?}");
}

#[test]
fn consolidate_shows_progress_records_the_run_and_rolls_it_back_once() {
    let sandbox = Sandbox::new();
    for n in 1..=3 {
        let content = format!("The login integration test failed on CI because the session cookie was not set before the redirect (run {n}).");
        sandbox.json(&["capture", &content, "--kind", "episodic", "--namespace", "testing"]);
    }
    sandbox.json(&["capture", "Alice prefers tabs over spaces in Makefiles.", "--kind", "episodic", "--namespace", "context"]);

    let output = sandbox.run(&sandbox.repo(), &["--json", "consolidate"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let progress = String::from_utf8_lossy(&output.stderr);
    assert!(progress.contains("clustered 4 of 4 episodes"), "progress goes to stderr: {progress}");
    let run: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((run["status"].as_str(), run["episodesEvaluated"].as_u64(), run["principlesExtracted"].as_u64()), (Some("completed"), Some(4), Some(1)), "{run:#}");
    assert_eq!(text(&run, "/llm/status"), "not_configured");
    assert!(text(&run, "/domain").starts_with("project:"), "the project domain, kept in git notes: {run:#}");
    let run_id = text(&run, "/runId").to_owned();
    let principle = sandbox.json(&["get", text(&run, "/created/0")]);
    assert_eq!((text(&principle, "/kind"), text(&principle, "/namespace")), ("semantic", "testing"));

    let listed = sandbox.json(&["consolidate", "--list"]);
    assert_eq!(listed[0]["runId"], run_id.as_str());
    let human = sandbox.run(&sandbox.repo(), &["consolidate", "--dry-run"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("0 clusters found"), "{}", String::from_utf8_lossy(&human.stdout));

    let rolled = sandbox.json(&["consolidate", "--rollback", &run_id]);
    assert_eq!(rolled["status"], "rolled_back");
    assert_eq!(text(&sandbox.json(&["get", text(&run, "/created/0")]), "/status"), "forgotten");
    let again = sandbox.failure(&["consolidate", "--rollback", &run_id]);
    assert!(again.contains("rollback") && again.contains("already rolled back"), "{again}");
}

/// A language model on 127.0.0.1 speaking Ollama's `/api/chat`: it answers every request with
/// `content` and keeps each request's JSON body.
struct ChatServer {
    url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl ChatServer {
    fn start(content: &str) -> ChatServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (kept, content) = (requests.clone(), content.to_owned());
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                std::io::Read::read_exact(&mut reader, &mut body).unwrap();
                kept.lock().unwrap().push(serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null));
                let answer = serde_json::json!({"model": "llama3.2", "message": {"role": "assistant", "content": content}, "done": true}).to_string();
                let response = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}", answer.len());
                stream.write_all(response.as_bytes()).unwrap();
            }
        });
        ChatServer { url, requests }
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// Writes the user's config: query decomposition (and rewriting, if `rewrite`) through the
/// model `server` serves.
fn use_model(sandbox: &Sandbox, server: &ChatServer, rewrite: bool) {
    let config = format!(
        "[recall]\ndecompose_with_llm = true\nrewrite_with_llm = {rewrite}\n\n[[llm.providers]]\nprovider = \"ollama\"\nmodel = \"llama3.2\"\nbase_url = \"{}\"\nmax_retries = 0\n",
        server.url
    );
    std::fs::write(sandbox.path("config").join("kenning.toml"), config).unwrap();
}

/// Query decomposition: with `[recall] decompose_with_llm` and a model, recall asks the model
/// which questions a query is made of and searches each, so the memories answering each part
/// reach the first page together; without it, the memory answering the part that shares no
/// word with the question stays below notes that repeat the question's words.
#[test]
fn a_model_split_question_brings_the_memory_of_each_part_to_the_first_page() {
    let sandbox = Sandbox::new();
    let cause = sandbox.json(&["capture", "The Friday release broke: the payments migration held a lock on the invoices table for twenty minutes."]);
    let fix = sandbox.json(&["capture", "Migrations now run with lock_timeout 5s on the primary, so a blocked migration gives up instead of stalling every write."]);
    for text in [
        "Release notes for the Friday release list every merged pull request.",
        "How we fixed the flaky release script: pin the runner image.",
        "The release checklist asks who fixed what before Friday.",
        "We fixed the Friday release date in the calendar for the whole quarter.",
        "Release builds are signed; the fix for the expired key went in on Friday.",
    ] {
        sandbox.json(&["capture", text]);
    }
    let question = "What broke the Friday release and how did we fix it?";
    let (cause, fix) = (text(&cause, "/urn").to_owned(), text(&fix, "/urn").to_owned());

    let alone = sandbox.json(&["recall", question, "--limit", "3"]);
    assert!(recalled_urns(&alone).contains(&cause) && !recalled_urns(&alone).contains(&fix), "the control: without the split, the fix is not on the page: {alone:#}");

    let parts = ["What broke the Friday release?", "How did we stop migrations from stalling writes with their locks?"];
    let server = ChatServer::start(&serde_json::json!({"parts": parts}).to_string());
    use_model(&sandbox, &server, false);
    let split = sandbox.json(&["recall", question, "--limit", "3"]);
    let found = recalled_urns(&split);
    assert!(found.contains(&cause) && found.contains(&fix), "both parts' memories on the page: {split:#}");
    assert_eq!(
        text(&split, "/query_rewrite"),
        "ollama/llama3.2 split the query into 2 parts: \"What broke the Friday release?\"; \"How did we stop migrations from stalling writes with their locks?\""
    );
    let [request] = server.requests().try_into().expect("one model call a recall");
    assert_eq!((&request["format"], &request["messages"][1]["content"]), (&Value::from("json"), &Value::from(format!("Query: {question}"))));
    assert!(text(&request, "/messages/0/content").contains("\"parts\""), "{request:#}");

    // An answer without the list asked for leaves the split by rule, and says so.
    let server = ChatServer::start("Both parts are about the release.");
    use_model(&sandbox, &server, false);
    let unsplit = sandbox.json(&["recall", question, "--limit", "3"]);
    assert_eq!(recalled_urns(&unsplit), recalled_urns(&alone));
    assert_eq!(text(&unsplit, "/query_rewrite"), "ollama/llama3.2 answered without the lists asked for; parts by rule only");

    // With query rewriting on too, one request asks for both, and the model's terms widen the search.
    let server = ChatServer::start(&serde_json::json!({"terms": ["lock_timeout"], "parts": parts}).to_string());
    use_model(&sandbox, &server, true);
    let both = sandbox.json(&["recall", question, "--limit", "3"]);
    let found = recalled_urns(&both);
    assert!(found.contains(&cause) && found.contains(&fix), "{both:#}");
    assert!(text(&both, "/query_rewrite").starts_with("ollama/llama3.2 added 1 term(s) and split the query into 2 parts"), "{both:#}");
    assert!(both["expanded_with"].as_array().unwrap().iter().any(|term| term.as_str().is_some_and(|term| term.contains("lock"))), "{both:#}");
    let [request] = server.requests().try_into().expect("one model call for both");
    let system = text(&request, "/messages/0/content");
    assert!(system.contains("\"terms\"") && system.contains("\"parts\""), "{system}");
}
