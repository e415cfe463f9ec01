//! Backend TLS: a private MariaDB with a certificate from a CA generated at test time (rcgen);
//! sluice connects to it in each `backend_tls` mode, a wrong CA or host name fails at once
//! with a clear error, and a sluice -> sluice (TLS frontend) chain does caching_sha2_password
//! full authentication with the password inside TLS.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use sluice::config::{AuthPluginName, BackendTlsMode, Secret, UserConfig};
use sluice::stats::ConnectFailure;
use sluice::ProxyHandle;

use crate::harness::*;

/// PEM files: a CA, a server certificate it signed that names only `localhost`, and an
/// unrelated second CA.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params.self_signed(&key).expect("CA certificate"), key)
}

impl Pki {
    fn generate() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ca_cert, ca_key) = ca("sluice test CA");
        let (other, _) = ca("some other CA");
        let leaf_key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let leaf = params
            .signed_by(&leaf_key, &ca_cert, &ca_key)
            .expect("leaf certificate");
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write PEM");
            path
        };
        Pki {
            ca: write("ca.pem", ca_cert.pem()),
            other_ca: write("other-ca.pem", other.pem()),
            cert: write("server.pem", leaf.pem()),
            key: write("server-key.pem", leaf_key.serialize_pem()),
            _dir: dir,
        }
    }
}

async fn sluice_to(
    backend: String,
    server: &dbkit::LocalServer,
    mode: BackendTlsMode,
    ca: Option<&PathBuf>,
) -> ProxyHandle {
    let mut cfg = config_for_local(server, 2);
    cfg.backend = sluice::config::Endpoint::parse(&backend);
    cfg.backend_tls = mode;
    cfg.backend_tls_ca = ca.cloned();
    start(cfg).await
}

/// The TLS version of the backend connection that ran the statement ("" without TLS).
async fn backend_tls_version(proxy: &ProxyHandle) -> Result<String, mysql_async::Error> {
    let mut c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None)).await?;
    let row: Option<(String, String)> = c
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_version'")
        .await?;
    c.disconnect().await?;
    Ok(row.map(|(_, v)| v).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_tls_modes_against_a_server_with_a_generated_ca() {
    let pki = Pki::generate();
    let arg = |name: &str, p: &PathBuf| format!("--{name}={}", p.display());
    let server = private_server_with(vec![
        arg("ssl-ca", &pki.ca),
        arg("ssl-cert", &pki.cert),
        arg("ssl-key", &pki.key),
    ])
    .await;
    let ip = format!("127.0.0.1:{}", server.port());
    let host = format!("localhost:{}", server.port());
    let cases = [
        (BackendTlsMode::Disabled, &ip, None),
        (BackendTlsMode::Preferred, &ip, None),
        (BackendTlsMode::Required, &ip, None),
        // verify_ca checks the chain, not the name: the certificate names only localhost.
        (BackendTlsMode::VerifyCa, &ip, Some(&pki.ca)),
        (BackendTlsMode::VerifyIdentity, &host, Some(&pki.ca)),
    ];
    for (mode, addr, ca) in cases {
        let proxy = sluice_to(addr.clone(), &server, mode, ca).await;
        let version = backend_tls_version(&proxy)
            .await
            .unwrap_or_else(|e| panic!("{mode} to {addr}: {e}"));
        if mode == BackendTlsMode::Disabled {
            assert_eq!(version, "", "{mode}");
        } else {
            assert!(version.starts_with("TLSv1."), "{mode}: {version:?}");
        }
        // The idle TLS backend is reused, not mistaken for a closed one and reopened.
        for _ in 0..5 {
            backend_tls_version(&proxy).await.unwrap();
        }
        let connects = proxy
            .context()
            .stats
            .backend_connects
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(connects, 1, "{mode}: backends opened");
        proxy.shutdown().await;
    }
    // A certificate the CA did not sign, and a name the certificate does not carry: a clear
    // error at once, not a wait for an outage to end.
    let refused = [
        (&ip, &pki.other_ca, BackendTlsMode::VerifyCa),
        (&ip, &pki.ca, BackendTlsMode::VerifyIdentity),
    ];
    for (addr, ca, mode) in refused {
        let proxy = sluice_to(addr.clone(), &server, mode, Some(ca)).await;
        let t = Instant::now();
        let err = backend_tls_version(&proxy).await.unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{mode}: took {:?}",
            t.elapsed()
        );
        let msg = err.to_string();
        assert!(
            msg.contains("TLS") && msg.contains(addr.as_str()),
            "{mode}: a clear error naming the backend: {msg}"
        );
        assert!(proxy.context().pool.backend_up(), "{mode}: not an outage");
        assert!(
            proxy
                .context()
                .stats
                .connect_failures_by(ConnectFailure::Tls)
                >= 1
        );
        proxy.shutdown().await;
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_tls_refuses_a_server_without_tls() {
    let mut cfg = config(2);
    cfg.backend_tls = BackendTlsMode::Required;
    let proxy = start(cfg).await;
    let err = backend_tls_version(&proxy).await.unwrap_err();
    assert!(err.to_string().contains("does not offer TLS"), "{err}");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_chain_does_caching_sha2_full_auth_inside_backend_tls() {
    let pki = Pki::generate();
    // Inner: TLS frontend with the CA-signed certificate; its user `inner` must use
    // caching_sha2_password.
    let mut inner_cfg = config(2);
    inner_cfg.tls_cert = Some(pki.cert.clone());
    inner_cfg.tls_key = Some(pki.key.clone());
    let mut inner_user = UserConfig::new("inner", "inner-pw");
    inner_user.auth_plugin = Some(AuthPluginName::CachingSha2);
    inner_user.backend_user = Some(APP_USER.to_string());
    inner_user.backend_password = Some(Secret::new(APP_PASSWORD.to_string()));
    inner_cfg.users = vec![inner_user];
    let inner = start(inner_cfg).await;
    // Outer: verifies the inner sluice's certificate and name, logs in as `inner`.
    let inner_addr = format!("localhost:{}", inner.local_addr().port());
    let mut outer_cfg = config_for(inner_addr, "inner", "inner-pw", 2);
    outer_cfg.backend_tls = BackendTlsMode::VerifyIdentity;
    outer_cfg.backend_tls_ca = Some(pki.ca.clone());
    let outer = start(outer_cfg).await;
    let mut c = Conn::new(opts_at(outer.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    let v: String = c
        .query_first("SELECT CONCAT('through ', 'TLS')")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v, "through TLS");
    let hs = &inner.context().handshake;
    assert!(
        hs.sha2_cache.lock().unwrap().contains("inner"),
        "the login was a full authentication (it fills the cache)"
    );
    assert!(
        hs.rsa.get().is_none(),
        "inside TLS the password went as it is, no RSA key exchange"
    );
    c.disconnect().await.unwrap();
    outer.shutdown().await;
    inner.shutdown().await;
}
