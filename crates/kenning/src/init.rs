//! `kenning init`: registers kenning with Claude Code. It merges into the user's files and never
//! drops an entry: the MCP server `kenning` is added to `.mcp.json` unless one by that name is
//! there, and each hook is added to `.claude/settings.json` unless a kenning hook for that
//! event is there. A second run changes nothing; `--dry-run` prints the diff and writes nothing.
//! With `--user`, the server goes to `~/.claude.json` and the hooks to `~/.claude/settings.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kenning_hooks::HookEvent;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::cli::InitArgs;
use crate::project::Project;

/// The MCP server's name in Claude Code's configuration.
pub const SERVER_NAME: &str = "kenning";

/// Where `init` writes, for the project or for the user.
pub struct Targets {
    pub mcp: PathBuf,
    pub settings: PathBuf,
}

impl Targets {
    pub fn project(root: &Path) -> Targets {
        Targets { mcp: root.join(".mcp.json"), settings: root.join(".claude").join("settings.json") }
    }

    pub fn user() -> Result<Targets> {
        let home = dirs::home_dir().context("no home directory is known; set HOME")?;
        Ok(Targets { mcp: home.join(".claude.json"), settings: home.join(".claude").join("settings.json") })
    }
}

/// One file's change.
#[derive(Debug, Serialize)]
pub struct FileChange {
    pub path: String,
    /// created, updated or unchanged.
    pub action: &'static str,
    /// What was added, one line each.
    pub added: Vec<String>,
    /// Entries that were already there and were kept as they are.
    pub kept: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff: String,
}

pub fn run(cwd: &Path, args: &InitArgs, json: bool) -> Result<()> {
    let targets = if args.user {
        Targets::user()?
    } else {
        let root = Project::discover(cwd, None).map_or_else(|| cwd.to_owned(), |project| project.root);
        Targets::project(&root)
    };
    let command = kenning_command();
    let changes = vec![
        apply(&targets.mcp, |root| merge_mcp(root, &command), args.dry_run)?,
        apply(&targets.settings, |root| merge_hooks(root, &command), args.dry_run)?,
    ];
    if json {
        println!("{}", serde_json::to_string_pretty(&changes)?);
        return Ok(());
    }
    for change in &changes {
        let verb = match (change.action, args.dry_run) {
            ("unchanged", _) => "unchanged",
            ("created", true) => "would create",
            ("updated", true) => "would update",
            (action, false) => action,
            (other, true) => other,
        };
        println!("{verb} {}", change.path);
        for line in &change.added {
            println!("  + {line}");
        }
        for line in &change.kept {
            println!("  = {line}");
        }
        if args.dry_run && !change.diff.is_empty() {
            print!("{}", change.diff);
        }
    }
    if !args.dry_run && changes.iter().any(|change| change.action != "unchanged") {
        println!("Restart Claude Code (or run /hooks and /mcp) to pick the changes up; `kenning doctor` checks them.");
    }
    Ok(())
}

/// How Claude Code should start kenning: by name when the `kenning` on PATH is this binary,
/// else by this binary's full path.
pub fn kenning_command() -> String {
    let current = std::env::current_exe().ok().and_then(|path| path.canonicalize().ok());
    let on_path = find_on_path("kenning").and_then(|path| path.canonicalize().ok());
    match (current, on_path) {
        (Some(current), Some(on_path)) if current == on_path => "kenning".to_owned(),
        (Some(current), _) => current.to_string_lossy().into_owned(),
        (None, _) => "kenning".to_owned(),
    }
}

pub fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// Reads `path` (absent means empty), lets `merge` change it, and writes it back if it changed.
fn apply(path: &Path, merge: impl FnOnce(&mut Map<String, Value>) -> Result<(Vec<String>, Vec<String>)>, dry_run: bool) -> Result<FileChange> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let mut root = match before.as_deref().map(str::trim).filter(|text| !text.is_empty()) {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => bail!("{} does not hold a JSON object; fix or move it, then run `kenning init` again", path.display()),
            Err(error) => bail!("{} is not valid JSON ({error}); fix it, then run `kenning init` again", path.display()),
        },
    };
    let original = root.clone();
    let (added, kept) = merge(&mut root).with_context(|| format!("merging into {}", path.display()))?;
    let display = path.display().to_string();
    if root == original && before.is_some() {
        return Ok(FileChange { path: display, action: "unchanged", added, kept, diff: String::new() });
    }
    let after = format!("{}\n", serde_json::to_string_pretty(&Value::Object(root))?);
    let diff = line_diff(before.as_deref().unwrap_or_default(), &after);
    let action = if before.is_some() { "updated" } else { "created" };
    if !dry_run {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        // Written beside and renamed over, so that an interrupted write leaves the old file.
        let temporary = path.with_extension("json.kenning-tmp");
        std::fs::write(&temporary, &after).with_context(|| format!("writing {}", temporary.display()))?;
        std::fs::rename(&temporary, path).with_context(|| format!("replacing {}", path.display()))?;
    }
    Ok(FileChange { path: display, action, added, kept, diff })
}

fn object<'a>(parent: &'a mut Map<String, Value>, key: &str, path: &str) -> Result<&'a mut Map<String, Value>> {
    match parent.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(map) => Ok(map),
        _ => bail!("`{path}` is not a JSON object; kenning will not overwrite it"),
    }
}

/// Adds the `kenning serve` MCP server unless a server named `kenning` exists.
pub fn merge_mcp(root: &mut Map<String, Value>, command: &str) -> Result<(Vec<String>, Vec<String>)> {
    let servers = object(root, "mcpServers", "mcpServers")?;
    if servers.contains_key(SERVER_NAME) {
        return Ok((Vec::new(), vec![format!("mcpServers.{SERVER_NAME} (already registered)")]));
    }
    servers.insert(SERVER_NAME.to_owned(), json!({ "type": "stdio", "command": command, "args": ["serve"] }));
    Ok((vec![format!("mcpServers.{SERVER_NAME}: {command} serve")], Vec::new()))
}

/// The matcher and timeout (seconds) of each hook kenning installs.
fn hook_settings(event: HookEvent) -> (Option<&'static str>, u64) {
    match event {
        // Only shell commands report failed test runs.
        HookEvent::PostTool => (Some("Bash"), 10),
        HookEvent::PreCompact | HookEvent::Stop => (None, 30),
        HookEvent::SessionStart | HookEvent::UserPrompt => (None, 10),
    }
}

/// Whether a hook command is kenning's for `event`, whatever path it starts kenning by.
pub fn is_kenning_hook(command: &str, event: HookEvent) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.windows(3).any(|window| {
        let program = Path::new(window[0].trim_matches(['"', '\''])).file_name().and_then(|name| name.to_str());
        program == Some("kenning") && window[1] == "hook" && window[2] == event.command_name()
    })
}

/// Every hook command configured for a Claude Code event in a settings object.
pub fn hook_commands<'a>(settings: &'a Map<String, Value>, event: HookEvent) -> Vec<&'a str> {
    let groups = settings.get("hooks").and_then(|hooks| hooks.get(event.claude_name())).and_then(Value::as_array);
    groups
        .into_iter()
        .flatten()
        .filter_map(|group| group.get("hooks").and_then(Value::as_array))
        .flatten()
        .filter_map(|hook| hook.get("command").and_then(Value::as_str))
        .collect()
}

/// Adds a `kenning hook EVENT` command for each event that has none.
pub fn merge_hooks(root: &mut Map<String, Value>, command: &str) -> Result<(Vec<String>, Vec<String>)> {
    let mut added = Vec::new();
    let mut kept = Vec::new();
    for event in HookEvent::ALL {
        let present = hook_commands(root, event).into_iter().any(|existing| is_kenning_hook(existing, event));
        if present {
            kept.push(format!("hooks.{} (kenning hook {} already there)", event.claude_name(), event.command_name()));
            continue;
        }
        let hooks = object(root, "hooks", "hooks")?;
        let groups = hooks.entry(event.claude_name().to_owned()).or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(groups) = groups else {
            bail!("`hooks.{}` is not a JSON array; kenning will not overwrite it", event.claude_name());
        };
        let (matcher, timeout) = hook_settings(event);
        let program = if command.contains(' ') { format!("\"{command}\"") } else { command.to_owned() };
        let line = format!("{program} hook {}", event.command_name());
        let mut group = json!({ "hooks": [{ "type": "command", "command": line, "timeout": timeout }] });
        if let (Some(matcher), Value::Object(group)) = (matcher, &mut group) {
            group.insert("matcher".to_owned(), Value::String(matcher.to_owned()));
        }
        groups.push(group);
        added.push(format!("hooks.{}: {line}", event.claude_name()));
    }
    Ok((added, kept))
}

/// A unified-style diff of two small texts, by lines (longest common subsequence).
pub fn line_diff(before: &str, after: &str) -> String {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let mut common = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] = if old[i] == new[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut diff) = (0, 0, String::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            diff.push_str(&format!("    {}\n", old[i]));
            i += 1;
            j += 1;
        } else if j < new.len() && (i == old.len() || common[i][j + 1] >= common[i + 1][j]) {
            diff.push_str(&format!("  + {}\n", new[j]));
            j += 1;
        } else {
            diff.push_str(&format!("  - {}\n", old[i]));
            i += 1;
        }
    }
    diff
}
