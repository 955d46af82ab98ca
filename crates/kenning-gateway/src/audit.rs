//! The audit log: one JSON line per call that reads or writes memory (a tool call, a resource
//! read, a prompt, a page or action of the web view) and per sign-in, appended to a file in the
//! data directory.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use crate::error::Error;

/// How a call ended, for the audit log and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The tool ran and succeeded.
    Ok,
    /// The tool ran and failed (an `isError` result, such as an unknown URN).
    ToolError,
    /// The request was refused before the tool ran (bad arguments, unknown tool).
    Invalid,
    /// No valid key was presented.
    Unauthorized,
    /// The key was over its rate limit.
    RateLimited,
    /// The key's scope does not allow the call: a write with a read-only key, or a domain the
    /// key may not use.
    Forbidden,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Invalid => "invalid",
            Outcome::Unauthorized => "unauthorized",
            Outcome::RateLimited => "rate_limited",
            Outcome::Forbidden => "forbidden",
        }
    }
}

/// One line of the audit log: who called what, when, how it ended and how long it took. It
/// never holds arguments or results, which may be anyone's memories.
///
/// `method` is the kind of call (`tools/call`, `resources/read`, `resources/list`,
/// `prompts/get`, `web` for a page or action of the web view, `sign_in`), `tool` what was
/// called: the tool, the resource's URI, the prompt, or the web view's path.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry<'a> {
    /// RFC 3339 with milliseconds, UTC.
    pub time: String,
    /// The key's identity; absent when no key was needed or none was valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<&'a str>,
    /// The key's public id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    pub method: &'a str,
    pub tool: &'a str,
    pub outcome: Outcome,
    pub duration_ms: f64,
    /// The MCP session, when the transport has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<&'a str>,
}

/// An append-only JSON-lines file. Each entry is one `write` on a file opened for appending, so
/// lines from concurrent calls, or from two servers sharing the file, never interleave.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl AuditLog {
    pub fn open(path: impl Into<PathBuf>) -> Result<AuditLog, Error> {
        let path = path.into();
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            crate::files::create_private_dir(dir).map_err(Error::io(dir))?;
        }
        let file = crate::files::private_options().create(true).append(true).open(&path).map_err(Error::io(&path))?;
        Ok(AuditLog { path, file: Mutex::new(file) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an entry. A failed write is logged, not returned: the call it records has
    /// already happened, and refusing its answer would not undo it.
    pub fn record(&self, entry: &AuditEntry<'_>) {
        let mut line = match serde_json::to_vec(entry) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "could not encode an audit entry");
                return;
            }
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = file.write_all(&line) {
            tracing::error!(%error, path = %self.path.display(), "could not write the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_appended_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let entry = AuditEntry {
            time: "2026-11-23T10:00:00.000Z".into(),
            identity: Some("ci-bot"),
            key: Some("1a2b3c4d"),
            method: "tools/call",
            tool: "memory_recall",
            outcome: Outcome::Ok,
            duration_ms: 1.5,
            session: None,
        };
        log.record(&entry);
        log.record(&AuditEntry { outcome: Outcome::RateLimited, identity: None, key: None, ..entry.clone() });
        drop(log);
        let reopened = AuditLog::open(&path).unwrap();
        reopened.record(&AuditEntry { tool: "memory_capture", ..entry });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["identity"], "ci-bot");
        assert_eq!(lines[1]["outcome"], "rate_limited");
        assert!(lines[1].get("identity").is_none());
        assert_eq!(lines[2]["tool"], "memory_capture");
        assert_eq!(lines[2]["method"], "tools/call");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
