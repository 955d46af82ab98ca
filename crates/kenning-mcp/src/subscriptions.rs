//! Resource subscriptions: who wants `notifications/resources/updated` for which decision
//! resource, over both the 2025 `resources/subscribe` requests and the 2026-07-28
//! `subscriptions/listen` streams.
//!
//! One registry is shared by every session of a server (each HTTP session is its own
//! [`crate::KenningServer`] clone with its own session number), so that an outcome recorded by
//! one client reaches every client watching the calibration it moved. Writes made by another
//! process (the CLI, say) are not seen; clients re-read after reconnecting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::RoleServer;

use kenning_core::Domain;

/// Where notifications for one subscription go.
#[derive(Clone)]
enum Target {
    /// A `resources/subscribe` of the session's peer.
    Legacy(Peer<RoleServer>),
    /// One `subscriptions/listen` stream, identified by its registration number.
    Stream(u64, SubscriptionSink),
}

#[derive(Clone)]
struct Subscriber {
    session: u64,
    /// The URI exactly as the client subscribed to it, which is what notifications carry.
    uri: String,
    /// The resource path (no query) and the domain it names.
    path: String,
    domain: Domain,
    target: Target,
}

/// The registry of every subscription of one server.
#[derive(Default)]
pub struct Subscriptions {
    subscribers: Mutex<Vec<Subscriber>>,
    next_number: AtomicU64,
}

impl Subscriptions {
    /// A fresh number for a session or a stream.
    pub(crate) fn next_number(&self) -> u64 {
        self.next_number.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a `resources/subscribe`; subscribing twice to one URI is one subscription.
    pub(crate) fn subscribe(&self, session: u64, uri: String, path: String, domain: Domain, peer: Peer<RoleServer>) {
        let mut subscribers = self.lock();
        let exists = subscribers.iter().any(|s| s.session == session && s.uri == uri && matches!(s.target, Target::Legacy(_)));
        if !exists {
            subscribers.push(Subscriber { session, uri, path, domain, target: Target::Legacy(peer) });
        }
    }

    pub(crate) fn unsubscribe(&self, session: u64, uri: &str) {
        self.lock().retain(|s| !(s.session == session && s.uri == uri && matches!(s.target, Target::Legacy(_))));
    }

    /// Registers the URIs of one `subscriptions/listen` stream under `stream`.
    pub(crate) fn listen(&self, session: u64, stream: u64, uris: Vec<(String, String, Domain)>, sink: SubscriptionSink) {
        let mut subscribers = self.lock();
        for (uri, path, domain) in uris {
            subscribers.push(Subscriber { session, uri, path, domain, target: Target::Stream(stream, sink.clone()) });
        }
    }

    pub(crate) fn end_stream(&self, stream: u64) {
        self.lock().retain(|s| !matches!(s.target, Target::Stream(number, _) if number == stream));
    }

    /// Sends `notifications/resources/updated` to every subscriber of one of `paths` in `domain`.
    /// A subscriber whose session has gone is dropped.
    pub(crate) async fn changed(&self, domain: &Domain, paths: &[String]) {
        let due: Vec<Subscriber> =
            self.lock().iter().filter(|s| &s.domain == domain && paths.contains(&s.path)).cloned().collect();
        for subscriber in due {
            let delivered = match &subscriber.target {
                Target::Legacy(peer) => peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(subscriber.uri.clone())).await.is_ok(),
                Target::Stream(_, sink) => sink.notify_resource_updated(subscriber.uri.clone()).await.is_ok(),
            };
            if !delivered {
                tracing::debug!(uri = %subscriber.uri, "dropping a subscriber that can no longer be notified");
                self.lock().retain(|s| !(s.session == subscriber.session && s.uri == subscriber.uri));
            }
        }
    }
}
