//! A minimal MCP client for the streamable HTTP transport, enough to load the real
//! `kenning serve --http` from many threads.
//!
//! Each client holds one keep-alive HTTP/1.1 connection and one MCP session: `initialize`,
//! `notifications/initialized`, then tool calls, one request at a time. Responses come as JSON
//! or as a short server-sent event stream (`text/event-stream`), sized by `Content-Length` or
//! sent in chunks; the client reads whichever arrives. Blocking I/O on a plain thread keeps a
//! timing to writing the request, the server's work and reading the answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

const PROTOCOL_VERSION: &str = "2025-11-25";

/// One MCP session over one connection.
pub struct HttpMcpClient {
    address: SocketAddr,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    key: Option<String>,
    session: Option<String>,
    next_id: u64,
}

/// A response: its status, the session header if any, and its body.
struct Response {
    status: u16,
    session: Option<String>,
    body: Vec<u8>,
    content_type: String,
}

impl HttpMcpClient {
    /// Connects and completes the MCP handshake, sending `key` as a bearer token if given.
    pub fn connect(address: SocketAddr, key: Option<&str>) -> Result<HttpMcpClient> {
        let stream = TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        let mut client =
            HttpMcpClient { address, reader: BufReader::new(stream), writer, key: key.map(str::to_owned), session: None, next_id: 1 };
        let result = client.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "kenning-bench", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        if result.get("serverInfo").is_none() {
            bail!("the initialize result has no serverInfo: {result}");
        }
        let response = client.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        if response.status != 202 {
            bail!("notifications/initialized got HTTP {}", response.status);
        }
        Ok(client)
    }

    /// Calls a tool and returns its structured result; a tool error is an error here.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let result = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
            bail!("{name} failed: {result}");
        }
        Ok(result.get("structuredContent").cloned().unwrap_or(result))
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let response = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        if response.status != 200 {
            bail!("`{method}` got HTTP {}: {}", response.status, String::from_utf8_lossy(&response.body));
        }
        if let Some(session) = response.session {
            self.session = Some(session);
        }
        let message = json_rpc_message(&response.body, &response.content_type, id)?;
        if let Some(error) = message.get("error") {
            bail!("`{method}` failed: {error}");
        }
        message.get("result").cloned().with_context(|| format!("`{method}` got a response without a result: {message}"))
    }

    fn post(&mut self, message: &Value) -> Result<Response> {
        let body = serde_json::to_vec(message)?;
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        if let Some(key) = &self.key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        if let Some(session) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: {PROTOCOL_VERSION}\r\n"));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(&body);
        self.writer.write_all(&request).context("writing a request")?;
        self.read_response()
    }

    fn read_response(&mut self) -> Result<Response> {
        let mut line = String::new();
        self.reader.read_line(&mut line).context("reading the status line")?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .with_context(|| format!("not an HTTP status line: {line:?}"))?;
        let (mut length, mut chunked, mut session, mut content_type) = (None, false, None, String::new());
        loop {
            line.clear();
            self.reader.read_line(&mut line).context("reading a header")?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else { continue };
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "mcp-session-id" => session = Some(value.to_owned()),
                "content-type" => content_type = value.to_owned(),
                _ => {}
            }
        }
        let body = if chunked {
            self.read_chunked()?
        } else {
            let mut body = vec![0; length.unwrap_or(0)];
            self.reader.read_exact(&mut body).context("reading a body")?;
            body
        };
        Ok(Response { status, session, body, content_type })
    }

    fn read_chunked(&mut self) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).context("reading a chunk size")?;
            let size_text = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16).with_context(|| format!("not a chunk size: {line:?}"))?;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    line.clear();
                    self.reader.read_line(&mut line)?;
                    if line.trim().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            self.reader.read_exact(&mut body[start..]).context("reading a chunk")?;
            let mut crlf = [0; 2];
            self.reader.read_exact(&mut crlf)?;
        }
    }
}

/// The JSON-RPC response with this id, from a JSON body or an event stream.
fn json_rpc_message(body: &[u8], content_type: &str, id: u64) -> Result<Value> {
    let text = std::str::from_utf8(body).context("the response is not UTF-8")?;
    if !content_type.starts_with("text/event-stream") {
        return serde_json::from_str(text).with_context(|| format!("the response is not JSON: {text}"));
    }
    for data in text.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim).filter(|data| !data.is_empty()) {
        let message: Value = serde_json::from_str(data).with_context(|| format!("an event is not JSON: {data}"))?;
        if message.get("id").and_then(Value::as_u64) == Some(id) {
            return Ok(message);
        }
    }
    bail!("the event stream held no response to request {id}: {text}")
}
