//! The session's server answers the quick hooks over its socket, and a hook that finds no live
//! server answers alone: the same answer either way.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use crate::{Sandbox, hook};

/// `kenning serve` on stdio in the repository, as an agent starts it, with the hooks' settings.
fn start_server(sandbox: &Sandbox) -> Child {
    let mut child = sandbox
        .command(&sandbox.repo(), &["serve"])
        .env("KENNING_EMBEDDER", "none")
        .env("KENNING_LOG", "kenning=debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kenning serve");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    writeln!(child.stdin.as_mut().unwrap(), "{initialize}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("\"result\""), "the server answers the handshake: {line}");
    child
}

/// Closes the server's input, as the agent does at the session's end; returns its log.
fn stop_server(mut child: Child) -> String {
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    log
}

fn sockets(sandbox: &Sandbox) -> Vec<PathBuf> {
    let folder = sandbox.path("data").join("run");
    std::fs::read_dir(folder).map(|entries| entries.flatten().map(|entry| entry.path()).collect()).unwrap_or_default()
}

fn prompt(sandbox: &Sandbox) -> Value {
    json!({"session_id": "s1", "cwd": sandbox.repo(), "hook_event_name": "UserPromptSubmit", "prompt": "why does the staging deploy fail?"})
}

fn answer(sandbox: &Sandbox, event: &str, input: &Value) -> String {
    let output = hook(sandbox, event, input.to_string().as_bytes());
    assert_eq!(output.status.code(), Some(0));
    String::from_utf8(output.stdout).unwrap()
}

fn captured(sandbox: &Sandbox, content: &str) {
    let capture = sandbox.run(&sandbox.repo(), &["capture", content, "--namespace", "blockers"]);
    assert!(capture.status.success(), "{}", String::from_utf8_lossy(&capture.stderr));
}

fn failure(sandbox: &Sandbox) -> Value {
    json!({"session_id": "s1", "cwd": sandbox.repo(), "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
        "tool_input": {"command": "cargo test -p billing"}, "error": "Exit code 101\ntest billing::webhook ... FAILED\nthe clock is not UTC", "is_interrupt": false})
}

#[test]
fn a_hook_beside_the_session_server_is_answered_by_it_with_the_answer_it_would_give_alone() {
    let sandbox = Sandbox::new();
    captured(&sandbox, "Blocked: the staging deploy fails because the staging certificate expired");
    let lesson = sandbox.run(&sandbox.repo(), &["capture", "The billing webhook test fails when the clock is not UTC: run it with TZ=UTC", "--namespace", "learnings"]);
    assert!(lesson.status.success());
    let alone = [answer(&sandbox, "user-prompt", &prompt(&sandbox)), answer(&sandbox, "post-tool-failure", &failure(&sandbox))];
    assert!(alone[0].contains("staging certificate") && alone[1].contains("TZ=UTC"), "{alone:?}");

    let server = start_server(&sandbox);
    assert_eq!(sockets(&sandbox).len(), 1, "the server listens for hooks");
    let served = [answer(&sandbox, "user-prompt", &prompt(&sandbox)), answer(&sandbox, "post-tool-failure", &failure(&sandbox))];
    // What another process stores while the server runs reaches the next hook it answers.
    captured(&sandbox, "Blocked: the release train waits for the payments freeze to end");
    let later = json!({"session_id": "s1", "cwd": sandbox.repo(), "hook_event_name": "UserPromptSubmit", "prompt": "when does the payments freeze end?"});
    let fresh = answer(&sandbox, "user-prompt", &later);
    let log = stop_server(server);

    assert!(fresh.contains("payments freeze"), "{fresh}");

    assert_eq!(served, alone, "the server answers as the hook would alone");
    assert!(log.contains("answered a hook event=\"user-prompt\"") && log.contains("answered a hook event=\"post-tool-failure\""), "{log}");
    assert_eq!(log.matches("answered a hook").count(), 3, "{log}");
    assert!(sockets(&sandbox).is_empty(), "the socket goes with the server");
    assert!(!sandbox.path("data").join("hooks.log").exists());
}

#[test]
fn a_hook_answers_alone_when_the_server_was_killed_and_the_next_server_replaces_its_socket() {
    let sandbox = Sandbox::new();
    captured(&sandbox, "Blocked: the staging deploy fails because the staging certificate expired");
    let alone = answer(&sandbox, "user-prompt", &prompt(&sandbox));

    let mut killed = start_server(&sandbox);
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert_eq!(sockets(&sandbox).len(), 1, "a killed server leaves its socket behind");
    assert_eq!(answer(&sandbox, "user-prompt", &prompt(&sandbox)), alone, "answered alone");

    let next = start_server(&sandbox);
    assert_eq!(answer(&sandbox, "user-prompt", &prompt(&sandbox)), alone);
    let log = stop_server(next);
    assert!(log.contains("answered a hook event=\"user-prompt\""), "the next server took the socket over: {log}");
    assert!(!sandbox.path("data").join("hooks.log").exists());
}
