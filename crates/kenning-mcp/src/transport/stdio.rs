//! The stdio transport: one JSON-RPC message per line in each direction.
//!
//! It replaces rmcp's `AsyncRwTransport` so that a line that is not a message is answered by the
//! JSON-RPC specification (see [`super::jsonrpc`]): -32700 with id null for text that is not
//! JSON, -32600 with the request's own id for JSON that is not a request. Like rmcp's, it bounds a
//! line's length and survives being cancelled between polls.

use std::pin::Pin;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::jsonrpc::{Incoming, read_message};

/// The longest line read, as rmcp's own stdio transport and its HTTP client allow (16 MiB); a
/// longer one is dropped without being buffered.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A JSON-RPC transport over a byte stream in each direction, newline-delimited.
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far; kept across cancelled polls of `receive`.
    line: Vec<u8>,
    /// Set while the rest of an over-long line is skipped.
    discarding: bool,
    /// Shared with the futures `send` returns, which may run concurrently; `None` once closed.
    write: Arc<Mutex<Option<W>>>,
}

impl<R, W> LineTransport<R, W>
where
    R: tokio::io::AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        LineTransport { read: BufReader::new(read), line: Vec::new(), discarding: false, write: Arc::new(Mutex::new(Some(write))) }
    }

    /// Reads up to the next newline into `self.line`, never past [`MAX_LINE_BYTES`].
    /// Cancellation-safe: bytes are moved from the reader's buffer into `self.line` with no await
    /// in between, so a cancelled read resumes where it stopped.
    async fn read_line(&mut self) -> std::io::Result<LineRead> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(LineRead::Eof);
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let outcome = if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
                None
            } else if self.line.len().saturating_add(take) > MAX_LINE_BYTES {
                self.line.clear();
                self.discarding = newline.is_none();
                Some(LineRead::TooLong)
            } else {
                self.line.extend_from_slice(&available[..take]);
                newline.map(|_| LineRead::Line)
            };
            Pin::new(&mut self.read).consume(take);
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
    }
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Writes one message and its newline, then flushes.
async fn write_line<W: AsyncWrite + Unpin>(write: &Mutex<Option<W>>, message: &impl Serialize) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    let mut guard = write.lock().await;
    let writer = guard.as_mut().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed"))?;
    writer.write_all(&bytes).await?;
    writer.flush().await
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: tokio::io::AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move { write_line(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.read_line().await {
                Ok(LineRead::Line) => {}
                Ok(LineRead::TooLong) => {
                    tracing::error!(max_bytes = MAX_LINE_BYTES, "an incoming message is longer than the line limit; dropped");
                    continue;
                }
                Ok(LineRead::Eof) => return None,
                Err(error) => {
                    tracing::error!(%error, "reading stdin failed");
                    return None;
                }
            }
            let incoming = {
                let text = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                (!text.iter().all(u8::is_ascii_whitespace)).then(|| read_message(text))
            };
            // Cleared only once a whole line is handled; the allocation is kept for the next.
            self.line.clear();
            match incoming {
                None => {}
                Some(Incoming::Message(message)) => return Some(*message),
                Some(Incoming::Ignored(reason)) => tracing::debug!("ignored an incoming message: {reason}"),
                Some(Incoming::Refused(error)) => {
                    // Written by a task of its own, as `send` futures are, so that a cancelled
                    // poll of `receive` cannot leave half an answer on stdout.
                    let write = self.write.clone();
                    tokio::spawn(async move {
                        if let Err(error) = write_line(&write, &error).await {
                            tracing::error!(%error, "could not answer a malformed message");
                        }
                    });
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}
