//! TLS through rustls, set up as libpq's settings ask: which certificates the server's must
//! chain to (`sslrootcert`: a file, the system's roots, or none), whether its name is checked
//! (`verify-full`), revocation lists (`sslcrl`), a client certificate (`sslcert`, `sslkey`), SNI
//! and the protocol versions.
//!
//! What each `sslmode` does with the result (try TLS first or last, fall back or not, never on
//! a Unix socket) is the connector's business (`connect.rs`); here it only decides how much of
//! the certificate is checked: nothing without a root file (`prefer`, `require`), the chain with
//! one (`require` with a root file, `verify-ca`), the chain and the host name (`verify-full`).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::conninfo::{RootCerts, SslMode, TlsSettings};
use crate::error::{Error, Result};

/// The rustls connector for `settings`.
pub(crate) fn connector(settings: &TlsSettings) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = if settings.tls13_only {
        &[&rustls::version::TLS13]
    } else if settings.tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|error| Error::Tls(error.to_string()))?;
    if let Some(reason) = settings.roots.missing(settings.mode) {
        return Err(Error::Tls(reason));
    }
    let chain = match &settings.roots {
        RootCerts::None | RootCerts::Missing(_) => None,
        roots => {
            let roots = Arc::new(root_certificates(roots)?);
            let mut verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone());
            if let Some(file) = &settings.crl {
                verifier = verifier.with_crls(revocation_lists(file)?);
            }
            Some(verifier.build().map_err(|error| Error::Tls(error.to_string()))?)
        }
    };
    let builder = match chain {
        Some(verifier) if settings.mode == SslMode::VerifyFull => builder.with_webpki_verifier(verifier),
        chain => builder.dangerous().with_custom_certificate_verifier(Arc::new(LibpqVerifier { chain, provider })),
    };
    let mut config = match &settings.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let certificates = certificates(cert, "sslcert")?;
            let key = private_key(key)?;
            builder.with_client_auth_cert(certificates, key).map_err(|error| {
                Error::Tls(format!("sslcert {} and sslkey {} do not make a client identity: {error}", cert.display(), key_name(settings)))
            })?
        }
    };
    config.enable_sni = settings.sni;
    if settings.direct {
        // A server that takes TLS from the first byte checks that the client speaks its protocol.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
    }
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

fn key_name(settings: &TlsSettings) -> String {
    settings.client.as_ref().map_or_else(String::new, |(_, key)| key.display().to_string())
}

/// The trusted roots: a PEM file's certificates, or the system's.
fn root_certificates(roots: &RootCerts) -> Result<rustls::RootCertStore> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        RootCerts::None | RootCerts::Missing(_) => {}
        RootCerts::File(path) => {
            for certificate in certificates(path, "sslrootcert")? {
                store.add(certificate).map_err(|error| Error::Tls(format!("sslrootcert {}: {error}", path.display())))?;
            }
        }
        RootCerts::System => {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::warn!(%error, "a system root certificate could not be read");
            }
            let (added, ignored) = store.add_parsable_certificates(found.certs);
            tracing::debug!(added, ignored, "system root certificates for PostgreSQL TLS");
        }
    }
    Ok(store)
}

fn certificates(path: &Path, keyword: &str) -> Result<Vec<CertificateDer<'static>>> {
    let unreadable = |reason: String| Error::Tls(format!("{keyword} {}: {reason}", path.display()));
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| unreadable(error.to_string()))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| unreadable(error.to_string()))?;
    if certificates.is_empty() {
        return Err(unreadable("holds no PEM certificate".to_owned()));
    }
    Ok(certificates)
}

fn revocation_lists(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>> {
    let unreadable = |reason: String| Error::Tls(format!("sslcrl {}: {reason}", path.display()));
    let lists = CertificateRevocationListDer::pem_file_iter(path)
        .map_err(|error| unreadable(error.to_string()))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| unreadable(error.to_string()))?;
    if lists.is_empty() {
        return Err(unreadable("holds no PEM revocation list".to_owned()));
    }
    Ok(lists)
}

/// The client's private key. As libpq insists, a key file others may read is refused: it must
/// be `u=rw` (0600) or less when the user owns it, `u=rw,g=r` (0640) or less when root does.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let refused = |reason: String| Error::Tls(format!("sslkey {}: {reason}", path.display()));
    let metadata = std::fs::metadata(path).map_err(|error| refused(error.to_string()))?;
    if !metadata.is_file() {
        return Err(refused("is not a regular file".to_owned()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = metadata.permissions().mode();
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own = metadata.uid() == unsafe { libc::geteuid() };
        if (own && mode & 0o077 != 0) || (metadata.uid() == 0 && mode & 0o037 != 0) {
            return Err(refused(
                "has group or world access; it must have permissions u=rw (0600) or less if owned by the current user, \
                 or u=rw,g=r (0640) or less if owned by root"
                    .to_owned(),
            ));
        }
    }
    PrivateKeyDer::from_pem_file(path).map_err(|error| refused(error.to_string()))
}

/// The certificate check short of `verify-full` (which is rustls's own check). With `chain`,
/// the certificate must chain to one of its roots, whatever host name it names (`verify-ca`, or
/// `require` with a root file). Without, any certificate is taken (`prefer`, `allow`, `require`
/// without a root file): libpq encrypts such connections without asking whose certificate the
/// server shows, and so does kenning. The handshake's signatures are checked either way, so the
/// session is bound to the certificate the server presented.
#[derive(Debug)]
struct LibpqVerifier {
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for LibpqVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        // webpki checks the chain before the name, so a name error means the chain was good.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
