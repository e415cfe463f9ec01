//! Client TLS: mysql_async and the `mariadb` CLI over TLS, caching_sha2_password full auth with
//! a cleartext password inside TLS, `require_secure_transport`, and plain clients when TLS is
//! optional. The certificate is generated per test with rcgen.

use std::path::{Path, PathBuf};

use mysql_async::prelude::*;
use mysql_async::{Conn, SslOpts};
use sluice::config::AuthPluginName;
use sluice::{Config, ProxyHandle};
use tokio::process::Command;

use crate::harness::{code_of, config, opts_at, start, state_of};

/// A self-signed certificate for localhost / 127.0.0.1, written as PEM files.
struct TestCert {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

impl TestCert {
    fn generate() -> TestCert {
        let dir = tempfile::tempdir().expect("tempdir");
        let ck =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".into()])
                .expect("rcgen certificate");
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, ck.cert.pem()).expect("write cert");
        std::fs::write(&key, ck.key_pair.serialize_pem()).expect("write key");
        TestCert {
            _dir: dir,
            cert,
            key,
        }
    }

    fn config(&self, pool_size: u32) -> Config {
        let mut cfg = config(pool_size);
        cfg.tls_cert = Some(self.cert.clone());
        cfg.tls_key = Some(self.key.clone());
        cfg
    }
}

/// TLS options that trust exactly the test certificate (full verification).
fn verified(cert: &Path) -> SslOpts {
    SslOpts::default()
        .with_root_certs(vec![cert.to_path_buf().into()])
        .with_disable_built_in_roots(true)
}

fn accept_any() -> SslOpts {
    SslOpts::default().with_danger_accept_invalid_certs(true)
}

async fn tls_conn(proxy: &ProxyHandle, ssl: SslOpts) -> Result<Conn, mysql_async::Error> {
    Conn::new(opts_at(proxy.local_addr(), "app", "secret", None).ssl_opts(Some(ssl))).await
}

async fn plain_conn(proxy: &ProxyHandle) -> Result<Conn, mysql_async::Error> {
    Conn::new(opts_at(proxy.local_addr(), "app", "secret", None)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_runs_queries_over_tls() {
    let cert = TestCert::generate();
    let proxy = start(cert.config(2)).await;
    for ssl in [verified(&cert.cert), accept_any()] {
        let mut c = tls_conn(&proxy, ssl).await.expect("TLS login");
        let n: Option<u64> = c.query_first("SELECT 40 + 2").await.unwrap();
        assert_eq!(n, Some(42));
        // A result bigger than one TLS record (16 KiB) and the read chunk.
        let s: Option<String> = c.query_first("SELECT REPEAT('x', 200000)").await.unwrap();
        assert_eq!(s.map(|s| s.len()), Some(200_000));
        // Binary protocol too.
        let v: Option<String> = c
            .exec_first("SELECT CONCAT(?, ?)", ("a", "b"))
            .await
            .unwrap();
        assert_eq!(v.as_deref(), Some("ab"));
        c.disconnect().await.unwrap();
    }
    // Wrong password over TLS is still 1045.
    let err =
        Conn::new(opts_at(proxy.local_addr(), "app", "nope", None).ssl_opts(Some(accept_any())))
            .await
            .unwrap_err();
    assert_eq!(code_of(&err), Some(1045), "{err}");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_clients_still_work_when_tls_is_optional() {
    let cert = TestCert::generate();
    let proxy = start(cert.config(2)).await;
    let mut c = plain_conn(&proxy).await.expect("plain login");
    let n: Option<u32> = c.query_first("SELECT 7").await.unwrap();
    assert_eq!(n, Some(7));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_is_refused_cleanly_when_tls_is_not_configured() {
    let proxy = start(config(1)).await;
    // CLIENT_SSL is not offered, so the driver itself refuses to go on in clear.
    let err = tls_conn(&proxy, accept_any()).await.unwrap_err();
    assert!(
        matches!(err, mysql_async::Error::Driver(_)),
        "expected a driver error, got {err}"
    );
    let mut c = plain_conn(&proxy).await.expect("plain login");
    let n: Option<u32> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(n, Some(1));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_secure_transport_refuses_plain_clients_with_3159() {
    let cert = TestCert::generate();
    let mut cfg = cert.config(2);
    cfg.require_secure_transport = true;
    let proxy = start(cfg).await;
    let err = plain_conn(&proxy).await.unwrap_err();
    assert_eq!(code_of(&err), Some(3159), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("HY000"));
    assert!(
        err.to_string()
            .contains("Connections using insecure transport are prohibited"),
        "{err}"
    );
    let mut c = tls_conn(&proxy, verified(&cert.cert))
        .await
        .expect("TLS login under require_secure_transport");
    let n: Option<u32> = c.query_first("SELECT 3").await.unwrap();
    assert_eq!(n, Some(3));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_sha2_full_auth_over_tls_takes_the_cleartext_password() {
    let cert = TestCert::generate();
    let mut cfg = cert.config(2);
    cfg.users[0].auth_plugin = Some(AuthPluginName::CachingSha2);
    let proxy = start(cfg).await;
    let handshake = &proxy.context().handshake;
    // Wrong password first: full auth runs (empty cache) and must fail.
    let err =
        Conn::new(opts_at(proxy.local_addr(), "app", "wrong", None).ssl_opts(Some(accept_any())))
            .await
            .unwrap_err();
    assert_eq!(code_of(&err), Some(1045), "{err}");
    assert!(!handshake.sha2_cache.lock().unwrap().contains("app"));

    let mut c = tls_conn(&proxy, accept_any()).await.expect("full auth");
    let n: Option<u32> = c.query_first("SELECT 5").await.unwrap();
    assert_eq!(n, Some(5));
    c.disconnect().await.unwrap();
    // Full auth happened (the user is now cached) without the RSA exchange.
    assert!(handshake.sha2_cache.lock().unwrap().contains("app"));
    assert!(
        handshake.rsa.get().is_none(),
        "RSA key pair was generated: the password did not travel in clear over TLS"
    );
    // Next login takes the fast path.
    let mut c = tls_conn(&proxy, accept_any()).await.expect("fast auth");
    let n: Option<u32> = c.query_first("SELECT 6").await.unwrap();
    assert_eq!(n, Some(6));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

async fn mariadb_cli(proxy: &ProxyHandle, extra: &[&str]) -> std::process::Output {
    let addr = proxy.local_addr();
    let mut args = vec![
        "--no-defaults".to_string(),
        "--protocol=TCP".into(),
        format!("--host={}", addr.ip()),
        format!("--port={}", addr.port()),
        "--user=app".into(),
        "--password=secret".into(),
        "--batch".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Command::new("mariadb")
        .args(&args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run mariadb")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_cli_connects_with_ssl() {
    let cert = TestCert::generate();
    let mut cfg = cert.config(2);
    cfg.require_secure_transport = true;
    let proxy = start(cfg).await;
    let ca = format!("--ssl-ca={}", cert.cert.display());
    for flags in [
        vec!["--ssl", "--skip-ssl-verify-server-cert"],
        vec!["--ssl", ca.as_str(), "--ssl-verify-server-cert"],
    ] {
        let mut extra = flags.clone();
        extra.extend(["-e", "SELECT 6*7 AS answer; \\s"]);
        let out = mariadb_cli(&proxy, &extra).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{flags:?}: {stdout}\n{stderr}");
        assert!(stdout.starts_with("answer\n42\n"), "{flags:?}: {stdout}");
        // `status` reports the client side's view of the link.
        assert!(
            stdout.contains("Cipher in use is"),
            "{flags:?}: not TLS: {stdout}"
        );
    }
    // Without TLS the CLI gets MySQL's refusal.
    let out = mariadb_cli(&proxy, &["--skip-ssl", "-e", "SELECT 1"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("ERROR 3159 (HY000)"), "{stderr}");
    proxy.shutdown().await;
}

/// Reads one single-chunk packet: (sequence id, payload).
async fn read_packet<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await.expect("packet header");
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await.expect("packet payload");
    (head[3], payload)
}

/// The client sends its TLS ClientHello without waiting for anything after the SSLRequest, so
/// both may arrive in one read; the bytes sluice already buffered must reach rustls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_request_and_client_hello_in_one_segment() {
    use bytes::BytesMut;
    use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
    use sluice::protocol::SslRequest;
    use sluice::protocol::{write_packet, Capabilities, Handshake};
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;

    let cert = TestCert::generate();
    let mut cfg = cert.config(1);
    cfg.require_secure_transport = true;
    let proxy = start(cfg).await;
    let mut tcp = tokio::net::TcpStream::connect(proxy.local_addr())
        .await
        .expect("connect");
    let (seq, greeting) = read_packet(&mut tcp).await;
    assert_eq!(seq, 0);
    let hs = Handshake::decode(&greeting).expect("greeting");
    assert!(hs.capabilities.contains(Capabilities::CLIENT_SSL));

    let caps = Capabilities::CLIENT_PROTOCOL_41
        | Capabilities::CLIENT_SECURE_CONNECTION
        | Capabilities::CLIENT_PLUGIN_AUTH
        | Capabilities::CLIENT_LONG_PASSWORD
        | Capabilities::CLIENT_SSL;
    let mut req = BytesMut::new();
    SslRequest {
        capabilities: caps,
        max_packet: 1 << 24,
        collation: 45,
    }
    .encode(&mut req);
    let mut first_write = BytesMut::new();
    write_packet(&mut first_write, 1, &req);

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&cert.cert).expect("cert pem"))
        .expect("root");
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_root_certificates(roots)
    .with_no_client_auth();
    // A second handle on the socket lets the test write SSLRequest + ClientHello in one
    // syscall before tokio-rustls drives the rest of the handshake.
    let fd = std::os::fd::AsFd::as_fd(&tcp)
        .try_clone_to_owned()
        .expect("dup");
    let mut writer = std::net::TcpStream::from(fd);
    let mut hello = Vec::new();
    let connect = tokio_rustls::TlsConnector::from(Arc::new(client)).connect_with(
        ServerName::try_from("localhost").expect("name"),
        tcp,
        |conn| {
            conn.write_tls(&mut hello).expect("client hello");
        },
    );
    first_write.extend_from_slice(&hello);
    writer.write_all(&first_write).expect("one write");
    let mut tls = tokio::time::timeout(std::time::Duration::from_secs(10), connect)
        .await
        .expect("TLS handshake did not stall")
        .expect("TLS handshake");

    let payload = crate::wire::native_response(&hs, caps, 45, "app", "secret");
    let mut out = BytesMut::new();
    write_packet(&mut out, 2, &payload);
    tls.write_all(&out).await.expect("send response");
    tls.flush().await.expect("flush");
    let (seq, ok) = read_packet(&mut tls).await;
    assert_eq!(
        (seq, <[u8]>::first(&ok).copied()),
        (3, Some(0x00)),
        "{ok:?}"
    );
    drop(writer);
    proxy.shutdown().await;
}
