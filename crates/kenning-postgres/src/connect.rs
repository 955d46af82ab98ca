//! Making a connection the way libpq makes one, for the pool: each host of the list in turn
//! (shuffled with `load_balance_hosts=random`), each address a name resolves to, the TLS
//! negotiation `sslmode` asks for, the password from the string, `PGPASSWORD` or the password
//! file, and `target_session_attrs` checked on the server reached.
//!
//! `sslmode` as libpq reads it: `disable` plain only; `allow` plain, and TLS again if the server
//! refused the plain connection; `prefer` (the default) TLS, and plain again if the server does
//! not offer TLS or the TLS attempt failed; `require`, `verify-ca` and `verify-full` TLS only.
//! A Unix socket never carries TLS, whatever the mode, as in libpq.
//!
//! The driver (tokio-postgres) runs the protocol over the stream made here
//! (`Config::connect_raw`); its own connection logic knows neither `allow`, `verify-*`, the
//! password file, nor a socket with TLS settings, which it fails on.

use std::net::SocketAddr;
use std::time::Duration;

use deadpool::managed::{Manager, Metrics, RecycleError, RecycleResult};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use crate::conninfo::{Address, ConnectParams, SessionAttrs, SslMode, Target};
use crate::error::{Error, Result, describe};
use crate::pgpass;

/// Makes and checks the pool's connections.
pub(crate) struct Connector {
    params: ConnectParams,
    tls: TlsSetup,
    /// How long one host may take when the string sets no `connect_timeout`.
    default_timeout: Duration,
    /// Where the store is, for messages (the masked connection string).
    location: String,
}

/// What TLS the connector can do.
enum TlsSetup {
    /// `sslmode=disable`: no TLS is ever attempted.
    Off,
    Ready(tokio_postgres_rustls::MakeRustlsConnect),
    /// TLS as asked cannot be set up (a root certificate file is missing or unreadable): as in
    /// libpq, that fails the connections that attempt TLS, not those over a Unix socket.
    Broken(String),
}

/// How one attempt talks to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encryption {
    Plain,
    /// TLS if the server offers it, plain if it answers that it does not.
    TlsIfOffered,
    TlsOnly,
}

impl Connector {
    pub fn new(params: ConnectParams, default_timeout: Duration, location: String) -> Connector {
        let tls = match params.tls.mode {
            SslMode::Disable => TlsSetup::Off,
            _ => match crate::tls::connector(&params.tls) {
                Ok(connector) => TlsSetup::Ready(connector),
                Err(error) => TlsSetup::Broken(error.to_string()),
            },
        };
        Connector { params, tls, default_timeout, location }
    }

    /// How long a new connection may take, all hosts and fallbacks together: each host its own
    /// timeout, twice over where `allow` or `prefer` may try it again, and `prefer-standby` two
    /// passes over the list.
    pub fn create_timeout(&self) -> Duration {
        let per_host = self.params.connect_timeout.unwrap_or(self.default_timeout);
        let tries = if matches!(self.params.tls.mode, SslMode::Allow | SslMode::Prefer) { 2 } else { 1 };
        let passes = if self.params.session == SessionAttrs::PreferStandby { 2 } else { 1 };
        per_host * (self.params.targets.len() * tries * passes) as u32
    }

    pub async fn connect(&self) -> Result<Client> {
        let mut order: Vec<&Target> = self.params.targets.iter().collect();
        if self.params.random_order {
            fastrand::shuffle(&mut order);
        }
        let passes = match self.params.session {
            SessionAttrs::PreferStandby => vec![SessionAttrs::Standby, SessionAttrs::Any],
            wanted => vec![wanted],
        };
        let per_host = self.params.connect_timeout.unwrap_or(self.default_timeout);
        let mut failures = Vec::new();
        for wanted in passes {
            for target in &order {
                match tokio::time::timeout(per_host, self.connect_target(target, wanted)).await {
                    Ok(Ok(client)) => return Ok(client),
                    Ok(Err(reason)) => failures.push(format!("connection to {} failed: {reason}", target.describe())),
                    Err(_) => failures.push(format!(
                        "connection to {} failed: no answer within {} s (connect_timeout)",
                        target.describe(),
                        per_host.as_secs()
                    )),
                }
            }
        }
        Err(Error::Unreachable { location: self.location.clone(), reason: failures.join("; ") })
    }

    async fn connect_target(&self, target: &Target, wanted: SessionAttrs) -> std::result::Result<Client, String> {
        let client = match &target.address {
            Address::Unix(dir) => {
                let path = dir.join(format!(".s.PGSQL.{}", target.port));
                // libpq never asks for TLS over a Unix socket, whatever sslmode says.
                let stream = UnixStream::connect(&path).await.map_err(|error| error.to_string())?;
                self.startup(stream, target, Encryption::Plain).await?
            }
            Address::Ip(ip) => self.connect_tcp(SocketAddr::new(*ip, target.port), target).await?,
            Address::Tcp(host) => {
                let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), target.port))
                    .await
                    .map_err(|error| format!("could not translate host name \"{host}\" to address: {error}"))?
                    .collect();
                let mut last = format!("could not translate host name \"{host}\" to address: no addresses");
                let mut connected = None;
                for address in addresses {
                    match self.connect_tcp(address, target).await {
                        Ok(client) => {
                            connected = Some(client);
                            break;
                        }
                        Err(reason) => last = format!("{address}: {reason}"),
                    }
                }
                connected.ok_or(last)?
            }
        };
        check_session(&client, wanted).await?;
        Ok(client)
    }

    /// One address over TCP, with `sslmode`'s order of attempts.
    async fn connect_tcp(&self, address: SocketAddr, target: &Target) -> std::result::Result<Client, String> {
        let attempt = |encryption| async move {
            let stream = self.tcp(address).await?;
            self.startup(stream, target, encryption).await
        };
        match self.params.tls.mode {
            SslMode::Disable => attempt(Encryption::Plain).await,
            SslMode::Allow => match attempt(Encryption::Plain).await {
                Err(refused) => attempt(Encryption::TlsOnly).await.map_err(|tls| format!("{refused}; with TLS: {tls}")),
                connected => connected,
            },
            SslMode::Prefer => match attempt(Encryption::TlsIfOffered).await {
                Err(tls) => attempt(Encryption::Plain).await.map_err(|plain| format!("with TLS: {tls}; without: {plain}")),
                connected => connected,
            },
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => attempt(Encryption::TlsOnly).await,
        }
    }

    async fn tcp(&self, address: SocketAddr) -> std::result::Result<TcpStream, String> {
        let stream = TcpStream::connect(address).await.map_err(|error| error.to_string())?;
        stream.set_nodelay(true).map_err(|error| error.to_string())?;
        let keepalive = self.params.keepalive;
        let socket = socket2::SockRef::from(&stream);
        if keepalive.enabled {
            let mut parameters = socket2::TcpKeepalive::new();
            if let Some(idle) = keepalive.idle {
                parameters = parameters.with_time(idle);
            }
            if let Some(interval) = keepalive.interval {
                parameters = parameters.with_interval(interval);
            }
            if let Some(count) = keepalive.count {
                parameters = parameters.with_retries(count);
            }
            socket.set_tcp_keepalive(&parameters).map_err(|error| error.to_string())?;
        }
        if let Some(timeout) = keepalive.user_timeout {
            socket.set_tcp_user_timeout(Some(timeout)).map_err(|error| error.to_string())?;
        }
        Ok(stream)
    }

    /// Runs the protocol's start-up over `stream` and hands the connection to the runtime.
    async fn startup<S>(&self, stream: S, target: &Target, encryption: Encryption) -> std::result::Result<Client, String>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let params = &self.params;
        let mut config = tokio_postgres::Config::new();
        config.user(&params.user).dbname(&params.dbname).application_name(&params.application_name);
        config.channel_binding(params.channel_binding);
        if let Some(options) = &params.options {
            config.options(options);
        }
        let password = params.password.clone().or_else(|| {
            params.passfile.as_deref().and_then(|file| pgpass::lookup(file, target, &params.dbname, &params.user))
        });
        if let Some(password) = password {
            config.password(password);
        }
        let failed = |error: tokio_postgres::Error| self.explain(&error);
        let client = match (encryption, &self.tls) {
            (_, TlsSetup::Broken(reason)) if encryption != Encryption::Plain => return Err(reason.clone()),
            (Encryption::Plain, _) | (_, TlsSetup::Off | TlsSetup::Broken(_)) => {
                config.ssl_mode(tokio_postgres::config::SslMode::Disable);
                let (client, connection) = config.connect_raw(stream, NoTls).await.map_err(failed)?;
                tokio::spawn(drive(connection));
                client
            }
            (encryption, TlsSetup::Ready(tls)) => {
                config.ssl_mode(if encryption == Encryption::TlsOnly {
                    tokio_postgres::config::SslMode::Require
                } else {
                    tokio_postgres::config::SslMode::Prefer
                });
                if params.tls.direct {
                    config.ssl_negotiation(tokio_postgres::config::SslNegotiation::Direct);
                }
                let connector = <tokio_postgres_rustls::MakeRustlsConnect as MakeTlsConnect<S>>::make_tls_connect(&mut tls.clone(), &target.name)
                    .map_err(|_| format!("`{}` cannot be checked against a certificate: it is neither a DNS name nor an IP address", target.name))?;
                let (client, connection) = config.connect_raw(stream, connector).await.map_err(failed)?;
                tokio::spawn(drive(connection));
                client
            }
        };
        Ok(client)
    }

    /// The driver's error with its cause, and what to do when TLS was asked of a server without it.
    fn explain(&self, error: &tokio_postgres::Error) -> String {
        let reason = describe(error);
        if reason.contains("does not support TLS") {
            format!(
                "{reason}, and sslmode={} asks for it: enable ssl on the server, or connect with sslmode=prefer or \
                 disable where plain connections are acceptable",
                self.params.tls.mode.name()
            )
        } else {
            reason
        }
    }
}

/// Drives one connection's socket until the client is dropped or the server goes away.
async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    if let Err(error) = connection.await {
        tracing::debug!(error = %describe(&error), "a PostgreSQL connection ended");
    }
}

/// Whether the server reached is the kind `target_session_attrs` asks for: read-write and
/// read-only by `transaction_read_only`, primary and standby by whether it is in recovery.
async fn check_session(client: &Client, wanted: SessionAttrs) -> std::result::Result<(), String> {
    if wanted == SessionAttrs::Any {
        return Ok(());
    }
    let messages = client
        .simple_query("SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('transaction_read_only')")
        .await
        .map_err(|error| describe(&error))?;
    let row = messages
        .iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
        .ok_or("the server did not say whether it is a standby")?;
    let in_recovery = row.get(0) == Some("t");
    let read_only = row.get(1) == Some("on");
    let (fits, found) = match wanted {
        SessionAttrs::ReadWrite => (!read_only, "read-only"),
        SessionAttrs::ReadOnly => (read_only, "read-write"),
        SessionAttrs::Primary => (!in_recovery, "a standby"),
        SessionAttrs::Standby => (in_recovery, "not a standby"),
        SessionAttrs::Any | SessionAttrs::PreferStandby => (true, ""),
    };
    if fits { Ok(()) } else { Err(format!("the session is {found}, and target_session_attrs asks otherwise")) }
}

impl Manager for Connector {
    type Type = Client;
    type Error = Error;

    async fn create(&self) -> Result<Client> {
        self.connect().await
    }

    async fn recycle(&self, client: &mut Client, _: &Metrics) -> RecycleResult<Error> {
        if client.is_closed() {
            return Err(RecycleError::message("the connection was closed"));
        }
        Ok(())
    }
}
