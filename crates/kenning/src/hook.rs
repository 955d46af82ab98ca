//! `kenning hook EVENT`: answers a Claude Code hook. A hook never blocks the agent: whatever goes
//! wrong (an argument this version does not know, unreadable input, a bad config, a store that
//! will not open, a panic), it exits 0, prints nothing it was not asked for, and writes what
//! happened to `hooks.log` in the data directory, which `kenning doctor` reports. Claude Code
//! reads exit code 2 as "block this prompt or tool call", and a settings file shared by a team
//! may name a flag that an older kenning on a teammate's machine lacks: so even an argument
//! error answers the event as well as it can and exits 0.

use std::ffi::OsString;
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

/// The least `--max-tokens` that leaves room for a memory in a context block.
const MIN_MAX_TOKENS: usize = 50;

/// Whether these command-line arguments ask for `kenning hook …`: the first one that is not a
/// flag is `hook`.
pub fn is_hook_invocation(args: &[OsString]) -> bool {
    args.iter().skip(1).find(|arg| !arg.to_string_lossy().starts_with('-')).is_some_and(|arg| arg == "hook")
}

/// `kenning hook …` with arguments the parser refused: logs the refusal, then answers the event
/// named after `hook` (with the default budgets) if there is one this version knows.
pub fn run_despite(args: &[OsString], refusal: &clap::Error) -> ExitCode {
    let words: Vec<String> = args.iter().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let after_hook = words.iter().position(|word| word == "hook").map_or(&words[..0], |at| &words[at + 1..]);
    // The event is the word after `hook` that names one; a flag's value can stand before it.
    let event = after_hook
        .iter()
        .find(|word| HookEvent::parse(word).is_some())
        .or_else(|| after_hook.iter().find(|word| !word.starts_with('-')))
        .cloned()
        .unwrap_or_default();
    let first_line = refusal.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned();
    let known = HookEvent::parse(&event).is_some();
    let outcome = if known { "answered with the default settings" } else { "no event this kenning knows, so nothing was answered" };
    log(if event.is_empty() { "hook" } else { &event }, &format!("argument error ({first_line}) in `{}`: {outcome}", words[1..].join(" ")));
    if known { run(&HookArgs { event, max_tokens: None }) } else { ExitCode::SUCCESS }
}

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
        Err(panic) => Some(format!("panicked: {}", crate::panic_message(panic.as_ref()))),
    };
    if let Some(message) = failure {
        log(&args.event, &message);
    }
    ExitCode::SUCCESS
}

fn answer(args: &HookArgs) -> Result<Option<String>> {
    let event = HookEvent::parse(&args.event)
        .ok_or_else(|| anyhow!("`{}` is not a hook event this kenning knows; use one of {}", args.event, HookEvent::command_names()))?;
    let mut text = String::new();
    std::io::stdin().lock().take(MAX_INPUT_BYTES).read_to_string(&mut text).context("reading the hook input")?;
    let mut input: HookInput = serde_json::from_str(&text).context("the hook input is not Claude Code's hook JSON")?;
    // The events that read the transcript (the others leave it alone).
    if matches!(event, HookEvent::PreCompact | HookEvent::Stop | HookEvent::SessionEnd) {
        input.transcript_path = confined_transcript(&args.event, input.transcript_path.as_deref());
    }
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
    let budgets = budgets(&args.event, args.max_tokens);
    #[cfg(unix)]
    if crate::hook_socket::answers(event) {
        let served = crate::hook_socket::endpoint(&config, project.as_ref())
            .and_then(|socket| crate::hook_socket::ask(&socket, event, &budgets, &input));
        if let Some(answer) = served {
            return answer.map(|output| output.map(|value| value.to_string())).map_err(|reason| anyhow!(reason));
        }
    }
    let services = crate::compose::services(&config, project.as_ref())?;
    let hooks = Hooks { project: services.project_id, memory: services.memory, decisions: services.decisions, budgets };
    let output = hooks.run(event, &input)?;
    Ok(output.map(|value| value.to_string()))
}

/// The budgets of `--max-tokens`, or the defaults (logged) when it leaves no room for a memory.
fn budgets(event: &str, max_tokens: Option<usize>) -> Budgets {
    let defaults = Budgets::default();
    match max_tokens {
        Some(max_tokens) if max_tokens < MIN_MAX_TOKENS => {
            log(
                event,
                &format!(
                    "`--max-tokens {max_tokens}` leaves no room for a memory (the least is {MIN_MAX_TOKENS}); used the default budgets \
                     (session-start {}, user-prompt {}, post-tool {})",
                    defaults.session_start, defaults.user_prompt, defaults.post_tool
                ),
            );
            defaults
        }
        Some(max_tokens) => Budgets { session_start: max_tokens, user_prompt: max_tokens, post_tool: max_tokens },
        None => defaults,
    }
}

/// The folders where the agents kenning answers keep their transcripts: Claude Code's
/// (`$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects` or `~/.config/claude/projects`),
/// Codex's (`$CODEX_HOME/sessions`, else `~/.codex/sessions`) and Gemini CLI's (`~/.gemini/tmp`).
fn transcript_folders() -> Vec<PathBuf> {
    let home = dirs::home_dir();
    let claude: Vec<PathBuf> = match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => home.iter().map(|home| home.join(".claude")).chain(dirs::config_dir().map(|dir| dir.join("claude"))).collect(),
    };
    let codex = std::env::var_os("CODEX_HOME").map(PathBuf::from).or_else(|| home.as_ref().map(|home| home.join(".codex")));
    let gemini = home.as_ref().map(|home| home.join(".gemini").join("tmp"));
    claude.into_iter().map(|dir| dir.join("projects")).chain(codex.map(|dir| dir.join("sessions"))).chain(gemini).collect()
}

/// The transcript a hook may read: a regular file inside one of [`transcript_folders`], its path
/// resolved. Whatever else the hook input names is not read, so that it cannot make kenning read
/// any other file of the machine and store what it says; the refusal is logged and the event is
/// answered without the transcript.
fn confined_transcript(event: &str, path: Option<&str>) -> Option<String> {
    let path = path.filter(|path| !path.is_empty())?;
    let folders = transcript_folders();
    let real = std::fs::canonicalize(path).ok().filter(|real| real.is_file());
    let inside = real.filter(|real| folders.iter().filter_map(|folder| std::fs::canonicalize(folder).ok()).any(|folder| real.starts_with(folder)));
    if inside.is_none() {
        let folders = folders.iter().map(|folder| folder.display().to_string()).collect::<Vec<_>>().join(", ");
        log(event, &format!("the transcript {path} is not a file inside an agent's transcript folder ({folders}), so it is not read"));
    }
    inside.map(|real| real.to_string_lossy().into_owned())
}

/// The most the hook log holds: a problem that repeats at every prompt (a flag this version
/// lacks, say) must not fill the disk. Past it, the older half goes.
const MAX_LOG_BYTES: u64 = 512 * 1024;

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
        kenning_gateway::create_private_dir(parent)?;
    }
    if std::fs::metadata(path).is_ok_and(|metadata| metadata.len() > MAX_LOG_BYTES) {
        let text = std::fs::read_to_string(path)?;
        let half = text.len() / 2;
        let from = text.as_bytes()[half..].iter().position(|byte| *byte == b'\n').map_or(text.len(), |newline| half + newline + 1);
        std::fs::write(path, &text[from..])?;
    }
    // The log quotes what failed, which may name a prompt's words: the user's alone.
    let mut file = kenning_gateway::private_options().create(true).append(true).open(path)?;
    file.write_all(line.as_bytes())
}
