//! Client-facing TLS: loads `tls_cert`/`tls_key` into a rustls `ServerConfig` once at start-up.
//!
//! The socket upgrade itself lives in `stream.rs` (`PacketStream::upgrade_server_tls`) and the
//! SSLRequest exchange in `client.rs`; this file only turns PEM files into a config.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

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
    // Explicit provider: exactly one is compiled in, but naming it keeps start-up independent
    // of whatever process-wide default another crate might install.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

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
