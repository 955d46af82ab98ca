//! `kenning doctor`: checks what kenning needs to work for Claude Code and says what to fix.
//! The exit code is non-zero when a check fails; a warning alone leaves it zero.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use kenning_hooks::HookEvent;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::Config;
use crate::init::{ClaudeFiles, SERVER_NAME, find_on_path, hook_commands, is_kenning_hook};
use crate::project::Project;

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    /// ok, warn or fail.
    status: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, message: impl Into<String>) -> Check {
        Check { name, status: "ok", message: message.into(), fix: None }
    }
    fn warn(name: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name, status: "warn", message: message.into(), fix: Some(fix.into()) }
    }
    fn fail(name: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name, status: "fail", message: message.into(), fix: Some(fix.into()) }
    }
}

pub fn run(json: bool) -> Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let mut checks = vec![binary()];
    let project_hint = Project::discover(&cwd, None);
    match Config::load(project_hint.as_ref().map(|project| project.root.as_path())) {
        Err(error) => checks.push(Check::fail("config", format!("{error:#}"), "fix the file or variable named above")),
        Ok(config) => {
            checks.push(Check::ok("config", describe_sources(&config)));
            checks.push(trust(&config));
            let project = match &config.project_id {
                Some(id) => Project::discover(&cwd, Some(id)),
                None => project_hint.clone(),
            };
            checks.extend(stores(&config, project.as_ref()));
            checks.push(language_models(&config));
        }
    }
    let root = project_hint.as_ref().map_or_else(|| cwd.clone(), |project| project.root.clone());
    let project_files = ClaudeFiles::project(&root);
    let user_files = ClaudeFiles::user();
    checks.push(hooks(&project_files, user_files.as_ref()));
    checks.push(mcp(&project_files, user_files.as_ref(), &root));
    checks.push(hook_log());

    let failed = checks.iter().any(|check| check.status == "fail");
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        for check in &checks {
            println!("{:<4} {:<8} {}", check.status, check.name, check.message);
            if let Some(fix) = &check.fix {
                println!("              fix: {fix}");
            }
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn binary() -> Check {
    let version = env!("CARGO_PKG_VERSION");
    let current = std::env::current_exe().ok();
    let shown = current.as_deref().map_or_else(|| "(unknown path)".to_owned(), |path| path.display().to_string());
    match find_on_path("kenning") {
        Some(_) => Check::ok("binary", format!("kenning {version} at {shown}, on PATH")),
        None => Check::warn(
            "binary",
            format!("kenning {version} at {shown} is not on PATH"),
            "add its folder to PATH, or keep the full path `kenning init` writes into the hooks",
        ),
    }
}

fn describe_sources(config: &Config) -> String {
    if config.sources.is_empty() {
        "defaults (no kenning.toml found)".to_owned()
    } else {
        let files: Vec<String> = config.sources.iter().map(|path| path.display().to_string()).collect();
        format!("read {}", files.join(", "))
    }
}

/// What repository files set that was ignored for want of trust, and which are trusted.
fn trust(config: &Config) -> Check {
    let trusted = config.trusted.iter().map(|path| path.display().to_string()).collect::<Vec<_>>();
    let trusted = if trusted.is_empty() { "no repository file is trusted".to_owned() } else { format!("trusted: {}", trusted.join(", ")) };
    if config.ignored.is_empty() {
        return Check::ok("trust", format!("{trusted}; nothing a repository set was ignored"));
    }
    let ignored = config.ignored.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    Check::warn(
        "trust",
        format!("{ignored} ({trusted})"),
        "read the file: if you trust it, `kenning trust FILE` applies it whole; else remove those settings or set them in your own config",
    )
}

/// Opens every store and reads its status: counts, the search index, missing vectors.
fn stores(config: &Config, project: Option<&Project>) -> Vec<Check> {
    let services = match crate::compose::services_without_llm(config, project) {
        Ok(services) => services,
        Err(error) => {
            return vec![Check::fail("stores", format!("{error:#}"), "check the path and permissions named above, or the storage settings")];
        }
    };
    let status = match services.memory.status() {
        Ok(status) => status,
        Err(error) => return vec![Check::fail("stores", error.to_string(), "run `kenning reindex`; if it fails too, restore from `kenning export`")],
    };
    let mut checks = Vec::new();
    let summary: Vec<String> =
        status.domains.iter().map(|domain| format!("{} ({} memories, {})", domain.domain, domain.total, domain.location)).collect();
    checks.push(Check::ok("stores", summary.join("; ")));
    let out_of_step: Vec<&str> =
        status.domains.iter().filter(|domain| !domain.index.text_index_ok).map(|domain| domain.domain.as_str()).collect();
    let missing: u64 = status.domains.iter().map(|domain| domain.index.missing_vectors).sum();
    checks.push(if !out_of_step.is_empty() {
        Check::fail("index", format!("the search index of {} is out of step", out_of_step.join(", ")), "run `kenning reindex`")
    } else if missing > 0 {
        Check::warn("index", format!("{missing} memories have no vector from the current model"), "run `kenning reindex`")
    } else {
        Check::ok("index", format!("search index in step; search mode {}", status.search_mode))
    });
    match project.filter(|_| !config.project_disabled) {
        None if project.is_none() => checks.push(Check::warn(
            "project",
            "not inside a git repository: memories go to the user domain only",
            "run kenning inside the project's repository",
        )),
        None => {}
        Some(project) => checks.push(project_identity(config, project)),
    }
    checks
}

/// The id the project's domain takes, and whether the remote now names it otherwise.
fn project_identity(config: &Config, project: &Project) -> Check {
    let recorded = match crate::compose::open_project_notes(project, config) {
        Ok((_, recorded)) => recorded,
        Err(error) => return Check::fail("project", format!("{error:#}"), "check the repository named above"),
    };
    let id = crate::project::identity(project, recorded.as_deref());
    let rename = |to: &str| format!("to rename the project on purpose, set `id = \"{to}\"` under [project] in kenning.toml (or KENNING_PROJECT_ID={to}); URNs under earlier ids keep resolving");
    match recorded {
        Some(recorded) if project.configured && recorded != id => Check::ok(
            "project",
            format!("project:{id} (configured); its memories were first stored under `{recorded}`, and URNs under that id keep resolving"),
        ),
        Some(recorded) if !project.configured && recorded != project.derived_id => Check::warn(
            "project",
            format!(
                "project:{recorded}, the id its memories were first stored under; the remote now names it `{}`, and kenning keeps `{recorded}` (URNs under either id resolve)",
                project.derived_id
            ),
            rename(&project.derived_id),
        ),
        Some(_) => Check::ok("project", format!("project:{id}, the id its memories were stored under")),
        None => Check::ok("project", format!("project:{id}, from {}; the first memory fixes it", if project.configured { "the configuration" } else { "the origin remote or the folder's name" })),
    }
}

/// Asks each configured language model provider whether it answers now (its model list).
fn language_models(config: &Config) -> Check {
    let chain = match crate::llm::language_model(config.llm.as_deref()) {
        Ok(Some(chain)) => chain,
        Ok(None) => {
            return Check::ok("llm", "no language model configured: consolidation, contradictions and query rewriting use their rules");
        }
        Err(error) => return Check::fail("llm", format!("{error:#}"), "export the variable named above, or name another with `api_key_env`"),
    };
    let mut answering = Vec::new();
    let mut failing = Vec::new();
    for provider in chain.providers() {
        match provider.health_check() {
            Ok(()) => answering.push(format!("{} answers", provider.name())),
            Err(error) => failing.push(format!("{} does not: {error}", provider.name())),
        }
    }
    let message = answering.iter().chain(&failing).cloned().collect::<Vec<_>>().join("; ");
    if failing.is_empty() {
        Check::ok("llm", message)
    } else if answering.is_empty() {
        Check::fail("llm", message, "check each provider's base_url, key and network; features that use a model fall back to their rules meanwhile")
    } else {
        Check::warn("llm", message, "the chain falls back past the failing providers; check their base_url, key and network")
    }
}

fn read_object(path: &Path) -> Option<Result<Map<String, Value>, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{} does not hold a JSON object", path.display())),
        Err(error) => Err(format!("{} is not valid JSON: {error}", path.display())),
    })
}

/// Every settings file Claude Code reads hooks and approvals from, that exists and parses.
fn claude_settings(project: &ClaudeFiles, user: Option<&ClaudeFiles>) -> Result<Vec<Map<String, Value>>, String> {
    let paths = std::iter::once(&project.settings).chain(&project.local_settings).chain(user.map(|files| &files.settings));
    let mut settings = Vec::new();
    for path in paths {
        match read_object(path) {
            Some(Ok(map)) => settings.push(map),
            Some(Err(problem)) => return Err(problem),
            None => {}
        }
    }
    Ok(settings)
}

/// Every event kenning installs needs a kenning hook in the project's or the user's settings;
/// the check names the events covered and those that are not.
fn hooks(project: &ClaudeFiles, user: Option<&ClaudeFiles>) -> Check {
    let settings = match claude_settings(project, user) {
        Ok(settings) => settings,
        Err(problem) => return Check::fail("hooks", problem, "fix the file, then run `kenning init`"),
    };
    let covered = |event: HookEvent| {
        settings.iter().any(|map| {
            let map = Value::Object(map.clone());
            hook_commands(&map, event.claude_name()).into_iter().any(|command| is_kenning_hook(command, event))
        })
    };
    let (present, missing): (Vec<HookEvent>, Vec<HookEvent>) = HookEvent::INSTALLED.into_iter().partition(|event| covered(*event));
    let names = |events: &[HookEvent]| events.iter().map(|event| event.claude_name()).collect::<Vec<_>>().join(", ");
    let fix = "run `kenning init` (this project) or `kenning init --user` (every project)";
    if missing.is_empty() {
        Check::ok("hooks", format!("kenning answers {}", names(&present)))
    } else if present.is_empty() {
        Check::fail("hooks", format!("no kenning hook for {}", names(&missing)), fix)
    } else {
        Check::warn("hooks", format!("kenning answers {}, but not {}", names(&present), names(&missing)), fix)
    }
}

/// kenning must be registered as an MCP server: in `.mcp.json` (which Claude Code uses only once
/// the user approved it), or in `~/.claude.json` for the user or for this project.
fn mcp(project: &ClaudeFiles, user: Option<&ClaudeFiles>, root: &Path) -> Check {
    let registered = |servers: Option<&Value>| -> bool {
        servers.and_then(Value::as_object).is_some_and(|servers| {
            servers.iter().any(|(name, server)| {
                let command = server.get("command").and_then(Value::as_str).unwrap_or_default();
                name == SERVER_NAME || Path::new(command).file_name().and_then(|name| name.to_str()) == Some("kenning")
            })
        })
    };
    let user_config = user.and_then(|user| read_object(&user.mcp)).and_then(Result::ok);
    let for_project = user_config.as_ref().and_then(|map| map.get("projects")).and_then(|projects| projects.get(&*root.to_string_lossy()));
    if let Some(user) = user
        && let Some(map) = &user_config
        && (registered(map.get("mcpServers")) || registered(for_project.and_then(|entry| entry.get("mcpServers"))))
    {
        return Check::ok("mcp", format!("registered in {}", user.mcp.display()));
    }
    if let Some(Ok(map)) = read_object(&project.mcp)
        && registered(map.get("mcpServers"))
    {
        let shown = project.mcp.display();
        return match approval(project, user, root, user_config.as_ref()) {
            Approval::Approved => Check::ok("mcp", format!("registered in {shown} and approved")),
            Approval::Rejected => Check::fail(
                "mcp",
                format!("registered in {shown}, but the server was rejected in Claude Code, which does not start it"),
                "run `claude mcp reset-project-choices` in the project and approve kenning when asked",
            ),
            Approval::Pending(approved_in_settings) => Check::warn(
                "mcp",
                if approved_in_settings {
                    format!("registered in {shown} and approved, but the folder is not trusted yet: Claude Code shows the server pending")
                } else {
                    format!("registered in {shown}, not yet approved: Claude Code shows it pending and starts it only once approved")
                },
                "start Claude Code in the project, trust the folder and approve kenning when asked (or in /mcp)",
            ),
        };
    }
    Check::fail("mcp", "kenning is not registered as an MCP server", "run `kenning init` (or `claude mcp add kenning -- kenning serve`)")
}

/// What the user said about the project's `.mcp.json` server kenning.
enum Approval {
    Approved,
    Rejected,
    /// Not approved yet; `true` when the server is approved but the folder is not trusted.
    Pending(bool),
}

/// Claude Code starts a project's `.mcp.json` server once the folder is trusted (recorded in
/// `~/.claude.json` under the folder or one above it) and the server approved: in that entry, or
/// by the settings (`enabledMcpjsonServers`, `enableAllProjectMcpServers`); a rejection
/// (`disabledMcpjsonServers`) keeps it off.
fn approval(project: &ClaudeFiles, user: Option<&ClaudeFiles>, root: &Path, user_config: Option<&Map<String, Value>>) -> Approval {
    let names = |value: Option<&Value>, key: &str| -> bool {
        value.and_then(|value| value.get(key)).and_then(Value::as_array).is_some_and(|names| names.iter().any(|name| name == SERVER_NAME))
    };
    let projects = user_config.and_then(|map| map.get("projects"));
    let for_project = projects.and_then(|projects| projects.get(&*root.to_string_lossy()));
    let trusted = root.ancestors().any(|folder| {
        projects.and_then(|projects| projects.get(&*folder.to_string_lossy())).and_then(|entry| entry.get("hasTrustDialogAccepted")) == Some(&Value::Bool(true))
    });
    let settings: Vec<Value> = claude_settings(project, user).unwrap_or_default().into_iter().map(Value::Object).collect();
    let sources: Vec<Option<&Value>> = std::iter::once(for_project).chain(settings.iter().map(Some)).collect();
    let enabled = sources.iter().any(|source| {
        names(*source, "enabledMcpjsonServers") || source.and_then(|value| value.get("enableAllProjectMcpServers")) == Some(&Value::Bool(true))
    });
    if sources.iter().any(|source| names(*source, "disabledMcpjsonServers")) {
        Approval::Rejected
    } else if enabled && trusted {
        Approval::Approved
    } else {
        Approval::Pending(enabled)
    }
}

/// Hooks fail silently by design; their log says whether they did lately.
fn hook_log() -> Check {
    let Some(path) = crate::hook::log_path() else { return Check::ok("hook-log", "no data directory") };
    let Ok(text) = std::fs::read_to_string(&path) else { return Check::ok("hook-log", "no hook has failed") };
    match text.lines().last() {
        Some(last) => Check::warn(
            "hook-log",
            format!("{} hook problem(s) logged (a hook always exits 0 and says here what went wrong); the last: {last}", text.lines().count()),
            format!("fix the cause named there, then delete {}", path.display()),
        ),
        None => Check::ok("hook-log", "no hook has failed"),
    }
}
