//! TLS against a real TLS server: a PostgreSQL with `ssl=on`, a certificate signed by a throwaway
//! CA and only TLS connections allowed, which `scripts/pg-server start-tls` starts and
//! `scripts/test` names in `KENNING_TEST_PG_TLS_URL` (the URL, without `sslmode`) and
//! `KENNING_TEST_PG_TLS_CA` (the CA certificate's file). That server has no pgvector, so these
//! tests connect through [`probe`], which leaves kenning's schema alone. The other test server
//! has no TLS at all, which shows how a URL that requires TLS fails there.

use std::io::Write;

use kenning_postgres::{Error, ServerInfo, probe};

use super::*;

/// The TLS server's URL and its CA's file, or a failure that says how to get them.
fn tls_server() -> (String, String) {
    let url = std::env::var("KENNING_TEST_PG_TLS_URL").unwrap_or_default();
    let ca = std::env::var("KENNING_TEST_PG_TLS_CA").unwrap_or_default();
    if url.trim().is_empty() || ca.trim().is_empty() {
        panic!(
            "KENNING_TEST_PG_TLS_URL and KENNING_TEST_PG_TLS_CA are not set: the TLS tests need a PostgreSQL \
             server with ssl=on. Run the project's test command, `scripts/test`, which starts one; or start one \
             with `scripts/pg-server start-tls /tmp/kenning-pg-tls` and export the URL it prints and \
             /tmp/kenning-pg-tls/ca.crt."
        );
    }
    (url, ca)
}

/// `url` with `parameters` added to its query.
fn with(url: &str, parameters: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{parameters}")
}

fn probe_url(url: String) -> Result<ServerInfo, Error> {
    probe(&settings_for(url, "kenning"))
}

fn assert_encrypted(info: &ServerInfo) {
    let tls = info.tls.as_deref().unwrap_or("none");
    assert!(tls.starts_with("TLSv1.2") || tls.starts_with("TLSv1.3"), "connection not encrypted: {tls}");
}

#[test]
fn sslmode_require_encrypts_with_or_without_the_ca() {
    let (url, ca) = tls_server();
    assert_encrypted(&probe_url(with(&url, "sslmode=require")).unwrap());
    assert_encrypted(&probe_url(with(&url, &format!("sslmode=require&sslrootcert={ca}"))).unwrap());
    // prefer, libpq's default, takes TLS where the server offers it.
    assert_encrypted(&probe_url(url).unwrap());
}

#[test]
fn sslmode_verify_full_accepts_the_certificate_of_the_given_ca_for_its_host() {
    let (url, ca) = tls_server();
    let info = probe_url(with(&url, &format!("sslmode=verify-full&sslrootcert={ca}"))).unwrap();
    assert_encrypted(&info);
    assert!(!info.version.is_empty());

    // The same through a key-value connection string, with the server named as `localhost`,
    // the certificate's other name.
    let config: postgres::Config = url.parse().unwrap();
    let port = config.get_ports()[0];
    let key_value = format!("host=localhost port={port} user=postgres dbname=postgres sslmode=verify-full sslrootcert='{ca}'");
    assert_encrypted(&probe_url(key_value).unwrap());
}

#[test]
fn verification_fails_against_another_ca_or_another_host_name() {
    let (url, ca) = tls_server();
    // The system's roots never signed the throwaway CA.
    let error = probe_url(with(&url, "sslmode=verify-full")).unwrap_err().to_string();
    assert!(error.to_lowercase().contains("certificate"), "{error}");

    // A certificate of another CA (the first of the system's bundle) as the trusted one.
    let bundle = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").expect("the system's CA bundle");
    let first = &bundle[bundle.find("-----BEGIN CERTIFICATE-----").expect("a certificate in the bundle")..];
    let end = first.find("-----END CERTIFICATE-----").unwrap() + "-----END CERTIFICATE-----".len();
    let other = tempfile::NamedTempFile::new().unwrap();
    writeln!(other.as_file(), "{}", &first[..end]).unwrap();
    let error =
        probe_url(with(&url, &format!("sslmode=verify-full&sslrootcert={}", other.path().display()))).unwrap_err().to_string();
    assert!(error.to_lowercase().contains("certificate"), "{error}");

    // The certificate names localhost and 127.0.0.1. Connecting to 127.0.0.1 under another
    // host name (libpq's `hostaddr`): verify-full refuses it, verify-ca (the chain only) accepts it.
    let config: postgres::Config = url.parse().unwrap();
    let port = config.get_ports()[0];
    let other_name = format!("host=db.invalid hostaddr=127.0.0.1 port={port} user=postgres dbname=postgres sslrootcert={ca}");
    let error = probe_url(format!("{other_name} sslmode=verify-full")).unwrap_err().to_string();
    assert!(error.contains("not valid for name"), "{error}");
    assert_encrypted(&probe_url(format!("{other_name} sslmode=verify-ca")).unwrap());
}

#[test]
fn a_missing_ca_file_is_named_in_the_error() {
    let (url, _) = tls_server();
    let error = probe_url(with(&url, "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")).unwrap_err().to_string();
    assert!(error.contains("sslrootcert /nonexistent/ca.pem"), "{error}");
}

#[test]
fn the_tls_server_refuses_a_plain_connection() {
    let (url, _) = tls_server();
    let error = probe_url(with(&url, "sslmode=disable")).unwrap_err().to_string();
    assert!(error.contains("no encryption") || error.contains("pg_hba.conf"), "{error}");
}

#[test]
fn sslmode_require_against_a_server_without_tls_fails_and_says_why() {
    // The pgvector test server runs without TLS.
    let plain = server_url().replace("sslmode=disable", "sslmode=require");
    assert!(plain.contains("sslmode=require"), "{plain}");
    let error = probe_url(plain.clone()).unwrap_err();
    assert!(matches!(error, Error::Unreachable { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("does not support TLS") && message.contains("sslmode=require"), "{message}");

    // A store over that URL: recall's unavailable-domain path gets the same words.
    let store = PostgresStore::open(&settings_for(plain, &fresh_schema("tls"))).unwrap();
    let message = store.check().unwrap_err().to_string();
    assert!(message.contains("does not support TLS"), "{message}");
}
