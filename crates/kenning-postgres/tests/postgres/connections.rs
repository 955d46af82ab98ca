//! Connections as libpq makes them, against real servers: the pgvector server over its Unix
//! socket and over TCP without TLS, the TLS server (`scripts/pg-server start-tls`) over TCP at
//! every `sslmode`, with client certificates and passwords (given, from the environment, from a
//! password file), host lists with `target_session_attrs` over the primary and its replica, and
//! the `PG*` variables filling in what a URL leaves out. Each case says whether the connection
//! must be plain, encrypted, or refused with a given reason; connections are made by [`probe`],
//! which leaves kenning's schema alone (the TLS server has no pgvector).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use kenning_postgres::{Environment, Error, ServerInfo, probe};

use super::*;

/// What a connection must come to.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Plain,
    Encrypted,
    /// Refused, with these words in the message.
    Refused(&'static str),
}

const SSLMODES: [&str; 6] = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

fn socket_url() -> String {
    test_variable(SOCKET_URL)
}

fn tls_url() -> String {
    test_variable(TLS_URL)
}

fn replica_url() -> String {
    test_variable(REPLICA_URL)
}

/// The port of a test server's URL.
fn port_of(url: &str) -> u16 {
    let config: postgres::Config = url.parse().unwrap();
    config.get_ports()[0]
}

/// The socket URL's directory and port.
fn socket_place() -> (String, u16) {
    let url = socket_url();
    let (_, query) = url.split_once("?host=").expect("the socket URL names its directory as ?host=");
    let port = url.split("@:").nth(1).and_then(|rest| rest.split('/').next()).and_then(|port| port.parse().ok()).expect("a port");
    (query.to_owned(), port)
}

/// `url` with `parameters` added to its query.
fn with(url: &str, parameters: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{parameters}")
}

fn environment(variables: &[(&str, &str)]) -> Environment {
    let variables: BTreeMap<String, String> = variables.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    Environment::from_lookup(|name| variables.get(name).cloned(), Some("postgres".to_owned()), None)
}

fn connect(url: &str, environment: Environment) -> Result<ServerInfo, Error> {
    probe(&Settings { environment, ..settings_for(url.to_owned(), "kenning") })
}

/// Checks every case, and reports all the ones that came out otherwise at once.
fn check(cases: &[(String, Environment, Expect)]) {
    let mut wrong = Vec::new();
    for (url, environment, expect) in cases {
        let outcome = connect(url, environment.clone());
        let fits = match (expect, &outcome) {
            (Expect::Plain, Ok(info)) => info.tls.is_none(),
            (Expect::Encrypted, Ok(info)) => info.tls.as_deref().is_some_and(|tls| tls.starts_with("TLSv1.")),
            (Expect::Refused(words), Err(error)) => error.to_string().contains(words),
            _ => false,
        };
        if !fits {
            wrong.push(format!("{url}: expected {expect:?}, got {outcome:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

#[test]
fn a_unix_socket_never_carries_tls_whatever_sslmode_says() {
    if !servers(&[SOCKET_URL, TLS_CA]) {
        return;
    }
    let url = socket_url();
    let (dir, port) = socket_place();
    let ca = test_variable(TLS_CA);
    let forms = [
        // The shape tooling prints: an empty password, no host, the directory as a parameter.
        url.clone(),
        format!("postgresql://postgres:@/postgres?host={dir}&port={port}"),
        format!("postgresql://postgres@{}:{port}/postgres", dir.replace('/', "%2F")),
        format!("host={dir} port={port} user=postgres dbname=postgres"),
    ];
    let mut cases = Vec::new();
    for form in &forms {
        for mode in SSLMODES {
            let root = if mode.starts_with("verify") { format!("&sslrootcert={ca}") } else { String::new() };
            let url = if form.starts_with("host=") {
                format!("{form} sslmode={mode}{}", root.replace('&', " "))
            } else {
                with(form, &format!("sslmode={mode}{root}"))
            };
            cases.push((url, Environment::default(), Expect::Plain));
        }
    }
    // As in libpq, verification without a root file fails only connections that try TLS.
    cases.push((with(&url, "sslmode=verify-full"), Environment::default(), Expect::Plain));
    check(&cases);
}

#[test]
fn tcp_without_tls_follows_every_sslmode() {
    if !servers(&[PG_URL, TLS_CA]) {
        return;
    }
    let url = server_url().replace("?sslmode=disable", "");
    let ca = test_variable(TLS_CA);
    let expect = |mode: &str| match mode {
        // allow starts plain; prefer asks for TLS, and goes on plain when the server declines.
        "disable" | "allow" | "prefer" => Expect::Plain,
        _ => Expect::Refused("does not support TLS"),
    };
    let cases: Vec<_> = SSLMODES
        .iter()
        .map(|mode| (with(&url, &format!("sslmode={mode}&sslrootcert={ca}")), Environment::default(), expect(mode)))
        .collect();
    check(&cases);
    // The default is prefer.
    check(&[(url.clone(), Environment::default(), Expect::Plain)]);

    // A store over a URL that requires TLS: recall's unavailable-domain path gets the reason.
    let store = PostgresStore::open(&settings_for(with(&url, "sslmode=require"), &fresh_schema("tls"))).unwrap();
    let message = store.check().unwrap_err().to_string();
    assert!(message.contains("does not support TLS") && message.contains("sslmode=require"), "{message}");
}

#[test]
fn tcp_with_tls_follows_every_sslmode() {
    if !servers(&[TLS_URL, TLS_CA]) {
        return;
    }
    let url = tls_url();
    let ca = test_variable(TLS_CA);
    let port = port_of(&url);
    let plain_role = format!("postgresql://kenning_plain@127.0.0.1:{port}/postgres");
    let cases = vec![
        // The server lets postgres in over TLS only.
        (with(&url, "sslmode=disable"), Expect::Refused("no encryption")),
        // allow: plain refused, then TLS.
        (with(&url, "sslmode=allow"), Expect::Encrypted),
        (with(&url, "sslmode=prefer"), Expect::Encrypted),
        (url.clone(), Expect::Encrypted),
        (with(&url, "sslmode=require"), Expect::Encrypted),
        (with(&url, &format!("sslmode=require&sslrootcert={ca}")), Expect::Encrypted),
        (with(&url, &format!("sslmode=verify-ca&sslrootcert={ca}")), Expect::Encrypted),
        (with(&url, &format!("sslmode=verify-full&sslrootcert={ca}")), Expect::Encrypted),
        (with(&url, "sslmode=verify-full"), Expect::Refused("no root certificate file")),
        // kenning_plain is let in without TLS only: prefer's TLS attempt is refused, so it
        // tries again plain, as libpq does.
        (with(&plain_role, "sslmode=prefer"), Expect::Plain),
        (with(&plain_role, "sslmode=allow"), Expect::Plain),
        (with(&plain_role, "sslmode=require"), Expect::Refused("SSL encryption")),
        // The certificate names localhost and 127.0.0.1: connecting to 127.0.0.1 under another
        // name (hostaddr), verify-full refuses it and verify-ca, which checks the chain only, does not.
        (format!("host=db.invalid hostaddr=127.0.0.1 port={port} user=postgres sslmode=verify-full sslrootcert={ca}"), Expect::Refused("not valid for name")),
        (format!("host=db.invalid hostaddr=127.0.0.1 port={port} user=postgres sslmode=verify-ca sslrootcert={ca}"), Expect::Encrypted),
        (format!("host=localhost port={port} user=postgres dbname=postgres sslmode=verify-full sslrootcert='{ca}'"), Expect::Encrypted),
        (with(&url, "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"), Expect::Refused("sslrootcert /nonexistent/ca.pem")),
        // The first certificate of the system's bundle as the trusted one: not the server's CA.
        (with(&url, &format!("sslmode=verify-ca&sslrootcert={}", other_ca().display())), Expect::Refused("certificate")),
    ];
    check(&cases.into_iter().map(|(url, expect)| (url, Environment::default(), expect)).collect::<Vec<_>>());
}

/// A CA certificate that never signed the test server's: the first of the system's bundle.
fn other_ca() -> PathBuf {
    static FILE: std::sync::OnceLock<tempfile::TempPath> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let bundle = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").expect("the system's CA bundle");
        let first = &bundle[bundle.find("-----BEGIN CERTIFICATE-----").expect("a certificate in the bundle")..];
        let end = first.find("-----END CERTIFICATE-----").unwrap() + "-----END CERTIFICATE-----".len();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), format!("{}\n", &first[..end])).unwrap();
        file.into_temp_path()
    })
    .to_path_buf()
}

#[test]
fn a_client_certificate_is_shown_when_the_server_asks_for_one() {
    if !servers(&[TLS_URL, TLS_CA, TLS_CLIENT_CERT, TLS_CLIENT_KEY]) {
        return;
    }
    let url = tls_url();
    let (ca, cert, key) = (test_variable(TLS_CA), test_variable(TLS_CLIENT_CERT), test_variable(TLS_CLIENT_KEY));
    let role = format!("postgresql://kenning_cert@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={ca}", port_of(&url));
    check(&[
        (with(&role, &format!("sslcert={cert}&sslkey={key}")), Environment::default(), Expect::Encrypted),
        (role.clone(), Environment::default(), Expect::Refused("certificate")),
        // From the environment, as PGSSLCERT and PGSSLKEY.
        (role.clone(), environment(&[("PGSSLCERT", cert.as_str()), ("PGSSLKEY", key.as_str())]), Expect::Encrypted),
    ]);

    // A key others may read is refused, as libpq refuses it.
    let dir = tempfile::tempdir().unwrap();
    let open_key = dir.path().join("client.key");
    std::fs::copy(&key, &open_key).unwrap();
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    check(&[(with(&role, &format!("sslcert={cert}&sslkey={}", open_key.display())), Environment::default(), Expect::Refused("group or world access"))]);
}

#[test]
fn passwords_come_from_the_url_the_environment_or_the_password_file_and_are_never_shown() {
    if !servers(&[TLS_URL]) {
        return;
    }
    const PASSWORD: &str = "kenning-test-password";
    let url = tls_url();
    let port = port_of(&url);
    let role = format!("postgresql://kenning_password@127.0.0.1:{port}/postgres?sslmode=require");
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    std::fs::write(&passfile, format!("127.0.0.1:{port}:*:kenning_password:{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let home = dir.path().to_path_buf();
    std::fs::copy(&passfile, home.join(".pgpass")).unwrap();
    std::fs::set_permissions(home.join(".pgpass"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let with_home = Environment::from_lookup(|_| None, Some("postgres".to_owned()), Some(PathBuf::from(&home)));
    check(&[
        (role.replace("kenning_password@", &format!("kenning_password:{PASSWORD}@")), Environment::default(), Expect::Encrypted),
        (role.clone(), environment(&[("PGPASSWORD", PASSWORD)]), Expect::Encrypted),
        (with(&role, &format!("passfile={}", passfile.display())), Environment::default(), Expect::Encrypted),
        (role.clone(), environment(&[("PGPASSFILE", passfile.to_str().unwrap())]), Expect::Encrypted),
        // ~/.pgpass, when nothing else names a password.
        (role.clone(), with_home, Expect::Encrypted),
        (role.clone(), Environment::default(), Expect::Refused("password")),
    ]);

    // A wrong password is refused; neither it nor any other password shows in the message,
    // which names the server by its URL with the password masked.
    let wrong = role.replace("kenning_password@", "kenning_password:not-the-password@");
    let message = connect(&wrong, Environment::default()).unwrap_err().to_string();
    assert!(message.contains("password authentication failed"), "{message}");
    assert!(!message.contains("not-the-password") && message.contains("kenning_password:****@"), "{message}");
    let store = PostgresStore::open(&settings_for(wrong, &fresh_schema("password"))).unwrap();
    assert!(!store.location().contains("not-the-password"), "{}", store.location());
    let message = store.check().unwrap_err().to_string();
    assert!(!message.contains("not-the-password"), "{message}");
}

#[test]
fn host_lists_find_the_server_target_session_attrs_asks_for() {
    if !servers(&[PG_URL, REPLICA_URL]) {
        return;
    }
    let primary = port_of(&server_url());
    let replica = port_of(&replica_url());
    // Nothing listens on a port just given up by a listener.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let list = |ports: &[u16], attrs: &str| {
        let hosts: Vec<String> = ports.iter().map(|port| format!("127.0.0.1:{port}")).collect();
        format!("postgresql://postgres@{}/postgres?sslmode=disable&target_session_attrs={attrs}", hosts.join(","))
    };
    let standby = |url: &str| connect(url, Environment::default()).unwrap().standby;
    assert!(!standby(&list(&[dead, primary], "any")), "the dead host is skipped");
    assert!(!standby(&list(&[replica, primary], "read-write")));
    assert!(!standby(&list(&[replica, primary], "primary")));
    assert!(standby(&list(&[primary, replica], "read-only")));
    assert!(standby(&list(&[primary, replica], "standby")));
    assert!(standby(&list(&[primary, replica], "prefer-standby")));
    assert!(!standby(&list(&[primary], "prefer-standby")), "with no standby, prefer-standby takes any");
    assert!(standby(&format!("host=127.0.0.1,127.0.0.1 port={primary},{replica} user=postgres sslmode=disable target_session_attrs=standby")));
    let message = connect(&list(&[replica, dead], "primary"), Environment::default()).unwrap_err().to_string();
    assert!(message.contains("the session is a standby") && message.contains(&format!("port {dead} failed")), "{message}");
}

#[test]
fn the_environment_fills_in_what_the_url_leaves_out() {
    if !servers(&[PG_URL, SOCKET_URL]) {
        return;
    }
    let port = port_of(&server_url()).to_string();
    let variables = [("PGHOST", "127.0.0.1"), ("PGPORT", port.as_str()), ("PGUSER", "postgres"), ("PGDATABASE", "postgres"), ("PGSSLMODE", "disable")];
    check(&[
        ("postgresql://".to_owned(), environment(&variables), Expect::Plain),
        // What the URL gives wins over the environment.
        ("postgresql://127.0.0.1/postgres?sslmode=require".to_owned(), environment(&variables), Expect::Refused("does not support TLS")),
    ]);
    // A store over the socket with the environment's user and database.
    let (dir, port) = socket_place();
    let env = environment(&[("PGHOST", dir.as_str()), ("PGPORT", port.to_string().as_str()), ("PGDATABASE", "postgres")]);
    let store = PostgresStore::open(&Settings { environment: env, ..settings_for("postgresql://".to_owned(), &fresh_schema("environment")) }).unwrap();
    store.check().unwrap();
    store.drop_schema().unwrap();
}

/// The conformance suite over the Unix socket.
mod conformance_socket {
    use super::*;

    kenning_conformance::conformance_tests!({
        if !servers(&[SOCKET_URL]) {
            return;
        }
        || -> Box<dyn MemoryStore> { Box::new(PostgresStore::open(&settings_for(socket_url(), &fresh_schema("socket"))).unwrap()) }
    });
}
