//! Accounts from the server, seen from other client addresses and over caching_sha2: PyMySQL
//! binds the client's own address (127.0.0.2 on loopback), so the row the server picks
//! differs from the one sluice's own backend logins (from 127.0.0.1) meet.

use std::time::Duration;

use crate::accounts::{create_account, root_sql, server_addr, start_accounts};
use crate::harness::*;

/// PyMySQL's login from `bind` (the client's own address): `ok <CURRENT_USER()>` or
/// `error <code> <message>`.
async fn py_login(addr: std::net::SocketAddr, user: &str, password: &str, bind: &str) -> String {
    py_login_with(addr, user, password, bind, false).await
}

/// [`py_login`], over TLS when `tls`.
async fn py_login_with(
    addr: std::net::SocketAddr,
    user: &str,
    password: &str,
    bind: &str,
    tls: bool,
) -> String {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/login_check.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .args([
            &addr.ip().to_string(),
            &addr.port().to_string(),
            user,
            password,
            bind,
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("LOGIN_CHECK_TLS", if tls { "1" } else { "" })
        .output()
        .await
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "login_check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn python_has_pymysql() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import pymysql, cryptography"])
        .status()
        .is_ok_and(|s| s.success())
}

/// Two rows of one user with different passwords: the client's address picks the row, as on
/// the server. sluice's own backend login comes from 127.0.0.1, which the server matches to
/// the `%` row: a client of the `127.0.0.2` row with its own password is refused with a
/// message saying so (the documented limit), never let in with a login that fails later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_address_picks_the_row_as_on_the_server() {
    if !python_has_pymysql() {
        skip_or_fail("PyMySQL with cryptography is missing (pip install pymysql cryptography)");
        return;
    }
    create_account("acc_hosts", "%", "IDENTIFIED BY 'pw-any'").await;
    create_account("acc_hosts", "127.0.0.2", "IDENTIFIED BY 'pw-two'").await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let through = proxy.local_addr();
    for (bind, password, direct_says) in [
        ("127.0.0.1", "pw-any", "ok acc_hosts@%"),
        ("127.0.0.1", "pw-two", "error 1045"),
        ("127.0.0.2", "pw-any", "error 1045"),
        ("127.0.0.2", "pw-two", "ok acc_hosts@127.0.0.2"),
    ] {
        let direct = py_login(server_addr(), "acc_hosts", password, bind).await;
        assert!(
            direct.starts_with(direct_says),
            "from {bind} with {password} directly: {direct}"
        );
        let via = py_login(through, "acc_hosts", password, bind).await;
        if bind == "127.0.0.2" && password == "pw-two" {
            assert!(
                via.starts_with("error 1045")
                    && via.contains("sluice logs in to the server from 127.0.0.1")
                    && via.contains("'acc_hosts'@'%'"),
                "{via}"
            );
        } else {
            assert!(
                via.starts_with(direct_says),
                "from {bind} with {password} through sluice: {via}"
            );
        }
    }
    // With the same password on both rows, the 127.0.0.2 row logs in through sluice too.
    root_sql("ALTER USER 'acc_hosts'@'%' IDENTIFIED BY 'pw-two'").await;
    tokio::time::sleep(sluice::accounts::directory::REFRESH_EVERY).await;
    let via = py_login(through, "acc_hosts", "pw-two", "127.0.0.2").await;
    assert_eq!(
        via, "ok acc_hosts@%",
        "the backend login is matched to the % row"
    );
    proxy.shutdown().await;
}

/// caching_sha2_password (MySQL 8's `$A$005$` hashes), over a row written into
/// mysql.global_priv by hand (MariaDB has no such plugin, so its own logins of that row fail;
/// sluice reads the row all the same): PyMySQL from 127.0.0.2 does the full authentication
/// over RSA, sluice checks the cleartext against the SHA-256 crypt, and its backend login
/// from 127.0.0.1 meets a native row with the same password. The second login takes the
/// fast path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_sha2_full_and_fast_authentication() {
    if !python_has_pymysql() {
        skip_or_fail("PyMySQL with cryptography is missing (pip install pymysql cryptography)");
        return;
    }
    // "foobar" as MySQL 8 stores it (its salt has control characters: JSON escapes).
    let hex = "24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    // JSON \uXXXX escapes for all but letters and digits, their backslash doubled for SQL.
    let json_auth: String = bytes
        .iter()
        .map(|&b| match b {
            b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'$' => (b as char).to_string(),
            _ => format!("\\\\u{b:04x}"),
        })
        .collect();
    create_account("acc_sha2", "127.0.0.1", "IDENTIFIED BY 'foobar'").await;
    root_sql("DELETE FROM mysql.global_priv WHERE User = 'acc_sha2' AND Host = '127.0.0.2'").await;
    root_sql(&format!(
        "INSERT INTO mysql.global_priv (Host, User, Priv) VALUES ('127.0.0.2', 'acc_sha2', \
         '{{\"access\":0,\"plugin\":\"caching_sha2_password\",\"authentication_string\":\"{json_auth}\"}}')"
    ))
    .await;
    root_sql("FLUSH PRIVILEGES").await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let through = proxy.local_addr();
    for _ in 0..2 {
        let via = py_login(through, "acc_sha2", "foobar", "127.0.0.2").await;
        assert_eq!(
            via, "ok acc_sha2@127.0.0.1",
            "logged in, backend login as the native row"
        );
    }
    let wrong = py_login(through, "acc_sha2", "foobaz", "127.0.0.2").await;
    assert!(wrong.starts_with("error 1045"), "{wrong}");
    // Over TLS the client sends the password inside it (no RSA).
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let mut cfg = config_server_accounts(1);
    cfg.tls_cert = Some(cert);
    cfg.tls_key = Some(key);
    let tls_proxy = start(cfg).await;
    for _ in 0..2 {
        let via = py_login_with(
            tls_proxy.local_addr(),
            "acc_sha2",
            "foobar",
            "127.0.0.2",
            true,
        )
        .await;
        assert_eq!(via, "ok acc_sha2@127.0.0.1", "over TLS");
    }
    tls_proxy.shutdown().await;
    root_sql("DELETE FROM mysql.global_priv WHERE User = 'acc_sha2'").await;
    root_sql("FLUSH PRIVILEGES").await;
    proxy.shutdown().await;
}
