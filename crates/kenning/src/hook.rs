//! `kenning hook EVENT`: answers a Claude Code hook. A hook never blocks the agent: whatever goes
//! wrong (unreadable input, a bad config, a store that will not open, a panic), it prints
//! nothing, exits 0 and writes what happened to `hooks.log` in the data directory.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use kenning_hooks::{Budgets, HookEvent, HookInput, Hooks};

use crate::cli::HookArgs;
use crate::config::Config;
use crate::project::Project;

/// The most of stdin a hook reads: Claude Code's hook input is a small JSON object, and a tool
/// response quoted in it is cut well before this.
const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

pub fn run(args: &HookArgs) -> ExitCode {
    // A panic must not print a backtrace into the agent's session: it is logged instead.
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(|| answer(args));
    let failure = match outcome {
        Ok(Ok(Some(output))) => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(output.as_bytes()).and_then(|()| stdout.write_all(b"\n")).and_then(|()| stdout.flush()) {
                Ok(()) => None,
                Err(error) => Some(format!("writing the answer: {error}")),
            }
        }
        Ok(Ok(None)) => None,
        Ok(Err(error)) => Some(format!("{error:#}")),
        Err(panic) => Some(format!(
            "panicked: {}",
            panic.downcast_ref::<&str>().map(|text| (*text).to_owned()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default()
        )),
    };
    if let Some(message) = failure {
        log(&args.event, &message);
    }
    ExitCode::SUCCESS
}

fn answer(args: &HookArgs) -> Result<Option<String>> {
    let event = HookEvent::parse(&args.event).ok_or_else(|| {
        anyhow!("`{}` is not a hook event; use session-start, user-prompt, post-tool, pre-compact or stop", args.event)
    })?;
    let mut text = String::new();
    std::io::stdin().lock().take(MAX_INPUT_BYTES).read_to_string(&mut text).context("reading the hook input")?;
    let input: HookInput = serde_json::from_str(&text).context("the hook input is not Claude Code's hook JSON")?;
    let cwd = match input.cwd.as_deref().map(PathBuf::from).filter(|dir| dir.is_dir()) {
        Some(dir) => dir,
        None => std::env::current_dir().context("reading the working directory")?,
    };
    let project_hint = Project::discover(&cwd, None);
    let config = Config::load(project_hint.as_ref().map(|project| project.root.as_path()))?;
    let project = match &config.project_id {
        Some(id) => Project::discover(&cwd, Some(id)),
        None => project_hint,
    };
    let services = crate::compose::services(&config, project.as_ref())?;
    let mut budgets = Budgets::default();
    if let Some(max_tokens) = args.max_tokens {
        budgets = Budgets { session_start: max_tokens, user_prompt: max_tokens, post_tool: max_tokens };
    }
    let hooks = Hooks {
        memory: services.memory,
        decisions: services.decisions,
        project: project.filter(|_| !config.project_disabled).map(|project| project.id),
        budgets,
    };
    let output = hooks.run(event, &input)?;
    Ok(output.map(|value| value.to_string()))
}

/// The hook log: `{data dir}/hooks.log`, one line per problem.
pub fn log_path() -> Option<PathBuf> {
    Config::data_dir().ok().map(|dir| dir.join("hooks.log"))
}

fn log(event: &str, message: &str) {
    let Some(path) = log_path() else { return };
    let _ = append(&path, &format!("{} {event}: {}\n", chrono::Utc::now().to_rfc3339(), message.replace('\n', " | ")));
}

fn append(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        kenning_service::create_private_dir(parent)?;
    }
    // The log quotes what failed, which may name a prompt's words: the user's alone.
    let mut file = kenning_service::private_options().create(true).append(true).open(path)?;
    file.write_all(line.as_bytes())
}
