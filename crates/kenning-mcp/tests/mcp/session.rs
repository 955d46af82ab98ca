//! One MCP client session over an in-memory pipe to a server, through the real line transport.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

use kenning_mcp::KenningServer;

pub(crate) struct Session {
    read: BufReader<ReadHalf<DuplexStream>>,
    write: WriteHalf<DuplexStream>,
    next_id: u64,
}

impl Session {
    /// Serves `server` on a task of the current runtime and initialises a session with it.
    pub(crate) async fn start(server: KenningServer, client_name: &str) -> Session {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_end);
        tokio::spawn(async move {
            let _ = kenning_mcp::serve_lines(server, server_read, server_write).await;
        });
        let (read, write) = tokio::io::split(client);
        let mut session = Session { read: BufReader::new(read), write, next_id: 0 };
        let hello = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client_name, "version": "1"}});
        let answer = session.request("initialize", hello).await;
        assert!(answer.get("result").is_some(), "{answer}");
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        session
    }

    /// Sends a request and returns the answer that carries its id.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&message).await;
        let mut line = String::new();
        loop {
            line.clear();
            let read = tokio::time::timeout(Duration::from_secs(60), self.read.read_line(&mut line)).await;
            let read = read.unwrap_or_else(|_| panic!("no answer within 60 s to {message}"));
            assert!(read.expect("the pipe stays open") > 0, "the server closed the session on {message}");
            let answer: Value = serde_json::from_str(&line).unwrap_or_else(|error| panic!("unreadable answer {line:?}: {error}"));
            // Log notifications and the like come in between; the answer carries the request's id.
            if answer.get("id") == Some(&json!(id)) {
                return answer;
            }
        }
    }

    pub(crate) async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.write.write_all(&line).await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// Calls a tool: its structured result, or the error (a JSON-RPC error, or a result marked
    /// `isError`).
    pub(crate) async fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Value> {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments})).await;
        let Some(result) = answer.get("result") else { return Err(answer["error"].clone()) };
        if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
            return Err(result.clone());
        }
        Ok(result["structuredContent"].clone())
    }
}
