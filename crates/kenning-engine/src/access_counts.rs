//! Recording which memories recall returned, off the path of the recall itself.
//!
//! Bumping access counts is a write transaction, and a durable write waits for the disk; an
//! agent waiting for its recall should not wait for that too. Recalls therefore queue the reads
//! here and a worker thread writes them, at most a few times a second, coalescing what arrived
//! in between. Reading a memory by URN reports its count, so it first writes out whatever is
//! queued ([`AccessRecorder::flush`]), and the count it reports includes every earlier recall.
//! Dropping the recorder writes out what is left, so a command-line recall is recorded before
//! the process exits.
//!
//! Access counts are statistics, not acknowledged data: reads queued when the process is killed
//! are lost, which is the trade for recalls that never wait on the disk.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kenning_core::{Domain, MemoryId};

use crate::service::DomainStore;

/// The worker writes at most this often, so that a burst of recalls costs one write.
const WRITE_INTERVAL: Duration = Duration::from_millis(250);

pub(crate) struct AccessRecorder {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

struct Shared {
    stores: Vec<DomainStore>,
    queue: Mutex<Queue>,
    arrived: Condvar,
    /// Held while queued reads are written, so that a flush waits for a write in flight.
    writing: Mutex<()>,
}

#[derive(Default)]
struct Queue {
    /// Reads as (domain, memory id); a memory read twice appears twice.
    reads: Vec<(Domain, MemoryId)>,
    latest: Option<DateTime<Utc>>,
    closed: bool,
}

impl AccessRecorder {
    pub fn new(stores: Vec<DomainStore>) -> AccessRecorder {
        let shared = Arc::new(Shared {
            stores,
            queue: Mutex::new(Queue::default()),
            arrived: Condvar::new(),
            writing: Mutex::new(()),
        });
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("kenning-access".to_owned())
                .spawn(move || shared.run())
                .expect("the operating system starts a thread")
        };
        AccessRecorder { shared, worker: Some(worker) }
    }

    /// Queues reads of `ids` in `domain`.
    pub fn record(&self, domain: &Domain, ids: impl IntoIterator<Item = MemoryId>, at: DateTime<Utc>) {
        let mut queue = lock(&self.shared.queue);
        let before = queue.reads.len();
        queue.reads.extend(ids.into_iter().map(|id| (domain.clone(), id)));
        if queue.reads.len() == before {
            return;
        }
        queue.latest = queue.latest.max(Some(at));
        // The worker waits for reads only while the queue is empty; in its pause between writes
        // it waits for the close alone, and a wake-up per recall would only put it back to sleep.
        if before == 0 {
            self.shared.arrived.notify_one();
        }
    }

    /// Writes every queued read now, after any write already in flight.
    pub fn flush(&self) {
        self.shared.write_queued();
    }
}

impl Drop for AccessRecorder {
    fn drop(&mut self) {
        lock(&self.shared.queue).closed = true;
        self.shared.arrived.notify_one();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        loop {
            {
                let mut queue = lock(&self.queue);
                while queue.reads.is_empty() && !queue.closed {
                    queue = self.arrived.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
                if queue.closed {
                    drop(queue);
                    self.write_queued();
                    return;
                }
            }
            self.write_queued();
            // A pause before the next write lets reads gather; closing ends it at once, so
            // that a process exits without waiting it out.
            let queue = lock(&self.queue);
            if !queue.closed {
                drop(self.arrived.wait_timeout_while(queue, WRITE_INTERVAL, |queue| !queue.closed));
            }
        }
    }

    fn write_queued(&self) {
        let _writing = lock(&self.writing);
        let (reads, latest) = {
            let mut queue = lock(&self.queue);
            (std::mem::take(&mut queue.reads), queue.latest.take())
        };
        let Some(at) = latest else { return };
        for entry in &self.stores {
            let ids: Vec<MemoryId> =
                reads.iter().filter(|(domain, _)| *domain == entry.domain).map(|(_, id)| id.clone()).collect();
            if ids.is_empty() {
                continue;
            }
            if let Err(error) = entry.store.record_access(&ids, at) {
                tracing::warn!(domain = %entry.domain, %error, "could not record memory reads");
            }
        }
    }
}

/// The queue and the write guard hold no invariants a panic could break halfway.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
