//! Connection strings as libpq reads them: the URI form
//! (`postgresql://user:password@host:port,host2:port2/dbname?keyword=value`) and the key-value
//! form (`host=/var/run/postgresql user=kenning sslmode=verify-full`), the `PG*` variables and
//! home-folder files that fill in what a string leaves out, and the settings each connection
//! attempt is made with (`resolve`).
//!
//! The parsing follows libpq's own (`conninfo_uri_parse` and `conninfo_parse` in fe-connect.c):
//! percent-decoding in every part of a URI, host lists with a port each, `[v6]` addresses, a host
//! that starts with `/` naming a Unix-socket directory (also as `%2F…` or `?host=/dir`), query
//! parameters and later keywords overriding earlier ones, `ssl=true` for `sslmode=require`, and
//! quoted values with backslash escapes. An unknown keyword is refused, as libpq refuses it; a
//! libpq keyword whose feature kenning lacks is refused with the reason, never silently dropped,
//! unless dropping it cannot weaken the connection (a Kerberos service name without GSSAPI).
//!
//! This crate reads no environment: the caller passes the variables and the home folder in an
//! [`Environment`] (only the binary reads the environment). It does read the files the settings
//! name (the password file, certificates, keys, revocation lists), as libpq does.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// What kenning does with a libpq keyword.
#[derive(Clone, Copy)]
enum Support {
    /// Read and acted on.
    Used,
    /// Accepted and ignored, because what it sets does not exist without a feature kenning
    /// lacks (GSSAPI) or no longer exists in libpq either.
    Ignored,
    /// Refused with this reason: honouring it is beyond kenning, and ignoring it could weaken
    /// the connection or change what it connects to.
    Refused(&'static str),
}

/// Every keyword of libpq 18, the variable that supplies its default, and what kenning does with it.
const KEYWORDS: &[(&str, Option<&str>, Support)] = &[
    ("host", Some("PGHOST"), Support::Used),
    ("hostaddr", Some("PGHOSTADDR"), Support::Used),
    ("port", Some("PGPORT"), Support::Used),
    ("dbname", Some("PGDATABASE"), Support::Used),
    ("user", Some("PGUSER"), Support::Used),
    ("password", Some("PGPASSWORD"), Support::Used),
    ("passfile", Some("PGPASSFILE"), Support::Used),
    ("channel_binding", Some("PGCHANNELBINDING"), Support::Used),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT"), Support::Used),
    ("client_encoding", Some("PGCLIENTENCODING"), Support::Used),
    ("options", Some("PGOPTIONS"), Support::Used),
    ("application_name", Some("PGAPPNAME"), Support::Used),
    ("fallback_application_name", None, Support::Used),
    ("keepalives", None, Support::Used),
    ("keepalives_idle", None, Support::Used),
    ("keepalives_interval", None, Support::Used),
    ("keepalives_count", None, Support::Used),
    ("tcp_user_timeout", None, Support::Used),
    ("sslmode", Some("PGSSLMODE"), Support::Used),
    ("sslnegotiation", Some("PGSSLNEGOTIATION"), Support::Used),
    ("sslcompression", Some("PGSSLCOMPRESSION"), Support::Ignored),
    ("sslcert", Some("PGSSLCERT"), Support::Used),
    ("sslkey", Some("PGSSLKEY"), Support::Used),
    ("sslcertmode", Some("PGSSLCERTMODE"), Support::Used),
    ("sslrootcert", Some("PGSSLROOTCERT"), Support::Used),
    ("sslcrl", Some("PGSSLCRL"), Support::Used),
    ("sslcrldir", Some("PGSSLCRLDIR"), Support::Refused("a directory of revocation lists is not supported; name one PEM file with sslcrl")),
    ("sslsni", Some("PGSSLSNI"), Support::Used),
    ("sslpassword", None, Support::Refused("encrypted private keys are not supported; decrypt the key (openssl pkey) and protect the file instead")),
    ("sslkeylogfile", Some("PGSSLKEYLOGFILE"), Support::Refused("writing TLS session keys is not supported")),
    ("requirepeer", Some("PGREQUIREPEER"), Support::Refused("checking the server process's user over a Unix socket is not supported")),
    ("ssl_min_protocol_version", Some("PGSSLMINPROTOCOLVERSION"), Support::Used),
    ("ssl_max_protocol_version", Some("PGSSLMAXPROTOCOLVERSION"), Support::Used),
    ("gssencmode", Some("PGGSSENCMODE"), Support::Used),
    ("krbsrvname", Some("PGKRBSRVNAME"), Support::Ignored),
    ("gsslib", Some("PGGSSLIB"), Support::Ignored),
    ("gssdelegation", Some("PGGSSDELEGATION"), Support::Ignored),
    ("require_auth", Some("PGREQUIREAUTH"), Support::Refused("restricting the authentication methods is not supported")),
    ("replication", None, Support::Refused("kenning does not open replication connections")),
    ("target_session_attrs", Some("PGTARGETSESSIONATTRS"), Support::Used),
    ("load_balance_hosts", Some("PGLOADBALANCEHOSTS"), Support::Used),
    ("min_protocol_version", Some("PGMINPROTOCOLVERSION"), Support::Used),
    ("max_protocol_version", Some("PGMAXPROTOCOLVERSION"), Support::Used),
    ("service", Some("PGSERVICE"), Support::Refused("kenning does not read pg_service.conf; put the service's settings in the connection string")),
    ("servicefile", Some("PGSERVICEFILE"), Support::Refused("kenning does not read pg_service.conf; put the service's settings in the connection string")),
];

/// The Unix-socket directory a connection uses when no host is given: Debian's libpq looks in
/// `/var/run/postgresql`, upstream's in `/tmp`.
const DEFAULT_SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];
const DEFAULT_PORT: u16 = 5432;

/// What libpq takes from the process's environment when a connection string leaves a setting
/// out: the `PG*` variables, the login name (libpq's default user) and the home folder (for
/// `~/.pgpass` and the certificates under `~/.postgresql/`). This crate reads no environment,
/// so the caller fills it in with [`Environment::from_lookup`]; the default is an empty one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment {
    variables: BTreeMap<&'static str, String>,
    login: Option<String>,
    home: Option<PathBuf>,
}

impl Environment {
    /// The environment `lookup` gives (a variable's value by name; an empty value counts as
    /// unset), with the process's login name and home folder.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>, login: Option<String>, home: Option<PathBuf>) -> Environment {
        let variables = KEYWORDS
            .iter()
            .filter_map(|(keyword, variable, _)| {
                let value = lookup((*variable)?)?;
                (!value.is_empty()).then_some((*keyword, value))
            })
            .collect();
        Environment { variables, login: login.filter(|login| !login.is_empty()), home }
    }

    /// The names of the variables libpq reads, for a caller that wants to show or clear them.
    pub fn variable_names() -> impl Iterator<Item = &'static str> {
        KEYWORDS.iter().filter_map(|(_, variable, _)| *variable)
    }

    fn home_file(&self, name: &str) -> Option<PathBuf> {
        self.home.as_ref().map(|home| home.join(name))
    }
}

/// The password is never shown.
impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let variables: BTreeMap<&str, &str> = self
            .variables
            .iter()
            .map(|(keyword, value)| (*keyword, if *keyword == "password" { "****" } else { value.as_str() }))
            .collect();
        f.debug_struct("Environment").field("variables", &variables).field("login", &self.login).field("home", &self.home).finish()
    }
}

/// One `keyword=value` of a connection string, with where its value was written (for masking).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Setting {
    keyword: String,
    value: String,
    written: Range<usize>,
}

/// The settings a connection string gives, later ones overriding earlier ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnInfo {
    given: BTreeMap<String, String>,
}

impl ConnInfo {
    pub fn parse(text: &str) -> Result<ConnInfo> {
        let mut given = BTreeMap::new();
        for setting in settings(text)? {
            check_keyword(&setting.keyword)?;
            given.insert(setting.keyword, setting.value);
        }
        Ok(ConnInfo { given })
    }

    /// The value the string gives `keyword`, else the environment's.
    fn get<'a>(&'a self, environment: &'a Environment, keyword: &str) -> Option<&'a str> {
        match self.given.get(keyword) {
            Some(value) => Some(value.as_str()),
            None => environment.variables.get(keyword).map(String::as_str),
        }
    }
}

/// The keyword is one of libpq's and kenning can honour it.
fn check_keyword(keyword: &str) -> Result<()> {
    match KEYWORDS.iter().find(|(known, _, _)| *known == keyword) {
        Some((_, _, Support::Refused(reason))) => Err(Error::Url(format!("`{keyword}`: {reason}"))),
        Some(_) => Ok(()),
        None => {
            let suggestion = kenning_core::error::closest(keyword, KEYWORDS.iter().map(|(known, _, _)| *known))
                .map(|known| format!("; did you mean `{known}`?"))
                .unwrap_or_default();
            Err(Error::Url(format!("`{keyword}` is not a libpq connection keyword{suggestion}")))
        }
    }
}

/// The settings of either form, in the order written.
fn settings(text: &str) -> Result<Vec<Setting>> {
    match ["postgresql://", "postgres://"].iter().find(|prefix| text.starts_with(**prefix)) {
        Some(prefix) => uri_settings(text, prefix.len()),
        None => key_value_settings(text),
    }
}

/// The settings of a URI, as libpq's `conninfo_uri_parse_options` reads it.
fn uri_settings(text: &str, start: usize) -> Result<Vec<Setting>> {
    let bytes = text.as_bytes();
    let mut settings = Vec::new();
    let mut at = start;
    // User information ends at an `@` met before any `/`.
    let userinfo_end = text[start..].find(['@', '/']).map(|offset| start + offset).filter(|end| bytes[*end] == b'@');
    if let Some(end) = userinfo_end {
        let userinfo = &text[start..end];
        let (user, password) = match userinfo.find(':') {
            Some(colon) => (&userinfo[..colon], Some((start + colon + 1)..end)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            settings.push(Setting { keyword: "user".into(), value: decode(user)?, written: start..start + user.len() });
        }
        if let Some(span) = password {
            settings.push(Setting { keyword: "password".into(), value: decode(&text[span.clone()])?, written: span });
        }
        at = end + 1;
    }
    // Hosts, each with its port: `host[:port][,host[:port]...]`, `[v6]` for IPv6 addresses.
    let mut hosts = Vec::new();
    let mut ports = Vec::new();
    let hosts_start = at;
    loop {
        let host = if bytes.get(at) == Some(&b'[') {
            // Messages quote the host part only: the whole URI may hold a password.
            let close = text[at..].find(']').map(|offset| at + offset).ok_or_else(|| {
                Error::Url(format!("the IPv6 host address `{}` has no closing `]`", &text[at..]))
            })?;
            if close == at + 1 {
                return Err(Error::Url("the IPv6 host address `[]` is empty".to_owned()));
            }
            let host = &text[at + 1..close];
            at = close + 1;
            if !matches!(bytes.get(at), None | Some(b':' | b'/' | b'?' | b',')) {
                return Err(Error::Url(format!("unexpected `{}` after the IPv6 host address `[{host}]`", bytes[at] as char)));
            }
            host.to_owned()
        } else {
            let end = text[at..].find([':', '/', '?', ',']).map_or(text.len(), |offset| at + offset);
            let host = decode(&text[at..end])?;
            at = end;
            host
        };
        let port = if bytes.get(at) == Some(&b':') {
            let end = text[at + 1..].find(['/', '?', ',']).map_or(text.len(), |offset| at + 1 + offset);
            let port = decode(&text[at + 1..end])?;
            at = end;
            port
        } else {
            String::new()
        };
        hosts.push(host);
        ports.push(port);
        if bytes.get(at) == Some(&b',') {
            at += 1;
        } else {
            break;
        }
    }
    let netloc = hosts_start..at;
    if hosts.iter().any(|host| !host.is_empty()) {
        settings.push(Setting { keyword: "host".into(), value: hosts.join(","), written: netloc.clone() });
    }
    if ports.iter().any(|port| !port.is_empty()) {
        settings.push(Setting { keyword: "port".into(), value: ports.join(","), written: netloc });
    }
    if bytes.get(at) == Some(&b'/') {
        let end = text[at + 1..].find('?').map_or(text.len(), |offset| at + 1 + offset);
        let dbname = decode(&text[at + 1..end])?;
        if !dbname.is_empty() {
            settings.push(Setting { keyword: "dbname".into(), value: dbname, written: at + 1..end });
        }
        at = end;
    }
    if bytes.get(at) == Some(&b'?') {
        let mut pair_start = at + 1;
        for pair in text[at + 1..].split('&') {
            let span = pair_start..pair_start + pair.len();
            pair_start = span.end + 1;
            if pair.is_empty() {
                continue;
            }
            let (keyword, value) = pair.split_once('=').ok_or_else(|| {
                Error::Url(format!("the URI parameter `{}` has no `=`: write keyword=value", decode(pair).unwrap_or_default()))
            })?;
            let (keyword, value) = (decode(keyword)?, decode(value)?);
            let value_start = span.start + pair.find('=').unwrap_or(0) + 1;
            // JDBC's spelling, which libpq accepts too.
            let (keyword, value) = if keyword == "ssl" && value == "true" { ("sslmode".to_owned(), "require".to_owned()) } else { (keyword, value) };
            settings.push(Setting { keyword, value, written: value_start..span.end });
        }
    } else if at < text.len() {
        return Err(Error::Url(format!("unexpected `{}` after the host list of the connection URI", &text[at..])));
    }
    Ok(settings)
}

/// `%XX` escapes, as libpq decodes them: a `%` not followed by two hex digits, and `%00`, are errors.
fn decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = |at: usize| bytes.get(at).and_then(|byte| (*byte as char).to_digit(16));
            let (Some(high), Some(low)) = (hex(index + 1), hex(index + 2)) else {
                return Err(Error::Url(format!("`{text}` holds an invalid percent-encoded character: write %XX with two hex digits")));
            };
            let byte = (high * 16 + low) as u8;
            if byte == 0 {
                return Err(Error::Url("a connection URI may not hold %00".to_owned()));
            }
            out.push(byte);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::Url(format!("`{text}` does not decode to UTF-8 text")))
}

/// The settings of a key-value string, as libpq's `conninfo_parse` reads it: `keyword = value`,
/// values single-quoted when they hold spaces, a backslash escaping the next character.
fn key_value_settings(text: &str) -> Result<Vec<Setting>> {
    let mut settings = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(keyword_start, _)) = chars.peek() else { break };
        let mut keyword_end = text.len();
        while let Some(&(at, c)) = chars.peek() {
            if c.is_whitespace() || c == '=' {
                keyword_end = at;
                break;
            }
            chars.next();
        }
        let keyword = &text[keyword_start..keyword_end];
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(Error::Url(format!("`{keyword}` has no `=` after it: write {keyword}=value")));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let value_start = chars.peek().map_or(text.len(), |(at, _)| *at);
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                    '\'' => {
                        closed = true;
                        break;
                    }
                    other => value.push(other),
                }
            }
            if !closed {
                return Err(Error::Url(format!("the value of `{keyword}` has no closing quote")));
            }
        } else {
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    value.extend(chars.next().map(|(_, escaped)| escaped));
                } else {
                    value.push(c);
                }
            }
        }
        let value_end = chars.peek().map_or(text.len(), |(at, _)| *at);
        settings.push(Setting { keyword: keyword.to_owned(), value, written: value_start..value_end });
    }
    Ok(settings)
}

/// The connection string with its password replaced by `****` wherever it is written (the user
/// information of a URI, a `password` parameter or keyword), for messages and logs. A string
/// that does not parse is not shown at all, since where its password is cannot be known.
pub fn masked(text: &str) -> String {
    let Ok(settings) = settings(text) else { return "(a connection string that does not parse)".to_owned() };
    let mut spans: Vec<Range<usize>> =
        settings.into_iter().filter(|setting| setting.keyword == "password").map(|setting| setting.written).collect();
    spans.sort_by_key(|span| span.start);
    let mut shown = String::with_capacity(text.len());
    let mut at = 0;
    for span in spans {
        shown.push_str(&text[at..span.start]);
        shown.push_str("****");
        at = span.end;
    }
    shown.push_str(&text[at..]);
    shown
}

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain only.
    Disable,
    /// Plain first; TLS when the server refuses the plain connection.
    Allow,
    /// TLS first; plain when the server does not offer TLS or the TLS attempt fails.
    Prefer,
    /// TLS only; the certificate is checked only against a root certificate file, when there is one.
    Require,
    /// TLS, the certificate chaining to a trusted root.
    VerifyCa,
    /// TLS, the certificate chaining to a trusted root and naming the host.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether the server's certificate must chain to a trusted root.
    pub fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// libpq's `target_session_attrs`: which server of a host list a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionAttrs {
    Any,
    ReadWrite,
    ReadOnly,
    Primary,
    Standby,
    /// A standby if any host is one, else any server.
    PreferStandby,
}

impl SessionAttrs {
    fn parse(text: &str) -> Option<SessionAttrs> {
        Some(match text {
            "any" => SessionAttrs::Any,
            "read-write" => SessionAttrs::ReadWrite,
            "read-only" => SessionAttrs::ReadOnly,
            "primary" => SessionAttrs::Primary,
            "standby" => SessionAttrs::Standby,
            "prefer-standby" => SessionAttrs::PreferStandby,
            _ => return None,
        })
    }
}

/// Where the trusted root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCerts {
    /// None: the certificate is not checked (`prefer`, `require` without a root file).
    None,
    File(PathBuf),
    /// `sslrootcert=system`: the system's trusted roots.
    System,
    /// `verify-ca` or `verify-full` with no root file: no TLS connection can be checked, so
    /// none is made. The default file that was looked for, when there is a home folder.
    Missing(Option<PathBuf>),
}

impl RootCerts {
    /// Why a checked TLS connection cannot be made, for [`RootCerts::Missing`].
    pub fn missing(&self, mode: SslMode) -> Option<String> {
        let RootCerts::Missing(default) = self else { return None };
        let default = default.as_ref().map_or_else(|| "~/.postgresql/root.crt".to_owned(), |file| file.display().to_string());
        Some(format!(
            "sslmode={} checks the server's certificate, but there is no root certificate file: {default} does not exist. \
             Name the CA's certificate with sslrootcert=FILE, use the system's trusted roots with sslrootcert=system, \
             or use sslmode=require to encrypt without checking",
            mode.name()
        ))
    }
}

/// The TLS side of the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub mode: SslMode,
    pub roots: RootCerts,
    /// The client certificate and its key, when there is a certificate file.
    pub client: Option<(PathBuf, PathBuf)>,
    pub crl: Option<PathBuf>,
    pub sni: bool,
    /// TLS 1.3 only (`ssl_min_protocol_version=TLSv1.3`).
    pub tls13_only: bool,
    /// TLS 1.2 only (`ssl_max_protocol_version=TLSv1.2`).
    pub tls12_only: bool,
    /// `sslnegotiation=direct`: TLS from the first byte, without asking the server first.
    pub direct: bool,
}

/// How a host is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Address {
    /// A host name or address, resolved at connection time.
    Tcp(String),
    /// An IP address given as `hostaddr`, with the host name (if any) kept for TLS and the
    /// password file.
    Ip(IpAddr),
    /// The directory holding the server's socket (`.s.PGSQL.{port}` inside it).
    Unix(PathBuf),
}

/// One host of the list, with its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub address: Address,
    /// The name the server is known by: for TLS (verification and SNI) and the password file.
    pub name: String,
    pub port: u16,
}

impl Target {
    /// How libpq names the server in its messages.
    pub fn describe(&self) -> String {
        match &self.address {
            Address::Unix(dir) => format!("server on socket \"{}\"", dir.join(format!(".s.PGSQL.{}", self.port)).display()),
            Address::Ip(ip) if self.name != ip.to_string() => format!("server at \"{}\" ({ip}), port {}", self.name, self.port),
            _ => format!("server at \"{}\", port {}", self.name, self.port),
        }
    }
}

/// TCP keepalive settings (libpq's `keepalives*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Keepalive {
    pub enabled: bool,
    pub idle: Option<Duration>,
    pub interval: Option<Duration>,
    pub count: Option<u32>,
    pub user_timeout: Option<Duration>,
}

/// Everything a connection attempt needs, resolved from the string and the environment.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ConnectParams {
    pub targets: Vec<Target>,
    pub user: String,
    pub dbname: String,
    /// Given in the string or `PGPASSWORD`; otherwise the password file is asked per host.
    pub password: Option<String>,
    pub passfile: Option<PathBuf>,
    /// Per host, as libpq's `connect_timeout`; `None` leaves it to the store's own bound.
    pub connect_timeout: Option<Duration>,
    pub options: Option<String>,
    pub application_name: String,
    pub tls: TlsSettings,
    pub session: SessionAttrs,
    pub random_order: bool,
    pub channel_binding: tokio_postgres::config::ChannelBinding,
    pub keepalive: Keepalive,
}

/// The password is never shown.
impl std::fmt::Debug for ConnectParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectParams")
            .field("targets", &self.targets)
            .field("user", &self.user)
            .field("dbname", &self.dbname)
            .field("password", &self.password.as_ref().map(|_| "****"))
            .field("passfile", &self.passfile)
            .field("tls", &self.tls)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// The settings of `text` with `environment` filling in what it leaves out, checked.
pub(crate) fn resolve(text: &str, environment: &Environment) -> Result<ConnectParams> {
    let info = ConnInfo::parse(text)?;
    let get = |keyword: &str| info.get(environment, keyword).filter(|value| !value.is_empty());
    let invalid = |keyword: &str, value: &str, expected: &str| {
        Error::Url(format!("{keyword} `{value}` is not valid: expected {expected}"))
    };

    let targets = targets(get("host"), get("hostaddr"), get("port"))?;
    let user = match get("user") {
        Some(user) => user.to_owned(),
        None => environment.login.clone().ok_or_else(|| {
            Error::Url("no user name: set user in the connection string (postgresql://USER@host/db) or PGUSER".to_owned())
        })?,
    };
    let dbname = get("dbname").map_or_else(|| user.clone(), str::to_owned);
    // An empty password is no password: the password file is asked, as libpq does.
    let password = get("password").map(str::to_owned);
    let passfile = match get("passfile") {
        Some(path) => Some(PathBuf::from(path)),
        None => environment.home_file(".pgpass"),
    };
    let connect_timeout = match get("connect_timeout") {
        None => None,
        Some(text) => match text.trim().parse::<i64>() {
            // libpq waits at least two seconds; zero or less means no limit of its own.
            Ok(seconds) if seconds > 0 => Some(Duration::from_secs(seconds.max(2) as u64)),
            Ok(_) => None,
            Err(_) => return Err(invalid("connect_timeout", text, "a whole number of seconds")),
        },
    };
    if let Some(encoding) = get("client_encoding") {
        if !matches!(encoding.to_ascii_lowercase().as_str(), "utf8" | "utf-8" | "unicode" | "auto") {
            return Err(invalid("client_encoding", encoding, "UTF8 (kenning speaks UTF-8 to the server)"));
        }
    }
    let application_name = get("application_name").or(get("fallback_application_name")).unwrap_or("kenning").to_owned();
    let session = match get("target_session_attrs") {
        Some(text) => SessionAttrs::parse(text)
            .ok_or_else(|| invalid("target_session_attrs", text, "any, read-write, read-only, primary, standby or prefer-standby"))?,
        None => SessionAttrs::Any,
    };
    let random_order = match get("load_balance_hosts") {
        None | Some("disable") => false,
        Some("random") => true,
        Some(other) => return Err(invalid("load_balance_hosts", other, "disable or random")),
    };
    let channel_binding = match get("channel_binding") {
        None | Some("prefer") => tokio_postgres::config::ChannelBinding::Prefer,
        Some("disable") => tokio_postgres::config::ChannelBinding::Disable,
        Some("require") => tokio_postgres::config::ChannelBinding::Require,
        Some(other) => return Err(invalid("channel_binding", other, "disable, prefer or require")),
    };
    match get("gssencmode") {
        None | Some("disable" | "prefer") => {}
        Some("require") => return Err(Error::Url("gssencmode=require: GSSAPI encryption is not supported; use TLS (sslmode)".to_owned())),
        Some(other) => return Err(invalid("gssencmode", other, "disable, prefer or require")),
    }
    if let Some(version) = get("min_protocol_version").filter(|version| *version != "3.0") {
        return Err(invalid("min_protocol_version", version, "3.0, the protocol version kenning speaks"));
    }
    if let Some(version) = get("max_protocol_version").filter(|version| !matches!(*version, "3.0" | "3.2" | "latest")) {
        return Err(invalid("max_protocol_version", version, "3.0, 3.2 or latest"));
    }
    let tls = tls_settings(&get, environment)?;
    let keepalive = keepalive(&get)?;
    Ok(ConnectParams {
        targets,
        user,
        dbname,
        password,
        passfile,
        connect_timeout,
        options: get("options").map(str::to_owned),
        application_name,
        tls,
        session,
        random_order,
        channel_binding,
        keepalive,
    })
}

/// The host list: `host`, `hostaddr` and `port` are comma-separated lists, as in libpq.
fn targets(host: Option<&str>, hostaddr: Option<&str>, port: Option<&str>) -> Result<Vec<Target>> {
    let hosts: Vec<&str> = host.map_or_else(Vec::new, |hosts| hosts.split(',').collect());
    let addresses: Vec<&str> = hostaddr.map_or_else(Vec::new, |addresses| addresses.split(',').collect());
    let ports: Vec<&str> = port.map_or_else(Vec::new, |ports| ports.split(',').collect());
    if !addresses.is_empty() && !hosts.is_empty() && addresses.len() != hosts.len() {
        return Err(Error::Url(format!(
            "{} host names and {} hostaddr values: give one hostaddr per host, or none",
            hosts.len(),
            addresses.len()
        )));
    }
    let count = hosts.len().max(addresses.len()).max(1);
    if ports.len() > 1 && ports.len() != count {
        return Err(Error::Url(format!("{} ports for {count} hosts: give one port for all, or one per host", ports.len())));
    }
    (0..count)
        .map(|index| {
            let port = match ports.get(index).or(ports.first()).map(|port| port.trim()) {
                None | Some("") => DEFAULT_PORT,
                Some(text) => text
                    .parse::<u16>()
                    .ok()
                    .filter(|port| *port > 0)
                    .ok_or_else(|| Error::Url(format!("port `{text}` is not valid: expected a number from 1 to 65535")))?,
            };
            let host = hosts.get(index).map(|host| host.trim()).unwrap_or("");
            let address = addresses.get(index).map(|address| address.trim()).unwrap_or("");
            if !address.is_empty() {
                let ip: IpAddr = address
                    .parse()
                    .map_err(|_| Error::Url(format!("hostaddr `{address}` is not valid: expected a numeric IPv4 or IPv6 address")))?;
                let name = if host.is_empty() { ip.to_string() } else { host.to_owned() };
                return Ok(Target { address: Address::Ip(ip), name, port });
            }
            if host.is_empty() {
                let dir = default_socket_dir();
                return Ok(Target { name: dir.display().to_string(), address: Address::Unix(dir), port });
            }
            if host.starts_with('/') {
                return Ok(Target { address: Address::Unix(PathBuf::from(host)), name: host.to_owned(), port });
            }
            Ok(Target { address: Address::Tcp(host.to_owned()), name: host.to_owned(), port })
        })
        .collect()
}

fn default_socket_dir() -> PathBuf {
    let found = DEFAULT_SOCKET_DIRS.iter().map(Path::new).find(|dir| dir.is_dir());
    found.unwrap_or(Path::new(DEFAULT_SOCKET_DIRS[1])).to_path_buf()
}

/// Whether `dir` is the socket directory a connection with no host uses, which the password
/// file calls `localhost`.
pub(crate) fn is_default_socket_dir(dir: &Path) -> bool {
    dir == default_socket_dir()
}

fn tls_settings<'a>(get: &impl Fn(&str) -> Option<&'a str>, environment: &Environment) -> Result<TlsSettings> {
    let mode = match get("sslmode") {
        Some(text) => SslMode::parse(text).ok_or_else(|| {
            Error::Url(format!("sslmode `{text}` is not valid: expected disable, allow, prefer, require, verify-ca or verify-full"))
        })?,
        None => SslMode::Prefer,
    };
    // libpq's default root file is used when it exists; verification without one fails.
    let roots = match get("sslrootcert") {
        Some("system") => {
            if mode != SslMode::VerifyFull {
                return Err(Error::Url(format!(
                    "weak sslmode `{}` may not be used with sslrootcert=system: use sslmode=verify-full",
                    mode.name()
                )));
            }
            RootCerts::System
        }
        Some(path) => RootCerts::File(PathBuf::from(path)),
        None => match environment.home_file(".postgresql/root.crt").filter(|file| file.exists()) {
            Some(file) => RootCerts::File(file),
            None => RootCerts::None,
        },
    };
    // As in libpq, the missing file is an error only when TLS is attempted: never over a socket.
    let roots = if mode.verifies() && roots == RootCerts::None {
        RootCerts::Missing(environment.home_file(".postgresql/root.crt"))
    } else {
        roots
    };
    // A client certificate file that does not exist is no client certificate, as in libpq.
    let cert = get("sslcert").map(PathBuf::from).or_else(|| environment.home_file(".postgresql/postgresql.crt"));
    let key = get("sslkey").map(PathBuf::from).or_else(|| environment.home_file(".postgresql/postgresql.key"));
    let client = match (cert.filter(|cert| cert.exists()), get("sslcertmode")) {
        (_, Some("disable")) | (None, _) => None,
        (Some(cert), _) => {
            let key = key.ok_or_else(|| {
                Error::Url(format!("the client certificate {} has no private key: name it with sslkey", cert.display()))
            })?;
            Some((cert, key))
        }
    };
    match get("sslcertmode") {
        None | Some("allow" | "disable") => {}
        Some("require") => {
            return Err(Error::Url("sslcertmode=require is not supported: use sslcertmode=allow with sslcert and sslkey".to_owned()));
        }
        Some(other) => return Err(Error::Url(format!("sslcertmode `{other}` is not valid: expected disable, allow or require"))),
    }
    let sni = match get("sslsni") {
        None | Some("1") => true,
        Some("0") => false,
        Some(other) => return Err(Error::Url(format!("sslsni `{other}` is not valid: expected 0 or 1"))),
    };
    let version = |keyword: &str| -> Result<Option<&'a str>> {
        match get(keyword) {
            None => Ok(None),
            Some(text @ ("TLSv1" | "TLSv1.1" | "TLSv1.2" | "TLSv1.3")) => Ok(Some(text)),
            Some(other) => Err(Error::Url(format!("{keyword} `{other}` is not valid: expected TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3"))),
        }
    };
    // TLS below 1.2 is not offered at all, so a lower minimum changes nothing.
    let tls13_only = version("ssl_min_protocol_version")? == Some("TLSv1.3");
    let tls12_only = match version("ssl_max_protocol_version")? {
        Some("TLSv1" | "TLSv1.1") => {
            return Err(Error::Url("ssl_max_protocol_version below TLSv1.2 is not supported: kenning speaks TLS 1.2 and 1.3".to_owned()));
        }
        Some("TLSv1.2") => true,
        _ => false,
    };
    if tls13_only && tls12_only {
        return Err(Error::Url("ssl_min_protocol_version=TLSv1.3 and ssl_max_protocol_version=TLSv1.2 leave no TLS version".to_owned()));
    }
    let direct = match get("sslnegotiation") {
        None | Some("postgres") => false,
        Some("direct") => {
            if !matches!(mode, SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull) {
                return Err(Error::Url(format!(
                    "weak sslmode `{}` may not be used with sslnegotiation=direct: use sslmode=require or stronger",
                    mode.name()
                )));
            }
            true
        }
        Some(other) => return Err(Error::Url(format!("sslnegotiation `{other}` is not valid: expected postgres or direct"))),
    };
    Ok(TlsSettings { mode, roots, client, crl: get("sslcrl").map(PathBuf::from), sni, tls13_only, tls12_only, direct })
}

fn keepalive<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<Keepalive> {
    let seconds = |keyword: &str| -> Result<Option<Duration>> {
        match get(keyword) {
            None => Ok(None),
            Some(text) => match text.trim().parse::<i64>() {
                Ok(value) if value > 0 => Ok(Some(Duration::from_secs(value as u64))),
                Ok(_) => Ok(None),
                Err(_) => Err(Error::Url(format!("{keyword} `{text}` is not valid: expected a whole number of seconds"))),
            },
        }
    };
    let enabled = match get("keepalives") {
        None => true,
        Some(text) => text.trim().parse::<i64>().map(|value| value != 0).map_err(|_| {
            Error::Url(format!("keepalives `{text}` is not valid: expected 1 (on) or 0 (off)"))
        })?,
    };
    let count = match get("keepalives_count") {
        None => None,
        Some(text) => Some(text.trim().parse::<u32>().map_err(|_| {
            Error::Url(format!("keepalives_count `{text}` is not valid: expected a whole number"))
        })?),
    };
    // libpq's tcp_user_timeout is in milliseconds.
    let user_timeout = match get("tcp_user_timeout") {
        None => None,
        Some(text) => match text.trim().parse::<i64>() {
            Ok(value) if value > 0 => Some(Duration::from_millis(value as u64)),
            Ok(_) => None,
            Err(_) => return Err(Error::Url(format!("tcp_user_timeout `{text}` is not valid: expected milliseconds"))),
        },
    };
    Ok(Keepalive { enabled, idle: seconds("keepalives_idle")?, interval: seconds("keepalives_interval")?, count, user_timeout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(text: &str) -> BTreeMap<String, String> {
        ConnInfo::parse(text).unwrap().given
    }

    fn pairs(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
    }

    #[test]
    fn uris_are_read_as_libpq_reads_them() {
        assert_eq!(
            given("postgresql://kenning:s%40cret@db.example:6543/org?sslmode=verify-full&application_name=x"),
            pairs(&[
                ("user", "kenning"),
                ("password", "s@cret"),
                ("host", "db.example"),
                ("port", "6543"),
                ("dbname", "org"),
                ("sslmode", "verify-full"),
                ("application_name", "x"),
            ])
        );
        // The shape tooling prints for a server on a socket: an empty password, no host, and
        // the socket directory as a parameter.
        assert_eq!(
            given("postgresql://postgres:@/postgres?host=/path/to/socket-dir"),
            pairs(&[("user", "postgres"), ("password", ""), ("dbname", "postgres"), ("host", "/path/to/socket-dir")])
        );
        assert_eq!(given("postgres://%2Fvar%2Frun%2Fpostgresql/db"), pairs(&[("host", "/var/run/postgresql"), ("dbname", "db")]));
        assert_eq!(
            given("postgresql://a:1,b,[::1]:3/db?target_session_attrs=read-write"),
            pairs(&[("host", "a,b,::1"), ("port", "1,,3"), ("dbname", "db"), ("target_session_attrs", "read-write")])
        );
        assert_eq!(given("postgresql:///db?ssl=true"), pairs(&[("dbname", "db"), ("sslmode", "require")]));
        assert_eq!(given("postgresql://"), pairs(&[]));
    }

    #[test]
    fn key_value_strings_are_read_as_libpq_reads_them() {
        assert_eq!(
            given("host=/tmp  port = 5433 password='a \\'b\\' c' user=k\\ x dbname=''"),
            pairs(&[("host", "/tmp"), ("port", "5433"), ("password", "a 'b' c"), ("user", "k x"), ("dbname", "")])
        );
        assert_eq!(given(""), pairs(&[]));
    }

    #[test]
    fn bad_strings_are_refused_with_the_reason() {
        for (text, expected) in [
            ("postgresql://db/x?sslmod=require", "did you mean `sslmode`"),
            ("host=db frobnicate=1", "`frobnicate` is not a libpq connection keyword"),
            ("postgresql://db/x?sslmode", "has no `=`"),
            ("host db", "has no `=`"),
            ("host='db", "no closing quote"),
            ("postgresql://[::1/x", "no closing `]`"),
            ("postgresql://db/x%zz", "percent-encoded"),
            ("host=db service=acme", "pg_service.conf"),
        ] {
            let error = ConnInfo::parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn the_password_is_masked_wherever_it_is_written() {
        assert_eq!(masked("postgresql://k:se%2Fcret@db/x"), "postgresql://k:****@db/x");
        assert_eq!(masked("postgresql://k@db/x?password=secret&sslmode=require"), "postgresql://k@db/x?password=****&sslmode=require");
        assert_eq!(masked("host=db password='a b' user=k"), "host=db password=**** user=k");
        assert_eq!(masked("postgresql://postgres:@/postgres?host=/dir"), "postgresql://postgres:****@/postgres?host=/dir");
        assert!(!masked("host='db password=secret").contains("secret"));
    }

    fn environment(variables: &[(&str, &str)]) -> Environment {
        let variables: BTreeMap<String, String> = variables.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Environment::from_lookup(|name| variables.get(name).cloned(), Some("ada".into()), Some(PathBuf::from("/nonexistent-home")))
    }

    #[test]
    fn the_environment_fills_in_what_the_string_leaves_out() {
        let env = environment(&[("PGHOST", "envhost"), ("PGPORT", "6000"), ("PGDATABASE", "envdb"), ("PGPASSWORD", "p"), ("PGSSLMODE", "require")]);
        let params = resolve("postgresql://", &env).unwrap();
        assert_eq!(params.targets, vec![Target { address: Address::Tcp("envhost".into()), name: "envhost".into(), port: 6000 }]);
        assert_eq!((params.user.as_str(), params.dbname.as_str(), params.password.as_deref()), ("ada", "envdb", Some("p")));
        assert_eq!(params.tls.mode, SslMode::Require);
        assert_eq!(params.passfile, Some(PathBuf::from("/nonexistent-home/.pgpass")));

        // What the string gives wins, an empty value included.
        let params = resolve("host=/sock port='' user=bob sslmode=disable", &env).unwrap();
        assert_eq!(params.targets[0].address, Address::Unix(PathBuf::from("/sock")));
        assert_eq!(params.targets[0].port, 5432);
        assert_eq!((params.user.as_str(), params.dbname.as_str()), ("bob", "envdb"));
        assert_eq!(params.tls.mode, SslMode::Disable);
    }

    #[test]
    fn host_lists_pair_hosts_with_ports_and_addresses() {
        let env = Environment::default();
        let params = resolve("host=a,b,/dir port=1,2,3 user=u target_session_attrs=primary", &env).unwrap();
        let ports: Vec<u16> = params.targets.iter().map(|target| target.port).collect();
        assert_eq!(ports, [1, 2, 3]);
        assert_eq!(params.targets[2].address, Address::Unix(PathBuf::from("/dir")));
        assert_eq!(params.session, SessionAttrs::Primary);

        let params = resolve("host=db.internal hostaddr=10.0.0.5 user=u", &env).unwrap();
        assert_eq!(params.targets[0].address, Address::Ip("10.0.0.5".parse().unwrap()));
        assert_eq!(params.targets[0].name, "db.internal");

        for (text, expected) in [
            ("host=a,b port=1,2,3 user=u", "3 ports for 2 hosts"),
            ("host=a,b hostaddr=10.0.0.1 user=u", "one hostaddr per host"),
            ("host=a port=99999 user=u", "port `99999`"),
            ("host=a user=u target_session_attrs=leader", "prefer-standby"),
            ("host=a", "no user name"),
        ] {
            let error = resolve(text, &env).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn tls_settings_follow_libpq() {
        let env = Environment::default();
        let tls = |text: &str| resolve(&format!("host=db user=u {text}"), &env).map(|params| params.tls);
        assert_eq!(tls("").unwrap().mode, SslMode::Prefer);
        assert_eq!(tls("sslmode=allow").unwrap().mode, SslMode::Allow);
        assert_eq!(tls("sslmode=require sslrootcert=/ca.pem").unwrap().roots, RootCerts::File("/ca.pem".into()));
        assert_eq!(tls("sslmode=verify-full sslrootcert=system").unwrap().roots, RootCerts::System);
        let missing = tls("sslmode=verify-ca").unwrap();
        let error = missing.roots.missing(missing.mode).unwrap();
        assert!(error.contains("no root certificate file") && error.contains("sslrootcert=system"), "{error}");
        let error = tls("sslmode=require sslrootcert=system").unwrap_err().to_string();
        assert!(error.contains("verify-full"), "{error}");
        let error = tls("sslmode=verify").unwrap_err().to_string();
        assert!(error.contains("sslmode `verify`") && error.contains("allow"), "{error}");
        // A client certificate file that is not there is no client certificate, as in libpq.
        assert_eq!(tls("sslcert=/nonexistent.crt sslkey=/nonexistent.key").unwrap().client, None);
        assert!(tls("ssl_min_protocol_version=TLSv1.3").unwrap().tls13_only);
        assert!(tls("sslnegotiation=direct").is_err());
        assert!(tls("sslmode=require sslnegotiation=direct").unwrap().direct);
    }
}
