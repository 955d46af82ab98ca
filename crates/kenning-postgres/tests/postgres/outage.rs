//! The organisation database going away in the middle of a run and coming back: recall keeps
//! answering from the project and user domains and says that org is missing; a capture to org
//! fails with a clear error and is written nowhere else; once the database is back, the same
//! service (no restart) recalls from org again.
//!
//! The outage is made by a TCP relay between the store and the test server: taking it down
//! cuts every open connection and refuses new ones, as a database host going away does.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use kenning_core::{CaptureInput, SearchFilter};

use super::domains::{capture, recall, three_domains};
use super::*;

/// A TCP relay to `target` that can be taken down and brought back.
struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(target: (String, u16)) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (accept_up, accept_open) = (up.clone(), open.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !accept_up.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect((target.0.as_str(), target.1)) else { continue };
                let mut open = accept_open.lock().unwrap();
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Relay { port, up, open }
    }

    /// Cuts every connection and turns new ones away.
    fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// The test server's host and port, and a connection string that reaches it through `port`.
fn through_relay(port: u16) -> ((String, u16), String) {
    let config: postgres::Config = server_url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("the organisation tests need a TCP server URL, not {other:?}"),
    };
    let server_port = config.get_ports().first().copied().unwrap_or(5432);
    let mut relayed = format!("host=127.0.0.1 port={port} sslmode=disable user={}", config.get_user().unwrap_or("postgres"));
    if let Some(database) = config.get_dbname() {
        relayed.push_str(&format!(" dbname={database}"));
    }
    if let Some(password) = config.get_password() {
        relayed.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
    }
    ((host, server_port), relayed)
}

#[test]
fn recall_degrades_while_the_org_database_is_away_and_recovers_without_a_restart() {
    let (target, _) = through_relay(0);
    let relay = Relay::start(target);
    let (_, url) = through_relay(relay.port);
    let settings = Settings { connect_timeout: Duration::from_secs(2), ..settings_for(url, &fresh_schema("outage")) };
    let (service, _dir) = three_domains(PostgresStore::open(&settings).unwrap());

    let project = capture(&service, "project", "Deploys of this app go out through the blue-green pipeline.");
    let user = capture(&service, "user", "I like deploys to run after the tests, never before.");
    let org = capture(&service, "org", "Every deploy is announced in the release channel first.");
    let before = recall(&service, "deploys");
    assert_eq!(before.results.len(), 3, "{before:?}");

    relay.down();
    let degraded = recall(&service, "deploys");
    let urns: Vec<&str> = degraded.results.iter().map(|hit| hit.urn.as_str()).collect();
    assert!(urns.contains(&project.as_str()) && urns.contains(&user.as_str()), "{urns:?}");
    assert!(!urns.contains(&org.as_str()));
    assert_eq!(degraded.unavailable.len(), 1, "{degraded:?}");
    assert_eq!(degraded.unavailable[0].domain, "org:acme");
    assert!(degraded.unavailable[0].message.contains("unreachable"), "{}", degraded.unavailable[0].message);

    // A capture to org fails, says why, and lands nowhere else.
    // What each other domain holds; not its size on disk, which the background recording of
    // the recalls above may still be changing.
    let counts = |service: &kenning_engine::MemoryService| {
        let mut domains = serde_json::to_value(service.status().unwrap().domains.iter().filter(|d| d.domain != "org:acme").collect::<Vec<_>>()).unwrap();
        for domain in domains.as_array_mut().unwrap() {
            domain.as_object_mut().unwrap().remove("size_bytes");
        }
        domains
    };
    let status_before = counts(&service);
    let input = CaptureInput { content: "Rollbacks need a second approver.".to_owned(), ..CaptureInput::default() };
    match service.capture(input, Some("org")) {
        Err(kenning_engine::Error::Unavailable(message)) => assert!(message.contains("unreachable"), "{message}"),
        other => panic!("expected the org domain to be unavailable, got {other:?}"),
    }
    let status_after = counts(&service);
    assert_eq!(status_before, status_after, "the failed capture was written to another domain");

    relay.up();
    let recovered = recall(&service, "deploys");
    assert!(recovered.unavailable.is_empty(), "{recovered:?}");
    assert!(recovered.results.iter().any(|hit| hit.urn == org), "{recovered:?}");
    let input = CaptureInput { content: "Rollbacks need a second approver.".to_owned(), ..CaptureInput::default() };
    assert!(service.capture(input, Some("org")).unwrap().created);
    let _ = SearchFilter::active();
}
