//! The protocols a server or `kenning protocol` runs: the shipped ones, then the user's
//! (`{config dir}/protocols/`), then the project's (`.kenning/protocols/` at the repository
//! root), each folder replacing protocols of the same name; and `kenning protocol list | run`,
//! which prompts step by step in a terminal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;
use kenning_engine::protocols::{ProtocolList, SessionView};
use kenning_engine::{DecisionService, ProtocolService};
use kenning_protocol::Library;

use crate::print;

#[derive(Debug, Subcommand)]
pub enum ProtocolCommand {
    /// List the protocols, with any file that was refused and why.
    List,
    /// Run a protocol, asking each question in the terminal; nothing is written unless it completes.
    Run {
        name: String,
        /// An input of the protocol as `name=value`; repeatable.
        #[arg(long = "input", value_name = "NAME=VALUE")]
        inputs: Vec<String>,
    },
}

/// The folders protocol files are loaded from, in order: later ones replace earlier ones. The
/// repository's folder counts only where it resolves inside the repository.
fn folders(repository_root: Option<&std::path::Path>) -> Vec<PathBuf> {
    let repository = repository_root.and_then(|root| {
        let root = std::fs::canonicalize(root).ok()?;
        std::fs::canonicalize(root.join(".kenning").join("protocols")).ok().filter(|folder| folder.starts_with(&root))
    });
    crate::config::Config::config_dir().map(|dir| dir.join("protocols")).into_iter().chain(repository).collect()
}

/// The protocol service over the shipped protocols and the user's and project's folders, read
/// when a protocol is first listed or run. A file that is refused is logged then and listed by
/// `protocol_list`; the others still load.
pub fn service(decisions: &Arc<DecisionService>) -> Result<ProtocolService> {
    let folders = folders(decisions.memory().repository_root());
    let service = ProtocolService::loading(decisions.clone(), move || {
        let mut library = Library::shipped();
        for folder in &folders {
            library.load_dir(folder);
        }
        for problem in &library.problems {
            tracing::warn!(%problem, "a protocol file was refused");
        }
        library
    });
    Ok(match idle_minutes()? {
        Some(minutes) => service.with_idle_timeout(chrono::TimeDelta::minutes(minutes)),
        None => service,
    })
}

const IDLE_VARIABLE: &str = "KENNING_PROTOCOL_IDLE_MINUTES";

/// `KENNING_PROTOCOL_IDLE_MINUTES`: how long a session may wait for its next answer (default 60).
fn idle_minutes() -> Result<Option<i64>> {
    let Ok(text) = std::env::var(IDLE_VARIABLE) else { return Ok(None) };
    match text.trim().parse::<i64>() {
        Ok(minutes) if (1..=60 * 24 * 30).contains(&minutes) => Ok(Some(minutes)),
        _ => Err(kenning_engine::Error::Invalid(kenning_core::FieldError::new(
            IDLE_VARIABLE,
            "is not a number of minutes from 1 to 43200",
            text.as_str(),
            "set it to the minutes a protocol session may wait for an answer, e.g. 60",
        ))
        .into()),
    }
}

pub fn run(decisions: &Arc<DecisionService>, json: bool, command: ProtocolCommand) -> Result<()> {
    let protocols = service(decisions)?;
    match command {
        ProtocolCommand::List => print(json, &protocols.list(), table),
        ProtocolCommand::Run { name, inputs } => {
            let mut given = BTreeMap::new();
            for input in inputs {
                let Some((key, value)) = input.split_once('=') else { bail!("--input takes NAME=VALUE, got `{input}`") };
                given.insert(key.trim().to_owned(), serde_json::Value::String(value.to_owned()));
            }
            let mut view = protocols.start(&name, given)?;
            let stdin = std::io::stdin();
            let mut lines = stdin.lock().lines();
            if let Some(skill) = &view.skill {
                if !json {
                    eprintln!("{skill}");
                }
            }
            while view.status == "active" {
                let stderr = &mut std::io::stderr().lock();
                writeln!(stderr, "{}", prompt(&view))?;
                write!(stderr, "> ")?;
                stderr.flush()?;
                let Some(line) = lines.next().transpose()? else {
                    protocols.abort(&view.session_id)?;
                    bail!("the input ended before the protocol did; nothing was written");
                };
                // A line that is JSON (a number, a list) is taken as such, anything else as text.
                let answer = serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line));
                view = protocols.answer(&view.session_id, answer)?;
            }
            print(json, &view, done)
        }
    }
}

fn table(list: &ProtocolList) -> String {
    let mut out = String::new();
    for protocol in &list.protocols {
        let _ = writeln!(out, "{:<18} {}  ({})", protocol.name, protocol.description, protocol.source);
    }
    for problem in &list.problems {
        let _ = writeln!(out, "refused: {problem}");
    }
    out
}

fn prompt(view: &SessionView) -> String {
    let mut out = String::new();
    if let Some(problem) = &view.problem {
        let _ = writeln!(out, "Not accepted: {problem}.");
    }
    if let Some(step) = &view.step {
        let _ = writeln!(out, "[{} / {}] {}", step.protocol, step.step, step.question);
        let _ = writeln!(out, "  expects: {}{}", step.expects, if step.optional { " (optional: leave empty to skip)" } else { "" });
        for example in &step.good_examples {
            let _ = writeln!(out, "  good: {example}");
        }
        for example in &step.bad_examples {
            let _ = writeln!(out, "  bad: {example}");
        }
    }
    out
}

fn done(view: &SessionView) -> String {
    let mut out = format!("{}\n", view.message);
    for written in &view.written {
        let _ = writeln!(out, "  {} {}  {}", written.kind, written.urn, written.title);
    }
    out
}
