//! `kenning init`: registers kenning with agent clients, each by its own documented
//! configuration: the MCP server (`kenning serve`) and, where the client has them, the hooks.
//!
//! | client | MCP server | hooks |
//! | --- | --- | --- |
//! | Claude Code | `.mcp.json` (`~/.claude.json` with `--user`) | `.claude/settings.json` |
//! | Codex CLI | `.codex/config.toml` `[mcp_servers.kenning]` (`~/.codex`, or `$CODEX_HOME`) | `.codex/hooks.json` |
//! | Gemini CLI | `.gemini/settings.json` `mcpServers` (`~/.gemini`) | the same file's `hooks` |
//! | Cursor | `.cursor/mcp.json` (`~/.cursor`) | none kenning can use |
//! | VS Code | `.vscode/mcp.json` `servers` (the user profile's `mcp.json`) | none |
//! | Claude Desktop | its `claude_desktop_config.json` (user only) | none |
//! | Windsurf | `~/.codeium/windsurf/mcp_config.json` (user only) | none |
//! | Zed | `.zed/settings.json` `context_servers` (`~/.config/zed/settings.json`) | none |
//!
//! The user's files are edited, never rewritten: a JSON file keeps its key order, indentation,
//! comments and every key kenning does not own (the edit goes through a concrete syntax tree),
//! and Codex's TOML keeps its formatting (`toml_edit`). An entry is added only when missing:
//! a server named `kenning` is kept as it is, and so is any hook that already runs kenning for
//! that event. Every file is read and checked before any is written, so an invalid file stops
//! the run with nothing written; each write goes to a file beside the target that is then
//! renamed over it. A second run changes nothing; `--dry-run` prints the diff and writes nothing.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use kenning_hooks::HookEvent;
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::InitArgs;
use crate::project::Project;

/// The MCP server's name in every client's configuration.
pub const SERVER_NAME: &str = "kenning";

/// The agent clients `kenning init --client` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Claude,
    Codex,
    Gemini,
    Cursor,
    Vscode,
    ClaudeDesktop,
    Windsurf,
    Zed,
}

impl Client {
    pub const ALL: [Client; 8] = [
        Client::Claude,
        Client::Codex,
        Client::Gemini,
        Client::Cursor,
        Client::Vscode,
        Client::ClaudeDesktop,
        Client::Windsurf,
        Client::Zed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Windsurf => "windsurf",
            Client::Zed => "zed",
        }
    }

    pub fn parse(name: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|client| client.name() == name)
    }

    /// Whether the client has only a configuration for the whole user (no project file).
    fn user_only(self) -> bool {
        matches!(self, Client::ClaudeDesktop | Client::Windsurf)
    }

    /// Whether the client seems installed: its program on PATH or its configuration folder in
    /// the home directory.
    fn found(self, home: &Path) -> bool {
        let (programs, folders): (&[&str], Vec<PathBuf>) = match self {
            Client::Claude => (&["claude"], vec![home.join(".claude")]),
            Client::Codex => (&["codex"], vec![codex_home(home)]),
            Client::Gemini => (&["gemini"], vec![home.join(".gemini")]),
            Client::Cursor => (&["cursor"], vec![home.join(".cursor")]),
            Client::Vscode => (&["code"], vscode_user_dir(home).into_iter().collect()),
            Client::ClaudeDesktop => (&[], claude_desktop_config(home).and_then(|path| path.parent().map(Path::to_owned)).into_iter().collect()),
            Client::Windsurf => (&["windsurf"], vec![home.join(".codeium").join("windsurf")]),
            Client::Zed => (&["zed", "zeditor"], vec![zed_user_settings(home).parent().map(Path::to_owned).unwrap_or_default()]),
        };
        programs.iter().any(|program| find_on_path(program).is_some()) || folders.iter().any(|folder| folder.is_dir())
    }

    /// The files this client reads kenning's registration from, for a project or the user.
    fn files(self, scope: &Scope, home: &Path, command: &str) -> Result<Vec<Planned>> {
        let server = Entry::server(None, command);
        let stdio_server = Entry::server(Some("stdio"), command);
        let files = match (self, scope) {
            (Client::Claude, Scope::Project(root)) => vec![
                Planned::json(root.join(".mcp.json"), Edit::server("mcpServers", stdio_server)),
                Planned::json(root.join(".claude").join("settings.json"), Edit::Hooks(HookDialect::Claude)),
            ],
            (Client::Claude, Scope::User) => vec![
                Planned::json(home.join(".claude.json"), Edit::server("mcpServers", stdio_server)),
                Planned::json(home.join(".claude").join("settings.json"), Edit::Hooks(HookDialect::Claude)),
            ],
            (Client::Codex, scope) => {
                let dir = match scope {
                    Scope::Project(root) => root.join(".codex"),
                    Scope::User => codex_home(home),
                };
                vec![
                    Planned { path: dir.join("config.toml"), format: Format::Toml, edit: Edit::server("mcp_servers", server) },
                    Planned::json(dir.join("hooks.json"), Edit::Hooks(HookDialect::Codex)),
                ]
            }
            (Client::Gemini, scope) => {
                let path = match scope {
                    Scope::Project(root) => root.join(".gemini").join("settings.json"),
                    Scope::User => home.join(".gemini").join("settings.json"),
                };
                vec![Planned::jsonc(path.clone(), Edit::server("mcpServers", server)), Planned::jsonc(path, Edit::Hooks(HookDialect::Gemini))]
            }
            (Client::Cursor, scope) => {
                let dir = match scope {
                    Scope::Project(root) => root.join(".cursor"),
                    Scope::User => home.join(".cursor"),
                };
                vec![Planned::json(dir.join("mcp.json"), Edit::server("mcpServers", server))]
            }
            (Client::Vscode, scope) => {
                let path = match scope {
                    Scope::Project(root) => root.join(".vscode").join("mcp.json"),
                    Scope::User => vscode_user_dir(home).context("no VS Code user folder is known on this system")?.join("mcp.json"),
                };
                vec![Planned::jsonc(path, Edit::server("servers", stdio_server))]
            }
            (Client::ClaudeDesktop, _) => {
                let path = claude_desktop_config(home).context("no Claude Desktop configuration folder is known on this system")?;
                vec![Planned::json(path, Edit::server("mcpServers", server))]
            }
            (Client::Windsurf, _) => {
                vec![Planned::json(home.join(".codeium").join("windsurf").join("mcp_config.json"), Edit::server("mcpServers", server))]
            }
            (Client::Zed, scope) => {
                let path = match scope {
                    Scope::Project(root) => root.join(".zed").join("settings.json"),
                    Scope::User => zed_user_settings(home),
                };
                vec![Planned::jsonc(path, Edit::server("context_servers", server))]
            }
        };
        Ok(files)
    }
}

/// Codex's home: `$CODEX_HOME`, else `~/.codex`.
fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME").filter(|dir| !dir.is_empty()).map_or_else(|| home.join(".codex"), PathBuf::from)
}

/// VS Code's user folder (its default profile), where the user's `mcp.json` lives.
fn vscode_user_dir(home: &Path) -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        Some(home.join("Library").join("Application Support").join("Code").join("User"))
    } else {
        Some(dirs::config_dir()?.join("Code").join("User"))
    }
}

/// Claude Desktop's configuration file, in the platform's configuration folder.
fn claude_desktop_config(_home: &Path) -> Option<PathBuf> {
    Some(dirs::config_dir()?.join("Claude").join("claude_desktop_config.json"))
}

/// Zed's user settings: `~/.config/zed/settings.json` (on macOS and Linux alike).
fn zed_user_settings(home: &Path) -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME").filter(|dir| !dir.is_empty()).map_or_else(|| home.join(".config"), PathBuf::from);
    config.join("zed").join("settings.json")
}

/// Whose configuration `init` writes.
pub enum Scope {
    Project(PathBuf),
    User,
}

/// A file to edit and what to put in it.
struct Planned {
    path: PathBuf,
    format: Format,
    edit: Edit,
}

impl Planned {
    /// A file the client reads as strict JSON.
    fn json(path: PathBuf, edit: Edit) -> Planned {
        Planned { path, format: Format::Json, edit }
    }

    /// A file the client reads as JSON with comments and trailing commas.
    fn jsonc(path: PathBuf, edit: Edit) -> Planned {
        Planned { path, format: Format::Jsonc, edit }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Jsonc,
    Toml,
}

enum Edit {
    /// The MCP server entry `kenning` in the table `table`, unless a server of that name exists.
    Server { table: &'static str, entry: Entry },
    /// A hook running kenning for each event the client has, unless one is there.
    Hooks(HookDialect),
}

impl Edit {
    fn server(table: &'static str, entry: Entry) -> Edit {
        Edit::Server { table, entry }
    }
}

/// A JSON object kenning writes, its keys in the order they are written.
struct Entry(Vec<(&'static str, Value)>);

impl Entry {
    /// The `kenning serve` server: `type` (for clients that want it), `command`, `args`.
    fn server(kind: Option<&'static str>, command: &str) -> Entry {
        let mut fields = Vec::new();
        if let Some(kind) = kind {
            fields.push(("type", Value::String(kind.to_owned())));
        }
        fields.push(("command", Value::String(command.to_owned())));
        fields.push(("args", json!(["serve"])));
        Entry(fields)
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(name, _)| *name == key).map(|(_, value)| value)
    }

    fn input_value(&self) -> CstInputValue {
        CstInputValue::Object(self.0.iter().map(|(key, value)| ((*key).to_owned(), input_value(value))).collect())
    }
}

/// Clients whose hooks kenning answers. Each has Claude Code's layout (event → groups of
/// `{matcher, hooks: [{type, command, timeout}]}`) under its own event names and units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDialect {
    Claude,
    Codex,
    Gemini,
}

/// One hook kenning installs: the client's event name, kenning's event, a matcher, and the
/// timeout in the client's unit.
pub struct HookSpec {
    pub client_event: &'static str,
    pub event: HookEvent,
    pub matcher: Option<&'static str>,
    pub timeout: u64,
}

impl HookDialect {
    /// The hooks kenning installs for this client.
    pub fn hooks(self) -> Vec<HookSpec> {
        let spec = |client_event, event, matcher, timeout| HookSpec { client_event, event, matcher, timeout };
        match self {
            // Claude Code's timeouts are in seconds. PostToolUse is not registered: the client
            // fires it only for calls that succeeded.
            HookDialect::Claude => HookEvent::INSTALLED
                .into_iter()
                .map(|event| {
                    let (matcher, timeout) = match event {
                        HookEvent::SessionStart => (Some("startup|resume|compact"), 10),
                        HookEvent::PostToolFailure => (Some("Bash"), 10),
                        HookEvent::PreCompact | HookEvent::Stop | HookEvent::SessionEnd => (None, 30),
                        HookEvent::UserPrompt | HookEvent::PostTool => (None, 10),
                    };
                    spec(event.claude_name(), event, matcher, timeout)
                })
                .collect(),
            // Codex takes Claude Code's event names and seconds. Its PostToolUse hands over a
            // command's output without the exit code, and a failure is never guessed from
            // words, so that event is left out.
            HookDialect::Codex => vec![
                spec("SessionStart", HookEvent::SessionStart, Some("startup|resume"), 10),
                spec("UserPromptSubmit", HookEvent::UserPrompt, None, 10),
                spec("PreCompact", HookEvent::PreCompact, None, 30),
                spec("Stop", HookEvent::Stop, None, 30),
            ],
            // Gemini CLI's timeouts are in milliseconds.
            HookDialect::Gemini => vec![
                spec("SessionStart", HookEvent::SessionStart, None, 10_000),
                spec("BeforeAgent", HookEvent::UserPrompt, None, 10_000),
                spec("AfterTool", HookEvent::PostTool, Some("run_shell_command"), 10_000),
                spec("PreCompress", HookEvent::PreCompact, None, 30_000),
                spec("AfterAgent", HookEvent::Stop, None, 30_000),
                spec("SessionEnd", HookEvent::SessionEnd, None, 30_000),
            ],
        }
    }
}

/// One file's change.
#[derive(Debug, Serialize)]
pub struct FileChange {
    pub client: &'static str,
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

/// A file after its edits, before it is written.
struct Prepared {
    client: Client,
    path: PathBuf,
    before: Option<String>,
    after: String,
    added: Vec<String>,
    kept: Vec<String>,
}

pub fn run(cwd: &Path, args: &InitArgs, json: bool) -> Result<()> {
    let home = dirs::home_dir().context("no home directory is known; set HOME")?;
    let clients = chosen_clients(&args.client, &home)?;
    let root = Project::discover(cwd, None).map_or_else(|| cwd.to_owned(), |project| project.root);
    let command = kenning_command();

    // Every file is read, checked and edited in memory first: one that cannot be read or is
    // not valid stops the run before anything is written.
    let mut prepared: Vec<Prepared> = Vec::new();
    for client in &clients {
        let scope = if args.user || client.user_only() { Scope::User } else { Scope::Project(root.clone()) };
        for planned in client.files(&scope, &home, &command)? {
            let existing = prepared.iter().position(|file| file.path == planned.path);
            let text = match existing {
                Some(index) => Some(prepared[index].after.clone()),
                None => read_optional(&planned.path)?,
            };
            let (after, added, kept) = apply(&planned, text.as_deref().unwrap_or_default(), &command)
                .with_context(|| format!("{}: kenning init changed nothing; fix the file, then run it again", planned.path.display()))?;
            match existing {
                Some(index) => {
                    let file = &mut prepared[index];
                    file.after = after;
                    file.added.extend(added);
                    file.kept.extend(kept);
                }
                None => prepared.push(Prepared { client: *client, path: planned.path, before: text, after, added, kept }),
            }
        }
    }

    let mut changes = Vec::with_capacity(prepared.len());
    for file in &prepared {
        let unchanged = file.before.as_deref() == Some(file.after.as_str());
        let action = match (&file.before, unchanged) {
            (_, true) => "unchanged",
            (Some(_), false) => "updated",
            (None, false) => "created",
        };
        if !unchanged && !args.dry_run {
            write_atomically(&file.path, &file.after)?;
        }
        let diff = if unchanged { String::new() } else { line_diff(file.before.as_deref().unwrap_or_default(), &file.after) };
        changes.push(FileChange {
            client: file.client.name(),
            path: file.path.display().to_string(),
            action,
            added: file.added.clone(),
            kept: file.kept.clone(),
            diff,
        });
    }
    // The files are written; a reader that went away (`kenning init | head`) loses only the report.
    match report(&changes, args.dry_run, json) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing the report"),
    }
}

/// The clients `--client` names: one, several separated by commas, or `all` (those found).
fn chosen_clients(names: &[String], home: &Path) -> Result<Vec<Client>> {
    let mut clients = Vec::new();
    for name in names.iter().flat_map(|name| name.split(',')).map(str::trim).filter(|name| !name.is_empty()) {
        if name == "all" {
            clients.extend(Client::ALL.into_iter().filter(|client| client.found(home)));
            continue;
        }
        let client = Client::parse(name).with_context(|| {
            format!("`--client {name}` is not a client kenning knows; use one of {}, or all", Client::ALL.map(Client::name).join(", "))
        })?;
        clients.push(client);
    }
    if clients.is_empty() && names.is_empty() {
        clients.push(Client::Claude);
    }
    if clients.is_empty() {
        bail!("`--client all` found no agent client on this machine; name one with --client (one of {})", Client::ALL.map(Client::name).join(", "));
    }
    clients.dedup();
    Ok(clients)
}

fn report(changes: &[FileChange], dry_run: bool, json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(changes).map_err(std::io::Error::other)?)?;
        return out.flush();
    }
    for change in changes {
        let verb = match (change.action, dry_run) {
            ("unchanged", _) => "unchanged",
            ("created", true) => "would create",
            ("updated", true) => "would update",
            (action, _) => action,
        };
        writeln!(out, "{verb} {} ({})", change.path, change.client)?;
        for line in &change.added {
            writeln!(out, "  + {line}")?;
        }
        for line in &change.kept {
            writeln!(out, "  = {line}")?;
        }
        if dry_run && !change.diff.is_empty() {
            write!(out, "{}", change.diff)?;
        }
    }
    if !dry_run && changes.iter().any(|change| change.action != "unchanged") {
        writeln!(out, "Restart the client (in Claude Code, or run /hooks and /mcp) to pick the changes up; `kenning doctor` checks them.")?;
    }
    out.flush()
}

/// How a client should start kenning: by name when the `kenning` on PATH is this binary, else
/// by this binary's full path.
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

/// The file's text, or `None` when there is no such file.
fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes beside the target, then renames over it: a reader never sees half a file, and an
/// interrupted run leaves the old one. The old file's permissions are kept.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let parent = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = parent.join(format!(".{name}.kenning-{}.tmp", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        if let Ok(metadata) = std::fs::metadata(path) {
            std::fs::set_permissions(&temporary, metadata.permissions())?;
        }
        std::fs::rename(&temporary, path)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

/// The text after `planned`'s edit, with what was added and what was kept.
fn apply(planned: &Planned, text: &str, command: &str) -> Result<(String, Vec<String>, Vec<String>)> {
    match planned.format {
        Format::Toml => apply_toml(planned, text),
        Format::Json | Format::Jsonc => apply_json(planned, text, command),
    }
}

fn apply_toml(planned: &Planned, text: &str) -> Result<(String, Vec<String>, Vec<String>)> {
    let Edit::Server { table, entry } = &planned.edit else { bail!("only an MCP server entry is written to TOML") };
    let mut document: toml_edit::DocumentMut = text.parse().map_err(|error| anyhow::anyhow!("not valid TOML: {error}"))?;
    let servers = document.entry(table).or_insert_with(|| {
        let mut servers = toml_edit::Table::new();
        servers.set_implicit(true);
        toml_edit::Item::Table(servers)
    });
    let Some(servers) = servers.as_table_like_mut() else { bail!("`{table}` is not a table; kenning will not overwrite it") };
    if servers.contains_key(SERVER_NAME) {
        return Ok((text.to_owned(), Vec::new(), vec![format!("{table}.{SERVER_NAME} (already registered)")]));
    }
    let mut server = toml_edit::Table::new();
    let command = entry.get("command").and_then(Value::as_str).unwrap_or(SERVER_NAME);
    server.insert("command", toml_edit::value(command));
    let mut args = toml_edit::Array::new();
    for arg in entry.get("args").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        args.push(arg);
    }
    server.insert("args", toml_edit::value(args));
    servers.insert(SERVER_NAME, toml_edit::Item::Table(server));
    Ok((document.to_string(), vec![format!("{table}.{SERVER_NAME}: {command} serve")], Vec::new()))
}

fn apply_json(planned: &Planned, text: &str, command: &str) -> Result<(String, Vec<String>, Vec<String>)> {
    let options = ParseOptions {
        allow_comments: planned.format == Format::Jsonc,
        allow_loose_object_property_names: false,
        allow_trailing_commas: planned.format == Format::Jsonc,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let blank = text.trim().is_empty();
    // A client reading strict JSON is held to it here too, so that kenning never writes into
    // a file the client would refuse.
    if planned.format == Format::Json && !blank {
        serde_json::from_str::<Value>(text).map_err(|error| anyhow::anyhow!("not valid JSON ({error})"))?;
    }
    let root = CstRootNode::parse(if blank { "{}\n" } else { text }, &options).map_err(|error| anyhow::anyhow!("not valid JSON ({error})"))?;
    let object = root.object_value().context("does not hold a JSON object")?;
    let (added, kept) = match &planned.edit {
        Edit::Server { table, entry } => merge_server(&object, table, entry)?,
        Edit::Hooks(dialect) => merge_hooks(&object, *dialect, command)?,
    };
    let mut after = root.to_string();
    if blank && !after.ends_with('\n') {
        after.push('\n');
    }
    if added.is_empty() {
        after = text.to_owned();
    }
    Ok((after, added, kept))
}

/// The object at `key` in `parent`, made when missing; an error when something else is there.
fn object_at(parent: &CstObject, key: &str, shown: &str) -> Result<CstObject> {
    parent.object_value_or_create(key).with_context(|| format!("`{shown}` is not a JSON object; kenning will not overwrite it"))
}

/// Adds the `kenning serve` MCP server under `table` unless a server named `kenning` is there.
fn merge_server(root: &CstObject, table: &str, entry: &Entry) -> Result<(Vec<String>, Vec<String>)> {
    let servers = object_at(root, table, table)?;
    if servers.get(SERVER_NAME).is_some() {
        return Ok((Vec::new(), vec![format!("{table}.{SERVER_NAME} (already registered)")]));
    }
    servers.append(SERVER_NAME, entry.input_value());
    let command = entry.get("command").and_then(Value::as_str).unwrap_or_default();
    Ok((vec![format!("{table}.{SERVER_NAME}: {command} serve")], Vec::new()))
}

/// Adds a `kenning hook EVENT` command for each of the dialect's events that has none.
fn merge_hooks(root: &CstObject, dialect: HookDialect, command: &str) -> Result<(Vec<String>, Vec<String>)> {
    let settings = root.to_serde_value().unwrap_or_else(|| json!({}));
    let mut added = Vec::new();
    let mut kept = Vec::new();
    for spec in dialect.hooks() {
        let present = hook_commands(&settings, spec.client_event).into_iter().any(|existing| is_kenning_hook(existing, spec.event));
        if present {
            kept.push(format!("hooks.{} (kenning hook {} already there)", spec.client_event, spec.event.command_name()));
            continue;
        }
        let hooks = object_at(root, "hooks", "hooks")?;
        let groups = hooks
            .array_value_or_create(spec.client_event)
            .with_context(|| format!("`hooks.{}` is not a JSON array; kenning will not overwrite it", spec.client_event))?;
        let program = if command.contains(' ') { format!("\"{command}\"") } else { command.to_owned() };
        let line = format!("{program} hook {}", spec.event.command_name());
        let mut hook = Vec::new();
        if dialect == HookDialect::Gemini {
            hook.push(("name", Value::String(format!("kenning-{}", spec.event.command_name()))));
        }
        hook.extend([("type", json!("command")), ("command", Value::String(line.clone())), ("timeout", json!(spec.timeout))]);
        let mut group = Vec::new();
        if let Some(matcher) = spec.matcher {
            group.push(("matcher".to_owned(), CstInputValue::String(matcher.to_owned())));
        }
        group.push(("hooks".to_owned(), CstInputValue::Array(vec![Entry(hook).input_value()])));
        groups.append(CstInputValue::Object(group));
        added.push(format!("hooks.{}: {line}", spec.client_event));
    }
    Ok((added, kept))
}

/// A JSON value as the syntax tree takes it, keys in their order.
fn input_value(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(flag) => CstInputValue::Bool(*flag),
        Value::Number(number) => CstInputValue::Number(number.to_string()),
        Value::String(text) => CstInputValue::String(text.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input_value).collect()),
        Value::Object(fields) => CstInputValue::Object(fields.iter().map(|(key, value)| (key.clone(), input_value(value))).collect()),
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

/// Every hook command configured for a client's event in a settings object.
pub fn hook_commands<'a>(settings: &'a Value, client_event: &str) -> Vec<&'a str> {
    let groups = settings.get("hooks").and_then(|hooks| hooks.get(client_event)).and_then(Value::as_array);
    groups
        .into_iter()
        .flatten()
        .filter_map(|group| group.get("hooks").and_then(Value::as_array))
        .flatten()
        .filter_map(|hook| hook.get("command").and_then(Value::as_str))
        .collect()
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

/// Claude Code's files for a project or the user, read by `kenning doctor`.
pub struct ClaudeFiles {
    pub mcp: PathBuf,
    pub settings: PathBuf,
    /// The project's own settings, not shared (`.claude/settings.local.json`); none for the user.
    pub local_settings: Option<PathBuf>,
}

impl ClaudeFiles {
    pub fn project(root: &Path) -> ClaudeFiles {
        ClaudeFiles {
            mcp: root.join(".mcp.json"),
            settings: root.join(".claude").join("settings.json"),
            local_settings: Some(root.join(".claude").join("settings.local.json")),
        }
    }

    pub fn user() -> Option<ClaudeFiles> {
        let home = dirs::home_dir()?;
        Some(ClaudeFiles { mcp: home.join(".claude.json"), settings: home.join(".claude").join("settings.json"), local_settings: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(format: Format, edit: Edit) -> Planned {
        Planned { path: PathBuf::from("test"), format, edit }
    }

    #[test]
    fn json_keeps_key_order_indentation_and_comments() {
        let text = "{\n    \"zeta\": 1,\n    // the team's servers\n    \"mcpServers\": {\n        \"github\": {\"command\": \"gh-mcp\"}\n    },\n    \"alpha\": [1, 2],\n}\n";
        let edit = planned(Format::Jsonc, Edit::server("mcpServers", Entry::server(None, "kenning")));
        let (after, added, _) = apply(&edit, text, "kenning").unwrap();
        assert_eq!(added.len(), 1);
        assert!(after.starts_with("{\n    \"zeta\": 1,\n    // the team's servers\n    \"mcpServers\": {\n        \"github\": {\"command\": \"gh-mcp\"},\n        \"kenning\": {\n            \"command\": \"kenning\",\n            \"args\": [\"serve\"]\n        }\n    },"), "{after}");
        assert!(after.contains("\n    \"alpha\": [1, 2],\n}"), "{after}");
        let (again, added, kept) = apply(&edit, &after, "kenning").unwrap();
        assert!(added.is_empty() && kept.len() == 1 && again == after);
    }

    #[test]
    fn strict_json_refuses_comments() {
        let edit = planned(Format::Json, Edit::server("mcpServers", Entry::server(None, "kenning")));
        let error = apply(&edit, "{\n  // no\n  \"a\": 1\n}", "kenning").unwrap_err();
        assert!(error.to_string().contains("not valid JSON"), "{error}");
    }

    #[test]
    fn toml_keeps_its_formatting() {
        let text = "# my settings\nmodel = \"o4\"   # the model\n\n[mcp_servers.github]\ncommand = \"gh-mcp\"\n";
        let edit = planned(Format::Toml, Edit::server("mcp_servers", Entry::server(None, "kenning")));
        let (after, added, _) = apply(&edit, text, "kenning").unwrap();
        assert_eq!(added.len(), 1);
        assert!(after.starts_with(text), "{after}");
        assert!(after.ends_with("[mcp_servers.kenning]\ncommand = \"kenning\"\nargs = [\"serve\"]\n"), "{after}");
        let (again, added, _) = apply(&edit, &after, "kenning").unwrap();
        assert!(added.is_empty() && again == after);
    }

    #[test]
    fn the_claude_code_plugin_installs_the_hooks_init_writes() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/claude-code/hooks/hooks.json");
        let plugin: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let edit = planned(Format::Json, Edit::Hooks(HookDialect::Claude));
        let (after, _, _) = apply(&edit, "", "kenning").unwrap();
        let written: Value = serde_json::from_str(&after).unwrap();
        assert_eq!(plugin["hooks"], written["hooks"], "{} is out of step with `kenning init`", path.display());
    }
}
