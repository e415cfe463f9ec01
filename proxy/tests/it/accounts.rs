//! Accounts from the server (`auth_source = server`): accounts created on MariaDB and listed
//! nowhere in sluice log in with their own passwords, as they would directly. Each test
//! creates its own accounts (as the privileged account) and compares with direct logins.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Conn};
use sluice::ProxyHandle;

use crate::admin::{admin, http_get, parse_metrics, rows};
use crate::harness::*;

/// Creates (afresh) `'user'@'host' <auth>` on the server, e.g. `IDENTIFIED BY 'pw'`.
pub(crate) async fn create_account(user: &str, host: &str, auth: &str) {
    let mut root = direct_root(None).await;
    root.query_drop(format!("DROP USER IF EXISTS '{user}'@'{host}'"))
        .await
        .unwrap();
    root.query_drop(format!("CREATE USER '{user}'@'{host}' {auth}"))
        .await
        .unwrap_or_else(|e| panic!("CREATE USER '{user}'@'{host}' {auth}: {e}"));
    root.disconnect().await.unwrap();
}

pub(crate) async fn root_sql(sql: &str) {
    let mut root = direct_root(None).await;
    root.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    root.disconnect().await.unwrap();
}

pub(crate) fn server_addr() -> std::net::SocketAddr {
    backend_addr().parse().expect("the server's address")
}

/// A login through `addr` (sluice or the server): `Ok(CURRENT_USER())` or the error.
async fn login_at(
    addr: std::net::SocketAddr,
    user: &str,
    password: &str,
) -> Result<(Conn, String), mysql_async::Error> {
    let mut c = Conn::new(opts_at(addr, user, password, None)).await?;
    let me: String = c.query_first("SELECT CURRENT_USER()").await?.unwrap();
    Ok((c, me))
}

/// The code a login gets (0: it worked), and the message.
async fn outcome(addr: std::net::SocketAddr, user: &str, password: &str) -> (u16, String) {
    match login_at(addr, user, password).await {
        Ok((c, _)) => {
            c.disconnect().await.unwrap();
            (0, String::new())
        }
        Err(e) => (code_of(&e).unwrap_or(u16::MAX), e.to_string()),
    }
}

pub(crate) async fn start_accounts(ttl: Duration) -> ProxyHandle {
    let mut cfg = config_server_accounts(2);
    cfg.auth_cache_ttl = ttl;
    start(cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_accounts_log_in_with_their_own_passwords() {
    create_account("acc_one", "%", "IDENTIFIED BY 'pw-one'").await;
    create_account("acc_nopw", "%", "").await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let through = proxy.local_addr();
    let (mut c, me) = login_at(through, "acc_one", "pw-one")
        .await
        .expect("logs in");
    assert_eq!(me, "acc_one@%", "the backend login is the account itself");
    assert_eq!(
        c.query_first::<u32, _>("SELECT 41 + 1").await.unwrap(),
        Some(42)
    );
    c.disconnect().await.unwrap();
    let (c, me) = login_at(through, "acc_nopw", "")
        .await
        .expect("no password");
    assert_eq!(me, "acc_nopw@%");
    c.disconnect().await.unwrap();
    for (user, password) in [
        ("acc_one", "wrong"),
        ("acc_one", ""),
        ("acc_nobody", "x"),
        ("acc_nopw", "x"),
    ] {
        let direct = outcome(server_addr(), user, password).await;
        let via = outcome(through, user, password).await;
        assert_eq!(direct.0, 1045, "{user}/{password} directly: {}", direct.1);
        assert_eq!(
            via.0, direct.0,
            "{user}/{password} through sluice: {}",
            via.1
        );
    }
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_password_works_at_the_next_login_and_the_old_one_is_refused() {
    create_account("acc_rot", "%", "IDENTIFIED BY 'old-pw'").await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let through = proxy.local_addr();
    let (mut before, _) = login_at(through, "acc_rot", "old-pw")
        .await
        .expect("old password");
    root_sql("ALTER USER 'acc_rot'@'%' IDENTIFIED BY 'new-pw'").await;
    let (mut after, me) = login_at(through, "acc_rot", "new-pw")
        .await
        .expect("the new password at once");
    assert_eq!(me, "acc_rot@%");
    let (code, msg) = outcome(through, "acc_rot", "old-pw").await;
    assert_eq!(code, 1045, "{msg}");
    assert_eq!(outcome(server_addr(), "acc_rot", "old-pw").await.0, 1045);
    // Both sessions keep working, also when each needs a backend of its own (two open
    // transactions): new backend logins use the newest password.
    after.query_drop("BEGIN").await.unwrap();
    after.query_drop("SELECT 1").await.unwrap();
    before.query_drop("BEGIN").await.unwrap();
    assert_eq!(
        before.query_first::<u8, _>("SELECT 2").await.unwrap(),
        Some(2)
    );
    before.query_drop("COMMIT").await.unwrap();
    after.query_drop("COMMIT").await.unwrap();
    before.disconnect().await.unwrap();
    after.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_account_is_refused_after_a_failed_verify_or_its_ttl() {
    create_account("acc_drop", "%", "IDENTIFIED BY 'pw'").await;
    create_account("acc_drop2", "%", "IDENTIFIED BY 'pw'").await;
    let ttl = Duration::from_secs(2);
    let proxy = start_accounts(ttl).await;
    let through = proxy.local_addr();
    for user in ["acc_drop", "acc_drop2"] {
        login_at(through, user, "pw")
            .await
            .expect("logs in")
            .0
            .disconnect()
            .await
            .unwrap();
    }
    root_sql("DROP USER 'acc_drop'@'%', 'acc_drop2'@'%'").await;
    tokio::time::sleep(sluice::accounts::directory::REFRESH_EVERY).await;
    // A wrong password re-reads the account at once: it is gone.
    assert_eq!(outcome(through, "acc_drop", "guess").await.0, 1045);
    assert_eq!(
        outcome(through, "acc_drop", "pw").await.0,
        1045,
        "gone at once"
    );
    // Past the TTL the right password is refused too.
    tokio::time::sleep(ttl).await;
    let (code, msg) = outcome(through, "acc_drop2", "pw").await;
    assert_eq!(code, 1045, "{msg}");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locked_and_expired_accounts_get_the_servers_errors() {
    create_account("acc_locked", "%", "IDENTIFIED BY 'pw' ACCOUNT LOCK").await;
    create_account("acc_expired", "%", "IDENTIFIED BY 'pw' PASSWORD EXPIRE").await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let through = proxy.local_addr();
    for (user, password, want) in [
        ("acc_locked", "pw", 4151),
        ("acc_locked", "wrong", 1045),
        ("acc_expired", "wrong", 1045),
    ] {
        let direct = outcome(server_addr(), user, password).await;
        assert_eq!(direct.0, want, "{user} directly: {}", direct.1);
        let via = outcome(through, user, password).await;
        assert_eq!(via.0, want, "{user} through sluice: {}", via.1);
    }
    // An expired password: 1862 with what to do (sluice offers no sandbox).
    let (code, msg) = outcome(through, "acc_expired", "pw").await;
    assert_eq!(code, 1862, "{msg}");
    assert!(msg.contains("ALTER USER 'acc_expired'@'%'"), "{msg}");
    proxy.shutdown().await;
}

/// An account whose plugin sluice cannot verify (ed25519 here) gets a 1045 at once that
/// names the account and the fix; a second try is answered the same, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ed25519_account_gets_a_clear_1045_without_waiting() {
    let mut root = direct_root(None).await;
    let installed: Option<String> = root
        .query_first(
            "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'",
        )
        .await
        .unwrap();
    if installed.is_none() {
        root.query_drop("INSTALL SONAME 'auth_ed25519'")
            .await
            .expect("INSTALL SONAME 'auth_ed25519'");
    }
    root.disconnect().await.unwrap();
    create_account(
        "acc_ed",
        "%",
        "IDENTIFIED VIA ed25519 USING PASSWORD('ed-pw')",
    )
    .await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    for _ in 0..2 {
        let started = Instant::now();
        let (code, msg) = outcome(proxy.local_addr(), "acc_ed", "ed-pw").await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered in {:?}",
            started.elapsed()
        );
        assert_eq!(code, 1045, "{msg}");
        assert!(
            msg.contains("'acc_ed'@'%' authenticates with ed25519")
                && msg.contains("users")
                && msg.contains("IDENTIFIED VIA mysql_native_password"),
            "{msg}"
        );
    }
    let stats = &proxy.context().handshake.accounts.stats;
    assert_eq!(
        stats
            .unsupported_plugin
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn com_change_user_moves_between_server_accounts() {
    create_account("acc_cu_a", "%", "IDENTIFIED BY 'pw-a'").await;
    create_account("acc_cu_b", "%", "IDENTIFIED BY 'pw-b'").await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let (mut c, me) = login_at(proxy.local_addr(), "acc_cu_a", "pw-a")
        .await
        .unwrap();
    assert_eq!(me, "acc_cu_a@%");
    c.query_drop("SET @left = 'behind'").await.unwrap();
    c.change_user(
        ChangeUserOpts::new()
            .with_user(Some("acc_cu_b".into()))
            .with_pass(Some("pw-b".into())),
    )
    .await
    .expect("to b");
    let row: Option<(String, Option<String>)> =
        c.query_first("SELECT CURRENT_USER(), @left").await.unwrap();
    assert_eq!(row, Some(("acc_cu_b@%".into(), None)));
    let err = c
        .change_user(
            ChangeUserOpts::new()
                .with_user(Some("acc_cu_a".into()))
                .with_pass(Some("pw-b".into())),
        )
        .await
        .expect_err("a's password is pw-a");
    assert_eq!(code_of(&err), Some(1045), "{err}");
    let (mut c, _) = login_at(proxy.local_addr(), "acc_cu_b", "pw-b")
        .await
        .unwrap();
    c.change_user(
        ChangeUserOpts::new()
            .with_user(Some("acc_cu_a".into()))
            .with_pass(Some("pw-a".into())),
    )
    .await
    .expect("back to a");
    let me: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
    assert_eq!(me.as_deref(), Some("acc_cu_a@%"));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// The server enforces max_user_connections on sluice's backend logins: a statement that
/// needs one more backend connection of the account than it allows gets the server's 1226
/// (through sluice's "cannot log in to its backend" message); the session stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_user_connections_applies_to_backend_connections() {
    create_account(
        "acc_max",
        "%",
        "IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS 1",
    )
    .await;
    let proxy = start_accounts(Duration::from_secs(30)).await;
    let through = proxy.local_addr();
    let (mut a, _) = login_at(through, "acc_max", "pw").await.unwrap();
    let (mut b, _) = login_at(through, "acc_max", "pw")
        .await
        .expect("logins need no backend");
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("SELECT 1").await.unwrap();
    let err = b
        .query_drop("SELECT 2")
        .await
        .expect_err("a second backend connection");
    assert_eq!(code_of(&err), Some(1226), "{err}");
    assert!(err.to_string().contains("max_user_connections"), "{err}");
    a.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        b.query_first::<u8, _>("SELECT 3").await.unwrap(),
        Some(3),
        "the freed backend serves b"
    );
    a.disconnect().await.unwrap();
    b.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_user_wins_over_the_servers_row_and_show_users_tells_the_source() {
    create_account("acc_dup", "%", "IDENTIFIED BY 'server-pw'").await;
    create_account("acc_srv", "%", "IDENTIFIED BY 'srv-pw'").await;
    let mut cfg = crate::admin::admin_config(2);
    cfg.users[0].name = "acc_dup".into();
    cfg.users[0].password = sluice::config::Secret::new("list-pw".into());
    cfg.auth_source = Some(sluice::config::AuthSource::Both);
    cfg.auth_user = config_server_accounts(2).auth_user;
    let proxy = start(cfg).await;
    let through = proxy.local_addr();
    let (c, me) = login_at(through, "acc_dup", "list-pw")
        .await
        .expect("the listed password");
    assert_eq!(me, format!("{APP_USER}@%"), "the list's backend account");
    c.disconnect().await.unwrap();
    assert_eq!(outcome(through, "acc_dup", "server-pw").await.0, 1045);
    let (c, me) = login_at(through, "acc_srv", "srv-pw")
        .await
        .expect("a server account");
    assert_eq!(me, "acc_srv@%");
    c.disconnect().await.unwrap();
    let mut console = admin(&proxy).await;
    let users = rows(&mut console, "SHOW USERS").await;
    let row = |name: &str| {
        users
            .iter()
            .find(|r| r["user"].as_deref() == Some(name))
            .cloned()
    };
    let srv = row("acc_srv").expect("acc_srv is listed");
    assert_eq!(srv["source"].as_deref(), Some("server"));
    assert_eq!(srv["host"].as_deref(), Some("%"));
    assert_eq!(srv["plugin"].as_deref(), Some("mysql_native_password"));
    assert_eq!(srv["state"].as_deref(), Some("ok"));
    assert!(srv["last_refresh_s_ago"].is_some());
    assert_eq!(
        row("acc_dup").expect("listed")["source"].as_deref(),
        Some("list")
    );
    let all = format!("{users:?}");
    let hash = sluice::protocol::auth::native_hash(b"srv-pw");
    assert!(
        !all.contains(&hash) && !all.contains("srv-pw") && !all.contains("list-pw"),
        "{all}"
    );
    let (_, body) = http_get(proxy.metrics_addr().unwrap(), "/metrics").await;
    let m = parse_metrics(&body);
    assert_eq!(
        m["sluice_account_lookups_total"], 1.0,
        "the listed name is never looked up"
    );
    for name in [
        "hits",
        "misses",
        "refreshes",
        "table_reads",
        "unsupported_plugin_refusals",
    ] {
        assert!(
            m.contains_key(&format!("sluice_account_{name}_total")),
            "{name}:\n{body}"
        );
    }
    assert!(!body.contains(&hash));
    proxy.shutdown().await;
}

/// A listed user whose password is the `*<40 hex>` hash and who has no backend credentials
/// logs in to the backend as itself with the SHA1(password) its login proved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_hash_user_logs_in_to_the_backend_with_the_proven_sha1() {
    let mut cfg = config(1);
    cfg.users = vec![sluice::config::UserConfig::new(
        APP_USER,
        &sluice::protocol::auth::native_hash(APP_PASSWORD.as_bytes()),
    )];
    let proxy = start(cfg).await;
    let (c, me) = login_at(proxy.local_addr(), APP_USER, APP_PASSWORD)
        .await
        .expect("logs in");
    assert_eq!(me, format!("{APP_USER}@%"));
    c.disconnect().await.unwrap();
    assert_eq!(outcome(proxy.local_addr(), APP_USER, "wrong").await.0, 1045);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_without_the_grant_is_refused_at_start() {
    create_account("acc_svc_nogrant", "%", "IDENTIFIED BY 'svc'").await;
    let mut cfg = config_server_accounts(1);
    cfg.auth_user = Some(sluice::config::AuthUser {
        name: "acc_svc_nogrant".into(),
        password: sluice::config::Secret::new("svc".into()),
    });
    let err = sluice::Proxy::bind(cfg.clone())
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("GRANT SELECT ON mysql.global_priv TO 'acc_svc_nogrant'@'%'"),
        "{msg}"
    );
    cfg.auth_user.as_mut().unwrap().password = sluice::config::Secret::new("wrong".into());
    let msg = sluice::Proxy::bind(cfg)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(msg.contains("auth_user") && msg.contains("1045"), "{msg}");
}

/// The service account loses its grant while sluice runs: cached accounts log in until
/// their TTL, then they are refused with a clear error (never let in unchecked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_table_keeps_cached_accounts_until_their_ttl() {
    create_account("acc_svc_revoked", "%", "IDENTIFIED BY 'svc'").await;
    root_sql("GRANT SELECT ON mysql.global_priv TO 'acc_svc_revoked'@'%'").await;
    create_account("acc_cached", "%", "IDENTIFIED BY 'pw'").await;
    let ttl = Duration::from_secs(2);
    let mut cfg = config_server_accounts(1);
    cfg.auth_cache_ttl = ttl;
    cfg.auth_user = Some(sluice::config::AuthUser {
        name: "acc_svc_revoked".into(),
        password: sluice::config::Secret::new("svc".into()),
    });
    let proxy = start(cfg).await;
    let through = proxy.local_addr();
    login_at(through, "acc_cached", "pw")
        .await
        .expect("read and cached")
        .0
        .disconnect()
        .await
        .unwrap();
    root_sql("REVOKE SELECT ON mysql.global_priv FROM 'acc_svc_revoked'@'%'").await;
    let (c, _) = login_at(through, "acc_cached", "pw")
        .await
        .expect("within the TTL");
    c.disconnect().await.unwrap();
    assert_eq!(
        outcome(through, "acc_never_seen", "pw").await.0,
        9003,
        "an uncached name"
    );
    tokio::time::sleep(ttl).await;
    let (code, msg) = outcome(through, "acc_cached", "pw").await;
    assert_eq!(code, 9003, "{msg}");
    assert!(
        msg.contains("account table cannot be read") && msg.contains("GRANT SELECT"),
        "{msg}"
    );
    proxy.shutdown().await;
}

/// 1,000 logins of 50 accounts at once: each account is read from the table once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_logins_of_fifty_accounts_read_each_account_once() {
    let mut root = direct_root(None).await;
    for i in 0..50 {
        root.query_drop(format!("DROP USER IF EXISTS 'acc_storm{i}'@'%'"))
            .await
            .unwrap();
        root.query_drop(format!(
            "CREATE USER 'acc_storm{i}'@'%' IDENTIFIED BY 'pw{i}'"
        ))
        .await
        .unwrap();
    }
    root.disconnect().await.unwrap();
    let proxy = start_accounts(Duration::from_secs(60)).await;
    let stats = &proxy.context().handshake.accounts.stats;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let queries_before = load(&stats.queries);
    let addr = proxy.local_addr();
    let logins: Vec<_> = (0..1000)
        .map(|n| {
            tokio::spawn(async move {
                let i = n % 50;
                let c = Conn::new(opts_at(
                    addr,
                    &format!("acc_storm{i}"),
                    &format!("pw{i}"),
                    None,
                ))
                .await
                .unwrap_or_else(|e| panic!("login {n}: {e}"));
                c.disconnect().await.unwrap();
            })
        })
        .collect();
    for l in logins {
        l.await.unwrap();
    }
    assert_eq!(load(&stats.names_read), 50, "one read per account");
    let queries = load(&stats.queries) - queries_before;
    assert!((1..=50).contains(&queries), "{queries} table queries");
    // A miss waited for a read (its own or one it joined).
    assert_eq!(load(&stats.hits) + load(&stats.misses), 1000);
    assert!(load(&stats.misses) >= 50);
    eprintln!("1000 logins of 50 accounts: {queries} account-table queries");
    proxy.shutdown().await;
}
