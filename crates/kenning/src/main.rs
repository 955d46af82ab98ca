//! The `kenning` binary: command line, configuration, and the composition of stores,
//! embedder, engine and MCP server.

mod cli;
mod compose;
mod consolidate;
mod config;
mod decisions;
mod doctor;
mod hook;
#[cfg(unix)]
mod hook_socket;
mod init;
mod keys;
mod llm;
mod project;
mod protocols;
mod render;
mod trust;
mod workflows;

use std::collections::BTreeMap;
use std::io::{BufWriter, Read, Write};

use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use kenning_core::{CaptureInput, LinkInput, PurgeMode, UpdateInput};
use kenning_engine::{ExportLine, RecallRequest};
use kenning_mcp::{HttpAccess, KenningServer, ServerOptions};
use kenning_gateway::{AuditLog, Authenticator, KeyStore, RateLimiter};
use serde::Serialize;

use crate::cli::{Cli, Command, ServeArgs};
use crate::config::Config;
use crate::project::Project;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // A hook must not fail the agent over an argument (exit 2 would block the prompt).
        Err(error) if hook::is_hook_invocation(&args) && error.use_stderr() => return hook::run_despite(&args, &error),
        Err(error) => error.exit(),
    };
    // A hook answers before anything else can fail: it never returns an error to the agent.
    if let Command::Hook(args) = &cli.command {
        return hook::run(args);
    }
    // stdout belongs to the MCP stdio transport and to command output: logs go to stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KENNING_LOG").unwrap_or_else(|_| "warn,rmcp=error".into()),
        )
        .init();
    // A panic is a bug: the user gets one line on stderr saying so and where, not a backtrace;
    // stdout stays clean for the stdio transport. A panic inside a tool call is also answered
    // to the client as an internal error (-32603).
    std::panic::set_hook(Box::new(|info| {
        let message = panic_message(info.payload());
        let place = info.location().map(|location| format!(" at {}:{}", location.file(), location.line())).unwrap_or_default();
        eprintln!("kenning: internal error{place}: {message} (this is a bug; please report it)");
    }));
    let outcome = if matches!(cli.command, Command::Doctor) {
        doctor::run(cli.json)
    } else {
        run(cli).map(|()| std::process::ExitCode::SUCCESS)
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("kenning: {}", describe(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Renders an error chain; invalid input shows its field, problem, value and suggestion.
/// What a panic said: its message when it was given as text (`panic!` with or without
/// arguments), or nothing.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload.downcast_ref::<&str>().map(|text| (*text).to_owned()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default()
}

fn describe(error: &anyhow::Error) -> String {
    if let Some(kenning_engine::Error::Invalid(field)) = error.downcast_ref::<kenning_engine::Error>() {
        return format!(
            "invalid `{}`: {}\n  received: {}\n  suggestion: {}",
            field.field, field.problem, field.received, field.suggestion
        );
    }
    format!("{error:#}")
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        // Keys and trust touch no store: they work even where the stores cannot be opened.
        Command::Keys { command } => keys::run(cli.json, command),
        Command::Trust(args) => trust::run(cli.json, args),
        command => run_with_stores(cli.json, command),
    }
}

fn run_with_stores(json: bool, command: Command) -> Result<()> {
    let cwd = std::env::current_dir().context("reading the working directory")?;
    if let Command::Init(args) = &command {
        return init::run(&cwd, args, json);
    }
    let project_hint = Project::discover(&cwd, None);
    let config = Config::load(project_hint.as_ref().map(|project| project.root.as_path()))?;
    let project = match &config.project_id {
        Some(id) => Project::discover(&cwd, Some(id)),
        None => project_hint,
    };
    if let Command::Sync { remote, setup: true } = &command {
        let project = project.as_ref().context("`kenning sync --setup` needs a git repository: run it inside one")?;
        let remote = remote.as_deref().unwrap_or("origin");
        let added = kenning_git::setup_refspecs(&project.root, remote)?;
        let summary = SetupSummary { remote: remote.to_owned(), added };
        return print(json, &summary, |summary| {
            if summary.added.is_empty() {
                format!("{} already carries the notes in plain git fetch and push\n", summary.remote)
            } else {
                format!("added to the git config:\n  {}\n", summary.added.join("\n  "))
            }
        });
    }
    let services = compose::services(&config, project.as_ref())?;
    let memory = services.memory.clone();
    match command {
        Command::Serve(args) => serve(services, &config, project.as_ref(), args),
        Command::Ui(args) => ui(services, &config, args),
        Command::Capture(args) => {
            let content = if args.content == "-" { read_stdin()? } else { args.content };
            let input = CaptureInput {
                content,
                title: args.title,
                kind: args.kind,
                namespace: args.namespace,
                tags: args.tags,
                category: args.category,
                source: Some(args.source.unwrap_or_else(|| "told-by-user".to_owned())),
                confidence: args.confidence,
                salience: args.salience,
                event_time: args.event_time,
                links: args.links.into_iter().map(|target| LinkInput { target, relation: None }).collect(),
                metadata: parse_metadata(&args.metadata)?,
                author: None,
            };
            let outcome = memory.capture(input, args.domain.as_deref())?;
            print(json, &outcome, render::capture)
        }
        Command::Recall(args) => {
            let page = memory.recall(RecallRequest {
                query: args.query,
                limit: args.limit,
                cursor: args.cursor,
                max_tokens: args.max_tokens,
                detail: args.detail,
                kinds: args.kinds,
                namespaces: args.namespaces,
                tags: args.tags,
                domains: args.domains,
                since: args.since,
                until: args.until,
                min_confidence: args.min_confidence,
                branch: args.branch,
                file: args.file.as_deref().map(project::path_from_here),
                as_of: args.as_of,
                include_dormant: args.include_dormant,
            })?;
            print(json, &page, render::recall)
        }
        Command::Get { urn } => print(json, &memory.get(&urn)?, render::memory),
        Command::Update(args) => {
            let input = UpdateInput {
                reason: args.reason,
                title: args.title,
                content: args.content,
                kind: args.kind,
                tags: args.tags,
                confidence: args.confidence,
                salience: args.salience,
                ..UpdateInput::default()
            };
            print(json, &memory.update(&args.urn, input)?, render::change)
        }
        Command::Forget { urn, reason } => print(json, &memory.forget(&urn, &reason)?, render::change),
        Command::Restore { urn, reason } => print(json, &memory.restore(&urn, &reason)?, render::change),
        Command::History { urn } => print(json, &memory.history(&urn)?, render::history),
        Command::Promote { urn, to } => print(json, &memory.promote(&urn, &to)?, render::capture),
        Command::Status => print(json, &memory.status()?, render::status),
        Command::Reindex => {
            let report = memory.reindex(64)?;
            print(json, &report, |report| {
                format!(
                    "re-indexed {} memories for full-text search; embedded {} with {}\n",
                    report.text_indexed,
                    report.embedded,
                    report.model.as_deref().unwrap_or("no model (none configured)")
                )
            })
        }
        Command::Hook(_) | Command::Init(_) | Command::Doctor => Err(anyhow!("this command is answered before the stores open")),
        Command::Sync { remote, .. } => {
            let report = memory.sync(None, remote.as_deref())?;
            print(json, &report, render::sync)
        }
        Command::Consolidate(args) => consolidate::run(&memory, json, args),
        Command::Decisions { command } => decisions::run(&services.decisions, json, command),
        Command::Workflow { command } => workflows::run(&services.memory, json, command),
        Command::Protocol { command } => protocols::run(&services.decisions, json, command),
        Command::Keys { .. } | Command::Trust(_) => unreachable!("`kenning keys` and `kenning trust` are run before the stores are opened"),
        Command::Calibration(args) => decisions::calibration(&services.decisions, json, args),
        Command::Export { domain, output, no_vectors, author } => {
            let mut writer: Box<dyn Write> = match &output {
                // An export holds every memory: readable by its owner alone, as the stores are.
                Some(path) => Box::new(BufWriter::new(
                    kenning_gateway::private_options()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(path)
                        .with_context(|| format!("creating {}", path.display()))?,
                )),
                None => Box::new(BufWriter::new(std::io::stdout().lock())),
            };
            let write_line = |mut line: ExportLine| {
                if no_vectors {
                    line.embedding = None;
                }
                serde_json::to_writer(&mut writer, &line).map_err(|error| kenning_engine::Error::Storage(error.to_string()))?;
                writer.write_all(b"\n").map_err(|error| kenning_engine::Error::Storage(error.to_string()))
            };
            let count = match author.as_deref() {
                Some(author) => memory.export_authored(author, domain.as_deref(), write_line)?,
                None => memory.export(domain.as_deref(), write_line)?,
            };
            writer.flush()?;
            eprintln!("exported {count} memories");
            Ok(())
        }
        Command::Purge { author, domain, dry_run, yes } => {
            if !dry_run && !yes {
                return Err(kenning_engine::Error::Invalid(kenning_core::FieldError::new(
                    "yes",
                    "is required: a purge deletes for good and cannot be undone",
                    "absent",
                    "run with --dry-run to see what would be removed, then with --yes to remove it",
                ))
                .into());
            }
            let mode = if yes { PurgeMode::Apply } else { PurgeMode::DryRun };
            let purged = memory.purge_authored(&author, domain.as_deref(), mode)?;
            let report = PurgeSummary { author, dry_run, domains: purged };
            print(json, &report, render::purge)
        }
        Command::Import { file, into } => {
            let text = if file.as_os_str() == "-" {
                read_stdin()?
            } else {
                std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?
            };
            let mut lines = Vec::new();
            for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
                let parsed: ExportLine = serde_json::from_str(line)
                    .with_context(|| format!("line {} of {} is not an export record", number + 1, file.display()))?;
                lines.push(parsed);
            }
            let report = memory.import(lines, into.as_deref())?;
            print(json, &report, |report| {
                let redacted = match report.redacted {
                    0 => String::new(),
                    1 => "; 1 secret was replaced by [REDACTED:kind]".to_owned(),
                    n => format!("; {n} secrets were replaced by [REDACTED:kind]"),
                };
                format!("read {}, imported {}, skipped {} (already present or duplicates){redacted}\n", report.read, report.written, report.skipped)
            })
        }
    }
}

/// What `kenning purge` removed, or would remove.
#[derive(Serialize)]
pub(crate) struct PurgeSummary {
    pub(crate) author: String,
    pub(crate) dry_run: bool,
    pub(crate) domains: Vec<kenning_engine::DomainPurge>,
}

/// What `kenning sync --setup` changed.
#[derive(Serialize)]
struct SetupSummary {
    remote: String,
    added: Vec<String>,
}

fn serve(services: compose::Services, config: &Config, project: Option<&Project>, args: ServeArgs) -> Result<()> {
    let options = ServerOptions {
        toolsets: args.toolsets.or_else(|| config.toolsets.clone()),
        read_only: args.read_only || config.read_only,
    };
    // The stores' search indexes are opened (or built) on a thread of their own while the rest
    // of the server starts and the client's handshake runs, so that a first recall finds them
    // ready; nothing waits for it but the first search.
    let warming = services.memory.clone();
    std::thread::Builder::new().name("kenning-warm-up".to_owned()).spawn(move || {
        if let Err(error) = warming.warm_up() {
            tracing::warn!(%error, "could not prepare the search indexes");
        }
    })?;
    let protocols = protocols::service(&services.decisions)?;
    let code = compose::code_service(&services, project, &options)?;
    let (memory, decisions) = (services.memory.clone(), services.decisions.clone());
    // The session's server (an agent starts it on stdio) also answers the session's quick hooks,
    // for as long as it runs; a server on HTTP serves clients elsewhere and does not.
    #[cfg(unix)]
    let _hooks = match args.http {
        None => hook_socket::endpoint(config, project)
            .and_then(|socket| hook_socket::Listener::start(socket, memory.clone(), decisions.clone(), services.project_id.clone())),
        Some(_) => None,
    };
    let server = KenningServer::new(services.memory, services.decisions, &options)
        .map_err(kenning_engine::Error::Invalid)?
        .with_protocols(protocols)
        .with_code(code);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match args.http {
            None => kenning_mcp::serve_stdio(server).await?,
            Some(address) => {
                let (listener, access) = http_access(config, &address).await?;
                // Registered before the address is announced: a client that interrupts the server
                // as soon as it is announced then stops it cleanly instead of killing it.
                let shutdown = interrupted()?;
                let address = listener.local_addr()?;
                if args.ui {
                    // The web view answers loopback only (its Host rule), so it is not offered elsewhere.
                    if !address.ip().is_loopback() {
                        bail!("--ui serves the web view on loopback only; serve on 127.0.0.1:PORT, or run `kenning ui` beside this server");
                    }
                    let web = kenning_web::Web::new(memory, decisions, access.clone(), kenning_web::WebOptions { read_only: options.read_only })?;
                    eprintln!("kenning: serving MCP at http://{address}/mcp");
                    eprintln!("kenning: serving the web view at http://{address}/");
                    kenning_mcp::serve_http_with(server, listener, access, kenning_web::routes(web), shutdown).await?;
                } else {
                    eprintln!("kenning: serving MCP at http://{address}/mcp");
                    kenning_mcp::serve_http(server, listener, access, shutdown).await?;
                }
            }
        }
        Ok(())
    })
}

/// Serves the web view on loopback, guarded by the same keys, limits and audit log as
/// `serve --http`.
fn ui(services: compose::Services, config: &Config, args: cli::UiArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let (listener, access) = http_access(config, &format!("127.0.0.1:{}", args.port)).await?;
        let options = kenning_web::WebOptions { read_only: args.read_only || config.read_only };
        let web = kenning_web::Web::new(services.memory, services.decisions, access, options)?;
        let shutdown = interrupted()?;
        eprintln!("kenning: serving the web view at http://{}/", listener.local_addr()?);
        kenning_web::serve(web, listener, shutdown).await?;
        Ok(())
    })
}

/// Binds the HTTP address and sets up what guards it: the API keys (required off loopback,
/// where the server refuses to start without an active one), the rate limits and the audit log.
async fn http_access(config: &Config, address: &str) -> Result<(tokio::net::TcpListener, HttpAccess)> {
    // A bare port means that port on loopback.
    let address = if address.parse::<u16>().is_ok() { format!("127.0.0.1:{address}") } else { address.to_owned() };
    let resolved: Vec<std::net::SocketAddr> = tokio::net::lookup_host(&address)
        .await
        .with_context(|| format!("--http `{address}` is not HOST:PORT (e.g. 127.0.0.1:8080) or a port"))?
        .collect();
    let loopback = !resolved.is_empty() && resolved.iter().all(|resolved| resolved.ip().is_loopback());
    let data_dir = Config::data_dir()?;
    let authenticator = Authenticator::new(KeyStore::new(keys::key_file()?), !loopback)?;
    let (keys, required) = authenticator.current()?;
    if !loopback && keys.active() == 0 {
        bail!(
            "refusing to serve on {address} without authentication: every address but loopback needs API keys, and {} holds no active one.\n  \
             Create one with `kenning keys create --name NAME` (clients send it as `Authorization: Bearer …`), \
             or serve on loopback with `--http 127.0.0.1:PORT`.",
            authenticator.store().path().display()
        );
    }
    let listener = tokio::net::TcpListener::bind(resolved.as_slice()).await.with_context(|| format!("binding {address}"))?;
    let audit = AuditLog::open(data_dir.join("audit.jsonl"))?;
    if required {
        eprintln!("kenning: API keys required ({} active); audit log {}", keys.active(), audit.path().display());
    } else {
        eprintln!("kenning: no API keys configured, loopback only: requests are not authenticated; audit log {}", audit.path().display());
    }
    let access = HttpAccess {
        authenticator: Arc::new(authenticator),
        limiter: Arc::new(RateLimiter::new(config.rate_limits)),
        audit: Some(Arc::new(audit)),
    };
    Ok((listener, access))
}

/// Resolves on Ctrl-C (SIGINT); the handler is in place when this returns.
#[cfg(unix)]
fn interrupted() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    Ok(async move {
        interrupt.recv().await;
    })
}

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
fn interrupted() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

fn print<T: Serialize>(json: bool, value: &T, human: impl Fn(&T) -> String) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, value)?;
        writeln!(stdout)?;
    } else {
        stdout.write_all(human(value).as_bytes())?;
    }
    Ok(())
}

fn read_stdin() -> Result<String> {
    let mut text = String::new();
    std::io::stdin().lock().read_to_string(&mut text).context("reading standard input")?;
    Ok(text)
}

fn parse_metadata(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(key, value)| (key.trim().to_owned(), value.to_owned()))
                .ok_or_else(|| anyhow!("--meta `{pair}` is not KEY=VALUE; write e.g. --meta turn_id=D1:3"))
        })
        .collect()
}

