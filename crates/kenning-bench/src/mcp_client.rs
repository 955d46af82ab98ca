//! A minimal MCP client for the stdio transport, enough to time the real `kenning serve`.
//!
//! The protocol on stdio is newline-delimited JSON-RPC: the client sends `initialize`, waits for
//! its result, sends `notifications/initialized`, then calls tools. Requests are sent one at a
//! time and read back on the same thread, so a timing covers exactly writing the request,
//! the server's work and reading the response, with no thread hand-off in between. An SDK
//! client would add its own overhead on top, which is not what the benchmark is after.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::report::status_kib;

/// The newest protocol revision that still opens with an `initialize` handshake.
const PROTOCOL_VERSION: &str = "2025-11-25";
/// How long a server may take to exit once its stdin closes before it is killed and the run
/// fails. Generous, because the time to exit is itself measured: a server finishes background
/// work (building search indexes) before it exits.
const EXIT_GRACE: Duration = Duration::from_secs(120);

/// How to start `kenning serve` on a given store, isolated from the user's own setup.
pub struct ServerCommand {
    pub binary: PathBuf,
    pub user_db: PathBuf,
    /// An empty folder: no configuration file of the user's applies.
    pub config_dir: PathBuf,
    /// Where the server runs, and its data directory; not inside a git repository.
    pub work_dir: PathBuf,
    /// `KENNING_EMBEDDER`, the name the configuration uses.
    pub embedder: &'static str,
    /// `KENNING_DURABILITY`, as the benchmark's own store.
    pub durability: &'static str,
    pub model_dir: Option<PathBuf>,
    /// The server's standard error (its logs), kept for when it fails.
    pub log: PathBuf,
}

impl ServerCommand {
    fn command(&self) -> Result<Command> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let mut command = Command::new(&self.binary);
        command.arg("serve").current_dir(&self.work_dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(log);
        // The benchmark's own environment may carry settings meant for another store or model.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("KENNING_") {
                command.env_remove(key);
            }
        }
        command
            .env("KENNING_USER_DB", &self.user_db)
            .env("KENNING_DATA_DIR", &self.work_dir)
            .env("KENNING_CONFIG_DIR", &self.config_dir)
            .env("KENNING_PROJECT", "false")
            .env("KENNING_EMBEDDER", self.embedder)
            .env("KENNING_DURABILITY", self.durability);
        if let Some(dir) = &self.model_dir {
            command.env("KENNING_MODEL_DIR", dir);
        }
        Ok(command)
    }

    /// Starts a server and completes the handshake; also returns when the process was spawned
    /// and the time from then to reading the `initialize` result.
    pub fn start(&self) -> Result<(McpServer, Instant, Duration)> {
        let started = Instant::now();
        let mut child = self.command()?.spawn().with_context(|| {
            format!(
                "starting {} (build it with `cargo build --release -p kenning`, or pass --kenning-bin)",
                self.binary.display()
            )
        })?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut server = McpServer { child, stdin: Some(stdin), stdout, next_id: 1, log: self.log.clone() };
        let result = server.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "kenning-bench", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        let cold_start = started.elapsed();
        if result.get("serverInfo").is_none() {
            bail!("the initialize result has no serverInfo: {result}");
        }
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok((server, started, cold_start))
    }
}

/// A running `kenning serve` speaking MCP on its stdin and stdout.
pub struct McpServer {
    child: Child,
    /// Open until `shut_down` closes it.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    log: PathBuf,
}

impl McpServer {
    /// Calls a tool and returns its structured result; a tool error is an error here.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let result = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
            bail!("{name} failed: {result}");
        }
        Ok(result.get("structuredContent").cloned().unwrap_or(result))
    }

    /// A field of the server's `/proc/PID/status` given in kB (`VmHWM:`, its peak resident
    /// set so far; `RssAnon:` and `RssFile:`, what it holds now of its own memory and of mapped
    /// files), in bytes.
    pub fn status_bytes(&self, key: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status_kib(&status, key)
    }

    /// Closes the server's stdin, which ends the session, waits for it to exit and returns how
    /// long that took.
    pub fn shut_down(mut self) -> Result<Duration> {
        let closed = Instant::now();
        drop(self.stdin.take());
        loop {
            if let Some(status) = self.child.try_wait()? {
                let exit = closed.elapsed();
                if !status.success() {
                    bail!("the server exited with {status}{}", log_tail(&self.log));
                }
                return Ok(exit);
            }
            if closed.elapsed() > EXIT_GRACE {
                bail!("the server did not exit within {EXIT_GRACE:?} of its stdin closing; killed it");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.stdout.read_line(&mut line).context("reading from the server")?;
            if read == 0 {
                bail!("the server closed its stdout while `{method}` was pending{}", log_tail(&self.log));
            }
            let message: Value = serde_json::from_str(&line)
                .with_context(|| format!("the server wrote a line that is not JSON: {}", line.trim_end()))?;
            // Notifications (logs, list changes) may arrive between requests; only the answer
            // to this request ends the wait.
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("`{method}` failed: {error}");
            }
            return message.get("result").cloned().with_context(|| format!("`{method}` got a response without a result: {message}"));
        }
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        let stdin = self.stdin.as_mut().expect("stdin stays open until shut_down");
        stdin.write_all(&line).context("writing to the server")?;
        stdin.flush().context("writing to the server")
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // A server left behind by an error (or one that ignored its stdin closing) would outlive
        // the benchmark holding the store open. After a clean exit there is nothing to kill.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last lines the server logged, to explain a failure.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    if tail.is_empty() { String::new() } else { format!("; its log ends:\n{tail}") }
}
