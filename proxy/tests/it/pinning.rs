//! Pinned sessions never freeze the proxy (issue 13, part 2): logins never wait for a pool
//! connection, stateless statements are always served, and a session that cannot get a
//! backend to pin hears so clearly. Every test logs in to the backend with an application
//! account that has grants on its own database only.

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;

/// Bounds every step that used to hang, so a regression fails instead of stalling the suite.
const STEP: Duration = Duration::from_secs(20);

/// An account as deployments use it: `GRANT ALL ON <db>.*`, nothing global.
struct AppAccount {
    user: String,
    password: String,
    db: String,
}

/// Creates (afresh) `user` with all privileges on database `db` only, through `admin`.
async fn app_account(admin: &mut Conn, user: &str, db: &str) -> AppAccount {
    let password = format!("{user}-pw");
    for sql in [
        format!("DROP USER IF EXISTS '{user}'@'%'"),
        format!("DROP DATABASE IF EXISTS `{db}`"),
        format!("CREATE DATABASE `{db}`"),
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL ON `{db}`.* TO '{user}'@'%'"),
    ] {
        admin
            .query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    AppAccount {
        user: user.into(),
        password,
        db: db.into(),
    }
}

/// sluice in front of the shared test server, logging in to it as `app`.
fn shared_config(app: &AppAccount, pool_size: u32) -> sluice::Config {
    config_for(backend_addr(), &app.user, &app.password, pool_size)
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {STEP:?}"))
}

/// The measurement at the defaults (pool_size 4): 64 sessions each hold a temporary
/// table; then a 65th CREATE TEMPORARY TABLE, a login naming a default database and a
/// stateless statement all complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_pinned_sessions_at_the_defaults_freeze_nothing() {
    let mut root = direct(None).await;
    let app = app_account(&mut root, "pin_app64", "pin_db64").await;
    root.disconnect().await.unwrap();
    let proxy = start(shared_config(&app, 4)).await;
    let mut pinned = Vec::new();
    for i in 0..64 {
        let mut c = within(
            "a login",
            Conn::new(opts(&proxy, "app", "secret", Some(&app.db))),
        )
        .await
        .unwrap();
        within(
            "CREATE TEMPORARY TABLE",
            c.query_drop(format!(
                "CREATE TEMPORARY TABLE t (id INT) SELECT {i} AS id"
            )),
        )
        .await
        .unwrap_or_else(|e| panic!("session {i}: {e}"));
        pinned.push(c);
    }
    let mut c65 = within(
        "the 65th login naming a database",
        Conn::new(opts(&proxy, "app", "secret", Some(&app.db))),
    )
    .await
    .unwrap();
    within(
        "the 65th CREATE TEMPORARY TABLE",
        c65.query_drop("CREATE TEMPORARY TABLE t (id INT) SELECT 65 AS id"),
    )
    .await
    .unwrap();
    let mut plain = within(
        "a login naming a database",
        Conn::new(opts(&proxy, "app", "secret", Some(&app.db))),
    )
    .await
    .unwrap();
    let one: Option<u32> = within("a stateless statement", plain.query_first("SELECT 1"))
        .await
        .unwrap();
    assert_eq!(one, Some(1));
    for (i, c) in pinned.iter_mut().enumerate() {
        let id: Option<u32> = within(
            "reading a temporary table",
            c.query_first("SELECT id FROM t"),
        )
        .await
        .unwrap();
        assert_eq!(
            id,
            Some(i as u32),
            "session {i} kept its own temporary table"
        );
    }
    for c in pinned.into_iter().chain([c65, plain]) {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}
