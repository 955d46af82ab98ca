//! `kenning serve` on every kind of standard stream a client hands it: the socket pairs Node's
//! `child_process` makes, the pipes Python's `subprocess` makes (polled by the server's runtime),
//! and a regular file (read through tokio's blocking streams).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use crate::Sandbox;

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

fn serve(sandbox: &Sandbox) -> std::process::Command {
    let mut command = sandbox.command(&sandbox.repo(), &["serve"]);
    command.env("KENNING_EMBEDDER", "none").stderr(Stdio::piped());
    command
}

/// Sends `request` and reads lines until the answer with the request's id, skipping
/// notifications.
fn ask(write: &mut impl Write, read: &mut impl BufRead, request: &Value) -> Value {
    writeln!(write, "{request}").expect("the server reads its input");
    write.flush().expect("flushed");
    loop {
        let mut line = String::new();
        assert!(read.read_line(&mut line).expect("the server writes its output") > 0, "the server closed its output before answering {request}");
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        if answer.get("id") == request.get("id") {
            return answer;
        }
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut log = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut log).expect("stderr is text");
    log
}

fn non_blocking(fd: &impl AsFd) -> bool {
    // SAFETY: F_GETFL reads the status flags of a descriptor the caller keeps open.
    let flags = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL failed: {}", std::io::Error::last_os_error());
    flags & libc::O_NONBLOCK != 0
}

#[test]
fn a_server_spawned_on_socket_pairs_as_node_spawns_it_answers_every_request() {
    let sandbox = Sandbox::new();
    let (mut to_server, server_stdin) = UnixStream::pair().expect("a socket pair");
    let (from_server, server_stdout) = UnixStream::pair().expect("a socket pair");
    let mut child = serve(&sandbox)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(server_stdin)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(server_stdout)))
        .spawn()
        .expect("spawn kenning serve");
    let mut from_server = BufReader::new(from_server);

    let handshake = ask(&mut to_server, &mut from_server, &initialize(1));
    assert!(handshake.get("result").is_some(), "{handshake}");
    writeln!(to_server, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    let captured = ask(&mut to_server, &mut from_server, &call(2, "memory_capture", json!({"content": "The deploy script needs the VPN on", "namespace": "learnings"})));
    assert!(captured.get("result").is_some() && captured["result"]["isError"] != json!(true), "{captured}");
    let recalled = ask(&mut to_server, &mut from_server, &call(3, "memory_recall", json!({"query": "deploy script VPN"})));
    assert!(recalled["result"]["structuredContent"]["results"].to_string().contains("VPN"), "{recalled}");
    // A line that is not JSON is answered by the specification over a socket too.
    writeln!(to_server, "not json").unwrap();
    let mut line = String::new();
    from_server.read_line(&mut line).unwrap();
    assert!(line.contains("-32700"), "{line}");
    let pinged = ask(&mut to_server, &mut from_server, &json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    assert!(pinged.get("result").is_some(), "{pinged}");

    to_server.shutdown(std::net::Shutdown::Write).expect("the input closes");
    let status = child.wait().expect("the server exits");
    assert!(status.success(), "{status}: {}", stderr_of(&mut child));
}

#[test]
fn a_pipe_the_client_shares_is_polled_while_served_and_left_blocking_after() {
    let sandbox = Sandbox::new();
    let (server_stdin, mut to_server) = std::io::pipe().expect("a pipe");
    // The client keeps a copy of the server's end, as a parent that forgets to close it does:
    // the non-blocking mode belongs to the open pipe, so this copy sees what the server set.
    let shared = server_stdin.try_clone().expect("a copy of the read end");
    assert!(!non_blocking(&shared));
    let mut child = serve(&sandbox).stdin(server_stdin).stdout(Stdio::piped()).spawn().expect("spawn kenning serve");
    let mut from_server = BufReader::new(child.stdout.take().expect("stdout"));

    let handshake = ask(&mut to_server, &mut from_server, &initialize(1));
    assert!(handshake.get("result").is_some(), "{handshake}");
    assert!(non_blocking(&shared), "the server polls its input pipe instead of reading it on a blocking thread");
    let pinged = ask(&mut to_server, &mut from_server, &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert!(pinged.get("result").is_some(), "{pinged}");

    drop(to_server);
    let status = child.wait().expect("the server exits");
    assert!(status.success(), "{status}: {}", stderr_of(&mut child));
    assert!(!non_blocking(&shared), "the server left the shared pipe in non-blocking mode");
}

#[test]
fn a_server_reading_its_requests_from_a_file_answers_each() {
    let sandbox = Sandbox::new();
    let requests = sandbox.path("requests.jsonl");
    let lines = [initialize(1), json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}), call(3, "memory_recall", json!({"query": "anything"}))];
    std::fs::write(&requests, lines.iter().map(|line| format!("{line}\n")).collect::<String>()).expect("write the requests");
    let mut child = serve(&sandbox)
        .stdin(std::fs::File::open(&requests).expect("open the requests"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn kenning serve");
    let mut output = String::new();
    child.stdout.take().expect("stdout").read_to_string(&mut output).expect("the answers are text");
    let status = child.wait().expect("the server exits");
    assert!(status.success(), "{status}: {}", stderr_of(&mut child));
    // Each request is handled on a task of its own, so the answers may come in any order.
    let mut ids: Vec<u64> =
        output.lines().map(|line| serde_json::from_str::<Value>(line).expect("JSON")).filter_map(|answer| answer.get("id").and_then(Value::as_u64)).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3], "{output}");
}
