//! Live updates: `/events` is a server-sent event stream that says `change` whenever the
//! stores' memories change. The MCP resource subscriptions learn of changes from the tools of
//! their own process; a page must also follow captures made by hooks, the CLI and other
//! servers, so one task per process polls the stores' change marks
//! (`MemoryService::change_mark`: each SQLite store's highest change number, moved by every
//! write of any process and by no read) while anyone is listening, and wakes every stream
//! when the mark moves. A stream says `ready` once the poller has read the marks with it
//! listening, so every change after `ready` is announced.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::watch;

use crate::Web;

/// How often the change marks are read while a page listens.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The number of changes seen, which every stream watches, and the number of times the poller
/// has read the marks for its listeners, which a new stream waits on before saying `ready`.
pub(crate) struct Changes {
    seen: watch::Sender<u64>,
    looks: watch::Sender<u64>,
    polling: AtomicBool,
}

impl Default for Changes {
    fn default() -> Self {
        Changes { seen: watch::Sender::new(0), looks: watch::Sender::new(0), polling: AtomicBool::new(false) }
    }
}

impl Changes {
    fn subscribe(&self, web: &Arc<Web>) -> watch::Receiver<u64> {
        if !self.polling.swap(true, Ordering::SeqCst) {
            tokio::spawn(poll(Arc::downgrade(web)));
        }
        self.seen.subscribe()
    }
}

/// Reads the change mark while anyone listens, and counts each move. Stops when the web
/// view is dropped.
async fn poll(web: Weak<Web>) {
    let mut last: Option<String> = None;
    loop {
        let Some(web) = web.upgrade() else { return };
        if web.changes.seen.receiver_count() == 0 {
            // Nobody listens: a page that starts listening later loads what is current.
            last = None;
        } else {
            let memory = web.memory.clone();
            match tokio::task::spawn_blocking(move || memory.change_mark()).await {
                Ok(Ok(mark)) => {
                    if last.as_ref().is_some_and(|last| *last != mark) {
                        web.changes.seen.send_modify(|count| *count += 1);
                    }
                    last = Some(mark);
                    web.changes.looks.send_modify(|count| *count += 1);
                }
                Ok(Err(error)) => tracing::warn!(%error, "cannot read the stores' change marks for live updates"),
                Err(error) => tracing::warn!(%error, "the change-mark read stopped"),
            }
        }
        drop(web);
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// `GET /events`: `ready` once the poller has read the marks with this stream listening, then
/// `change` (with the count of changes seen) each time the memories change.
pub(crate) async fn stream(State(web): State<Arc<Web>>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut receiver = web.changes.subscribe(&web);
    receiver.mark_unchanged();
    let mut looks = web.changes.looks.subscribe();
    let ready = stream::once(async move {
        // The sender lives as long as the web view, which outlives its streams.
        let _ = looks.changed().await;
        Ok(Event::default().event("ready").data("listening").retry(Duration::from_secs(3)))
    });
    let changes = stream::unfold(receiver, |mut receiver| async move {
        receiver.changed().await.ok()?;
        let count = *receiver.borrow_and_update();
        Some((Ok(Event::default().event("change").data(count.to_string())), receiver))
    });
    Sse::new(ready.chain(changes)).keep_alive(KeepAlive::default())
}
