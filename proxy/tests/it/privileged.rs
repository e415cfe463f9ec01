//! The small set of tests whose backend account is privileged (the server's own account,
//! which may set `pseudo_thread_id` and take instance-wide locks): what those privileges buy.
//! Everything else runs as the application account (`harness::APP_USER`).

use mysql_async::prelude::*;
use sluice::conn::identity::IdentityMode;

use crate::harness::*;

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

/// Instance-wide locks need RELOAD: with it, each keeps the session's slot until its own
/// release (BACKUP STAGE END, BACKUP UNLOCK, UNLOCK TABLES); without it the application
/// account gets the server's own error and keeps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_locks_are_released_by_their_own_statements() {
    fresh_db("t_priv_locks").await;
    let proxy = start(config_privileged(2)).await;
    let mut c = connect(&proxy, Some("t_priv_locks")).await;
    c.query_drop("CREATE TABLE t (id INT)").await.unwrap();
    for (take, release) in [
        ("BACKUP STAGE START", "BACKUP STAGE END"),
        ("BACKUP LOCK t_priv_locks.t", "BACKUP UNLOCK"),
        ("FLUSH TABLES WITH READ LOCK", "UNLOCK TABLES"),
    ] {
        c.query_drop(take).await.unwrap();
        assert!(slots_settle(&proxy, 1).await, "{take} keeps the slot");
        c.query_drop(release).await.unwrap();
        assert!(slots_settle(&proxy, 0).await, "{release} gives it back");
    }
    c.disconnect().await.unwrap();
    proxy.shutdown().await;

    let proxy = start(config(2)).await;
    let mut app = connect(&proxy, Some("t_priv_locks")).await;
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
