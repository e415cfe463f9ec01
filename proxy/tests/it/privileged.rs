//! The small set of tests whose backend account is privileged (the server's own account,
//! which may set `pseudo_thread_id` and take instance-wide locks): what those privileges buy,
//! and that every instance-wide lock is released as the server releases it.
//! Everything else runs as the application account (`harness::APP_USER`).

use mysql_async::prelude::*;
use sluice::conn::identity::IdentityMode;

use crate::harness::*;
use crate::locks::{can_write_t, holds, released};
use dbkit::server::{BENCH_PASSWORD, BENCH_USER};

/// With the privilege, sluice sets pseudo_thread_id: the client's id is seen everywhere,
/// inside a stored procedure too (where the text rewrite cannot reach).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privileged_backend_account_presents_the_id_inside_routines_too() {
    fresh_db("t_priv_id").await;
    let proxy = start(config_privileged(2)).await;
    let mut other = connect(&proxy, Some("t_priv_id")).await;
    let mut c = connect(&proxy, Some("t_priv_id")).await;
    let me = u64::from(c.id());
    c.query_drop("CREATE PROCEDURE p() SELECT CONNECTION_ID()")
        .await
        .unwrap();
    for _ in 0..5 {
        other.query_drop("DO 1").await.unwrap();
        let in_call: u64 = c.query_first("CALL p()").await.unwrap().unwrap();
        assert_eq!(in_call, me);
        let direct_call: u64 = c
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(direct_call, me);
        let binary: u64 = c
            .exec_first("SELECT CONNECTION_ID()", ())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(binary, me);
    }
    let s = server();
    assert_eq!(
        proxy.context().identity.mode(&s.user),
        Some(IdentityMode::PseudoThreadId)
    );
    c.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Slots held by the pool right now, once the session is idle.
async fn slots_settle(proxy: &sluice::ProxyHandle, want: u32) -> bool {
    let ctx = proxy.context().clone();
    eventually(std::time::Duration::from_secs(3), || {
        ctx.pool.snapshot().slots_in_use == want
    })
    .await
}

/// A private server (an instance-wide lock on the shared one would stall every test running
/// meanwhile), its database `t_priv` with tables t and u, sluice in front of it (P=4, the
/// admin console on) logged in as the server's privileged account, and the console.
async fn private_setup() -> (dbkit::LocalServer, sluice::ProxyHandle, mysql_async::Conn) {
    let server = private_server().await;
    let mut root = on_private(&server, BENCH_USER, BENCH_PASSWORD, None).await;
    for sql in [
        "CREATE DATABASE t_priv",
        "CREATE TABLE t_priv.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
        "CREATE TABLE t_priv.u (id INT PRIMARY KEY) ENGINE=InnoDB",
        "INSERT INTO t_priv.t VALUES (1, 0)",
    ] {
        root.query_drop(sql).await.unwrap();
    }
    root.disconnect().await.unwrap();
    let mut cfg = config_for(server.addr().to_string(), BENCH_USER, BENCH_PASSWORD, 4);
    cfg.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.admin_users = vec![sluice::config::UserConfig::new("admin", "s3cret")];
    let proxy = start(cfg).await;
    let a = crate::admin::admin(&proxy).await;
    (server, proxy, a)
}

/// A direct connection to the private server.
async fn on_private(
    server: &dbkit::LocalServer,
    user: &str,
    password: &str,
    db: Option<&str>,
) -> mysql_async::Conn {
    mysql_async::Conn::new(opts_at(server.addr(), user, password, db))
        .await
        .expect("direct connection to the private server")
}

/// Polls until `sql` succeeds on `c` (a lock another session held is gone); panics after 5 s.
async fn succeeds_soon(c: &mut mysql_async::Conn, sql: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while let Err(e) = c.query_drop(sql).await {
        assert!(std::time::Instant::now() < deadline, "{sql}: {e}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The instance-wide locks (RELOAD): each keeps its session's backend exactly until
/// the statement the server ends it with, and no other: FLUSH TABLES WITH READ LOCK until
/// UNLOCK TABLES (a transaction does not end it), FLUSH TABLES t WITH READ LOCK / FOR EXPORT
/// until UNLOCK TABLES or a transaction, BACKUP STAGE until BACKUP STAGE END (not BACKUP
/// UNLOCK), BACKUP LOCK until BACKUP UNLOCK (not UNLOCK TABLES). Another session is blocked
/// while it is held and served after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_locks_last_until_their_own_release() {
    let db = Some("t_priv");
    let (server, proxy, mut a) = private_setup().await;
    let mut h = connect(&proxy, db).await;
    let id = h.id();
    let mut o = on_private(&server, APP_USER, APP_PASSWORD, db).await;
    let mut root = on_private(&server, BENCH_USER, BENCH_PASSWORD, db).await;
    root.query_drop("SET SESSION lock_wait_timeout = 1")
        .await
        .unwrap();

    h.query_drop("FLUSH TABLES WITH READ LOCK").await.unwrap();
    holds(&mut a, id, "table_lock", "FTWRL").await;
    assert_eq!(can_write_t(&mut o).await, Err(1205));
    h.query_drop("BEGIN").await.unwrap();
    h.query_drop("COMMIT").await.unwrap();
    holds(&mut a, id, "table_lock", "FTWRL after a transaction").await;
    assert_eq!(can_write_t(&mut o).await, Err(1205));
    h.query_drop("UNLOCK TABLES").await.unwrap();
    released(&mut a, id, "UNLOCK TABLES after FTWRL").await;
    assert_eq!(can_write_t(&mut o).await, Ok(()));

    for (take, end) in [
        ("FLUSH TABLES t WITH READ LOCK", "BEGIN"),
        ("FLUSH TABLES t FOR EXPORT", "UNLOCK TABLES"),
    ] {
        h.query_drop(take).await.unwrap();
        holds(&mut a, id, "table_lock", take).await;
        assert_eq!(can_write_t(&mut o).await, Err(1205), "{take}");
        h.query_drop(end).await.unwrap();
        h.query_drop("COMMIT").await.unwrap();
        released(&mut a, id, end).await;
        assert_eq!(can_write_t(&mut o).await, Ok(()), "after {end}");
    }

    h.query_drop("BACKUP STAGE START").await.unwrap();
    holds(&mut a, id, "table_lock", "BACKUP STAGE START").await;
    h.query_drop("BACKUP UNLOCK").await.unwrap();
    for stage in ["FLUSH", "BLOCK_DDL", "BLOCK_COMMIT"] {
        h.query_drop(format!("BACKUP STAGE {stage}")).await.unwrap();
        holds(&mut a, id, "table_lock", stage).await;
    }
    let err = root.query_drop("BACKUP STAGE START").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1205), "{err}");
    h.query_drop("BACKUP STAGE END").await.unwrap();
    released(&mut a, id, "BACKUP STAGE END").await;
    root.query_drop("BACKUP STAGE START").await.unwrap();
    root.query_drop("BACKUP STAGE END").await.unwrap();

    h.query_drop("BACKUP LOCK t").await.unwrap();
    holds(&mut a, id, "table_lock", "BACKUP LOCK").await;
    h.query_drop("UNLOCK TABLES").await.unwrap();
    holds(&mut a, id, "table_lock", "BACKUP LOCK after UNLOCK TABLES").await;
    let err = root
        .query_drop("ALTER TABLE t COMMENT 'x'")
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1205), "{err}");
    h.query_drop("BACKUP UNLOCK").await.unwrap();
    released(&mut a, id, "BACKUP UNLOCK").await;
    root.query_drop("ALTER TABLE t COMMENT 'y'").await.unwrap();

    h.disconnect().await.unwrap();
    o.disconnect().await.unwrap();
    root.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// A client that leaves holding an instance-wide lock: the server sees it free, so no
/// backend sluice keeps (or hands to the next client) holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_holding_an_instance_lock_leaves_it_free() {
    let db = Some("t_priv");
    let (server, proxy, mut a) = private_setup().await;
    let mut root = on_private(&server, BENCH_USER, BENCH_PASSWORD, db).await;
    root.query_drop("SET SESSION lock_wait_timeout = 1, innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    for (take, free) in [
        ("FLUSH TABLES WITH READ LOCK", "UPDATE t SET v = v + 1"),
        ("FLUSH TABLES t FOR EXPORT", "UPDATE t SET v = v + 1"),
        ("BACKUP STAGE START", "BACKUP STAGE START"),
        ("BACKUP LOCK t", "ALTER TABLE t COMMENT 'z'"),
    ] {
        let mut h = connect(&proxy, db).await;
        h.query_drop(take).await.unwrap();
        holds(&mut a, h.id(), "table_lock", take).await;
        drop(h);
        succeeds_soon(&mut root, free).await;
        if free.starts_with("BACKUP") {
            root.query_drop("BACKUP STAGE END").await.unwrap();
        }
        let mut next = connect(&proxy, db).await;
        next.query_drop("UPDATE t SET v = v + 1").await.unwrap();
        released(&mut a, next.id(), take).await;
        next.disconnect().await.unwrap();
    }
    root.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Without RELOAD the application account gets the server's own error and keeps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_account_is_refused_instance_locks_and_keeps_nothing() {
    fresh_db("t_priv_locks_app").await;
    let proxy = start(config(2)).await;
    let mut app = connect(&proxy, Some("t_priv_locks_app")).await;
    // (BACKUP LOCK needs no privilege: `locks.rs` tests it with this account.)
    for take in ["BACKUP STAGE START", "FLUSH TABLES WITH READ LOCK"] {
        let err = app.query_drop(take).await.unwrap_err();
        assert_eq!(code_of(&err), Some(1227), "{take}: {err}");
        assert!(
            slots_settle(&proxy, 0).await,
            "{take} refused keeps no slot"
        );
    }
    app.disconnect().await.unwrap();
    proxy.shutdown().await;
}
