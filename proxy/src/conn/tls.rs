//! TLS configs, built once at start-up: the client-facing `ServerConfig` from
//! `tls_cert`/`tls_key`, and the backend-facing `ClientConfig` from `backend_tls` /
//! `backend_tls_ca` with the certificate check each mode asks for.
//!
//! The socket upgrades live in `stream.rs` and the SSLRequest exchanges in `client.rs` and
//! `backend.rs`; this file only turns PEM files and modes into configs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};

use crate::config::{BackendTlsMode, Endpoint};

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read TLS certificate {path}: {source}")]
    Cert {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("TLS certificate file {0} holds no certificate")]
    NoCert(PathBuf),
    #[error("cannot read TLS private key {path}: {source}")]
    Key {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("TLS certificate and key do not make a usable server config: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("backend_tls_ca {path} holds no usable CA certificate")]
    NoCa { path: PathBuf },
    #[error("backend_tls_ca {0} cannot be used to verify certificates: {1}")]
    Verifier(PathBuf, rustls::client::VerifierBuilderError),
    #[error("backend address {0} has no host name or IP that a certificate could name")]
    ServerName(String),
}

/// What a backend connection needs for TLS: the mode, the rustls config and the name the
/// certificate must carry (checked only under verify_identity).
pub struct BackendTls {
    pub mode: BackendTlsMode,
    pub connector: tokio_rustls::TlsConnector,
    pub server_name: ServerName<'static>,
}

impl std::fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BackendTls({})", self.mode)
    }
}

fn provider() -> Arc<CryptoProvider> {
    // Explicit provider: exactly one is compiled in, but naming it keeps start-up independent
    // of whatever process-wide default another crate might install.
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the backend TLS settings; `None` when `mode` is disabled.
pub fn load_backend_tls(
    mode: BackendTlsMode,
    ca: Option<&Path>,
    backend: &Endpoint,
) -> Result<Option<Arc<BackendTls>>, TlsError> {
    // A Unix socket never carries TLS: it is local, and MySQL counts it as secure transport
    // (validation refuses the modes that demand TLS with one).
    let Some(host) = backend
        .tls_host()
        .filter(|_| mode != BackendTlsMode::Disabled)
    else {
        return Ok(None);
    };
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|_| TlsError::ServerName(backend.to_string()))?;
    let provider = provider();
    let verifier: Arc<dyn ServerCertVerifier> = match (mode.verifies(), ca) {
        (true, Some(path)) => {
            let roots = load_roots(path)?;
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| TlsError::Verifier(path.to_path_buf(), e))?;
            Arc::new(CaVerifier {
                webpki,
                check_name: mode == BackendTlsMode::VerifyIdentity,
            })
        }
        // Validation makes verify_* without a CA impossible; treat it as unverified.
        _ => Arc::new(NoVerifier(provider.clone())),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Some(Arc::new(BackendTls {
        mode,
        connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        server_name,
    })))
}

fn load_roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Cert {
            path: path.to_path_buf(),
            source,
        })?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::NoCa {
            path: path.to_path_buf(),
        });
    }
    Ok(Arc::new(roots))
}

/// verify_ca / verify_identity: the chain must lead to the configured CA; under verify_ca a
/// certificate that names another host is still accepted (MySQL's VERIFY_CA).
#[derive(Debug)]
struct CaVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for CaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// preferred / required: encryption without authentication of the server (MySQL's
/// PREFERRED and REQUIRED). The handshake signatures are still checked, so the session keys
/// belong to whoever holds the presented certificate's key.
#[derive(Debug)]
struct NoVerifier(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerifier {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Builds the server config from a PEM certificate chain and a PEM private key (PKCS#8,
/// PKCS#1 or SEC1). TLS 1.2 stays enabled: MariaDB Connector/C and older drivers still use it.
pub fn load_server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Cert {
            path: cert.to_path_buf(),
            source,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert(cert.to_path_buf()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
        path: key.to_path_buf(),
        source,
    })?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backend as its setting reads.
    fn load_backend_tls(
        mode: BackendTlsMode,
        ca: Option<&Path>,
        backend: &str,
    ) -> Result<Option<Arc<BackendTls>>, TlsError> {
        super::load_backend_tls(mode, ca, &Endpoint::parse(backend))
    }

    #[test]
    fn backend_tls_modes_build_or_explain_why_not() {
        assert!(load_backend_tls(BackendTlsMode::Disabled, None, "db:3306")
            .unwrap()
            .is_none());
        let tls = load_backend_tls(BackendTlsMode::Required, None, "[::1]:3306")
            .unwrap()
            .expect("a TLS config");
        assert_eq!(tls.server_name.to_str(), "::1");
        let err = load_backend_tls(
            BackendTlsMode::VerifyIdentity,
            Some(Path::new("/nonexistent/ca.pem")),
            "db.example:3306",
        )
        .expect_err("no CA file");
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let ck = rcgen::generate_simple_self_signed(vec!["db.example".into()]).expect("rcgen");
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, ck.cert.pem()).expect("write CA");
        let tls = load_backend_tls(BackendTlsMode::VerifyCa, Some(&ca), "db.example:3306")
            .unwrap()
            .expect("a TLS config");
        assert_eq!(tls.server_name.to_str(), "db.example");
        // A key file holds no certificate to trust.
        std::fs::write(&ca, ck.key_pair.serialize_pem()).expect("write key");
        assert!(load_backend_tls(BackendTlsMode::VerifyCa, Some(&ca), "db:1").is_err());
    }

    #[test]
    fn missing_files_are_reported_with_their_path() {
        let err = load_server_config(Path::new("/nonexistent/c.pem"), Path::new("/k.pem"))
            .expect_err("no such file");
        assert!(err.to_string().contains("/nonexistent/c.pem"), "{err}");
    }

    #[test]
    fn loads_a_generated_certificate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, ck.cert.pem()).expect("write cert");
        std::fs::write(&key, ck.key_pair.serialize_pem()).expect("write key");
        assert!(load_server_config(&cert, &key).is_ok());
        // A key file given as the certificate holds no certificate.
        assert!(matches!(
            load_server_config(&key, &key),
            Err(TlsError::NoCert(_))
        ));
    }
}
