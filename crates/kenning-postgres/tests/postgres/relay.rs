//! A TCP relay in front of a test server that can be taken down and brought back: taking it
//! down cuts every open connection and refuses new ones, as a database host going away does.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// A TCP relay to `target` that can be taken down and brought back.
pub(crate) struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    /// A relay to the server of `url`, and a connection string that reaches it through the relay.
    pub(crate) fn to(url: &str) -> (Relay, String) {
        let config: postgres::Config = url.parse().unwrap();
        let host = match config.get_hosts().first() {
            Some(postgres::config::Host::Tcp(host)) => host.clone(),
            other => panic!("a relay needs a TCP server URL, not {other:?}"),
        };
        let relay = Relay::start((host, config.get_ports().first().copied().unwrap_or(5432)));
        let mut relayed = format!("host=127.0.0.1 port={} sslmode=disable user={}", relay.port, config.get_user().unwrap_or("postgres"));
        if let Some(database) = config.get_dbname() {
            relayed.push_str(&format!(" dbname={database}"));
        }
        if let Some(password) = config.get_password() {
            relayed.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
        }
        (relay, relayed)
    }

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
    pub(crate) fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    pub(crate) fn up(&self) {
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

